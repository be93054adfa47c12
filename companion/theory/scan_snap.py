"""Scan and Snap, Sections 4 and 6: the decoder's speed h(t), the speed control gamma(t) and B_n(t).

Lemma 6: the continuous speed h of a row of W solves dh/dt = eta_Y / ((M - 1) + exp(M h)), h(0) = 0, and
then satisfies exp(M h) + (M - 1) M h = M eta_Y t + 1 (:func:`h_closed` solves that equation; :func:`h_ode`
integrates the differential equation with an adaptive solver). Lemma 5 gives the discrete recursion
h*(s) = h*(s - 1) + eta_Y / ((M - 1) + exp(M h*(s - 1))) (:func:`h_discrete`), and Lemma 7 bounds
0 <= h*(s) - h(s) <= 2 eta_Y / M. Lemma 8 places the two zeros of exp(M h) - (M - 1) M h, between which the
proofs' two stages change (:func:`lemma8_omegas`), and Lemma 9 bounds h and gamma in each stage
(:func:`lemma9_study`). Lemma 10 bounds how often each class is drawn (:func:`lemma10_study`),
and Lemma 11 what that does to h (:func:`lemma11_study`). Corollary 1 counts the epochs a class needs to bring
its residual below epsilon (:func:`cor1_epochs`, :func:`cor1_study`).

Theorem 4 assumes one common token with dz/dt = -K rho0^-4 eta_Z gamma(t) exp(4 z) and xi_n = K rho0^-4
gamma(t) exp(4 z), gamma(t) = (M - 1)^2 h(t/K) / ((M - 1) + exp(M h(t/K))), and B_n(t) = eta_Z int_0^t xi_n.
:func:`phase_ode` integrates that system (h, z, B) with an adaptive solver. Integrating by substitution,
with Gamma(t) = eta_Z int_0^t gamma = (eta_Z / eta_Y) K (M - 1)^2 h(t/K)^2 / 2 (Eqs. 123-126),

    B_n(t) = 1/4 ln(1 + 4 K Gamma(t) / rho0^4)                      (:func:`B_closed`)

whereas Eq. (122) of the paper drops the lower limit of the integral and states
B_n(t) = 1/4 ln(rho0^4 / K + 4 Gamma(t)) (:func:`B_eq127`), which is not 0 at t = 0; Eq. (14)
(:func:`B_eq14`) is its two-phase approximation. The two differ by the constant 1/4 ln(rho0^4 / K).

>>> t = np.array([0.0, 10.0, 1000.0])
>>> bool(np.allclose(np.exp(1000 * h_closed(t, 1000, 0.5)) + 999 * 1000 * h_closed(t, 1000, 0.5), 500 * t + 1))
True
>>> float(B_closed(np.array([0.0]), K=10, M=1000, eta_y=1.0, eta_z=0.5)[0]), round(transition_time(10, 1000, 0.1), 1)
(0.0, 1381.6)
"""

from __future__ import annotations

import math

import numpy as np
from scipy.integrate import solve_ivp

from companion import report
from companion.config import check_float, check_int


def _check(K: int, M: int, eta_y: float, eta_z: float | None = None, rho0: float = 1.0) -> None:
    check_int("M", M, low=2)
    check_int("K", K, low=1, high=M)
    check_float("eta_Y", eta_y, low=0, low_open=True)
    if eta_z is not None:
        check_float("eta_Z", eta_z, low=0, low_open=True)
    check_float("rho0", rho0, low=0, low_open=True)


def h_closed(t: np.ndarray, M: int, eta_y: float) -> np.ndarray:
    """h(t) of Lemma 6 from exp(M h) + (M - 1) M h = M eta_Y t + 1 (Newton's method from an upper bound:
    the left side is convex and increasing in h, so the iterates fall monotonically to the root)."""
    _check(1, M, eta_y)
    t = np.asarray(t, dtype=np.float64)
    rhs = M * eta_y * t + 1
    h = np.minimum(np.log(rhs) / M, eta_y * t / (M - 1))  # each term alone is at most rhs
    for _ in range(200):
        e = np.exp(M * h)
        step = (e + (M - 1) * M * h - rhs) / (M * e + (M - 1) * M)
        h = h - step
        if np.all(np.abs(step) <= 1e-15 * np.maximum(h, 1e-300)):
            break
    return h


