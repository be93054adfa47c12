"""Which positions push the random-trigger model's second-layer logits of the keys after an earlier occurrence of
the query's token (book/induction_random, Birth Section 4.2): the pair gradient, split by key (one of the token's
likeliest successors or another) and by query position (a trigger seen before or another token), and the same split
at each evaluation of the run's late window (the parts of ``ih.random_ambiguity``'s balance gap). The model and its
measures at repeated triggers are :mod:`companion.experiments.induction_random`'s."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from companion import config, report
from companion.config import check_int
from companion.experiments.induction import BIGRAM_TOP, InductionRun, likely_pairs
from companion.train import late_mask


def after_earlier(x: torch.Tensor) -> torch.Tensor:
    """(batch, T, T) bool: [i, t, s] when s <= t and z_{s-1} = z_t, the keys that follow an earlier occurrence
    of the query's token (for a trigger q, the keys that hold its output o)."""
    prev = torch.cat([torch.full_like(x[:, :1], -1), x[:, :-1]], 1)  # z_{s-1}
    T = x.shape[1]
    return (prev[:, None, :] == x[:, :, None]) & torch.ones(T, T, dtype=torch.bool, device=x.device).tril()


# keys after an earlier q that hold one of q's BIGRAM_TOP likeliest successors, or not
KEY_KINDS = ("likely", "other")


# positions of a trigger seen before (target o), of another token seen before
QUERY_PARTS = ("trigger", "non-trigger")


def pair_masks(likely: torch.Tensor, b) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """For a batch ``b`` of :class:`RecallTask` sequences and ``likely`` (:func:`companion.experiments.induction.likely_pairs`): the keys
    s <= t that follow an earlier occurrence of z_t, split by :data:`KEY_KINDS` (batch, T, T), and the query
    positions whose token occurred before, split by :data:`QUERY_PARTS` (batch, T)."""
    x = torch.as_tensor(b.inputs)
    N = likely.shape[0]
    keys = after_earlier(x)
    xs = x.clamp(max=N - 1)
    holds = likely[xs[:, :, None], xs[:, None, :]] & (x[:, :, None] < N) & (x[:, None, :] < N)
    seen = keys.any(-1)  # z_t occurred before t
    trig = (x[..., None] == torch.as_tensor(b.triggers)[:, None, :]).any(-1)
    return {"likely": keys & holds, "other": keys & ~holds}, {
        "trigger": seen & trig,
        "non-trigger": seen & ~trig,
    }


def pair_gradient(r: InductionRun, n_seq: int = 2048, chunk: int = 256) -> dict:
    """Which positions push the second layer's logits of the keys that follow an earlier occurrence of the
    query's token up, and which down: the derivative of the training loss (summed over positions, per
    sequence) with respect to a shift delta added to those logits, for keys holding one of the query token's
    :data:`companion.experiments.induction.BIGRAM_TOP` likeliest bigram successors (``likely``) and for the others (``other``), split by
    query position: a trigger of the sequence seen before (its target is the trigger's output) or any other
    token seen before (its target is a bigram draw); in a task with a forced final trigger (``Batch.forced``)
    the position before it is in the loss too, counted by its token. Positions whose token did not occur before
    have no such keys, so the two parts add up to the whole derivative (``net``); negative pushes the logits up.
    ``balance``: -non-trigger / trigger, the share of the triggers' push up that the other positions undo.
    Measured on ``n_seq`` fresh sequences (stream "pair-gradient" of the run's seed)."""
    exp = r.exp
    if len(exp.ff) != 2:
        raise ValueError(f"pair_gradient needs two layers (the shift is in the second); got ff={exp.ff}")
    check_int("n_seq", n_seq, low=1)
    check_int("chunk", chunk, low=1)
    model = r.model()
    model.requires_grad_(False)
    task = exp.task()
    likely = likely_pairs(task)
    rng = np.random.default_rng(config.seed_streams(exp.seed, ["pair-gradient"])["pair-gradient"])
    grad = {(k, p): 0.0 for k in KEY_KINDS for p in QUERY_PARTS}
    for start in range(0, n_seq, chunk):
        b = task.sample(rng, min(chunk, n_seq - start))
        x, y = torch.as_tensor(b.inputs), torch.as_tensor(b.targets)
        masks, parts = pair_masks(likely, b)
        deltas = {k: torch.zeros((), requires_grad=True) for k in KEY_KINDS}
        with torch.enable_grad():
            logits = model(x, score_bias=sum(deltas[k] * masks[k] for k in KEY_KINDS))
            nll = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view_as(y)
            for part, where in parts.items():
                gs = torch.autograd.grad(nll[where].sum(), [deltas[k] for k in KEY_KINDS], retain_graph=True)
                for k, g in zip(KEY_KINDS, gs):
                    grad[k, part] += float(g)
    out = {k: {p: grad[k, p] / n_seq for p in QUERY_PARTS} for k in KEY_KINDS}
    for k in KEY_KINDS:
        out[k]["net"] = out[k]["trigger"] + out[k]["non-trigger"]
        out[k]["balance"] = -out[k]["non-trigger"] / out[k]["trigger"]
    return out


PAIR_GRADIENT_HEADER = (
    "keys after an earlier occurrence of the query's token, holding",
    "trigger positions",
    "other positions",
    "net",
    "share of the triggers' push undone",
)


