"""Sequence classes of *Scan and Snap* (Tian et al., NeurIPS 2023, Sec. 3.1).

A sequence class n fixes the last token m = psi(n), the next token (the label)
and the distribution P(l | n) of the T - 1 contextual tokens, drawn i.i.d.
A contextual token l is *distinct* if one class alone uses it (|Omega(l)| = 1)
and *common* otherwise.

:func:`synthetic` builds the layout of the authors' public code (``Dataset2``
in ``luckmatters/ssl/real-dataset/decoder_only.py``): ``num_common`` global
common tokens first, then ``num_common_per_last`` tokens common within each
last-token group, then ``num_unique_per_next`` distinct tokens per class with
weights ``linspace(unique_min, unique_max)``, then the last tokens and the next
tokens as their own vocabulary entries; each class is drawn uniformly.

>>> sc = synthetic(num_last=2, num_next_per_last=1)   # Syn-Small
>>> sc.n_classes, sc.vocab_size, sc.probs[0, :10].round(4).tolist()[:2]
(2, 34, [0.0645, 0.0645])
>>> sc.distinct_tokens(0).tolist()[:3], sc.common_tokens().tolist()[:3]
([10, 11, 12], [0, 1, 2])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from companion.config import check_float, check_int
from companion.data import counter


@dataclass(frozen=True, eq=False)
class SeqClasses:
    """``probs[n, l]`` = P(l | n) (rows sum to one), ``last[n]`` = psi(n) and ``next_token[n]``, over a
    vocabulary of ``vocab_size`` = M tokens. ``distinct`` (optional) names each class's distinct tokens as
    the specification intends them; it is checked against ``probs``.

    Raises:
        ValueError: a probability is negative or a row does not sum to one; K > M; a last or next token is
            outside [0, M); two classes share a next token; a token is declared distinct for two classes,
            or declared distinct while another class uses it.
    """

    probs: np.ndarray
    last: np.ndarray
    next_token: np.ndarray
    vocab_size: int
    distinct: tuple | None = None

    def __post_init__(self):
        p = np.asarray(self.probs, dtype=np.float64)
        check_int("vocab_size (M)", self.vocab_size, low=1)
        M = self.vocab_size
        if p.ndim != 2 or p.shape[1] != M:
            raise ValueError(f"probs must have shape (K, M) = (K, {M}), got {p.shape}")
        K = p.shape[0]
        if K < 1 or K > M:
            raise ValueError(f"the number of classes K={K} is out of range: allowed [1, M] = [1, {M}]")
        if (p < 0).any() or not np.isfinite(p).all():
            n, l = np.argwhere(~(p >= 0))[0]
            raise ValueError(f"P(l={l} | n={n}) = {p[n, l]!r} is out of range: allowed [0, 1]")
        sums = p.sum(1)
        bad = np.nonzero(np.abs(sums - 1) > 1e-6)[0]
        if len(bad):
            raise ValueError(f"P(. | n={bad[0]}) sums to {sums[bad[0]]:.6g}, not 1")
        for name in ("last", "next_token"):
            v = np.asarray(getattr(self, name))
            if v.shape != (K,):
                raise ValueError(f"{name} must have one entry per class ({K}), got shape {v.shape}")
            if ((v < 0) | (v >= M)).any():
                raise ValueError(f"{name}={v[(v < 0) | (v >= M)][0]} is out of range: allowed [0, {M - 1}]")
        if len(set(np.asarray(self.next_token).tolist())) != K:
            raise ValueError(
                f"two classes share a next token: next_token={np.asarray(self.next_token).tolist()}"
            )
        if self.distinct is not None:
            if len(self.distinct) != K:
                raise ValueError(f"distinct must list the distinct tokens of each of the {K} classes")
            owner: dict[int, int] = {}
            for n, toks in enumerate(self.distinct):
                for l in toks:
                    if l in owner:
                        raise ValueError(
                            f"token {l} is declared distinct for two classes ({owner[l]} and {n})"
                        )
                    owner[l] = n
                    others = [k for k in np.nonzero(p[:, l] > 0)[0] if k != n]
                    if others:
                        raise ValueError(
                            f"token {l} is declared distinct for class {n} but class {others[0]} "
                            f"uses it (P = {p[others[0], l]:.4g})"
                        )
        object.__setattr__(self, "probs", p)
        object.__setattr__(self, "last", np.asarray(self.last, dtype=np.int64))
        object.__setattr__(self, "next_token", np.asarray(self.next_token, dtype=np.int64))

    @property
    def n_classes(self) -> int:
        return self.probs.shape[0]

    def omega(self) -> np.ndarray:
        """|Omega(l)|: the number of classes whose contextual tokens include l."""
        return (self.probs > 0).sum(0)

    def distinct_tokens(self, n: int) -> np.ndarray:
        """The tokens that class n alone uses (|Omega(l)| = 1 and P(l | n) > 0)."""
        return np.nonzero((self.probs[n] > 0) & (self.omega() == 1))[0]

    def common_tokens(self) -> np.ndarray:
        """The tokens used by more than one class (|Omega(l)| > 1)."""
        return np.nonzero(self.omega() > 1)[0]

    def sample(self, rng: np.random.Generator, batch: int, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
        """``(tokens, labels)``: ``tokens`` (batch, T) holds T - 1 contextual tokens and the last token; the
        class of each sequence is uniform."""
        check_int("batch", batch, low=1)
        check_int("seq_len (T)", seq_len, low=2)
        cls = rng.integers(0, self.n_classes, batch)
        cdf = np.cumsum(self.probs, 1)
        u = rng.random((batch, seq_len - 1))
        ctx = np.minimum((u[:, :, None] > cdf[cls][:, None, :]).sum(-1), self.vocab_size - 1)
        return np.concatenate([ctx, self.last[cls][:, None]], 1), self.next_token[cls]

    def sample_counts(
        self, rng: np.random.Generator, batch: int, seq_len: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(cls, counts)``: the class of each sequence and the counts (batch, M) of its T - 1 contextual
        tokens, the same distribution as :meth:`sample` (no positional encoding: the model sees counts only)."""
        check_int("batch", batch, low=1)
        check_int("seq_len (T)", seq_len, low=2)
        cls = rng.integers(0, self.n_classes, batch)
        return cls, rng.multinomial(seq_len - 1, self.probs[cls])

    def draw(
        self, seeds, steps, batch: int, seq_len: int, *, stream: int = 0, device=None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(tokens, labels)`` as :meth:`sample`, counter-based: the batches of ``seeds`` (R) at ``steps`` (S)
        of ``stream`` on ``device``, with leading dimensions (R, S), each a function of (seed, stream, step)
        alone (as :meth:`companion.data.recall.RecallTask.draw`)."""
        cls, ctx = self._draw(seeds, steps, batch, seq_len, stream, device)
        last = torch.as_tensor(self.last, device=ctx.device)[cls]
        return torch.cat([ctx, last[..., None]], -1), torch.as_tensor(self.next_token, device=ctx.device)[cls]

    def draw_counts(
        self, seeds, steps, batch: int, seq_len: int, *, stream: int = 0, device=None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cls, counts)`` as :meth:`sample_counts`, counter-based: the counts of :meth:`draw`'s contextual
        tokens (the same draws), shape (R, S, batch, M)."""
        cls, ctx = self._draw(seeds, steps, batch, seq_len, stream, device)
        counts = torch.zeros((*ctx.shape[:-1], self.vocab_size), dtype=torch.int64, device=ctx.device)
        return cls, counts.scatter_add_(-1, ctx, torch.ones_like(ctx))

    def _draw(self, seeds, steps, batch: int, seq_len: int, stream: int, device):
        check_int("seq_len (T)", seq_len, low=2)
        draws = counter.Draws("seqclass", seeds, steps, stream, batch, device)
        cls = counter.uniform_int(draws.bits("class", 1)[..., 0], self.n_classes)
        u = draws.bits("context", seq_len - 1)
        rows = cls[..., None].expand_as(u)
        ctx = counter.choose(counter.flat_cdf(self.probs, draws.device), self.vocab_size, rows, u)
        return cls, ctx


@dataclass(frozen=True)
class CountBatch:
    """Sequences as their classes ``cls`` and contextual-token counts ``counts`` (numpy arrays or tensors)."""

    cls: np.ndarray
    counts: np.ndarray


@dataclass(frozen=True)
class CountTask:
    """The sequence classes as a task of count vectors of length ``seq_len``, drawn as a training stream draws a
    task (:class:`companion.data.streams.TrainingStream`): ``sample`` from a numpy generator, ``draw`` counter-
    based."""

    classes: SeqClasses
    seq_len: int

    def sample(self, rng: np.random.Generator, batch: int) -> CountBatch:
        return CountBatch(*self.classes.sample_counts(rng, batch, self.seq_len))

    def draw(self, seeds, steps, batch: int, *, stream: int = 0, device=None) -> CountBatch:
        return CountBatch(
            *self.classes.draw_counts(seeds, steps, batch, self.seq_len, stream=stream, device=device)
        )


def synthetic(
    num_last: int = 1,
    num_next_per_last: int = 2,
    num_common: int = 10,
    num_common_per_last: int = 0,
    num_unique_per_next: int = 10,
    common_weight: float = 1.0,
    unique_min: float = 0.1,
    unique_max: float = 1.0,
) -> SeqClasses:
    """The layout of the public code's ``Dataset2`` (see the module docstring); K = num_last *
    num_next_per_last classes, M = num_common + num_common_per_last * num_last + num_unique_per_next * K
    + num_last + K tokens. Syn-Small is ``synthetic(2, 1)``, Syn-Medium ``synthetic(num_last, 2)``."""
    check_int("num_last", num_last, low=1)
    check_int("num_next_per_last", num_next_per_last, low=1)
    check_int("num_common", num_common, low=0)
    check_int("num_common_per_last", num_common_per_last, low=0)
    check_int("num_unique_per_next", num_unique_per_next, low=1)
    check_float("common_weight", common_weight, low=0, low_open=True)
    check_float("unique_min", unique_min, low=0, low_open=True)
    check_float("unique_max", unique_max, low=unique_min)
    K = num_last * num_next_per_last
    per_last0 = num_common
    unique0 = per_last0 + num_common_per_last * num_last
    last0 = unique0 + num_unique_per_next * K
    next0 = last0 + num_last
    M = next0 + K
    probs = np.zeros((K, M))
    last = np.zeros(K, dtype=np.int64)
    distinct = []
    for n in range(K):
        m = n // num_next_per_last
        probs[n, :num_common] = common_weight
        probs[n, per_last0 + m * num_common_per_last : per_last0 + (m + 1) * num_common_per_last] = (
            common_weight
        )
        uniq = range(unique0 + n * num_unique_per_next, unique0 + (n + 1) * num_unique_per_next)
        probs[n, list(uniq)] = np.linspace(unique_min, unique_max, num_unique_per_next)
        distinct.append(tuple(uniq))
        last[n] = last0 + m
    return SeqClasses(
        probs / probs.sum(1, keepdims=True), last, np.arange(next0, next0 + K), M, tuple(distinct)
    )
