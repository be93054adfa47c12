"""The chapter ``book/induction_random``'s own figures; the house helpers are :mod:`companion.plotting`'s. No
computation imports this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def seed_panels(curves: dict):
    """The head-or-bigram measures along training, one colour per seed (``curves`` as :func:`companion.experiments.induction_random_seeds.random_seed_curves`
    gives them, live or recorded): the share of the repeated-trigger positions predicting the trigger's likeliest
    bigram successor, with o among its 2nd to 5th likeliest (solid) and off its 5 likeliest (dashed) (top left);
    their ratio, in over off, as trained (solid), with both pair discounts removed (dotted) and with both removed
    pair by pair (dash-dot) (top right); the
    token-token pair discount in W_QK^1 and in W_QK^2 (bottom)."""
    fig, grid = plt.subplots(2, 2, figsize=(10, 6.4), constrained_layout=True)
    axes = grid.ravel()
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    def ratio(name, suffix=""):
        num, den = (
            np.asarray(curves[f"random_top1_in{suffix}"][name]),
            np.asarray(curves[f"random_top1_off{suffix}"][name]),
        )
        return np.divide(num, den, out=np.full(num.shape, np.nan), where=den > 0)

    for i, name in enumerate(curves["step"]):
        steps, c = curves["step"][name], colours[i % len(colours)]
        axes[0].plot(steps, curves["random_top1_in"][name], "-", color=c, label=name)
        axes[0].plot(steps, curves["random_top1_off"][name], "--", color=c)
        axes[1].plot(steps, ratio(name), "-", color=c, label=name)
        axes[1].plot(steps, ratio(name, "_removed"), ":", color=c)
        axes[1].plot(steps, ratio(name, "_pairwise"), "-.", color=c, lw=0.9)
        axes[2].plot(steps, curves["random_pair_QK1"][name], "-", color=c, label=name)
        axes[3].plot(steps, curves["random_pair_QK2"][name], "-", color=c, label=name)
    axes[0].set_ylabel("share predicting the likeliest successor")
    axes[1].set_ylabel("ratio of the shares, in / off")
    axes[2].set_ylabel(r"$W^1_{QK}$: likely minus other successors")
    axes[3].set_ylabel(r"$W^2_{QK}$: likely minus other successors")
    for ax in axes:
        ax.set_xlabel("training step")
    axes[1].axhline(1, color="grey", lw=0.8)
    for ax in axes[2:]:
        ax.axhline(0, color="grey", lw=0.8)
    axes[0].legend(fontsize=8, title="solid: o 2nd-5th; dashed: off top 5", title_fontsize=7)
    axes[1].legend(
        fontsize=8,
        title="solid: as trained; dotted: discounts removed;\ndash-dot: removed pair by pair",
        title_fontsize=7,
    )
    return fig