def pair_gradient_rows(pg: dict) -> list[list]:
    """Rows for :data:`PAIR_GRADIENT_HEADER` from :func:`pair_gradient`."""
    name = {"likely": f"one of its {BIGRAM_TOP} likeliest successors", "other": "another token"}
    return [
        [name[k], pg[k]["trigger"], pg[k]["non-trigger"], pg[k]["net"], pg[k]["balance"]] for k in KEY_KINDS
    ]


# the entries of trained_summary (and random_summary) that split the balance gap of ih.random_ambiguity
PUSH_ENTRIES = (
    "push_likely_trigger",
    "push_likely_nontrigger",
    "push_likely_balance",
    "push_other_balance",
    "push_balance_gap",
)


def late_pushes(
    r: InductionRun, stopped: dict[str, tuple[float, list[float]]]
) -> dict[int, dict[str, float]]:
    """The parts of the balance gap (:data:`PUSH_ENTRIES`) of the run's weights at each evaluation of its late window
    (:func:`companion.train.late_mask`), by step, the last being the run as it ended: read from ``stopped``, the
    entries of :func:`companion.experiments.induction_random.trained_summary` in each view of the run alone cut there
    (``late_verdicts.stopped_entries``, which measures each view once for these and the rows).

    Raises:
        ValueError: an entry of :data:`PUSH_ENTRIES` that ``stopped`` lacks, or one whose views are not one per
            evaluation of the window.
    """
    steps = np.asarray(r.steps)[late_mask(r.steps)]
    missing = [e for e in PUSH_ENTRIES if e not in stopped]
    if missing:
        raise ValueError(f"late_pushes: entries {missing} were not measured (measured: {sorted(stopped)})")
    bad = {e: len(stopped[e][1]) for e in PUSH_ENTRIES if len(stopped[e][1]) != len(steps)}
    if bad:
        raise ValueError(
            f"late_pushes: views per entry {bad}; the run's late window has {len(steps)} evaluations"
        )
    return {int(step): {e: stopped[e][1][i] for e in PUSH_ENTRIES} for i, step in enumerate(steps)}


LATE_PUSH_HEADER = (
    "step",
    "likely keys: triggers' push",
    "other positions' push",
    "share undone",
    "other keys: share undone",
    "likely minus other",
)


def late_push_rows(pushes: dict[int, dict[str, float]]) -> list[list]:
    """Rows for :data:`LATE_PUSH_HEADER` from :func:`late_pushes`."""
    return [[step, *(p[e] for e in PUSH_ENTRIES)] for step, p in pushes.items()]


def late_push_summary(pushes: dict[int, dict[str, float]]) -> report.Summary:
    """What :func:`late_pushes` says of the balance gap (``push_balance_gap`` of :func:`companion.experiments.induction_random.random_summary`) over the late
    window: its range, at how many of the evaluations it is above 0, how many there are, the range of the triggers'
    push on the likely keys and that of the share undone on the other keys."""
    gap = [p["push_balance_gap"] for p in pushes.values()]
    trig = [p["push_likely_trigger"] for p in pushes.values()]
    other = [p["push_other_balance"] for p in pushes.values()]
    return report.Summary(
        {
            "late_push_n": (len(pushes), "evaluations in the late window of the random-trigger run"),
            "late_push_from": (min(pushes), "the first of them (step)"),
            "late_push_gap_min": (min(gap), "the balance gap at one of them: lowest"),
            "late_push_gap_max": (max(gap), "highest"),
            "late_push_gap_positive": (
                sum(g > 0 for g in gap),
                "evaluations at which the other positions undo more of the push on the likely keys than on the others",
            ),
            "late_push_trigger_min": (
                min(trig),
                "the triggers' push on the likely keys: lowest (most negative)",
            ),
            "late_push_trigger_max": (max(trig), "highest"),
            "late_push_other_min": (min(other), "the share undone on the other keys: lowest"),
            "late_push_other_max": (max(other), "highest"),
        }
    )


def push_name(kind: str, part: str) -> str:
    """The summary entry of :func:`pair_gradient`'s push of ``part`` positions on ``kind`` keys."""
    return f"push_{kind}_{part.replace('-', '')}"


def push_entry(pg: dict, kind: str, part: str) -> tuple[float, str]:
    """The summary entry (value, meaning) of :func:`pair_gradient`'s push of ``part`` positions on ``kind`` keys."""
    return pg[kind][part], f"d(loss per sequence)/d(shift of the logits of {kind} keys), {part} positions"


def balance_text(summary: report.Summary, near: float = 0.1) -> str:
    """What the other repeated positions do to the trigger positions' push on the likely keys' logits, as the clause
    book/induction_random closes its sentence with (``push_likely_balance``: the share they undo): the two balance
    where the share is within ``near`` of 1.

    >>> balance_text({"push_likely_balance": 1.01}), balance_text({"push_likely_balance": 0.71})
    ('at the end of training the two balance', 'at the end of training they undo most of it, not all')
    """
    share = summary["push_likely_balance"]
    if abs(share - 1.0) <= near:
        return "at the end of training the two balance"
    if share > 1.0:
        return "at the end of training they more than undo it"
    return f"at the end of training they undo {'most' if share > 0.5 else 'part'} of it, not all"
