"""A run's training batches by step, from the sampler in force (:func:`companion.config.sampler`).

``"numpy"``: the run's numpy Generator for the stream (``config.seed_streams(seed, [name])``), drawn in order: the
batches every recording so far was trained on. ``"counter"``: :mod:`companion.data.counter`'s batch of (seed,
stream, step), drawn on the run's device in blocks of steps. A training loop asks for the batch of each step in
turn (:meth:`TrainingStream.batch`); either way the same seed gives the same batches.

>>> from companion.data.recall import RecallTask
>>> task = RecallTask(seq_len=8)
>>> a = TrainingStream(3, "train-data", sampler="counter").batch(task, 4, step=5)
>>> b = TrainingStream(3, "train-data", sampler="counter", block=2).batch(task, 4, step=5)
>>> bool((a.tokens == b.tokens).all())
True
"""

from __future__ import annotations

import numpy as np
import torch

from companion import config
from companion.config import check_int
from companion.data import counter


class _InTurn:
    """The numpy sampler's guard: its draws come one after another (each depends on every draw before), so the
    index asked (a step, an epoch) must be the next one; the first asked starts the sequence when ``start`` is
    None, else it must be ``start``."""

    def __init__(self, what: str, start: int | None = None):
        self.what, self.next = what, start

    def take(self, index: int) -> None:
        if self.next is not None and index != self.next:
            raise ValueError(
                f"{self.what}={index}: the numpy sampler's draws come one after another, the next is {self.next}"
            )
        self.next = index + 1


class TrainingStream:
    """The training batches of one run's stream ``name`` (e.g. ``"train-data"``) from its ``seed``.

    Args:
        seed: the run's seed (at least 0).
        name: the stream's name.
        sampler: ``"numpy"`` or ``"counter"``; default the one in force (:func:`companion.config.sampler`).
        device: where the counter sampler draws (default the CPU); the numpy sampler draws on the CPU.
        block: the number of steps the counter sampler draws in one call.

    Raises:
        ValueError: a negative seed, an unknown sampler, a block below 1; at :meth:`batch`, a numpy stream asked
            for a step out of order (its batches depend on every draw before; the first step asked, for example
            the step a curriculum moves to a fresh stream, starts it).
    """

    def __init__(self, seed: int, name: str, *, sampler: str | None = None, device=None, block: int = 16):
        check_int("seed", seed, low=0)
        check_int("block", block, low=1)
        self.seed, self.name, self.block, self.device = seed, name, block, device
        self.sampler = config.sampler(sampler)
        self.rng = np.random.default_rng(config.seed_streams(seed, [name])[name])
        self._turn = _InTurn("step")  # the numpy sampler: the first step asked starts it
        self._drawn = None  # the counter sampler's last block: (task, batch, first step, Batch)

    def batch(self, task, batch: int, step: int):
        """The batch of ``step`` for ``task`` (``batch`` sequences): the task's ``sample`` from the numpy
        generator (steps in order), or its ``draw`` at that step."""
        check_int("step", step, low=0)
        if self.sampler == "numpy":
            self._turn.take(step)
            return task.sample(self.rng, batch)
        d = self._drawn
        if d is None or d[0] != task or d[1] != batch or not d[2] <= step < d[2] + self.block:
            steps = range(step, step + self.block)
            drawn = task.draw(
                [self.seed], steps, batch, stream=config.stream_key(self.name), device=self.device
            )
            self._drawn = d = (task, batch, step, drawn)
        return counter.select(d[3], (0, step - d[2]))


class EpochOrders:
    """The order in which each epoch of a run visits a training set of ``n`` examples (a shuffled minibatch
    SGD), from the sampler in force: under ``"numpy"`` (the generators every recording used) ``torch.randperm``
    from a CPU generator seeded with ``seed``, one epoch after another; under ``"counter"``
    :func:`companion.data.counter.orders` of (seed, stream ``name``, epoch), in any order.

    Raises:
        ValueError: a negative seed, n below 1, an unknown sampler; at :meth:`order`, a numpy order asked out of
            turn (each depends on the ones before).
    """

    def __init__(self, seed: int, name: str, n: int, *, sampler: str | None = None):
        check_int("seed", seed, low=0)
        check_int("n (examples)", n, low=1)
        self.seed, self.name, self.n = seed, name, n
        self.sampler = config.sampler(sampler)
        self.generator = torch.Generator().manual_seed(seed)
        self._turn = _InTurn("epoch", start=0)

    def order(self, epoch: int) -> torch.Tensor:
        """The permutation of [0, n) that epoch ``epoch`` visits the examples in (a CPU int64 tensor)."""
        check_int("epoch", epoch, low=0)
        if self.sampler == "numpy":
            self._turn.take(epoch)
            return torch.randperm(self.n, generator=self.generator)
        return counter.orders([self.seed], [epoch], self.n, stream=config.stream_key(self.name))[0, 0]
