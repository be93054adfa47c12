"""House figure helpers: one idea per figure, lowercase axis labels, legends naming curves.

Captions and names live in the chapter cell metadata (``myst-nb`` figure
options), so no function here sets a title. The house style (a light grid, no
top or right spine, 110 dpi, legends without frames) is ``book/matplotlibrc``,
which matplotlib reads from a chapter's working directory; importing this
module changes no setting. A chapter's own figures are in :mod:`companion.figures`
(one module per chapter), where no cached computation imports them.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def curves(ax, x, ys: dict, xlabel: str, ylabel: str, logx: bool = False, **kw):
    """Several named curves on one axis."""
    for label, y in ys.items():
        ax.plot(x, y, label=label, **kw)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("symlog", linthresh=1)
    if len(ys) > 1:
        ax.legend()
    return ax


def heatmap(ax, M: np.ndarray, xlabel: str, ylabel: str, cbar_label: str = "", ticks=None, **kw):
    """A matrix as an image with a labelled colour bar."""
    im = ax.imshow(M, aspect="auto", interpolation="nearest", **kw)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(False)
    cb = ax.figure.colorbar(im, ax=ax)
    if cbar_label:
        cb.set_label(cbar_label)
    if ticks is not None:
        pos, labels = ticks
        ax.set_xticks(pos, labels, fontsize=7)
        ax.set_yticks(pos, labels, fontsize=7)
    return im


def panel_label(ax, text: str):
    """Name a panel of a multi-panel figure inside its axes (the house style sets no titles)."""
    ax.text(
        0.02,
        0.98,
        text,
        transform=ax.transAxes,
        ha="left",
        va="top",
        fontsize=9,
        bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none", alpha=0.8),
    )
    return ax


def recorded_curves(live_curves: dict, recs, live_label: str = "this build"):
    """Fig. 3's two headline curves (clean data: p(correct) with F2 dropped, p(noise) of the full model)
    along training, for the live run and every recorded run (companion.record), against the fraction of
    training done so that runs of different lengths line up."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6 + 0.18 * len(recs)), layout="constrained")
    series = [(live_label, live_curves)] + [(r.short_label(), r.curves) for r in recs]
    for label, c in series:
        frac = np.asarray(c["step"], float) / max(c["step"])
        axes[0].plot(frac, c["p_correct_drop"], label=label)
        axes[1].plot(frac, c["p_noise_full"], label=label)
    axes[0].set_ylabel("p(correct), F2 dropped")
    axes[1].set_ylabel("p(noise), full model")
    for ax in axes:
        ax.set_xlabel("fraction of training steps")
        ax.set_ylim(0, 1)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", fontsize=7)
    return fig
