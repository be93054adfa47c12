"""The claim registry's pages: the scorecard, results at a glance and the errata, as HTML for the book.

Each page is a function of the registry (:mod:`companion.claims`) and of this build's check results; the
headlines and the errata are data files beside ``claims.toml`` (``data/headlines.toml``, ``data/errata.toml``),
validated against the registry when they are read. The Sphinx extension (:mod:`companion.book_ext`) places
them with the directives ``claims-scorecard``, ``claims-headlines`` and ``claims-errata``.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from html import escape
from pathlib import Path

from companion import claims, config, statements

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


FLIP_LIST = config.committed_data_dir() / "flip_list.json"


def flip_list(path: Path = FLIP_LIST, kept: frozenset[str] = frozenset()) -> str:
    """Issue 54's flip list (``scripts/flip_list.py`` writes it) as Markdown: which builds and chapters were
    compared, how many rows, and each row whose category differs under the counter-based samplers, with both
    values; "not reached" where a build's run stopped before a row's check; which chapters were compared again
    with new builds after their runs changed (``scripts/flip_list.py --again``). ``kept``: the claims whose
    chapter a build under the counter sampler reads from the numpy generators' recordings (a named exception,
    :func:`companion.record.unread_again`): their statements are not stale under it (:func:`stated_rows`).

    Raises:
        KeyError: the file names a claim that is not registered.
    """
    data = json.loads(Path(path).read_text())
    unknown = [r["claim"] for r in data["rows"] if r["claim"] not in claims.CLAIMS]
    if unknown:
        raise KeyError(f"unknown claims {unknown[:5]} in {path}: the flip list names registered rows only")
    rows, changed = data["rows"], [r for r in data["rows"] if r["changed"]]
    unreached = [r for r in rows if None in (r["before"]["category"], r["after"]["category"])]
    flipped = [r for r in changed if r not in unreached]

    chapters = ", ".join(_doc(c) for c in data["chapters"])
    head = (
        f"Compared on {data['date']}, {data['profile']} profile: {data['before']['build']} against "
        f"{data['after']['build']}, the rows of {chapters}: {len(rows)} rows, of which "
        f"{sum(r['moved'] for r in rows)} take another value (the others are read from recordings, or from runs "
        f"that draw no training batch), {len(flipped)} change{'s' if len(flipped) == 1 else ''} category and "
        f"{len(unreached)} {'was' if len(unreached) == 1 else 'were'} not reached by one of the builds."
    )
    whys = [f"Not reached in {_doc(ch)}: {why}" for ch, why in data.get("not_reached", {}).items()]
    whys += [
        f"Compared again on {a['date']}: {_doc(ch)}, after {a['why']}. Its rows"
        + (" (and their seed sweep)" if ch in data.get("swept", ()) else "")
        + f" come from {a['before']} against {a['after']}."
        for ch, a in data.get("again", {}).items()
    ]
    sweep = _seed_sweep(data) + _recordings_again(data) + _stated(data, kept)
    if not changed:
        return "\n\n".join([head, *whys, *sweep])
    lines = [
        "",
        "| claim | chapter | numpy sampler | counter sampler | the row today (numpy; counter) |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| `{r['claim']}` | {_doc(r['chapter'])} | {_cell(r['before'])} | {_cell(r['after'])} | "
        f"{today(r, data['profile'], kept)} |"
        for r in changed
    ]
    return "\n\n".join([head + "\n" + "\n".join(lines), *whys, *sweep])


# A flip-list row's result under each sampler: the numpy generators' build ("before"), the counter sampler's ("after").
SIDES = {"numpy": "before", "counter": "after"}


def side(sampler: str, claim: str, kept: frozenset[str] = frozenset()) -> str:
    """The flip-list side (a value of :data:`SIDES`) that gives ``claim``'s row in a build under ``sampler``: its
    sampler's, or the numpy generators' for a claim of ``kept`` (its chapter reads the numpy recordings under
    either sampler by a named exception, :func:`companion.record.unread_again`).

    >>> side("counter", "x.a"), side("counter", "x.a", frozenset({"x.a"})), side("numpy", "x.a")
    ('after', 'before', 'before')
    """
    return SIDES["numpy" if claim in kept else sampler]


def by_claim(data: dict) -> dict[str, dict]:
    """The flip list's rows by claim, one each: a recording's row (made again under the counter sampler) where
    there is one, else the chapters' row (a chapter reads the recording, so its own row cannot flip)."""
    return {r["claim"]: r for r in data["rows"]} | {
        r["claim"]: r for r in data.get("recordings", {}).get("rows", [])
    }


