"""The chapter ``book/khop_stall`` (our study), which path a run of seed 0 takes: its two runs where they move to
the last stage (:func:`stage_entry_run`), the same runs with other data on the last stage (:func:`reseed_members`)
and the stalled run moved there later (:func:`delay_members`). The stall's onset along the last stage is
:mod:`companion.experiments.khop_onset`'s; the probes of the stalled run, its continuations and the hiding studies
are :mod:`companion.experiments.khop_stall`'s."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from functools import partial

import numpy as np

from companion import report
from companion.config import check_choice, check_float
from companion.experiments.khop import KHopExperiment, run
from companion.experiments.khop_curves import last_stage_at, learned_at
from companion.experiments.khop_members import EXPLORED, EXPLORED_EVERY, RESEED_SUFFIX, curves, run_sizes
from companion.experiments.khop_probes import (
    PROBE_SETTINGS,
    ProbeStudy,
    interference_values,
    member_of,
    probe_summary,
    table_interference,
)
from companion.experiments.khop_stall import (
    CONTINUATIONS,
    HIDDEN,
    HIDDEN12,
    HIDDEN12_LONG,
    escape_summary,
    gap_before_last_stage,
    hidden_summary,
    hidden_vs_plain,
    probe_members,
    run_outcome,
)
from companion.experiments.khop_studies import (
    SEED_SETTINGS,
    prefix_gap,
    recorded_runs,
    seed_members,
    study_recorded,
    truncated,
)

# --- seed 0's two runs where they move to the last stage (recorded: ``khop_stage_entry``) ---

# ``n100_*``, ``n250_*``
ENTRY_PROBE = ProbeStudy({"seed 0": "n100", EXPLORED: f"n{EXPLORED_EVERY}"}, "nprobe")


def stage_entry_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """Seed 0's two runs (advancing every 100 and every :data:`companion.experiments.khop_members.EXPLORED_EVERY` steps, the probe study's), which
    :func:`stage_entry_run` trains to the step at which each moves to its last stage."""
    return probe_members(profile, ENTRY_PROBE)


def stage_entry_run(exp: KHopExperiment, progress: bool = True, device=None) -> dict:
    """:func:`companion.experiments.khop.run` of ``exp``, then of ``exp`` trained only up to the step at which that run moves to its last
    stage (:func:`companion.experiments.khop_curves.last_stage_at`): the model there, before one step on k hops. One seed and a constant step size
    make the shorter run the longer one's prefix (``stage_entry_summary`` checks it). Returns the shorter run
    (curves and ``state``) with its configuration (``"exp"``, as :func:`companion.experiments.khop_probes.probe_summary` reads it), the longer
    run's curves (``"full"``) and both runs' training time (``"seconds"``).

    Raises:
        ValueError: a run that never moves to its last stage.
    """
    full = run(exp, progress=progress, device=device)
    at = last_stage_at(full)
    if not np.isfinite(at) or at < 1:
        raise ValueError(
            f"{exp.data} run of seed {exp.seed}: its last stage starts at step {at}: allowed a run "
            f"that moves to it after step 0 within its {exp.steps} steps"
        )
    short = dataclasses.replace(exp, steps=int(at))
    r = run(short, progress=progress, device=device)
    return {
        **r,
        "exp": short,
        "full": {key: full[key] for key in ("step", "acc", "stage")},
        "seconds": full["seconds"] + r["seconds"],
    }


def stage_entry_summary(runs: dict[str, dict], level: float = 0.9) -> report.Summary:
    """:func:`companion.experiments.khop_probes.probe_summary` of :func:`stage_entry_run`'s runs as :data:`ENTRY_PROBE` (``n100_*``, ``n250_*``,
    ``nprobe_*``: the models where they move to the last stage, on k-hop and (k - 1)-hop examples, and where
    table k disturbs them), with ``<tag>_at`` (that step), ``nprobe_prefix_gap`` (:func:`companion.experiments.khop_studies.prefix_gap` of the
    shorter runs against the longer: zero when they are its prefix) and ``nprobe_tk_b1_gap`` (the difference of
    the two runs' shares of v_(k-1) answers with table k shown to block 1 only: how differently block 1 reacts
    to the table it has never seen)."""
    out = probe_summary(runs, level, ENTRY_PROBE).entries()
    for name, tag in ENTRY_PROBE.tags.items():
        out[f"{tag}_at"] = (float(runs[name]["exp"].steps), f"{name}: the step it moves to its last stage")
    out |= prefix_gap({name: r["full"] for name, r in runs.items()}, runs, "nprobe").entries()
    a, b = (out[f"{tag}_tk_b1_prev"][0] for tag in ENTRY_PROBE.tags.values())
    out["nprobe_tk_b1_gap"] = (
        abs(a - b),
        "the two runs where they move to the last stage: difference of their "
        "shares of v_(k-1) answers with table k shown to block 1 only",
    )
    return report.Summary(out)


# --- seed 0's two runs with other data on the last stage (recorded: ``khop_reseed``) ---

RESEED_STREAMS = (1, 2, 3, 4)  # the last stage's batch streams (``last_stage_data``) of each run


# ``<tag>_d<r>_*`` per run, ``<tag>_*`` per state
RESEED_TAGS = {"seed 0": "rs100", EXPLORED: f"rs{EXPLORED_EVERY}"}


def reseed_name(name: str, stream: int) -> str:
    """The member of :func:`reseed_members` that is run ``name`` with last-stage batch stream ``stream``."""
    return f"{name}{RESEED_SUFFIX}{stream}"


def reseed_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """Seed 0's two runs (:data:`companion.experiments.khop_probes.PROBED`: advancing every 100 and every :data:`companion.experiments.khop_members.EXPLORED_EVERY` steps), each with
    the batches of its last stage drawn from each of :data:`RESEED_STREAMS` (``last_stage_data``): each run is
    its seed study run up to the move to k hops, and for a given stream the two runs then see the same batches
    in the same order. Does the state at the move decide which of them stalls, or the data after it?"""
    base = seed_members(profile)
    return {
        reseed_name(name, r): dataclasses.replace(base[name], last_stage_data=r)
        for name in RESEED_TAGS
        for r in RESEED_STREAMS
    }


def _reseed_parts(name: str) -> tuple[str, int]:
    """The run and the stream of a member of :func:`reseed_members`, from its name.

    Raises:
        ValueError: a name that is not one of them.
    """
    allowed = [reseed_name(n, r) for n in RESEED_TAGS for r in RESEED_STREAMS]
    check_choice("run with last-stage data", name, allowed)
    base, r = name.rsplit(RESEED_SUFFIX, 1)
    return base, int(r)


def reseed_summary(runs: dict[str, dict], level: float = 0.9) -> report.Summary:
    """The runs of :func:`reseed_members` (from :func:`companion.experiments.khop_probes.probe_run`: with ``state`` and ``exp``), each named
    ``<tag>_d<r>_*`` (tags :data:`RESEED_TAGS`, r the stream): the best k-hop accuracy over its evaluations
    (``_best_hk``), the first step at which it reaches ``level`` (``_hk_at``, inf: never), the step it moved to
    its last stage (``_stagek_at``), its lowest final accuracy over 1..k hops (``_final_min``) and, at its end,
    where table k disturbs it (:func:`companion.experiments.khop_probes.table_interference`: ``_tk_<shown>_prev``, ``_tk_<shown>_answer``,
    ``_tkattn_l<block>_e<i>``); per run of seed 0, the streams on which it learns the k-th hop
    (``<tag>_learned_n``); ``reseed_split_n``, the streams on which one of the two learns it and the other not;
    ``reseed_n``, the streams; ``reseed_stalled_b1_max`` and ``reseed_learned_b1_min``, the largest share of
    v_(k-1) answers with table k shown to block 1 only over the runs that never learn the k-th hop, and the
    smallest over those that do (NaN: no such run); and the sizes (``reseed_k``, ``reseed_steps``,
    ``reseed_chance``).

    Raises:
        ValueError: a run that is not one of :func:`reseed_members`, or a stream missing for one of the runs.
    """
    learned = _reseed_learned(runs, level)
    out = _reseed_counts(learned).entries()
    for name, r in runs.items():
        base, stream = _reseed_parts(name)
        _reseed_values(out, name, r, f"{RESEED_TAGS[base]}_d{stream}", level)
    b1 = {key: out[f"{RESEED_TAGS[key[0]]}_d{key[1]}_tk_b1_prev"][0] for key in learned}
    stalled, learnt = [b1[key] for key in b1 if not learned[key]], [b1[key] for key in b1 if learned[key]]
    out["reseed_stalled_b1_max"] = (
        max(stalled, default=math.nan),
        "the runs that never learn the k-th hop: the largest share of k-hop answers that "
        "are v_(k-1) with table k shown to block 1 only (NaN: none stalls)",
    )
    out["reseed_learned_b1_min"] = (
        min(learnt, default=math.nan),
        "the runs that learn the k-th hop: the smallest share of k-hop answers that are "
        "v_(k-1) with table k shown to block 1 only (NaN: none learns)",
    )
    out |= run_sizes(next(iter(runs.values())), prefix="reseed_")
    return report.Summary(out)


def _reseed_values(out: dict, name: str, r: dict, tag: str, level: float) -> None:
    """:func:`reseed_summary`'s entries of one run (``<tag>_*``)."""
    out |= run_outcome(r, tag, name, level)
    interference_values(out, name, tag, table_interference(member_of(name, r), r["state"]))


