"""The training loops as they were before the engine (commit 1c3be41), kept verbatim as references:
``tests/test_engine.py`` checks that each experiment, now trained through :func:`companion.train.fit`, gives
bitwise the same numbers as its old loop on the same machine (same seed, same data)."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm.auto import tqdm

from companion import config
from companion.config import check_choice, check_float, check_int
from companion.data import sources
from companion.data.recall import BigramTask
from companion.data.tokenizer import gpt2_tokenizer
from companion.experiments import khop
from companion.experiments.allocation import AllocationExperiment
from companion.experiments.fact_capacity import CapacityExperiment
from companion.experiments.factual import FactExperiment, losses
from companion.experiments.khop import (
    ESCAPE_EVERY,
    ESCAPE_STEPS,
    HopTransformer,
    KHopExperiment,
    KHopTask,
    _fresh_block,
    _snapshot,
    _test_sets,
    as_tensors,
    hop_accuracy,
    table_hidden,
    training_hops,
    training_starts,
)
from companion.experiments.scan_snap import (
    SynExperiment,
    _init,
    _Optim,
    distinct_entropy,
    forward,
    population_c,
)
from companion.experiments.scan_snap_text import (
    TextExperiment,
    TextModel,
    attention_entropy,
    batchify,
    corpus,
)
from companion.llm.standin import StandIn
from companion.models import Transformer
from companion.models.attn_only import AttnOnly, AttnOnlyConfig
from companion.theory import leading_terms as lt
from companion.theory.leading_study import TextConfig, _cosines, _mean_loss, remove_projection
from companion.theory.one_step import SimplifiedModel, simplified_task
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


def factual_train(exp: FactExperiment, progress: bool) -> dict:
    streams = config.seed_streams(exp.seed, ["train-data", "test-data"])
    rng = np.random.default_rng(streams["train-data"])
    test = exp.task.sample(np.random.default_rng(streams["test-data"]), exp.n_test)
    model = exp.model()
    opt = torch.optim.SGD(model.parameters(), lr=exp.lr)
    log: dict[str, list] = {}
    start = time.perf_counter()
    for step in tqdm(
        range(exp.steps + 1), desc=f"facts {exp.attention}", disable=not progress, mininterval=2.0
    ):
        if step % exp.eval_every == 0 or step == exp.steps:
            for k, v in {"step": step, **losses(model, exp.task, test)}.items():
                log.setdefault(k, []).append(v)
        if step == exp.steps:
            break
        b = exp.task.sample(rng, exp.batch)
        loss = F.cross_entropy(model(torch.as_tensor(b.tokens)), torch.as_tensor(b.answer))
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss became {loss.item()} at step {step}: lower the learning rate")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    out = {k: np.asarray(v) for k, v in log.items()}
    out["seconds"] = time.perf_counter() - start
    return out


def _batches(exp: KHopExperiment, stage: int) -> np.random.Generator:
    """The old loop's generator of the training batches at ``stage``: the numpy generator of the stream that
    ``khop._batches`` names (the engine's loop draws from it through a training stream)."""
    return khop._batches(exp, stage).rng


def khop_train(exp: KHopExperiment, progress: bool, device=None, keep: tuple = ()) -> dict:
    """:func:`run`'s training; ``keep``: also return (``"kept"``) the model's state dict after each of these
    numbers of training steps on the last stage (0: where it moves there), as a run of exactly that many steps
    would end."""
    device = config.get_device(device)
    stage = 1
    rng = _batches(exp, stage)
    task, tests = exp.task(), _test_sets(exp, device)
    model = exp.model().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=exp.lr, weight_decay=0.0)
    steps, accs, stages, losses = [], [], [], []
    move_at = None  # the step of the move to the last stage, once its bar is met (``last_stage_delay`` later)
    moved, kept = None, {}  # the step at which training on the last stage starts; the states of ``keep``
    loss = torch.tensor(float("nan"))
    start = time.perf_counter()
    for step in tqdm(
        range(exp.steps + 1), desc=f"{exp.k}-hop {exp.data}", disable=not progress, mininterval=2.0
    ):
        if step % exp.eval_every == 0 or step == exp.steps:
            acc = hop_accuracy(model, tests)
            steps.append(step), accs.append(acc), losses.append(float(loss.detach()))
            stages.append({"direct": exp.k, "mixture": 0}.get(exp.data, stage))
            if (
                exp.data in ("curriculum", "cumulative")
                and acc[stage - 1] >= exp.advance_at
                and stage < exp.k
            ):
                after = exp.stages[exp.stages.index(stage) + 1]
                if after < exp.k:
                    stage = after
                elif move_at is None:
                    move_at = step + exp.last_stage_delay
            if move_at is not None and move_at <= step and stage < exp.k:
                stage, moved = exp.k, step
                if exp.last_stage_data:
                    rng = _batches(exp, stage)
        if moved is not None and step - moved in keep:
            kept[step - moved] = _snapshot(model)
        if step == exp.steps:
            break
        loss = khop_train_step(model, opt, task, exp, stage, rng, device)
    out = {
        "step": np.asarray(steps),
        "acc": np.asarray(accs),
        "stage": np.asarray(stages),
        "loss": np.asarray(losses),
        "N": exp.N,
        "seconds": time.perf_counter() - start,
        "device": config.device_name(device),
        "state": {k: v.cpu() for k, v in model.state_dict().items()},
    }
    return {**out, "kept": kept} if keep else out