def stated_rows(data: dict, kept: frozenset[str] = frozenset()) -> list[dict]:
    """The rows of :func:`by_claim` whose statement gives a value, with it (``stated``,
    :func:`companion.statements.stated_value`: the value its build observed, written into the prose) and ``stale``, the
    samplers (keys of :data:`SIDES`) whose value is another (:func:`companion.claims.states_otherwise`); a claim
    of ``kept`` is read from the numpy generators' recording under either sampler, so its numpy value is its
    value under both."""
    out = []
    for cid, r in sorted(by_claim(data).items()):
        c = claims.CLAIMS[cid]
        stated = statements.stated_value(c.statement)
        if stated is not None:
            stale = [s for s in SIDES if claims.states_otherwise(c, r[side(s, cid, kept)]["observed"])]
            out.append({**r, "stated": stated, "stale": stale})
    return out


def _stated(data: dict, kept: frozenset[str] = frozenset()) -> list[str]:
    """The flip list's statements that give a value (:func:`stated_rows`) as Markdown: how many, how many the other
    sampler's value contradicts, and each one that the build's own sampler's value contradicts, with both values
    (none once the statements are written for the build in force: `tests/test_claims.py`). Empty without such
    statements."""
    rows = stated_rows(data, kept)
    if not rows:
        return []
    build = config.sampler()
    other = next(s for s in SIDES if s != build)
    stale = [r for r in rows if build in r["stale"]]
    text = (
        f"**Statements that give their value.** {len(rows)} of these rows' statements end with the value their "
        'build observed ("refuted: 4 of 7 walk"), written when the row was settled; the bar that judges the row is '
        f"its criterion, not this prose. They are written for this build's sampler ({build}); under the {other} "
        f"sampler {sum(other in r['stale'] for r in rows)} of them would give another value (where the outcome "
        f'changed, the statement keeps it after "{statements.REPLICATION.strip("; ").rstrip(": ")}"). Under the {build} '
        f"sampler, {len(stale)} of them give another value" + (":" if stale else ".")
    )
    if not stale:
        return [text]
    lines = ["| claim | the statement's value | numpy sampler | counter sampler |", "|---|---|---|---|"]
    lines += [
        f"| `{r['claim']}` | {_value(r['stated'])} | {_cell(r['before'])} | {_cell(r['after'])} |"
        for r in stale
    ]
    after = (
        "Each is to be rewritten with the value of the build in force (`tests/test_claims.py` fails on a "
        "statement that gives another value than the recordings it is read from)."
    )
    return [text, "\n".join(lines), after]


def _value(stated: tuple[float, int, int | None]) -> str:
    """A stated value (:func:`companion.statements.stated_value`) as the statement writes it."""
    value, decimals, of = stated
    return f"{value:.{decimals}f}" + (f" of {of}" if of else "")


