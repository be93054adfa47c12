"""The noisy-recall family's figures (``book/noisy_recall``, ``book/finetune``), shared like
:mod:`companion.experiments.noisy_recall`; the house helpers are :mod:`companion.plotting`'s. No computation
imports this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def rho_panels(steps, metric_by_rho: dict[str, np.ndarray], rhos, xlabel: str = "training step"):
    """Fig. 3 left three: one panel per metric, one curve per rho (colour = rho)."""
    n = len(metric_by_rho)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.4), constrained_layout=True)
    axes = np.atleast_1d(axes)
    cmap = plt.get_cmap("viridis")
    for ax, (ylabel, values) in zip(axes, metric_by_rho.items()):
        for j, rho in enumerate(rhos):
            ax.plot(steps, values[:, j], color=cmap(j / max(1, len(rhos) - 1)), label=f"rho={rho:g}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
    axes[-1].legend(fontsize=7, ncol=2, title="kept rank fraction")
    return fig


PAIR_COLOURS = {"[q, ybar]": "tab:green", "[q, tau]": "tab:red", "other": "lightgray"}


def attention_bars(ax, attn: np.ndarray, kinds: np.ndarray, ylabel: str = "attention from position T"):
    """Attention over key positions, coloured by what each position holds (Fig. 4).

    ``kinds`` (T,) holds "[q, ybar]", "[q, tau]" or "other" per position; the
    positions of the first two kinds are also marked under the axis, so that
    pairs receiving no attention stay visible.
    """
    from matplotlib.patches import Patch

    pos = np.arange(len(attn))
    ax.bar(pos, attn, color=[PAIR_COLOURS[k] for k in kinds])
    for kind in ("[q, ybar]", "[q, tau]"):
        hit = pos[kinds == kind]
        ax.plot(
            hit,
            np.full(len(hit), -0.04 * max(attn.max(), 1e-3)),
            "^",
            color=PAIR_COLOURS[kind],
            ms=6,
            clip_on=False,
        )
    ax.set_xlabel("key position s")
    ax.set_ylabel(ylabel)
    ax.legend(handles=[Patch(color=c, label=k) for k, c in PAIR_COLOURS.items()])
    return ax


def attention_figure(models: dict, task, seed: int = 123, n: int = 64):
    """Fig. 4: second-layer attention from position T over one noisy sequence holding both a [q, ybar] and a
    [q, tau] pair, one panel per model (``{panel label: model}``), coloured by what each position holds."""
    import torch

    from companion import probes

    batch = task.sample(np.random.default_rng(seed), n)  # noisy test sequences
    tokens = torch.as_tensor(batch.inputs)
    i = probes.sequence_with_both_pairs(batch.inputs, task.triggers, task.noise_token)
    kinds = probes.pair_kinds(batch.inputs[i], task.triggers, task.noise_token)
    fig, axes = plt.subplots(
        len(models),
        1,
        figsize=(7, 2.5 * len(models) + 0.5),
        sharex=True,
        constrained_layout=True,
        squeeze=False,
    )
    for ax, (label, model) in zip(axes[:, 0], models.items()):
        att = probes.recall_attention(model, tokens, task.triggers, task.noise_token)
        attention_bars(ax, att["attn"][i], kinds, ylabel=label)
    return fig


def recovery_figure(run, bar: float, key: str = "clean_p_correct", rho: float = 0.0):
    """A fine-tuning run's p(correct) on clean sequences with F2 dropped (``rho`` = 0) along fine-tuning, the window
    of its late mean shaded (:meth:`~companion.experiments.noisy_recall.RecallRun.late_start`) and the claim's
    ``bar`` dashed."""
    steps, values = run.series(key, rho=rho)
    fig, ax = plt.subplots(figsize=(5, 3.2), constrained_layout=True)
    ax.plot(steps, values, label="p(correct), F2 dropped")
    ax.axvspan(
        run.late_start(key, rho=rho), steps.max(), color="gray", alpha=0.15, label="late mean's window"
    )
    ax.axhline(bar, color="gray", ls="--", lw=1, label="bar")
    ax.set_xlabel("fine-tuning step")
    ax.set_ylabel("mean probability of the correct token")
    ax.legend()
    return fig
