"""The chapter ``book/scan_snap_text``'s own figures; the house helpers are :mod:`companion.plotting`'s. No
computation imports this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def attention_maps(runs: dict, n_cols: int = 4):
    """Fig. 7: the first layer's attention on one training window at evenly spaced evaluations, one row per
    run (``runs[name]`` from :func:`companion.experiments.scan_snap_text.run`)."""
    fig, axes = plt.subplots(
        len(runs), n_cols, figsize=(2.6 * n_cols, 2.5 * len(runs)), constrained_layout=True, squeeze=False
    )
    for row, (name, r) in zip(axes, runs.items()):
        idx = np.linspace(0, len(r["step"]) - 1, n_cols).round().astype(int)
        for ax, i in zip(row, idx):
            ax.imshow(r["maps"][i], cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
            ax.set_xlabel(f"key position (step {int(r['step'][i])})", fontsize=8)
            ax.grid(False)
            ax.tick_params(labelsize=6)
        row[0].set_ylabel(f"{name}\nquery position", fontsize=8)
    return fig


def movement_curves(runs: dict):
    """Along training: held-out entropy of the first layer's attention (left; dashed: uniform causal
    attention), how far it moved since the previous evaluation (middle), held-out loss (right)."""
    fig, axes = plt.subplots(1, 3, figsize=(12.5, 3.2), constrained_layout=True)
    for name, r in runs.items():
        axes[0].plot(r["step"], r["entropy"], marker="o", ms=2, label=name)
        axes[1].plot(r["step"][1:], r["moved"][1:], marker="o", ms=2, label=name)
        axes[2].plot(r["step"], r["loss"], marker="o", ms=2, label=name)
    axes[0].axhline(next(iter(runs.values()))["max_entropy"], color="grey", ls="--", lw=0.8)
    for ax, lab in zip(
        axes,
        (
            "attention entropy, layer 1 (nats)",
            "attention moved since last evaluation",
            "held-out cross-entropy (nats)",
        ),
    ):
        ax.set_xlabel("SGD iteration")
        ax.set_ylabel(lab)
    axes[0].legend(fontsize=7)
    return fig


def fig10(lrs, entropy: np.ndarray, max_entropy: float):
    """Fig. 10: held-out attention entropy after training against the learning rate; ``entropy`` (n_lr,
    n_seeds), mean and one standard deviation."""
    fig, ax = plt.subplots(figsize=(5, 3.2), constrained_layout=True)
    ax.errorbar(lrs, entropy.mean(1), entropy.std(1), marker="o", capsize=3, label="mean over seeds, +-1 std")
    ax.plot(np.repeat(lrs, entropy.shape[1]), entropy.ravel(), ".", color="grey", label="single runs")
    ax.axhline(max_entropy, color="grey", ls="--", lw=0.8, label="uniform causal attention")
    ax.set_xscale("log")
    ax.set_xticks(lrs, [f"{v:g}" for v in lrs])
    ax.set_xlabel("learning rate (one rate for all weights)")
    ax.set_ylabel("attention entropy, layer 1 (nats)")
    ax.legend(fontsize=7)
    return fig
