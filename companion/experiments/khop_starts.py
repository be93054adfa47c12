"""The chapter ``book/khop_starts`` (our study): training examples that start at other tables, and what the
curriculum's move to the last stage does to the runs (answers, walks, the move's probes), with the numbers the
chapter checks. Task, model, training, runs and probes are :mod:`companion.experiments.khop`'s."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from companion import cache, config, report
from companion.config import check_int
from companion.experiments.khop import KHopExperiment, as_tensors, hop_accuracy, train_run
from companion.experiments.khop_curves import last_stage_at
from companion.experiments.khop_probes import (
    PROBE,
    ProbeStudy,
    hop_probe,
    member_of,
)
from companion.experiments.khop_studies import (
    ANYSTART,
    RECORDED_K,
    VARIANT_SEEDS,
    SeedVariant,
    paired_difference,
    recorded,
    recorded_runs,
    seed_list,
    seed_name,
    seeded,
    truncated,
)

MODULES = ("companion.experiments.khop_starts",)  # the cache key of this module's runs (its imports included)


def stage_gap(runs: dict[int, dict], other: dict[int, dict], stage: int, prefix: str) -> report.Summary:
    """Two studies' runs of the same seeds ({seed: run}) whose batches agree while they train on the stages up to
    ``stage`` (as :data:`companion.experiments.khop_studies.ONESTART`'s and :data:`companion.experiments.khop_studies.ANYSTART`'s, or :data:`companion.experiments.khop_studies.LONGSTART`'s and :data:`companion.experiments.khop_studies.DOUBLING`'s, on the
    first stage): the largest difference of their test accuracies over the evaluations before the first at which
    either trained past ``stage``, and of their stages up to that one (``<prefix>_stage_gap``; 0 when the code keeps
    that promise); ``<prefix>_stage_med``, the median step of the last evaluation before it.

    Raises:
        ValueError: ``stage`` below 1, or a seed of ``runs`` missing from ``other``.
    """
    check_int("stage", stage, low=1)
    gaps, at = [], []
    for s, a in runs.items():
        if s not in other:
            raise ValueError(f"seed {s} is not among the other study's seeds: allowed {sorted(other)}")
        b = other[s]
        n = min(len(a["stage"]), len(b["stage"]))
        sa, sb = np.asarray(a["stage"])[:n], np.asarray(b["stage"])[:n]
        past = np.flatnonzero((sa > stage) | (sb > stage))
        end = int(past[0]) if len(past) else n
        gaps.append(paired_difference(a, b, slice(0, end), stages=slice(0, min(end + 1, n))))
        at.append(float(np.asarray(a["step"])[end - 1]))
    return report.Summary(
        {
            f"{prefix}_stage_gap": (
                max(gaps),
                f"largest difference of test accuracy (or stage) from the other study's run "
                f"of the same seed before either trains past {stage} hops",
            ),
            f"{prefix}_stage_med": (float(np.median(at)), "median step of the last evaluation before that"),
        }
    )


def start_accuracy(exp: KHopExperiment, state: dict, n: int = 1024) -> np.ndarray:
    """(k, k): the trained model's accuracy on ``n`` fresh examples of k' hops starting at table s (row k' - 1,
    column s - 1; :meth:`KHopTask.sample`), stream "start-test" of its seed; NaN where the hops do not fit
    (s + k' - 1 > k). Row k' - 1, column 0 is the test set's kind of example (from table 1).

    Raises:
        ValueError: ``n`` below 1.
    """
    check_int("n (examples per cell)", n, low=1)
    task, model = exp.task(), exp.model()
    model.load_state_dict(state)
    rng = np.random.default_rng(config.seed_streams(exp.seed, ["start-test"])["start-test"])
    cells = [(h, s) for h in range(1, task.k + 1) for s in range(1, task.k - h + 2)]
    tests = [as_tensors(task.sample(rng, np.full(n, h), np.full(n, s)), "cpu") for h, s in cells]
    out = np.full((task.k, task.k), np.nan)
    for (h, s), acc in zip(cells, hop_accuracy(model, tests)):
        out[h - 1, s - 1] = acc
    return out


# the seed and budget of the khop_anystart run trained live and tested from every table
START_PROBE = (0, 2000)


def start_rows(acc: np.ndarray) -> tuple[list[str], list[list]]:
    """:func:`start_accuracy` as a table: header and one row per hop count, "" where the hops do not fit."""
    k = acc.shape[0]
    return (
        ["hops"] + [f"from table {s}" for s in range(1, k + 1)],
        [[h] + [f"{a:.2f}" if np.isfinite(a) else "" for a in acc[h - 1]] for h in range(1, k + 1)],
    )


def start_summary(acc: np.ndarray, exp: KHopExperiment, prefix: str = "start_") -> report.Summary:
    """Summary entries of :func:`start_accuracy` for ``exp``'s model (a curriculum whose examples start at any
    table; k hops only from table 1): the run's seed and budget (``<prefix>seed``, ``<prefix>steps``), the lowest
    accuracy over the starts of each hop count below k that its stages train on (``<prefix>h<k'>_min``), the
    accuracy at k hops (``<prefix>k``), the highest over the hop counts never trained on, at every start
    (``<prefix>untrained_max``, NaN if none), and chance (``<prefix>chance``)."""
    k, trained = exp.k, exp.stages
    never = [h for h in range(1, k + 1) if h not in trained]
    out = {f"{prefix}seed": (exp.seed, "the run's seed"), f"{prefix}steps": (exp.steps, "its training steps")}
    out |= {
        f"{prefix}h{h}_min": (
            float(np.nanmin(acc[h - 1])),
            f"lowest accuracy over the start tables, {report.count_noun(h, 'hop')}",
        )
        for h in trained
        if h < k
    }
    out[f"{prefix}k"] = (float(acc[k - 1, 0]), f"accuracy at {k} hops (from table 1, the only start)")
    out[f"{prefix}untrained_max"] = (
        float(np.nanmax(acc[np.asarray(never) - 1])) if never else math.nan,
        "highest accuracy at a hop count never trained on, over its start tables",
    )
    out[f"{prefix}chance"] = (1 / exp.N, "chance accuracy, 1 / N")
    return report.Summary(out)


# the khop_anystart run trained live (:data:`START_PROBE`)
START_PROBED = f"seed {START_PROBE[0]}, from any table"


# its four-hop and two-hop examples
ANYSTART_PROBE = ProbeStudy({START_PROBED: "a0"}, "aprobe", hops=(RECORDED_K, 2))


# the same run stopped where it moves to four hops (none trained yet)
MOVE_PROBED = f"{START_PROBED}, at the move"


ANYSTART_MOVE_PROBE = ProbeStudy({MOVE_PROBED: "m0"}, "mprobe", hops=(RECORDED_K, 2))


def probe_run_and_move(exp: KHopExperiment, progress: bool = True, device=None) -> tuple[dict, dict]:
    """:func:`companion.experiments.khop_probes.probe_run` of a curriculum run ``exp`` and, from the same training, what :func:`companion.experiments.khop_probes.probe_run` of the
    run stopped at its move to the last stage gives (``exp`` with ``steps`` = that evaluation step: the curves up
    to it, the state there, which ``train_run(..., keep=(0,))`` keeps; a run's training does not depend on its
    budget), trained once and cached as one run.

    Raises:
        ValueError: a run that never moves to its last stage, or starts there.
    """
    r = cache.load_or_compute(
        "khop-and-move", exp, lambda: train_run(exp, progress, device, keep=(0,)), MODULES
    )
    at = last_stage_at(r)
    if not np.isfinite(at) or at <= 0 or 0 not in r["kept"]:
        raise ValueError(
            f"the run moves to its last stage at {at}: allowed a step after the start and within "
            f"steps={exp.steps}"
        )
    full = {k: v for k, v in r.items() if k != "kept"}
    short = dataclasses.replace(exp, steps=int(at))
    return {**full, "exp": exp}, {**truncated(full, int(at)), "state": r["kept"][0], "exp": short}


def answers_rows(summary, study: ProbeStudy = PROBE) -> tuple[list[str], list[list]]:
    """What the probed models answer: header and one row per run of ``study`` and probed hop count h (its
    :func:`companion.experiments.khop_probes.probe_summary`), the share of the model's answers on the h-hop examples that are x and each v_j (blank
    past v_h)."""
    k = int(summary[f"{study.shared}_k"])
    hops = study.probed(k)
    rows = [
        [
            name,
            h,
            *(summary[f"{study.prefix(tag, h, k)}_answers_v{j}"] for j in range(h + 1)),
            *[""] * (max(hops) - h),
        ]
        for name, tag in study.tags.items()
        for h in hops
    ]
    return ["run", "hops", "answers x", *(f"answers v_{j}" for j in range(1, max(hops) + 1))], rows


# --- the stages 1, 2, 4, every seed at its move to four hops (recorded: ``khop_anystart_move``, ``khop_doubling_move``)


def move_members(profile: str | None = None, variant: SeedVariant = ANYSTART) -> dict[str, KHopExperiment]:
    """The recorded runs of ``variant`` (``khop_<tag>``; :data:`companion.experiments.khop_studies.ANYSTART` by default, :data:`companion.experiments.khop_studies.DOUBLING`,
    :data:`companion.experiments.khop_studies.ONESTART`, :data:`companion.experiments.khop_studies.LONGSTART`) for seeds :data:`companion.experiments.khop_studies.VARIANT_SEEDS`, each stopped at the evaluation where its
    recording moves to k hops (:meth:`SeedVariant.member` with that budget: the recorded run's first steps, no batch
    with k hops; the probe of seed 0 at its move in the chapter is the first of :data:`companion.experiments.khop_studies.ANYSTART`'s).

    Raises:
        ValueError: a profile other than quick (the budgets come from the quick recording), or a recorded run that
            never moves.
    """
    name = f"khop_{variant.tag}"
    if config.get_profile(profile) != "quick":
        raise ValueError(
            f"{name}_move with profile {profile!r}: allowed 'quick' (its budgets are the moves of the "
            f"quick {name} recording)"
        )
    runs = seeded(recorded_runs(recorded(variant.settings(), experiment=name))[0])
    out = {}
    for s in VARIANT_SEEDS:
        move = last_stage_at(runs[s])
        if not np.isfinite(move) or move <= 0:
            raise ValueError(
                f"seed {s}'s recorded {name} run moves to its last stage at {move}: allowed a step "
                "after the start (a budget that ends there)"
            )
        out[seed_name(s)] = variant.member(s, int(move))
    return out


MOVE_MEASURES = {
    "v2": "v_2 at position 0, best over the layers",
    "walk": "v_2 at hop 1's entry, best over the layers",
    "read": "position 0's attention on hop 1's entry, largest over the blocks",
    "answers_v2": "share of the answers that are v_2",
    "acc": "accuracy",
}


def move_summary(runs: dict[str, dict], level: float = 0.9, prefix: str = "mv") -> report.Summary:
    """:func:`companion.experiments.khop_probes.hop_probe` of each run of :func:`move_members` (from :func:`companion.experiments.khop_probes.probe_run`) on k-hop (four in the recorded
    studies) and two-hop examples, reduced to what the chapter's probe of seed 0 at its move turned on
    (:data:`MOVE_MEASURES`): ``mv<seed>_<measure>`` on k hops and ``mv<seed>_h2_<measure>`` on two;
    ``mv<seed>_step``, its move (``mv``: ``prefix``, so that two studies glue on one page). Across the seeds:
    ``mv_n``; ``mv_walk2_n``, the seeds whose hop 1's entry holds v_2 on two hops (probe at ``level`` or more:
    table 1's entries walk to table 2) and ``mv_walk2_seeds``; ``mv_walk_kept_n``, of those, the seeds where it
    still does on k hops, and ``mv_walk_max``, the highest k-hop value among them (NaN if none); ``mv_v2_n``, the
    seeds whose position 0 holds v_2 on k hops (at ``level``), and ``mv_v2_max``; ``mv_h2_acc_min``, the lowest
    two-hop accuracy; ``mv_chance``, 1/N.

    Raises:
        ValueError: a run without its configuration, or one with fewer than three hops.
    """
    out, per, k = {}, {}, 0
    for name, r in runs.items():
        exp = member_of(name, r)
        k = exp.k
        check_int("k (hops) of a run probed at its move", exp.k, low=3)
        tag, per[name] = f"{prefix}{exp.seed}", {}
        out[f"{tag}_step"] = (exp.steps, f"{name}: its move to {exp.k} hops (its training steps)")
        for h in (exp.k, 2):
            res, pre = hop_probe(exp, r["state"], hops=h), tag if h == exp.k else f"{tag}_h{h}"
            got = {
                "v2": res["probe"][:, 1].max(),
                "walk": np.nanmax(res["chain"][:, 0, 1]),
                "read": res["attention"][:, 0].max(),
                "answers_v2": res["answers"][2],
                "acc": res["acc"],
            }
            for key, what in MOVE_MEASURES.items():
                out[f"{pre}_{key}"] = (float(got[key]), f"{name}, {h}-hop examples: {what}")
                per[name][h if h == 2 else "k", key] = float(got[key])
    walkers = [n for n, v in per.items() if v[2, "walk"] >= level]
    out[f"{prefix}_n"] = (len(runs), "runs probed at their move")
    out[f"{prefix}_walk2_n"] = (
        len(walkers),
        f"seeds whose hop 1's entry holds v_2 on two hops (probe >= {level})",
    )
    out[f"{prefix}_walk2_seeds"] = (seed_list(int(n.split()[-1]) for n in walkers), "those seeds")
    out[f"{prefix}_walk_kept_n"] = (
        sum(per[n]["k", "walk"] >= level for n in walkers),
        f"of those, seeds where it still does on {k} hops",
    )
    out[f"{prefix}_walk_max"] = (
        max((per[n]["k", "walk"] for n in walkers), default=math.nan),
        f"of those, the highest probe of v_2 at hop 1's entry on {k} hops",
    )
    out[f"{prefix}_v2_n"] = (
        sum(v["k", "v2"] >= level for v in per.values()),
        f"seeds whose position 0 holds v_2 on {k} hops (probe >= {level})",
    )
    out[f"{prefix}_v2_max"] = (
        max((v["k", "v2"] for v in per.values()), default=math.nan),
        f"the highest probe of v_2 at position 0 on {k} hops",
    )
    out[f"{prefix}_h2_acc_min"] = (
        min((v[2, "acc"] for v in per.values()), default=math.nan),
        "the lowest two-hop accuracy at the move",
    )
    out[f"{prefix}_chance"] = (1 / exp.N, "chance: 1/N")
    return report.Summary(out)


MOVE_HEADER = [
    "run",
    "moves at",
    "2 hops: accuracy",
    "2 hops: v_2 at hop 1's entry",
    "2 hops: position 0 on hop 1's entry",
    "4 hops: v_2 at hop 1's entry",
    "4 hops: position 0 on hop 1's entry",
    "4 hops: v_2 at position 0",
    "4 hops: answers v_2",
]


def move_rows(summary, prefix: str = "mv") -> list[list]:
    """One row per seed of :func:`move_summary` with ``prefix`` (columns :data:`MOVE_HEADER`)."""
    seeds = [s for s in VARIANT_SEEDS if f"{prefix}{s}_step" in summary]
    return [
        [
            seed_name(s),
            summary[f"{prefix}{s}_step"],
            *(summary[f"{prefix}{s}_h2_{k}"] for k in ("acc", "walk", "read")),
            *(summary[f"{prefix}{s}_{k}"] for k in ("walk", "read", "v2", "answers_v2")),
        ]
        for s in seeds
    ]


def move_medians(summary, prefix: str = "mv") -> report.Summary:
    """The medians over the seeds of :func:`move_summary`'s per-seed measures (``prefix``): ``<prefix>_v2_med`` and
    ``<prefix>_answers_v2_med`` (k hops: v_2 at position 0, answers v_2), ``<prefix>_walk_med`` and
    ``<prefix>_h2_walk_med`` (v_2 at hop 1's entry on k and on two hops), and the range of each,
    ``<prefix>_<measure>_lo`` and ``_hi``; read from the per-seed entries, so that a recording made before these
    medians existed gives them too.

    Raises:
        ValueError: no seed of ``prefix`` in ``summary``.
    """
    seeds = [s for s in VARIANT_SEEDS if f"{prefix}{s}_step" in summary]
    if not seeds:
        raise ValueError(
            f"prefix {prefix!r}: no seed's entries ({prefix}0_step, ...) in the summary; allowed the "
            "prefix of a move_summary"
        )
    out = {}
    for key, what in (
        ("v2", MOVE_MEASURES["v2"]),
        ("answers_v2", MOVE_MEASURES["answers_v2"]),
        ("walk", MOVE_MEASURES["walk"]),
        ("h2_walk", f"two hops: {MOVE_MEASURES['walk']}"),
    ):
        v = np.asarray([summary[f"{prefix}{s}_{key}"] for s in seeds], dtype=float)
        where = "" if key.startswith("h2") else "k hops: "
        out[f"{prefix}_{key}_med"] = (float(np.median(v)), f"median over the seeds, {where}{what}")
        out[f"{prefix}_{key}_lo"] = (float(v.min()), f"lowest over the seeds, {where}{what}")
        out[f"{prefix}_{key}_hi"] = (float(v.max()), f"highest over the seeds, {where}{what}")
    return report.Summary(out)


MOVE_COMPARE_HEADER = [
    "study",
    "seeds walking at table 1 (2 hops)",
    "of those, still on 4 hops",
    "4 hops: v_2 at position 0, median (range)",
    "4 hops: answers v_2, median (range)",
]


def move_compare_rows(studies: dict[str, tuple]) -> list[list]:
    """One row per study ({label: (move summary, prefix)}) of :data:`MOVE_COMPARE_HEADER`: the counts of
    :func:`move_summary` and the medians and ranges of :func:`move_medians`."""
    rows = []
    for label, (summary, p) in studies.items():
        m = move_medians(summary, p)
        rows.append(
            [
                label,
                summary[f"{p}_walk2_n"],
                summary[f"{p}_walk_kept_n"],
                *(
                    f"{m[f'{p}_{k}_med']:.2f} ({m[f'{p}_{k}_lo']:.2f}-{m[f'{p}_{k}_hi']:.2f})"
                    for k in ("v2", "answers_v2")
                ),
            ]
        )
    return rows
