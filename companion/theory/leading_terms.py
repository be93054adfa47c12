"""Gradient leading terms of the attention-only transformer (the leading-terms paper, Sec. 4, App. A and D).

From N sequences of T + 1 tokens (inputs ``x_1..x_T``, targets ``x_2..x_{T+1}``),
with ``X_i`` and ``Y_i`` their one-hot matrices, ``U`` the matrix of 1/|V|,
``A_0`` uniform causal attention (row t: 1/t on the first t positions):

- ``B`` = B-bar (Eq. 9, Lemma D.3) = (1/NT) sum_i X_i^T (Y_i - U): row = current token, column = next token;
- ``Sigma`` = Sigma_B = B^T B (Eq. 10);
- ``Phi`` = Phi-bar (Eq. 11, Lemma D.4) = [(1/NT) sum_i X_i^T A_0^T (Y_i - U)]^T: row = the token e_i at
  position k+1, column = a token e_j of its prefix; columns sum to 0;
- ``Q`` = Q-bar (Eqs. 14-17, (82)-(83)) = (1/NT) sum_i X_i^T Q_i X_i, where row t of Q_i is the
  uniform-attention softmax Jacobian J_t applied to row t of (Y_i - U) Sigma Phi X_i^T:
  ``Q_i[t, m] = (g[t, m] - mean_{m' <= t} g[t, m']) / t`` for m <= t (rows: query position t, whose
  target is token t+1; columns: key position m);
- ``Delta`` (Eq. 85) = (1/NT) sum_i sum_t Q_i[t, t - d] for d = 0..T-1 (the d-th sub-diagonal).

After s gradient steps from zero (Theorem 4.1 / D.9, every layer):
``W_O ~ s eta B``, ``V ~ C(s,2) eta^2 Phi^T B^T``, ``W ~ c(s) eta^4 Q``, ``P ~ c(s) eta^4 Delta`` with
``c(s) = 3 C(s,4) + 2 C(s,3) = sum_{s'<s} s'^2 (s'-1) / 2`` (:func:`coefficient`). Everything is
vectorised (pairs of positions in chunks of sequences; no loop over T).

>>> coefficient(3), coefficient(4), coefficient(5)
(2, 11, 35)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from companion import config
from companion.probes import cosine  # the theory study reads it as lt.cosine

WEIGHTS = ("W_O", "V", "W", "P")
LEADING = {"W_O": "B-bar", "V": "Phi-bar^T B-bar^T", "W": "Q-bar", "P": "Delta"}


def weight_kind(key: str) -> str:
    """The kind of a per-layer weight name: ``"V2"`` -> ``"V"``, ``"W1"`` -> ``"W"``, ``"W_O"`` -> ``"W_O"``.

    >>> [weight_kind(k) for k in ("W_O", "W1", "V3", "P12")]
    ['W_O', 'W', 'V', 'P']
    """
    return key.rstrip("0123456789")


def coefficient(s: int) -> int:
    """c(s) = 3 C(s,4) + 2 C(s,3), the factor of eta^4 in front of Q-bar and Delta after s steps."""
    config.check_int("s", s, 0)
    return 3 * math.comb(s, 4) + 2 * math.comb(s, 3)


def leading_scale(name: str, s: int, eta: float) -> float:
    """The scalar in front of the leading term of weight ``name`` after s steps with rate eta."""
    config.check_choice("weight", name, WEIGHTS)
    return {"W_O": s * eta, "V": math.comb(s, 2) * eta**2}.get(name, coefficient(s) * eta**4)


@dataclass(frozen=True)
class Stats:
    """The corpus statistics (float64 tensors); ``n_seqs`` sequences of ``T`` positions."""

    B: torch.Tensor  # (V, V)
    Sigma: torch.Tensor  # (V, V)
    Phi: torch.Tensor  # (V, V)
    Q: torch.Tensor  # (V, V)
    Delta: torch.Tensor  # (T,)
    n_seqs: int
    T: int

    def leading(self, name: str) -> torch.Tensor:
        """The leading-term direction of weight ``name`` (``W_O``, ``V``, ``W``, ``P``), without its scale."""
        config.check_choice("weight", name, WEIGHTS)
        return {"W_O": self.B, "V": self.Phi.T @ self.B.T, "W": self.Q, "P": self.Delta}[name]


def _check_seqs(seqs, V: int) -> torch.Tensor:
    seqs = torch.as_tensor(np.asarray(seqs), dtype=torch.long)
    if seqs.ndim != 2 or seqs.shape[1] < 2:
        raise ValueError(f"sequences must be (N, T + 1) with T >= 1, got shape {tuple(seqs.shape)}")
    if seqs.numel() and (seqs.min() < 0 or seqs.max() >= V):
        raise ValueError(f"token ids must lie in [0, {V - 1}], got [{int(seqs.min())}, {int(seqs.max())}]")
    return seqs


def _pairs(T: int):
    """All (t, m) with m <= t (0-based), and 1 / (t + 1)."""
    t, m = torch.tril_indices(T, T)
    return t, m, 1.0 / (t + 1).double()


def _chunks(N: int, T: int, budget: int = 2_000_000):
    step = max(1, budget // max(1, T * T))
    for start in range(0, N, step):
        yield slice(start, min(N, start + step))


def _pair_counts(seqs: torch.Tensor, V: int) -> torch.Tensor:
    """(V, V) float64 counts of the bigrams of ``seqs`` (N, T + 1), [previous token, next token].

    >>> _pair_counts(torch.tensor([[0, 1, 1]]), 2).tolist()
    [[0.0, 1.0], [0.0, 1.0]]
    """
    x, y = seqs[:, :-1], seqs[:, 1:]
    return torch.bincount((x * V + y).reshape(-1), minlength=V * V).to(torch.float64).reshape(V, V)


def statistics(seqs, V: int, device=None) -> Stats:
    """B-bar, Sigma_B, Phi-bar, Q-bar and Delta of ``seqs`` (N, T + 1) over a vocabulary of V tokens,
    computed on ``device`` (default CPU; the |V|^3 products want a GPU at |V| = 10,000) and kept there."""
    seqs = _check_seqs(seqs, V).to(device or "cpu")
    x, y = seqs[:, :-1], seqs[:, 1:]
    N, T = x.shape
    NT = N * T
    dd = torch.float64
    dev = seqs.device
    pair = _pair_counts(seqs, V) / NT
    B = pair - pair.sum(1, keepdim=True) / V
    t_idx, m_idx, w = (a.to(dev) for a in _pairs(T))
    phi_p = torch.zeros(V * V, dtype=dd, device=dev)
    u_p = torch.zeros(V, dtype=dd, device=dev)
    for sl in _chunks(N, T):
        a, b = x[sl][:, m_idx], y[sl][:, t_idx]  # (n, pairs): prefix token x_m, target x_{t+1}
        ww = w.expand_as(a).reshape(-1)
        phi_p.index_add_(0, (a * V + b).reshape(-1), ww)
        u_p.index_add_(0, a.reshape(-1), ww)
    Phi = (phi_p.reshape(V, V) - u_p[:, None] / V).T / NT
    Sigma = B.T @ B
    G = Sigma @ Phi
    Gc = G - G.sum(0, keepdim=True) / V  # (Y - U) G X^T = Gc[y_t, x_m]
    Q = torch.zeros(V * V, dtype=dd, device=dev)
    Delta = torch.zeros(T, dtype=dd, device=dev)
    mask = torch.ones(T, T, dtype=torch.bool, device=dev).tril()
    counts = torch.arange(1, T + 1, dtype=dd, device=dev)[:, None]  # t + 1 unmasked keys in row t
    for sl in _chunks(N, T):
        xs, ys = x[sl], y[sl]
        g = Gc[ys[:, :, None], xs[:, None, :]].masked_fill(~mask, 0.0)  # (n, T, T)
        q = ((g - g.sum(2, keepdim=True) / counts) / counts).masked_fill(~mask, 0.0)
        Q.index_add_(0, (xs[:, :, None] * V + xs[:, None, :]).reshape(-1), q.reshape(-1))
        Delta.index_add_(0, (t_idx - m_idx), q[:, t_idx, m_idx].sum(0))
    return Stats(B, Sigma, Phi, Q.reshape(V, V) / NT, Delta / NT, N, T)


# --- Theorem 4.1 / D.6 / D.9: bounds and the range of steps where they are stated ---

# constants c_W_O, c_V, c_W (= c_P) of the deviation bounds c s^2 eta^2, c s^3 eta^3, c s^5 eta^5 T
BOUNDS = {
    "D.6 (one layer)": (3, 4, 6),
    "4.1 / D.9 (L layers)": (3, 12, 13),
}


def bound(name: str, s: int, eta: float, T: int, theorem: str = "4.1 / D.9 (L layers)") -> float:
    """The theorem's bound on ``||weight - leading term||_F`` after s steps."""
    config.check_choice("theorem", theorem, BOUNDS)
    config.check_choice("weight", name, WEIGHTS)
    c_o, c_v, c_w = BOUNDS[theorem]
    return {"W_O": c_o * s**2 * eta**2, "V": c_v * s**3 * eta**3}.get(name, c_w * s**5 * eta**5 * T)


