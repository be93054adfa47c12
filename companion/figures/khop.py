"""The k-hop family's figures (``book/khop``, ``book/khop_starts``, ``book/khop_stall``), shared like
:mod:`companion.experiments.khop`; the house helpers are :mod:`companion.plotting`'s. No computation imports
this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np

from companion.experiments import khop_curves


def hop_panels(curves: dict, chance: float):
    """The talk, K1-K3: one panel per run, the test accuracy at each hop count along training (colour = hop
    count, one legend above the panels, so that it covers no curve); the curriculum's stage as a grey step line
    on a right-hand axis where it changes; the run's name inside its panel, wrapped. ``curves``: the
    :func:`companion.experiments.khop_members.curves` of the runs."""
    names = list(curves["acc"])
    ncol = min(3, len(names))
    nrow = -(-len(names) // ncol)
    fig, axes = plt.subplots(
        nrow, ncol, figsize=(4.0 * ncol, 2.9 * nrow), sharey=True, squeeze=False, constrained_layout=True
    )
    axes = axes.ravel()
    cmap = plt.get_cmap("viridis")
    for ax, name in zip(axes, names):
        step, acc = np.asarray(curves["step"][name]), np.asarray(curves["acc"][name])
        k = acc.shape[1]
        for h in range(k):
            ax.plot(
                step, acc[:, h], color=cmap(h / max(1, k - 1)), lw=1.5, label=f"{h + 1} hop{'s' if h else ''}"
            )
        ax.axhline(chance, color="grey", ls=":", lw=1)
        stage = np.asarray(curves["stage"][name])
        if stage.min() > 0 and len(np.unique(stage)) > 1:
            tw = ax.twinx()
            tw.step(step, stage, where="post", color="grey", lw=1, alpha=0.7)
            tw.set_ylabel("curriculum stage", color="grey")
            tw.set_yticks(range(1, k + 1))
            tw.grid(False)
        ax.text(
            0.97, 0.5, textwrap.fill(name, 26), transform=ax.transAxes, ha="right", va="center", fontsize=9
        )
        ax.set_xlabel("training step")
        ax.set_ylabel("test accuracy")
    for ax in axes[len(names) :]:
        ax.axis("off")
    fig.legend(
        *axes[0].get_legend_handles_labels(), loc="outside upper center", ncol=k, fontsize=8, frameon=False
    )
    return fig


def seed_lines(panels: dict[str, dict[int, dict]], chance: float):
    """The talk, K2 over seeds: one panel per study ({title: {seed: run}}), the k-hop test accuracy of each
    seed along training (colour = seed, the same in every panel), a dot where the run moves to its last
    stage."""
    seeds = sorted(set().union(*panels.values()))
    cmap = plt.get_cmap("tab10")
    fig, axes = plt.subplots(
        1, len(panels), figsize=(5.2 * len(panels), 3.3), sharey=True, constrained_layout=True, squeeze=False
    )
    axes = axes[0]
    for ax, (title, runs) in zip(axes, panels.items()):
        for seed, r in sorted(runs.items()):
            step, acc = np.asarray(r["step"]), np.asarray(r["acc"])[:, -1]
            colour = cmap(seeds.index(seed) % 10)
            ax.plot(step, acc, color=colour, lw=1.4, label=f"seed {seed}")
            move = khop_curves.last_stage_at(r)
            if np.isfinite(move):
                ax.plot([move], [np.interp(move, step, acc)], "o", color=colour, ms=4)
        ax.axhline(chance, color="grey", ls=":", lw=1)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("training step")
    k = np.asarray(next(r for runs in panels.values() for r in runs.values())["acc"]).shape[1]
    axes[0].set_ylabel(f"test accuracy, {k} hops")
    handles = {h.get_label(): h for ax in axes for h in ax.get_legend_handles_labels()[0]}
    labels = [f"seed {s}" for s in seeds]
    fig.legend(
        [handles[n] for n in labels],
        labels,
        loc="outside upper center",
        ncol=len(labels),
        fontsize=8,
        frameon=False,
    )
    return fig


def rate_lines(at: dict[tuple[int, str], np.ndarray], budget: float, level: float):
    """The talk, K1 and K2 as rates: the steps until the test accuracy at k hops first reaches ``level``
    against k (log scale), one colour per kind of data, one point per seed; a run that never reached it is an
    open triangle at the budget (its steps are at least that). Grey: O(k) and exp(k) through the mixture's
    slower seed at the smallest k. ``at``: :func:`companion.experiments.khop_rates.steps_to_level`."""
    from matplotlib.lines import Line2D

    ks = sorted({k for k, _ in at})
    kinds = list(dict.fromkeys(d for _, d in at))
    fig, ax = plt.subplots(figsize=(7.6, 3.8), constrained_layout=True)
    colours = plt.get_cmap("tab10")
    handles = []
    for i, data in enumerate(kinds):
        dx = (i - (len(kinds) - 1) / 2) * 0.06  # side by side, so that equal steps do not hide each other
        for k in ks:
            for j, s in enumerate(at[(k, data)]):
                done = bool(np.isfinite(s))
                ax.plot(
                    k + dx + 0.02 * j,
                    s if done else budget,
                    "o" if done else "^",
                    color=colours(i),
                    mfc=colours(i) if done else "none",
                )
        finite = [(k, at[(k, data)].max()) for k in ks if np.isfinite(at[(k, data)]).all()]
        if finite:
            ax.plot(*zip(*finite), color=colours(i), lw=1, alpha=0.6)
        handles.append(Line2D([], [], color=colours(i), marker="o", label=data))
    handles.append(
        Line2D([], [], color="black", marker="^", mfc="none", ls="", label="not reached (at the budget)")
    )
    base = at[(ks[0], "mixture")].max() if (ks[0], "mixture") in at else np.nan
    if np.isfinite(base):
        grid = np.linspace(ks[0], ks[-1], 50)
        for y, ls, label in (
            (base * grid / ks[0], "--", f"O(k) through the mixture at k = {ks[0]}"),
            (base * np.exp(grid - ks[0]), ":", "exp(k), base e, through the same point"),
        ):
            handles += ax.plot(grid, y, color="grey", ls=ls, lw=1, label=label)
    ax.axhline(budget, color="black", lw=0.8, alpha=0.4)
    ax.set_yscale("log")
    ax.set_ylim(top=budget * 1.6)
    ax.set_xticks(ks)
    ax.set_xlabel("k (hops)")
    ax.set_ylabel(f"steps to test accuracy {level:g}\nat k hops")
    fig.legend(handles=handles, fontsize=8, frameon=False, loc="outside right center")
    return fig