def learns(r: dict, level: float = 0.9) -> bool:
    """Whether a run's k-hop accuracy reaches ``level`` at some evaluation
    (:func:`companion.experiments.khop_curves.learned_at`)."""
    return bool(np.isfinite(learned_at(r, level)[-1]))


def _reseed_learned(runs: dict[str, dict], level: float) -> dict[tuple[str, int], bool]:
    """{(run of seed 0, stream): whether it learns the k-th hop}, once every run has every stream."""
    learned = {_reseed_parts(name): learns(r, level) for name, r in runs.items()}
    streams = sorted({s for _, s in learned})
    for base in RESEED_TAGS:
        missing = [s for s in streams if (base, s) not in learned]
        if missing:
            raise ValueError(
                f"{base!r} has no run with last-stage data {missing}: allowed a study with every run "
                f"on every stream ({streams})"
            )
    return learned


def reseed_learned(runs: dict[str, dict], level: float = 0.9) -> report.Summary:
    """:func:`reseed_summary`'s counts, read on the runs' curves alone: per run of seed 0, the streams on which it
    learns the k-th hop (``<tag>_learned_n``); ``reseed_split_n``, the streams on which one of the two learns it
    and the other not.

    Raises:
        ValueError: as :func:`reseed_summary`.
    """
    return _reseed_counts(_reseed_learned(runs, level))


