"""Noisy in-context recall (main paper, Section 3 "Data and task"; Appendix B.4).

Vocabulary: the N = 65 characters of tiny Shakespeare plus, by default, a new
generic noise token ``tau = N + 1`` (index ``N`` here, ids being 0-based).
For each sequence:

i.   draw the correct outputs ``ybar_k`` uniformly in [N], one per trigger q_k;
ii.  draw z_1 ~ pi_u, then z_{t+1} ~ pi_b(. | z_t) unless z_t is a trigger q_k,
     in which case z_{t+1} = ybar_k with probability 1 - alpha and tau with
     probability alpha;
iii. set z_T to a trigger (the only one when K = 1) and draw y = z_{T+1} the
     same way.

Options that the paper and its public code choose differently:

* ``noise="new"`` (paper): tau is a new token N+1; after tau the chain restarts
  from pi_u (the paper does not say; tau has no bigram row).
  ``noise="existing"`` (public code): tau is the existing character ``'!'``.
* ``triggers``: default the K most frequent characters, i.e. the space for
  K = 1; this is the public code's choice and also Fig. 9's ``q = 1``.
* ``trigger_draw="fixed"``: every sequence uses the same triggers.
  ``trigger_draw="unigram"`` (Birth of a Transformer's default, the talk:
  "random triggers with pi_q = pi_u"; the public code's
  ``fixed_special_toks=False``): each sequence draws its K triggers afresh,
  distinct, from the unigram pi_u restricted to the pool ``triggers`` (default
  every ordinary token, less the noise token when alpha > 0).
* ``loss_on="final"`` (paper): only the prediction of z_{T+1} at position T
  carries the loss. ``loss_on="triggers"`` (public code): every position
  holding the second or a later occurrence of a trigger in the sequence
  (``Batch.recall_positions``: with a forced final trigger, not the position
  before it, whose target is that trigger and not an output).
  ``loss_on="all"``: every position (Birth of a Transformer's full models,
  the talk: the bigram loss elsewhere plus the in-context loss).
  ``loss_on="final_recall"``: position T only, and only when z_T is the second
  or a later occurrence of its trigger, so that the correct output is in the
  context (the "three gradient steps" of the talk: one loss position per
  sequence, its target uniform).
* ``final_trigger=True`` (paper): step iii. ``False`` (both public codes,
  leichen2018/ATTN_vs_MLP and albietz/transformer-birth): no step iii, the last
  input follows the chain like any other; only ``loss_on="triggers"`` or
  ``"all"`` can train on such sequences.

Generation is vectorised over the batch: one numpy Generator, T steps of
array operations, no per-token Python work.

>>> task = RecallTask(seq_len=16, alpha=0.5)
>>> b = task.sample(np.random.default_rng(0), batch=4)
>>> b.tokens.shape, b.targets.shape, int(b.inputs[0, -1]) == task.triggers[0]
((4, 17), (4, 16), True)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch

from companion.config import check_choice, check_float, check_int
from companion.data import counter
from companion.data.shakespeare import CharStats, load_char_stats

NOISE_KINDS = ("new", "existing")
LOSS_POSITIONS = ("final", "triggers", "all", "final_recall")
TRIGGER_DRAWS = ("fixed", "unigram")
EXISTING_NOISE_CHAR = "!"


def _unforced(where: np.ndarray, forced: np.ndarray | None) -> np.ndarray:
    """``where`` less the position whose target is the forced final trigger (``Batch.forced``), if any."""
    return where if forced is None else where & ~forced


def marks(inputs, trig, loss_on: str, final_trigger: bool):
    """(occurrence, loss_mask, forced) of a batch's ``inputs`` (..., T) with triggers ``trig`` (..., K): numpy
    arrays or torch tensors alike (the numpy generator's and the counter sampler's batches share the rules)."""
    T = inputs.shape[-1]
    occurrence = 0
    for k in range(trig.shape[-1]):
        hit = inputs == trig[..., k : k + 1]
        occurrence = occurrence + hit * hit.cumsum(-1)
    t = (inputs == inputs).cumsum(-1)  # 1-based positions, in the arrays' own library
    forced = (t == T - 1) if final_trigger else None  # the target of z_{T-1} is the forced final trigger
    if loss_on == "final":
        mask = t == T
    elif loss_on == "all":
        mask = t > 0
    elif loss_on == "final_recall":
        mask = (t == T) & (occurrence >= 2)
    else:  # "triggers": the recall positions (Batch.recall_positions), never the forced one
        mask = _unforced(occurrence >= 2, forced)
    return occurrence, mask, forced


@dataclass(frozen=True)
class Batch:
    """One batch of sequences.

    Attributes:
        tokens: (batch, T + 1) int64, z_1 .. z_{T+1}; inputs are ``tokens[:, :T]``.
        ybar: (batch, K) the correct output of each trigger.
        final_ybar: (batch,) the correct output for the final trigger z_T.
        occurrence: (batch, T) k >= 1 if z_t is the k-th occurrence of its
            trigger in the sequence, else 0.
        loss_mask: (batch, T) bool, positions whose next-token prediction
            carries the loss.
        distractor: (batch,) the distractor y^D of synthetic IOI, else None.
        triggers: (batch, K) each sequence's triggers (column k goes with ``ybar[:, k]``), else None.
        forced: (batch, T) bool, True at the position before the final trigger (z_{T-1}, 1-based), whose
            target is the forced final trigger z_T: neither a bigram draw nor, when z_{T-1} is itself a
            trigger, its output; None for tasks without a forced final trigger.
    """

    tokens: np.ndarray
    ybar: np.ndarray
    final_ybar: np.ndarray
    occurrence: np.ndarray
    loss_mask: np.ndarray
    distractor: np.ndarray | None = None  # (batch,) synthetic IOI only (Appendix J)
    triggers: np.ndarray | None = None  # (batch, K) recall tasks only
    forced: np.ndarray | None = None  # (batch, T) recall tasks only

    @property
    def recall_positions(self) -> np.ndarray:
        """(batch, T) bool: the in-context recall positions, second and later trigger occurrences whose
        target is the trigger's output (or the noise token after it): the ``forced`` position is not one."""
        return self._unforced(self.occurrence >= 2)

    @property
    def bigram_positions(self) -> np.ndarray:
        """(batch, T) bool: positions holding no trigger whose target is a bigram draw (not ``forced``)."""
        return self._unforced(self.occurrence == 0)

    def _unforced(self, where: np.ndarray) -> np.ndarray:
        return _unforced(where, self.forced)

    @property
    def inputs(self) -> np.ndarray:  # (batch, T)
        return self.tokens[..., :-1]

    @property
    def targets(self) -> np.ndarray:  # (batch, T), next tokens
        return self.tokens[..., 1:]


