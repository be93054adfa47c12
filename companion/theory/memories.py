"""Weights as associative memories, and gradients as memories (the talk's slides 6-7).

Random embeddings ``E`` (d x n_in) and ``U`` (d x n_out) with i.i.d. N(0, 1/d)
entries are nearly orthonormal (norms ~1, inner products ~ 1/sqrt d). A
memory of pairs (z, y) with weights alpha is ``W = sum alpha_zy u_y e_z^T``;
it recalls z by ``argmax_k u_k^T W e_z``.

Scores of a memory of M pairs with n_out candidate outputs: the correct
output gets ``alpha + noise`` with variance about ``M / d^2`` (cross terms of
the other pairs), a wrong one ``noise`` with variance about ``1/d + M/d^2``.
The maximum over n_out - 1 wrong outputs is about ``sqrt(2 ln n_out)`` of
their standard deviation, so recall breaks down once
``2 ln(n_out) (1/d + M/d^2)`` approaches 1: capacity grows like d^2 / log,
the number of parameters up to a logarithm (:func:`predicted_accuracy`).

The gradient lemma: for ``F_W(z)_k = u_k^T W e_z`` and the cross-entropy,
``grad L(W) = E_z sum_k (p_W(k|z) - p(k|z)) u_k e_z^T`` (:func:`lemma_gradient`).
One population step from zero with z uniform over [N] and y = f*(z) gives
``W_1 = (eta/N) sum_{z,k} (1{f*(z)=k} - 1/N) u_k e_z^T`` (:func:`one_step`).

>>> rng = np.random.default_rng(0)
>>> E, U = embeddings(64, 32, rng), embeddings(64, 32, rng)
>>> W = memory(U, E, np.arange(32), np.arange(32))
>>> recall_accuracy(W, U, E, np.arange(32), np.arange(32))
1.0
"""

from __future__ import annotations

import math

import numpy as np
import torch

from companion import config


def embeddings(d: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """n random embeddings in R^d as columns (d, n), entries N(0, 1/d)."""
    config.check_int("d", d, 1)
    config.check_int("n", n, 1)
    return rng.standard_normal((d, n)) / math.sqrt(d)


def memory(U: np.ndarray, E: np.ndarray, z: np.ndarray, y: np.ndarray, alpha=None) -> np.ndarray:
    """W = sum_i alpha_i u_{y_i} e_{z_i}^T (d x d) over the pairs (z_i, y_i)."""
    a = np.ones(len(z)) if alpha is None else np.asarray(alpha, dtype=float)
    return (U[:, y] * a) @ E[:, z].T


def scores(W: np.ndarray, U: np.ndarray, E: np.ndarray, z: np.ndarray) -> np.ndarray:
    """u_k^T W e_z for every output k (rows) and query z (columns): (n_out, len(z))."""
    return U.T @ (W @ E[:, z])


def recall_accuracy(
    W: np.ndarray, U: np.ndarray, E: np.ndarray, z: np.ndarray, y: np.ndarray, chunk: int = 2048
) -> float:
    """Fraction of queries z whose argmax_k u_k^T W e_z is y."""
    hits = 0
    for i in range(0, len(z), chunk):
        hits += int((scores(W, U, E, z[i : i + chunk]).argmax(0) == y[i : i + chunk]).sum())
    return hits / len(z)


def predicted_accuracy(M: int, d: int, n_out: int, alpha: float = 1.0, nodes: int = 64) -> float:
    """Gaussian approximation of the recall accuracy of a memory of M pairs (see the module docstring):
    P(alpha + s_c X > max of n_out - 1 independent N(0, s_w^2)), X ~ N(0, 1), by Gauss-Hermite quadrature."""
    from scipy.special import log_ndtr

    s_c = math.sqrt(max(M - 1, 0) / d**2 + 2.0 / d)  # other pairs' cross terms; the pair's own norms
    s_w = math.sqrt(1.0 / d + max(M - 1, 0) / d**2)
    x, w = np.polynomial.hermite_e.hermegauss(nodes)
    return float((w * np.exp((n_out - 1) * log_ndtr((alpha + s_c * x) / s_w))).sum() / math.sqrt(2 * math.pi))


# --- gradients as memories ---


def lemma_gradient(W: np.ndarray, U: np.ndarray, E: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The lemma's gradient sum_z p(z) sum_k (p_W(k|z) - p(k|z)) u_k e_z^T of the expected cross-entropy;
    ``p`` (n_in, n_out) is the joint distribution of (z, y)."""
    pz = p.sum(1)  # (n_in,)
    logits = U.T @ W @ E  # (n_out, n_in)
    pw = np.exp(logits - logits.max(0))
    pw /= pw.sum(0)
    cond = np.divide(p.T, pz, out=np.zeros_like(p.T), where=pz > 0)  # p(k | z), (n_out, n_in)
    return U @ ((pw - cond) * pz) @ E.T


def autograd_gradient(W: np.ndarray, U: np.ndarray, E: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The same gradient by autograd of the expected cross-entropy sum_{z,y} p(z, y) (-log p_W(y|z))."""
    Wt = torch.tensor(W, dtype=torch.float64, requires_grad=True)
    logits = torch.as_tensor(U).T @ Wt @ torch.as_tensor(E)  # (n_out, n_in)
    loss = -(torch.as_tensor(p).T * torch.log_softmax(logits, dim=0)).sum()
    loss.backward()
    return Wt.grad.numpy()


def one_step(U: np.ndarray, E: np.ndarray, f_star: np.ndarray, eta: float) -> np.ndarray:
    """The slide's closed form W_1 = (eta/N) sum_{z,k} (1{f*(z)=k} - 1/N) u_k e_z^T, z uniform over [N]."""
    N = E.shape[1]
    target = np.zeros((U.shape[1], N))
    target[f_star, np.arange(N)] = 1.0
    return eta / N * U @ (target - 1.0 / U.shape[1]) @ E.T


def mean_gap(W: np.ndarray, U: np.ndarray, E: np.ndarray, f_star: np.ndarray) -> float:
    """Mean over queries z and wrong outputs k of u_{f*(z)}^T W e_z - u_k^T W e_z."""
    S = scores(W, U, E, np.arange(E.shape[1]))
    N = S.shape[0]
    correct = S[f_star, np.arange(E.shape[1])]
    return float((correct - (S.sum(0) - correct) / (N - 1)).mean())
