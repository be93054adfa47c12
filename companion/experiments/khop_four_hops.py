"""The chapter ``book/khop_four_hops``: the talk's k-hop curriculum at k = 4 over seeds, evaluation intervals,
width, learning rates and the stages 1, 2, 4 (settings and predictions of ours), with the numbers the
chapter checks, and each recorded study's runs and summary as its rows are judged on stopped runs
(:func:`stopped_over`). Task, model, training, runs and the shared readers (the talk's own chapter, ``book/khop``,
reads only those) are :mod:`companion.experiments.khop`'s and :mod:`companion.experiments.khop_members`'."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import numpy as np

from companion import config, report
from companion.config import check_choice
from companion.experiments.khop import KHopExperiment
from companion.experiments.khop_curves import last_stage_at, last_stage_wait, learned_at
from companion.experiments.khop_members import EXPLORED, EXPLORED_EVERY, SIZES, interval_of, run_sizes
from companion.experiments.khop_probes import PROBE_SETTINGS
from companion.experiments.khop_stall import study_sampler
from companion.experiments.khop_studies import (
    DOUBLING,
    INTERVAL_LONG_SETTINGS,
    INTERVAL_SETTINGS,
    RECORDED_DEEPER,
    SEED_SETTINGS,
    SEEDS,
    WIDE,
    SeedVariant,
    paired_difference,
    paired_header,
    paired_rows,
    recorded,
    recorded_runs,
    seed_interval,
    seed_list,
    seed_name,
    seeded,
    study_recorded,
    study_summary,
    truncated,
)
from companion.recorded import same_rounding


def seeds_summary(runs: dict[str, dict], level: float = 0.9, solved: float = 0.95) -> report.Summary:
    """The numbers of a finished :func:`companion.experiments.khop_studies.seed_members` set, named ``seeds_*`` (to glue beside the other studies):
    how many of the seeds at the study's evaluation interval end with every hop count above ``solved`` (lowest
    final accuracy), the earliest step at which one learns the k-th hop (first evaluation at ``level``) and the
    fewest steps one spends on its last stage before that, and the same numbers of seed 0 advancing every
    :data:`companion.experiments.khop_members.EXPLORED_EVERY` steps."""
    seeds = [seed_name(s) for s in SEEDS]
    low = np.array([np.asarray(runs[n]["acc"])[-1].min() for n in seeds])
    hopk = np.array([learned_at(runs[n], level)[-1] for n in seeds])
    wait = np.array([last_stage_wait(runs[n], level) for n in seeds])
    alt, every = runs[EXPLORED], f"seed 0 advancing every {EXPLORED_EVERY} steps"
    return report.Summary(
        {
            **run_sizes(runs[seeds[0]], prefix="seeds_"),
            "seeds_n": (len(seeds), "seeds at the study's evaluation interval"),
            "seeds_solved": (
                float((low > solved).mean()),
                f"fraction of those seeds whose lowest final accuracy over 1..k hops is above {solved}",
            ),
            "seeds_solved_n": (
                int((low > solved).sum()),
                f"seeds whose lowest final accuracy is above {solved}",
            ),
            "seeds_worst_min": (float(low.min()), "the worst seed's lowest final accuracy over 1..k hops"),
            "seeds_hopk_first": (
                float(hopk.min()),
                "the earliest step at which a seed learns the k-th hop (inf: none)",
            ),
            "seeds_wait_last": (
                float(wait.min()),
                "the fewest steps a seed trains on its last stage before it learns the k-th hop "
                "(inf: none learns it)",
            ),
            "seeds_alt_min": (
                float(np.asarray(alt["acc"])[-1].min()),
                f"{every}: lowest final accuracy over 1..k hops",
            ),
            "seeds_alt_hopk_at": (
                float(learned_at(alt, level)[-1]),
                f"{every}: first step with the k-th hop learned",
            ),
            "seeds_alt_stagek_at": (last_stage_at(alt), f"{every}: the step it moved to its last stage"),
        }
    )


# --- the seed study at two evaluation intervals (recorded: ``record khop_interval``) ---

INTERVALS = (100, EXPLORED_EVERY)  # the seed study's interval and the exploratory run's


# seeds recorded here at each interval; with the seed study's runs (read up to INTERVAL_SETTINGS' steps) every
# seed of 0..6 is run at both
INTERVAL_SEEDS = {100: (3, 4, 5, 6), EXPLORED_EVERY: (1, 2, 3, 4, 5, 6)}


def interval_name(seed: int, every: int) -> str:
    """A member of :func:`interval_members`: ``"seed 3, every 100"``; seed 0 every 250 is :data:`companion.experiments.khop_members.EXPLORED`."""
    return f"seed {seed}, every {every}"


def interval_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """The cumulative curriculum of :func:`companion.experiments.khop_studies.seed_members` for the seeds :data:`INTERVAL_SEEDS` at each of
    :data:`INTERVALS` (each member keeps its interval under a study-wide override)."""
    size = SIZES[config.get_profile(profile)]
    return {
        interval_name(s, every): KHopExperiment.for_profile(
            profile, data="cumulative", **{**size, "seed": s, "eval_every": every}
        )
        for every, seeds in INTERVAL_SEEDS.items()
        for s in seeds
    }


def interval_pool(runs: dict[str, dict], earlier: dict[str, dict] | None = None) -> dict[str, dict]:
    """:func:`interval_members`' runs with the seed study's (``earlier``, default its recording) cut to the same
    budget and named by :func:`interval_name`: seeds 0..6, each at both :data:`INTERVALS`."""
    if earlier is None:
        earlier = recorded_runs(recorded(SEED_SETTINGS, experiment="khop_seeds"))[0]
    steps = int(next(iter(runs.values()))["step"][-1])
    renamed = {interval_name(*seed_interval(name)): r for name, r in earlier.items()}
    return {**{name: truncated(r, steps) for name, r in renamed.items()}, **runs}


def solved_run(r: dict, solved: float, hops: tuple | None = None) -> bool:
    """Whether the run's lowest final accuracy over ``hops`` (default: every hop count) is above ``solved``."""
    final = np.asarray(r["acc"])[-1]
    return bool((final if hops is None else final[np.asarray(hops) - 1]).min() > solved)


