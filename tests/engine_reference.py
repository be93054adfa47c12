"""The training loops as they were before the engine (commit 1c3be41), kept verbatim as references:
``tests/test_engine.py`` checks that each experiment, now trained through :func:`companion.train.fit`, gives
bitwise the same numbers as its old loop on the same machine (same seed, same data)."""

from __future__ import annotations

import time
from typing import Callable, Iterable

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from companion import config
from companion.experiments.fact_capacity import CapacityExperiment
from companion.train import TrainConfig, batch_loss, make_optimizer


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


def fact_capacity_train(exp: CapacityExperiment, progress: bool, device=None) -> dict:
    device = config.get_device(device)
    streams = config.seed_streams(exp.seed, ["train-data", "test-data"])
    rng = np.random.default_rng(streams["train-data"])
    task = exp.task()
    test = task.sample(np.random.default_rng(streams["test-data"]), exp.n_test)
    test_x, test_y = torch.as_tensor(test.tokens, device=device), torch.as_tensor(test.answer, device=device)
    model = exp.model().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=exp.lr)
    steps, accs = [], []
    start = time.perf_counter()
    step, diverged = 0, float("inf")
    for step in tqdm(
        range(exp.steps + 1),
        desc=f"facts d={exp.d} S=R={exp.S} H={exp.H} m={exp.m} lr={exp.lr:g}",
        disable=not progress,
        mininterval=2.0,
    ):
        if step % exp.eval_every == 0 or step == exp.steps:
            with torch.no_grad():
                accs.append(float((model(test_x).argmax(1) == test_y).float().mean()))
            steps.append(step)
            if accs[-1] > exp.stop_at or step == exp.steps:
                break
        b = task.sample(rng, exp.batch)
        loss = F.cross_entropy(
            model(torch.as_tensor(b.tokens, device=device)), torch.as_tensor(b.answer, device=device)
        )
        # a diverged run is data: the best accuracy so far stands (the code's max)
        if not torch.isfinite(loss):
            diverged = step
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return {
        "step": np.asarray(steps),
        "acc": np.asarray(accs),
        "best": max(accs),
        "stopped": step,
        "diverged": diverged,
        "seconds": time.perf_counter() - start,
        "device": config.device_name(device),
    }
