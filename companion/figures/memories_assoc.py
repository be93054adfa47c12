"""The chapter ``book/memories_assoc``'s own figures; the house helpers are :mod:`companion.plotting`'s. No
computation imports this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import matplotlib.pyplot as plt


def capacity_panels(curves: dict, weighted_curves: dict | None = None):
    """The talk: recall accuracy of a memory of M pairs against M / d (left) and M / d^2 (right), one
    colour per d; dashed, the Gaussian prediction; dotted (right), memories with per-pair weights."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True, constrained_layout=True)
    for j, (d, (M, acc, pred)) in enumerate(sorted(curves.items())):
        for ax, x in zip(axes, (M / d, M / d**2)):
            ax.plot(x, acc, "o-", ms=3, color=f"C{j}", label=f"d = {d}")
            ax.plot(x, pred, "--", color=f"C{j}", lw=0.8)
        if weighted_curves:
            Mw, accw, _ = weighted_curves[d]
            axes[1].plot(Mw / d**2, accw, ":", color=f"C{j}")
    for ax, label in zip(axes, ("pairs per dimension M / d", "pairs per parameter M / d^2")):
        ax.set_xscale("log")
        ax.set_xlabel(label)
    axes[0].set_ylabel("recall accuracy")
    axes[0].legend(fontsize=8)
    return fig