def h_ode(t: np.ndarray, M: int, eta_y: float, rtol: float = 1e-10) -> np.ndarray:
    """h(t) by integrating dh/dt = eta_Y / ((M - 1) + exp(M h)) with an adaptive Runge-Kutta solver."""
    _check(1, M, eta_y)
    t = np.asarray(t, dtype=np.float64)
    sol = solve_ivp(
        lambda s, h: eta_y / ((M - 1) + np.exp(M * h)),
        (0.0, float(t.max())),
        [0.0],
        method="DOP853",
        t_eval=t,
        rtol=rtol,
        atol=1e-14,
    )
    return sol.y[0]


def h_discrete(steps: int, M: int, eta_y: float) -> np.ndarray:
    """h*(s) for s = 0..steps: the recursion of Lemma 5 (one update of the row of W per epoch)."""
    _check(1, M, eta_y)
    check_int("steps", steps, low=0)
    h = np.zeros(steps + 1)
    for s in range(1, steps + 1):
        h[s] = h[s - 1] + eta_y * speed_factor(h[s - 1], M)
    return h


def speed_factor(h: np.ndarray | float, M: int) -> np.ndarray | float:
    """g = 1 / ((M - 1) + exp(M h)): the factor of Lemma 5's recursion h(s + 1) = h(s) + eta_Y g(h(s)) (Eq. 33),
    whose change over Delta epochs Lemma 11 bounds (Eq. 65); gamma (:func:`gamma_of_h`) is (M - 1)^2 h g.

    >>> round(float(speed_factor(0.0, 101)), 6)
    0.009901
    """
    return 1 / ((M - 1) + np.exp(M * h))


LEMMA8_M = (10**2, 10**3, 10**4, 10**5, 10**6)


def lemma8_omegas(M: int) -> tuple[float, float]:
    """(omega_0, omega_1) of Lemma 8: the two zeros of exp(M h) - (M - 1) M h on h > 0, written as
    1 / M^(2 - omega_0) and (1 + omega_1) ln M / M. With x = M h the zeros solve x - ln x = ln(M - 1), one on
    each side of x = 1 (where x - ln x is smallest); the lower one is found in u = ln x, where it is not ~1e-12
    but ~ -ln M (scipy's brentq, each zero bracketed by a sign change).

    >>> w0, w1 = lemma8_omegas(100)
    >>> round(w0, 5), round(w1, 3)
    (0.0044, 0.403)
    """
    from scipy.optimize import brentq

    check_int("M", M, low=4)  # below 4, x - ln x > ln(M - 1) everywhere: no zero
    c = math.log(M - 1)
    u = brentq(lambda v: math.exp(v) - v - c, -c, 0.0, xtol=1e-15, rtol=1e-15)
    x = brentq(lambda y: y - math.log(y) - c, 1.0, 2 * math.log(M) + 2, xtol=1e-15, rtol=1e-15)
    return 1 + u / math.log(M), x / math.log(M) - 1


def stage2_start(K: int, M: int, eta_y: float) -> float:
    """t_2 = 2 (1 + omega_1) K ln M / eta_Y, where Lemma 9's second stage starts (Theorem 1 (b)'s
    2 (1 + delta') K ln M / eta_Y, with Lemma 8's omega_1 as delta'); :func:`transition_time` is the same without
    the 1 + omega_1. With K = 1 it counts one class's epochs (Lemma 11, Corollary 1).

    >>> round(stage2_start(1, 100, 1.0), 3)
    12.922
    """
    _check(K, M, eta_y)
    return 2 * (1 + lemma8_omegas(M)[1]) * K * math.log(M) / eta_y


