"""The claim registry's pages: the scorecard, results at a glance and the errata, as HTML for the book.

Each page is a function of the registry (:mod:`companion.claims`) and of this build's check results; the
headlines and the errata are data files beside ``claims.toml`` (``data/headlines.toml``, ``data/errata.toml``),
validated against the registry when they are read. The Sphinx extension (:mod:`companion.book_ext`) places
them with the directives ``claims-scorecard``, ``claims-headlines`` and ``claims-errata``.
"""

from __future__ import annotations

import math
import re
import tomllib
from html import escape
from pathlib import Path

from companion import claims, config

HEADLINES_FILE = config.committed_data_dir() / "headlines.toml"
ERRATA_FILE = config.committed_data_dir() / "errata.toml"
ERRATUM_KINDS = ("experiment", "theory")
HEADERS = {"book_run": "at full (book run)"}  # the scorecard's column titles where they are not the row's key


def _chapter_link(chapter: str) -> str:
    """The default URL of a chapter from a page in ``book/`` (the Sphinx extension passes its own)."""
    return chapter.split("/")[-1] + ".html"


def _tally(rows: list[dict]) -> str:
    """``3 holds, 1 finding against the paper``: the categories of ``rows`` that occur, in the scorecard's order."""
    return ", ".join(
        f"{sum(r['category'] == k for r in rows)} {k}"
        for k in claims.CATEGORIES
        if any(r["category"] == k for r in rows)
    )


def scorecard(profile: str | None = None, link=None, registry: dict[str, claims.Claim] | None = None) -> str:
    """The scorecard as HTML: counts per category, then one table per chapter.

    ``link(chapter_docname)`` gives the URL of a chapter (the Sphinx extension passes one).
    """
    book = claims.book_run()
    rows = claims.results(profile, registry, book=book)
    link = link or _chapter_link
    total = claims.counts(profile, registry)
    by_origin = {o: claims.counts(profile, registry, o) for o in claims.ORIGINS}
    parts = [
        '<table class="table scorecard-counts"><thead><tr><th>status</th><th>the sources\' claims</th>'
        "<th>our studies' claims</th><th>all</th></tr></thead><tbody>"
    ]
    parts += [
        f"<tr><td>{escape(k)}</td>"
        + "".join(f"<td>{by_origin[o][k]}</td>" for o in claims.ORIGINS)
        + f"<td>{v}</td></tr>"
        for k, v in total.items()
        if v or k != claims.FAIL
    ]
    parts.append(
        "<tr><td><b>total</b></td>"
        + "".join(f"<td><b>{sum(by_origin[o].values())}</b></td>" for o in claims.ORIGINS)
        + f"<td><b>{len(rows)}</b></td></tr></tbody></table>"
    )
    reg = claims.CLAIMS if registry is None else registry
    ours = [reg[r["claim"]] for r in rows if r["origin"] == "ours"]
    if ours:
        predicted = [c for c in ours if c.kind == "prediction"]
        parts.append(
            f"<p>Of our {len(ours)} claims, {len(predicted)} were registered as predictions before their results "
            f"were seen ({sum(c.refuted for c in predicted)} of them refuted), and {len(ours) - len(predicted)} "
            "post hoc (knowing the value, or with no record either way).</p>"
        )
    cols = ["claim", "source", "statement", "paper", "criterion", "ours", "status"]
    widths = {
        "claim": "14%",
        "source": "12%",
        "statement": "34%",
        "paper": "11%",
        "criterion": "9%",
        "ours": "7%",
        "status": "13%",
    }
    if any(r["recorded"] for r in rows):  # values of recorded paper-scale runs (companion.record)
        cols.append("recorded")
        widths.update(statement="24%", recorded="10%")
    if book:  # each row's status in the book executed at the full profile (scripts/book_run.py)
        cols.append("book_run")
        widths.update(statement="18%", book_run="10%")
        parts.append(f"<p>{escape(book_run_summary(book))}</p>")
    head = "".join(f'<th style="width:{widths[c]}">{HEADERS.get(c, c)}</th>' for c in cols)

    def cell(r, c):
        text = escape(str(r[c]))
        if c == "claim":
            return f'<td><code style="word-break:break-all">{text}</code></td>'
        if c == "statement" and r.get("history"):  # the row's registration notes and later changes, folded
            notes = "<br>".join(escape(p) for p in history_paragraphs(r["history"]))
            return (
                f'<td>{text}<details class="claim-history"><summary><small>history</small></summary>'
                f"<small>{notes}</small></details></td>"
            )
        if c == "ours" and r["note"]:  # e.g. the corpus or model the value comes from
            return f"<td>{text}<br><small>{escape(r['note'])}</small></td>"
        return f"<td>{text}</td>"

    chapters = list(dict.fromkeys(r["chapter"] for r in rows))
    for doc in chapters:
        mine = [r for r in rows if r["chapter"] == doc]
        sources = [r for r in mine if r["origin"] == "paper"]
        ours = [r for r in mine if r["origin"] == "ours"]
        summary = "; ".join(
            f"{label}: {_tally(group)}"
            for label, group in (("the source's claims", sources), ("ours", ours))
            if group
        )
        parts.append(
            f'<h3><a href="{escape(link(doc))}">{escape(doc.split("/")[-1])}</a></h3><p>{escape(summary)}</p>'
        )
        body = "".join("<tr>" + "".join(cell(r, c) for c in cols) + "</tr>" for r in mine)
        parts.append(  # each chapter's rows collapsed under its title and tally (a click shows them)
            f'<details class="scorecard-rows"><summary>the {len(mine)} rows</summary>'
            f'<table class="table scorecard" style="font-size:0.8em;table-layout:fixed;width:100%">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></details>"
        )
    return "".join(parts)