def khop_train_step(
    model: HopTransformer,
    opt: torch.optim.Optimizer,
    task: KHopTask,
    exp: KHopExperiment,
    stage: int,
    rng: np.random.Generator,
    device,
    hide: torch.Tensor | None = None,
) -> torch.Tensor:
    """One optimiser step on a fresh batch of ``exp``'s training examples at curriculum ``stage``: their hop counts
    (:func:`training_hops`), then their start tables (:func:`training_starts`), then the examples, all from ``rng``
    (``hide``: as the model's forward); the batch's loss."""
    hops = training_hops(exp, stage, rng)
    t, m, y = as_tensors(task.sample(rng, hops, training_starts(exp, hops, rng)), device)
    loss = F.cross_entropy(model(t, m, hide=hide), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def khop_continue_training(
    exp: KHopExperiment,
    state: dict,
    data: str,
    lr: float,
    steps: int = ESCAPE_STEPS,
    eval_every: int = ESCAPE_EVERY,
    progress: bool = True,
    device=None,
    reinit: int = 0,
    extra: bool = False,
    hide: tuple = (),
) -> dict:
    """Train ``exp``'s model from ``state`` for ``steps`` more steps with a fresh AdamW at ``lr`` on ``data``
    (``"cumulative"``: hop counts uniform over the curriculum's stages, its last stage; ``"direct"``: k hops only;
    the examples start as ``exp.starts`` says), the batches from stream "continue-data" of its seed, and measure it
    every ``eval_every`` steps on the run's own test sets: ``"step"``, ``"acc"`` ((evaluations, k)), ``"stage"`` (k
    throughout) and ``"seconds"``. Changes to the model first: ``reinit``, a block (1..depth; -1, the last)
    re-initialised (stream "reinit" of the seed; 0: none); ``extra``, a fresh block added on top (stream
    "extra-block") whose output projection starts at zero, so that the model starts as it was; ``hide``, blocks
    (1..depth, counting the extra one) from whose keys table k is hidden, in training and when measured
    (:func:`table_hidden`).

    Raises:
        ValueError: an unknown ``data``, or ``lr``, ``steps``, ``eval_every``, ``reinit`` or a block of ``hide``
            out of range, before any work.
    """
    check_choice("data", data, ("cumulative", "direct"))
    check_float("lr", lr, 0.0, None, low_open=True)
    check_int("steps", steps, low=1)
    check_int("eval_every", eval_every, low=1)
    check_int("reinit (block)", reinit, low=-1, high=exp.layers)
    reinit = exp.layers if reinit == -1 else reinit
    depth = exp.layers + bool(extra)
    device = config.get_device(device)
    cont = dataclasses.replace(exp, data=data)
    task = exp.task()
    mask = table_hidden(task, hide, depth).to(device) if hide else None
    rng = np.random.default_rng(config.seed_streams(exp.seed, ["continue-data"])["continue-data"])
    tests = _test_sets(exp, device)
    model = exp.model()
    model.load_state_dict(state)
    if reinit:
        model.blocks[reinit - 1] = _fresh_block(exp, "reinit")
    if extra:
        top = _fresh_block(exp, "extra-block")
        with torch.no_grad():
            top.out.weight.zero_(), top.out.bias.zero_()
        model.blocks.append(top)
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    at, accs, start = [], [], time.perf_counter()
    for step in tqdm(
        range(steps + 1), desc=f"continued, {data}, lr {lr:g}", disable=not progress, mininterval=2.0
    ):
        if step % eval_every == 0 or step == steps:
            at.append(step), accs.append(hop_accuracy(model, tests, mask))
            if step == steps:
                break
        khop_train_step(model, opt, task, cont, exp.k, rng, device, mask)
    return {
        "step": np.asarray(at),
        "acc": np.asarray(accs),
        "stage": np.full(len(at), exp.k),
        "seconds": time.perf_counter() - start,
    }


def scan_snap_text_train(exp: TextExperiment, progress: bool) -> dict:
    data = corpus(exp.split, exp.vocab_size)
    V = len(data["itos"])
    train = batchify(data["train"], exp.n_streams)
    held = batchify(data["heldout"], exp.n_streams)
    n_cols = min(held.shape[1] // exp.bptt, -(-exp.n_eval // exp.n_streams))
    held_x = torch.cat([held[:, i * exp.bptt : (i + 1) * exp.bptt] for i in range(n_cols)])[: exp.n_eval]
    held_y = torch.cat([held[:, i * exp.bptt + 1 : (i + 1) * exp.bptt + 1] for i in range(n_cols)])[
        : exp.n_eval
    ]
    w0 = 100 * exp.bptt if train.shape[1] > 101 * exp.bptt + 1 else 0
    map_window = train[:1, w0 : w0 + exp.bptt]
    model = TextModel(V, exp.d, exp.d_hid, exp.n_layers, exp.dropout, exp.seed)
    ffn = [p for n, p in model.named_parameters() if ".linear" in n]
    rest = [p for n, p in model.named_parameters() if ".linear" not in n]
    opt = torch.optim.SGD([{"params": rest, "lr": exp.lr}, {"params": ffn, "lr": exp.lr_ffn or exp.lr}])
    n_windows = (train.shape[1] - 1) // exp.bptt
    out = {k: [] for k in ("step", "loss", "entropy", "moved", "maps")}
    train_loss = np.zeros(exp.steps, dtype=np.float32)
    prev = None
    t0 = time.perf_counter()

    def evaluate(step):
        nonlocal prev
        model.eval()
        with torch.no_grad():
            logits, attn = model(held_x)
            out["step"].append(step)
            out["loss"].append(F.cross_entropy(logits.reshape(-1, V), held_y.reshape(-1)).item())
            out["entropy"].append(attention_entropy(attn))
            out["moved"].append(
                float("nan") if prev is None else float((attn - prev).abs().sum(-1).mean() / 2)
            )
            out["maps"].append(model(map_window)[1][0].numpy())
            prev = attn
        model.train()

    for step in tqdm(range(exp.steps), desc="wikitext", disable=not progress, leave=False):
        if step % exp.eval_every == 0:
            evaluate(step)
        i = (step % n_windows) * exp.bptt
        x, y = train[:, i : i + exp.bptt], train[:, i + 1 : i + 1 + exp.bptt]
        logits, _ = model(x)
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), exp.clip)
        opt.step()
        train_loss[step] = loss.item()
    evaluate(exp.steps)
    T = exp.bptt
    uniform = float(np.mean([math.log(t + 1) for t in range(T)]))
    res = {k: np.asarray(v) for k, v in out.items()}
    res.update(
        train_loss=train_loss,
        max_entropy=uniform,
        splits=data["splits"],
        vocab=V,
        seconds=time.perf_counter() - t0,
    )
    return res