def _recordings_again(data: dict) -> list[str]:
    """The flip list's recordings made again under the counter sampler (``scripts/flip_list.py
    --add-recordings``) as Markdown: which, how many rows they check, and each row whose category changes
    against the numpy generators' recording of the same name. Empty without them."""
    again = data.get("recordings")
    if not again:
        return []
    rows = again["rows"]
    changed = [r for r in rows if r["changed"]]
    otherwise = [r for r in changed if "trained" in r]
    mixed = (
        f" ({len(otherwise)} of them from recordings whose runs trained otherwise under the two samplers, alone "
        "or packed as replicas, on another number of threads, as the table says: either changes a run's "
        "rounding, and a long k-hop run's outcome can turn on it "
        "(`benchmarks/results/CPU_AMD_EPYC__1_threads-khop-pack.json`), so their change is the sampler's and "
        "the rounding's together)"
        if otherwise
        else ""
    )
    files = ", ".join(f"`{m['file']}` ({m['label']})" for m in again["made"])
    text = (
        "**Recordings made again.** A chapter that reads a recording gives the same value under either sampler "
        "until the recording is made again, so the builds above cannot flip its rows. These recordings were made "
        f"again under the counter sampler ahead of the switch (`{again['folder']}`, read only by builds under "
        "that sampler, in place of their namesakes): "
        f"{files}. Of the {len(rows)} rows they check, {len(changed)} "
        f"{'changes' if len(changed) == 1 else 'change'} category{mixed}" + (":" if changed else ".")
    )
    rounding = {(r["claim"], r["recording"]): r for r in data.get("rounding", {}).get("rows", [])}
    if not changed:
        return [text, *_short_runs(again), *_rounding_alone(data)]
    lines = ["| claim | chapter | recording | numpy sampler | counter sampler |", "|---|---|---|---|---|"]
    lines += [
        f"| `{r['claim']}` | {_doc(r['chapter'])} | `{r['recording']}`{_trained(r)} | {_cell(r['before'])} | "
        f"{_cell(r['after'])}{_with_rounding(rounding.get((r['claim'], r['recording'])))} |"
        for r in changed
    ]
    return [text, "\n".join(lines), *_short_runs(again), *_rounding_alone(data)]


def _short_runs(again: dict) -> list[str]:
    """The recordings made again whose curriculum runs that end before their last stage differ under the two
    samplers (``short_of_last_stage``, :func:`companion.experiments.khop_curves.short_of_last_stage`), as Markdown: a
    study of the last stage is judged, under one of them, on runs that never trained on it. Empty without them."""
    short = [m for m in again["made"] if "short_of_last_stage" in m]
    if not short:
        return []
    rows = [r for r in again["rows"] if r["recording"] in {m["file"] for m in short}]
    held = sum(r["before"]["category"] == r["after"]["category"] for r in rows)
    items = "; ".join(
        f"`{m['file']}` (numpy: {len(m['short_of_last_stage']['numpy'])}, counter: "
        f"{len(m['short_of_last_stage']['counter'])} of its runs"
        + "".join(
            f"; {side}: {', '.join(repr(n) for n in names)}"
            for side, names in m["short_of_last_stage"].items()
            if names
        )
        + ")"
        for m in short
    )
    return [
        "**Runs short of their last stage.** In these recordings made again, the curriculum runs that end before "
        f"their last stage (k hops) differ under the two samplers: {items}. Their {len(rows)} rows ({held} in the "
        "same category under both) include rows about the last stage, which under the sampler with more such "
        "runs are judged on runs that never trained on it: the same category there is not the same finding. "
        "Which run stalls where turns on the rounding (`benchmarks/results/CPU_AMD_EPYC__1_threads-khop-pack.json`), "
        "so the k-hop stall studies need their runs chosen by outcome, by a rule registered before the runs, "
        "before the switch."
    ]


def _with_rounding(row: dict | None) -> str:
    """What the numpy generators gave a changed row with the counter recording's arithmetic ("" where the flip
    list's ``rounding`` entry has no such recording).

    >>> _with_rounding({"after": {"category": "holds", "observed": 0.5}})
    '; numpy generators, same rounding: holds (0.5)'
    """
    return "" if row is None else f"; numpy generators, same rounding: {_cell(row['after'])}"


