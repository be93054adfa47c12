"""The one-step chapter's computation (Theorem 1, Lemmas D.1-D.2, Table 3), cached, and its summary.

:func:`study` runs the Monte Carlo of the chapter for a profile (cached with
:func:`companion.cache.load_or_compute`); :func:`summary` turns it into the
named values that the chapter shows, glues and asserts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from companion import cache, config
from companion.config import check_int, check_sizes
from companion.report import Summary, loglog_slope
from companion.theory import count_moments as cm
from companion.theory import one_step as ost

ALPHA, T_MARGINS, T_TABLE = 0.4, 64, 256
TABLE_NS = (50, 200)
F14_ALPHAS, F14_N = (0.3, 0.45), 50  # either side of Assumption F.1.4's 1.5 - sqrt(5)/2 ~ 0.382
F14_BOUND = 1.5 - 5**0.5 / 2
RESOLVE_LEVEL = 0.05  # "resolved": mean relative deviation of the attention margin below this
FIT_FROM = 100  # the m^(-1/2) law is fitted for m >= FIT_FROM
MODULES = ("companion.theory.one_step", "companion.theory.one_step_study")
MARGIN_TEST, MARGIN_CHUNK = 64, 2000  # test sequences of the margins; samples per draw of their steps


@dataclass(frozen=True)
class OneStepStudy(config.Profiled):
    """The sizes of the chapter's Monte Carlo: margins after one step on the first m samples, m in ``ms``, at
    each N in ``Ns`` (T = 64), ``repeats`` times, against a step on ``m_ref`` fresh samples; Table 3 (N = 50,
    200) and Assumption F.1.4's two sides (N = 50) from ``table_m`` contexts each (T = 256). The seeds are fixed
    by the study. Quick: N = 20, 50, 100, m up to 10^4; full: N up to 400, m up to 10^5, ten times the
    reference and table samples.

    >>> OneStepStudy.full().Ns
    (20, 100, 400)
    >>> OneStepStudy(ms=(10, 30, 100))
    Traceback (most recent call last):
    ...
    ValueError: ms=(10, 30, 100) must have at least two sizes >= 100 (the m^(-1/2) fit)
    """

    profile: str = "quick"
    Ns: tuple = (20, 50, 100)
    ms: tuple = (10, 30, 100, 300, 1000, 3000, 10_000)
    repeats: int = 8
    m_ref: int = 100_000
    table_m: int = 200_000

    @classmethod
    def full(cls, **overrides) -> "OneStepStudy":
        base = dict(
            profile="full",
            Ns=(20, 100, 400),
            ms=(10, 30, 100, 300, 1000, 3000, 10_000, 30_000, 100_000),
            repeats=16,
            m_ref=1_000_000,
            table_m=2_000_000,
        )
        return cls(**{**base, **overrides})

    def __post_init__(self):
        config.get_profile(self.profile)
        for name, low in (("Ns", 3), ("ms", 1)):
            check_sizes(name, getattr(self, name), low)
        if sum(m >= FIT_FROM for m in self.ms) < 2:
            raise ValueError(f"ms={self.ms!r} must have at least two sizes >= {FIT_FROM} (the m^(-1/2) fit)")
        check_int("repeats", self.repeats, low=2)
        check_int("m_ref", self.m_ref, low=1)
        check_int("table_m", self.table_m, low=2)


def study(profile: str | None = None, use_cache: bool = True) -> dict:
    """:func:`run` of the profile's :class:`OneStepStudy`."""
    return run(OneStepStudy.for_profile(profile), use_cache=use_cache)


