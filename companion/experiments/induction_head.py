"""The chapter ``book/induction_head``: every run of the birth of an induction head with fixed triggers (freeze
schedules, seeds, the memories written in) and the numbers the chapter checks. The runs, probes and memories are
:mod:`companion.experiments.induction`'s; the one- and two-layer models and the final feed-forward layer are
:mod:`companion.experiments.induction_layers`'."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from companion import report
from companion.experiments.induction import (
    PROBES,
    PUBLIC_THREE,
    SCHEDULES,
    THREE,
    InductionExperiment,
    InductionRun,
    constructed_run,
    curves,
    run,
    schedules,
    seeds,
)


def study_members(profile: str | None = None) -> dict[str, InductionExperiment]:
    """Every run :func:`study` trains, by name: the freeze schedules (by their names) and the seeds other than the
    joint schedule's (``"seed 1"``, ...)."""
    sched = schedules(profile)
    out = dict(sched)
    out.update({f"seed {s}": e for s, e in seeds(profile).items() if e != sched["joint"]})
    return out


def study_from_runs(runs: dict) -> dict:
    """:func:`study`'s result from the runs of :func:`study_members` (trained here, or by a recording): a seed
    that is not among them is the joint schedule's run."""
    joint = runs["joint"]
    return {
        **_grouped(runs),
        "constructed": constructed_run(joint.exp),
        "constructed_key_left": constructed_run(joint.exp, convention="key left"),
    }


def _grouped(runs: dict) -> dict:
    """:func:`study_from_runs`' runs by role: the schedules and the seeds."""
    joint = runs["joint"]
    named = {k: r for k, r in runs.items() if k.startswith("seed ")}
    by_seed = {joint.exp.seed: joint, **{int(k.split()[1]): r for k, r in named.items()}}
    return {"schedules": {n: runs[n] for n in SCHEDULES}, "seeds": dict(sorted(by_seed.items()))}


def study_runs(res: dict) -> dict[str, InductionRun]:
    """The runs of :func:`study`'s result ``res`` by :func:`study_members`' names (:func:`study_from_runs` undone)."""
    joint = res["schedules"]["joint"]
    return {**res["schedules"], **{f"seed {s}": r for s, r in res["seeds"].items() if r is not joint}}


def summary_of_runs(res: dict) -> Callable[[dict], report.Summary]:
    """``runs`` (by :func:`study_runs`' names) -> :func:`summary` of :func:`study`'s result ``res`` with its runs
    replaced by those, the memories written in kept (they are no run's): the chapter's summary of each view of
    :func:`companion.experiments.late_verdicts.stopped_views`."""
    return lambda runs: summary({**res, **_grouped(runs)})


def study(profile: str | None = None, progress: bool = True) -> dict:
    """Every run of ``book/induction_head``: the freeze schedules, the seed runs and the slide's memories written
    in. The one- and two-layer models and the final-W_F model are
    :func:`companion.experiments.induction_layers.study`'s, the random-trigger runs
    :func:`companion.experiments.induction_random.random_study`'s."""
    return study_from_runs({n: run(e, progress=progress) for n, e in study_members(profile).items()})


def learning_order(runs: dict) -> dict[str, np.ndarray]:
    """Per run (e.g. per seed): t90 of each probe, the first evaluated step at which it reaches 0.9."""
    return {
        p: np.array([r.first_step_reaching(p) for r in runs.values()]) for p in (*PROBES, "probe_QK2_all")
    }


