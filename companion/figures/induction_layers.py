"""The chapter ``book/induction_layers``'s own figures; the house helpers are :mod:`companion.plotting`'s. No
computation imports this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import matplotlib.pyplot as plt

from companion import plotting


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
