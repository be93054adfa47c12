"""The chapter ``book/three_steps``, what step 2 writes: the step-2 gradient of W_QK^2 on the population, split by
what it associates (:func:`step2_gradient`, :func:`step2_summary`, :func:`step2_table`). The three steps themselves
and their runs are :mod:`companion.experiments.three_steps`'s; what breaks step 2 with Shakespeare's data and why
step 3 misses a row is :mod:`companion.experiments.three_steps_data`. The gradient is cached (the book's build
reads what its test run computed)."""

from __future__ import annotations

import torch

from companion import report
from companion.config import check_choice
from companion.experiments.induction import (
    STEP_ORDER,
    Evaluator,
    construct,
)
from companion.experiments.three_steps import (
    FIRST_LAYERS,
    MIXES,
    STEP2_PARTS,
    ThreeStepExperiment,
    after_first_step,
    basis_shares,
    cached,
    compare_scales,
    population_gradient,
    token_bases,
)

MODULES = ("companion.experiments.three_steps_mechanism",)  # the cache key of this module's computations


def step2_gradient(exp: ThreeStepExperiment, first_layer: str = "uniform", use_cache: bool = True) -> dict:
    """The negative population gradient G of W_QK^2 at step 2 of the slide's order (after step 1 on W_V^2, as in
    :func:`three_steps`), split by what it associates. The learned W_QK^2 is G scaled, so this is what step 2 writes.

    ``first_layer="uniform"``: W_QK^1 = 0, as in the three steps; ``"previous token"``: W_QK^1 is
    :func:`companion.experiments.induction.construct`'s previous-token memory (scale 20), so that the remapped previous token is not averaged
    over the prefix. Entries are read in the unit directions of the (orthonormal) embeddings: ``parts`` gives,
    for each of :data:`STEP2_PARTS`, the share of |G|^2 in its entries and their mean over the mean stored
    entry. The query at the loss position is a trigger q at position T - 1. "stored pairs": (w_E(q), W_V^1 w_E(q));
    "own token": (w_E(q), w_E(q)); "own position": (w_E(q), p_{T-1}) and (p_{T-1}, p_{T-1});
    "triggers from the last position": (p_{T-1}, w_E(q')) for every trigger q'; "everything else": the rest of
    |G|^2. ``shares``: G's block shares (:func:`block_shares`); ``stored``: the mean stored entry; ``accuracy``:
    for each of ``exp.scales``, the in-context accuracy with W_QK^2 = G rescaled and the other two memories
    :func:`companion.experiments.induction.construct`'s at that scale (the mix "learned W_QK^2 only" of :func:`compare_scales`).

    Raises:
        ValueError: ``first_layer`` not in :data:`FIRST_LAYERS`, embeddings not orthonormal, or an order
            other than the slide's.
    """
    check_choice("first_layer", first_layer, FIRST_LAYERS)
    if exp.embeddings != "orthonormal" or exp.order != STEP_ORDER:
        raise ValueError(
            f"step2_gradient needs embeddings='orthonormal' and the slide's order {STEP_ORDER}, not "
            f"{exp.embeddings!r} and {exp.order}"
        )
    return cached(
        "three_steps_step2",
        exp,
        {"first_layer": first_layer},
        lambda: _step2_gradient(exp, first_layer, use_cache),
        MODULES,
        use_cache,
    )


