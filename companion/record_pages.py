"""What the book shows of its recordings: the tables of recorded claim values set against the papers' bars
(:func:`paper_rows`, :func:`full_only_rows`), the listing of the recorded files a build reads (:func:`listing`, on
book/status) and a chapter's recorded runs beside its live one (:func:`show`).
"""

from __future__ import annotations

from companion import record
from companion.record_reads import in_force, read_under
from companion.recorded import RECORDED_DIR, Recorded, batches_cell, command, runs, side_by_side

FULL_ONLY_HEADER = [
    "claim",
    "the paper",
    "recorded run",
    "observed",
    "full-profile criterion",
    "meets it",
    "finding (corrected statement)",
]
PAPER_HEADER = [
    "claim",
    "the paper",
    "recorded run",
    "observed",
    "full-profile criterion",
    "holds",
    "finding (corrected statement)",
]


def _judged(cid: str, value, registry) -> tuple:
    """A recorded claim value judged by the claim's full-profile criterion: (claim, criterion, holds)."""
    claim = registry[cid]
    crit = claim.criterion("full")
    return claim, crit, crit.holds(value, claim.infinite_ok)


def _run_label(r: "Recorded") -> str:
    sets = ", ".join(f"{k}={v}" for k, v in r.overrides.items())
    return f"{r.profile} profile" + (f" ({sets})" if sets else "")


def full_only_rows(names, recs: list[Recorded] | None = None, registry=None) -> list[list]:
    """One row per full-scale-only claim (scale ``full``) measured by a recorded run of experiment ``names``
    that is not the paper's configuration: the claim, the paper's value, the run's profile and settings, the
    recorded value, the full profile's criterion, whether the value meets it and the row's finding (columns
    :data:`FULL_ONLY_HEADER`). The criterion is the paper's bar, or, where a recording of the paper's configuration
    refuted the claim, the finding's. Such a run is set against it, never held to it: its chapter asserts what
    holds at its size.

    Raises:
        ValueError: a name that is not a recordable experiment.
    """
    from companion import claims

    for name in names:
        record.experiment(name)
    registry = claims.CLAIMS if registry is None else registry
    recs = runs() if recs is None else recs
    rows = []
    for r in recs:
        if r.experiment not in names or r.paper_config:
            continue
        for cid, value in r.claims.items():
            claim, crit, ok = _judged(cid, value, registry)
            if claim.scale == "full":
                rows.append(
                    [
                        f"`{cid}`",
                        claim.reference,
                        _run_label(r),
                        value,
                        str(crit),
                        "yes" if ok else "no",
                        claim.finding or "",
                    ]
                )
    return rows


def paper_rows(recs: list[Recorded] | None = None, registry=None) -> list[list]:
    """One row per claim of every recorded full-profile run of the paper's configuration: the claim, the
    paper's value, the run (experiment, device, date), the recorded value, the full profile's criterion,
    whether it holds (what :func:`check` asserts) and the row's finding, where the claim row records one
    (columns :data:`PAPER_HEADER`)."""
    from companion import claims

    registry = claims.CLAIMS if registry is None else registry
    recs = runs() if recs is None else recs
    rows = []
    for r in recs:
        if not r.paper_config:
            continue
        for cid, value in r.claims.items():
            claim, crit, ok = _judged(cid, value, registry)
            rows.append(
                [
                    f"`{cid}`",
                    claim.reference,
                    f"{r.experiment} ({r.device}, {r.date})",
                    value,
                    str(crit),
                    "yes" if ok else "no",
                    claim.finding or "",
                ]
            )
    return rows


def listing(recs: list[Recorded] | None = None, download_from: str | None = None) -> str:
    """A Markdown table of recorded files: what made each one, what drew its training batches
    (:func:`companion.recorded.batches_cell`: which recordings are kept as evidence until made again under
    another sampler), its training time (``train_seconds``: training
    and evaluation of runs computed in that call), the whole call's (``wall_seconds``: runs and summary, probes
    included; files recorded before it was kept have none) and the command that regenerates it.

    ``download_from``: the recordings' folder as a page of the book reaches it (``"../data/recorded"`` from
    ``book/``); each file name is then a MyST ``download`` link, so the built book publishes the file.

    >>> listing([], download_from="../data/recorded").splitlines()[0].split(" | ")[:2]
    ['| file', 'made with']
    """
    from companion.report import markdown_table

    def name(r: Recorded) -> str:
        if download_from is None:
            return f"`{r.path.name}`"
        inside = r.path.is_relative_to(RECORDED_DIR)  # a sampler's own folder included
        where = r.path.relative_to(RECORDED_DIR).as_posix() if inside else r.path.name
        return f"{{download}}`{r.path.name} <{download_from.rstrip('/')}/{where}>`"

    if recs is None:  # what a build reads: its sampler's files, and those it reads by a named exception
        listed = {r.path: r for r in runs() + in_force()}
        recs = [listed[p] for p in sorted(listed, key=lambda p: (p.name, p.parent.name))]
    rows = [
        [
            name(r),
            r.label(),
            batches_cell(r, read_under(r)),
            (r.train_seconds or float("nan")) / 60,
            r.data.get("wall_seconds", float("nan")) / 60,
            f"`{r.command}`",
        ]
        for r in recs
    ]
    return markdown_table(
        [
            "file",
            "made with",
            "training batches",
            "minutes (training)",
            "minutes (whole call; NaN: not recorded)",
            "command",
        ],
        rows,
        digits=3,
    )


def show(name: str, live, live_label: str, recs: list[Recorded] | None = None) -> str:
    """Markdown for a chapter: the recorded runs of experiment ``name`` (or ``recs``) beside the live summary
    ``live``, on the entries the chapter checks; or, when none is recorded, the command that makes one."""
    recs = runs(name) if recs is None else recs
    if not recs:
        return (
            f"No recorded run of this experiment yet. On a GPU: "
            f"`{command(name, 'full', {})}` (then commit the file it writes under `data/recorded/`)."
        )
    rec = record.experiment(name)
    return side_by_side(live, recs, rec.claims.values(), live_label)