def summary(res: dict) -> report.Summary:
    """The claim values of :func:`study` (see ``data/claims.toml``, ids ``ih.*`` of ``book/induction_head``)."""
    sched = res["schedules"]
    joint = sched["joint"]
    s = joint.exp.unfreeze_at
    t = learning_order(res["seeds"])
    n_seeds = len(res["seeds"])
    return report.Summary(
        {
            "acc_constructed": (
                res["constructed"]["acc"],
                "the slide's memories written in: in-context accuracy",
            ),
            "acc_constructed_key_left": (
                res["constructed_key_left"]["acc"],
                "the same, the key-query formulas read with the slide's x_k^T W_KQ x_q (transposed in the model)",
            ),
            "acc_joint": (
                joint.final("acc"),
                "three matrices trained jointly: in-context accuracy at the end",
            ),
            "n_seeds": (n_seeds, "seeds of the joint run"),
            "t90_OV2": (
                np.median(t["probe_OV2"]),
                "joint: first step with the W_OV^2 probe >= 0.9 (median over seeds)",
            ),
            "t90_QK2": (np.median(t["probe_QK2"]), "joint: the same for W_QK^2 (median)"),
            "t90_QK2_all": (
                np.median(t["probe_QK2_all"]),
                "joint: the same for W_QK^2, N-way probe (median)",
            ),
            "t90_QK1_early": (
                np.median(t["probe_QK1_early"]),
                f"joint: the same for W_QK^1 on t < {joint.exp.early_cutoff} (median)",
            ),
            "t90_QK1": (np.median(t["probe_QK1"]), "joint: the same for W_QK^1 on all positions (median)"),
            "order_ov_qk2_min": (
                (t["probe_QK2"] - t["probe_OV2"]).min(),
                "t90(W_QK^2) - t90(W_OV^2), smallest over seeds",
            ),
            "order_ov_qk2_max": ((t["probe_QK2"] - t["probe_OV2"]).max(), "the same, largest over seeds"),
            "order_ov_qk2_abs": (
                -(t["probe_QK2"] - t["probe_OV2"]).max(),
                "W_QK^2's lead over W_OV^2, smallest over seeds",
            ),
            "order_ov_qk2all_max": (
                (t["probe_QK2_all"] - t["probe_OV2"]).max(),
                "t90(W_QK^2, N-way probe) - t90(W_OV^2), largest over seeds",
            ),
            "order_qk2_qk1_min": (
                (t["probe_QK1_early"] - t["probe_QK2"]).min(),
                "t90(W_QK^1 early) - t90(W_QK^2), smallest over seeds",
            ),
            "early_cutoff": (joint.exp.early_cutoff, "early positions are t < this"),
            "qk1_early_final": (
                joint.final("probe_QK1_early"),
                "joint: W_QK^1 probe on early positions at the end",
            ),
            "qk1_all_final": (joint.final("probe_QK1"), "joint: W_QK^1 probe on all positions at the end"),
            "early_gap": (
                joint.final("probe_QK1_early") - joint.final("probe_QK1"),
                "early minus all positions",
            ),
            "unfreeze_at": (s, "the unfreeze step of the staged runs"),
            "ov_late_acc": (
                sched["W_OV^2 frozen first"].at("acc", s),
                "W_OV^2 frozen first: in-context accuracy at the unfreeze step",
            ),
            "ov_alone_acc": (
                sched["both W_QK frozen first"].at("acc", s),
                "both W_QK frozen first: in-context accuracy at the unfreeze step",
            ),
            "ov_alone_probe": (
                sched["both W_QK frozen first"].at("probe_OV2", s),
                "the same run: W_OV^2 probe at the unfreeze step",
            ),
            "qk2_first_acc_gap": (
                sched["W_QK^1 frozen first"].at("acc", s) - sched["W_QK^2 frozen first"].at("acc", s),
                "accuracy at the unfreeze step: W_QK^1 frozen first minus W_QK^2 frozen first",
            ),
            "qk2_first_t90_gap": (
                sched["W_QK^2 frozen first"].first_step_reaching("acc")
                - sched["W_QK^1 frozen first"].first_step_reaching("acc"),
                "first step with accuracy >= 0.9: W_QK^2 frozen first minus W_QK^1 frozen first",
            ),
            **{
                f"{k}_t90": (
                    sched[name].first_step_reaching("acc"),
                    f"{name}: first step with accuracy >= 0.9",
                )
                for k, name in (("qk2_first", "W_QK^1 frozen first"), ("qk1_first", "W_QK^2 frozen first"))
            },
            "joint_t90": (joint.first_step_reaching("acc"), "joint: first step with accuracy >= 0.9"),
            "ov_alone_t90": (
                sched["both W_QK frozen first"].first_step_reaching("probe_OV2"),
                "both W_QK frozen first: first step at which W_OV^2's probe, trained alone, reaches 0.9",
            ),
            "after_release_t90": (
                sched["both W_QK frozen first"].first_step_reaching("acc") - s,
                "the same run: steps from the release to accuracy 0.9",
            ),
            "joint_lead": (
                sched["both W_QK frozen first"].first_step_reaching("probe_OV2")
                + sched["both W_QK frozen first"].first_step_reaching("acc")
                - s
                - joint.first_step_reaching("acc"),
                "the slide's order in sequence (W_OV^2 alone until stored, then all three; estimated from the "
                "staged run) minus joint training, steps to accuracy 0.9",
            ),
            "eval_every": (joint.exp.eval_every, "steps between evaluations"),
            "seconds": (
                sum(
                    r.seconds
                    for r in [*sched.values(), *(r for s_, r in res["seeds"].items() if r is not joint)]
                ),
                "training time of all runs (s)",
            ),
        }
    )


