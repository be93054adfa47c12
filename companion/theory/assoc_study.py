"""The associative-memory chapter's computation (Theorem 3, Lemma H.3, Fig. 18), cached, and its summary."""

from __future__ import annotations

import numpy as np

from companion import cache, config
from companion.report import Summary, loglog_slope
from companion.theory import assoc_memory as am

ALPHAS = (0.25, 0.3, 0.35)  # inside Theorem 3's alpha in (0.2, 0.4)
REMARK_ALPHAS = (0.05, 0.15, 0.39)  # Remark 1: "any value alpha in (0, 0.4) still has the same result"
T_MAX = 1e8
GD = dict(alpha=0.3, lr=0.1, steps=20_000, record_every=50)
FIG18 = dict(n=3, alpha=0.03, runs=20, lr=1.0, record_every=50)
FIG18_DS = (8, 12)
SIZES = {"quick": dict(fig18_steps=5000), "full": dict(fig18_steps=20000)}
MODULES = ("companion.theory.assoc_memory", "companion.theory.assoc_study")


def study(profile: str | None = None, use_cache: bool = True) -> dict:
    """ODE solutions ``sols[(flow, alpha)]`` (and ``remark[(flow, alpha)]`` outside Theorem 3's range), gradient descent on W ``gd`` with the two ODEs over its time
    range (``ode_W``, ``ode_beta``), and Fig. 18's runs ``fig18[d]`` (cached)."""
    sizes = SIZES[config.get_profile(profile)]

    def compute():
        gd = am.train_two_token_W(**GD)
        return {
            "sols": {(flow, a): am.solve_ab(a, T_MAX, flow) for flow in am.FLOWS for a in ALPHAS},
            "remark": {(flow, a): am.solve_ab(a, T_MAX, flow) for flow in am.FLOWS for a in REMARK_ALPHAS},
            "gd": gd,
            "ode_W": am.solve_ab(GD["alpha"], gd["t"][-1], "W", n_points=4000),
            "ode_beta": am.solve_ab(GD["alpha"], gd["t"][-1], "beta", n_points=4000),
            "fig18": {d: am.fig18_runs(d=d, steps=sizes["fig18_steps"], **FIG18) for d in FIG18_DS},
            "sizes": sizes,
        }

    settings = {
        "sizes": sizes,
        "alphas": ALPHAS,
        "remark_alphas": REMARK_ALPHAS,
        "t_max": T_MAX,
        "gd": GD,
        "fig18": FIG18,
        "ds": FIG18_DS,
    }
    return cache.load_or_compute("assoc_memory", settings, compute, MODULES, use_cache=use_cache)


def mean_iqr(run: dict) -> float:
    """Time-averaged interquartile range over runs of the rank-2 pure-label loss."""
    L = run["loss"][:, :, 1]
    return float((np.percentile(L, 75, 1) - np.percentile(L, 25, 1)).mean())


def summary(res: dict) -> Summary:
    sols, gd = res["sols"], res["gd"]
    beta = [(a, s) for (f, a), s in sols.items() if f == "beta"]

    def rank1_slope(s):
        keep = s.t >= 1e4
        return loglog_slope(s.t[keep], s.probabilities(rank=1)[keep, 2])

    slopes = [rank1_slope(s) for s in sols.values()]
    remark = res["remark"]

    def gd_gap(ode):
        return max(
            float(np.abs(np.interp(gd["t"], ode.t, getattr(ode, k)) - gd[k]).max())
            for k in ("beta1", "beta2")
        )

    final = res["fig18"][12]["loss"][-1]  # (runs, ranks + full)
    return Summary(
        {
            "b_dev": (
                max(abs(s.b[-1] - np.log(a / (1 - a))) for (f, a), s in sols.items()),
                "max |b(t_max) - log(alpha/(1-alpha))| over alpha and both flows",
            ),
            "a_dev": (
                max(abs(s.a[-1] + np.log(s.t[-1]) - np.log(5 / (18 * (1 - a)))) for a, s in beta),
                "max |a + log t - log(5/(18(1-alpha)))| at t_max, paper's flow",
            ),
            "lemma_off": (
                min(abs(s.a[-1] + np.log(s.t[-1]) - am.lemma_h3_limits(a)[0]) for a, s in beta),
                "min gap between a + log t and Lemma H.3's constant over alpha",
            ),
            "aW_dev": (
                max(
                    abs(s.a[-1] + np.log(s.t[-1]) - np.log(4 / (3 * (1 - a))))
                    for (f, a), s in sols.items()
                    if f == "W"
                ),
                "max |a + log t - log(4/(3(1-alpha)))| at t_max, W-flow",
            ),
            "full_dev": (
                max(abs(s.probabilities()[-1, 2] - a) for (f, a), s in sols.items()),
                "max |P(noise) - alpha| of the full model at t_max",
            ),
            "rank1_slope": (
                max(slopes, key=lambda x: abs(x + 0.5)),
                "rank-1 noise probability: log-log slope over [1e4, t_max] farthest from -1/2",
            ),
            "remark_slope": (
                max((rank1_slope(s) for s in remark.values()), key=lambda x: abs(x + 0.5)),
                f"Remark 1, alpha in {REMARK_ALPHAS}: rank-1 slope farthest from -1/2, both flows",
            ),
            "remark_full_dev": (
                max(abs(s.probabilities()[-1, 2] - a) for (f, a), s in remark.items()),
                f"Remark 1, alpha in {REMARK_ALPHAS}: max |P(noise) - alpha| of the full model",
            ),
            "gd_dev": (gd_gap(res["ode_W"]), "max |beta_GD - beta_ODE|, W-flow ODE"),
            "gd_dev_beta": (gd_gap(res["ode_beta"]), "the same against the paper's beta-flow ODE"),
            "frac_rank2": (
                float((final[:, 1] < final[:, -1]).mean()),
                "Fig. 18, d = 12: fraction of runs where rank 2 ends below the full model",
            ),
            "med_rank2": (float(np.median(final[:, 1])), "median final pure-label loss, rank 2"),
            "med_full": (float(np.median(final[:, -1])), "median final pure-label loss, full model"),
            "iqr_ratio": (
                mean_iqr(res["fig18"][12]) / mean_iqr(res["fig18"][8]),
                "time-averaged IQR of the rank-2 loss, d = 12 over d = 8",
            ),
        }
    )
