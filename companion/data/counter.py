"""Counter-based random bits: the same integers on a CPU and a GPU, from (seed, stream, step) alone.

The numpy generators of :mod:`companion.data` draw a run's batches one after the other from one ``Generator``:
the batch at step s depends on every draw before it, and only a CPU can make it. A counter-based sampler
computes the random bits of step s directly as a hash of the run's seed, the stream, the step and each
element's index, with integer torch operations that give the same result on any device. So a run on a GPU and
the same run on a CPU see the same batches, a block of steps is drawn in one call, and a pack of replicas draws
each replica's batches from its own seed whatever its slot in the pack.

Everything here is exact integer arithmetic on ``int64`` tensors holding values in [0, 2^32): no product
reaches 2^63 (no signed overflow, :func:`_mul32`), and probabilities become
integer thresholds, computed once on the host in float64 (no float logarithm or comparison on the device).

* :func:`mix32` is the ``lowbias32`` integer hash (C. Wellons, "Prospecting for hash functions", 2018: two
  multiply-xorshift rounds, a bijection of the 32-bit integers).
* :func:`keys` turns (seed, stream, step, purpose) into a 64-bit key (two 32-bit words); :func:`bits` gives the
  32-bit draws of a key's elements 0, 1, ...: ``mix32(mix32(k1 ^ i) ^ k2)``.
* :func:`below`, :func:`uniform_int`, :func:`int_cdf` and :func:`choose` turn bits into events, integers and
  draws from a table.

>>> import torch
>>> k = keys(torch.tensor([7]), stream=0, steps=torch.tensor([0, 1]), purpose=1)
>>> b = bits(k, 3)
>>> b.shape, bool((b >= 0).all() and (b < 2**32).all()), bool(torch.equal(b, bits(k, 3)))
(torch.Size([1, 2, 3]), True, True)
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from companion.config import check_choice, check_int

M32 = (1 << 32) - 1
ONE = 1 << 32  # the integer that stands for probability 1 in a threshold or a table
# Salts that start the two words of a key (the fractional digits of the golden ratio and of sqrt(2), 32 bits)
_SALT = (0x9E3779B9, 0x6A09E667)
# What each kind of draw is for (the ``purpose`` of its keys), by owner: the draws of one owner share a run's
# (seed, stream, step), so two kinds of draw of one owner never share a number (tests/test_counter.py); a number
# once given is never changed (it would change every batch drawn with it). khop: KHopTask.draw's tables and x, and
# the training curriculum's hop counts and starts (companion.experiments.khop.HopTraining) on the same keys.
PURPOSES = {
    "order": {"order": 1},
    "recall": {"triggers": 1, "outputs": 2, "final": 3, "chain": 4},
    "bigram": {"chain": 4},
    "ioi": {"outputs": 1, "places": 2, "fill": 3, "which": 4, "noise": 5},
    "facts": {"noise": 1, "fact": 2, "places": 3},
    "khop": {"tables": 1, "x": 2, "hop counts": 3, "starts": 4},
    "seqclass": {"class": 1, "context": 2},
}


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2^32 for x in [0, 2^32) and a constant c in [0, 2^32), without a product at or above 2^63:
    for c >= 2^31, x c = x (c - 2^31) + x 2^31, and x 2^31 mod 2^32 is the lowest bit of x, shifted."""
    if c < 1 << 31:
        return (x * c) & M32
    return (x * (c - (1 << 31)) + ((x & 1) << 31)) & M32


def mix32(x: torch.Tensor) -> torch.Tensor:
    """The ``lowbias32`` hash of each element (values in [0, 2^32), int64).

    >>> mix32(torch.tensor([0, 1, 2**32 - 1])).tolist()
    [0, 1753845952, 1734902346]
    """
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def integers(value, name: str, device=None) -> torch.Tensor:
    """``value`` (integers at least 0: a list, an array, a range, a tensor) as a 1-D int64 tensor on ``device``.

    Raises:
        ValueError: not integers, or a negative one.
    """
    t = torch.as_tensor(value, device=device)
    if t.numel() == 0:  # an empty list has no integer dtype of its own
        t = t.to(torch.int64)
    if t.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        raise ValueError(f"{name} must be integers, got dtype {t.dtype}")
    t = t.to(torch.int64).reshape(-1)
    if bool((t < 0).any()):
        raise ValueError(f"{name} must be at least 0, got {t.min().item()}")
    return t


