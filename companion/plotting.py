"""House figure helpers: one idea per figure, lowercase axis labels, legends naming curves.

Captions and names live in the chapter cell metadata (``myst-nb`` figure
options), so no function here sets a title. The house style (a light grid, no
top or right spine, 110 dpi, legends without frames) is ``book/matplotlibrc``,
which matplotlib reads from a chapter's working directory; importing this
module changes no setting.
"""

from __future__ import annotations

import textwrap

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


def rho_panels(steps, metric_by_rho: dict[str, np.ndarray], rhos, xlabel: str = "training step"):
    """Fig. 3 left three: one panel per metric, one curve per rho (colour = rho)."""
    n = len(metric_by_rho)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.4), constrained_layout=True)
    axes = np.atleast_1d(axes)
    cmap = plt.get_cmap("viridis")
    for ax, (ylabel, values) in zip(axes, metric_by_rho.items()):
        for j, rho in enumerate(rhos):
            ax.plot(steps, values[:, j], color=cmap(j / max(1, len(rhos) - 1)), label=f"rho={rho:g}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
    axes[-1].legend(fontsize=7, ncol=2, title="kept rank fraction")
    return fig


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


PAIR_COLOURS = {"[q, ybar]": "tab:green", "[q, tau]": "tab:red", "other": "lightgray"}


def attention_bars(ax, attn: np.ndarray, kinds: np.ndarray, ylabel: str = "attention from position T"):
    """Attention over key positions, coloured by what each position holds (Fig. 4).

    ``kinds`` (T,) holds "[q, ybar]", "[q, tau]" or "other" per position; the
    positions of the first two kinds are also marked under the axis, so that
    pairs receiving no attention stay visible.
    """
    from matplotlib.patches import Patch

    pos = np.arange(len(attn))
    ax.bar(pos, attn, color=[PAIR_COLOURS[k] for k in kinds])
    for kind in ("[q, ybar]", "[q, tau]"):
        hit = pos[kinds == kind]
        ax.plot(
            hit,
            np.full(len(hit), -0.04 * max(attn.max(), 1e-3)),
            "^",
            color=PAIR_COLOURS[kind],
            ms=6,
            clip_on=False,
        )
    ax.set_xlabel("key position s")
    ax.set_ylabel(ylabel)
    ax.legend(handles=[Patch(color=c, label=k) for k, c in PAIR_COLOURS.items()])
    return ax


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


def depth_panels(runs_by_depth: dict, truncated_rho: float, label: str):
    """Figs. 19-20: clean test loss (top) and accuracy (bottom) along training, one column per depth L,
    for the full model and with the last MLP's input at ``truncated_rho`` (runs of
    :func:`companion.experiments.noisy_recall.run`)."""
    fig, axes = plt.subplots(
        2, len(runs_by_depth), figsize=(4 * len(runs_by_depth), 5.6), constrained_layout=True, squeeze=False
    )
    for col, (L, run) in enumerate(runs_by_depth.items()):
        for row, (key, name) in enumerate(
            [("loss", "clean test loss"), ("pred_correct", "clean test accuracy")]
        ):
            steps, full = run.series(f"clean_{key}", rho=1.0)
            ys = {"full model": full, label: run.series(f"clean_{key}", rho=truncated_rho)[1]}
            curves(axes[row, col], steps, ys, "training step", name)
        panel_label(axes[0, col], f"L = {L}" + (" (diverged)" if run.diverged_at is not None else ""))
    return fig


def recall_attention_figure(models: dict, task, seed: int = 123, n: int = 64):
    """Fig. 4: second-layer attention from position T over one noisy sequence holding both a [q, ybar] and a
    [q, tau] pair, one panel per model (``{panel label: model}``), coloured by what each position holds."""
    import torch

    from companion import probes

    batch = task.sample(np.random.default_rng(seed), n)  # noisy test sequences
    tokens = torch.as_tensor(batch.inputs)
    i = probes.sequence_with_both_pairs(batch.inputs, task.triggers, task.noise_token)
    kinds = probes.pair_kinds(batch.inputs[i], task.triggers, task.noise_token)
    fig, axes = plt.subplots(
        len(models),
        1,
        figsize=(7, 2.5 * len(models) + 0.5),
        sharex=True,
        constrained_layout=True,
        squeeze=False,
    )
    for ax, (label, model) in zip(axes[:, 0], models.items()):
        att = probes.recall_attention(model, tokens, task.triggers, task.noise_token)
        attention_bars(ax, att["attn"][i], kinds, ylabel=label)
    return fig


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


def leading_deviation(table: dict, covered: int, title_keys: dict | None = None):
    """Seed 004, Theorem 4.1: relative distance of each weight to its leading term over the GD steps
    (solid), the theorem's bound over the leading term's size (dotted), the steps the theorem covers
    shaded. ``table`` is :func:`companion.theory.leading_theorem.theorem_table`'s output."""
    keys = title_keys or {k: k for k in table["rel"]}
    fig, ax = plt.subplots(figsize=(6.4, 3.8), constrained_layout=True)
    s = table["s"]
    for j, (key, label) in enumerate(keys.items()):
        ax.plot(s, table["rel"][key], "-", color=f"C{j}", label=f"{label}: distance / leading term")
        ax.plot(s, table["bound_rel"][key], ":", color=f"C{j}", label=f"{label}: bound / leading term")
    ax.axvspan(0.5, covered + 0.5, color="gray", alpha=0.15, lw=0, label="steps the theorem covers")
    ax.set_yscale("log")
    ax.set_xlabel("gradient step s")
    ax.set_ylabel("relative to the leading term's norm")
    ax.legend(fontsize=7, ncol=2)
    return fig


def cosine_panels(runs: dict, weights: tuple[str, ...] = ("W_O", "V", "W", "P")):
    """Seed 004, Fig. 4: cosine of each weight (every layer) with its leading term over epochs, one
    panel per learning rate; ``runs`` maps a rate to a run of :func:`companion.theory.leading_study.sgd_run`."""
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


def layer_checkpoint_maps(res: dict, keys=("attention", "embedding", "embedding_no_mlp")):
    """Seed 004, Fig. 6: one heat map per comparison, layers (rows) by checkpoints (columns), colour =
    cosine between covariance matrices."""
    revs = res["revisions"]
    fig, axes = plt.subplots(1, len(keys), figsize=(4.6 * len(keys), 3.4), constrained_layout=True)
    for ax, key in zip(np.atleast_1d(axes), keys):
        M = np.array([res["by_revision"][r][key] for r in revs]).T  # (layers, checkpoints)
        im = ax.imshow(M, aspect="auto", origin="lower", cmap="RdBu_r", vmin=-1, vmax=1)
        ax.set_xticks(range(len(revs)), [r.removeprefix("step") for r in revs], rotation=90, fontsize=6)
        ax.set_yticks(range(M.shape[0]), [str(i + 1) for i in range(M.shape[0])], fontsize=7)
        ax.set_xlabel(f"checkpoint step ({key.replace('_', ' ')})")
        ax.set_ylabel("layer")
        ax.grid(False)
    fig.colorbar(im, ax=axes, label="cosine of covariance matrices")
    return fig


def head_checkpoint_maps(res: dict, layers: list[int]):
    """Seed 004, Fig. 7: per head (rows) and checkpoint (columns), the attention cosine of a few layers."""
    revs = res["revisions"]
    fig, axes = plt.subplots(1, len(layers), figsize=(4.4 * len(layers), 3.2), constrained_layout=True)
    for ax, layer in zip(np.atleast_1d(axes), layers):
        M = np.array([res["by_revision"][r]["heads"][layer] for r in revs]).T  # (heads, checkpoints)
        im = ax.imshow(M, aspect="auto", origin="lower", cmap="RdBu_r", vmin=-1, vmax=1)
        ax.set_xticks(range(len(revs)), [r.removeprefix("step") for r in revs], rotation=90, fontsize=6)
        ax.set_xlabel(f"checkpoint step (layer {layer + 1})")
        ax.set_ylabel("head")
        ax.grid(False)
    fig.colorbar(im, ax=axes, label="cosine of covariance matrices")
    return fig


def capacity_panels(curves: dict, weighted_curves: dict | None = None):
    """Seed 002: recall accuracy of a memory of M pairs against M / d (left) and M / d^2 (right), one
    colour per d; dashed, the Gaussian prediction; dotted (right), memories with per-pair weights."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True, constrained_layout=True)
    for j, (d, (M, acc, pred)) in enumerate(sorted(curves.items())):
        for ax, x in zip(axes, (M / d, M / d**2)):
            ax.plot(x, acc, "o-", ms=3, color=f"C{j}", label=f"d = {d}")
            ax.plot(x, pred, "--", color=f"C{j}", lw=0.8)
        if weighted_curves:
            Mw, accw, _ = weighted_curves[d]
            axes[1].plot(Mw / d**2, accw, ":", color=f"C{j}")
    for ax, label in zip(axes, ("pairs per dimension M / d", "pairs per parameter M / d^2")):
        ax.set_xscale("log")
        ax.set_xlabel(label)
    axes[0].set_ylabel("recall accuracy")
    axes[0].legend(fontsize=8)
    return fig


PROBE_LABELS = {
    "probe_OV2": "W_OV^2 (outputs)",
    "probe_QK2": "W_QK^2 (trigger keys)",
    "probe_QK1_early": "W_QK^1, early positions",
    "probe_QK1": "W_QK^1, all positions",
}


def induction_schedule_panels(runs: dict):
    """Seed 002 / Birth Fig. 3: one panel per freeze schedule, in-context accuracy (black) and the
    memory-recall probes (colours) along training; dotted line: the step the frozen matrices are released.
    The last cell of the grid holds the legend."""
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


def induction_layer_panels(runs: dict, ff_steps, ff_curves: dict):
    """Seed 002: in-context accuracy of one- and two-layer models along training (left), and the
    KL divergence from the bigram rows to a feed-forward layer's prediction, ``ff_curves`` (right)."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), constrained_layout=True)
    for L, r in sorted(runs.items()):
        axes[0].plot(
            r.metrics["step"], r.metrics["acc"], "o-", ms=3, label=f"{L} layer{'s' if L > 1 else ''}"
        )
    axes[0].set_ylabel("in-context accuracy")
    curves(axes[1], ff_steps, ff_curves, "training step", "KL(bigram || prediction) (nats)", marker="o", ms=3)
    axes[0].set_xlabel("training step")
    axes[0].legend(fontsize=8)
    return fig


def factual_loss_panels(runs: dict, references: dict):
    """Seed 002, Fig. 5: total, relation-only and subject-only test losses along training, one panel per run;
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


def scan_snap_B_panels(res: dict):
    """Scan and Snap, Figs. 3 and 9. Left: the growth factor e^{2 B_n(t)} (the ODE) for each eta_Y at
    eta_Z = 0.5, t_0 dotted. Middle: B_n(t) for eta_Y = 1 by the ODE, the corrected closed form, Eq. (127) and
    Eq. (14). Right: B_n(t) at fixed nu = eta_Z / eta_Y for several eta_Z, with B_n(t_0) marked."""
    t = res["t"]
    fig, axes = plt.subplots(1, 3, figsize=(12.5, 3.4), constrained_layout=True)
    for j, (ey, r) in enumerate(sorted(res["fig3"].items())):
        (line,) = axes[0].plot(t[1:], np.exp(2 * r["B"][1:]), label=f"eta_Y = {ey:g}", color=f"C{j}")
        axes[0].axvline(r["t0"], color=line.get_color(), ls=":", lw=1)
    axes[0].set_ylabel(r"growth factor $e^{2B_n(t)}$")
    r = res["fig3"][1.0]
    axes[1].plot(t[1:], r["B"][1:], color="k", lw=2.5, alpha=0.4, label="ODE (adaptive)")
    axes[1].plot(t[1:], r["closed"][1:], color="C0", ls="--", label="1/4 ln(1 + 4K Gamma / rho0^4)")
    axes[1].plot(t[1:], r["eq127"][1:], color="C3", label="Eq. (127) as printed")
    axes[1].plot(t[1:], r["eq14"][1:], color="C1", ls=":", label="Eq. (14), two phases")
    axes[1].axvline(r["t0"], color="grey", ls=":", lw=1)
    axes[1].set_ylabel(r"$B_n(t)$, $\eta_Y = 1$, $\eta_Z = 0.5$")
    for j, ((nu, ez), r9) in enumerate(sorted(res["fig9"].items())):
        if nu != max(k[0] for k in res["fig9"]):
            continue
        (line,) = axes[2].plot(t[1:], r9["B"][1:], label=f"eta_Z = {ez:g}", color=f"C{j % 10}")
        axes[2].plot([r9["t0"]], [r9["B_t0"]], "o", color=line.get_color())
    axes[2].set_ylabel(rf"$B_n(t)$, $\nu = \eta_Z/\eta_Y$ = {max(k[0] for k in res['fig9']):g}")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("t (steps)")
        ax.legend(fontsize=7)
    return fig


def scan_snap_dynamics_panels(runs: dict, classes, key, nus):
    """Left: the attention logits z_{psi(1) l}(t) of class 1 along one population run (``runs[key]``),
    distinct tokens coloured by P(l|n), common tokens grey. Right: the largest relative deviation from
    Eq. (11) against nu = eta_Y / eta_Z, one line per (common tokens, Z(0))."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), constrained_layout=True)
    z = runs[key]["z"]
    d = classes.distinct_tokens(0)
    cmap = plt.get_cmap("viridis")
    for i, l in enumerate(d):
        axes[0].plot(
            z[:, l] - z[0, l],
            color=cmap(i / max(1, len(d) - 1)),
            lw=1.2,
            label="distinct (light: likely)" if i == len(d) - 1 else None,
        )
    for l in classes.common_tokens():
        axes[0].plot(
            z[:, l] - z[0, l],
            color="grey",
            lw=1.2,
            label="common" if l == classes.common_tokens()[0] else None,
        )
    axes[0].set_xlabel("gradient step (population loss)")
    axes[0].set_ylabel(r"$z_l(t) - z_l(0)$")
    axes[0].legend(fontsize=7)
    cases = sorted({(k[0], k[2]) for k in runs})
    for nc, z0 in cases:
        axes[1].plot(
            nus,
            [runs[(nc, nu, z0)]["deviation"] for nu in nus],
            "o-",
            label=f"{nc} common, Z(0) {'= 0' if z0 == 0 else f'~ U(-{z0:g}, {z0:g})'}",
        )
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("nu = eta_Y / eta_Z")
    axes[1].set_ylabel("largest relative deviation from Eq. (11)")
    axes[1].legend(fontsize=7)
    return fig


def scan_snap_attention_maps(runs: dict, classes, n: int = 0, n_tokens: int = 20, steps=(0, 2, 4, 6, 8, 10)):
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


def scan_snap_loss_vs_log(loss: np.ndarray, log: dict, labels):
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


def scan_snap_adam_bars(c_final: np.ndarray, lrs, distinct: np.ndarray, probs: np.ndarray):
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


def scan_snap_fig6(tab: dict, Ks, lr_z, ratios):
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


def scan_snap_text_maps(runs: dict, n_cols: int = 4):
    """Fig. 7: the first layer's attention on one training window at evenly spaced evaluations, one row per
    run (``runs[name]`` from :func:`companion.experiments.scan_snap_text.run`)."""
    fig, axes = plt.subplots(
        len(runs), n_cols, figsize=(2.6 * n_cols, 2.5 * len(runs)), constrained_layout=True, squeeze=False
    )
    for row, (name, r) in zip(axes, runs.items()):
        idx = np.linspace(0, len(r["step"]) - 1, n_cols).round().astype(int)
        for ax, i in zip(row, idx):
            ax.imshow(r["maps"][i], cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
            ax.set_xlabel(f"key position (step {int(r['step'][i])})", fontsize=8)
            ax.grid(False)
            ax.tick_params(labelsize=6)
        row[0].set_ylabel(f"{name}\nquery position", fontsize=8)
    return fig


def scan_snap_text_curves(runs: dict):
    """Along training: held-out entropy of the first layer's attention (left; dashed: uniform causal
    attention), how far it moved since the previous evaluation (middle), held-out loss (right)."""
    fig, axes = plt.subplots(1, 3, figsize=(12.5, 3.2), constrained_layout=True)
    for name, r in runs.items():
        axes[0].plot(r["step"], r["entropy"], marker="o", ms=2, label=name)
        axes[1].plot(r["step"][1:], r["moved"][1:], marker="o", ms=2, label=name)
        axes[2].plot(r["step"], r["loss"], marker="o", ms=2, label=name)
    axes[0].axhline(next(iter(runs.values()))["max_entropy"], color="grey", ls="--", lw=0.8)
    for ax, lab in zip(
        axes,
        (
            "attention entropy, layer 1 (nats)",
            "attention moved since last evaluation",
            "held-out cross-entropy (nats)",
        ),
    ):
        ax.set_xlabel("SGD iteration")
        ax.set_ylabel(lab)
    axes[0].legend(fontsize=7)
    return fig


def scan_snap_fig10(lrs, entropy: np.ndarray, max_entropy: float):
    """Fig. 10: held-out attention entropy after training against the learning rate; ``entropy`` (n_lr,
    n_seeds), mean and one standard deviation."""
    fig, ax = plt.subplots(figsize=(5, 3.2), constrained_layout=True)
    ax.errorbar(lrs, entropy.mean(1), entropy.std(1), marker="o", capsize=3, label="mean over seeds, +-1 std")
    ax.plot(np.repeat(lrs, entropy.shape[1]), entropy.ravel(), ".", color="grey", label="single runs")
    ax.axhline(max_entropy, color="grey", ls="--", lw=0.8, label="uniform causal attention")
    ax.set_xscale("log")
    ax.set_xticks(lrs, [f"{v:g}" for v in lrs])
    ax.set_xlabel("learning rate (one rate for all weights)")
    ax.set_ylabel("attention entropy, layer 1 (nats)")
    ax.legend(fontsize=7)
    return fig


def scan_snap_h_panels(lemma: dict, s_max: int = 60):
    """Fig. 8: the discrete speed h*(s) (steps) and the continuous h(s) (smooth) for each eta_Y over the first
    ``s_max`` epochs (left), and the gap h*(s) - h(s) over all s against the bound 2 eta_Y / M (right)."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.3), constrained_layout=True)
    s, M = lemma["t"], lemma["M"]
    for j, (ey, r) in enumerate(sorted(lemma["runs"].items())):
        k = int(s_max) + 1
        axes[0].step(s[:k], r["h_star"][:k], where="post", color=f"C{j}", lw=1, label=f"h*, eta_Y = {ey:g}")
        axes[0].plot(s[:k], r["h"][:k], color=f"C{j}", ls="--", lw=1)
        gap = r["h_star"] - r["h"]
        axes[1].plot(s[1:], gap[1:], color=f"C{j}", label=f"eta_Y = {ey:g}")
        axes[1].axhline(2 * ey / M, color=f"C{j}", ls=":", lw=0.8)
    axes[0].set_xlabel("epoch s")
    axes[0].set_ylabel("h*(s) (steps), h(s) (dashed)")
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("epoch s")
    axes[1].set_ylabel("h*(s) - h(s); dotted: 2 eta_Y / M")
    axes[0].legend(fontsize=7)
    return fig


def capacity_grid(Hs, ms, acc: np.ndarray, d_h: int, S_plus_R: int):
    """Fig. 4 (right): best accuracy over (heads, MLP width), each cell annotated; a line where H d_h = S + R."""
    fig, ax = plt.subplots(figsize=(5.2, 3.8), constrained_layout=True)
    heatmap(
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


def hop_panels(curves: dict, chance: float):
    """Seed 002, K1-K3: one panel per run, the test accuracy at each hop count along training (colour = hop
    count, one legend above the panels, so that it covers no curve); the curriculum's stage as a grey step line
    on a right-hand axis where it changes; the run's name inside its panel, wrapped. ``curves``: the
    :func:`companion.experiments.khop.curves` of the runs."""
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


def random_seed_panels(curves: dict):
    """The head-or-bigram measures along training, one colour per seed (``curves`` as :func:`companion.experiments.induction_random.random_seed_curves`
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