def max_steps(eta: float, T: int, L: int) -> dict[str, float]:
    """The largest s each theorem covers: D.6 ``3 / (8 T^(3/8) eta)``; 4.1 / D.9 ``min(5/(8 sqrt T), 1/(12 L)) / eta``,
    with the conditions it also needs (T >= 60, L <= sqrt(T)/4) reported as met or not.

    >>> r = max_steps(0.005, 200, 3); round(r["4.1 / D.9 (L layers)"], 2), r["4.1 / D.9 conditions met"]
    (5.56, True)
    """
    config.check_float("eta", eta, 0.0, low_open=True)
    return {
        "D.6 (one layer)": 3 / (8 * T ** (3 / 8) * eta) if L == 1 else 0.0,
        "4.1 / D.9 (L layers)": min(5 / (8 * math.sqrt(T)), 1 / (12 * L)) / eta,
        "4.1 / D.9 conditions met": bool(T >= 60 and L <= math.sqrt(T) / 4),
    }


def softmax_jacobian_norm(z: torch.Tensor) -> torch.Tensor:
    """Operator norm of the Jacobian diag(p) - p p^T of the softmax at each row of ``z`` (..., i)."""
    p = torch.softmax(z.double(), dim=-1)
    J = torch.diag_embed(p) - p[..., :, None] * p[..., None, :]
    return torch.linalg.matrix_norm(J, ord=2)


