"""One training loop: SGD (or Adam) on cross-entropy at the task's loss positions.

>>> from companion.data.recall import RecallTask
>>> from companion.models import ModelConfig, Transformer
>>> task = RecallTask(seq_len=8, alpha=0.5)
>>> model = Transformer(ModelConfig(task.vocab_size, d=8, max_len=8))
>>> logs = train(model, task, TrainConfig(steps=2, batch=4), np.random.default_rng(0), progress=False)
>>> [sorted(r) for r in logs][0]
['loss', 'step']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from companion.config import check_choice, check_float, check_int

OPTIMIZERS = ("sgd", "adam")


@dataclass(frozen=True)
class TrainConfig:
    """Optimiser settings (main paper B.6 and the public code: SGD, momentum 0.9, wd 1e-4)."""

    steps: int
    batch: int = 512
    lr: float = 0.03
    momentum: float = 0.9
    weight_decay: float = 1e-4
    optimizer: str = "sgd"

    def __post_init__(self):
        check_int("steps", self.steps, low=0)
        check_int("batch", self.batch, low=1)
        check_float("lr", self.lr, 0.0, 10.0, low_open=True)
        check_float("momentum", self.momentum, 0.0, 1.0, high_open=True)
        check_float("weight_decay", self.weight_decay, 0.0, 1.0)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig, extra: Iterable = ()) -> torch.optim.Optimizer:
    """The optimiser over the trainable parameters plus ``extra`` (parameters frozen for now)."""
    params = [p for p in model.parameters() if p.requires_grad]
    params += [p for p in extra if all(p is not q for q in params)]
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)


def eval_schedule(steps: int, every: int, dense_until: int = 0) -> set[int]:
    """The steps (before their update) at which a run of ``steps`` steps evaluates: every step below
    ``dense_until``, then every ``every`` steps (:func:`train` evaluates once more after the last update).

    >>> sorted(eval_schedule(10, every=4, dense_until=3))
    [0, 1, 2, 4, 8]
    """
    return set(range(min(dense_until, steps))) | set(range(0, steps, every))


SPARSE_LOSS = 0.5  # a loss on at most this share of a row's positions runs the last layer only there


def batch_loss(model, batch, device, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy of next-token predictions at the batch's loss positions (``reduction``: "mean" or "sum";
    a sum over no position is 0, a mean raises).

    Only what the loss reads is computed: the rows with a loss position, and, for a model whose forward takes
    ``positions`` (:class:`~companion.models.Transformer`), the last layer only at the loss positions when no
    row has more than :data:`SPARSE_LOSS` of its positions in the loss; the terms are summed in the same
    order either way."""
    tokens = torch.as_tensor(batch.inputs, device=device)
    targets = torch.as_tensor(batch.targets, device=device)
    if batch.loss_mask[:, :-1].any():
        counts = batch.loss_mask.sum(1)
        rows = torch.as_tensor(counts > 0, device=device)
        mask = torch.as_tensor(batch.loss_mask, device=device)[rows]
        tokens, targets = tokens[rows], targets[rows]
        m = int(counts.max())
        if getattr(model, "takes_positions", False) and m <= SPARSE_LOSS * mask.shape[1]:
            # each row's loss positions first, in order, then padding (other positions, not read)
            positions = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)[:, :m]
            valid = torch.arange(m, device=device) < mask.sum(1, keepdim=True)
            logits = model(tokens, positions=positions)  # (rows, m, V)
            return F.cross_entropy(logits[valid], targets.gather(1, positions)[valid], reduction=reduction)
        logits = model(tokens)  # (rows, T, V)
        return F.cross_entropy(logits[mask], targets[mask], reduction=reduction)
    rows = torch.as_tensor(batch.loss_mask[:, -1], device=device)
    if not rows.any() and reduction == "mean":
        raise ValueError("this batch has no loss position: draw a larger batch")
    if not rows.all():  # only the sequences with a loss position run
        tokens, targets = tokens[rows], targets[rows]
    logits = model(tokens, last_only=True)  # (batch, V): only the final position is needed
    return F.cross_entropy(logits, targets[:, -1], reduction=reduction)


def train(
    model,
    task,
    cfg: TrainConfig,
    rng: np.random.Generator,
    evaluate: Callable[[int], dict] | None = None,
    eval_at: Iterable[int] = (),
    progress: bool = True,
    desc: str = "train",
    step_offset: int = 0,
    stop_on_nonfinite: bool = False,
    unfreeze: dict[int, list] | None = None,
) -> list[dict]:
    """Train ``model`` on batches of ``task`` drawn from ``rng``.

    ``evaluate(step)`` is called before the update of every step in
    ``eval_at`` and once after the last step (step = ``cfg.steps``); its
    dict is merged into that step's log row. Steps are logged with
    ``step_offset`` added (for multi-phase schedules).

    A non-finite loss raises ``FloatingPointError``, or, with
    ``stop_on_nonfinite``, ends training with a last row
    ``{"step": s, "diverged": True}`` (no further evaluation): experiments
    that are expected to fail sometimes (Appendix J, Adam without
    normalisation) report the divergence instead of hiding it.

    ``unfreeze``: ``{step: [parameters]}``, parameters frozen now
    (``requires_grad`` False) that are unfrozen before the update of that
    step. They are in the optimiser from the start and receive no update,
    momentum or weight decay until then (what the public code of Birth of a
    Transformer does with its ``freeze_until``).
    """
    device = next(model.parameters()).device
    unfreeze = unfreeze or {}
    opt = make_optimizer(model, cfg, [p for ps in unfreeze.values() for p in ps])
    eval_at = set(eval_at)
    logs = []
    bar = tqdm(range(cfg.steps), desc=desc, disable=not progress, mininterval=2.0, leave=True)
    for step in bar:
        for p in unfreeze.get(step, ()):
            p.requires_grad_(True)
        batch = task.sample(rng, cfg.batch)
        row = {"step": step + step_offset}
        if evaluate is not None and step in eval_at:
            model.eval()
            row.update(evaluate(step + step_offset))
            model.train()
        loss = batch_loss(model, batch, device)
        if not torch.isfinite(loss):
            if stop_on_nonfinite:
                logs.append({"step": step + step_offset, "diverged": True})
                return logs
            raise FloatingPointError(f"loss became {loss.item()} at step {step}: lower the learning rate")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        row["loss"] = loss.item()
        logs.append(row)
        if step % 10 == 0:
            bar.set_postfix(loss=f"{row['loss']:.3f}", refresh=False)
    if evaluate is not None:
        model.eval()
        logs.append({"step": cfg.steps + step_offset, **evaluate(cfg.steps + step_offset)})
        model.train()
    return logs
