"""Exact first and second moments behind Lemma D.1, Table 3 (Lemma D.2) and Lemmas E.1-E.7.

The simplified data of Section 3.1 (uniform pi_u, pi_b on [N], trigger q,
noise tau = N + 1) is a Markov chain once the correct output ybar of the
trigger is fixed. Every token other than q, tau and ybar plays the same
role, so the chain lumps exactly onto five states

    q, tau, ybar (absent when ybar = q), k (one tracked ordinary token), rest

and the count c_s = #{t <= T - 1 : z_t = s} of any token has exact moments

    E[c] = sum_t p_t(s),   E[c^2] = E[c] + 2 sum_{t < u} p_t(s) (P^{u-t})_{ss},

with p_t the law of z_t. Appendix E counts z_1 .. z_{T-1} ("we do not
consider z_T = q"); ``include_last=True`` adds the forced z_T = q.

Given ybar, the target y = z_{T+1} is ybar with probability 1 - alpha and tau
otherwise, independently of the context, so the projected gradient of
Lemma D.2, Gamma(j, k) = (1/(N+1) - 1{y = j}) c_k / T, has exact mean and
variance as sums over the classes of ybar (:func:`table3_exact`). Its range
(the R column) is the largest |Gamma - mu| over sequences of positive
probability, found by a longest-path recursion on the chain's support
(:func:`table3_range`).

Nothing here is sampled: the values are exact at finite N and T and are
checked against Monte Carlo in ``tests/test_count_moments.py``.

>>> m1, m2 = count_moments(50, 256, 0.4, "other", "k")
>>> round(m1, 3), round(m2 - m1**2, 3)  # about T/N, and a variance close to it
(5.0, 4.906)
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from companion.config import check_choice, check_float, check_int
from companion.theory.one_step import TABLE3_CASES  # (label, j class, k class) of Table 3's ten rows

STATES = ("q", "tau", "ybar", "k", "rest")
YBAR = ("q", "other")  # ybar = q, or ybar an ordinary token other than q
Q, TAU, YB, K, REST = range(5)


def _check(N: int, T: int, alpha: float) -> None:
    check_int("N", N, low=4)
    check_int("T", T, low=4)
    check_float("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)


def lumped_chain(N: int, alpha: float, ybar: str) -> tuple[np.ndarray, np.ndarray]:
    """(P, p_1): the 5-state transition matrix and the law of z_1, given the class of ybar.

    >>> P, p1 = lumped_chain(10, 0.3, "q")
    >>> P.sum(1).round(12).tolist(), float(p1.sum())
    ([1.0, 1.0, 0.0, 1.0, 1.0], 1.0)
    """
    check_int("N", N, low=4)
    check_float("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    check_choice("ybar", ybar, YBAR)
    own_ybar = ybar == "other"
    uniform = np.zeros(5)  # an ordinary token is drawn uniformly from [N]
    uniform[[Q, K]] = 1.0 / N
    if own_ybar:
        uniform[YB] = 1.0 / N
    uniform[REST] = 1.0 - uniform.sum()
    P = np.zeros((5, 5))
    P[[TAU, K, REST]] = uniform
    if own_ybar:
        P[YB] = uniform
        P[Q, YB] = 1.0 - alpha
    else:  # the trigger repeats itself: runs q q ... q tau
        P[Q, Q] = 1.0 - alpha
    P[Q, TAU] = alpha
    return P, uniform.copy()


def state_of(k: str, ybar: str) -> int:
    """The lumped state holding token class ``k`` ("q", "tau", "ybar" or "k", any other token)."""
    check_choice("k", k, ("q", "tau", "ybar", "k"))
    if k == "ybar" and ybar == "q":
        return Q
    return STATES.index(k)


@lru_cache(maxsize=256)
def count_moments(
    N: int, T: int, alpha: float, ybar: str, k: str, include_last: bool = False
) -> tuple[float, float]:
    """Exact (E[c], E[c^2]) of the number of times token class ``k`` occurs in z_1 .. z_{T-1} (or z_T)."""
    _check(N, T, alpha)
    P, p = lumped_chain(N, alpha, ybar)
    s = state_of(k, ybar)
    n = T - 1  # positions counted
    occ = np.empty(n)  # p_t(s), t = 1 .. n
    ret = np.empty(n)  # (P^u)_{ss}, u = 1 .. n
    Pu = np.eye(5)
    for t in range(n):
        occ[t] = p[s]
        p = p @ P
        Pu = Pu @ P
        ret[t] = Pu[s, s]
    later = np.concatenate([[0.0], np.cumsum(ret)])  # later[m] = sum_{u=1}^{m} ret_u
    m1 = occ.sum()
    m2 = m1 + 2.0 * float(occ @ later[n - 1 - np.arange(n)])
    if include_last and s == Q:  # z_T = q is forced: c + 1
        m2, m1 = m2 + 2 * m1 + 1, m1 + 1
    return float(m1), float(m2)


# --- Lemmas E.1-E.7: the moments of the counts, as printed and re-derived ---

LEMMA_E = {  # lemma: (ybar class, k class); k = "ybar" is Lemma E.6's k = ybar
    "E.1": ("q", "q"),
    "E.2": ("q", "tau"),
    "E.3": ("q", "k"),
    "E.4": ("other", "q"),
    "E.5": ("other", "tau"),
    "E.6": ("other", "ybar"),
    "E.7": ("other", "k"),
}


def lemma_e_paper(alpha: float) -> dict[str, tuple[float, float]]:
    """(a, A) with E[c] ~ a T/N and E[c^2] ~ A T/N + a^2 T^2/N^2, as Lemmas E.1-E.7 print them."""
    a = alpha
    return {
        "E.1": (1 / a, (-1 + 2 / a**2) / a),
        "E.2": (1.0, 1.0),
        "E.3": (1.0, 1.0),
        "E.4": (1.0, 1.0),
        "E.5": (a, a),
        "E.6": (2 - a, 2 - a),
        "E.7": (1.0, 1.0),
    }


def lemma_e_rederived(alpha: float) -> dict[str, tuple[float, float]]:
    """The same coefficients re-derived: a count is (close to) compound Poisson.

    Runs of the trigger start about T/N times; when ybar = q a run is
    q^L tau with L geometric (P(L = l) = (1 - alpha)^(l-1) alpha), so the count
    of q has variance (T/N) E[L^2] = (T/N)(2 - alpha)/alpha^2 (Lemma E.1 prints
    (T/N)(2 - alpha^2)/alpha^3). Every other count is a sum of thinned Poisson
    counts, whose variance equals its mean, as printed.
    """
    out = lemma_e_paper(alpha)
    out["E.1"] = (1 / alpha, (2 - alpha) / alpha**2)
    return out


def lemma_e_exact(N: int, T: int, alpha: float) -> dict[str, tuple[float, float]]:
    """(a, A) measured exactly at (N, T): a = E[c] N/T and A = Var[c] N/T."""
    out = {}
    for lemma, (yb, k) in LEMMA_E.items():
        m1, m2 = count_moments(N, T, alpha, yb, k)
        out[lemma] = (m1 * N / T, (m2 - m1**2) * N / T)
    return out


# --- Table 3 (Lemma D.2) and Lemma D.1: mean, variance and range of one sample's projection ---


def _ybar_classes(N: int, jc: str, kc: str):
    """(probability, ybar class, role of j, role of k) for each way ybar relates to (j, k).

    Roles are the lumped-chain classes of the tokens given ybar: "q", "tau",
    "ybar" (the token is ybar) or "k" (an ordinary token that is not ybar).
    """

    def role(c, yb_is):
        if c in ("tau", "q"):
            return c
        return "ybar" if yb_is == c else "k"

    j_ord = jc == "o"
    k_ord = kc in ("o", "j", "o2")
    named = []  # the ordinary tokens among j and k (distinct ones)
    if j_ord:
        named.append("j")
    if k_ord and kc != "j":
        named.append("kk")
    out = [(1.0 / N, "q", jc if jc != "o" else "k", kc if not k_ord else "k")]
    for who in named:  # ybar equal to one of them
        rj = role("j", who) if j_ord else jc
        rk = (role("j", who) if kc == "j" else role("kk", who)) if k_ord else kc
        out.append((1.0 / N, "other", rj, rk))
    rest = 1.0 - (1 + len(named)) / N
    out.append((rest, "other", "k" if j_ord else jc, "k" if k_ord else kc))
    return out


def table3_exact(N: int, T: int, alpha: float, include_last: bool = False) -> dict[str, tuple[float, float]]:
    """Exact (mu, sigma^2) of Gamma(j, k) for Table 3's ten cases and Lemma D.1's two (labels ``F: ...``)."""
    _check(N, T, alpha)
    out = {}
    for label, jc, kc in TABLE3_CASES:
        m1 = m2 = 0.0
        for prob, yb, rj, rk in _ybar_classes(N, jc, kc):
            p_y = (1 - alpha) * (rj == "ybar" or (rj == "q" and yb == "q")) + alpha * (rj == "tau")
            g1 = 1 / (N + 1) - p_y
            g2 = 1 / (N + 1) ** 2 + p_y * (1 - 2 / (N + 1))
            c1, c2 = count_moments(N, T, alpha, yb, rk, include_last)
            m1 += prob * g1 * c1 / T
            m2 += prob * g2 * c2 / T**2
        out[label] = (m1, m2 - m1**2)
    # Lemma D.1: x_T = W_E(q) always, so Gamma_F(k) = 1/(N+1) - 1{y = k}, a shifted Bernoulli
    for label, p in (("F: N+1", alpha), ("F: k<=N", (1 - alpha) / N)):
        out[label] = (1 / (N + 1) - p, p * (1 - p))
    return out


def table3_sigma2_paper(alpha: float, N: int, T: int) -> dict[str, float]:
    """Table 3's sigma^2 column and Lemma D.1's, as printed."""
    a = alpha
    two = (2 - a) * (1 / (T * N**2) + 1 / N**3)
    return {
        "N+1, N+1": a**2 / (T * N) + (a**3 - a**4) / N**2,
        "N+1, q": a / (T * N) + (a - a**2) / N**2,
        "N+1, [N]\\{q}": a / (T * N) + (a - a**2) / N**2,
        "q, N+1": 1 / (T * N**2) + (a**2 - a + 1) / N**3,
        "q, q": (a**3 - a**2 - a + 2) / (a**3 * T * N**2) + (a**2 - a + 1) / (a**2 * N**3),
        "q, [N]\\{q}": two,
        "[N]\\{q}, N+1": (2 - a) * (a / (T * N**2) + a**2 / N**3),
        "[N]\\{q}, q": two,
        "[N]\\{q}, j": (1 + (1 - a) * (2 - a)) / (T * N**2) + (1 + (1 - a) * (2 - a) ** 2) / N**3,
        "[N]\\{q}, [N]\\{q,j}": two,
        "F: N+1": a * (1 - a),
        "F: k<=N": (1 - a) / N,
    }


def table3_sigma2_rederived(alpha: float, N: int, T: int) -> dict[str, float]:
    """The sigma^2 column re-derived to leading order (rows with j = N + 1 and Lemma D.1's as printed).

    For j in [N], 1{y = j} needs ybar = j (or ybar = q when j = q), which has
    probability 1/N, and then y = j with probability 1 - alpha; when y != j the
    factor (1/(N+1))^2 makes the term O(1/N^2) smaller. So
    sigma^2(j, k) ~ (1 - alpha) / N * E[c_k^2 | ybar = j] / T^2 with the second
    moment of Lemmas E.1-E.7 (E.1's re-derived), and mu^2 = O(1/N^4) is negligible.
    """
    a = alpha
    mom = lemma_e_rederived(alpha)

    def row(lemma):  # (1 - alpha)/N * (A/(T N) + a^2/N^2)
        lin, quad = mom[lemma]
        return (1 - a) / N * (quad / (T * N) + lin**2 / N**2)

    out = table3_sigma2_paper(alpha, N, T)
    out.update(
        {
            "q, N+1": row("E.2"),
            "q, q": row("E.1"),
            "q, [N]\\{q}": row("E.3"),
            "[N]\\{q}, N+1": row("E.5"),
            "[N]\\{q}, q": row("E.4"),
            "[N]\\{q}, j": row("E.6"),
            "[N]\\{q}, [N]\\{q,j}": row("E.7"),
        }
    )
    return out


def table3_range_paper(alpha: float) -> dict[str, float]:
    """Table 3's R column and Lemma D.1's, as printed."""
    R = dict(zip([c[0] for c in TABLE3_CASES], (0.5, 1.0, 1.0, 0.5, 1.0, 1.0, 1 / 3, 0.5, 1.0, 1.0)))
    R.update({"F: N+1": max(alpha, 1 - alpha), "F: k<=N": 1.0})
    return R


@lru_cache(maxsize=256)
def max_count(N: int, T: int, alpha: float, ybar: str, k: str, include_last: bool = False) -> int:
    """The largest count of token class ``k`` in z_1 .. z_{T-1} over sequences of positive probability."""
    _check(N, T, alpha)
    P, p = lumped_chain(N, alpha, ybar)
    s = state_of(k, ybar)
    edge = P > 0
    best = np.where(p > 0, (np.arange(5) == s).astype(float), -np.inf)
    for _ in range(T - 2):  # longest path: best[v] = max count over paths ending in v
        cand = np.where(edge, best[:, None], -np.inf).max(0)
        best = cand + (np.arange(5) == s)
    top = int(best.max())
    return top + int(include_last and s == Q)


def table3_range(N: int, T: int, alpha: float, include_last: bool = False) -> dict[str, float]:
    """The exact range max |Gamma - mu| over all samples of positive probability, per case."""
    mu = table3_exact(N, T, alpha, include_last)
    out = {}
    for label, jc, kc in TABLE3_CASES:
        worst = 0.0
        for _, yb, rj, rk in _ybar_classes(N, jc, kc):
            p_y = (1 - alpha) * (rj == "ybar" or (rj == "q" and yb == "q")) + alpha * (rj == "tau")
            gs = [1 / (N + 1) - 1] * (p_y > 0) + [1 / (N + 1)] * (p_y < 1)
            cs = (0, max_count(N, T, alpha, yb, rk, include_last))
            worst = max(worst, *(abs(g * c / T - mu[label][0]) for g in gs for c in cs))
        out[label] = worst
    for label, p in (("F: N+1", alpha), ("F: k<=N", (1 - alpha) / N)):
        out[label] = max(p, 1 - p)  # |1{y = k} - p| for a Bernoulli(p) with 0 < p < 1
    return out