def scan_snap_train(exp: SynExperiment, progress: bool) -> dict:
    sc = exp.seq_classes()
    M = sc.vocab_size
    reps = exp.replicas()
    R = len(reps)
    seed_of = torch.as_tensor([exp.seeds.index(r["seed"]) for r in reps])
    inits = [_init(exp, M, s) for s in exp.seeds]
    Y = torch.stack([inits[i][0] for i in seed_of]).requires_grad_(True)
    Z = torch.stack([inits[i][1] for i in seed_of]).requires_grad_(True)
    Y0, Z0 = Y.detach().sum(-1).clone(), Z.detach().sum(-1).clone()

    def lr(key):  # (replicas, 1, 1)
        return torch.as_tensor([r[key] for r in reps], dtype=torch.float32)[:, None, None]

    opt = _Optim(exp.optimizer, [Y, Z], [lr("lr_y"), lr("lr_z")], exp.momentum)
    rngs = [np.random.default_rng(config.seed_streams(s, ["data"])["data"]) for s in exp.seeds]
    losses = np.zeros((R, exp.steps), dtype=np.float32)
    rec_steps = sorted(
        {0, exp.steps} | (set(range(0, exp.steps, exp.record_every)) if exp.record_every else set())
    )
    cs = []
    t0 = time.perf_counter()
    for step in tqdm(range(exp.steps + 1), desc="scan and snap", disable=not progress, leave=False):
        if step in rec_steps:
            with torch.no_grad():
                cs.append(population_c(Z.detach(), sc).numpy())
        if step == exp.steps:
            break
        draws = [sc.sample_counts(r, exp.batch, exp.seq_len) for r in rngs]
        cls = torch.as_tensor(np.stack([d[0] for d in draws]))[seed_of]
        counts = torch.as_tensor(np.stack([d[1] for d in draws]), dtype=torch.float32)[seed_of]
        logits = forward(Y, Z, torch.as_tensor(sc.last)[cls], counts, exp.normalize, exp.residual)
        loss = F.cross_entropy(
            logits.transpose(1, 2), torch.as_tensor(sc.next_token)[cls], reduction="none"
        ).mean(1)
        loss.sum().backward()
        losses[:, step] = loss.detach().numpy()
        opt.step()
    Yd, Zd = Y.detach(), Z.detach()
    drift = torch.maximum((Yd.sum(-1) - Y0).abs().amax(-1), (Zd.sum(-1) - Z0).abs().amax(-1))
    c = np.stack(cs)
    return {
        "loss": losses,
        "c": c,
        "c_step": np.asarray(rec_steps),
        "entropy": distinct_entropy(c[-1], sc),
        "row_sum_drift": drift.numpy(),
        "replicas": reps,
        "seconds": time.perf_counter() - t0,
    }