def by_interval(pool: dict[str, dict]) -> dict[int, dict[int, dict]]:
    """:func:`interval_pool`'s runs as {interval: {seed: run}}, for each of :data:`INTERVALS`."""
    return {
        every: {s: r for name, r in pool.items() for s, e in [interval_of(name)] if e == every}
        for every in INTERVALS
    }


def _population(
    rs: dict[int, dict], ok: dict[int, bool], p: str, t: str, who: str, level: float, solved: float
) -> dict:
    """Summary entries of one population of runs ({seed: run}, ``ok``: solved or not): the runs, the solved
    seeds, their count and fraction, the median step of their move to the last stage and their median wait there
    before the k-th hop (first evaluation at ``level``); named ``<p>n<t>``, ``<p>solved<t>_seeds``,
    ``<p>solved<t>_n``, ``<p>solved<t>``, ``<p>move<t>_med``, ``<p>wait<t>_med``."""
    moves = [last_stage_at(r) for s, r in rs.items() if ok[s]]
    waits = [last_stage_wait(r, level) for s, r in rs.items() if ok[s]]
    return {
        f"{p}n{t}": (len(rs), f"runs {who}"),
        f"{p}solved{t}_seeds": (seed_list(s for s in rs if ok[s]), f"{who}: the solved seeds"),
        f"{p}solved{t}_n": (
            int(sum(ok.values())),
            f"runs {who} whose lowest final accuracy is above {solved}",
        ),
        f"{p}solved{t}": (float(np.mean(list(ok.values()))), "the same, as a fraction of the runs"),
        f"{p}move{t}_med": (
            float(np.median(moves)) if moves else math.nan,
            f"{who}, solved runs: median step of the move to the last stage",
        ),
        f"{p}wait{t}_med": (
            float(np.median(waits)) if waits else math.nan,
            f"{who}, solved runs: median steps on the last stage before the k-th hop is learned",
        ),
    }


def _unsolved(
    unsolved: list[dict], solved_runs: list[dict], p: str, level: float, hops: tuple | None = None
) -> dict:
    """Summary entries of the unsolved runs of a study, and what bears on its budget: how many had not learned
    hops 1..k-1 (at ``level``; of ``hops``, the hop counts trained on, those below k), the longest wait of a
    solved run on its last stage before the k-th hop, the fewest steps an unsolved run had there, the highest
    final k-hop accuracy of an unsolved run and how many end below twice chance; named ``<p>unsolved_n``,
    ``<p>unsolved_early_n``, ``<p>wait_max``, ``<p>unsolved_time_min``, ``<p>unsolved_last_max``,
    ``<p>unsolved_flat_n``."""
    below = slice(None, -1) if hops is None else np.asarray(hops[:-1], dtype=int) - 1
    early = sum(bool(np.isinf(learned_at(r, level)[below]).any()) for r in unsolved)
    waits = [last_stage_wait(r, level) for r in solved_runs]
    final = np.array([np.asarray(r["acc"])[-1, -1] for r in unsolved])
    chance = 1.0 / (unsolved or solved_runs)[0]["N"]
    return {
        f"{p}unsolved_n": (len(unsolved), "unsolved runs"),
        f"{p}unsolved_early_n": (
            int(early),
            f"unsolved runs that never learned one of hops 1..k-1 (at {level})",
        ),
        f"{p}wait_max": (
            float(max(waits)) if waits else math.nan,
            "solved runs: the most steps one trained on its last stage before the k-th hop",
        ),
        f"{p}unsolved_time_min": (
            min(max(0.0, float(r["step"][-1]) - last_stage_at(r)) for r in unsolved)
            if unsolved
            else math.nan,
            "unsolved runs: the fewest steps one trained on its last stage (0: never got there)",
        ),
        f"{p}unsolved_last_max": (
            float(final.max()) if unsolved else math.nan,
            "unsolved runs: the highest final k-hop accuracy",
        ),
        f"{p}unsolved_flat_n": (
            int((final < 2 * chance).sum()),
            "unsolved runs whose final k-hop accuracy is below twice chance",
        ),
    }


