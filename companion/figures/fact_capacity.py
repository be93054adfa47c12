"""The chapter ``book/fact_capacity``'s own figures; the house helpers are :mod:`companion.plotting`'s. No
computation imports this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from companion import plotting


def capacity_grid(Hs, ms, acc: np.ndarray, d_h: int, S_plus_R: int):
    """Fig. 4 (right): best accuracy over (heads, MLP width), each cell annotated; a line where H d_h = S + R."""
    fig, ax = plt.subplots(figsize=(5.2, 3.8), constrained_layout=True)
    plotting.heatmap(
        ax,
        acc,
        "MLP width m",
        f"heads H (d_h = {d_h})",
        "best test accuracy",
        vmin=0.0,
        vmax=1.0,
        cmap="viridis",
        origin="lower",
    )
    ax.set_xticks(range(len(ms)), [str(m) for m in ms])
    ax.set_yticks(range(len(Hs)), [str(H) for H in Hs])
    for i in range(len(Hs)):
        for j in range(len(ms)):
            ax.text(
                j,
                i,
                f"{acc[i, j]:.2f}",
                ha="center",
                va="center",
                fontsize=8,
                color="black" if acc[i, j] > 0.6 else "white",
            )
    need = S_plus_R / d_h  # H at which H d_h = S + R
    if Hs[0] <= need <= Hs[-1]:
        ax.axhline(np.interp(need, Hs, range(len(Hs))), color="w", ls="--", lw=1)
    return fig


def facts_params(sweeps: dict):
    """Fig. 4 (left): facts stored against parameters, log-log, one colour per sweep; filled markers where the
    size was trained and stored, hollow where it is the search's untested lower end; for each sweep a line of
    slope 1 through its filled points. ``sweeps``: {label: (curves, fitted slope)}, the curves of
    :func:`companion.experiments.fact_capacity.scaling_curves`."""
    fig, ax = plt.subplots(figsize=(5.6, 4.0), constrained_layout=True)
    for i, (label, (curves, slope)) in enumerate(sweeps.items()):
        colour = f"C{i}"
        p, f = np.asarray(curves["params"], float), np.asarray(curves["facts"], float)
        ok = np.asarray(curves["verified"], bool)
        marker = "os^D"[i % 4]
        ax.plot(
            p[ok],
            f[ok],
            marker + "-",
            color=colour,
            ms=8 - 2 * (i % 3),
            label=f"{label}: fitted slope {slope:.2f}",
        )
        if (~ok).any():
            ax.plot(p[~ok], f[~ok], marker, mfc="none", color=colour, label=f"{label}: lower end, untested")
        if ok.any():
            c = np.exp(np.mean(np.log(f[ok]) - np.log(p[ok])))
            xs = np.array([p.min() / 1.3, p.max() * 1.3])
            ax.plot(xs, c * xs, "--", color=colour, lw=0.8)
        if i == 0:
            for d, x, y in zip(curves["d"], p, f):
                ax.annotate(f"d={d}", (x, y), textcoords="offset points", xytext=(6, -10), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_xlabel("parameters 4 H d_h d + 2 m d")
    ax.set_ylabel("facts stored S R (accuracy 0.99)")
    ax.legend(fontsize=7, title="dashed: slope 1 (linear)", title_fontsize=7)
    return fig