def _words(value, name: str, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Integers in [0, 2^63) as their low and high 32-bit words (int64 tensors)."""
    t = integers(value, name, device)
    return t & M32, t >> 32


def keys(seeds, stream: int, steps, purpose: int, device=None) -> torch.Tensor:
    """The 64-bit keys of (seed, stream, step, purpose): a tensor of shape (len(seeds), len(steps), 2), the
    two 32-bit words of each, on ``device``.

    ``seeds`` and ``steps`` are integers at least 0 (a seed below 2^63, a step below 2^32), ``stream`` and
    ``purpose`` integers in [0, 2^32): a run's seed, which of its streams (training data, a test set, ...), the
    step, and what the bits are for (one purpose per kind of draw of a task).

    Raises:
        ValueError: a negative seed or step, a step at or above 2^32, a stream or purpose out of range.
    """
    check_int("stream", stream, low=0, high=M32)
    check_int("purpose", purpose, low=0, high=M32)
    s_lo, s_hi = _words(seeds, "seeds", device)
    t_lo, t_hi = _words(steps, "steps", device)
    if bool((t_hi > 0).any()):
        raise ValueError(f"steps must be below 2^32, got {int(t_lo.max() + (t_hi.max() << 32))}")
    s_lo, s_hi, t_lo = s_lo.reshape(-1, 1), s_hi.reshape(-1, 1), t_lo.reshape(1, -1)
    out = []
    for salt in _SALT:
        h = mix32(s_lo ^ salt)
        h = mix32(h ^ s_hi)
        h = mix32(h ^ stream)
        h = mix32(h ^ purpose)
        out.append(mix32(h ^ t_lo))
    return torch.stack(torch.broadcast_tensors(*out), dim=-1)


def bits(k: torch.Tensor, n: int) -> torch.Tensor:
    """32-bit draws (int64 in [0, 2^32)) for elements 0 .. n - 1 of each key of ``k`` (shape (..., 2)): shape
    (..., n). Element i of key (k1, k2) is ``mix32(mix32(k1 ^ i) ^ k2)``."""
    check_int("n (elements per key)", n, low=0, high=M32 + 1)
    i = torch.arange(n, device=k.device, dtype=torch.int64)
    return mix32(mix32(k[..., :1] ^ i) ^ k[..., 1:])


def threshold(p: float) -> int:
    """The integer that an event of probability ``p`` (in [0, 1]) compares 32-bit draws with: round(p 2^32)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"probability must be in [0, 1], got {p}")
    return int(round(p * ONE))


def below(b: torch.Tensor, p: float) -> torch.Tensor:
    """Events of probability ``p`` (up to 2^-33): the draws below :func:`threshold` (p)."""
    return b < threshold(p)


def uniform_int(b: torch.Tensor, n: int) -> torch.Tensor:
    """Integers uniform in [0, n) from 32-bit draws: floor(b n / 2^32), exact for n below 2^31 (each value has
    probability within 2^-32 of 1/n)."""
    check_int("n", n, low=1, high=(1 << 31) - 1)
    return (b * n) >> 32


def int_cdf(probs: np.ndarray) -> np.ndarray:
    """Each row of a table of probabilities as an integer CDF: int64, non-decreasing, the last entry 2^32, and
    a zero-probability entry never chosen by :func:`choose`. Computed on the host in float64, once.

    >>> int_cdf(np.array([[0.25, 0.0, 0.75]])).tolist()
    [[1073741824, 1073741824, 4294967296]]
    """
    p = np.atleast_2d(np.asarray(probs, dtype=np.float64))
    if (p < 0).any():
        raise ValueError("a probability table has a negative entry")
    c = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    out = np.minimum(np.round(c * ONE), ONE).astype(np.int64)
    out[:, -1] = ONE
    return out


def flat_cdf(table: np.ndarray, device=None) -> torch.Tensor:
    """The rows of :func:`int_cdf` (table) laid end to end, row r offset by r 2^32: one sorted vector, so that
    :func:`choose` draws from any row with a single search (values below 2^39 for up to 128 rows)."""
    c = int_cdf(table)
    return torch.as_tensor(c + (np.arange(c.shape[0], dtype=np.int64) << 32)[:, None], device=device).ravel()


