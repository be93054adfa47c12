"""The k-fold composition task of the talk's k-hop result (Wang, Nichani, Bietti, Damian, Hsu, Lee, Wu, COLT 2025).

N values, k hops; hidden permutations pi_1..pi_k of [N], fixed by ``hidden_seed`` (the model must learn them);
per sequence, k in-context permutations sigma_1..sigma_k, uniform. A k'-hop example (1 <= k' <= k) asks for
f(x) = sigma_k' o pi_k' o ... o sigma_1 o pi_1 (x). The sequence is ``x`` then the tables of sigma_1..sigma_k',
each written as its N values in order (position 1 + (i - 1) N + a holds sigma_i(a)); the blocks after k' are
padding, masked out of attention. So T = 1 + k N, and a k'-hop example is the same format with fewer tables:
"the composition of every table shown", read at position 0. An example may start at a later table
(``starts``): its hops then compose the tables from there. Training and its data kinds are
:mod:`companion.experiments.khop`'s.

>>> t = KHopTask(N=4, k=2)
>>> b = t.sample(np.random.default_rng(0), np.array([1, 2]))
>>> b.tokens.shape, b.tokens[0, 5:].tolist(), bool(b.mask[1].all())
((2, 9), [4, 4, 4, 4], True)
>>> b = t.sample(np.random.default_rng(0), np.array([1]), starts=[2])
>>> b.mask[0].astype(int).tolist(), int(b.chain[0, 0]) == int(b.tokens[0, 0])
([1, 0, 0, 0, 0, 1, 1, 1, 1], True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from companion import config
from companion.config import check_int
from companion.data import counter


@dataclass(frozen=True)
class HopBatch:
    # (batch, 1 + k N): x, then the tables, padding (token N) at those an example does not use
    tokens: np.ndarray
    mask: np.ndarray  # (batch, 1 + k N) bool: True where a token is shown
    hops: np.ndarray  # (batch,) k' per example
    # (batch, k): the value after each table (it stays put at the tables an example does not use)
    chain: np.ndarray
    answer: np.ndarray  # (batch,): the value after k' hops


@dataclass(frozen=True)
class KHopTask:
    """The k-fold composition task; validated on construction (see the module docstring)."""

    N: int = 8
    k: int = 4
    hidden_seed: int = 0

    def __post_init__(self):
        check_int("N (values)", self.N, low=2)
        check_int("k (hops)", self.k, low=1)

    @property
    def seq_len(self) -> int:
        return 1 + self.k * self.N

    @property
    def pad(self) -> int:
        return self.N

    @property
    def last_table(self) -> slice:
        """The positions of table k (the last table) in a sequence."""
        return slice(1 + (self.k - 1) * self.N, self.seq_len)

    def hidden(self) -> np.ndarray:
        """(k, N): the hidden permutations pi_i (row i - 1), fixed by ``hidden_seed``."""
        rng = np.random.default_rng(config.seed_streams(self.hidden_seed, ["khop-hidden"])["khop-hidden"])
        return np.stack([rng.permutation(self.N) for _ in range(self.k)])

    def sample(self, rng: np.random.Generator, hops, starts=None) -> HopBatch:
        """One example per entry of ``hops`` (its k', each in 1..k). ``starts`` (default: all 1), per example,
        the first table its hops use: an example with k' hops from table s composes tables s..s + k' - 1 (s in
        1..k - k' + 1); the tables before and after are padding.

        Raises:
            ValueError: a hop count outside 1..k, or a start outside 1..k - k' + 1.
        """
        hops = np.asarray(hops, dtype=np.int64)
        self._check_hops(hops)
        n, N, k = len(hops), self.N, self.k
        first = self._starts(hops, starts)
        sigma = np.argsort(rng.random((n, k, N)), axis=-1)  # uniform permutations, one per hop and example
        x = rng.integers(0, N, n)
        pi = self.hidden()
        chain = np.empty((n, k), dtype=np.int64)
        v, rows = x.copy(), np.arange(n)
        for i in range(k):  # table i + 1 is used when first <= i + 1 < first + hops
            v = np.where((first <= i + 1) & (i + 1 < first + hops), sigma[rows, i, pi[i][v]], v)
            chain[:, i] = v
        block = np.concatenate([[0], np.repeat(np.arange(1, k + 1), N)])  # 0 for x, i for table i
        mask = (block[None, :] == 0) | (
            (block[None, :] >= first[:, None]) & (block[None, :] < (first + hops)[:, None])
        )
        tokens = np.where(mask, np.concatenate([x[:, None], sigma.reshape(n, k * N)], axis=1), self.pad)
        return HopBatch(tokens, mask, hops, chain, chain[:, -1])

    def _check_hops(self, hops: np.ndarray) -> None:
        if hops.ndim != 1 or len(hops) == 0 or hops.min() < 1 or hops.max() > self.k:
            bad = hops[(hops < 1) | (hops > self.k)] if hops.ndim == 1 else hops
            raise ValueError(
                f"hop counts {bad.tolist()[:5]} out of range: allowed 1..{self.k} (k = {self.k})"
            )

    def _starts(self, hops: np.ndarray, starts) -> np.ndarray:
        """The examples' first tables (default all 1), checked against their hop counts."""
        first = np.ones(len(hops), dtype=np.int64) if starts is None else np.asarray(starts, dtype=np.int64)
        if first.shape != hops.shape or first.min() < 1 or (first + hops - 1).max() > self.k:
            raise ValueError(
                f"starts {np.asarray(starts).tolist()[:5]} for hop counts {hops.tolist()[:5]}: allowed "
                f"one start per example, in 1..k - k' + 1 (k = {self.k})"
            )
        return first

    def draw(self, seeds, steps, hops, starts=None, *, stream: int = 0, device=None) -> HopBatch:
        """The counter-based batches of ``seeds`` (R) at ``steps`` (S) of ``stream`` on ``device``, one example
        per entry of ``hops`` (and ``starts``) as in :meth:`sample`: shape (batch,), the same in every batch, or
        (R, S, batch), each batch its own: a :class:`HopBatch` of tensors with leading dimensions (R, S), each
        batch a function of (seed, stream, step) and its hop counts alone (as
        :meth:`companion.data.recall.RecallTask.draw`). The tables are uniform permutations
        (``counter.permutations``), x uniform in [N].

        Raises:
            ValueError: as :meth:`sample`; hop counts of another shape; a negative seed or step, a stream out
                of range.
        """
        h = torch.as_tensor(hops).cpu().numpy().astype(np.int64)
        s = None if starts is None else torch.as_tensor(starts).cpu().numpy().astype(np.int64)
        if h.ndim == 0:
            raise ValueError("hops must hold one hop count per example")
        self._check_hops(h.reshape(-1))
        first = self._starts(h.reshape(-1), None if s is None else s.reshape(-1)).reshape(h.shape)
        N, k = self.N, self.k
        draws = counter.Draws("khop", seeds, steps, stream, h.shape[-1], device)
        if h.ndim > 1 and h.shape != draws.shape:
            raise ValueError(
                f"hops of shape {h.shape}: allowed (batch,) or (seeds, steps, batch) = {draws.shape}"
            )
        hops = h
        dev = draws.device
        sigma = counter.permutations(draws.bits("tables", 2 * k * N).reshape(*draws.shape, k, 2 * N))
        x = counter.uniform_int(draws.bits("x", 1)[..., 0], N)
        pi = torch.as_tensor(self.hidden(), device=dev)
        first_t, hops_t = torch.as_tensor(first, device=dev), torch.as_tensor(hops, device=dev)
        chain, v = [], x
        for i in range(k):  # table i + 1 is used when first <= i + 1 < first + hops
            step = sigma[..., i, :].gather(-1, pi[i][v][..., None]).squeeze(-1)
            v = torch.where((first_t <= i + 1) & (i + 1 < first_t + hops_t), step, v)
            chain.append(v)
        chain = torch.stack(chain, dim=-1)
        block = torch.cat(
            [torch.zeros(1, dtype=torch.int64), torch.arange(1, k + 1).repeat_interleave(N)]
        ).to(dev)
        mask = (block == 0) | ((block >= first_t[..., None]) & (block < (first_t + hops_t)[..., None]))
        mask = mask.expand(*draws.shape, -1)
        shown = torch.cat([x[..., None], sigma.reshape(*draws.shape, k * N)], dim=-1)
        tokens = torch.where(mask, shown, self.pad)
        return HopBatch(tokens, mask, hops_t.expand(draws.shape), chain, chain[..., -1])