def schedule_table(res: dict) -> str:
    """Markdown: per schedule, accuracy and probes at the unfreeze step and at the end, and t90 of the accuracy."""
    rows = []
    for name, r in res["schedules"].items():
        s = r.exp.unfreeze_at
        rows.append(
            [
                name,
                *(report.format_value(r.at(k, s), 3) for k in ("acc", *PROBES)),
                report.format_value(r.final("acc"), 3),
                report.format_value(r.first_step_reaching("acc")),
            ]
        )
    head = ["schedule", "acc", "W_OV^2", "W_QK^2", "W_QK^1 early", "W_QK^1", "final acc", "t90(acc)"]
    return report.markdown_table(head, rows)


# --- the learning order over ten seeds, in both parameterisations (recorded: ``python -m companion record
# induction_order``) ---

ORDER_SEEDS = tuple(range(10))
# label -> (the value maps, the three trained memories): ours (one learned W_V^2) and the public code's (W_O^2
# learned against a frozen random W_V^2, and W_O^1 W_V^1 a product of two frozen random matrices)
ORDER_MODELS = {"ours": ("W_V", THREE), "public": ("W_O W_V", PUBLIC_THREE)}
ORDER_PROBES = ("probe_OV2", "probe_QK2", "probe_QK1_early")


def order_members(profile: str | None = None) -> dict[str, InductionExperiment]:
    """The joint run (three memories trained, nothing frozen) for each of :data:`ORDER_SEEDS` and both
    parameterisations of :data:`ORDER_MODELS`, evaluated twice as often as the chapter's runs (every 5 steps in
    ``quick``) so that the steps at which the probes pass 0.9 are resolved more finely: ``"ours seed 0"``, ...,
    ``"public seed 9"``."""
    out, base = {}, seeds(profile)[0]
    for label, (value_map, trained) in ORDER_MODELS.items():
        for s in ORDER_SEEDS:
            out[f"{label} seed {s}"] = InductionExperiment.for_profile(
                profile,
                seed=s,
                value_map=value_map,
                trained=trained,
                eval_every=max(1, base.eval_every // 2),
            )
    return out


def sign_test(k: int, n: int) -> float:
    """One-sided exact sign test: the probability of at least ``k`` successes in ``n`` fair coin flips (1 when
    n = 0).

    >>> sign_test(10, 10), round(sign_test(8, 10), 4), sign_test(0, 0)
    (0.0009765625, 0.0547, 1.0)
    """
    from scipy.stats import binomtest

    if n == 0:
        return 1.0
    return float(binomtest(k, n, 0.5, alternative="greater").pvalue)


def _nan(fn, x: np.ndarray) -> float:
    """``fn`` (a nan-ignoring reduction) of ``x``; nan when every entry is nan (a tie in every seed)."""
    return float(fn(x)) if (~np.isnan(x)).any() else float("nan")


def order_summary(runs: dict[str, InductionRun]) -> report.Summary:
    """Per parameterisation of :data:`ORDER_MODELS` (``order_<label>_...``): for each seed, the first evaluated
    steps at which the W_QK^2 and W_OV^2 probes pass 0.9 and their difference (``_gap_s<seed>``: t90(W_QK^2) -
    t90(W_OV^2)); the seeds in which W_QK^2's probe passes first, W_OV^2's first, or both at the same evaluation
    (a tie, left out of the test; so is a seed in which neither passes); the one-sided sign-test p-value that W_QK^2's passes first (``_sign_p``) and
    that W_OV^2's does (``_sign_p_ov2``); the seeds in which W_QK^1's early-position probe passes no later than
    W_QK^2's (``_qk1_not_last``) and in which the three pass in the slide's order (``_slide_order``); the median
    and largest gap (over the seeds where it is defined); and the smallest t90(W_QK^1, early
    positions) - t90(W_QK^2) (``_qk1_last_min``: W_QK^1 last)."""
    out: dict = {}
    for label in ORDER_MODELS:
        mine = {r.exp.seed: r for k, r in runs.items() if k.startswith(f"{label} seed ")}
        if not mine:
            continue
        t = learning_order(dict(sorted(mine.items())))
        with np.errstate(invalid="ignore"):  # a probe that never passes (inf) against another: a tie (nan)
            gap = t["probe_QK2"] - t["probe_OV2"]
            qk1_after = t["probe_QK1_early"] - t["probe_QK2"]
        qk2_first, ov2_first = int((gap < 0).sum()), int((gap > 0).sum())
        n = qk2_first + ov2_first
        tag = f"order_{label}"
        for s, g in zip(sorted(mine), gap):
            out[f"{tag}_gap_s{s}"] = (float(g), f"{label}, seed {s}: t90(W_QK^2) - t90(W_OV^2) (steps)")
        out.update(
            {
                f"{tag}_seeds": (len(mine), f"{label}: seeds"),
                f"{tag}_qk2_first": (qk2_first, f"{label}: seeds in which W_QK^2's probe passes 0.9 first"),
                f"{tag}_ov2_first": (ov2_first, f"{label}: seeds in which W_OV^2's probe passes 0.9 first"),
                f"{tag}_ties": (len(mine) - n, f"{label}: seeds in which both pass at the same evaluation"),
                f"{tag}_qk1_not_last": (
                    int((qk1_after <= 0).sum()),
                    f"{label}: seeds in which W_QK^1's probe (early positions) passes 0.9 no later than W_QK^2's",
                ),
                f"{tag}_slide_order": (
                    int(((t["probe_OV2"] < t["probe_QK2"]) & (t["probe_QK2"] < t["probe_QK1_early"])).sum()),
                    f"{label}: seeds in which the probes pass 0.9 in the slide's order (W_OV^2, W_QK^2, W_QK^1)",
                ),
                f"{tag}_sign_p": (
                    sign_test(qk2_first, n),
                    f"{label}: one-sided sign test, p-value that W_QK^2's probe passes first",
                ),
                f"{tag}_sign_p_ov2": (
                    sign_test(ov2_first, n),
                    f"{label}: one-sided sign test, p-value that W_OV^2's probe passes first",
                ),
                f"{tag}_gap_median": (
                    _nan(np.nanmedian, gap),
                    f"{label}: t90(W_QK^2) - t90(W_OV^2), median",
                ),
                f"{tag}_gap_max": (_nan(np.nanmax, gap), f"{label}: the same, largest over seeds"),
                f"{tag}_qk1_last_min": (
                    _nan(np.nanmin, qk1_after),
                    f"{label}: t90(W_QK^1, early positions) - t90(W_QK^2), smallest over seeds",
                ),
                f"{tag}_eval_every": (next(iter(mine.values())).exp.eval_every, "steps between evaluations"),
            }
        )
    out["order_minutes"] = (sum(r.seconds for r in runs.values()) / 60, "training time of all runs (min)")
    return report.Summary(out)


def order_curves(runs: dict[str, InductionRun]) -> dict[str, dict[str, list]]:
    """Along training, per run: the evaluated steps and the probes of :data:`ORDER_PROBES`."""
    return curves(runs, ORDER_PROBES)


ORDER_HEADER = [
    "model",
    "seeds",
    "W_QK^2 first",
    "W_OV^2 first",
    "ties",
    "W_QK^1 not last",
    "the slide's order",
    "p (W_QK^2 first)",
    "p (W_OV^2 first)",
    "median gap",
    "largest gap",
]


def order_rows(summary) -> list[list[str]]:
    """One row per parameterisation of an :func:`order_summary` (live or recorded), for :data:`ORDER_HEADER`."""
    names = {"ours": "ours (one learned W_V^2)", "public": "the public code's (W_O^2 W_V^2, W_V^2 frozen)"}
    rows = []
    for label in ORDER_MODELS:
        tag = f"order_{label}"
        if f"{tag}_seeds" not in summary:
            continue
        rows.append(
            [
                names[label],
                *(
                    report.format_value(summary[f"{tag}_{k}"])
                    for k in ("seeds", "qk2_first", "ov2_first", "ties", "qk1_not_last", "slide_order")
                ),
                *(report.format_value(summary[f"{tag}_{k}"], 3) for k in ("sign_p", "sign_p_ov2")),
                *(report.format_value(summary[f"{tag}_{k}"]) for k in ("gap_median", "gap_max")),
            ]
        )
    return rows