def lemma8_summary(Ms: tuple[int, ...] = LEMMA8_M) -> report.Summary:
    """Lemma 8's constants over ``Ms`` (:func:`lemma8_omegas`): the largest omega_0, omega_0 M^0.99 ln M (the
    bound of Eq. 50) and max(r, 1 / r) of r = omega_1 ln M / ln ln M (Eq. 51's Theta)."""
    om = {M: lemma8_omegas(M) for M in Ms}
    ratio = [w1 * math.log(M) / math.log(math.log(M)) for M, (_, w1) in om.items()]
    return report.Summary(
        {
            "lemma8_M_min": (min(Ms), "Lemma 8: smallest M"),
            "lemma8_M_max": (max(Ms), "Lemma 8: largest M"),
            "lemma8_omega0_max": (max(w0 for w0, _ in om.values()), "largest omega_0"),
            "lemma8_omega0_scaled": (
                max(w0 * M**0.99 * math.log(M) for M, (w0, _) in om.items()),
                "largest omega_0 M^0.99 ln M (Eq. 50: <~ 1)",
            ),
            "lemma8_omega1_first": (om[min(Ms)][1], "omega_1 at the smallest M"),
            "lemma8_omega1_last": (om[max(Ms)][1], "omega_1 at the largest M"),
            "lemma8_ratio_first": (ratio[0], "omega_1 ln M / ln ln M at the smallest M"),
            "lemma8_ratio_last": (ratio[-1], "omega_1 ln M / ln ln M at the largest M"),
            "lemma8_theta": (max(max(r, 1 / r) for r in ratio), "largest max(r, 1 / r) of that ratio over M"),
        }
    )


LEMMA9 = {
    "M": (10**2, 10**3, 10**4),
    "eta_y": (0.1, 0.5, 0.9),
    "K": (1, 10),
    "n_late": 2000,
    "late_span": 1e4,
}


def lemma9_study() -> dict:
    """Lemma 9's two stages on h(t/K) of Lemma 6's closed form (:func:`h_closed`), for every M, eta_Y and K of
    :data:`LEMMA9`. Stage 1: every integer t from K to K ln M / eta_Y; the largest exp(M h) / min(M - 1,
    (M - 1) M h) (the lemma: at most 1) and the largest gamma(t) K / (eta_Y t) (the lemma: O(1)). Stage 2: t from
    t_2 = :func:`stage2_start` to ``late_span`` t_2 (``n_late`` log-spaced points); the smallest
    exp(M h) / max(M - 1, (M - 1) M h) (the lemma: at least 1) and the largest gamma(t) eta_Y t / (K ln(M eta_Y t /
    K)) (the lemma: O(1))."""
    d = LEMMA9
    early, late, early_gamma, late_gamma = [], [], [], []
    for M in d["M"]:
        for eta in d["eta_y"]:
            for K in d["K"]:
                t = np.arange(K, math.floor(K * math.log(M) / eta) + 1, dtype=np.float64)
                h = h_closed(t / K, M, eta)
                early.append(float((np.exp(M * h) / np.minimum(M - 1, (M - 1) * M * h)).max()))
                early_gamma.append(float((gamma_of_h(h, M) * K / (eta * t)).max()))
                t2 = stage2_start(K, M, eta)
                t = np.geomspace(t2, d["late_span"] * t2, d["n_late"])
                h = h_closed(t / K, M, eta)
                late.append(float((np.exp(M * h) / np.maximum(M - 1, (M - 1) * M * h)).min()))
                late_gamma.append(float((gamma_of_h(h, M) * eta * t / (K * np.log(M * eta * t / K))).max()))
    return {
        "stage1": max(early),
        "stage2": min(late),
        "stage1_gamma": max(early_gamma),
        "stage2_gamma": max(late_gamma),
    }


def lemma9_summary(res: dict) -> report.Summary:
    """The numbers of :func:`lemma9_study` that ``book/scan_snap_theory`` reads."""
    return report.Summary(
        {
            "lemma9_stage1": (
                res["stage1"],
                "stage 1: largest exp(M h) / min(M - 1, (M - 1) M h) (at most 1)",
            ),
            "lemma9_stage2": (
                res["stage2"],
                "stage 2: smallest exp(M h) / max(M - 1, (M - 1) M h) (at least 1)",
            ),
            "lemma9_stage1_gamma": (res["stage1_gamma"], "stage 1: largest gamma K / (eta_Y t)"),
            "lemma9_stage2_gamma": (
                res["stage2_gamma"],
                "stage 2: largest gamma eta_Y t / (K ln(M eta_Y t / K))",
            ),
        }
    )


LEMMA10 = {"N": (10**2, 10**3, 10**4), "K": (2, 10), "delta": (0.01, 0.1, 0.5), "small_N": 20}