def _reseed_counts(learned: dict[tuple[str, int], bool]) -> report.Summary:
    """:func:`reseed_learned` of the runs' outcomes (:func:`_reseed_learned`)."""
    streams = sorted({s for _, s in learned})
    out = {
        f"{tag}_learned_n": (
            sum(learned[base, s] for s in streams),
            f"{base}: streams of last-stage data on which it learns the k-th hop",
        )
        for base, tag in RESEED_TAGS.items()
    }
    a, b = RESEED_TAGS
    out["reseed_split_n"] = (
        sum(learned[a, s] != learned[b, s] for s in streams),
        "streams of last-stage data on which one of seed 0's two runs learns the k-th hop and "
        "the other does not",
    )
    out["reseed_n"] = (len(streams), "streams of last-stage data per run")
    return report.Summary(out)


RESEED_LONG = (*(reseed_name("seed 0", r) for r in RESEED_STREAMS), reseed_name(EXPLORED, 1))


def reseed_long_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """The runs :data:`RESEED_LONG` of :func:`reseed_members`."""
    return {name: e for name, e in reseed_members(profile).items() if name in RESEED_LONG}


def reseed_long_summary(runs: dict[str, dict], level: float = 0.9) -> report.Summary:
    """:func:`reseed_summary`'s entries of each run of :func:`reseed_long_members` (from :func:`companion.experiments.khop_probes.probe_run`),
    named ``rl_<tag>_d<r>_*``, with ``rl_learned_n`` (the runs that learn the k-th hop) and the sizes
    (``rl_k``, ``rl_steps``, ``rl_chance``).

    Raises:
        ValueError: a run that is not one of :data:`RESEED_LONG`.
    """
    out = reseed_long_learned(runs, level).entries()
    for name, r in runs.items():
        base, stream = _reseed_parts(name)
        _reseed_values(out, name, r, f"rl_{RESEED_TAGS[base]}_d{stream}", level)
    out |= run_sizes(next(iter(runs.values())), prefix="rl_")
    return report.Summary(out)


def reseed_long_learned(runs: dict[str, dict], level: float = 0.9) -> report.Summary:
    """:func:`reseed_long_summary`'s count, read on the runs' curves alone: ``rl_learned_n``, the runs that learn
    the k-th hop.

    Raises:
        ValueError: a run that is not one of :data:`RESEED_LONG`.
    """
    for name in runs:
        check_choice("run of the longer study", name, RESEED_LONG)
    return report.Summary(
        {
            "rl_learned_n": (
                sum(learns(r, level) for r in runs.values()),
                f"runs of the longer study that learn the k-th hop (accuracy {level})",
            )
        }
    )


def reseed_by_path(long, short, level: float = 0.5) -> report.Summary:
    """The longer runs (:func:`reseed_long_summary`, ``long``) by the path each had taken at the end of the shorter
    study (:func:`reseed_summary`, ``short``; as :func:`reseed_paths`, block 1 breaking the (k - 1)-hop answer
    below ``level``): the best k-hop accuracy of the longer runs whose block 1 broke it (``rl_broken_best_max``,
    the largest; NaN: none) and of those whose block 1 did not (``rl_unbroken_best_min``, the smallest; NaN:
    none), and how many of each (``rl_broken_n``, ``rl_unbroken_n``).

    Raises:
        ValueError: ``level`` outside (0, 1], or a run of :data:`RESEED_LONG` missing from either study.
    """
    check_float("level", level, 0.0, 1.0, low_open=True)
    broken, unbroken = [], []
    for name in RESEED_LONG:
        base, stream = _reseed_parts(name)
        tag = f"{RESEED_TAGS[base]}_d{stream}"
        if f"rl_{tag}_best_hk" not in long or f"{tag}_tk_b1_prev" not in short:
            raise ValueError(
                f"{name!r} is missing from the longer or the shorter study: allowed summaries of both "
                f"studies, with every run of {list(RESEED_LONG)}"
            )
        (broken if block1_breaks(short, tag, level) else unbroken).append(long[f"rl_{tag}_best_hk"])
    return report.Summary(
        {
            "rl_broken_best_max": (
                max(broken, default=math.nan),
                "longer runs whose block 1 broke the (k-1)-hop answer "
                "at the shorter study's end: largest best k-hop "
                "accuracy",
            ),
            "rl_unbroken_best_min": (
                min(unbroken, default=math.nan),
                "longer runs whose block 1 did not: smallest best k-hop accuracy",
            ),
            "rl_broken_n": (
                len(broken),
                "longer runs whose block 1 broke the (k-1)-hop answer at the shorter study's end",
            ),
            "rl_unbroken_n": (len(unbroken), "longer runs whose block 1 did not"),
        }
    )