def one_step_train_simplified(
    N: int,
    T: int,
    alpha: float,
    steps: int,
    batch: int = 256,
    lr: float = 1.0,
    seed: int = 0,
    record_every: int = 1,
) -> dict:
    """Full-model SGD (autograd) on Eq. (2) from zero, fresh batches each step.

    Records, every ``record_every`` steps, the quantities the three phases of
    Appendix F are about (q = 0, tau = N):

    * ``ff_noise``: W_U(tau)^T W_F W_E(q), the feed-forward noise association;
    * ``v_noise``: mean_k W_U(tau)^T W_V W_E(k); ``v_diag``: mean_{k != q} W_U(k)^T W_V W_E(k)
      and ``v_prev``: mean_{k != q} W_U(k)^T W_V W~_E(k), the identity structure of W_V;
    * ``qk_noise``: mean_{j != q} xi_{q->j} - xi_{q->tau} and ``qk_trigger``:
      mean_{i != q} (xi_{q->j} at previous token q vs i), the attention logits of Theorem 2;
    * ``p_noise``: the mean predicted probability of tau on the batch.
    """
    check_int("steps", steps, low=1)
    check_int("batch", batch, low=1)
    check_float("lr", lr, 0.0, 1e3, low_open=True)
    task = simplified_task(N, T, alpha)
    V = task.vocab_size
    rng = np.random.default_rng([seed, N, T, 7])
    model = SimplifiedModel(N)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    others = torch.arange(1, N)
    rec: dict[str, list] = {
        k: []
        for k in ("step", "ff_noise", "v_noise", "v_diag", "v_prev", "qk_noise", "qk_trigger", "p_noise")
    }
    for step in range(steps + 1):
        b = task.sample(rng, batch)
        z = torch.as_tensor(b.inputs)
        logits = model(z)
        if step % record_every == 0 or step == steps:
            with torch.no_grad():
                WF, WV, WQK = model.W_F, model.W_V, model.W_QK
                rec["step"].append(step)
                rec["ff_noise"].append(WF[N, 0].item())
                rec["v_noise"].append(WV[N, :V].mean().item())
                rec["v_diag"].append(WV[others, others].mean().item())
                rec["v_prev"].append(WV[others, V + others].mean().item())
                rec["qk_noise"].append((WQK[0, others].mean() - WQK[0, N]).item())
                rec["qk_trigger"].append((WQK[0, V + 0] - WQK[0, V + others].mean()).item())
                rec["p_noise"].append(torch.softmax(logits, -1)[:, N].mean().item())
        if step == steps:
            break
        loss = torch.nn.functional.cross_entropy(logits, torch.as_tensor(b.targets[:, -1]))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: np.array(v) for k, v in rec.items()}