def lemma10_study() -> dict:
    """Lemma 10 under uniform sampling (:data:`LEMMA10`). ``tail``: the largest, over N, K and delta, of the exact
    P(|N_n - ceil(N/K)| > sqrt(N/2 ln(2/delta)) + 1) / delta with N_n ~ Binomial(N, 1/K) (Eq. 58's first
    inequality: at most 1). ``fails``: the number of (N, delta) with N = 1..``small_N`` and delta = 0.05, ...,
    0.95 at which Eq. (58)'s second inequality, sqrt(N/2 ln(2/delta)) + 1 < sqrt(N ln(2/delta)), does not hold;
    ``threshold``: (2 + sqrt 2)^2, the N ln(2/delta) above which it holds."""
    from scipy.stats import binom

    d = LEMMA10
    tail = 0.0
    for N in d["N"]:
        for K in d["K"]:
            center = math.ceil(N / K)
            for delta in d["delta"]:
                b = math.sqrt(N / 2 * math.log(2 / delta)) + 1
                p = binom.cdf(math.ceil(center - b) - 1, N, 1 / K) + binom.sf(
                    math.floor(center + b), N, 1 / K
                )
                tail = max(tail, float(p / delta))
    deltas = np.round(np.arange(1, 20) * 0.05, 2)
    fails = sum(
        math.sqrt(N / 2 * math.log(2 / dl)) + 1 >= math.sqrt(N * math.log(2 / dl))
        for N in range(1, d["small_N"] + 1)
        for dl in deltas
    )
    return {
        "tail": tail,
        "fails": int(fails),
        "points": d["small_N"] * len(deltas),
        "threshold": (2 + math.sqrt(2)) ** 2,
    }


def lemma10_summary(res: dict) -> report.Summary:
    """The numbers of :func:`lemma10_study` that ``book/scan_snap_theory`` reads."""
    return report.Summary(
        {
            "lemma10_tail": (res["tail"], "largest exact P(|N_n - ceil(N/K)| > Eq. 58's bound) / delta"),
            "lemma10_fails": (
                res["fails"],
                "(N, delta) of the small grid where Eq. (58)'s second inequality fails",
            ),
            "lemma10_points": (res["points"], "points of the small grid"),
            "lemma10_threshold": (res["threshold"], "(2 + sqrt 2)^2: the N ln(2/delta) above which it holds"),
        }
    )


LEMMA11 = {
    "K": 10,
    "delta": 0.1,
    "N": (10**3, 10**4, 10**5, 10**6),
    "M": (10**2, 10**3),
    "eta_y": (0.1, 0.5, 0.9),
}


def lemma11_study() -> dict:
    """Lemma 11 on h of Lemma 6's closed form (:func:`h_closed`) and g(s) = :func:`speed_factor` (h(s)), at
    N_bar = ceil(N/K) and Delta = ceil(sqrt(N ln(1/delta))) (Remark 4) for every N, M and eta_Y of
    :data:`LEMMA11`. ``h``: the largest |h(N_bar +- Delta) - h(N_bar)| / (h(N_bar) Delta / (N_bar - Delta))
    (Eq. 63: at most 1); ``g``: the largest |g(N_bar + Delta) - g(N_bar)| / (g(N_bar) eta_Y Delta / 3) (Eq. 65:
    at most 1); ``late``: over the points with N_bar >= :func:`stage2_start` (K = 1) + Delta, the largest
    |g(N_bar + Delta) - g(N_bar)| / g(N_bar) / (Delta / N_bar) (the proof's chain: below 2), and ``n_late``, how many
    points that is."""
    d = LEMMA11
    out = {"h": 0.0, "g": 0.0, "late": 0.0, "n_late": 0}
    for M in d["M"]:
        for eta in d["eta_y"]:
            late_from = stage2_start(1, M, eta)
            for N in d["N"]:
                n_bar, delta = math.ceil(N / d["K"]), math.ceil(math.sqrt(N * math.log(1 / d["delta"])))
                if delta >= n_bar:
                    raise ValueError(
                        f"N={N}: Delta = {delta} >= N_bar = {n_bar}; allowed N > K^2 ln(1/delta)"
                    )
                lo, mid, hi = h_closed(np.array([n_bar - delta, n_bar, n_bar + delta], dtype=float), M, eta)
                bound = mid * delta / (n_bar - delta)
                out["h"] = max(out["h"], (mid - lo) / bound, (hi - mid) / bound)
                g_mid, g_hi = float(speed_factor(mid, M)), float(speed_factor(hi, M))
                out["g"] = max(out["g"], abs(g_hi - g_mid) / (g_mid * eta * delta / 3))
                if n_bar >= late_from + delta:
                    out["late"] = max(out["late"], abs(g_hi - g_mid) / g_mid / (delta / n_bar))
                    out["n_late"] += 1
    return {k: float(v) if k != "n_late" else v for k, v in out.items()}


