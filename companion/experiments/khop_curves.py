"""What a k-hop run's curves say: when each hop count was learned, when a curriculum run moved to its last
stage (k hops), how it ended there, and whether it got there at all.

Each reader takes a run as the training returns it and a recording keeps it (:func:`companion.experiments.khop_members.curves`):
``"step"`` (the evaluation steps), ``"acc"`` ((evaluations, k) test accuracy at each hop count) and ``"stage"``
(the curriculum stage at each evaluation: 0 for a mixture, k for a direct run). They compute nothing else, so the
chapters, the studies' readers and the scripts over the recordings (``scripts/flip_list.py``,
``benchmarks/khop_subjects.py``) share one reading of a run.
"""

from __future__ import annotations

import math

import numpy as np

from companion.config import check_float


def short_of_last_stage(stages: dict[str, list], config: dict) -> list[str]:
    """The curriculum runs of a recording (its ``stage`` curves, {run: the stage at each evaluation}; its
    ``config``, {run: configuration} or one configuration for all) that ended before their last stage, k hops:
    runs that a study of the last stage cannot be about. A mixture (stage 0) or a direct run (stage k
    throughout) is never short.

    >>> short_of_last_stage({"a": [1, 2, 3], "b": [1, 2, 4], "c": [0, 0], "d": [4, 4]}, {"k": 4})
    ['a']
    >>> short_of_last_stage({"a": [1, 2], "b": [1, 2]}, {"a": {"k": 2}, "b": {"k": 4}})
    ['b']
    """
    per_run = all(isinstance(v, dict) for v in config.values())
    return [
        n
        for n, st in stages.items()
        if st and min(st) >= 1 and max(st) < (config[n] if per_run else config)["k"]
    ]


def learned_at(r: dict, level: float = 0.9) -> np.ndarray:
    """(k,): the first evaluation step at which the test accuracy at each hop count reaches ``level`` (inf if
    never)."""
    acc = np.asarray(r["acc"])
    out = np.full(acc.shape[1], np.inf)
    for h in range(acc.shape[1]):
        hit = np.flatnonzero(acc[:, h] >= level)
        if len(hit):
            out[h] = r["step"][hit[0]]
    return out


def last_stage_at(r: dict) -> float:
    """The evaluation step at which a curriculum run moved to its last stage (k hops; training on it starts
    right after), 0 for a run that starts there, inf if it never gets there.

    >>> last_stage_at({"step": np.array([0, 100, 200]), "stage": np.array([1, 1, 2]), "acc": np.zeros((3, 2))})
    100.0
    >>> last_stage_at({"step": np.array([0, 100]), "stage": np.array([1, 1]), "acc": np.zeros((2, 2))})
    inf
    """
    first = np.flatnonzero(np.asarray(r["stage"]) == np.asarray(r["acc"]).shape[1])
    return float(np.asarray(r["step"])[max(first[0] - 1, 0)]) if len(first) else math.inf


OUTCOMES = ("short of its last stage", "stalled on its last stage", "learned", "between")


def last_stage_outcome(r: dict, level: float = 0.9, stall: float = 0.5) -> str:
    """How a curriculum run ended (:data:`OUTCOMES`): it never moved to its last stage (k hops); it moved and
    its k-hop test accuracy never reached ``stall``; its k-hop accuracy reached ``level`` and is there at the
    end; or another course (it passed ``stall`` without ending at ``level``).

    >>> acc = np.array([[0.1, 0.1], [1.0, 0.2], [1.0, 0.95]])
    >>> last_stage_outcome({"step": np.array([0, 100, 200]), "stage": np.array([1, 2, 2]), "acc": acc})
    'learned'
    >>> last_stage_outcome({"step": np.array([0, 100, 200]), "stage": np.array([1, 1, 1]), "acc": acc * 0.5})
    'short of its last stage'
    >>> last_stage_outcome({"step": np.array([0, 100, 200]), "stage": np.array([1, 2, 2]), "acc": acc * 0.4})
    'stalled on its last stage'
    >>> last_stage_outcome({"step": np.array([0, 100, 200]), "stage": np.array([1, 2, 2]), "acc": acc * 0.8})
    'between'

    Raises:
        ValueError: ``stall`` or ``level`` outside (0, 1], or ``stall`` above ``level``.
    """
    check_float("level", level, 0.0, 1.0, low_open=True)
    check_float("stall", stall, 0.0, level, low_open=True)
    if math.isinf(last_stage_at(r)):
        return OUTCOMES[0]
    at_k = np.asarray(r["acc"])[np.asarray(r["stage"]) == np.asarray(r["acc"]).shape[1], -1]
    if at_k.max() < stall:
        return OUTCOMES[1]
    return OUTCOMES[2] if at_k[-1] >= level else OUTCOMES[3]


def last_stage_wait(r: dict, level: float = 0.9) -> float:
    """The steps a run trains on its last stage before its k-hop accuracy first reaches ``level`` (inf: never).

    >>> last_stage_wait({"step": np.array([0, 100, 200]), "stage": np.array([1, 2, 2]),
    ...                  "acc": np.array([[0.1, 0.1], [0.95, 0.2], [1.0, 0.95]])})
    200.0
    """
    at = float(learned_at(r, level)[-1])
    return at - last_stage_at(r) if np.isfinite(at) else math.inf


def learned_cells(r: dict, level: float) -> tuple[str, str]:
    """A run's table cells: the step each hop count is first learned (``-`` never) and the final accuracies."""
    at = ", ".join("-" if not np.isfinite(s) else str(int(s)) for s in learned_at(r, level))
    return at, ", ".join(f"{a:.2f}" for a in np.asarray(r["acc"])[-1])