def sgd_run(
    train: np.ndarray,
    heldout: np.ndarray,
    stats: lt.Stats,
    V: int,
    cfg: TextConfig,
    rate: float,
    device=None,
    progress: bool = True,
) -> dict:
    """Plain minibatch SGD (shuffled each epoch, seeded), cosines every ``cfg.every`` steps and at each
    epoch's end; then Table 3's removals on the final model."""
    from tqdm.auto import tqdm

    device = config.get_device(device)
    T = train.shape[1] - 1
    model = AttnOnly(AttnOnlyConfig(V=V, T=T, L=cfg.L)).to(device)
    leads = {k: stats.leading(k).float().to(device) for k in lt.WEIGHTS}
    opt = torch.optim.SGD(model.parameters(), lr=rate)
    g = torch.Generator().manual_seed(cfg.seed)
    data = torch.as_tensor(train)
    steps_per_epoch = len(train) // cfg.batch
    log = {"step": [0], "epoch": [0.0], "cos": [_cosines(model, leads)], "train_loss": [math.log(V)]}
    epoch_end = {"epoch": [0], "heldout_loss": [_mean_loss(model, heldout)]}
    bar = tqdm(
        total=cfg.epochs * steps_per_epoch,
        desc=f"SGD rate {rate}",
        disable=not progress,
        leave=False,
        mininterval=2.0,
    )
    step, t0 = 0, time.time()
    for epoch in range(1, cfg.epochs + 1):
        order = torch.randperm(len(train), generator=g)
        running = []
        for b in range(steps_per_epoch):
            batch = data[order[b * cfg.batch : (b + 1) * cfg.batch]].to(device)
            opt.zero_grad()
            loss = model.loss(batch)
            loss.backward()
            opt.step()
            running.append(loss.item())
            step += 1
            bar.update()
            if step % cfg.every == 0 or b == steps_per_epoch - 1:
                log["step"].append(step)
                log["epoch"].append(step / steps_per_epoch)
                log["cos"].append(_cosines(model, leads))
                log["train_loss"].append(float(np.mean(running[-cfg.every :])))
        epoch_end["epoch"].append(epoch)
        epoch_end["heldout_loss"].append(_mean_loss(model, heldout.astype(np.int64)))
    bar.close()
    weights = model.weights()
    pairs = [(a, b) for a in range(1, cfg.L + 1) for b in range(a + 1, cfg.L + 1)]
    layer_cos = {
        kind: min((lt.cosine(weights[f"{kind}{a}"], weights[f"{kind}{b}"]) for a, b in pairs), default=1.0)
        for kind in ("V", "W")
    }
    removal = {"original": _mean_loss(model, heldout)}
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for key in model.weights():
        base = lt.weight_kind(key)
        if base == "P":
            continue  # Table 3 removes W_O, V and W only
        remove_projection(model, key, leads[base])
        removal[key] = _mean_loss(model, heldout)
        model.load_state_dict(state)
    return {
        "log": log,
        "epoch_end": epoch_end,
        "removal": removal,
        "layer_cos": layer_cos,
        "seconds": time.time() - t0,
        "steps_per_epoch": steps_per_epoch,
    }


