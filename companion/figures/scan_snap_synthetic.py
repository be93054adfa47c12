"""The chapter ``book/scan_snap_synthetic``'s own figures; the house helpers are :mod:`companion.plotting`'s. No
computation imports this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def attention_maps(runs: dict, classes, n: int = 0, n_tokens: int = 20, steps=(0, 2, 4, 6, 8, 10)):
    """Fig. 4: c_n of class ``n`` on the first ``n_tokens`` tokens (common, then the class's distinct
    tokens) at the given steps and at the end, one panel per run (first seed)."""
    fig, axes = plt.subplots(1, len(runs), figsize=(5.2 * len(runs), 3.2), constrained_layout=True)
    for ax, (name, r) in zip(np.atleast_1d(axes), runs.items()):
        cs = list(r["c_step"])
        rows = [cs.index(s) for s in steps] + [len(cs) - 1]
        img = r["c"][rows, 0, n][:, classes.probs[n] > 0][:, :n_tokens]
        im = ax.imshow(img, aspect="auto", interpolation="nearest", cmap="viridis")
        ax.set_yticks(range(len(rows)), [f"step {s}" for s in steps] + [f"final ({cs[-1]})"], fontsize=7)
        ax.axvline(classes.common_tokens().size - 0.5, color="w", ls="--", lw=1)
        ax.set_xticks(
            range(0, img.shape[1], 2), [str(int(t)) for t in np.nonzero(classes.probs[n] > 0)[0][:n_tokens:2]]
        )
        ax.set_xlabel("contextual token (common | distinct, P(l|n) rising)")
        ax.grid(False)
        ax.text(0.98, 1.02, name, transform=ax.transAxes, ha="right", fontsize=8)
        fig.colorbar(im, ax=ax).set_label(r"$c_{l|n}$")
    return fig


def loss_vs_log(loss: np.ndarray, log: dict, labels):
    """Fig. 4 (left)'s run: our batch losses (one line per seed) and the authors' logged losses."""
    fig, ax = plt.subplots(figsize=(5.5, 3.2), constrained_layout=True)
    for i, lab in enumerate(labels):
        ax.plot(np.arange(loss.shape[1]), loss[i], lw=1, alpha=0.8, label=lab)
    ax.plot(log["step"], log["loss"], "k.", ms=5, label="authors' log (figure_4.log)")
    ax.set_yscale("log")
    ax.set_xlabel("SGD step")
    ax.set_ylabel("batch cross-entropy (nats)")
    ax.legend(fontsize=7)
    return fig


def adam_bars(c_final: np.ndarray, lrs, distinct: np.ndarray, probs: np.ndarray):
    """Fig. 5: c_1 on class 1's distinct tokens at the end of Adam training, one group of bars per learning
    rate (``c_final`` of shape (len(lrs), M), one seed)."""
    fig, ax = plt.subplots(figsize=(6.5, 3.2), constrained_layout=True)
    w = 0.8 / len(lrs)
    x = np.arange(len(distinct))
    for j, lr in enumerate(lrs):
        ax.bar(x + (j - (len(lrs) - 1) / 2) * w, c_final[j, distinct], w, label=f"eta_Y = eta_Z = {lr:g}")
    ax.set_xticks(x, [f"{p:.3f}" for p in probs[distinct]], fontsize=7)
    ax.set_xlabel("distinct token of class 1, by P(l|n)")
    ax.set_ylabel(r"$c_{l|1}$ after 100 Adam steps")
    ax.legend(fontsize=7)
    return fig


def fig6(tab: dict, Ks, lr_z, ratios):
    """Fig. 6: entropy of c_n on distinct tokens against eta_Y / eta_Z, one panel per K, one colour per
    eta_Z; ours (solid, +-1 std over seeds) and the published numbers (dashed)."""
    fig, axes = plt.subplots(1, len(Ks), figsize=(12.5, 3.3), sharey=True, constrained_layout=True)
    for k, (ax, K) in enumerate(zip(axes, Ks)):
        for j, ez in enumerate(lr_z):
            ax.errorbar(
                ratios,
                tab["mean"][k, j],
                tab["std"][k, j],
                color=f"C{j}",
                marker="o",
                ms=3,
                capsize=2,
                label=f"eta_Z = {ez:g} (ours)",
            )
            ax.plot(
                ratios,
                tab["pub_mean"][k, j],
                color=f"C{j}",
                ls="--",
                lw=1,
                label="published" if j == 0 else None,
            )
        ax.set_xscale("log")
        ax.set_xticks(ratios, [f"{r:g}" for r in ratios])
        ax.set_xlabel("eta_Y / eta_Z")
        ax.text(0.97, 0.03, f"K = {K}", transform=ax.transAxes, ha="right", fontsize=9)
    axes[0].set_ylabel(r"entropy of $c_n$ on distinct tokens")
    axes[0].legend(fontsize=6)
    return fig
