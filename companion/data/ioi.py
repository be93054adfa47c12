"""Synthetic IOI (main paper, Appendix J): recall plus counting, with a noisy output.

Vocabulary [N + 1] as in :mod:`companion.data.recall` (N = 65 characters of
tiny Shakespeare, ``tau = N + 1`` the generic noise token, index ``N`` here).
For each sequence z_1 .. z_{T+1} with a fixed trigger q:

i.   draw a correct output ``ybar`` and a different distractor ``yD``;
ii.  draw three positions i_1 < i_2 < i_3 in [T - 2] at distance >= 2 from
     each other (so that the pairs [z_i, z_{i+1}] do not overlap);
iii. set z_{i_k} = q; one of the three following tokens (chosen uniformly)
     is ``ybar``, the other two are ``yD``: like the indirect object in IOI,
     the correct answer is the token that follows q *once*;
iv.  set z_T = q and z_{T+1} = ybar with probability 1 - alpha, tau with
     probability alpha;
v.   fill every other position uniformly from V \\ {q}.

Where Appendix J is silent, the choices are: ``ybar`` and ``yD`` are drawn
from [N] \\ {q} (a draw equal to q would add trigger occurrences); the fill
is uniform over V \\ {q}, which includes tau, exactly as step v reads
(``fill="no_noise"`` leaves tau out of the fill instead).

>>> task = IOITask(seq_len=12, alpha=0.5)
>>> b = task.sample(np.random.default_rng(0), batch=3)
>>> b.tokens.shape, bool((b.inputs == task.triggers[0]).sum(1).min() == 4)
((3, 13), True)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from companion.config import check_choice, check_float, check_int
from companion.data import counter
from companion.data.recall import Batch, marks
from companion.data.shakespeare import CharStats, load_char_stats

FILLS = ("uniform", "no_noise")


@dataclass(frozen=True)
class IOITask:
    """The Appendix J distribution; validated on construction.

    Args:
        seq_len: context length T (>= 7: three non-overlapping pairs and z_T).
        alpha: noise level in [0, 1).
        trigger: the trigger id q in [0, N); default the most frequent
            character (the space, as in :class:`~companion.data.recall.RecallTask`).
        fill: ``"uniform"`` (V \\ {q}, as step v reads) or ``"no_noise"`` ([N] \\ {q}).
    """

    seq_len: int = 256
    alpha: float = 0.5
    trigger: int | None = None
    fill: str = "uniform"
    stats: CharStats = field(default_factory=load_char_stats, repr=False, compare=False)

    def __post_init__(self):
        check_int("seq_len (T)", self.seq_len, low=7)
        check_float("alpha", self.alpha, 0.0, 1.0, high_open=True)
        check_choice("fill", self.fill, FILLS)
        if self.trigger is None:
            object.__setattr__(self, "trigger", int(np.argmax(self.stats.unigram)))
        check_int("trigger", self.trigger, low=0, high=self.n - 1)

    @property
    def n(self) -> int:
        return self.stats.n

    @property
    def vocab_size(self) -> int:
        return self.n + 1

    @property
    def noise_token(self) -> int:
        return self.n

    @property
    def triggers(self) -> tuple[int, ...]:
        return (self.trigger,)

    def with_alpha(self, alpha: float) -> "IOITask":
        return IOITask(self.seq_len, alpha, self.trigger, self.fill, self.stats)

    def sample(self, rng: np.random.Generator, batch: int) -> Batch:
        """Draw ``batch`` sequences of length T + 1 (vectorised; no per-token Python work)."""
        check_int("batch", batch, low=1)
        n, T, q = self.n, self.seq_len, self.trigger
        rows = np.arange(batch)[:, None]
        # i. ybar != yD, both in [N] \ {q}: draw in [N-1] and skip q
        ybar = rng.integers(0, n - 1, size=batch)
        yd = (ybar + rng.integers(1, n - 1, size=batch)) % (n - 1)
        ybar, yd = ybar + (ybar >= q), yd + (yd >= q)
        # ii. three 0-based positions in [0, T-3] with gaps >= 2: sorted distinct draws from
        # [0, T-5] shifted by (0, 1, 2) are exactly the sets with gaps >= 2, uniformly
        base = np.sort(rng.random((batch, T - 4)).argsort(axis=1)[:, :3], axis=1)
        pos = base + np.arange(3)
        # v. the fill (drawn first, then overwritten)
        n_fill = self.vocab_size - 1 if self.fill == "uniform" else n - 1
        z = rng.integers(0, n_fill, size=(batch, T + 1))
        z += z >= q
        # iii. the three pairs; which of the three is followed by ybar
        which = rng.integers(0, 3, size=batch)
        follow = np.where(np.arange(3) == which[:, None], ybar[:, None], yd[:, None])
        z[rows, pos] = q
        z[rows, pos + 1] = follow
        # iv. the final trigger and the (noisy) output
        z[:, T - 1] = q
        z[:, T] = np.where(rng.random(batch) < self.alpha, self.noise_token, ybar)
        inputs = z[:, :T]
        hit = inputs == q
        occurrence = hit * np.cumsum(hit, axis=1)
        mask = np.zeros((batch, T), dtype=bool)
        mask[:, -1] = True
        return Batch(z, ybar[:, None], ybar, occurrence, mask, distractor=yd)

    def draw(self, seeds, steps, batch: int, *, stream: int = 0, device=None) -> Batch:
        """The counter-based batches of ``seeds`` (R) at ``steps`` (S) of ``stream`` on ``device``: a
        :class:`~companion.data.recall.Batch` of tensors with leading dimensions (R, S), each batch a function of
        (seed, stream, step) alone (:meth:`~companion.data.recall.RecallTask.draw`). The same distribution as
        :meth:`sample`: the three positions are three draws without replacement from [0, T - 5], sorted."""
        n, T, q = self.n, self.seq_len, self.trigger
        draws = counter.Draws("ioi", seeds, steps, stream, batch, device)
        dev = draws.device
        out = draws.bits("outputs", 2)
        ybar = counter.uniform_int(out[..., 0], n - 1)
        yd = (ybar + 1 + counter.uniform_int(out[..., 1], n - 2)) % (n - 1)
        ybar, yd = ybar + (ybar >= q), yd + (yd >= q)
        equal = torch.ones(T - 4, dtype=torch.int64, device=dev)
        pos = counter.draw_distinct(equal, draws.bits("places", 3)).sort(-1).values + torch.arange(
            3, device=dev
        )
        n_fill = self.vocab_size - 1 if self.fill == "uniform" else n - 1
        z = counter.uniform_int(draws.bits("fill", T + 1), n_fill)
        z = z + (z >= q)
        which = counter.uniform_int(draws.bits("which", 1), 3)
        follow = torch.where(torch.arange(3, device=dev) == which, ybar[..., None], yd[..., None])
        z.scatter_(-1, pos, q)
        z.scatter_(-1, pos + 1, follow)
        z[..., T - 1] = q
        z[..., T] = torch.where(
            counter.below(draws.bits("noise", 1)[..., 0], self.alpha), self.noise_token, ybar
        )
        occurrence, mask, _ = marks(z[..., :T], torch.full_like(ybar[..., None], q), "final", False)
        return Batch(z, ybar[..., None], ybar, occurrence, mask, distractor=yd)