def standin_build(spec: StandIn = StandIn(), progress: bool = True) -> Path:  # noqa: B008
    """Train the stand-in (or find it cached); return the folder holding ``step{N}`` checkpoints."""
    out = config.cache_dir() / "llm" / f"standin-{spec.family}-{spec.key()}"
    if (out / "done.json").is_file():
        return out
    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    tok = gpt2_tokenizer()
    text = sources.fetch("wikitext2_valid").read_text(encoding="utf-8")
    ids = np.asarray(tok.encode(text), dtype=np.int64)
    streams = config.seed_streams(spec.seed, ["standin-init", "standin-data"])
    torch.manual_seed(int(streams["standin-init"].generate_state(1)[0]))
    model = AutoModelForCausalLM.from_config(spec.model_config(len(tok), tok.eos_token_id))
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0)
    rng = np.random.default_rng(streams["standin-data"])
    tmp = Path(tempfile.mkdtemp(dir=out.parent if out.parent.exists() else None))
    out.parent.mkdir(parents=True, exist_ok=True)
    t0, losses = time.perf_counter(), []
    try:
        model.train()
        for step in tqdm(range(spec.steps + 1), desc=f"stand-in {spec.family}", disable=not progress):
            if step in spec.checkpoints:
                model.save_pretrained(tmp / f"step{step}")
                tok.save_pretrained(tmp / f"step{step}")
            if step == spec.steps:
                break
            starts = rng.integers(0, len(ids) - spec.ctx - 1, size=spec.batch)
            batch = torch.as_tensor(np.stack([ids[s : s + spec.ctx] for s in starts]))
            loss = model(input_ids=batch, labels=batch).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        (tmp / "done.json").write_text(
            json.dumps(
                {
                    "spec": dataclasses.asdict(spec),
                    "losses": losses,
                    "seconds": time.perf_counter() - t0,
                    "tokens": int(len(ids)),
                }
            )
        )
        if not out.exists():
            tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def allocation_train_all(exp: AllocationExperiment, device, progress: bool) -> dict:
    device = config.get_device(device)
    streams = config.seed_streams(exp.seed, ["train-data", "test-data"])
    task = BigramTask(exp.seq_len)
    test_batch = task.sample(np.random.default_rng(streams["test-data"]), exp.n_test)
    grid = [(b, f, lr) for b in exp.budgets for f in exp.mlp_fracs for lr in exp.lrs]
    rows, t0 = [], time.perf_counter()
    for budget, f, lr in tqdm(grid, desc="configurations x learning rates", disable=not progress):
        cfg = exp.model_config(budget, f)
        model = Transformer(cfg, seed=exp.seed).to(device)
        tcfg = TrainConfig(
            steps=exp.steps, batch=exp.batch, lr=lr, momentum=exp.momentum, weight_decay=exp.weight_decay
        )
        logs = train(
            model,
            task,
            tcfg,
            np.random.default_rng(streams["train-data"]),
            progress=False,
            stop_on_nonfinite=True,
        )
        train_loss = test_loss = None  # None: this lr diverged, so it cannot be the best one
        if not logs[-1].get("diverged"):
            model.eval()
            with torch.no_grad():
                test = batch_loss(model, test_batch, device).item()
            if np.isfinite(test):
                train_loss, test_loss = float(np.mean([r["loss"] for r in logs[-exp.last :]])), test
        n = cfg.n_params()
        rows.append(
            {
                "budget": budget,
                "mlp_frac": f,
                "mlp_params": n["feed_forward"],
                "attn_params": n["attention"],
                "mlp_width": cfg.hidden,
                "attn_rank": cfg.attn_rank,
                "lr": lr,
                "train_loss": train_loss,
                "test_loss": test_loss,
            }
        )
    for budget in exp.budgets:
        for f in exp.mlp_fracs:
            group = [r for r in rows if r["budget"] == budget and r["mlp_frac"] == f]
            finite = [r for r in group if r["train_loss"] is not None]
            best = min(finite, key=lambda r: r["train_loss"]) if finite else None  # None: every lr diverged
            for r in group:
                r["best"] = r is best
    return {
        "rows": rows,
        "entropy": task.entropy(),
        "seconds": time.perf_counter() - t0,
        "device": config.device_name(device),
        "exp": dataclasses.asdict(exp),
    }