def block1_breaks(summary, tag: str, level: float) -> bool:
    """Whether run ``tag`` of a :func:`reseed_summary` ended on the stall's path: with table k shown to block 1
    only, fewer than ``level`` of its k-hop answers are v_(k-1)."""
    return summary[f"{tag}_tk_b1_prev"] < level


def reseed_paths(summary, level: float = 0.5) -> report.Summary:
    """Which path each run of :func:`reseed_summary` took on its last stage, read off its end: block 1 breaks its
    (k - 1)-hop answer when table k is shown to block 1 only and fewer than ``level`` of its k-hop answers are
    v_(k-1) (as in seed 0's stall). Per run of seed 0, the streams on which it does (``<tag>_b1_breaks_n``, tags
    :data:`RESEED_TAGS`), and the streams on which one of the two runs does and the other not
    (``reseed_path_split_n``).

    Raises:
        ValueError: ``level`` outside (0, 1].
    """
    check_float("level", level, 0.0, 1.0, low_open=True)
    n = int(summary["reseed_n"])
    breaks = {
        tag: [block1_breaks(summary, f"{tag}_d{r}", level) for r in range(1, n + 1)]
        for tag in RESEED_TAGS.values()
    }
    out = {
        f"{tag}_b1_breaks_n": (
            sum(b),
            f"{base}: streams of last-stage data on which block 1, shown table k alone, "
            f"leaves fewer than {level} of the k-hop answers at v_(k-1)",
        )
        for (base, tag), b in zip(RESEED_TAGS.items(), breaks.values())
    }
    a, b = breaks.values()
    out["reseed_path_split_n"] = (
        sum(x != y for x, y in zip(a, b)),
        "streams of last-stage data on which block 1 breaks one of seed 0's two runs and not the other",
    )
    return report.Summary(out)


def reseed_vs_plain(runs: dict[str, dict], plain: dict[str, dict], level: float = 0.9) -> report.Summary:
    """The runs of :func:`reseed_members` against seed 0's two runs with their own data throughout (``plain``,
    by the names ``"seed 0"`` and :data:`companion.experiments.khop_members.EXPLORED`): the largest difference of their accuracies at 1..k-1 hops or
    stages over the common evaluations before the plain run's last stage (``reseed_gap``: zero when other data
    on the last stage changes nothing before it), and the first step at which each plain run reaches ``level``
    at k hops (``<tag>_own_hk_at``, tags :data:`RESEED_TAGS`; inf: never).

    Raises:
        ValueError: a run that is not one of :func:`reseed_members`, its plain run missing, or two runs
            evaluated at different steps.
    """
    worst = 0.0
    for name, r in runs.items():
        base, _ = _reseed_parts(name)
        if base not in plain:
            raise ValueError(f"{base!r} is not among the runs with their own data: allowed {sorted(plain)}")
        worst = max(worst, gap_before_last_stage(name, r, plain[base]))
    out = {
        "reseed_gap": (
            worst,
            "largest difference before the last stage, other data on the last stage against the run's own",
        )
    }
    for base, tag in RESEED_TAGS.items():
        if base in plain:
            out[f"{tag}_own_hk_at"] = (
                float(learned_at(plain[base], level)[-1]),
                f"{base} with its own data: first step at which the k-hop accuracy reaches "
                f"{level} (inf: never)",
            )
    return report.Summary(out)


def reseed_header(k: int) -> list[str]:
    """Columns of :func:`reseed_rows`."""
    return [
        "last-stage data",
        "run",
        "moves to k hops at (step)",
        f"best {k}-hop accuracy",
        f"{k}-hop learned at (step)",
        f"v_{k - 1} answers, table {k} shown to block 1 only",
        f"hop {marked_entry(k)}'s entry's attention on table {k}, block 1",
    ]


def marked_entry(k: int) -> int:
    """The hop whose entry's attention on table k in block 1 marks the stall (:func:`reseed_rows`): hop k - 2's,
    which composes v_(k-1) in block 1 in seed 0's runs (hop 1's for k = 2)."""
    return max(k - 2, 1)


def reseed_rows(summary, names=None, prefix: str = "") -> list[list]:
    """One row per run of :func:`reseed_summary` (by stream, then run; ``names``: only those runs, e.g.
    :data:`RESEED_LONG`; ``prefix``: ``"rl_"`` for :func:`reseed_long_summary`): where it moves to the last stage,
    its best k-hop accuracy, when it learns it, and the two marks of the stall at its end
    (:func:`companion.experiments.khop_probes.table_interference` with table k shown to block 1 only; block 1's attention from hop k - 2's entry on
    table k)."""
    sizes = prefix or "reseed_"
    rows, e = [], marked_entry(int(summary[f"{sizes}k"]))
    for r in range(1, (int(summary["reseed_n"]) if names is None else max(RESEED_STREAMS)) + 1):
        for base, tag in RESEED_TAGS.items():
            if names is not None and reseed_name(base, r) not in names:
                continue
            rows.append([r, base, *_run_cells(summary, f"{prefix}{tag}_d{r}", e)])
    return rows