def book_run_summary(run: dict) -> str:
    """One sentence on a recorded book run (:func:`companion.claims.book_run`): chapters per outcome, devices,
    dates and commits, for the scorecard's column of that run.

    >>> ch = {"outcome": "passed", "device": "cuda (H100)", "date": "2026-12-03", "commit": "0123456789ab"}
    >>> book_run_summary({"profile": "full", "chapters": {"book/a": ch, "book/b": ch | {"outcome": "timed out"}}})
    'The column "at full (book run)": each row as the book executed at the full profile under nbval judged it (scripts/book_run.py): 2 chapters (1 passed, 1 timed out) on cuda (H100), 2026-12-03, commit 0123456789.'
    """
    chapters = run["chapters"].values()
    outcomes = ", ".join(
        f"{n} {o}" for o in claims.BOOK_RUN_OUTCOMES if (n := sum(e["outcome"] == o for e in chapters))
    )

    def each(key: str, width: int | None = None) -> str:
        return ", ".join(sorted({e[key][:width] for e in chapters}))

    return (
        f'The column "{HEADERS["book_run"]}": each row as the book executed at the {run["profile"]} profile '
        f"under nbval judged it (scripts/book_run.py): {len(chapters)} chapter{'s' * (len(chapters) != 1)} "
        f"({outcomes}) on {each('device')}, {each('date')}, commit {each('commit', 10)}."
    )


def _named_row(
    cid: str, named: str, registry: dict[str, claims.Claim], want: str, ok, seen=None
) -> claims.Claim:
    """The registry's row ``cid``, named by ``named`` (an entry of a data file beside claims.toml).

    Raises:
        ValueError: there is no such row, or ``ok(row)`` is false; the message says what the row must be
            (``want``) and, where ``seen(row)`` is given, what it is.
    """
    if cid not in registry:
        raise ValueError(f"{named}: no such claim row, so not {want}")
    row = registry[cid]
    if not ok(row):
        raise ValueError(f"{named}: not {want}" + (f"; {seen(row)}" if seen else ""))
    return row


