"""The chapter ``book/induction_layers``: the talk's slide "Transformers on the bigram task" (one and two layers of
attention and an MLP, everything trained) and where the bigram is stored (the three memories of
``book/induction_head`` with a final linear feed-forward layer W_F), and the numbers the chapter checks. The runs
are :mod:`companion.experiments.induction`'s."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from companion import report
from companion.experiments.induction import (
    InductionExperiment,
    InductionRun,
    bigram_zero_share,
    ff_experiment,
    layer_experiments,
    run,
)

FF = "final W_F"  # the run with a final linear feed-forward layer, among study_members' names


def study_members(profile: str | None = None) -> dict[str, InductionExperiment]:
    """Every run :func:`study` trains, by name: the one- and two-layer models (``"1 layer"``, ``"2 layers"``) and
    the final-W_F model (:data:`FF`)."""
    out = {f"{L} layer{'s' * (L > 1)}": e for L, e in layer_experiments(profile).items()}
    out[FF] = ff_experiment(profile)
    return out


def study_from_runs(runs: dict[str, InductionRun]) -> dict:
    """:func:`study`'s result from the runs of :func:`study_members` (trained here, or by a recording): the layer
    models by their number of layers and the final-W_F model."""
    return {
        "layers": {int(k.split()[0]): r for k, r in runs.items() if k != FF},
        "ff": runs[FF],
    }


def study_runs(res: dict) -> dict[str, InductionRun]:
    """The runs of :func:`study`'s result ``res`` by :func:`study_members`' names (:func:`study_from_runs`
    undone)."""
    return {**{f"{L} layer{'s' * (L > 1)}": r for L, r in res["layers"].items()}, FF: res["ff"]}


def summary_of_runs(res: dict) -> Callable[[dict], report.Summary]:
    """``runs`` (by :func:`study_runs`' names) -> :func:`summary` of them: the chapter's summary of each view of
    :func:`companion.experiments.late_verdicts.stopped_views` (``res`` has nothing but its runs)."""
    return lambda runs: summary(study_from_runs(runs))


def study(profile: str | None = None, progress: bool = True) -> dict:
    """Every run of ``book/induction_layers``: the one- and two-layer models and the final-W_F model with fixed
    triggers (the latter shared with :func:`companion.experiments.induction_random.random_study`, cached)."""
    return study_from_runs({n: run(e, progress=progress) for n, e in study_members(profile).items()})


def ff_curves(r: InductionRun) -> dict[str, np.ndarray]:
    """Eq. (10) along a run with a last feed-forward layer: without and with the residual."""
    L = len(r.exp.ff)
    return {
        "W_U F(w_E(k)) (Eq. (10))": r.metrics[f"ff{L}_kl"],
        "W_U (w_E(k) + F(w_E(k)))": r.metrics[f"ff{L}_kl_residual"],
    }


def summary(res: dict) -> report.Summary:
    """The claim values of :func:`study` (see ``data/claims.toml``, ids ``ih.*`` of ``book/induction_layers``)."""
    layers, ffr = res["layers"], res["ff"]
    one, two = layers[1], layers[2]
    return report.Summary(
        {
            "acc_two_layers": (two.final("acc"), "two layers: in-context accuracy at the end"),
            "acc_one_layer": (one.final("acc"), "one layer: in-context accuracy at the end"),
            "layer_gap": (two.final("acc") - one.final("acc"), "two layers minus one layer"),
            "one_ff1_kl_end": (
                one.final("ff1_kl"),
                "one layer (MLP): KL(pi_b || W_U F_1(w_E(k))) at the end (nats)",
            ),
            "mlp_ff1_kl_end": (two.final("ff1_kl"), "two layers (MLPs): the same for F_1"),
            "mlp_ff2_kl_start": (two.metrics["ff2_kl"][0], "two layers (MLPs): the same for F_2 at step 0"),
            "mlp_ff2_kl_end": (two.final("ff2_kl"), "the same for F_2 at the end"),
            "acc_ff": (
                ffr.final("acc"),
                "memories + final linear W_F, loss on all tokens: in-context accuracy at the end",
            ),
            "ff_kl_start": (
                ffr.metrics["ff2_kl"][0],
                "the same run: KL(pi_b || W_U W_F w_E(k)) at step 0 (nats)",
            ),
            "ff_kl_end": (ffr.final("ff2_kl"), "the same at the end"),
            "ff_kl_ratio": (ffr.final("ff2_kl") / ffr.metrics["ff2_kl"][0], "end over start"),
            "ff_kl_residual_end": (
                ffr.final("ff2_kl_residual"),
                "the same at the end, with the residual w_E(k)",
            ),
            "bigram_zero_share": (
                bigram_zero_share(ffr.exp.task()),
                "share of zero entries of pi_b (non-trigger rows)",
            ),
            "steps": (two.exp.steps, "training steps of the layer models"),
            "eval_every": (two.exp.eval_every, "steps between evaluations of the layer models"),
            "seconds": (
                sum(r.seconds for r in [*layers.values(), ffr]),
                "training time of all runs (s)",
            ),
        }
    )