def _run_cells(summary, t: str, e: int) -> list:
    """The cells of one run ``t`` of a study with other last-stage data (:func:`reseed_rows`,
    :func:`delay_rows`): its move, best k-hop accuracy, when it learns it, and the two marks of the stall (hop
    ``e``'s entry's attention on table k in block 1)."""
    return [
        summary[f"{t}_stagek_at"],
        summary[f"{t}_best_hk"],
        summary[f"{t}_hk_at"],
        summary[f"{t}_tk_b1_prev"],
        summary[f"{t}_tkattn_l1_e{e}"],
    ]


# --- seed 0's stalled run moved to its last stage later (recorded: ``khop_delay``) ---

# the run advancing every 100 steps: it moves to its last stage when its bar is met, and stalls
DELAYED = "seed 0"


DELAY_GRID = {100: (0, 1, 2, 3, 4), 200: (0,), 400: (1, 2, 3, 4)}


DELAY_REPEATS = (
    200,
    0,
)  # (delay, stream) of :data:`DELAY_GRID` moving where :data:`companion.experiments.khop_members.EXPLORED` moves


def delay_name(delay: int, stream: int) -> str:
    """The member of :func:`delay_members` that moves ``delay`` steps later with last-stage stream ``stream``."""
    name = f"{DELAYED}, last stage {delay} steps later"
    return reseed_name(name, stream) if stream else name


def delay_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """:data:`DELAYED` moved to its last stage later (``last_stage_delay``), with its own last-stage data and
    with other streams (:data:`DELAY_GRID`): up to its bar the run is its own; for a given stream the delayed
    runs see the same last-stage batches as the runs of :func:`reseed_members`, from a state trained longer on
    k - 1 hops. How long after the bar must the move come for seed 0 to be spared the stall?"""
    base = seed_members(profile)[DELAYED]
    return {
        delay_name(d, r): dataclasses.replace(base, last_stage_delay=d, last_stage_data=r)
        for d, streams in DELAY_GRID.items()
        for r in streams
    }


def _delay_parts(name: str) -> tuple[int, int]:
    """The delay and the stream of a member of :func:`delay_members`, from its name.

    Raises:
        ValueError: a name that is not one of them.
    """
    grid = {delay_name(d, r): (d, r) for d, streams in DELAY_GRID.items() for r in streams}
    check_choice("run moved to its last stage later", name, list(grid))
    return grid[name]


def delay_summary(runs: dict[str, dict], level: float = 0.9, path: float = 0.5) -> report.Summary:
    """The runs of :func:`delay_members` (from :func:`companion.experiments.khop_probes.probe_run`), each named ``dl<delay>_d<stream>_*`` with
    :func:`reseed_summary`'s entries of one run (how it ends; where table k disturbs it at its end); per delay,
    its runs (``dl<delay>_n``), those that learn the k-th hop (``_learned_n``) and those on the stall's path
    (``_breaks_n``: block 1, shown table k alone, leaves fewer than ``path`` of the k-hop answers at v_(k-1), as
    :func:`reseed_paths`); ``delay_path_escapes_n``, the runs on that path whose best k-hop accuracy reaches
    ``path`` all the same; and the sizes (``delay_k``, ``delay_steps``, ``delay_chance``).

    Raises:
        ValueError: ``path`` outside (0, 1], or a run that is not one of :func:`delay_members`.
    """
    check_float("path", path, 0.0, 1.0, low_open=True)
    counts = delay_learned(runs, level)
    out, by_delay, escapes = {}, {}, 0
    for name, r in runs.items():
        d, stream = _delay_parts(name)
        tag = f"dl{d}_d{stream}"
        _reseed_values(out, name, r, tag, level)
        breaks = block1_breaks(report.Summary(out), tag, path)
        escapes += breaks and out[f"{tag}_best_hk"][0] >= path
        by_delay.setdefault(d, []).append(breaks)
    for d, res in sorted(by_delay.items()):
        who = f"{DELAYED}, last stage {d} steps later"
        out[f"dl{d}_n"] = (len(res), f"{who}: runs (streams of last-stage data, its own included)")
        out[f"dl{d}_learned_n"] = counts.entries()[f"dl{d}_learned_n"]
        out[f"dl{d}_breaks_n"] = (
            sum(res),
            f"{who}: runs on the stall's path (block 1, shown table k "
            f"alone, leaves fewer than {path} of the k-hop answers at "
            "v_(k-1))",
        )
    out["delay_path_escapes_n"] = (
        escapes,
        f"runs on the stall's path whose best k-hop accuracy reaches {path}",
    )
    out |= run_sizes(next(iter(runs.values())), prefix="delay_")
    return report.Summary(out)


