"""The scalar recursion for the noise logit (main paper, Appendix B.3).

With W_F dominating the noise logit xi_t and logits of ordinary tokens near 0,
the predicted noise probability is p_t = e^xi / (N + e^xi) and one gradient
step gives

    xi_{t+1} = xi_t + eta (alpha - e^{xi_t} / (N + e^{xi_t})).

Its fixed point is xi* = log N + log(alpha / (1 - alpha)). In the centred
variable xi_hat = xi - xi*, the iterate stays below the fixed point
(xi_hat <= 0) as long as eta <= g(xi_hat) with

    g(x) = x / (e^x / ((1 - alpha)/alpha + e^x) - alpha),

which decreases on x < 0 (for alpha < 1/2) to g(0-) = 1 / (alpha (1 - alpha)).

>>> round(float(fixed_point(alpha=0.5, N=10)), 6) == round(float(np.log(10)), 6)
True
"""

from __future__ import annotations

import numpy as np

from companion.config import check_float, check_int


def fixed_point(alpha: float, N: int) -> float:
    check_float("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    check_int("N", N, low=1)
    return float(np.log(N) + np.log(alpha / (1 - alpha)))


def iterate(alpha: float, N: int, eta: float, steps: int, xi0: float = 0.0) -> np.ndarray:
    """xi_0 .. xi_steps of the recursion (float64)."""
    fixed_point(alpha, N)
    check_float("eta", eta, 0.0, 1e6, low_open=True)
    check_int("steps", steps, low=1)
    xi = np.empty(steps + 1)
    xi[0] = xi0
    for t in range(steps):
        e = np.exp(xi[t])
        xi[t + 1] = xi[t] + eta * (alpha - e / (N + e))
    return xi


def bound_function(x: np.ndarray, alpha: float) -> np.ndarray:
    """g(x) = x / (sigma(x) - alpha), sigma(x) = e^x / ((1 - alpha)/alpha + e^x), for x < 0."""
    check_float("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    x = np.asarray(x, dtype=np.float64)
    sig = np.exp(x) / ((1 - alpha) / alpha + np.exp(x))
    return x / (sig - alpha)


def step_size_bound(alpha: float) -> float:
    """The paper's bound 1 / (alpha (1 - alpha)) (the limit of g at 0-)."""
    check_float("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    return 1.0 / (alpha * (1 - alpha))


GRID_NS = (10, 100, 1000, 10_000)
GRID_ALPHAS = (0.1, 0.2, 0.3, 0.4, 0.45)


def study(Ns=GRID_NS, alphas=GRID_ALPHAS, steps: int = 3000, probe_steps: int = 300) -> dict:
    """The chapter's grid: recursions at eta = 1 (``runs``), centred iterates just below and above the
    step-size bound (``below``, ``above``: 0.99 and 1.2 times it), the centred iterate after one step from 0 at
    eta = log N (``one_step``, the remark after the bound) and g on x in [-31.6, -1e-6] (``x``, ``g``)."""
    x = -np.logspace(-6, 1.5, 400)[::-1]  # increasing, from -31.6 to -1e-6
    return {
        "runs": {(N, a): iterate(a, N, eta=1.0, steps=steps) for N in Ns for a in alphas},
        "below": {
            (N, a): iterate(a, N, eta=0.99 * step_size_bound(a), steps=probe_steps) - fixed_point(a, N)
            for N in Ns
            for a in alphas
        },
        "above": {
            (N, a): iterate(a, N, eta=1.2 * step_size_bound(a), steps=probe_steps) - fixed_point(a, N)
            for N in Ns
            for a in alphas
        },
        "one_step": {
            (N, a): float(iterate(a, N, eta=float(np.log(N)), steps=1)[-1] - fixed_point(a, N))
            for N in Ns
            for a in alphas
        },
        "x": x,
        "g": {a: bound_function(x, a) for a in alphas},
        "alphas": tuple(alphas),
    }


def summary(res: dict):
    """The chapter's asserted numbers (a :class:`companion.report.Summary`)."""
    from companion.report import Summary

    a_s = res["alphas"]
    return Summary(
        {
            "fp_dev": (
                max(abs(xs[-1] - fixed_point(a, N)) for (N, a), xs in res["runs"].items()),
                "max |xi_T - xi*| over the grid of N and alpha",
            ),
            "lim_dev": (
                max(abs(res["g"][a][-1] * a * (1 - a) - 1) for a in a_s),
                "max relative deviation of g(-1e-6) from 1/(alpha(1-alpha))",
            ),
            "decreasing": (
                all(bool(np.all(np.diff(res["g"][a]) < 0)) for a in a_s),
                "g decreasing on x < 0, every alpha",
            ),
            "max_below": (
                max(float(v.max()) for v in res["below"].values()),
                "largest centred iterate with eta = 0.99 x bound",
            ),
            "one_step_log_n": (
                max(res["one_step"].values()),
                "largest centred iterate after one step from 0 with eta = log N",
            ),
            "log_n_over_bound": (
                max(float(np.log(N)) / step_size_bound(a) for N, a in res["one_step"]),
                "largest log N over the bound 1/(alpha(1-alpha)) on the grid",
            ),
            "min_above": (
                min(float(v.max()) for v in res["above"].values()),
                "smallest overshoot over the grid with eta = 1.2 x bound",
            ),
        }
    )
