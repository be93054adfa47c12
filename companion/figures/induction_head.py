"""The chapter ``book/induction_head``'s own figures; the house helpers are :mod:`companion.plotting`'s. No
computation imports this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import matplotlib.pyplot as plt

from companion import plotting

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


def layer_panels(runs: dict, ff_steps, ff_curves: dict):
    """The talk: in-context accuracy of one- and two-layer models along training (left), and the
    KL divergence from the bigram rows to a feed-forward layer's prediction, ``ff_curves`` (right)."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), constrained_layout=True)
    for L, r in sorted(runs.items()):
        axes[0].plot(
            r.metrics["step"], r.metrics["acc"], "o-", ms=3, label=f"{L} layer{'s' if L > 1 else ''}"
        )
    axes[0].set_ylabel("in-context accuracy")
    plotting.curves(
        axes[1], ff_steps, ff_curves, "training step", "KL(bigram || prediction) (nats)", marker="o", ms=3
    )
    axes[0].set_xlabel("training step")
    axes[0].legend(fontsize=8)
    return fig
