"""The chapter ``book/paper_scale``'s own figures; the house helpers are :mod:`companion.plotting`'s. No
computation imports this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import matplotlib.pyplot as plt


def scale_figure(ladder: dict, work, paper_work: float, reference: float):
    """The headline number over a ladder of sizes: p(correct | F2 dropped) and p(noise) of the full model
    against training tokens, one line per choice, with the paper's value and size marked."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), constrained_layout=True)
    for name, recs in ladder.items():
        if not recs:
            continue
        x = [work(r) for r in recs]
        axes[0].plot(x, [r.summary["p_correct_drop"] for r in recs], "o-", label=f"{name} choices")
        axes[1].plot(x, [r.summary["p_noise_full"] for r in recs], "o-", label=f"{name} choices")
    axes[0].axhline(reference, color="k", ls="--", lw=1, label=f"paper (Fig. 3): {reference:g}")
    axes[1].axhline(0.5, color="k", ls=":", lw=1, label="alpha = 0.5")
    for ax in axes:
        ax.axvline(paper_work, color="grey", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("training tokens (batch x T x steps); dotted: the paper's size")
    axes[0].set_ylabel("p(correct), F2 dropped (clean data)")
    axes[1].set_ylabel("p(noise), full model (clean data)")
    axes[0].legend(fontsize=7)
    axes[1].legend(fontsize=7)
    return fig