def _pair_counts(
    a: dict[int, bool], b: dict[int, bool], p: str, only_a: str, only_b: str, what_a: str, what_b: str
) -> dict:
    """Over the seeds of both ``a`` and ``b`` ({seed: solved}): how many (and which) are solved in one only, and
    solved in ``b`` minus solved in ``a`` (``<p>pairs_n``, ``<p><only_a>_n``/``_seeds``, ``<p><only_b>_n``/``_seeds``,
    ``<p>gap_n``)."""
    pairs = sorted(set(a) & set(b))
    just_a = [s for s in pairs if a[s] and not b[s]]
    just_b = [s for s in pairs if b[s] and not a[s]]
    return {
        f"{p}pairs_n": (len(pairs), f"seeds run {what_a} and {what_b}"),
        f"{p}{only_b}_n": (len(just_b), f"seeds solved {what_b} and not {what_a}"),
        f"{p}{only_b}_seeds": (seed_list(just_b), "those seeds"),
        f"{p}{only_a}_n": (len(just_a), f"seeds solved {what_a} and not {what_b}"),
        f"{p}{only_a}_seeds": (seed_list(just_a), "those seeds"),
        f"{p}gap_n": (
            sum(b[s] for s in pairs) - sum(a[s] for s in pairs),
            f"over those seeds, solved {what_b} minus solved {what_a}",
        ),
    }


def sign_test(summary, p: str, only_a: str, only_b: str) -> report.Summary:
    """The exact two-sided sign test (McNemar's, exact) of a seed-by-seed comparison in ``summary``
    (:func:`_pair_counts`' ``<p><only_a>_n`` and ``<p><only_b>_n``, the seeds solved at one setting only): the
    probability, with each such seed equally likely to fall either way, of a split at least as uneven
    (``<p>sign_p``, 1 when none differ), and the same for the most uneven split the seeds allow, all of them one
    way (``<p>sign_p_best``): below 0.05 only when six or more seeds differ.

    >>> s = sign_test({"x_lost_n": 1, "x_gained_n": 2, "x_pairs_n": 7}, "x_", "lost", "gained")
    >>> s["x_sign_p"], s["x_sign_p_best"]
    (1.0, 0.015625)
    """
    a, b, n = int(summary[f"{p}{only_a}_n"]), int(summary[f"{p}{only_b}_n"]), int(summary[f"{p}pairs_n"])

    def two_sided(low: int, m: int) -> float:
        return min(1.0, 2 * sum(math.comb(m, i) for i in range(low + 1)) / 2**m) if m else 1.0

    return report.Summary(
        {
            f"{p}sign_p": (
                two_sided(min(a, b), a + b),
                f"exact two-sided sign test of {p}{only_a}_n = {a} against {p}{only_b}_n = {b}",
            ),
            f"{p}sign_p_best": (two_sided(0, n), f"the same test had all {n} seeds fallen one way"),
        }
    )


def interval_summary(
    runs: dict[str, dict], earlier: dict[str, dict] | None = None, level: float = 0.9, solved: float = 0.95
) -> report.Summary:
    """The numbers of the interval study, named ``int_*``: over :func:`interval_pool` (the runs with the seed
    study's), per interval the runs and how many end solved (lowest final accuracy over 1..k above ``solved``;
    :func:`_population`); over the seeds run at both, how many are solved at one interval only; and the
    unsolved runs of both intervals (:func:`_unsolved`)."""
    by = by_interval(interval_pool(runs, earlier))
    ok = {every: {s: solved_run(r, solved) for s, r in rs.items()} for every, rs in by.items()}
    fast, slow = INTERVALS
    out = run_sizes(next(iter(runs.values())), prefix="int_")
    for every in INTERVALS:
        out |= _population(
            by[every], ok[every], "int_", str(every), f"advancing every {every} steps", level, solved
        )
    out |= _pair_counts(
        ok[fast], ok[slow], "int_", "only_fast", "only_slow", f"every {fast}", f"every {slow}"
    )
    # the runs of both intervals
    both = [(r, ok[every][s]) for every in INTERVALS for s, r in by[every].items()]
    return report.Summary(
        out | _unsolved([r for r, good in both if not good], [r for r, good in both if good], "int_", level)
    )