def lemma11_summary(res: dict) -> report.Summary:
    """The numbers of :func:`lemma11_study` that ``book/scan_snap_theory`` reads."""
    return report.Summary(
        {
            "lemma11_h": (res["h"], "largest |h(N_bar +- Delta) - h(N_bar)| over Eq. (63)'s bound"),
            "lemma11_g": (res["g"], "largest |g(N_bar + Delta) - g(N_bar)| over Eq. (65)'s bound"),
            "lemma11_late": (res["late"], "second case: largest relative change of g over Delta / N_bar"),
            "lemma11_n_late": (res["n_late"], "grid points in the second case"),
        }
    )


COR1 = {"M": (10**2, 10**3, 10**4), "eta_y": (0.1, 0.5, 0.9), "epsilon": (0.1, 0.03, 0.01, 0.003, 0.001)}


def cor1_epochs(M: int, eta_y: float, epsilons: tuple[float, ...]) -> dict[float, float]:
    """S_n(epsilon) of Corollary 1 for each epsilon: the first epoch s of one class at which ||e_n - softmax(w_n)||
    <= epsilon, with w_n = (M - 1) h(s) zeta_n and h Lemma 5's recursion (:func:`h_discrete`). At that w_n the
    residual is e_n - softmax(w_n) = (M - 1) g zeta_n (Eq. 71, g = :func:`speed_factor`), of norm
    sqrt(M (M - 1)) g. The recursion runs to the proof's bound, 1 + ln(M / epsilon) / (epsilon eta_Y); an epsilon
    not reached by then gets NaN.

    >>> cor1_epochs(100, 0.5, (0.5, 0.1))
    {0.5: 11.0, 0.1: 31.0}
    """
    _check(1, M, eta_y)
    for e in epsilons:
        check_float("epsilon", e, low=0, high=1, low_open=True, high_open=True)
    norm = math.sqrt(M * (M - 1))
    cap = max(1 + math.log(M / e) / (e * eta_y) for e in epsilons)
    out, h, s = {}, 0.0, 0
    todo = sorted(epsilons, reverse=True)
    while todo and s <= cap:
        while todo and norm * speed_factor(h, M) <= todo[0]:
            out[todo.pop(0)] = float(s)
        h, s = h + eta_y * float(speed_factor(h, M)), s + 1
    return {e: out.get(e, math.nan) for e in epsilons}


def cor1_study() -> dict:
    """Corollary 1's epoch count (:func:`cor1_epochs`) over :data:`COR1`: ``bound``, the largest S_n epsilon eta_Y /
    ln(M / epsilon) (Eq. 73 with the proof's constants: below 1); ``leading``, the largest |S_n epsilon eta_Y - 1|
    at the smallest epsilon (how far S_n is from 1 / (epsilon eta_Y)); ``log_min`` and ``log_max``, ln(M /
    epsilon) at the smallest epsilon, the factor by which Eq. (73) then exceeds 1 / (epsilon eta_Y)."""
    d = COR1
    e_min = min(d["epsilon"])
    bound, leading = 0.0, 0.0
    for M in d["M"]:
        for eta in d["eta_y"]:
            S = cor1_epochs(M, eta, d["epsilon"])
            bound = max(bound, *(S[e] * e * eta / math.log(M / e) for e in d["epsilon"]))
            leading = max(leading, abs(S[e_min] * e_min * eta - 1))
    return {
        "bound": bound,
        "leading": leading,
        "epsilon_min": e_min,
        "log_min": math.log(min(d["M"]) / e_min),
        "log_max": math.log(max(d["M"]) / e_min),
    }


def cor1_summary(res: dict) -> report.Summary:
    """The numbers of :func:`cor1_study` that ``book/scan_snap_theory`` reads."""
    return report.Summary(
        {
            "cor1_bound": (res["bound"], "largest S_n epsilon eta_Y / ln(M / epsilon) (Eq. 73: below 1)"),
            "cor1_leading": (res["leading"], "at the smallest epsilon: largest |S_n epsilon eta_Y - 1|"),
            "cor1_epsilon_min": (res["epsilon_min"], "the smallest epsilon"),
            "cor1_log_min": (res["log_min"], "ln(M / epsilon) there, smallest M"),
            "cor1_log_max": (res["log_max"], "ln(M / epsilon) there, largest M"),
        }
    )


