"""Issue 54's flip list: the claim rows as two builds judge them (the same code under the numpy generators and
under the counter-based samplers), from their cache folders (:func:`flips`) or from a recording made under each
(:func:`recorded_flips`); ``scripts/flip_list.py`` writes what these give to :data:`FLIP_LIST`, and
:func:`flip_list` and :func:`sweep_table` show it as Markdown (book/status, book/allocation). Apart from
:mod:`companion.claims`, which judges one build, and :mod:`companion.claim_pages`, the registry's pages.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from companion import claims, config, statements

NEAR_BAR = 0.1  # issue 54: the rows within 10% of their bar get two more seeds (Criterion.near)


def recorded_flips(
    pairs, profile: str = "quick", registry: dict[str, claims.Claim] | None = None
) -> list[dict]:
    """The rows that recordings check, as a recording made under one sampler and the same recording made again
    under the other judge them (issue 54: a chapter reads a recording, so a build under another sampler does not
    change such a row until the recording is made again). ``pairs``: (file name, the claims the first stores, the
    claims the second stores), each {claim id: value}. Each row: the claim, its chapter, the file, per recording its
    category (as the chapter's check would judge the value in ``profile``) and value, ``changed`` and ``moved``
    as in :func:`flips`.

    Raises:
        ValueError: a claim the first recording stores and the second does not (not the same recording).
    """
    registry = claims.CLAIMS if registry is None else registry
    out = []
    for name, before, after in pairs:
        missing = sorted(set(before) - set(after))
        if missing:
            raise ValueError(f"{name}: the recording made again does not store {missing}")
        for cid in before:
            c = claims.lookup(cid, registry)
            row = {"claim": cid, "chapter": c.chapter, "recording": name}
            row |= {
                k: claims.judged(c, float(v[cid]), profile) for k, v in (("before", before), ("after", after))
            }
            out.append(_compared(row))
    return out


def _compared(row: dict) -> dict:
    """A flip-list row with ``changed`` (the two sides' categories differ) and ``moved`` (both sides observed it
    and their values differ; NaN equals NaN)."""
    a, b = row["before"]["observed"], row["after"]["observed"]
    row["changed"] = row["before"]["category"] != row["after"]["category"]
    row["moved"] = a is not None and b is not None and a != b and not (math.isnan(a) and math.isnan(b))
    return row


def flips(
    before: Path,
    after: Path,
    chapters,
    profile: str = "quick",
    registry: dict[str, claims.Claim] | None = None,
    sweeps: dict[str, Path] | None = None,
    swept=(),
) -> list[dict]:
    """The rows of ``chapters`` (docnames) as two builds judged them: the builds whose cache folders are ``before``
    and ``after`` (the same rows under two samplers, issue 54's flip list). Each: the claim, its chapter, and per
    build its category and observed value (None where the build did not reach it); ``changed`` where the
    categories differ, ``moved`` where both builds observed the row and their values differ (NaN equals NaN).
    ``near_bar``: either build observed a value within :data:`NEAR_BAR` of the row's bar
    (:meth:`~companion.criterion.Criterion.near`). ``sweeps`` (label -> cache folder, e.g. ``"counter, seed 1"``):
    builds of the chapters ``swept`` under other seeds (``$COMPANION_SEED``); each row of those chapters gets
    ``"sweep"``, its category and value in each (None where not reached).

    Raises:
        ValueError: a chapter with no registered row.
    """
    registry = claims.CLAIMS if registry is None else registry
    chapters = list(chapters)
    known = {c.chapter for c in registry.values()}
    for ch in chapters:
        if ch not in known:
            raise ValueError(f"chapter {ch!r} has no claim row: chapters with rows are {sorted(known)}")
    swept = list(swept)
    for ch in swept:
        if ch not in chapters:
            raise ValueError(f"swept chapter {ch!r} is not among the chapters compared: {chapters}")
    if swept and not sweeps:
        raise ValueError(f"swept chapters {swept} need the sweep builds' cache folders")
    caches = {"before": Path(before), "after": Path(after), **{k: Path(v) for k, v in (sweeps or {}).items()}}
    sides = {
        name: {r["claim"]: r for r in claims.results(profile, registry, cache)}
        for name, cache in caches.items()
    }

    def side(c: claims.Claim, name: str) -> dict:
        reached = claims.record_path(c.id, profile, caches[name]).is_file()
        r = sides[name][c.id]
        return {"category": r["category"] if reached else None, "observed": r["observed"]}

    out = []
    for c in registry.values():
        if c.chapter not in chapters:
            continue
        row = _compared(
            {"claim": c.id, "chapter": c.chapter, "before": side(c, "before"), "after": side(c, "after")}
        )
        crit = c.criterion(profile)
        row["near_bar"] = any(
            s["category"] is not None and s["observed"] is not None and crit.near(s["observed"], NEAR_BAR)
            for s in (row["before"], row["after"])
        )
        if c.chapter in swept:
            row["sweep"] = {name: side(c, name) for name in sweeps}
        out.append(row)
    return out


FLIP_LIST = config.committed_data_dir() / "flip_list.json"


def flip_list(path: Path = FLIP_LIST, kept: frozenset[str] = frozenset()) -> str:
    """Issue 54's flip list (``scripts/flip_list.py`` writes it) as Markdown: which builds and chapters were
    compared, how many rows, and each row whose category differs under the counter-based samplers, with both
    values; "not reached" where a build's run stopped before a row's check; which chapters were compared again
    with new builds after their runs changed (``scripts/flip_list.py --again``). ``kept``: the claims whose
    chapter a build under the counter sampler reads from the numpy generators' recordings (a named exception,
    :func:`companion.record_reads.unread_again`): their statements are not stale under it (:func:`stated_rows`).

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
    either sampler by a named exception, :func:`companion.record_reads.unread_again`).

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


def _as_made(label: str) -> str:
    """A recording's label as the flip list stored it, without the book's sampler of that day: the recordings were
    made again ahead of the switch, when the book's was numpy, and the page is built under the counter sampler.

    >>> _as_made("quick profile, 2026-12-03, commit b68cbf4, batches of the counter sampler (the book's: numpy)")
    'quick profile, 2026-12-03, commit b68cbf4, batches of the counter sampler'
    """
    return re.sub(r" \(the book's: \w+\)$", "", label)


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
    files = ", ".join(f"`{m['file']}` ({_as_made(m['label'])})" for m in again["made"])
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