@dataclass(frozen=True)
class RecallTask:
    """The data distribution; validated on construction.

    Args:
        seq_len: context length T (>= 4).
        alpha: noise level in [0, 1).
        triggers: trigger token ids (distinct, in [0, N)); default the
            ``n_triggers`` most frequent characters. With ``trigger_draw="unigram"``
            the pool each sequence draws its triggers from; default every
            ordinary token (less the noise token when alpha > 0).
        n_triggers: K, used when ``triggers`` is not given (fixed), or the
            number drawn per sequence (unigram).
        noise: ``"new"`` (token N+1, paper) or ``"existing"`` (``'!'``, public code).
        loss_on: ``"final"`` (paper), ``"triggers"`` (public code), ``"all"`` or ``"final_recall"``.
        trigger_draw: ``"fixed"`` or ``"unigram"`` (random triggers per sequence).
        final_trigger: True (the main paper): the last input z_T is forced to be a trigger, and the target
            of the position before it is that trigger (``Batch.forced``). False (the Birth paper's public
            code): the last input follows the chain like any other; ``final_ybar`` is then only the output
            of a trigger drawn at random. ``loss_on="final"`` and ``"final_recall"`` need True.
    """

    seq_len: int = 256
    alpha: float = 0.5
    triggers: tuple[int, ...] | None = None
    n_triggers: int = 1
    noise: str = "new"
    loss_on: str = "final"
    trigger_draw: str = "fixed"
    final_trigger: bool = True
    stats: CharStats = field(default_factory=load_char_stats, repr=False, compare=False)

    def __post_init__(self):
        check_int("seq_len (T)", self.seq_len, low=4)
        check_float("alpha", self.alpha, 0.0, 1.0, high_open=True)
        check_choice("noise kind", self.noise, NOISE_KINDS)
        check_choice("loss_on", self.loss_on, LOSS_POSITIONS)
        check_choice("trigger_draw", self.trigger_draw, TRIGGER_DRAWS)
        if not isinstance(self.final_trigger, bool):
            raise ValueError(f"final_trigger must be True or False, got {self.final_trigger!r}")
        if not self.final_trigger and self.loss_on in ("final", "final_recall"):
            raise ValueError(
                f"loss_on={self.loss_on!r} predicts after the final trigger: it needs "
                "final_trigger=True (allowed loss_on without it: 'triggers', 'all')"
            )
        n = self.stats.n
        if self.trigger_draw == "unigram":
            pool = range(n) if self.triggers is None else self.triggers
            if self.triggers is None and self.alpha > 0:
                pool = [q for q in pool if q != self.noise_token]
            pool = tuple(int(q) for q in pool)
            for q in pool:
                check_int("trigger", q, low=0, high=n - 1)
            if len(set(pool)) != len(pool):
                raise ValueError(f"triggers {pool} contain duplicates: each trigger must be distinct")
            check_int("n_triggers (K, drawn per sequence)", self.n_triggers, low=1, high=len(pool))
            object.__setattr__(self, "triggers", pool)
        elif self.triggers is None:
            check_int("n_triggers", self.n_triggers, low=1, high=n)
            order = np.argsort(-self.stats.unigram, kind="stable")
            object.__setattr__(self, "triggers", tuple(int(i) for i in order[: self.n_triggers]))
        else:
            trig = tuple(self.triggers)
            if len(trig) == 0:
                raise ValueError("triggers is empty: give at least one trigger id")
            for q in trig:
                check_int("trigger", q, low=0, high=n - 1)
            if len(set(trig)) != len(trig):
                raise ValueError(f"triggers {trig} contain duplicates: each trigger must be distinct")
            object.__setattr__(self, "triggers", tuple(int(q) for q in trig))
            object.__setattr__(self, "n_triggers", len(trig))
        if self.noise_token in self.triggers and (self.alpha > 0 or self.trigger_draw == "fixed"):
            raise ValueError(f"trigger {self.noise_token} is the noise token: choose another trigger")

    # --- vocabulary ---
    @property
    def n(self) -> int:
        """N, the number of ordinary tokens."""
        return self.stats.n

    @property
    def vocab_size(self) -> int:
        return self.n + 1 if self.noise == "new" else self.n

    @property
    def fixed_triggers(self) -> tuple[int, ...]:
        """The triggers of every sequence: all of ``triggers`` when fixed, none when drawn per sequence (then
        ``triggers`` is only the pool)."""
        return self.triggers if self.trigger_draw == "fixed" else ()

    @property
    def noise_token(self) -> int:
        return self.n if self.noise == "new" else self.stats.itos.index(EXISTING_NOISE_CHAR)

    def with_alpha(self, alpha: float) -> "RecallTask":
        return dataclasses.replace(self, alpha=alpha)

    @cached_property
    def _flat_cdf(self) -> np.ndarray:
        """Row-offset cumulative transition table for vectorised inverse-CDF sampling."""
        rows = self.stats.bigram
        if self.noise == "new":  # after tau, restart from the unigram distribution
            rows = np.vstack([rows, self.stats.unigram])
        cdf = np.cumsum(rows, axis=1)
        cdf[:, -1] = 1.0
        return (cdf + np.arange(rows.shape[0])[:, None]).ravel()

    # --- sampling ---
    def sample(self, rng: np.random.Generator, batch: int) -> Batch:
        """Draw ``batch`` sequences of length T + 1 (a fixed number of draws per batch)."""
        check_int("batch", batch, low=1)
        n, T, K = self.n, self.seq_len, self.n_triggers
        rows = np.arange(batch)
        trig = self._draw_triggers(rng, batch)  # (batch, K)
        # trig_index[b, i] = k if token i is trigger k of b
        trig_index = np.full((batch, self.vocab_size), -1)
        trig_index[rows[:, None], trig] = np.arange(K)
        flat = self._flat_cdf

        ybar = rng.integers(0, n, size=(batch, K))
        final_k = rng.integers(0, K, size=batch)
        u_first = rng.random(batch)
        u = rng.random((T, batch))  # bigram draws
        noisy = rng.random((T, batch)) < self.alpha  # noise draws after triggers

        z = np.empty((batch, T + 1), dtype=np.int64)
        z[:, 0] = np.searchsorted(np.cumsum(self.stats.unigram), u_first, side="right").clip(max=n - 1)
        final_trig = trig[rows, final_k]
        if T == 1 and self.final_trigger:
            z[:, 0] = final_trig
        for t in range(T):
            cur = z[:, t]
            nxt = np.searchsorted(flat, cur + u[t], side="right") - cur * n
            k = trig_index[rows, cur]
            after_trigger = np.where(noisy[t], self.noise_token, ybar[rows, np.maximum(k, 0)])
            nxt = np.where(k >= 0, after_trigger, nxt)
            if t + 1 == T - 1 and self.final_trigger:  # z_T is the final trigger (over a trigger's output)
                nxt = final_trig
            z[:, t + 1] = nxt

        occurrence, mask, forced = marks(z[:, :T], trig, self.loss_on, self.final_trigger)
        return Batch(z, ybar, ybar[rows, final_k], occurrence, mask, triggers=trig, forced=forced)

    def draw(self, seeds, steps, batch: int, *, stream: int = 0, device=None) -> Batch:
        """The counter-based batches of ``seeds`` (R run seeds) at ``steps`` (S steps) of ``stream``, drawn in
        one call on ``device``: a :class:`Batch` of torch tensors with leading dimensions (R, S)
        (``counter.select(batch, (r, s))`` gives one). The batch of (seed, stream, step) is a function of those three alone
        (:mod:`companion.data.counter`): the same tokens on any device, in any block of steps and any pack of
        seeds. The same distribution as :meth:`sample` (the specification, which the tests compare it with), up
        to the 2^-32 resolution of the integer thresholds and tables; not the same draws.

        Raises:
            ValueError: a batch below 1, a negative seed or step, a stream out of range.
        """
        n, T, K, V = self.n, self.seq_len, self.n_triggers, self.vocab_size
        draws = counter.Draws("recall", seeds, steps, stream, batch, device)
        R, S, B = draws.shape
        if self.trigger_draw == "fixed":
            trig = torch.as_tensor(self.triggers, device=draws.device).expand(R, S, B, K)
        else:
            pool = torch.as_tensor(self.triggers, device=draws.device)
            weights = torch.as_tensor(counter.integer_weights(self.stats.unigram[list(self.triggers)]))
            trig = pool[counter.draw_distinct(weights.to(draws.device), draws.bits("triggers", K))]
        ybar = counter.uniform_int(draws.bits("outputs", K), n)
        final_k = counter.uniform_int(draws.bits("final", 1), K)
        final_trig = trig.gather(-1, final_k).reshape(-1)
        # One draw per token: the first token's, then at each step the bigram draw, or, after a trigger (where
        # the bigram draw is not used), the noise event: the draw below alpha's threshold
        u = draws.bits("chain", T + 1).reshape(-1, T + 1)
        noise_below = counter.threshold(self.alpha)
        flat_ybar, flat_trig = ybar.reshape(-1, K), trig.reshape(-1, K)
        lut = (
            flat_trig[:1] if self.trigger_draw == "fixed" else flat_trig
        )  # one row when every sequence shares it
        trig_index = torch.full((lut.shape[0], V), -1, device=draws.device, dtype=torch.int64)
        trig_index.scatter_(1, lut, torch.arange(K, device=draws.device).expand_as(lut))
        table = (
            self.stats.bigram
            if self.noise == "existing"
            else np.vstack([self.stats.bigram, self.stats.unigram])
        )
        chain = counter.flat_cdf(table, draws.device)
        first = counter.flat_cdf(self.stats.unigram, draws.device)

        z = torch.empty((flat_trig.shape[0], T + 1), dtype=torch.int64, device=draws.device)
        z[:, 0] = counter.choose(first, n, torch.zeros_like(u[:, 0]), u[:, 0])
        for t in range(T):
            cur, b = z[:, t], u[:, t + 1]
            nxt = counter.choose(chain, n, cur, b)
            k = trig_index[0][cur] if len(lut) == 1 else trig_index.gather(1, cur[:, None]).squeeze(1)
            out = flat_ybar.gather(1, k.clamp(min=0)[:, None]).squeeze(1)
            nxt = torch.where(k >= 0, torch.where(b < noise_below, self.noise_token, out), nxt)
            if t + 1 == T - 1 and self.final_trigger:  # z_T is the final trigger (over a trigger's output)
                nxt = final_trig
            z[:, t + 1] = nxt
        z = z.reshape(R, S, B, T + 1)
        occurrence, mask, forced = marks(z[..., :T], trig, self.loss_on, self.final_trigger)
        final_ybar = ybar.gather(-1, final_k).squeeze(-1)
        return Batch(z, ybar, final_ybar, occurrence, mask, triggers=trig, forced=forced)

    def _draw_triggers(self, rng: np.random.Generator, batch: int) -> np.ndarray:
        """(batch, K) trigger ids: the fixed triggers in every row, or K distinct draws per row from pi_u
        restricted to the pool (Gumbel top-K: without replacement, each next draw proportional to pi_u)."""
        pool = np.asarray(self.triggers)
        if self.trigger_draw == "fixed":
            return np.broadcast_to(pool, (batch, len(pool)))
        keys = np.log(self.stats.unigram[pool]) + rng.gumbel(size=(batch, len(pool)))
        return pool[np.argsort(-keys, axis=1, kind="stable")[:, : self.n_triggers]]


