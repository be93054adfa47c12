"""The chapter ``book/factual_recall``'s own figures; the house helpers are :mod:`companion.plotting`'s. No
computation imports this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def loss_panels(runs: dict, references: dict):
    """The talk, Fig. 5: total, relation-only and subject-only test losses along training, one panel per run;
    ``references[name]``: {label: value} dashed horizontal lines (log |A|, log D, ...)."""
    fig, axes = plt.subplots(
        1, len(runs), figsize=(min(4.2 * len(runs), 12.5), 3.3), sharey=True, constrained_layout=True
    )
    for ax, (name, r) in zip(np.atleast_1d(axes), runs.items()):
        for key, label, color in (
            ("loss", "total", "k"),
            ("loss_relation", "relation-only", "C0"),
            ("loss_subject", "subject-only", "C1"),
        ):
            ax.plot(r["step"], r[key], color=color, lw=1.6, label=label)
        for label, value in references.get(name, {}).items():
            ax.axhline(value, color="grey", ls="--", lw=0.8)
            ax.text(r["step"][-1], value, f" {label}", va="bottom", ha="right", fontsize=8, color="grey")
        ax.text(0.97, 0.40, name, transform=ax.transAxes, ha="right", fontsize=9)
        ax.set_xlabel("training step")
    first = np.atleast_1d(axes)[0]
    first.set_ylabel("test loss (nats)")
    fig.legend(*first.get_legend_handles_labels(), loc="outside upper center", ncol=3, fontsize=8)
    return fig