def run(exp: OneStepStudy, *, device=None, progress: bool = True, use_cache: bool = True) -> dict:
    """Margins after one step over (inputs, N, m) and the Table 3 Monte Carlo (cached).

    Returns ``runs[(inputs, N)]`` (see :func:`companion.theory.one_step.one_step_margins`),
    ``table[N]`` (see :func:`companion.theory.one_step.gradient_projections`), ``f14[alpha]`` (the same
    at N = 50 on either side of Assumption F.1.4's bound), ``sizes``, ``seconds`` and ``device`` (the CPU,
    whatever ``device`` says: the study is numpy Monte Carlo).
    """

    def compute():
        start = time.perf_counter()
        runs = {
            (inp, N): ost.one_step_margins(
                N,
                T_MARGINS,
                ALPHA,
                exp.ms,
                repeats=exp.repeats,
                m_ref=exp.m_ref,
                inputs=inp,
                n_test=MARGIN_TEST,
                chunk=MARGIN_CHUNK,
            )
            for inp in ost.INPUTS
            for N in exp.Ns
        }
        table = {
            N: ost.gradient_projections(
                ost.simplified_task(N, T_TABLE, ALPHA),
                exp.table_m,
                np.random.default_rng(N),
                include_last=False,
            )
            for N in TABLE_NS
        }
        f14 = {
            a: ost.gradient_projections(
                ost.simplified_task(F14_N, T_TABLE, a),
                exp.table_m,
                np.random.default_rng([F14_N, int(100 * a)]),
                include_last=False,
            )
            for a in F14_ALPHAS
        }
        out = {"runs": runs, "table": table, "f14": f14, "sizes": exp.sizes()}
        return {**out, "seconds": time.perf_counter() - start, "device": config.device_name("cpu")}

    return cache.load_or_compute("one_step", exp, compute, MODULES, use_cache=use_cache)


def first_batch(exp: OneStepStudy):
    """The first samples a step is taken on: after the test sequences of the margins at the smallest N."""
    N = exp.Ns[0]
    task = ost.simplified_task(N, T_MARGINS, ALPHA)
    rng = np.random.default_rng([0, N, T_MARGINS])
    task.sample(rng, MARGIN_TEST)
    return task.sample(rng, min(MARGIN_CHUNK, exp.ms[0]))


def ff_deviation(r: dict) -> np.ndarray:
    """Mean |feed-forward margin - population margin| per m (over repeats and test sequences)."""
    return np.abs(r["ff"] - r["ff_ref"]).mean((0, 2))


def attn_relative_deviation(r: dict) -> np.ndarray:
    """Mean |attention margin - population| / |population| per m."""
    return (np.abs(r["attn"] - r["attn_ref"]) / np.abs(r["attn_ref"])).mean((0, 2))


def resolve_constant(r: dict) -> float:
    """c in "relative deviation = c / sqrt(m)", fitted (mean of deviation x sqrt(m)) over m >= FIT_FROM."""
    ms = np.asarray(r["m"], dtype=float)
    keep = ms >= FIT_FROM
    return float((attn_relative_deviation(r)[keep] * np.sqrt(ms[keep])).mean())


def m_resolve(r: dict, level: float = RESOLVE_LEVEL) -> float:
    """Sample size at which the attention margin's mean relative deviation is ``level``: (c / level)^2 with c
    from :func:`resolve_constant` (a fit over the m^(-1/2) regime, not a noisy crossing point)."""
    return (resolve_constant(r) / level) ** 2


def bound_exponent(Ns, T: int = T_MARGINS) -> float:
    """The exponent in N of the sample size at which Theorem 1's first deviation term,
    eta_v sqrt((1/(TN) + 1/N^2) ln(.) / m), falls to a fixed fraction of the margin eta_v alpha_hat / N: that m
    grows like N^2 (1/(TN) + 1/N^2) = 1 + N/T, fitted (log-log slope) over ``Ns`` at ``T``.

    >>> round(bound_exponent((20, 50, 100), 64), 2), round(bound_exponent((20, 100, 400), 64), 2)
    (0.41, 0.57)
    """
    check_sizes("Ns", tuple(Ns), 1)
    check_int("T", T, low=1)
    return loglog_slope(Ns, [1 + N / T for N in Ns])


