"""LASER (main paper, Section 2.2): replace a matrix by its best low-rank approximation.

A matrix W (d_out x d_in) kept at fraction ``rho`` becomes its rank
``k = floor(rho * min(d_in, d_out))`` truncated SVD, keeping the top singular
values (the Eckart-Young optimum). ``rho = 0`` removes the matrix (k = 0,
W -> 0); ``rho = 1`` keeps it unchanged. The SVD is computed once per matrix
(in float32, or float64 for float64 weights) and reused for every rho; the
original weights are always restored.

>>> W = torch.diag(torch.tensor([3.0, 2.0, 1.0]))
>>> LowRank(W).approx(rho=0.7).diag().tolist()  # k = floor(0.7 * 3) = 2
[3.0, 2.0, 0.0]
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterable, Iterator

import torch

from companion.config import check_float


def rank_for(rho: float, shape: tuple[int, int]) -> int:
    """floor(rho * min(shape)), with rho validated in [0, 1].

    >>> rank_for(0.05, (1024, 256))
    12
    """
    check_float("rho", rho, 0.0, 1.0)
    return int(math.floor(rho * min(shape) + 1e-9))


class LowRank:
    """One SVD of a matrix, and its truncations at any rank."""

    def __init__(self, W: torch.Tensor):
        if W.ndim != 2:
            raise ValueError(f"LASER needs a matrix, got a tensor of shape {tuple(W.shape)}")
        self.W = W.detach()
        work = self.W.double() if self.W.dtype == torch.float64 else self.W.float()
        self.U, self.S, self.Vh = torch.linalg.svd(work, full_matrices=False)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.W.shape)

    def approx_rank(self, k: int) -> torch.Tensor:
        """The rank-k truncation (the original matrix itself when k = min(shape))."""
        full = min(self.shape)
        if not 0 <= k <= full:
            raise ValueError(f"rank k={k} is out of range: allowed [0, {full}]")
        if k == full:
            return self.W.clone()
        out = (self.U[:, :k] * self.S[:k]) @ self.Vh[:k]
        return out.to(self.W.dtype)

    def approx(self, rho: float) -> torch.Tensor:
        return self.approx_rank(rank_for(rho, self.shape))


@contextmanager
def replaced(param: torch.nn.Parameter, value: torch.Tensor) -> Iterator[None]:
    """Temporarily set ``param``'s values to ``value``; restored exactly on exit."""
    if value.shape != param.shape:
        raise ValueError(f"replacement shape {tuple(value.shape)} != parameter shape {tuple(param.shape)}")
    original = param.detach().clone()
    with torch.no_grad():
        param.copy_(value)
    try:
        yield
    finally:
        with torch.no_grad():
            param.copy_(original)


@contextmanager
def truncated(model, name: str, rho: float) -> Iterator[None]:
    """Context in which ``model.matrix(name)`` is kept at fraction ``rho``."""
    rank_for(rho, (1, 1))  # validate before any work
    param = model.matrix(name)
    with replaced(param, LowRank(param).approx(rho)):
        yield


def sweep(model, name: str, rhos: Iterable[float]) -> Iterator[float]:
    """Yield each rho with ``model.matrix(name)`` truncated to it (one SVD in all).

    >>> from companion.models import ModelConfig, Transformer
    >>> m = Transformer(ModelConfig(vocab_size=5, d=8, max_len=4))
    >>> [int(torch.linalg.matrix_rank(m.matrix("F2.U_in"))) for _ in sweep(m, "F2.U_in", [0, 0.5, 1])]
    [0, 4, 8]
    """
    rhos = list(rhos)
    for rho in rhos:
        rank_for(rho, (1, 1))
    param = model.matrix(name)
    lr = LowRank(param)
    for rho in rhos:
        with replaced(param, lr.approx(rho)):
            yield rho


@contextmanager
def dropped(model, layer: int) -> Iterator[None]:
    """Context in which the feed-forward layer F_layer (1-based) outputs zero (restored on exit)."""
    ff = model.layers[layer - 1].ff if 1 <= layer <= len(model.layers) else None
    if ff is None:
        raise ValueError(f"layer={layer} is out of range: allowed [1, {len(model.layers)}]")
    params = list(ff.parameters())
    if not params:
        raise ValueError(f"F{layer} is 'none': there is nothing to drop")
    with _all_replaced([(p, torch.zeros_like(p)) for p in params]):
        yield


@contextmanager
def _all_replaced(pairs) -> Iterator[None]:
    if not pairs:
        yield
        return
    (param, value), rest = pairs[0], pairs[1:]
    with replaced(param, value), _all_replaced(rest):
        yield


def search(
    model,
    evaluate,
    rhos: Iterable[float],
    names: Iterable[str] | None = None,
    key: str = "loss",
    minimize: bool = True,
) -> list[dict]:
    """Evaluate every candidate truncation of a trained model, best first.

    Candidates: the full model; dropping each feed-forward layer; and every
    matrix in ``names`` (default: all learnable matrices) at every rho (one
    SVD per matrix). ``evaluate(model) -> dict`` gives the metrics; rows are
    sorted by ``key``.

    >>> from companion.models import ModelConfig, Transformer
    >>> m = Transformer(ModelConfig(vocab_size=5, d=4, max_len=3, ff=("mlp", "none")))
    >>> size = lambda m: {"loss": m.matrix("W_V^1").detach().abs().sum().item()}
    >>> [r["candidate"] for r in search(m, size, [0.0], names=["W_V^1"])]
    ['W_V^1 rho=0', 'full model', 'drop F1']
    """
    rhos = list(rhos)
    for rho in rhos:
        rank_for(rho, (1, 1))
    names = list(model.matrix_names() if names is None else names)
    for name in names:
        model.matrix(name)  # validate every name before any work
    rows = [{"candidate": "full model", "matrix": None, "rho": 1.0, **evaluate(model)}]
    for l, layer in enumerate(model.layers, start=1):
        if layer.ff.kind != "none":
            with dropped(model, l):
                rows.append({"candidate": f"drop F{l}", "matrix": f"F{l}", "rho": 0.0, **evaluate(model)})
    for name in names:
        for rho in sweep(model, name, rhos):
            rows.append({"candidate": f"{name} rho={rho:g}", "matrix": name, "rho": rho, **evaluate(model)})
    return sorted(rows, key=lambda r: r[key] if minimize else -r[key])