def choose(flat: torch.Tensor, width: int, row: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Column drawn from each ``row`` of a :func:`flat_cdf` table (``width`` columns) with 32-bit draws ``b``:
    the first column whose CDF exceeds the draw (inverse-CDF sampling)."""
    return torch.searchsorted(flat, (row << 32) + b, right=True) - row * width


def permutations(b: torch.Tensor) -> torch.Tensor:
    """Uniform random permutations of the last dimension's n positions from 2 n 32-bit draws (..., 2 n): the
    positions sorted by 63-bit keys (two draws each), so that a tie (probability below n^2 2^-64) is all
    that separates them from exactly uniform."""
    n = b.shape[-1] // 2
    key = (b[..., :n] << 31) | (b[..., n:] >> 1)
    return torch.argsort(key, dim=-1, stable=True)


def orders(seeds, epochs, n: int, *, stream: int = 0, device=None) -> torch.Tensor:
    """The order in which each epoch visits a training set of ``n`` examples (a shuffle, as ``torch.randperm``
    with a seeded generator gives one): uniform permutations of [0, n), shape (len(seeds), len(epochs), n), the
    order of (seed, stream, epoch) a function of those three alone.

    >>> o = orders([0], [0, 1], 5)
    >>> sorted(o[0, 1].tolist()), bool(torch.equal(o[0, 1], orders([0], [1], 5)[0, 0]))
    ([0, 1, 2, 3, 4], True)
    """
    check_int("n (examples)", n, low=1, high=M32 // 2)
    return permutations(Draws("order", seeds, epochs, stream, 1, device).bits("order", 2 * n))[..., 0, :]


def integer_weights(p: np.ndarray, scale_bits: int = 24) -> np.ndarray:
    """Positive probabilities as integer weights summing to about 2^scale_bits (each at least 1), for draws
    without replacement (:func:`draw_distinct`)."""
    p = np.asarray(p, dtype=np.float64)
    if (p <= 0).any():
        raise ValueError("draws without replacement need positive probabilities")
    return np.maximum(np.round(p / p.sum() * (1 << scale_bits)), 1).astype(np.int64)


def draw_distinct(weights: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Indices drawn without replacement, each next one with probability proportional to its integer weight
    among those not yet drawn: ``weights`` (P,) int64 (sum below 2^25), ``b`` (..., K) 32-bit draws, one per
    draw; returns (..., K) int64. The integer counterpart of Gumbel top-K keys (the numpy generators'),
    without a logarithm."""
    if int(weights.sum()) >= 1 << 25:
        raise ValueError(f"weights sum to {int(weights.sum())}: at most 2^25 - 1")
    w = weights.expand(*b.shape[:-1], weights.shape[0]).clone()
    out = []
    for j in range(b.shape[-1]):
        c = w.cumsum(-1)
        r = ((b[..., j : j + 1] >> 8) * c[..., -1:]) >> 24  # uniform in [0, remaining total)
        pick = (c <= r).sum(-1, keepdim=True)
        w.scatter_(-1, pick, 0)
        out.append(pick)
    return torch.cat(out, dim=-1)


def select(batch, index):
    """A batch of any task (a dataclass of arrays) with every array indexed by ``index`` along its leading
    dimensions (a field that is None stays None): one replica's one step of a ``draw``."""
    values = {f.name: getattr(batch, f.name) for f in dataclasses.fields(batch)}
    return type(batch)(**{k: None if v is None else v[index] for k, v in values.items()})


class Draws:
    """The counter-based draws of one call of a task's ``draw`` by ``owner`` (a key of :data:`PURPOSES`): R
    ``seeds``, S ``steps`` of ``stream``, ``batch`` examples each, on ``device`` (default the CPU);
    ``bits(kind, m)`` gives m 32-bit draws per example, shape (R, S, batch, m), from the keys of the owner's
    purpose ``kind``.

    Raises:
        ValueError: an unknown owner (at :meth:`bits`, an unknown kind), a batch below 1, no seed or step, a
            negative seed or step, a stream out of range.
    """

    def __init__(self, owner: str, seeds, steps, stream: int, batch: int, device=None):
        check_choice("owner", owner, tuple(PURPOSES))
        check_int("batch", batch, low=1)
        self.device = torch.device("cpu") if device is None else torch.device(device)
        self.seeds, self.steps = integers(seeds, "seeds"), integers(steps, "steps")
        if not len(self.seeds) or not len(self.steps):
            raise ValueError(
                f"a draw needs a seed and a step at least, got {len(self.seeds)} and {len(self.steps)}"
            )
        keys(self.seeds[:1], stream, self.steps[:1], 0)  # the stream checked now, before any draw
        self.owner, self.stream, self.batch = owner, stream, batch
        self.shape = (len(self.seeds), len(self.steps), batch)

    def bits(self, kind: str, m: int) -> torch.Tensor:
        check_choice(f"{self.owner} draw", kind, tuple(PURPOSES[self.owner]))
        k = keys(self.seeds, self.stream, self.steps, PURPOSES[self.owner][kind], device=self.device)
        return bits(k, self.batch * m).reshape(*self.shape, m)