def gamma_of_h(h: np.ndarray, M: int) -> np.ndarray:
    """The speed control coefficient gamma = (M - 1)^2 h / ((M - 1) + exp(M h)) (Eq. 85)."""
    return (M - 1) ** 2 * h * speed_factor(h, M)


def transition_time(K: int, M: int, eta_y: float) -> float:
    """t_0 = 2 K ln M / eta_Y, the start of the snapping phase (Theorem 4, without its 1 + o(1))."""
    _check(K, M, eta_y)
    return 2 * K * math.log(M) / eta_y


def big_gamma(t: np.ndarray, K: int, M: int, eta_y: float, eta_z: float) -> np.ndarray:
    """Gamma(t) = eta_Z int_0^t gamma = (eta_Z / eta_Y) K (M - 1)^2 h(t/K)^2 / 2 (Eq. 126)."""
    _check(K, M, eta_y, eta_z)
    return eta_z / eta_y * K * (M - 1) ** 2 * h_closed(np.asarray(t) / K, M, eta_y) ** 2 / 2


def B_closed(t: np.ndarray, K: int, M: int, eta_y: float, eta_z: float, rho0: float = 1.0) -> np.ndarray:
    """B_n(t) = 1/4 ln(1 + 4 K Gamma(t) / rho0^4): Eq. (122) with both limits of the integral kept."""
    _check(K, M, eta_y, eta_z, rho0)
    return np.log1p(4 * K * big_gamma(t, K, M, eta_y, eta_z) / rho0**4) / 4


def B_eq127(t: np.ndarray, K: int, M: int, eta_y: float, eta_z: float, rho0: float = 1.0) -> np.ndarray:
    """B_n(t) as the paper's Eq. (127) states it: 1/4 ln(rho0^4 / K + 4 Gamma(t))."""
    _check(K, M, eta_y, eta_z, rho0)
    return np.log(rho0**4 / K + 4 * big_gamma(t, K, M, eta_y, eta_z)) / 4


def B_eq14(t: np.ndarray, K: int, M: int, eta_y: float, eta_z: float, rho0: float = 1.0) -> np.ndarray:
    """Eq. (14), Theorem 4's two-phase form: the first branch for t < K ln M / eta_Y, the second after
    (between t'_0 and t_0 the paper gives no formula; the second branch is used)."""
    _check(K, M, eta_y, eta_z, rho0)
    t = np.asarray(t, dtype=np.float64)
    early = rho0**4 / K + 2 * (M - 1) ** 2 / (K * M**2) * eta_y * eta_z * t**2
    with np.errstate(divide="ignore", invalid="ignore"):
        late = rho0**4 / K + 2 * K * (M - 1) ** 2 / M**2 * eta_z / eta_y * np.log(M * eta_y * t / K) ** 2
    return np.log(np.where(t < K * math.log(M) / eta_y, early, late)) / 4


def phase_ode(
    t: np.ndarray, K: int, M: int, eta_y: float, eta_z: float, rho0: float = 1.0, rtol: float = 1e-10
) -> dict[str, np.ndarray]:
    """Integrate Theorem 4's system with an adaptive solver: u = h(t/K), z (the common token's logit, z(0) = 0)
    and B, with du/dt = eta_Y / (K ((M - 1) + exp(M u))), dz/dt = -K rho0^-4 eta_Z gamma exp(4 z) and
    dB/dt = eta_Z K rho0^-4 gamma exp(4 z). Returns ``{"h", "z", "B"}`` at ``t``."""
    _check(K, M, eta_y, eta_z, rho0)
    t = np.asarray(t, dtype=np.float64)
    c = K / rho0**4

    def rhs(s, y):
        u, z, _ = y
        g = (M - 1) ** 2 * u / ((M - 1) + math.exp(M * u))
        return [
            eta_y / (K * ((M - 1) + math.exp(M * u))),
            -c * eta_z * g * math.exp(4 * z),
            c * eta_z * g * math.exp(4 * z),
        ]

    sol = solve_ivp(
        rhs, (0.0, float(t.max())), [0.0, 0.0, 0.0], method="DOP853", t_eval=t, rtol=rtol, atol=1e-14
    )
    return {"h": sol.y[0], "z": sol.y[1], "B": sol.y[2]}