def interval_rows(runs: dict[str, dict], level: float = 0.9) -> list[list]:
    """One row per seed of :func:`interval_pool`'s runs (pass the pool): at each interval, the step each hop
    count is first learned, the move to the last stage and the final accuracies (:func:`companion.experiments.khop_studies.paired_rows`)."""
    by = by_interval(runs)
    return paired_rows([by[every] for every in INTERVALS], level)


# the interval study's own runs every 100 steps, run for twice the budget (khop_interval_long): the ones unsolved at
# 10000 steps are the study's subjects (:func:`followed_up`); the others are the step-size variant's base at 15000 steps
INTERVAL_LONG = tuple(interval_name(s, 100) for s in INTERVAL_SEEDS[100])


def interval_ends(pool: dict[str, dict], solved: float = 0.95) -> dict[int, dict[str, tuple[int, ...]]]:
    """How :func:`interval_pool`'s runs end at the interval study's budget, the facts the longer studies follow
    up (:func:`followed_up`): per interval, the seeds unsolved (lowest final accuracy over 1..k not above
    ``solved``); of those, the ones flat at chance (final k-hop accuracy below twice chance) and the ones whose
    budget is in doubt: they moved to their last stage and trained there fewer steps than the slowest solved run
    of either interval waited for its k-th hop (``"slowest"``; inf where none solved), or they are not flat at
    chance. ``"on_last"``: each unsolved seed's steps on its last stage (-inf where it never moved there), the
    reasons the text gives.

    >>> run = lambda final, stage=2: {"acc": [[1.0, 0.2], [1.0, final]], "stage": [1, stage], "step": [0, 100], "N": 8}
    >>> names = ["seed 3, every 100", "seed 4, every 100", "seed 5, every 100", "seed 3, every 250"]
    >>> ends = interval_ends(dict(zip(names, [run(0.1), run(0.5), run(1.0), run(0.1, 1)])))
    >>> [{k: e[k] for k in ("unsolved", "flat", "doubt")} for e in (ends[100], ends[250])]
    [{'unsolved': (3, 4), 'flat': (3,), 'doubt': (4,)}, {'unsolved': (3,), 'flat': (3,), 'doubt': ()}]
    >>> ends[100]["slowest"], ends[100]["on_last"], ends[250]["on_last"]
    (100.0, {3: 100.0, 4: 100.0}, {3: -inf})
    """
    by = by_interval(pool)
    waits = [last_stage_wait(r) for runs in by.values() for r in runs.values() if solved_run(r, solved)]
    slowest = max(waits, default=math.inf)
    out = {}
    for every, runs in by.items():
        unsolved = tuple(sorted(s for s, r in runs.items() if not solved_run(r, solved)))
        flat = tuple(s for s in unsolved if np.asarray(runs[s]["acc"])[-1, -1] < 2.0 / runs[s]["N"])
        there = {s: float(np.asarray(runs[s]["step"])[-1]) - last_stage_at(runs[s]) for s in unsolved}
        doubt = tuple(s for s in unsolved if s not in flat or -math.inf < there[s] < slowest)
        out[every] = {
            "unsolved": unsolved,
            "flat": flat,
            "doubt": doubt,
            "slowest": slowest,
            "on_last": there,
        }
    return out


def followed_up(
    every: int, pool: dict[str, dict] | None = None, solved: float = 0.95
) -> dict[str, tuple[int, ...]]:
    """The interval study's own runs (:data:`INTERVAL_SEEDS`) that its longer study at ``every`` follows up for
    twice the budget, by the rule registered with it, over the build's runs (``pool``: :func:`interval_pool`'s,
    default the recordings the build reads): every 100 steps (khop_interval_long), every unsolved run; every 250
    (khop_interval_long250), the unsolved runs whose budget is in doubt (:func:`interval_ends`). ``"seeds"``: those
    runs; ``"flat"``: those of them flat at chance at the shorter budget. Under the numpy generators: seeds 3-6
    (flat 3, 6) and seeds 3, 6 (flat 3), the runs the studies were registered with.

    >>> run = lambda final: {"acc": [[1.0, 0.2], [1.0, final]], "stage": [1, 2], "step": [0, 100], "N": 8}
    >>> names = ["seed 3, every 100", "seed 4, every 100", "seed 0, every 100", "seed 3, every 250"]
    >>> followed_up(100, dict(zip(names, [run(0.1), run(1.0), run(0.1), run(0.1)])))
    {'seeds': (3,), 'flat': (3,)}

    Raises:
        ValueError: ``every`` is not one of :data:`INTERVALS`.
    """
    if every not in INTERVALS:
        raise ValueError(f"every={every}: allowed {', '.join(map(str, INTERVALS))}")
    if pool is None:
        pool = interval_pool(recorded_runs(recorded(INTERVAL_SETTINGS, experiment="khop_interval"))[0])
    ends = interval_ends(pool, solved)[every]
    own = set(INTERVAL_SEEDS[every])
    seeds = tuple(s for s in ends["unsolved" if every == 100 else "doubt"] if s in own)
    return {"seeds": seeds, "flat": tuple(s for s in ends["flat"] if s in seeds)}