def references(N: int) -> tuple[dict, dict]:
    """(printed, re-derived) expected values of Table 3 and Lemma D.1 at N, by case label."""
    d1 = ost.lemma_d1_paper(ALPHA, N)
    return {**ost.table3_paper(ALPHA, N), **d1}, {**ost.table3_rederived(ALPHA, N), **d1}


def table_errors(res: dict) -> dict:
    """Table 3 and Lemma D.1 against the Monte Carlo: normalised errors (see the chapter's Notes).

    |MC - mu| / (4 SE + C scale / N) with C = 1/alpha + 2, per (N, case), for the
    printed table and the re-derived one.
    """
    table = res["table"]
    C = 1 / ALPHA + 2
    out = {}
    for N in table:
        paper, fixed = references(N)
        scale = ost.table3_scale(ALPHA, N)
        for label, _, _ in ost.TABLE3_CASES:
            mu, se = table[N][label]
            allowance = 4 * se + C * scale[label] / N
            out[N, label] = {
                "paper": abs(mu - paper[label]) / allowance,
                "rederived": abs(mu - fixed[label]) / allowance,
            }
    return out


def table_rows(res: dict, N: int = 200) -> list[list]:
    """Rows (case, MC mean, SE, printed, re-derived) at one N, Lemma D.1's two entries last."""
    paper, fixed = references(N)
    labels = [c[0] for c in ost.TABLE3_CASES] + ["F: N+1", "F: k<=N"]
    return [[label, *res["table"][N][label], paper[label], fixed[label]] for label in labels]