def delay_learned(runs: dict[str, dict], level: float = 0.9) -> report.Summary:
    """:func:`delay_summary`'s counts, read on the runs' curves alone: per delay, the runs that learn the k-th hop
    (``dl<delay>_learned_n``).

    Raises:
        ValueError: a run that is not one of :func:`delay_members`.
    """
    by_delay: dict[int, int] = {}
    for name, r in runs.items():
        d, _ = _delay_parts(name)
        by_delay[d] = by_delay.get(d, 0) + learns(r, level)
    return report.Summary(
        {
            f"dl{d}_learned_n": (
                n,
                f"{DELAYED}, last stage {d} steps later: runs that learn the k-th hop ({level})",
            )
            for d, n in sorted(by_delay.items())
        }
    )


def split_streams(curves: dict) -> tuple[dict, dict]:
    """:func:`companion.experiments.khop_members.curves` of runs with and without other last-stage data (as :func:`reseed_name` names them), as two
    :func:`companion.experiments.khop_members.curves`: the runs with it, and those with their own (for :func:`companion.figures.khop_stall.reseed_panels`)."""
    other = {n for n in curves["acc"] if RESEED_SUFFIX in n}
    return tuple(
        {key: {n: v for n, v in runs.items() if (n in other) == want} for key, runs in curves.items()}
        for want in (True, False)
    )


def delay_vs_plain(runs: dict[str, dict], plain: dict[str, dict]) -> report.Summary:
    """The runs of :func:`delay_members` against seed 0's runs with their own data throughout (``plain``, by the
    names :data:`DELAYED` and :data:`companion.experiments.khop_members.EXPLORED`): the largest difference of their accuracies at 1..k-1 hops or
    stages over the common evaluations before :data:`DELAYED` moves to its last stage (``delay_gap``: zero when
    the delay changes nothing before the bar); the run :data:`DELAY_REPEATS`, which moves to the last stage where
    :data:`companion.experiments.khop_members.EXPLORED` does, against that run at every hop count and stage over the steps at which both are
    evaluated, to the shorter one's end (``delay_repeat_gap``: zero if they were one run; ``delay_repeat_n``, the
    common evaluations; ``delay_repeat_first``, the first of them at which they differ, inf: none); and where each
    plain run moves to each stage (``delay_moves_<tag>``, :func:`stage_moves`, tags :data:`RESEED_TAGS`).

    Raises:
        ValueError: a run that is not one of :func:`delay_members`, the run :data:`DELAY_REPEATS` or a plain run
            missing, or two runs evaluated at different steps (before the move), or with no step in common.
    """
    for name in (DELAYED, EXPLORED):
        if name not in plain:
            raise ValueError(f"{name!r} is not among the runs with their own data: allowed {sorted(plain)}")
    worst = 0.0
    for name, r in runs.items():
        _delay_parts(name)
        worst = max(worst, gap_before_last_stage(name, r, plain[DELAYED]))
    repeat = delay_name(*DELAY_REPEATS)
    if repeat not in runs:
        raise ValueError(f"{repeat!r} is missing: allowed runs of delay_members that include it")
    a, b = runs[repeat], plain[EXPLORED]
    steps, ia, ib = np.intersect1d(np.asarray(a["step"]), np.asarray(b["step"]), return_indices=True)
    if not len(steps):
        raise ValueError(
            f"{repeat!r} and {EXPLORED!r} have no evaluation step in common: allowed runs that do"
        )
    diff = np.maximum(
        np.abs(np.asarray(a["acc"])[ia] - np.asarray(b["acc"])[ib]).max(1),
        np.abs(np.asarray(a["stage"])[ia] - np.asarray(b["stage"])[ib]),
    )
    out = {
        "delay_gap": (worst, f"largest difference before the bar, {DELAYED} moved later against its own run"),
        "delay_repeat_gap": (
            float(diff.max()),
            f"{repeat} against {EXPLORED}: largest difference of their "
            "accuracies (every hop count) or stages at their common evaluations",
        ),
        "delay_repeat_n": (len(steps), f"{repeat} and {EXPLORED}: common evaluations"),
        "delay_repeat_first": (
            float(steps[np.flatnonzero(diff > 0)[0]]) if (diff > 0).any() else math.inf,
            f"{repeat} and {EXPLORED}: the first common evaluation at which they differ (inf: none)",
        ),
    }
    for name, tag in RESEED_TAGS.items():
        out[f"delay_moves_{tag}"] = (
            ", ".join(f"{m:.0f}" for m in stage_moves(plain[name])),
            f"{name}: the steps at which it moves to 2, ..., k hops",
        )
    return report.Summary(out)


