"""Task generators and corpus loaders (seeded numpy Generators, vectorised).

The numpy generators are the specification of every task. :mod:`companion.data.counter` holds the counter-based
sampling (issue 54): a batch as a function of (seed, stream, step) alone, in integer torch operations that give the
same tokens on a CPU and a GPU. Every task has it (the ``draw`` of the recall, bigram, synthetic IOI,
factual-recall and k-hop tasks and of the sequence classes; ``counter.orders`` for an epoch's order of a word
corpus's windows), tested against the numpy generators' statistics. Training still draws from the numpy
generators (and the epochs' orders from ``torch.randperm``): the switch, which changes every recorded number,
comes after the flip list of issue 54.

:data:`SAMPLER_VERSION` names the way training batches are drawn from a run's seed: a change that draws other
batches from the same seed (another generator, batches drawn on the device) raises it, and recordings made before
no longer match (``tests/test_recorded.py`` recomputes each recording's first training batch).
"""

from __future__ import annotations

import hashlib

import numpy as np

from companion import config

SAMPLER_VERSIONS = config.SAMPLER_VERSIONS  # config.SAMPLERS -> the version recordings store
SAMPLER_VERSION = SAMPLER_VERSIONS["numpy"]  # the numpy generators'; sampler_version() gives the one in force


def sampler_version() -> int:
    """The version of the sampler in force (:func:`companion.config.sampler`): 1 for the numpy generators, 2 for
    the counter-based samplers."""
    return config.sampler_version()


def batch_digest(batch) -> str:
    """A short sha256 of a batch: every array among its fields (a dataclass, a dict or a tuple), in order, with
    its dtype and shape.

    >>> batch_digest({"x": np.arange(3)}) == batch_digest({"x": np.arange(3)}) != batch_digest({"x": np.arange(4)})
    True
    """
    if isinstance(batch, dict):
        parts = list(batch.values())
    elif isinstance(batch, (tuple, list)):
        parts = list(batch)
    else:
        parts = list(vars(batch).values())
    h = hashlib.sha256()
    for a in parts:
        if hasattr(a, "detach"):  # a tensor
            a = a.detach().cpu().numpy()
        if isinstance(a, np.ndarray):
            h.update(f"{a.dtype}{a.shape}".encode())
            h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]
