"""Linear associative memory with a common noise token (main paper, Section 3.3, App. G, Lemma H.3).

Inputs i in [n] with embeddings e_i, outputs j in [c], c = n + 1, with
embeddings u_j; logits f(i, j; W) = <u_j, W e_i>. Targets: y = i with
probability 1 - alpha, y = c (the common noise) with probability alpha. The
population cross-entropy loss is averaged over uniform inputs.

Two things live here:

* the two-token case of Theorem 3 (n = 2, c = 3, orthonormal embeddings,
  W(0) = 0). W stays in span{B1, B2} with B1 = (u1 - u2)(e1 - e2)^T and
  B2 = (u1 + u2 - 2 u3)(e1 + e2)^T; W = beta1 B1 + beta2 B2, and with
  a = -2 beta1, b = -beta1 - 3 beta2 the paper's ODE is its Eq. (43).
  ``flow="beta"`` is gradient flow on (beta1, beta2) as parameters, which is
  what Eq. (42) writes; ``flow="W"`` is gradient flow on the matrix W itself,
  which divides the beta-velocities by |B1|^2 = 4 and |B2|^2 = 12;
* the random-embedding experiment of Fig. 18 (n = 3, d = 8 or 12, 20 runs),
  trained as one batched computation.

>>> rhs_ab(0.0, np.zeros(2), alpha=0.3, flow="beta").round(6).tolist()  # Eq. (43) at t = 0
[-1.4, -1.0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from companion.config import check_choice, check_float, check_int, seed_streams, torch_generator

FLOWS = ("beta", "W")


def rhs_ab(t: float, y: np.ndarray, alpha: float, flow: str = "beta") -> np.ndarray:
    """d(a, b)/dt for the two-token model.

    ``flow="beta"``: the paper's Eq. (43),
    a' = (2 - 2e^a)/S - 2 + 2 alpha, b' = (2 - 8e^b)/S - 2 + 10 alpha, S = e^a + e^b + 1.
    ``flow="W"``: gradient flow on W, derived from the same probabilities:
    beta1' = (P12 - P11 + 1 - alpha)/4, beta2' = (P13 - alpha)/4.
    """
    a, b = y
    ea, eb = np.exp(a), np.exp(b)
    S = ea + eb + 1.0
    if flow == "beta":
        return np.array([(2 - 2 * ea) / S - 2 + 2 * alpha, (2 - 8 * eb) / S - 2 + 10 * alpha])
    # probabilities for input 1, written with the margins: P11 = 1/S, P12 = e^a/S, P13 = e^b/S
    d_beta1 = (ea / S - 1 / S + 1 - alpha) / 4
    d_beta2 = (eb / S - alpha) / 4
    return np.array([-2 * d_beta1, -d_beta1 - 3 * d_beta2])


@dataclass(frozen=True)
class ODESolution:
    t: np.ndarray  # (K,) times, log-spaced
    a: np.ndarray  # (K,)
    b: np.ndarray  # (K,)
    alpha: float
    flow: str

    @property
    def beta1(self) -> np.ndarray:
        return -self.a / 2

    @property
    def beta2(self) -> np.ndarray:
        return -(self.b + self.beta1) / 3

    def probabilities(self, rank: int | None = None) -> np.ndarray:
        """(K, 3) predicted distribution for input 1 of the full (None) or rank-1 model."""
        b1, b2 = self.beta1, self.beta2
        if rank is None:
            logits = np.stack([b1 + b2, -b1 + b2, -2 * b2], axis=1)
        elif rank == 1:
            # singular values: 2|beta1| for B1, 2 sqrt(3)|beta2| for B2; keep the larger
            keep1 = 2 * np.abs(b1) >= 2 * np.sqrt(3) * np.abs(b2)
            logits = np.where(keep1[:, None], np.stack([b1, -b1, 0 * b1], 1), np.stack([b2, b2, -2 * b2], 1))
        else:
            raise ValueError(f"rank={rank!r}: allowed None (full) or 1")
        logits = logits - logits.max(1, keepdims=True)
        p = np.exp(logits)
        return p / p.sum(1, keepdims=True)


def solve_ab(
    alpha: float,
    t_max: float = 1e8,
    flow: str = "beta",
    n_points: int = 400,
    rtol: float = 1e-10,
    atol: float = 1e-12,
) -> ODESolution:
    """Integrate (a, b) from a(0) = b(0) = 0 to ``t_max`` with an adaptive implicit solver (scipy Radau).

    The integration runs in s = log(1 + t), in which the slow logarithmic
    drift of a(t) is a steady one; b relaxes fast in t, which makes the
    system stiff in s, hence an implicit method.
    """
    from scipy.integrate import solve_ivp

    check_float("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    check_float("t_max", t_max, 0.0, 1e300, low_open=True)
    check_choice("flow", flow, FLOWS)
    check_int("n_points", n_points, low=2)
    s_max = np.log1p(t_max)
    s_eval = np.linspace(0.0, s_max, n_points)
    sol = solve_ivp(
        lambda s, y: np.exp(s) * rhs_ab(np.expm1(s), y, alpha, flow),
        (0.0, s_max),
        np.zeros(2),
        method="Radau",
        t_eval=s_eval,
        rtol=rtol,
        atol=atol,
    )
    if not sol.success:
        raise RuntimeError(f"ODE integration failed: {sol.message}")
    return ODESolution(np.expm1(sol.t), sol.y[0], sol.y[1], alpha, flow)


def lemma_h3_limits(alpha: float) -> tuple[float, float]:
    """Lemma H.3 as stated: a(t) + log t -> -log((1 - alpha)(4 - 2 alpha)), b -> log(alpha / (1 - alpha))."""
    return -np.log((1 - alpha) * (4 - 2 * alpha)), np.log(alpha / (1 - alpha))


def lemma_h2_sum(a: float, T: int) -> float:
    """Lemma H.2's closed form of sum_{t=1}^T a^t t (a != 1): a (1 - a^T) / (a - 1)^2 + a^(T+1) T / (a - 1).

    >>> lemma_h2_sum(2.0, 3)  # 2 + 8 + 24
    34.0
    """
    check_float("a", a)
    check_int("T", T, low=1)
    if a == 1:
        raise ValueError("a=1 is out of range: Lemma H.2 needs a != 1")
    return a * (1 - a**T) / (a - 1) ** 2 + a ** (T + 1) * T / (a - 1)


def lemma_h2_gap(a_values=(-2.0, -0.5, 0.3, 0.9, 1.1, 3.0), T_values=(1, 2, 5, 20)) -> float:
    """Largest |Lemma H.2's closed form - the sum added up term by term| over a grid of a and T, relative to the
    sum of the terms' sizes, sum_t |a^t t| (the sum itself can be 0 for a < 0)."""
    gaps = []
    for a in a_values:
        for T in T_values:
            terms = [a**t * t for t in range(1, T + 1)]
            gaps.append(abs(lemma_h2_sum(a, T) - math.fsum(terms)) / math.fsum(map(abs, terms)))
    return max(gaps)