def _rounding_alone(data: dict) -> list[str]:
    """The flip list's recordings made again under the numpy generators with their counter namesakes' arithmetic
    (``scripts/flip_list.py --add-rounding``) as Markdown: which, and the rows whose category changes with the
    rounding alone. Empty without them."""
    again = data.get("rounding")
    if not again:
        return []
    rows = again["rows"]
    changed = [r for r in rows if r["changed"]]
    files = ", ".join(
        f"`{m['file']}` ({m['trained']['numpy']} -> {m['trained']['again']})" for m in again["made"]
    )
    text = (
        "**The rounding alone.** A run's rounding changes with the number of CPU threads and with packing, so "
        "a recording made again on another arithmetic changes for that reason too. These recordings were made "
        "again under the numpy generators, each with the arithmetic of its counter namesake "
        f"(`{again['folder']}`): {files}. Of the {len(rows)} rows they check, {len(changed)} "
        f"{'changes' if len(changed) == 1 else 'change'} category with the rounding alone"
        + (":" if changed else ".")
    )
    if not changed:
        return [text]
    lines = [
        "| claim | chapter | recording | numpy generators | same, counter's rounding |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| `{r['claim']}` | {_doc(r['chapter'])} | `{r['recording']}` | {_cell(r['before'])} | "
        f"{_cell(r['after'])} |"
        for r in changed
    ]
    return [text, "\n".join(lines)]


def _trained(row: dict) -> str:
    """How a flip-list row's recording trained under each sampler, where they differ ("" where they agree).

    >>> _trained({"trained": {"numpy": "alone, 2 threads", "counter": "packs of 4, 1 thread"}})
    ' (numpy: alone, 2 threads; counter: packs of 4, 1 thread)'
    """
    p = row.get("trained")
    return f" (numpy: {p['numpy']}; counter: {p['counter']})" if p else ""


def today(row: dict, profile: str = "quick", kept: frozenset[str] = frozenset()) -> str:
    """The categories the claim row in force gives a flip-list row's two values, the numpy generators' build's and
    the counter sampler's ("numpy; counter"): the list keeps the categories its rows gave when it was made, and a
    row whose outcome changed at issue 54's switch was rewritten for the counter build. A claim of ``kept`` reads
    the numpy value under either sampler (:func:`side`); "not reached" where the build stopped before the check."""
    c = claims.CLAIMS[row["claim"]]
    cells = []
    for sampler in SIDES:
        observed = row[side(sampler, c.id, kept)]
        if observed["category"] is None or observed["observed"] is None:
            cells.append("not reached")
        else:
            cells.append(claims.judged(c, float(observed["observed"]), profile)["category"])
    return "; ".join(cells)


def _cell(side: dict) -> str:
    """One build's result of a flip-list row: its category and value ("not reached" where the build stopped
    before the row's check)."""
    if side["category"] is None:
        return "not reached"
    value = "" if side["observed"] is None else f" ({side['observed']:.4g})"
    return side["category"] + value


def _doc(chapter: str) -> str:
    """A MyST link to ``chapter`` from a page in book/."""
    return f"{{doc}}`{chapter.split('/')[-1]}`"


def _by_sampler(data: dict) -> dict[str, list[tuple[int, str]]]:
    """{sampler: [(seed, key of a row's result)]}: seed 0 is the flip list's two builds ("before", "after"), the
    other seeds the sweep's labels ("numpy, seed 1")."""
    out = {s: [(0, side)] for s, side in SIDES.items()}
    for label in data.get("sweeps", []):
        sampler, _, seed = label.partition(", seed ")
        out[sampler].append((int(seed), label))
    return out