def repeat_curves(runs: dict[str, dict], plain: dict[str, dict]) -> dict:
    """:func:`companion.experiments.khop_members.curves` of :data:`DELAYED`, the run :data:`DELAY_REPEATS` of :func:`delay_members` (``runs``) and
    :data:`companion.experiments.khop_members.EXPLORED` (``plain``: by those names), each to the last step of the delayed run (for
    :func:`companion.figures.khop.hop_panels`).

    Raises:
        ValueError: one of the three missing, or one shorter than the delayed run.
    """
    repeat = delay_name(*DELAY_REPEATS)
    picked = {name: src.get(name) for name, src in ((DELAYED, plain), (repeat, runs), (EXPLORED, plain))}
    missing = [name for name, r in picked.items() if r is None]
    if missing:
        raise ValueError(
            f"{missing} missing: allowed the delay study's runs and seed 0's two runs with their own data"
        )
    last = int(np.asarray(runs[repeat]["step"])[-1])
    return curves({name: truncated(r, last) for name, r in picked.items()})


def stage_moves(r: dict) -> list[float]:
    """The evaluation steps at which a curriculum run moves to stages 2..k (training on each starts right after;
    inf: never), as :func:`companion.experiments.khop_curves.last_stage_at` for the last.

    >>> stage_moves({"step": np.array([0, 100, 200, 300]), "stage": np.array([1, 2, 2, 3]), "acc": np.zeros((4, 3))})
    [0.0, 200.0]
    """
    step, stage = np.asarray(r["step"]), np.asarray(r["stage"])
    out = []
    for s in range(2, np.asarray(r["acc"]).shape[1] + 1):
        first = np.flatnonzero(stage >= s)
        out.append(float(step[max(first[0] - 1, 0)]) if len(first) else math.inf)
    return out


def delay_by_move(delays, reseeds, streams=RESEED_STREAMS, level: float = 0.5) -> report.Summary:
    """:data:`DELAYED` on the same last-stage streams (``streams``) by the delay of its move to the last stage:
    delay 0 from :func:`reseed_summary` (``reseeds``), the others from :func:`delay_summary` (``delays``; the
    delays whose runs cover ``streams``), and as a reference :data:`companion.experiments.khop_members.EXPLORED` on the same streams
    (``reseeds``; key ``e<EXPLORED_EVERY>``: another run, which moves where delay 200 would); per delay (or
    reference) ``<d>``: the step of the move (``dmove<d>_at``), the streams on which the run takes the stall's path
    (``dmove<d>_breaks_n``, :func:`reseed_paths`' test at ``level``) and on which it learns the k-th hop
    (``dmove<d>_learned_n``); ``dmove_n``, the streams.

    Raises:
        ValueError: ``level`` outside (0, 1], or a stream missing from one of the runs.
    """
    check_float("level", level, 0.0, 1.0, low_open=True)
    tags = {"0": (reseeds, RESEED_TAGS[DELAYED])}
    tags |= {str(d): (delays, f"dl{d}") for d, s in sorted(DELAY_GRID.items()) if set(streams) <= set(s)}
    tags[f"e{EXPLORED_EVERY}"] = (reseeds, RESEED_TAGS[EXPLORED])
    out = {}
    for d, (summary, tag) in tags.items():
        runs = [f"{tag}_d{r}" for r in streams]
        missing = [t for t in runs if f"{t}_hk_at" not in summary]
        if missing:
            raise ValueError(
                f"runs {missing} are missing: allowed summaries with every stream of {list(streams)}"
            )
        who = EXPLORED if d.startswith("e") else f"{DELAYED}, last stage {d} steps later"
        out[f"dmove{d}_at"] = (
            max(summary[f"{t}_stagek_at"] for t in runs),
            f"{who}: the step it moves to it",
        )
        out[f"dmove{d}_breaks_n"] = (
            sum(block1_breaks(summary, t, level) for t in runs),
            f"{who}: streams on which block 1 breaks the (k-1)-hop answer",
        )
        out[f"dmove{d}_learned_n"] = (
            sum(bool(np.isfinite(summary[f"{t}_hk_at"])) for t in runs),
            f"{who}: streams on which it learns the k-th hop",
        )
    out["dmove_n"] = (len(streams), "streams of last-stage data compared")
    return report.Summary(out)


def delay_header(k: int) -> list[str]:
    """Columns of :func:`delay_rows`."""
    return ["last stage later by (steps)", "last-stage data", *reseed_header(k)[2:]]


def delay_rows(summary) -> list[list]:
    """One row per run of :func:`delay_summary` (by delay, then stream; data 0: the run's own): as
    :func:`reseed_rows`."""
    rows, e = [], marked_entry(int(summary["delay_k"]))
    for d, streams in DELAY_GRID.items():
        for r in streams:
            if f"dl{d}_d{r}_hk_at" in summary:
                rows.append([d, r or "own", *_run_cells(summary, f"dl{d}_d{r}", e)])
    return rows


DELAY_MOVE_HEADER = [
    "run",
    "moves to k hops at (step)",
    "streams on the stall's path",
    "streams on which it learns k hops",
]