# --- the chapter's computations ---------------------------------------------------------------------------

FIG3 = {"K": 10, "M": 1000, "eta_z": 0.5, "eta_y": (0.1, 0.5, 1.0, 2.0)}
FIG9 = {"K": 10, "M": 1000, "nu": (0.1, 0.5), "eta_z": (0.1, 0.5, 1.0, 2.0)}  # nu = eta_Z / eta_Y (Fig. 9)


def transition_from_slope(t: np.ndarray, B: np.ndarray) -> float:
    """The first time after the peak of dB/d ln t at which the slope is half its peak: where the log-t growth
    of the scanning phase (slope 1/2) gives way to the log-log-t growth of snapping."""
    s = np.gradient(B, np.log(t))
    i = int(np.argmax(s))
    below = np.nonzero(s[i:] < s[i] / 2)[0]
    return float(t[i + below[0]]) if len(below) else float("inf")


def study(t_max: float = 1e7, n_t: int = 2000, rho0: float = 1.0) -> dict:
    """Fig. 3 (eta_Z = 0.5, four eta_Y) and Fig. 9 (fixed nu = eta_Z / eta_Y, four eta_Z) by the adaptive ODE,
    with the closed forms beside them, and Lemmas 6-7 and Fig. 8 at M = 1000 (the ODE of h at eta_Y = 0.5, the
    discrete and continuous speeds at Fig. 3's four eta_Y). Seconds on a CPU."""
    t = np.concatenate([[0.0], np.geomspace(1e-1, t_max, n_t)])
    K, M = FIG3["K"], FIG3["M"]
    fig3 = {}
    for ey in FIG3["eta_y"]:
        ode = phase_ode(t, K, M, ey, FIG3["eta_z"], rho0)
        fig3[ey] = {
            "B": ode["B"],
            "closed": B_closed(t, K, M, ey, FIG3["eta_z"], rho0),
            "eq127": B_eq127(t, K, M, ey, FIG3["eta_z"], rho0),
            "eq14": B_eq14(t, K, M, ey, FIG3["eta_z"], rho0),
            "t0": transition_time(K, M, ey),
            "t0_prime": K * math.log(M) / ey,
            "t_half": transition_from_slope(t[1:], ode["B"][1:]),
        }
    fig9 = {}
    for nu in FIG9["nu"]:
        for ez in FIG9["eta_z"]:
            ey = ez / nu
            fig9[(nu, ez)] = {
                "B": phase_ode(t, K, M, ey, ez, rho0)["B"],
                "t0": transition_time(K, M, ey),
                "B_t0": float(
                    phase_ode(np.array([0.0, transition_time(K, M, ey)]), K, M, ey, ez, rho0)["B"][-1]
                ),
            }
    s = np.arange(0, 20001).astype(float)
    lemma = {
        "t": s,
        "M": M,
        "h_ode": h_ode(s, M, 0.5),
        "h_ode_eta_y": 0.5,
        "runs": {
            ey: {"h": h_closed(s, M, ey), "h_star": h_discrete(len(s) - 1, M, ey)} for ey in FIG3["eta_y"]
        },
    }
    return {"t": t, "fig3": fig3, "fig9": fig9, "lemma": lemma, "rho0": rho0, "K": K, "M": M}


