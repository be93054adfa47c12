"""The attention-only transformer in one-hot token space (the leading-terms paper, Definition 3.1).

With ``X`` (T, |V|) the one-hot input and ``h^(0) = X``, for l = 1..L::

    h^(l) = h^(l-1) + S(Mask(h^(l-1) W^(l) h^(l-1)^T + DM(P^(l)))) h^(l-1) V^(l)
    F     = h^(L) W_O

``W^(l)`` (key-query, |V| x |V|: rows index the query token, columns the key
token), ``V^(l)`` and ``W_O`` are |V| x |V|; ``P^(l)`` is a vector of T
relative-position logits, ``DM(P)[t, m] = P[t - m]`` for ``m <= t`` (entry
0 on the diagonal, entry i on the i-th sub-diagonal); the mask keeps
``m <= t``. The loss is the cross-entropy averaged over all N T positions
(Eq. 3).

>>> import math, torch
>>> m = AttnOnly(AttnOnlyConfig(V=5, T=4, L=2))
>>> x = torch.tensor([[0, 1, 2, 3, 4]])
>>> round(m.loss(x).item(), 6) == round(math.log(5), 6)  # zero init: uniform prediction
True
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from companion import config

INITS = ("zero", "gaussian")


@dataclass(frozen=True)
class AttnOnlyConfig:
    """Vocabulary size V, context T, depth L; ``init="gaussian"`` draws N(0, std^2) (Theorem D.12:
    std = v / |V|^(1 + xi))."""

    V: int = 256
    T: int = 32
    L: int = 1
    init: str = "zero"
    init_std: float = 0.0

    def __post_init__(self):
        config.check_int("V", self.V, 2)
        config.check_int("T", self.T, 1)
        config.check_int("L", self.L, 1)
        config.check_choice("init", self.init, INITS)
        config.check_float("init_std", self.init_std, 0.0)


class AttnOnly(torch.nn.Module):
    """Parameters ``W`` (L, V, V), ``Vv`` (L, V, V) (the value matrices), ``P`` (L, T), ``W_O`` (V, V)."""

    def __init__(
        self,
        cfg: AttnOnlyConfig,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
    ):
        super().__init__()
        self.cfg = cfg
        V, T, L = cfg.V, cfg.T, cfg.L

        def param(*shape):
            p = torch.zeros(*shape, dtype=dtype)
            if cfg.init == "gaussian" and cfg.init_std > 0:
                p.normal_(0.0, cfg.init_std, generator=generator)
            return torch.nn.Parameter(p)

        # draw order fixed: W_O, then per layer W, V, P (so one seed gives one model)
        self.W_O = param(V, V)
        self.W = param(L, V, V)
        self.Vv = param(L, V, V)
        self.P = param(L, T)
        t = torch.arange(T)
        self.register_buffer("offset", (t[:, None] - t[None, :]).clamp(min=0), persistent=False)  # (T, T)
        self.register_buffer("causal", t[:, None] >= t[None, :], persistent=False)  # (T, T)

    def attention(self, h: torch.Tensor, layer: int, x: torch.Tensor | None = None) -> torch.Tensor:
        """Attention pattern (B, T, T) of ``layer`` (0-based) on the residual stream ``h`` (B, T, V).

        ``x`` (B, T) token ids, when ``h`` is their one-hot matrix (the first layer): the scores are
        then read off W by indexing instead of two dense products.
        """
        W = self.W[layer]
        if x is not None:
            scores = W[x[:, :, None], x[:, None, :]]  # (B, T, T): W[x_t, x_m]
        else:
            scores = h @ W @ h.transpose(1, 2)
        T = h.shape[1]
        scores = scores + self.P[layer][self.offset[:T, :T]]
        scores = scores.masked_fill(~self.causal[:T, :T], float("-inf"))
        return torch.softmax(scores, dim=-1)

    def forward(self, x: torch.Tensor, return_stream: bool = False):
        """Logits F (B, T, V) of token ids ``x`` (B, T); with ``return_stream`` also [h^(0), ..., h^(L)]."""
        h = torch.nn.functional.one_hot(x, self.cfg.V).to(self.W_O.dtype)  # (B, T, V)
        stream = [h]
        for layer in range(self.cfg.L):
            A = self.attention(h, layer, x if layer == 0 else None)
            hv = self.Vv[layer][x] if layer == 0 else h @ self.Vv[layer]  # (B, T, V)
            h = h + A @ hv
            stream.append(h)
        F = h @ self.W_O
        return (F, stream) if return_stream else F

    def loss(self, seqs: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy over all positions (Eq. 3) of sequences ``seqs`` (B, T + 1)."""
        F = self(seqs[:, :-1])
        return torch.nn.functional.cross_entropy(F.reshape(-1, F.shape[-1]), seqs[:, 1:].reshape(-1))

    def weights(self) -> dict[str, torch.Tensor]:
        """Named matrices: ``W_O``, and ``W1``, ``V1``, ``P1``, ... per layer (1-based, as in the paper)."""
        out = {"W_O": self.W_O}
        for l in range(self.cfg.L):
            out |= {f"W{l + 1}": self.W[l], f"V{l + 1}": self.Vv[l], f"P{l + 1}": self.P[l]}
        return out