def summary(res: dict, grad_gap: float) -> Summary:
    """The chapter's asserted numbers; ``grad_gap`` is max |autograd - count formula| on a small batch."""
    sizes, runs, table = res["sizes"], res["runs"], res["table"]
    Ns = list(sizes["Ns"])
    eq2 = {N: runs["eq2", N] for N in Ns}
    ms = np.asarray(sizes["ms"])
    big = ms >= FIT_FROM
    ff_slopes = [loglog_slope(ms, ff_deviation(r)) for r in eq2.values()]
    attn_slopes = [loglog_slope(ms[big], attn_relative_deviation(r)[big]) for r in eq2.values()]
    attn_ratio = {N: float((r["attn_ref"] / r["target_attn"]).mean()) for N, r in eq2.items()}
    m_res = {N: m_resolve(r) for N, r in eq2.items()}
    res_exponent = loglog_slope(Ns, [m_res[N] for N in Ns])
    errs = table_errors(res)
    cases = [c[0] for c in ost.TABLE3_CASES]
    d1_z = max(
        abs(table[N][k][0] - ost.lemma_d1_paper(ALPHA, N)[k]) / table[N][k][1]
        for N in table
        for k in ("F: N+1", "F: k<=N")
    )
    Nl = max(table)
    last = (table[Nl]["N+1, q (all z_t)"][0] / table[Nl]["N+1, q"][0]) / (1 + Nl / T_TABLE)
    pos = {N: runs["positional", N] for N in Ns}
    lo, hi = F14_ALPHAS
    z = {a: -res["f14"][a]["[N]\\{q}, j"][0] / res["f14"][a]["[N]\\{q}, j"][1] for a in F14_ALPHAS}
    return Summary(
        {
            "grad_gap": (grad_gap, "max |autograd gradient - count formula| (small batch)"),
            "ff_bias": (
                max(N * abs(r["ff_ref"].mean() / r["target_ff"].mean() - 1) for N, r in eq2.items()),
                "max over N of N |population FF margin / (eta_f alpha) - 1|",
            ),
            "ff_rate": (
                max(ff_slopes, key=lambda s: abs(s + 0.5)),
                "FF deviation slope in m farthest from -1/2",
            ),
            "attn_ratio_max": (
                attn_ratio[max(Ns)],
                "population attention margin / (eta_v alpha_hat / N), largest N",
            ),
            "attn_rate": (
                max(attn_slopes, key=lambda s: abs(s + 0.5)),
                "attention relative-deviation slope in m (m >= 100) farthest from -1/2",
            ),
            "pos_attn_ratio": (
                float((pos[max(Ns)]["attn_ref"] / pos[max(Ns)]["target_attn"]).mean()),
                "same ratio with the proofs' positional inputs, largest N",
            ),
            "pos_ff_ratio": (
                float((pos[max(Ns)]["ff_ref"] / pos[max(Ns)]["target_ff"]).mean()),
                "FF margin / (eta_f alpha) with positional inputs, largest N",
            ),
            "N_small": (min(Ns), "smallest N"),
            "N_big": (max(Ns), "largest N"),
            "m_res_small": (
                m_res[min(Ns)],
                f"m resolving the attention margin (relative deviation {RESOLVE_LEVEL}, "
                f"from the m^-1/2 fit over m >= {FIT_FROM}), smallest N",
            ),
            "m_res_big": (m_res[max(Ns)], "same, largest N"),
            "res_exponent": (res_exponent, "fitted exponent of that m in N (1: the theorem's m = Omega~(N))"),
            "res_exponent_bound": (
                bound_exponent(Ns),
                f"the same exponent as the bound's first term gives it, m ~ 1 + N/T (T = {T_MARGINS})",
            ),
            "table_err": (
                max(errs[N, c]["rederived"] for N in table for c in cases),
                "max normalised error of the re-derived Table 3 (<= 1: within allowance)",
            ),
            "row9_err": (
                min(errs[N, "[N]\\{q}, j"]["paper"] for N in table),
                "smallest normalised error of the printed row 9 over N",
            ),
            "d1_z": (d1_z, "max |z-score| of Lemma D.1's means"),
            "f14_inside_z": (
                z[lo],
                f"W_U(j)^T(-grad W_V)W_E(j), j <= N, over its SE at alpha = {lo} (N = {F14_N})",
            ),
            "f14_outside_z": (
                z[hi],
                f"the same at alpha = {hi}, outside Assumption F.1.4 (alpha <= {F14_BOUND:.3f})",
            ),
            "last_factor": (last, f"(N+1, q) with z_T counted over without, divided by 1 + N/T (N = {Nl})"),
        }
    )


def gradient_check(N: int = 12, T: int = 20, m: int = 50, seed: int = 0) -> tuple[float, bool]:
    """Autograd on the model of Eq. (2) against the count formula: (max |difference|, W_QK gradient is zero)."""
    task = ost.simplified_task(N, T, ALPHA)
    batch = task.sample(np.random.default_rng(seed), m)
    auto, counts = ost.autograd_first_gradients(task, batch), ost.first_gradients(task, batch)
    return float(max(np.abs(auto[k] - counts[k]).max() for k in auto)), not auto["W_QK"].any()


# --- Variances and ranges: Lemmas E.1-E.7, Table 3's sigma^2 and R (exact, no sampling) ---

MOMENT_SIZES = ((4000, 4000), (8000, 1000), (1000, 8000))  # (N, T): both terms of each sigma^2 dominate once
J_IN_N = [c[0] for c in cm.TABLE3_CASES[3:]]  # rows with j in [N]: mean O(1/N^2)
J_TAU = [c[0] for c in cm.TABLE3_CASES[:3]] + ["F: N+1", "F: k<=N"]
ROW7 = "[N]\\{q}, N+1"