def interval_long_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """The runs of :data:`INTERVAL_LONG` (:func:`interval_members`), to be run for twice the budget."""
    every = interval_members(profile)
    return {name: every[name] for name in INTERVAL_LONG}


def interval_long250_members(
    profile: str | None = None, pool: dict[str, dict] | None = None
) -> dict[str, KHopExperiment]:
    """The runs every 250 steps that :func:`followed_up` picks from the interval study's recording the build reads
    (``pool`` replaces it), to be run for twice the budget. The interval study is recorded at the quick profile
    only, so only there do its runs choose.

    Raises:
        ValueError: another profile without ``pool``; the rule picks none (the study has no subject under these
            batches).
    """
    if pool is None and config.get_profile(profile) != "quick":
        raise ValueError(
            f"profile={config.get_profile(profile)!r}: allowed 'quick' (the interval study whose runs choose "
            "this study's is recorded there only), or pass the runs that choose (pool)"
        )
    seeds = followed_up(EXPLORED_EVERY, pool)["seeds"]
    if not seeds:
        raise ValueError(
            f"every={EXPLORED_EVERY}: no unsolved run of the interval study has its budget in doubt; allowed: a "
            "recording with at least one (khop_four_hops.followed_up)"
        )
    every = interval_members(profile)
    return {interval_name(s, EXPLORED_EVERY): every[interval_name(s, EXPLORED_EVERY)] for s in seeds}


def second_half_gain(r: dict) -> float:
    """The rise of a run's k-hop accuracy over the second half of its budget (final minus at the evaluation nearest
    the middle step)."""
    step, acc = np.asarray(r["step"]), np.asarray(r["acc"])[:, -1]
    return float(acc[-1] - acc[int(np.argmin(np.abs(step - step[-1] / 2)))])


def interval_long_summary(
    runs: dict[str, dict],
    level: float = 0.9,
    solved: float = 0.95,
    prefix: str = "ilong_",
    followed: dict[str, tuple[int, ...]] | None = None,
) -> report.Summary:
    """The numbers of a longer interval study's runs (:func:`interval_long_members`, prefix ``"ilong_"``;
    :func:`interval_long250_members`, ``"il250_"``), named ``<prefix>*``: per seed the first step at which the
    k-hop accuracy reaches ``level`` (inf: never) and the final k-hop accuracy; the largest rise of the k-hop
    accuracy over the second half of the budget; over the runs the study follows up (``followed``, default
    :func:`followed_up` at the runs' interval: ``<prefix>followed``) how many end solved (lowest final accuracy
    over 1..k above ``solved``), in all and among those flat at chance at the shorter budget
    (``<prefix>flat``)."""
    p = f"{prefix}"
    out = {**run_sizes(next(iter(runs.values())), prefix=p), f"{p}n": (len(runs), "runs")}
    if followed is None:
        followed = followed_up(interval_of(next(iter(runs)))[1])
    ok, gain = {}, []
    for name, r in runs.items():
        seed = interval_of(name)[0]
        ok[seed] = solved_run(r, solved)
        out[f"{p}s{seed}_hk_at"] = (
            float(learned_at(r, level)[-1]),
            f"seed {seed}: first step with the k-hop accuracy at {level} (inf: never)",
        )
        out[f"{p}s{seed}_final"] = (float(np.asarray(r["acc"])[-1, -1]), f"seed {seed}: final k-hop accuracy")
        if seed in followed["seeds"]:
            gain.append(second_half_gain(r))
    missing = set(followed["seeds"]) - set(ok)
    if missing:
        raise ValueError(
            f"seeds {seed_list(sorted(missing))} are followed up but not among the runs; allowed: runs of every "
            f"followed seed {seed_list(followed['seeds'])} (record the study again)"
        )
    flat = followed["flat"]
    return report.Summary(
        out
        | {
            f"{p}followed": (
                seed_list(followed["seeds"]),
                "the seeds the study follows up (unsolved at the shorter budget)",
            ),
            f"{p}followed_n": (len(followed["seeds"]), "how many"),
            f"{p}flat": (seed_list(flat), "of those, the seeds flat at chance at the shorter budget"),
            f"{p}gain_max": (
                max(gain, default=math.nan),
                "the largest rise of a followed run's k-hop accuracy over the second half of its "
                "budget (final minus at the middle evaluation)",
            ),
            f"{p}solved_n": (
                sum(ok[s] for s in followed["seeds"]),
                f"followed runs whose lowest final accuracy is above {solved}",
            ),
            f"{p}flat_solved_n": (
                sum(ok[s] for s in flat),
                "of the followed seeds flat at chance at the shorter budget, those solved",
            ),
        }
    )