def load_headlines(
    path: Path | str = HEADLINES_FILE, registry: dict[str, claims.Claim] | None = None
) -> dict:
    """``data/headlines.toml``: {source name: [claim id, ...]}, each source's headline claims in the book's order.

    Raises:
        ValueError: an id that is not a claim row, or a claim of ours (the headlines are the sources' claims).
    """
    reg = claims.CLAIMS if registry is None else registry
    with open(path, "rb") as f:
        sources = tomllib.load(f).get("source", [])
    out = {}
    for s in sources:
        for cid in s["claims"]:
            _named_row(
                cid,
                f"headline {cid!r} of {s['name']!r} in {path}",
                reg,
                "a source's claim (origin 'paper')",
                lambda c: c.origin == "paper",
                lambda c: f"this row has origin {c.origin!r}",
            )
        out[s["name"]] = list(s["claims"])
    return out


def headlines(
    profile: str | None = None,
    link=None,
    registry: dict[str, claims.Claim] | None = None,
    path: Path | str = HEADLINES_FILE,
) -> str:
    """Results at a glance, as HTML: per source, its headline claims with the paper's value (and our finding, where
    the paper is wrong), this build's value and status (profile named), the value of a recorded run (the paper's
    size) where there is one, and the chapter that holds the evidence."""
    link = link or _chapter_link
    reg = claims.CLAIMS if registry is None else registry
    by_id = {r["claim"]: r for r in claims.results(profile, registry)}
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "claim",
            "the paper",
            f"this build ({escape(config.get_profile(profile))})",
            "recorded runs",
            "evidence",
        )
    )
    parts = []
    for source, ids in load_headlines(path, registry).items():
        body = []
        for cid in ids:
            c, r = reg[cid], by_id[cid]
            chapter = c.chapter.split("/")[-1]
            body.append(
                f"<tr><td>{escape(c.statement)}<br><small><code>{escape(cid)}</code></small>"
                + (f"<br><small><b>Finding:</b> {escape(c.finding)}</small>" if c.finding else "")
                + "</td>"
                f"<td>{escape(c.paper)}</td><td>{escape(r['ours'])}<br><small>"
                # the finding is shown once, in the claim's cell
                f"{escape(r['category'] if c.finding else r['status'])}</small></td>"
                f"<td>{escape(r['recorded']) or '—'}</td>"
                f'<td><a href="{escape(link(c.chapter))}">{escape(chapter)}</a></td></tr>'
            )
        parts.append(
            f"<h3>{escape(source)}</h3>"
            f'<table class="table headlines" style="font-size:0.85em;width:100%"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>"
        )
    return "".join(parts)


def load_errata(
    path: Path | str = ERRATA_FILE, registry: dict[str, claims.Claim] | None = None
) -> dict[str, list[dict]]:
    """``data/errata.toml``: {paper: [entry, ...]}, each entry a finding row's ``claim``, ``title``, ``kind``
    ("experiment" or "theory"), ``quote`` (the paper's statement, verbatim from the paper's plain-text source
    named by its ``text``, math between ``$`` signs, ``…`` where words are left out), ``where`` (its section,
    equation, table or figure), ``chapter`` (default: the row's), ``anchor`` (a label in that chapter),
    ``also`` (other finding rows that state the same erratum, shown in the same entry; default none) and
    ``effect``, the size of the effect in words: a template filled with the row's value at the scale its
    finding belongs to (:func:`effect_values`: ``{value}``, ``{abs}``, and with ``paper_value``, the number the
    paper states, ``{gap}`` and ``{ratio}``).

    Raises:
        ValueError: an entry whose claim is not a finding row, named twice, of an unknown kind, without its
            quote or where, with an effect that cannot be filled, or an experiment listed after a theory entry of
            its paper.
    """
    reg = claims.CLAIMS if registry is None else registry
    with open(path, "rb") as f:
        papers = tomllib.load(f).get("paper", [])
    out, seen = {}, set()
    for paper in papers:
        entries = []
        for e in paper.get("erratum", []):
            cid = e["claim"]
            for one in [cid, *e.get("also", [])]:
                _named_row(
                    one, f"erratum {one!r} in {path}", reg, "a claim row with a finding", lambda c: c.finding
                )
                if one in seen:
                    raise ValueError(f"erratum {one!r} in {path}: listed twice")
                seen.add(one)
            if not (e.get("quote", "").strip() and e.get("where", "").strip()):
                raise ValueError(
                    f"erratum {cid!r} in {path}: the paper's statement needs its quote and where"
                )
            if "effect" in e:
                try:
                    e["effect"].format(**effect_values(1.0, e.get("paper_value")))
                except (KeyError, IndexError, ValueError) as err:
                    raise ValueError(
                        f"erratum {cid!r} in {path}: effect {e['effect']!r} cannot be filled ({err!r}); it may "
                        "name {value}, {abs}, and with a paper_value {gap} and {ratio}"
                    ) from None
            if e["kind"] not in ERRATUM_KINDS:
                raise ValueError(f"erratum {cid!r}: kind {e['kind']!r}; allowed {', '.join(ERRATUM_KINDS)}")
            if entries and entries[-1]["kind"] == "theory" and e["kind"] == "experiment":
                raise ValueError(
                    f"erratum {cid!r} of {paper['name']!r}: the experiments come before the theory"
                )
            entries.append({"also": [], "anchor": "", **e, "chapter": e.get("chapter", reg[cid].chapter)})
        out[paper["name"]] = entries
    return out


