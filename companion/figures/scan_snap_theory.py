"""The chapter ``book/scan_snap_theory``'s own figures; the house helpers are :mod:`companion.plotting`'s. No
computation imports this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def B_panels(res: dict):
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


def dynamics_panels(runs: dict, classes, key, nus):
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


def h_panels(lemma: dict, s_max: int = 60):
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