def sigma_as_printed(seqs, V: int, device=None) -> torch.Tensor:
    """Eq. (10) as printed: P(e_i) P(e_j) sum_k P(e_k^<- | e_i) P(e_k^<- | e_j), with P(e_i) the relative
    frequency of e_i over all tokens of ``seqs`` (N, T + 1) and P(e_k^<- | e_i) that of the previous token e_k
    among the bigrams that end in e_i (a token that ends none gets a zero row). Without Eq. (9)'s centring this
    is the Gram matrix of the uncentred bigram frequencies, not B-bar^T B-bar (:func:`statistics`).

    >>> sigma_as_printed([[0, 1, 0, 1]], 2).tolist()  # P = (1/2, 1/2); 0 follows 1 and 1 follows 0, always
    [[0.25, 0.0], [0.0, 0.25]]
    """
    seqs = _check_seqs(seqs, V).to(device or "cpu")
    pair = _pair_counts(seqs, V)  # [previous, current]
    prev = pair / pair.sum(0, keepdim=True).clamp_min(1)  # column i: P(e_k^<- | e_i)
    freq = torch.bincount(seqs.reshape(-1), minlength=V).to(torch.float64) / seqs.numel()
    return freq[:, None] * freq[None, :] * (prev.T @ prev)


def top_overlap(a: torch.Tensor, b: torch.Tensor, k: int = 10) -> float:
    """Mean over rows of the share of a row's k largest entries in ``a`` that are among its k largest in ``b``
    (rows ranked as :func:`top_neighbours` ranks them, the diagonal included).

    >>> top_overlap(torch.eye(3), torch.eye(3), k=1), top_overlap(torch.eye(3), -torch.eye(3), k=1)
    (1.0, 0.0)
    """
    config.check_int("k", k, low=1, high=a.shape[1])
    ta, tb = (torch.topk(m, k, dim=1).indices for m in (a, b))
    return float((ta[:, :, None] == tb[:, None, :]).any(2).double().mean())


def eq10_check(seqs, V: int, Sigma: torch.Tensor, device=None, k: int = 10) -> dict[str, float]:
    """Eq. (10) as printed (:func:`sigma_as_printed`) beside ``Sigma`` = B-bar^T B-bar of the same ``seqs``:
    ``gap``, their relative Frobenius distance ||printed - Sigma|| / ||Sigma||; ``cos``, their cosine; ``top``,
    the share of each row's k largest entries they have in common (:func:`top_overlap`); and
    ``uncentred_gap``, the relative distance of the printed form from the Gram matrix of the uncentred bigram
    frequencies (what is left once Eq. (9)'s centring is dropped: the marginals' rounding)."""
    seqs = _check_seqs(seqs, V).to(device or "cpu")
    Sigma = torch.as_tensor(Sigma, dtype=torch.float64, device=seqs.device)
    printed = sigma_as_printed(seqs, V)
    pair = _pair_counts(seqs, V) / seqs[:, 1:].numel()
    gram = pair.T @ pair

    def rel(a, b):
        return float(torch.linalg.matrix_norm(a - b) / torch.linalg.matrix_norm(b))

    return {
        "gap": rel(printed, Sigma),
        "cos": cosine(printed, Sigma),
        "top": top_overlap(printed, Sigma, k),
        "uncentred_gap": rel(printed, gram),
    }


def top_neighbours(M: torch.Tensor, itos, word: str, k: int = 30) -> list[str]:
    """The k tokens with the largest entries in ``word``'s row of M (the public code's "top correlated")."""
    stoi = {w: i for i, w in enumerate(itos)}
    if word not in stoi:
        raise ValueError(f"{word!r} is not in the vocabulary of {len(itos)} tokens")
    order = torch.argsort(M[stoi[word]], descending=True)[:k]
    return [itos[int(j)] for j in order]


def neighbour_rank(M: torch.Tensor, itos, word: str, neighbour: str) -> int:
    """Rank (0 = largest) of ``neighbour`` in ``word``'s row of M."""
    stoi = {w: i for i, w in enumerate(itos)}
    for w in (word, neighbour):
        if w not in stoi:
            raise ValueError(f"{w!r} is not in the vocabulary of {len(itos)} tokens")
    row = M[stoi[word]]
    return int((row > row[stoi[neighbour]]).sum())