def effect_values(value: float, paper_value: float | None = None) -> dict:
    """What an erratum's ``effect`` template may name: the row's ``value``, its ``abs``, and, where the paper
    states a number (``paper_value``), the ``gap`` value - paper_value and the ``ratio`` value / paper_value.

    >>> effect_values(0.96, 0.98)["gap"], effect_values(-2.0)["abs"]
    (-0.020000000000000018, 2.0)
    """
    out = {"value": value, "abs": abs(value)}
    if paper_value is not None:
        out |= {"gap": value - paper_value, "ratio": value / paper_value if paper_value else math.inf}
    return out


def _effect(e: dict, c: claims.Claim, r: dict) -> str:
    """The size of an erratum's effect, at the scale its finding belongs to: this build's value where the build's
    profile is one of the finding's, else the recorded value; an entry without ``effect`` shows nothing."""
    if "effect" not in e:
        return ""
    value = r["finding_scale_value"]
    if value is None:
        return "<dt>size of the effect</dt><dd>not measured at that scale yet</dd>"
    text = e["effect"].format(**effect_values(value, e.get("paper_value")))
    return f"<dt>size of the effect</dt><dd>{quoted(text)} ({escape(r['finding_scale_label'])})</dd>"


def history_paragraphs(text: str) -> list[str]:
    r"""A row's ``history`` as paragraphs: the file's wrapped lines joined, a new paragraph at a blank line and at
    each dated entry (a line that starts with a date).

    >>> history_paragraphs("Registered 2026-11-22 before the run:\nthe bar is 0.5.\n2026-11-23: measured 0.4.")
    ['Registered 2026-11-22 before the run: the bar is 0.5.', '2026-11-23: measured 0.4.']
    """
    paragraphs: list[list[str]] = [[]]
    for line in text.splitlines():
        if not line.strip() or re.match(r"\d{4}-\d{2}-\d{2}", line):
            paragraphs.append([])
        if line.strip():
            paragraphs[-1].append(line.strip())
    return [" ".join(p) for p in paragraphs if p]


def quoted(text: str) -> str:
    r"""A quote as HTML: escaped, its ``$...$`` (or ``$$...$$``) spans as inline math that MathJax renders.

    >>> print(quoted(r"the margin $\eta/N$ & more"))
    the margin <span class="math notranslate nohighlight">\(\eta/N\)</span> &amp; more
    """
    parts = re.split(r"\$\$?(.+?)\$?\$", text)
    return "".join(
        escape(p) if i % 2 == 0 else f'<span class="math notranslate nohighlight">\\({escape(p)}\\)</span>'
        for i, p in enumerate(parts)
    )