def summary(res: dict) -> report.Summary:
    t, f3, f9, lem = res["t"], res["fig3"], res["fig9"], res["lemma"]
    ets = sorted(f3)
    # (c): at every t past the later transition of a pair, the smaller eta_Y has the larger B
    order = [
        bool(np.all(f3[a]["B"][t >= f3[a]["t0"]] > f3[b]["B"][t >= f3[a]["t0"]]))
        for i, a in enumerate(ets)
        for b in ets[i + 1 :]
    ]
    gap14 = []
    for e in ets:
        r = f3[e]
        outside = (t > 0) & ((t < r["t0_prime"]) | (t >= r["t0"]))
        gap14.append(np.abs((r["eq14"] - r["eq127"])[outside]).max())
    th_eta = [f3[e]["t_half"] * e for e in ets]
    b_t0 = {nu: [f9[(nu, ez)]["B_t0"] for ez in FIG9["eta_z"]] for nu in FIG9["nu"]}
    b_end = {nu: [f9[(nu, ez)]["B"][-1] for ez in FIG9["eta_z"]] for nu in FIG9["nu"]}
    gaps = {ey: r["h_star"] - r["h"] for ey, r in lem["runs"].items()}
    K = res["K"]
    return report.Summary(
        {
            "h_ode_gap": (
                float(np.abs(lem["h_ode"] - lem["runs"][0.5]["h"]).max() / lem["runs"][0.5]["h"].max()),
                "Lemma 6: largest |ODE - closed form| of h over t <= 2e4 (eta_Y = 0.5), relative to h(2e4)",
            ),
            "lemma7_ratio": (
                float(max(g.max() / (2 * ey / lem["M"]) for ey, g in gaps.items())),
                "Lemma 7: largest h*(s) - h(s) over the bound 2 eta_Y / M, over Fig. 8's eta_Y",
            ),
            "lemma7_min": (
                float(min(g.min() for g in gaps.values())),
                "Lemma 7: smallest h*(s) - h(s) (the bound says >= 0)",
            ),
            "lemma7_end": (
                float(max(g[-1] / g.max() for g in gaps.values())),
                "Fig. 8: the gap at s = 2e4 over its largest value, largest over eta_Y",
            ),
            "B_closed_gap": (
                float(max(np.abs(f3[e]["B"] - f3[e]["closed"]).max() for e in ets)),
                "largest |B_ODE - 1/4 ln(1 + 4 K Gamma / rho0^4)| over the four runs of Fig. 3",
            ),
            "B_eq127_at_0": (
                float(f3[ets[0]]["eq127"][0]),
                "Eq. (127) (and Eq. 14) at t = 0; B_n(0) = 0 by definition",
            ),
            "offset": (math.log(res["rho0"] ** 4 / K) / 4, "1/4 ln(rho0^4 / K)"),
            "B_eq127_shift": (
                float(
                    max(
                        np.abs(f3[e]["eq127"] - f3[e]["B"] - math.log(res["rho0"] ** 4 / K) / 4).max()
                        for e in ets
                    )
                ),
                "largest |Eq. (127) - B_ODE - 1/4 ln(rho0^4 / K)|: the two differ by that constant",
            ),
            "eq14_gap": (
                float(max(gap14)),
                "largest |Eq. (14) - Eq. (127)| outside (t'_0, t_0), over Fig. 3's runs",
            ),
            "scan_slope": (
                float(np.gradient(f3[1.0]["B"][1:], np.log(t[1:])).max()),
                "largest dB_n / d ln t (eta_Y = 1): the scanning phase's growth",
            ),
            "snap_slope": (
                float(np.gradient(f3[1.0]["B"][1:], np.log(np.log(res["M"] * 1.0 * t[1:] / K)))[-1]),
                "dB_n / d ln ln(M eta_Y t / K) at the last t (eta_Y = 1): the snapping phase's growth",
            ),
            "t_half_ratio": (
                float(f3[ets[0]]["t_half"] / f3[ets[0]]["t0"]),
                "measured transition (slope of B in ln t halved) over t_0 = 2 K ln M / eta_Y",
            ),
            "t_half_spread": (
                float(max(th_eta) / min(th_eta) - 1),
                "spread of (measured transition) x eta_Y over eta_Y",
            ),
            "order_smaller_eta_y": (
                float(np.mean(order)),
                "pairs of eta_Y with the smaller one's B larger at every t past its t_0 (fraction)",
            ),
            "B_t0_spread": (
                float(max(max(v) - min(v) for v in b_t0.values())),
                "Fig. 9: largest spread of B_n(t_0) over eta_Z at fixed nu",
            ),
            "both_up_larger_B": (
                float(np.mean([np.all(np.diff(v) > 0) for v in b_end.values()])),
                "Fig. 9: fraction of nu at which B(10^7) rises with eta_Z",
            ),
            **{f"t0_{e:g}": (f3[e]["t0"], f"t_0 for eta_Y = {e:g}") for e in ets},
            **{f"B_end_{e:g}": (float(f3[e]["B"][-1]), f"B_n(10^7) for eta_Y = {e:g}") for e in ets},
        }
    )