INTERVAL_HEADER = paired_header(f"every {e}" for e in INTERVALS)


# a third of the step size, for 1.5 times the budget (the profile's runs of these seeds are recorded that long)
LR = SeedVariant(
    "lr", "lr", 1, 3, 15000, "with a third of the step size", "base", "with the profile's step size"
)


def variant_summary(
    runs: dict[str, dict],
    base: dict[int, dict] | None = None,
    level: float = 0.9,
    solved: float = 0.95,
    variant: SeedVariant = WIDE,
    budget: int | None = None,
) -> report.Summary:
    """The numbers of :func:`companion.experiments.khop_studies.variant_members`' runs, named ``<tag>_*``, against the same seeds at the profile's
    settings or ``over``'s (``base``: {seed: run}, default :meth:`SeedVariant.base_runs` at the variant's budget):
    the variant's runs and how many end solved (:func:`_population`), the same of the base runs
    (``<tag>_<base>_*``), over the seeds of both how many are solved in one only (``<tag>_gained_*``,
    ``<tag>_lost_*``, ``<tag>_gap_n``), and the variant's unsolved runs (:func:`_unsolved`). "Solved" counts the hop
    counts each population trains on (:meth:`SeedVariant.trained`); a variant of the stages adds what its runs do at
    the hop counts they never train on and where they part from the base runs (:func:`_split`). ``budget``: the
    steps both populations were trained for, where a run may be cut before it (a view of
    :func:`companion.experiments.late_verdicts.stopped_views`); by default every run ends at the same step.

    Raises:
        ValueError: the base runs were trained for another budget; with ``budget``, a run that ends after it.
    """
    p = f"{variant.tag}_"
    runs_by = seeded(runs)
    base = variant.base_runs(variant.steps) if base is None else base
    steps = {int(r["step"][-1]) for r in [*runs_by.values(), *base.values()]}
    if budget is None and len(steps) != 1:
        raise ValueError(
            f"budgets {sorted(steps)}: allowed {variant.tag} and {variant.base} runs of the same "
            "number of steps"
        )
    if budget is not None and max(steps) > budget:
        raise ValueError(
            f"a run ends at step {max(steps)}: allowed runs of at most budget={budget} steps, cut or whole"
        )
    k = np.asarray(next(iter(runs.values()))["acc"]).shape[1]
    hops = variant.trained(k)
    ok = {s: solved_run(r, solved, hops) for s, r in runs_by.items()}
    ok_base = {
        s: solved_run(r, solved, variant.over.trained(k) if variant.over else None) for s, r in base.items()
    }
    out = run_sizes(next(iter(runs.values())), prefix=p) | _population(
        runs_by, ok, p, "", variant.who, level, solved
    )
    out |= _population(base, ok_base, f"{p}{variant.base}_", "", variant.base_who, level, solved)
    out |= _pair_counts(ok_base, ok, p, "lost", "gained", variant.base_who, variant.who)
    if variant.field == "levels":
        out |= _split(runs_by, base, ok, variant, level)
    return report.Summary(
        out
        | _unsolved(
            [r for s, r in runs_by.items() if not ok[s]],
            [r for s, r in runs_by.items() if ok[s]],
            p,
            level,
            hops,
        )
    )


def cut_recordings() -> tuple:
    """(seed 0's two runs recorded for 8000 steps, the seed study recorded for 16000), as book/khop_four_hops
    sets the first against the second cut at 8000 steps: the probes of book/khop_stall as that chapter reads them
    (:func:`companion.experiments.khop_stall.study_sampler`), and the seed study made under the same sampler, the
    one under which the two were trained alike (:func:`companion.recorded.same_rounding`).

    Raises:
        ValueError: the two were trained otherwise (their runs could part by rounding alone).
    """
    sampler = study_sampler()[0]
    short = recorded(PROBE_SETTINGS, experiment="khop_probe", sampler=sampler)
    long = recorded(SEED_SETTINGS, experiment="khop_seeds", sampler=sampler)
    same_rounding(short, long)
    return short, long


def _parting(r: dict, b: dict) -> int:
    """How many evaluations two runs share before their recorded stages first differ (all they share if never)."""
    a, b = np.asarray(r["stage"]), np.asarray(b["stage"])
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