def batches(task: RecallTask, rng: np.random.Generator, batch: int):
    """An endless stream of batches from one generator."""
    while True:
        yield task.sample(rng, batch)


@dataclass(frozen=True)
class BigramTask:
    """Sequences of the bigram chain alone (z_1 ~ pi_u, z_{t+1} ~ pi_b(. | z_t)), loss at every position.

    The purely distributional task of the parameter-allocation experiment
    (main paper, Appendix A, Fig. 6: "approximating the global bigram pi_b").

    >>> task = BigramTask(seq_len=8)
    >>> b = task.sample(np.random.default_rng(0), batch=2)
    >>> b.tokens.shape, bool(b.loss_mask.all()), bool(0 < task.entropy() < np.log(task.vocab_size))
    ((2, 9), True, True)
    """

    seq_len: int = 256
    stats: CharStats = field(default_factory=load_char_stats, repr=False, compare=False)

    def __post_init__(self):
        check_int("seq_len (T)", self.seq_len, low=1)

    @property
    def vocab_size(self) -> int:
        return self.stats.n

    @cached_property
    def _flat_cdf(self) -> np.ndarray:
        cdf = np.cumsum(self.stats.bigram, axis=1)
        cdf[:, -1] = 1.0
        return (cdf + np.arange(self.stats.n)[:, None]).ravel()

    def sample(self, rng: np.random.Generator, batch: int) -> Batch:
        check_int("batch", batch, low=1)
        n, T = self.stats.n, self.seq_len
        z = np.empty((batch, T + 1), dtype=np.int64)
        z[:, 0] = np.searchsorted(np.cumsum(self.stats.unigram), rng.random(batch), side="right").clip(
            max=n - 1
        )
        u = rng.random((T, batch))
        for t in range(T):
            cur = z[:, t]
            z[:, t + 1] = np.searchsorted(self._flat_cdf, cur + u[t], side="right") - cur * n
        return Batch(
            z,
            np.zeros((batch, 0), dtype=np.int64),
            z[:, -1],
            np.zeros((batch, T), dtype=np.int64),
            np.ones((batch, T), dtype=bool),
        )

    def draw(self, seeds, steps, batch: int, *, stream: int = 0, device=None) -> Batch:
        """The counter-based batches of ``seeds`` at ``steps`` of ``stream`` on ``device``, leading dimensions
        (R, S): as :meth:`RecallTask.draw`, for the bigram chain alone."""
        n, T = self.stats.n, self.seq_len
        draws = counter.Draws("bigram", seeds, steps, stream, batch, device)
        u = draws.bits("chain", T + 1).reshape(-1, T + 1)
        chain = counter.flat_cdf(self.stats.bigram, draws.device)
        z = torch.empty_like(u)
        z[:, 0] = counter.choose(
            counter.flat_cdf(self.stats.unigram, draws.device), n, torch.zeros_like(u[:, 0]), u[:, 0]
        )
        for t in range(T):
            z[:, t + 1] = counter.choose(chain, n, z[:, t], u[:, t + 1])
        z = z.reshape(*draws.shape, T + 1)
        empty = z[..., :0]
        return Batch(
            z,
            empty,
            z[..., -1],
            torch.zeros_like(z[..., :-1]),
            torch.ones_like(z[..., :-1], dtype=torch.bool),
        )

    def entropy(self) -> float:
        """The smallest expected loss: mean over positions t of H(z_{t+1} | z_t), in nats."""
        P = self.stats.bigram
        row_h = -(P * np.log(np.where(P > 0, P, 1.0))).sum(1)  # H(pi_b(. | i))
        marginal, total = self.stats.unigram.copy(), 0.0
        for _ in range(self.seq_len):
            total += marginal @ row_h
            marginal = marginal @ P
        return float(total / self.seq_len)