def _step2_gradient(exp: ThreeStepExperiment, first_layer: str, use_cache: bool) -> dict:
    model, task, population = after_first_step(exp, use_cache=use_cache)
    if first_layer == "previous token":
        construct(model, task.triggers, task.n, names=("W_QK^1",))
    G = -population_gradient(model, "W_QK^2", population)
    basis = token_bases(model, task.n)
    trig, T = list(task.triggers), exp.seq_len

    def unit(X: torch.Tensor) -> torch.Tensor:
        return X / X.norm(dim=1, keepdim=True)

    q, last = unit(model.W_E[trig]), unit(model.P[T - 1 : T])
    entries = {
        "stored pairs": torch.diagonal(q @ G @ unit(model.W_E[trig] @ model.layers[0].v().T).T),
        "own token": torch.diagonal(q @ G @ q.T),
        "own position": torch.cat([(q @ G @ last.T)[:, 0], (last @ G @ last.T)[0]]),
        "triggers from the last position": (last @ G @ q.T)[0],
    }
    total = G.pow(2).sum().item()
    stored = entries["stored pairs"].mean().item()
    parts = {
        k: {"share": v.pow(2).sum().item() / total, "mean / stored": v.mean().item() / stored}
        for k, v in entries.items()
    }
    parts["everything else"] = {
        "share": 1.0 - sum(p["share"] for p in parts.values()),
        "mean / stored": float("nan"),
    }
    with torch.no_grad():
        model.matrix("W_QK^2").copy_(G)
    mix = "learned W_QK^2 only"
    scales = compare_scales(model, task, Evaluator(exp, model, "cpu"), exp.scales, {mix: MIXES[mix]})
    return {
        "first_layer": first_layer,
        "stored": stored,
        "parts": parts,
        "shares": basis_shares(G, basis, "EPR", "EPR"),
        "accuracy": {row["scale"]: row[mix] for row in scales},
    }


# keys that hold the query's token or place
SELF_PARTS = ("own token", "own position", "triggers from the last position")


def step2_summary(grads: list[dict]) -> report.Summary:
    """The claim values of :func:`step2_gradient` for the uniform and the previous-token first layer."""
    g = {r["first_layer"]: r for r in grads}
    missing = set(FIRST_LAYERS) - set(g)
    if missing:
        raise ValueError(
            f"step2_summary needs a result for each first layer of {FIRST_LAYERS}; missing {sorted(missing)}"
        )
    uni, prev = g["uniform"], g["previous token"]

    def best(r: dict) -> float:
        return max(r["accuracy"].values()) if r["accuracy"] else float("nan")

    return report.Summary(
        {
            "step2_self_share": (
                sum(uni["parts"][p]["share"] for p in SELF_PARTS),
                "uniform first layer: share of |G|^2 in the own-token, own-position and trigger-key entries",
            ),
            "step2_stored_share": (
                uni["parts"]["stored pairs"]["share"],
                "uniform first layer: share in the stored pairs",
            ),
            "step2_own_token": (
                -uni["parts"]["own token"]["mean / stored"],
                "uniform first layer: minus the mean own-token entry over the mean stored entry (how many "
                "times as hard a key holding the query's token is pushed down as its own key is pushed up)",
            ),
            "step2_self_share_prev": (
                sum(prev["parts"][p]["share"] for p in SELF_PARTS),
                "previous-token first layer: share in the same entries",
            ),
            "step2_stored_share_prev": (
                prev["parts"]["stored pairs"]["share"],
                "previous-token first layer: share in the stored pairs",
            ),
            "step2_stored_ratio": (
                prev["stored"] / uni["stored"],
                "mean stored entry, previous-token over uniform first layer",
            ),
            "step2_best_uniform": (
                best(uni),
                "uniform first layer: step 2's W_QK^2 rescaled among hand-written memories, "
                "best accuracy over the scales",
            ),
            "step2_best_prev": (best(prev), "previous-token first layer: the same"),
        }
    )


def step2_table(grads: list[dict]) -> str:
    """Markdown: for each :func:`step2_gradient` result (a column pair), each part's share of |G|^2 and its mean
    entry over the mean stored entry."""
    head = ["entries (query, key)"] + [
        f"{c} ({g['first_layer']} first layer)"
        for g in grads
        for c in ("share of squared norm", "mean / stored")
    ]
    rows = [
        [
            part,
            *(
                g["parts"][part][c] if part != "everything else" or c == "share" else "–"
                for g in grads
                for c in ("share", "mean / stored")
            ),
        ]
        for part in STEP2_PARTS
    ]
    return report.markdown_table(head, rows, digits=3)