def errata(
    profile: str | None = None,
    link=None,
    registry: dict[str, claims.Claim] | None = None,
    path: Path | str = ERRATA_FILE,
) -> str:
    """The errata page as HTML: per paper (``data/errata.toml``), the experiments' disagreements and then the
    theory's, each with its title, the paper's value, what we measure in this build, where the finding was
    established (and its recorded value) when that is another scale, the corrected statement and a link to the
    section that holds the evidence; then every finding row without an entry, and the paper-scale claims that do
    not hold at this build's size."""
    link = link or _chapter_link
    reg = claims.CLAIMS if registry is None else registry
    by_id = {r["claim"]: r for r in claims.results(profile, registry)}
    book = load_errata(path, registry) if Path(path).is_file() else {}
    listed = {c for entries in book.values() for e in entries for c in [e["claim"], *e["also"]]}
    rest = [
        {"claim": c.id, "title": c.id, "kind": "", "chapter": c.chapter, "anchor": "", "also": []}
        for c in reg.values()
        if c.finding and c.id not in listed
    ]
    if rest:
        book = {**book, "Findings without an erratum entry yet": rest}

    def entry(e: dict) -> str:
        c, r = reg[e["claim"]], by_id[e["claim"]]
        href = link(e["chapter"]) + (f"#{e['anchor']}" if e["anchor"] else "")
        where = ""
        if not r["finding_scale_here"]:
            where = (
                f"<dt>where the finding was established</dt><dd>the {' and '.join(sorted(c.finding_profiles()))} "
                f"profile: {escape(r['recorded']) or 'no recorded run yet'}</dd>"
            )
        return (
            f'<div class="erratum" id="erratum-{escape(c.id)}"><h4>{escape(e["title"])}</h4>'
            f"<p><small><code>{escape(c.id)}</code>; {escape(c.source)}</small></p><dl>"
            + (
                f"<dt>the paper says</dt><dd>“{quoted(e['quote'])}” ({escape(e['where'])})</dd>"
                if "quote" in e
                else ""
            )
            + f"<dt>the paper's value</dt><dd>{escape(c.reference)}</dd>"
            f"<dt>what we measure</dt><dd>{escape(c.statement)}: {escape(r['ours'])} in this build "
            f"({escape(r['profile'])} profile; criterion {escape(r['criterion'])}; {escape(r['category'])})</dd>"
            + where
            + _effect(e, c, r)
            + "".join(
                f"<dt>the same erratum, also checked by</dt><dd><code>{escape(o)}</code>: "
                f"{escape(reg[o].statement)}: {escape(by_id[o]['ours'])} ({escape(by_id[o]['category'])})</dd>"
                for o in e["also"]
            )
            + f"<dt>corrected statement</dt><dd>{escape(c.finding)}</dd>"
            f'<dt>evidence</dt><dd><a href="{escape(href)}">{escape(e["chapter"].split("/")[-1])}'
            + (f", section {escape(e['anchor'])}" if e["anchor"] else "")
            + "</a></dd></dl></div>"
        )

    parts = []
    for paper, entries in book.items():
        if not entries:
            continue
        parts.append(f"<h3>{escape(paper)}</h3>")
        for kind, label in (
            ("experiment", "Experiments"),
            ("theory", "Theory: derivations and constants"),
            ("", ""),
        ):
            mine = [e for e in entries if e["kind"] == kind]
            if mine and label:
                parts.append(f"<p><b>{label}</b></p>")
            parts += [entry(e) for e in mine]
    not_here = [
        r for r in by_id.values() if reg[r["claim"]].scale == "full" and r["category"] == claims.NOT_HERE
    ]
    if not_here:
        parts.append(
            "<h3>Paper-scale claims that do not hold at this build's size</h3><p>Asserted only in the full "
            "profile (the paper's size); shown here as observed, not as findings:</p><ul>"
            + "".join(
                f"<li><code>{escape(r['claim'])}</code> ({escape(reg[r['claim']].source)}): {escape(r['ours'])}, "
                f'criterion {escape(r["criterion"])}; <a href="{escape(link(r["chapter"]))}">'
                f"{escape(r['chapter'].split('/')[-1])}</a></li>"
                for r in not_here
            )
            + "</ul>"
        )
    return "".join(parts) or "<p>No finding recorded.</p>"