def _sweep_table(rows: list[dict], by_sampler: dict) -> str:
    """The swept rows as a Markdown table: each sampler's results over its seeds."""
    seeds = {s: ", ".join(str(n) for n, _ in v) for s, v in by_sampler.items()}

    def sides(r: dict, sampler: str) -> str:
        return "; ".join(
            _cell(r[key] if key in ("before", "after") else r["sweep"][key]) for _, key in by_sampler[sampler]
        )

    lines = [
        f"| claim | chapter | numpy sampler, seeds {seeds['numpy']} | counter sampler, seeds {seeds['counter']} |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| `{r['claim']}` | {_doc(r['chapter'])} | {sides(r, 'numpy')} | {sides(r, 'counter')} |"
        for r in rows
    ]
    return "\n".join(lines)


def sweep_table(claim_ids: list[str], path: Path = FLIP_LIST) -> str:
    """The seed sweep's results of ``claim_ids`` (issue 54's flip list, ``data/flip_list.json``) as a Markdown
    table: each sampler's category and value at seed 0 and at the sweep's seeds.

    Raises:
        ValueError: a claim the sweep did not run (not in the list, or in a chapter the sweep did not run).
    """
    data = json.loads(Path(path).read_text())
    swept = {r["claim"]: r for r in data["rows"] if "sweep" in r}
    missing = [c for c in claim_ids if c not in swept]
    if missing:
        raise ValueError(f"claims {missing} were not swept: allowed the rows of {sorted(set(data['swept']))}")
    return _sweep_table([swept[c] for c in claim_ids], _by_sampler(data))


def _seed_sweep(data: dict) -> list[str]:
    """The flip list's seed sweep as Markdown paragraphs: the rows of the swept chapters that lie near their bar
    (``near_bar``) or change category between the samplers, each sampler's categories and values at seed 0 (the
    two builds compared) and at the sweep's seeds, and how many of them take more than one category over the
    seeds. Empty without a sweep."""
    if not data.get("sweeps"):
        return []
    by_sampler = _by_sampler(data)
    flipped = [
        r
        for r in data["rows"]
        if r["changed"] and None not in (r["before"]["category"], r["after"]["category"])
    ]
    rows = [r for r in data["rows"] if (r["near_bar"] or r in flipped) and "sweep" in r]

    def sides(r: dict, sampler: str) -> list[dict]:
        return [r[key] if key in ("before", "after") else r["sweep"][key] for _, key in by_sampler[sampler]]

    def unsettled(r: dict, sampler: str) -> bool:  # more than one category over the seeds reached
        return len({s["category"] for s in sides(r, sampler) if s["category"] is not None}) > 1

    seeds = {s: ", ".join(str(n) for n, _ in v) for s, v in by_sampler.items()}
    text = (
        f"**Seed sweep.** The chapters {', '.join(_doc(c) for c in data['swept'])} ran again under seeds "
        f"{seeds['numpy']} (numpy sampler) and {seeds['counter']} (counter sampler) (`COMPANION_SEED`). Of their "
        f"rows, {len(rows)} lie within 10% of their bar under one of the two samplers at seed 0 or change category "
        f"between them ({sum(r in flipped for r in rows)}); over the seeds, "
        f"{sum(unsettled(r, 'numpy') for r in rows)} of them take more than one category under the numpy sampler "
        f"and {sum(unsettled(r, 'counter') for r in rows)} under the counter sampler. A row read from a "
        "recording, or from a study of named seeds, keeps its value under every seed."
    )
    others = [r for r in data["rows"] if r.get("near_bar") and "sweep" not in r]
    if others:
        chapters = ", ".join(_doc(c) for c in dict.fromkeys(r["chapter"] for r in others))
        text += (
            f" {len(others)} more {'row' if len(others) == 1 else 'rows'} near their bar "
            f"{'belongs' if len(others) == 1 else 'belong'} to chapters the sweep did not run ({chapters}): "
            "their values come from recordings, from studies of named seeds or from computations that draw no "
            "training batch, which another `COMPANION_SEED` does not change; the recordings get their seeds "
            "when they are made again (issue 54 item 4)."
        )
    return [text, _sweep_table(rows, by_sampler)]