def _gaps_until_parting(runs: dict[int, dict], base: dict[int, dict]) -> dict[int, float]:
    """Per seed of ``runs``, the largest difference of test accuracy from the base run of the same seed up to the
    evaluation at which the two part (:func:`_parting`): 0 where the code keeps its promise that they agree there."""
    return {s: paired_difference(r, base[s], slice(0, _parting(r, base[s]))) for s, r in runs.items()}


def split_rounding(rec, variant: SeedVariant) -> report.Summary:
    """``variant``'s recorded runs (``rec``) against its base runs until the two part (as ``<tag>_split_gap``),
    over the seeds whose base run's recording rounds as ``rec`` (:func:`companion.recorded.same_rounding`): the
    largest difference there (``<tag>_split_alike_gap``, nan over none; 0 when the code keeps its promise) and how
    many (``<tag>_split_alike_n``, ``<tag>_split_rounding``: their rounding); over the others, the seeds
    (``<tag>_split_other_seeds``, "none"), the largest difference (``<tag>_split_other_gap``, nan over none) and
    what their base runs rounded as (``<tag>_split_other_rounding``, "" over none), and the sentence that says
    so (``<tag>_split_other_text``). A base run that rounds otherwise can part from the run here by rounding
    alone, before the stages do."""
    p = f"{variant.tag}_"
    runs = seeded(recorded_runs(rec)[0])
    pairs = variant.base_pairs(variant.steps)
    base, sources = {s: r for s, (r, _) in pairs.items()}, {s: src for s, (_, src) in pairs.items()}
    gaps = _gaps_until_parting(runs, base)
    alike = [s for s in runs if sources[s].rounding == rec.rounding]
    other = [s for s in runs if s not in alike]
    trained = "; ".join(sorted({sources[s].rounding for s in other}))
    text = (
        (
            f"The earlier runs of seeds {seed_list(other)} were trained otherwise ({trained}) and differ from these"
            if len(other) > 1
            else f"The earlier run of seed {seed_list(other)} was trained otherwise ({trained}) and differs from this"
        )
        + f" before the two part by up to {max(gaps[s] for s in other):.4f}: rounding alone."
        if other
        else "No seed's earlier run was trained otherwise."
    )
    return report.Summary(
        {
            f"{p}split_alike_gap": (
                max((gaps[s] for s in alike), default=math.nan),
                "largest difference from the base run of the same seed until the two part, over the seeds "
                "whose base run rounds as these",
            ),
            f"{p}split_alike_n": (len(alike), "those seeds"),
            f"{p}split_rounding": (rec.rounding, "how these runs were trained (what decides their rounding)"),
            f"{p}split_other_seeds": (seed_list(other), "the seeds whose base run rounds otherwise"),
            f"{p}split_other_gap": (
                max((gaps[s] for s in other), default=math.nan),
                "largest difference from the base run until the two part, over those seeds",
            ),
            f"{p}split_other_rounding": (trained, "how those base runs were trained"),
            f"{p}split_other_text": (text, "what the text says of them"),
        }
    )


def _split(
    runs: dict[int, dict],
    base: dict[int, dict],
    ok: dict[int, bool],
    variant: SeedVariant,
    level: float = 0.9,
) -> dict:
    """Summary entries of ``variant``'s runs ({seed: run}), whose stages differ from the base runs' of the same
    seeds: each is the base run until the evaluation at which the two move to different stages (the last before
    their recorded stages, the stage trained on before each evaluation, differ), so their test accuracies up to
    there agree (``<p>split_gap``, the largest difference; 0 when the code keeps that promise); the median step of
    that evaluation (``<p>split_med``, over the runs that get there); how many runs learned the stage they moved to
    there (accuracy at ``level``; ``<p>split_next_n``), how many base runs learned theirs
    (``<p>split_base_next_n``) and the most steps one took (``<p>split_base_next_max``); over the seeds that part,
    how many learned their next stage in one of the pair only (:func:`_pair_counts`, named ``<p>next_*``); and the
    final accuracy of the solved runs at the hop counts they never train on (``<p>untrained_min``/``_max``)."""
    p = f"{variant.tag}_"
    at, nxt, nxt_base, base_took = [], {}, {}, []
    for s, r in runs.items():
        a, b = np.asarray(r["stage"]), np.asarray(base[s]["stage"])
        end = _parting(r, base[s])
        if end < min(len(a), len(b)):
            t = float(np.asarray(r["step"])[end - 1])
            at.append(t)
            nxt[s] = bool(np.isfinite(learned_at(r, level)[a[end] - 1]))
            base_took.append(float(learned_at(base[s], level)[b[end] - 1]) - t)
            nxt_base[s] = bool(np.isfinite(base_took[-1]))
    k = np.asarray(next(iter(runs.values()))["acc"]).shape[1]
    never = [h - 1 for h in range(1, k + 1) if h not in variant.trained(k)]
    free = [float(v) for s, r in runs.items() if ok[s] for v in np.asarray(r["acc"])[-1, never]]
    return {
        f"{p}split_gap": (
            max(_gaps_until_parting(runs, base).values()),
            "largest difference of test accuracy from the base run of the same seed up to "
            "the evaluation at which the two move to different stages",
        ),
        f"{p}split_med": (
            float(np.median(at)) if at else math.nan,
            "median step of that evaluation (the runs part after it)",
        ),
        f"{p}split_n": (len(at), "runs that part from their base run within the budget"),
        f"{p}split_next_n": (
            sum(nxt.values()),
            f"runs that learned (at {level}) the stage they moved to there",
        ),
        f"{p}split_base_next_n": (
            sum(nxt_base.values()),
            "base runs that learned the stage they moved to there",
        ),
        f"{p}split_base_next_max": (
            max(base_took) if base_took else math.nan,
            "base runs: the most steps from there to learning the stage they moved to (inf: one never did)",
        ),
        **_pair_counts(
            nxt_base,
            nxt,
            f"{p}next_",
            "lost",
            "gained",
            f"{variant.base_who}, counting the stage after the split as solved",
            f"{variant.who}, counting the same",
        ),
        f"{p}untrained_min": (
            min(free) if free else math.nan,
            "solved runs: lowest final accuracy at a hop count never trained on",
        ),
        f"{p}untrained_max": (
            max(free) if free else math.nan,
            "solved runs: highest final accuracy at a hop count never trained on",
        ),
    }