def limits(alpha: float, flow: str) -> tuple[float, float]:
    """The limits re-derived for each flow (see the chapter): the W-flow runs 4x slower in a."""
    c_a, c_b = lemma_h3_limits(alpha)
    return (c_a, c_b) if flow == "beta" else (c_a + np.log(4.0), c_b)


def train_two_token_W(alpha: float, lr: float, steps: int, record_every: int = 1) -> dict:
    """Gradient descent with autograd on W (3 x 2, orthonormal bases), W(0) = 0 (full-batch on the population
    loss: kept apart from the training engine, :func:`companion.train.fit`, which draws minibatches).

    Returns the times t = lr * step and the coordinates beta1, beta2 of W on B1, B2.
    An independent check of the ODE: nothing here uses Eq. (42) or (43).
    """
    check_float("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    check_float("lr", lr, 0.0, 100.0, low_open=True)
    check_int("steps", steps, low=1)
    W = torch.zeros(3, 2, dtype=torch.float64, requires_grad=True)  # W[j, i] = f(i, j)
    target = torch.tensor([[1 - alpha, 0.0], [0.0, 1 - alpha], [alpha, alpha]], dtype=torch.float64)
    B1 = torch.tensor([[1.0, -1.0], [-1.0, 1.0], [0.0, 0.0]], dtype=torch.float64)
    B2 = torch.tensor([[1.0, 1.0], [1.0, 1.0], [-2.0, -2.0]], dtype=torch.float64)
    ts, b1, b2 = [], [], []
    for step in range(steps + 1):
        if step % record_every == 0:
            with torch.no_grad():
                ts.append(lr * step)
                b1.append(float((W * B1).sum() / (B1 * B1).sum()))
                b2.append(float((W * B2).sum() / (B2 * B2).sum()))
        if step == steps:
            break
        loss = -(target * torch.log_softmax(W, dim=0)).sum(0).mean()  # mean over the two inputs
        (grad,) = torch.autograd.grad(loss, W)
        with torch.no_grad():
            W -= lr * grad
    return {"t": np.array(ts), "beta1": np.array(b1), "beta2": np.array(b2)}


def fig18_runs(
    n: int = 3,
    alpha: float = 0.03,
    d: int = 12,
    runs: int = 20,
    steps: int = 2000,
    lr: float = 1.0,
    ranks=(1, 2, 3, 4),
    seed: int = 0,
    record_every: int = 10,
) -> dict:
    """Fig. 18: ``runs`` independent full models trained as one batched GD computation (full-batch on the
    population loss: kept apart from the training engine, :func:`companion.train.fit`, which draws minibatches).

    Embeddings e_i, u_j uniform on the sphere S^{d-1}; W_ij ~ N(0, 1/d); full-batch
    GD on the population cross-entropy with noise alpha. Every ``record_every``
    steps the pure-label (alpha = 0) loss of the rank-k truncations of W (one
    batched SVD) and of the full model is recorded.

    Returns ``{"step": (K,), "loss": (K, runs, len(ranks) + 1)}``, the last
    column being the full model.
    """
    check_int("n", n, low=1)
    check_float("alpha", alpha, 0.0, 1.0, high_open=True)
    check_int("d", d, low=n + 1)
    check_int("runs", runs, low=1)
    check_int("steps", steps, low=1)
    check_float("lr", lr, 0.0, 1e3, low_open=True)
    for k in ranks:
        check_int("rank", k, low=1, high=d)
    c = n + 1
    gen = torch_generator(seed_streams(seed, ["fig18"])["fig18"])
    E = torch.nn.functional.normalize(torch.randn(runs, d, n, generator=gen, dtype=torch.float64), dim=1)
    U = torch.nn.functional.normalize(torch.randn(runs, d, c, generator=gen, dtype=torch.float64), dim=1)
    W = (torch.randn(runs, d, d, generator=gen, dtype=torch.float64) / np.sqrt(d)).requires_grad_(True)
    target = torch.zeros(c, n, dtype=torch.float64)
    target[torch.arange(n), torch.arange(n)] = 1 - alpha
    target[n] = alpha
    pure = torch.arange(n)

    def logits(Wm):  # (runs, c, n): f(i, j) = u_j^T W e_i
        return U.transpose(1, 2) @ Wm @ E

    def pure_loss(Wm):  # (runs,)
        logp = torch.log_softmax(logits(Wm), dim=1)
        return -logp[:, pure, pure].mean(1)

    steps_out, losses = [], []
    for step in range(steps + 1):
        if step % record_every == 0 or step == steps:
            with torch.no_grad():
                Uw, S, Vh = torch.linalg.svd(W)
                row = [pure_loss((Uw[:, :, :k] * S[:, None, :k]) @ Vh[:, :k]) for k in ranks]
                row.append(pure_loss(W))
                steps_out.append(step)
                losses.append(torch.stack(row, 1).numpy())
        if step == steps:
            break
        loss = -(target * torch.log_softmax(logits(W), dim=1)).sum(1).mean(1).sum()  # sum over runs
        (grad,) = torch.autograd.grad(loss, W)
        with torch.no_grad():
            W -= lr * grad
    return {"step": np.array(steps_out), "loss": np.stack(losses), "ranks": tuple(ranks)}
