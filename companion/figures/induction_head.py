"""The chapter ``book/induction_head``'s own figures; the house helpers are :mod:`companion.plotting`'s. No
computation imports this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import matplotlib.pyplot as plt

PROBE_LABELS = {
    "probe_OV2": "W_OV^2 (outputs)",
    "probe_QK2": "W_QK^2 (trigger keys)",
    "probe_QK1_early": "W_QK^1, early positions",
    "probe_QK1": "W_QK^1, all positions",
}


def schedule_panels(runs: dict):
    """The talk (cf. Birth of a Transformer, Fig. 3): one panel per freeze schedule, in-context accuracy
    (black) and the memory-recall probes (colours) along training; dotted line: the step the frozen matrices
    are released. The last cell of the grid holds the legend."""
    ncol = 3
    nrow = -(-(len(runs) + 1) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(10, 3.0 * nrow), sharey=True, constrained_layout=True)
    axes = axes.ravel()
    for ax, (name, r) in zip(axes, runs.items()):
        m = r.metrics
        ax.plot(m["step"], m["acc"], color="k", lw=2, label="in-context accuracy")
        for j, (key, label) in enumerate(PROBE_LABELS.items()):
            ax.plot(m["step"], m[key], color=f"C{j}", lw=1.2, label=label)
        if r.exp.frozen_first:
            ax.axvline(r.exp.unfreeze_at, color="grey", ls=":", lw=1, label="frozen matrices released")
        ax.text(0.97, 0.04, name, transform=ax.transAxes, ha="right", va="bottom", fontsize=9)
        ax.set_xlabel("training step")
        ax.set_ylabel("accuracy / recall probe")
    handles, labels = axes[1].get_legend_handles_labels()
    for ax in axes[len(runs) :]:
        ax.axis("off")
    axes[len(runs)].legend(handles, labels, loc="center", fontsize=9)
    return fig