# --- when the runs stopped: the chapter's rows on each recorded study, with every run the study reads cut in turn ---

# the recorded studies whose rows the chapter checks, by the name of their summary in the chapter: (experiment,
# settings) of the recording the build reads, or the variant (its recording khop_<tag>)
# (companion.experiments.late_rows.KHOP_FOUR_HOPS names their rows)
STUDIES = {
    "deep": ("khop", RECORDED_DEEPER),
    "seeds": ("khop_seeds", SEED_SETTINGS),
    "interval": ("khop_interval", INTERVAL_SETTINGS),
    "ilong": ("khop_interval_long", INTERVAL_LONG_SETTINGS),
    "il250": ("khop_interval_long250", INTERVAL_LONG_SETTINGS),
    "wide": WIDE,
    "lrs": LR,
    "dbl": DOUBLING,
}


BASE_PREFIX = "base, "  # a variant's base run among the runs of variant_over: "base, seed 3"


def stopped_over(study: str) -> tuple[Callable[[dict], report.Summary], dict[str, dict]]:
    """(summary, runs) of a recorded study of :data:`STUDIES`: every run its summary reads, by name, and the summary
    its recording declares (:func:`companion.experiments.khop_studies.study_summary`, unprefixed) as a function of
    those runs alone, so that a view that cuts one of them (:func:`companion.experiments.late_verdicts.stopped_studies`)
    cuts it wherever the summary reads it. The interval study's runs are :func:`interval_pool`'s (its own and the seed
    study's, cut at its budget); a longer interval study's, its own, the runs it follows up fixed by the interval study
    (:func:`followed_up`); a variant's, :func:`variant_over`'s.

    Raises:
        ValueError: a study not in :data:`STUDIES`; its recording missing (the command that records it named).
    """
    check_choice("study", study, tuple(STUDIES))
    if isinstance(STUDIES[study], SeedVariant):
        return variant_over(STUDIES[study])
    rec = study_recorded(STUDIES[study])
    runs, summary = recorded_runs(rec)[0], study_summary(rec)
    if study == "interval":
        return partial(summary, earlier={}), interval_pool(runs)
    if study in ("ilong", "il250"):
        return partial(summary, followed=followed_up(interval_of(next(iter(runs)))[1])), runs
    return summary, runs


def variant_over(variant: SeedVariant) -> tuple[Callable[[dict], report.Summary], dict[str, dict]]:
    """:func:`stopped_over` of a variant's recording: its own runs and its base runs (:meth:`SeedVariant.base_runs`
    at its budget, named ``BASE_PREFIX + seed_name(seed)``), and its summary (:func:`variant_summary`) of them.

    Raises:
        ValueError: the variant's recording, or its base runs, missing.
    """
    rec = study_recorded(variant)
    runs, summary = recorded_runs(rec)[0], study_summary(rec)
    steps = int(next(iter(runs.values()))["step"][-1])
    base = {f"{BASE_PREFIX}{seed_name(s)}": r for s, r in variant.base_runs(steps).items()}

    def of_both(both: dict[str, dict]) -> report.Summary:
        own = {name: r for name, r in both.items() if not name.startswith(BASE_PREFIX)}
        of_base = seeded({name.removeprefix(BASE_PREFIX): r for name, r in both.items() if name not in own})
        return summary(own, base=of_base, budget=steps)

    return of_both, runs | base