def delay_move_rows(summary) -> list[list]:
    """One row per delay of :func:`delay_by_move` (by delay), then the reference run: the move's step, and the
    streams (out of ``dmove_n``) on the stall's path and on which the run learns the k-th hop."""
    n = int(summary["dmove_n"])
    keys = [key[5:-3] for key in summary if key.startswith("dmove") and key.endswith("_at")]
    delays = sorted((k for k in keys if k.isdigit()), key=int) + [k for k in keys if not k.isdigit()]
    return [
        [
            f"{DELAYED}, last stage {d} steps later" if d.isdigit() else EXPLORED,
            summary[f"dmove{d}_at"],
            f"{int(summary[f'dmove{d}_breaks_n'])} of {n}",
            f"{int(summary[f'dmove{d}_learned_n'])} of {n}",
        ]
        for d in delays
    ]


# --- the rows read on recorded runs' curves alone, for a check of their timing ---

# study: ((experiment, settings) of its recording, the summary of its curves alone that gives the chapter's rows on
# them)
STOPPED = {
    "hidden": (("khop_hidden", PROBE_SETTINGS), partial(hidden_summary, study=HIDDEN)),
    "hidden12": (("khop_hidden12", PROBE_SETTINGS), partial(hidden_summary, study=HIDDEN12)),
    "hidden12_long": (("khop_hidden12_long", SEED_SETTINGS), partial(hidden_summary, study=HIDDEN12_LONG)),
    "reseed": (("khop_reseed", PROBE_SETTINGS), reseed_learned),
    "reseed_long": (("khop_reseed_long", SEED_SETTINGS), reseed_long_learned),
    "delay": (("khop_delay", PROBE_SETTINGS), delay_learned),
}


# the recordings of the studies read apart (:func:`continuations_over`, :func:`waits_over`)
ESCAPE_RECORDING = ("khop_escape", PROBE_SETTINGS)
WAITS_RECORDINGS = {"hidden": ("khop_hidden", PROBE_SETTINGS), "plain": ("khop_seeds", SEED_SETTINGS)}
PLAIN_PREFIX = "plain, "  # a plain run among the runs of waits_over: "plain, seed 1"


def continuations_over(
    sampler: str | None = None,
) -> tuple[Callable[[dict], report.Summary], dict[str, dict]]:
    """(summary, runs) of the stalled run's continuations as recorded (``khop_escape``, under ``sampler``): each
    continuation's curves by its name (the recording keeps them so, not as runs of a study) and
    :func:`companion.experiments.khop_stall.escape_summary` of them, which reads curves alone.

    Raises:
        ValueError: the recording missing, or one without a continuation of
            :data:`companion.experiments.khop_stall.CONTINUATIONS`.
    """
    c = study_recorded(ESCAPE_RECORDING, sampler).curves
    missing = sorted(set(CONTINUATIONS) - set(c["step"]))
    if missing:
        raise ValueError(
            f"the escape recording has no continuation {missing}: allowed {sorted(CONTINUATIONS)}"
        )
    runs = {
        name: {key: np.asarray(c[key][name]) for key in ("step", "acc", "stage")} for name in CONTINUATIONS
    }
    return (lambda cont: escape_summary({"seed 0": {"continued": cont}})), runs


def waits_over(sampler: str | None = None) -> tuple[Callable[[dict], report.Summary], dict[str, dict]]:
    """(summary, runs) of the hiding study's waits set against the seed study's runs
    (:func:`companion.experiments.khop_stall.hidden_vs_plain`, as the chapter reads them, under ``sampler``): the
    hiding study's runs and the same runs without the hiding (named ``PLAIN_PREFIX + name``), every run the
    comparison reads.

    Raises:
        ValueError: a recording missing.
    """
    hidden = recorded_runs(study_recorded(WAITS_RECORDINGS["hidden"], sampler))[0]
    plain = recorded_runs(study_recorded(WAITS_RECORDINGS["plain"], sampler))[0]

    def of_both(both: dict[str, dict]) -> report.Summary:
        own = {name: r for name, r in both.items() if not name.startswith(PLAIN_PREFIX)}
        return hidden_vs_plain(
            own, {n.removeprefix(PLAIN_PREFIX): r for n, r in both.items() if n not in own}
        )

    return of_both, hidden | {f"{PLAIN_PREFIX}{name}": plain[name] for name in HIDDEN.names}


# studies read otherwise than as one recording's runs: the continuations (flat by name) and the waits (a pool)
APART = {"escape": continuations_over, "hidden_waits": waits_over}


def stopped_over(
    study: str, sampler: str | None = None
) -> tuple[Callable[[dict], report.Summary], dict[str, dict]]:
    """(summary, runs) of a study of :data:`STOPPED` or :data:`APART` as recorded under ``sampler`` (default: the
    build's): its runs' curves and the part of its summary read on them alone (the best k-hop accuracy of a run,
    whether it learns the k-th hop, counts of such runs; the continuations' accuracies; the hiding study's waits
    against the runs without it), for :func:`companion.experiments.late_verdicts.stopped_studies`; the rest of
    each summary reads probes of the weights at a run's end, which a cut curve does not remake.

    Raises:
        ValueError: a study in neither; its recording missing (the command that records it named).
    """
    check_choice("study", study, (*STOPPED, *APART))
    if study in APART:
        return APART[study](sampler)
    recording, summary = STOPPED[study]
    return summary, recorded_runs(study_recorded(recording, sampler))[0]