def moments_study(alpha: float = ALPHA, sizes=MOMENT_SIZES) -> dict:
    """Exact moments (:mod:`companion.theory.count_moments`) at each (N, T) in ``sizes``, with the printed
    and re-derived values; the ranges at the first size. Deterministic and fast, so not cached."""
    out = {"alpha": alpha, "sizes": [tuple(s) for s in sizes], "lemma_e": {}, "table": {}}
    for N, T in sizes:
        out["lemma_e"][N, T] = cm.lemma_e_exact(N, T, alpha)
        exact = cm.table3_exact(N, T, alpha)
        out["table"][N, T] = {
            label: (
                exact[label][1],
                cm.table3_sigma2_paper(alpha, N, T)[label],
                cm.table3_sigma2_rederived(alpha, N, T)[label],
            )
            for label in exact
        }
    N, T = sizes[0]
    out["range"] = (cm.table3_range(N, T, alpha), cm.table3_range_paper(alpha))
    return out


def moments_summary(res: dict) -> Summary:
    """The asserted numbers of the variance and range checks (ratios exact / formula)."""
    a = res["alpha"]
    paper, fixed = cm.lemma_e_paper(a), cm.lemma_e_rederived(a)
    lem, tab = res["lemma_e"], res["table"]

    def worst(values):  # the ratio farthest from 1
        return max(values, key=lambda r: abs(r - 1))

    first = worst(lem[s][e][0] / paper[e][0] for s in lem for e in cm.LEMMA_E)
    second = worst(lem[s][e][1] / paper[e][1] for s in lem for e in cm.LEMMA_E if e != "E.1")
    sup, R = res["range"]
    N0, T0 = res["sizes"][0]
    return Summary(
        {
            "e_first": (first, "Lemmas E.1-E.7, E[c] / (a T/N) as printed: the ratio farthest from 1"),
            "e_second": (second, "Lemmas E.2-E.7, Var[c] / (A T/N) as printed: the ratio farthest from 1"),
            "e1_ratio": (
                max(lem[s]["E.1"][1] / paper["E.1"][1] for s in lem),
                "Lemma E.1, Var[c] / (A T/N) with the printed A = (2/alpha^2 - 1)/alpha: largest over sizes",
            ),
            "e1_rederived": (
                worst(lem[s]["E.1"][1] / fixed["E.1"][1] for s in lem),
                "the same with A = (2 - alpha)/alpha^2 (compound Poisson): farthest from 1",
            ),
            "s2_tau": (
                worst(tab[s][k][0] / tab[s][k][1] for s in tab for k in J_TAU),
                "sigma^2 exact / printed, rows j = N+1 and Lemma D.1: farthest from 1",
            ),
            "s2_paper_max": (
                max(tab[s][k][0] / tab[s][k][1] for s in tab for k in J_IN_N),
                "sigma^2 exact / printed, rows j in [N]: the largest",
            ),
            "s2_rederived": (
                worst(tab[s][k][0] / tab[s][k][2] for s in tab for k in J_IN_N),
                "sigma^2 exact / re-derived, rows j in [N]: farthest from 1",
            ),
            "range_err": (
                max(abs(sup[k] / R[k] - 1) for k in sup if k != ROW7),
                f"max |exact range / printed R - 1| except row 7 (N = {N0}, T = {T0})",
            ),
            "range_row7": (sup[ROW7] / R[ROW7], "row 7 ([N]\\{q}, N+1): exact range / printed R = 1/3"),
        }
    )


def moments_rows(res: dict) -> tuple[list[list], list[list]]:
    """Table rows at the first size: Lemmas E (lemma, a exact, a printed, A exact, A printed, A re-derived) and
    Table 3 (case, sigma^2 exact, printed, re-derived, exact range, printed R)."""
    a, size = res["alpha"], res["sizes"][0]
    paper, fixed = cm.lemma_e_paper(a), cm.lemma_e_rederived(a)
    lemmas = [[e, v[0], paper[e][0], v[1], paper[e][1], fixed[e][1]] for e, v in res["lemma_e"][size].items()]
    sup, R = res["range"]
    table = [[label, *vals, sup[label], R[label]] for label, vals in res["table"][size].items()]
    return lemmas, table
