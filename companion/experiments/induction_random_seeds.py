"""The chapter ``book/induction_random``, over seeds and along training (recorded: ``python -m companion record
induction_random_seeds``): the seed study's members, its summary of every measure of the chapter's run over the
seeds, and the shares and discounts along training (:func:`random_along_training`). The measures themselves are
:mod:`companion.experiments.induction_random`'s."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import numpy as np

from companion import report
from companion.config import check_choice
from companion.experiments.induction import (
    DISCOUNT_EDITS,
    RANDOM_EDITS,
    InductionExperiment,
    InductionRun,
    curves,
    pair_scores,
    random_trigger_experiment,
)
from companion.experiments.induction_random import (
    RANDOM_MEASURES,
    TRAINING_MEASURES,
    discount_edits,
    head_or_bigram_values,
)
from companion.experiments.induction_random_push import pair_gradient

# --- head or bigram over seeds (recorded: ``python -m companion record induction_random_seeds``) ---


RANDOM_SEEDS = (0, 1, 2, 3, 4)


RANDOM_CURVES = (
    "acc",
    "random_top1_in",
    "random_top1_off",
    "random_pair_QK1",
    "random_pair_QK2",
    # along training, per seed
    *(f"random_top1_{side}{end}" for end in RANDOM_EDITS for side in ("in", "off")),
)


def random_seed_members(profile: str | None = None) -> dict[str, InductionExperiment]:
    """The random-trigger run of :func:`companion.experiments.induction.random_trigger_experiment` for each of :data:`RANDOM_SEEDS` (``"seed 0"``,
    ...; the seed fixes the data, the initialisation and the test streams)."""
    base = random_trigger_experiment(profile)
    return {f"seed {s}": dataclasses.replace(base, seed=s) for s in RANDOM_SEEDS}


def random_seeds_summary(runs: dict[str, InductionRun]) -> report.Summary:
    """The head-or-bigram claim's numbers (:func:`head_or_bigram_values`) of each run of a :func:`random_seed_members` set, named
    ``random_seeds_<measure>_s<seed>``, and over the seeds: the smallest accuracy off the top and ratio, the largest
    ratio, how many seeds have a ratio above 2 (the bar of the single-seed row ``ih.random_bigram_when_top``), and
    the largest (weakest) first-layer gap and pair discount and the smallest balance gap; the extremes of the
    discount edits' shares (:func:`discount_edits`) and how many seeds the first layer's edit lowers the ratio
    more in; and the share the edit takes away along training (:func:`random_along_training`'s
    ``random_training_removed_share*``, as ``random_seeds_<window>_removed_share_<mean|min>``)."""
    return _summary(runs, {name: seed_measures(r) for name, r in runs.items()})


def seed_measures(r: InductionRun, n_seq: int = 2048) -> dict[str, float]:
    """One run's measures in :func:`random_seeds_summary`: :func:`head_or_bigram_values` of every discount edit
    (on ``n_seq`` sequences, the chapter's) and :func:`random_training_values`."""
    return {
        **head_or_bigram_values(
            discount_edits(r, n_seq), pair_gradient(r, n_seq), pair_scores(r.model(), r.exp.task())
        ),
        **random_training_values(r),
    }


def stopped_summary(runs: dict[str, InductionRun]) -> Callable[[dict], report.Summary]:
    """``view`` -> :func:`random_seeds_summary` of a view of ``runs`` (one run cut in its late window by
    ``stopped_after``, which keeps those weights; the others as they are): each whole run is measured once, here, and
    only the cut run in each view (``late_verdicts.stopped_values`` of the recording's rows)."""
    whole = {name: seed_measures(r) for name, r in runs.items()}
    return lambda view: _summary(
        view, {name: whole[name] if r is runs.get(name) else seed_measures(r) for name, r in view.items()}
    )


def _summary(runs: dict[str, InductionRun], measured: dict[str, dict[str, float]]) -> report.Summary:
    """:func:`random_seeds_summary` of ``runs`` given each run's :func:`seed_measures` (by the runs' names)."""
    per = {r.exp.seed: measured[name] for name, r in runs.items()}
    out = {
        f"random_seeds_{m}_s{s}": (v[m], f"seed {s}: {RANDOM_MEASURES[m][1]}")
        for s, v in per.items()
        for m in RANDOM_MEASURES
    }
    col = {m: np.array([v[m] for v in per.values()]) for m in RANDOM_MEASURES}
    first = next(iter(runs.values())).exp
    out.update(
        {
            "random_seeds_n": (len(per), "seeds"),
            "random_seeds_first_seed": (min(per), "the first seed"),
            "random_seeds_last_seed": (max(per), "the last seed"),
            "random_seeds_steps": (first.steps, "training steps per seed"),
            "random_seeds_acc_off_min": (col["acc_off"].min(), "smallest over seeds: accuracy off the top"),
            "random_seeds_top1_ratio_min": (
                col["top1_ratio"].min(),
                "smallest over seeds: the top-1 share ratio",
            ),
            "random_seeds_top1_ratio_max": (
                col["top1_ratio"].max(),
                "largest over seeds: the top-1 share ratio",
            ),
            "random_seeds_top1_ratio_matched_min": (
                col["top1_ratio_matched"].min(),
                "smallest over seeds: the ratio within strata",
            ),
            "random_seeds_above_2": (int((col["top1_ratio"] > 2).sum()), "seeds whose ratio is above 2"),
            "random_seeds_attention_gap_max": (
                col["attention_gap"].max(),
                "largest over seeds: the attention gap",
            ),
            "random_seeds_prev_attention_gap_max": (
                col["prev_attention_gap"].max(),
                "largest over seeds: the first-layer gap",
            ),
            "random_seeds_pair_discount_max": (
                col["pair_discount_weaker"].max(),
                "largest over seeds: the weaker layer's pair discount",
            ),
            "random_seeds_balance_gap_min": (
                col["balance_gap"].min(),
                "smallest over seeds: the balance gap",
            ),
            "random_seeds_match_score_gap_max": (
                col["match_score_gap"].max(),
                "largest over seeds: the induction-match gap",
            ),
            "random_seeds_pair_score_gap_max": (
                col["pair_score_gap"].max(),
                "largest over seeds: the token-token gap",
            ),
            "random_seeds_rest_share_min": (
                (col["attention_rest_gap"] / -col["attention_gap"]).min(),
                "smallest over seeds: share of the lost attention that goes to the keys holding "
                "neither q nor o",
            ),
            "random_seeds_discount_removed_share_min": (
                col["discount_removed_share"].min(),
                "smallest over seeds: share of the ratio's excess that goes with both discounts removed",
            ),
            "random_seeds_discount_removed_share_max": (
                col["discount_removed_share"].max(),
                "largest over seeds: the same",
            ),
            "random_seeds_discount_doubled_growth_min": (
                col["discount_doubled_growth"].min(),
                "smallest over seeds: the ratio's growth with both discounts doubled, over its excess",
            ),
            "random_seeds_discount_doubled_growth_max": (
                col["discount_doubled_growth"].max(),
                "largest over seeds: the same",
            ),
            "random_seeds_discount_pairwise_share_min": (
                col["discount_pairwise_share"].min(),
                "smallest over seeds: the share that goes with both discounts removed pair by pair",
            ),
            "random_seeds_discount_pairwise_share_max": (
                col["discount_pairwise_share"].max(),
                "largest over seeds: the same",
            ),
            "random_seeds_qk1_stronger": (
                int((col["ratio_QK1_removed"] < col["ratio_QK2_removed"]).sum()),
                "seeds where removing "
                "W_QK^1's discount alone lowers the ratio more than removing W_QK^2's alone",
            ),
            "random_seeds_pairwise_more": (
                int((col["discount_pairwise_share"] > col["discount_removed_share"]).sum()),
                "seeds where the pair-by-pair edit takes away more of the excess than the mean edit",
            ),
            "random_seeds_ratio_both_pairwise_min": (
                col["ratio_both_pairwise"].min(),
                "smallest over seeds: the ratio with both discounts removed pair by pair",
            ),
        }
    )
    for w in ("early", "late"):  # the edits along training, on the Evaluator's test batches
        for e, how in (("removed", ""), ("pairwise", " pair by pair")):
            share = col[f"{e}_share_{w}"]
            out[f"random_seeds_{w}_{e}_share_min"] = (
                share.min(),
                f"smallest over seeds: {w} window, share of the ratio's "
                f"excess that goes with both discounts removed{how}",
            )
            out[f"random_seeds_{w}_{e}_share_argmin"] = (
                int(list(per)[int(share.argmin())]),
                "the seed with that smallest share",
            )
            out[f"random_seeds_{w}_{e}_share_above"] = (
                int((share > 0.25).sum()),
                f"seeds whose {w} share{how} is above 0.25",
            )
        weakest = col[f"pair_QK2_{w}"]
        out[f"random_seeds_{w}_pair_QK2_max"] = (
            weakest.max(),
            f"largest (weakest) over seeds: W_QK^2's pair discount, mean over the {w} window",
        )
        out[f"random_seeds_{w}_pair_QK2_argmax"] = (
            int(list(per)[int(weakest.argmax())]),
            "the seed with that weakest discount",
        )
        out[f"random_seeds_{w}_pairwise_more"] = (
            int((col[f"pairwise_share_{w}"] > col[f"removed_share_{w}"]).sum()),
            f"seeds where, in the {w} window, the pair-by-pair edit takes away more "
            "of the excess than the mean edit",
        )
    return report.Summary(out)


def random_training_values(r: InductionRun) -> dict[str, float]:
    """One run's edits along training (:func:`random_along_training` of that run alone): per window, the ratio R,
    R with both discounts removed (as a mean, and pair by pair) and the share of R's excess that goes, and the
    two layers' pair discounts (``ratio_early``, ``ratio_removed_early``, ..., ``pair_QK2_late``:
    :data:`TRAINING_MEASURES`)."""
    along = random_along_training(random_seed_curves({"run": r}))
    return {
        f"{m}_{w}": along[f"random_training_{m}_{w}"] for w in ("early", "late") for m in TRAINING_MEASURES
    }


def random_seed_curves(runs: dict[str, InductionRun]) -> dict[str, dict[str, list]]:
    """Along training, per seed: the evaluated steps and :data:`RANDOM_CURVES`."""
    return curves(runs, RANDOM_CURVES)


def random_seed_overview(summary) -> report.Summary:
    """The entries of a :func:`random_seeds_summary` (live or recorded) that are not one seed's: the extremes."""
    return report.Summary(
        {k: (v, summary.meaning.get(k, "")) for k, v in summary.items() if not re.search(r"_s\d+$", k)}
    )


def random_along_training(
    curves: dict, early: tuple[float, float] = (0.2, 0.4), late: tuple[float, float] = (0.7, 1.0)
) -> report.Summary:
    """:func:`random_seed_curves` (live or recorded) in two windows of training, given as fractions of the last
    evaluated step (``early``: [0.2, 0.4), after the induction head forms; ``late``: [0.7, 1.0]): the mean over
    the evaluations in the window, then over the seeds, of each of :data:`RANDOM_CURVES`, named
    ``random_training_<curve>_<window>``, and ``random_training_<window>_from`` / ``_to``, the window's first and last evaluated step
    (of the last run; the runs of a seed study share their steps). The default windows are ours, chosen on the
    recorded curves to describe them. And the edit along training: per seed and window, the ratio
    R = top-1 share in / off (of the window's means) as trained and with each of :data:`companion.experiments.induction.RANDOM_EDITS` (``<e>``:
    ``removed`` or ``pairwise``), ``random_training_ratio_<e>_<window>``, and the share of R's excess over 1 that the edit
    takes away, (R - R_edited) / (R - 1): ``random_training_<e>_share_<window>`` is its mean over the seeds and
    ``random_training_<e>_share_min_<window>`` its smallest."""
    for name, (lo, hi) in (("early", early), ("late", late)):
        if not 0 <= lo < hi <= 1:
            raise ValueError(f"{name}={(lo, hi)} is not a window of training: need 0 <= start < end <= 1")
    out = {}
    for window, (lo, hi) in (("early", early), ("late", late)):
        means = {k: [] for k in RANDOM_CURVES}
        for name, steps in curves["step"].items():
            steps = np.asarray(steps)
            end = steps[-1]
            keep = (steps >= lo * end) & ((steps < hi * end) | (hi == 1))
            if not keep.any():
                raise ValueError(
                    f"{window}={(lo, hi)} holds no evaluation of {name!r} (steps {steps.tolist()})"
                )
            for k in RANDOM_CURVES:
                means[k].append(float(np.mean(np.asarray(curves[k][name])[keep])))
        out[f"random_training_{window}_from"] = (
            int(steps[keep][0]),
            f"the {window} window's first evaluated step",
        )
        out[f"random_training_{window}_to"] = (
            int(steps[keep][-1]),
            f"the {window} window's last evaluated step",
        )
        out.update(
            {
                f"random_training_{k.removeprefix('random_')}_{window}": (
                    float(np.mean(v)),
                    f"{k}: mean over the {window} window, then over seeds",
                )
                for k, v in means.items()
            }
        )
        m = {k: np.array(v) for k, v in means.items()}
        ratio = m["random_top1_in"] / m["random_top1_off"]
        out[f"random_training_ratio_{window}"] = (
            float(ratio.mean()),
            f"{window} window: the ratio R of the shares (in / off, of the window's means), mean over seeds",
        )
        for end, key in RANDOM_EDITS.items():
            e, edit = end[1:], DISCOUNT_EDITS[key][0]
            edited = m[f"random_top1_in{end}"] / m[f"random_top1_off{end}"]
            out[f"random_training_ratio_{e}_{window}"] = (
                float(edited.mean()),
                f"{window} window: R with {edit}, mean over seeds",
            )
            with np.errstate(divide="ignore", invalid="ignore"):  # R = 1: no excess, no share (nan)
                share = (ratio - edited) / (ratio - 1)
            out[f"random_training_{e}_share_{window}"] = (
                float(share.mean()),
                f"{window} window: share of the ratio's excess "
                f"over 1 taken away with {edit}, mean over seeds",
            )
            out[f"random_training_{e}_share_min_{window}"] = (
                float(share.min()),
                f"{window} window: the same, smallest over seeds",
            )
    return report.Summary(out)


# the seed study's tables: the head-or-bigram preference and the claims' mechanism; where the attention goes; edits
RANDOM_TABLES = {
    "claims": (
        "acc_off",
        "top1_ratio",
        "top1_ratio_matched",
        "attention_gap",
        "prev_attention_gap",
        "pair_QK1",
        "pair_QK2",
        "pair_discount_weaker",
        "balance_gap",
    ),
    "attention": (
        "attention_gap",
        "key_score_gap",
        "pair_score_gap",
        "match_score_gap",
        "rest_score_gap",
        "attention_query_token_gap",
        "attention_target_elsewhere_gap",
        "attention_rest_gap",
    ),
    "edits": (
        "top1_ratio",
        *(f"ratio_{k}" for k in DISCOUNT_EDITS if k != "trained"),
        "discount_removed_share",
        "discount_doubled_growth",
        "discount_pairwise_share",
    ),
    "training": tuple(
        f"{m}_{w}" for w in ("early", "late") for m in ("ratio", "ratio_removed", "removed_share")
    ),
    "training_pairwise": tuple(
        f"{m}_{w}"
        for w in ("early", "late")
        for m in ("ratio_pairwise", "pairwise_share", "pair_QK1", "pair_QK2")
    ),
}


def random_seed_header(table: str = "claims") -> tuple[str, ...]:
    """The column headers of one of :data:`RANDOM_TABLES`."""
    check_choice("table", table, tuple(RANDOM_TABLES))
    return ("seed", *(RANDOM_MEASURES[m][0] for m in RANDOM_TABLES[table]))


def random_seed_rows(summary, table: str = "claims") -> list[list]:
    """One row per seed of a :func:`random_seeds_summary` (live or recorded), the columns of
    :func:`random_seed_header` ``(table)``."""
    check_choice("table", table, tuple(RANDOM_TABLES))
    seeds = sorted(int(k.rsplit("_s", 1)[1]) for k in summary if k.startswith("random_seeds_acc_off_s"))
    return [[s, *(summary[f"random_seeds_{m}_s{s}"] for m in RANDOM_TABLES[table])] for s in seeds]


def score_gap_text(summary) -> str:
    """book/induction_random's sentence on the keys' token-token part over seeds (``random_seeds_pair_score_gap_max``:
    the largest difference, likely keys minus the others): not lower in every seed where some difference is
    positive.

    >>> score_gap_text({"random_seeds_pair_score_gap_max": 0.12})
    'Their token-token part is not lower in every seed (its difference is as high as 0.12): a discount averaged over pairs need not lower the pairs at hand.'
    >>> score_gap_text({"random_seeds_pair_score_gap_max": 0.0001})[:80]
    'Their token-token part is not lower in every seed, though barely (its difference'
    >>> score_gap_text({"random_seeds_pair_score_gap_max": -0.03})
    'Their token-token part is lower in every seed too (its difference at most -0.03).'
    """
    gap = summary["random_seeds_pair_score_gap_max"]
    if gap > 0:
        barely, shown = (", though barely", f"{gap:.4f}") if gap < 0.005 else ("", f"{gap:.2f}")
        return (
            f"Their token-token part is not lower in every seed{barely} (its difference is as high as {shown}): a "
            "discount averaged over pairs need not lower the pairs at hand."
        )
    return f"Their token-token part is lower in every seed too (its difference at most {gap:.2f})."
