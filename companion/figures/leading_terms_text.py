"""The chapter ``book/leading_terms_text``'s own figures; the house helpers are :mod:`companion.plotting`'s. No
computation imports this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def cosine_panels(runs: dict, weights: tuple[str, ...] = ("W_O", "V", "W", "P")):
    """The leading-terms paper, Fig. 4: cosine of each weight (every layer) with its leading term over
    epochs, one panel per learning rate; ``runs`` maps a rate to a run of
    :func:`companion.theory.leading_study.sgd_run`."""
    fig, axes = plt.subplots(
        1, len(runs), figsize=(5.2 * len(runs), 3.6), sharey=True, constrained_layout=True
    )
    axes = np.atleast_1d(axes)
    for ax, (rate, run) in zip(axes, runs.items()):
        epoch = np.asarray(run["log"]["epoch"])
        for j, w in enumerate(weights):
            keys = [k for k in run["log"]["cos"][0] if k.rstrip("0123456789") == w]  # per layer: W1, W2, ...
            for n, key in enumerate(keys):
                ax.plot(
                    epoch[1:],
                    [row[key] for row in run["log"]["cos"][1:]],
                    color=f"C{j}",
                    ls=("-", "--", ":", "-.")[n % 4],
                    label=key,
                )
        ax.set_xlabel(f"epoch (learning rate {rate:g})")
    axes[0].set_ylabel("cosine with the leading term")
    axes[-1].legend(fontsize=7, ncol=2)
    return fig
