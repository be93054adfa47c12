"""The training engine: one loop (:func:`fit`) for every experiment trained by minibatch SGD, Adam or AdamW,
with the experiment's parts passed in (the loss of a fresh batch, the evaluations, a stopping rule, hooks);
and :func:`train`, that loop on a task with next-token losses (:func:`batch_loss`).

>>> from companion.data.recall import RecallTask
>>> from companion.models import ModelConfig, Transformer
>>> task = RecallTask(seq_len=8, alpha=0.5)
>>> model = Transformer(ModelConfig(task.vocab_size, d=8, max_len=8))
>>> logs = train(model, task, TrainConfig(steps=2, batch=4), np.random.default_rng(0), progress=False)
>>> [sorted(r) for r in logs][0]
['loss', 'step']
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from companion import cache
from companion.config import check_choice, check_float, check_int
from companion.data.streams import TrainingStream

OPTIMIZERS = ("sgd", "adam")
NONFINITE = ("raise", "stop", "continue")


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


LATE_FRACTION = 0.2  # "late": the evaluations in the last fifth of a phase's steps


def late_mask(steps, frac: float = LATE_FRACTION) -> np.ndarray:
    """Which of a phase's evaluated steps (counted from its start) fall in its late window: those from ``1 - frac``
    of the last one on. The window of
    :meth:`companion.experiments.noisy_recall.RecallRun.late_mean`, for a live run or a recorded curve, and the
    evaluations whose weights an induction run keeps (:class:`companion.experiments.induction.InductionRun`).

    >>> late_mask([0, 100, 200, 300, 400, 500]).tolist()
    [False, False, False, False, True, True]
    >>> late_mask([0, 25, 50, 75, 100]).tolist()
    [False, False, False, False, True]
    >>> late_mask([0, 320, 400]).tolist()
    [False, True, True]
    """
    steps = np.asarray(steps, dtype=float)
    return steps >= late_from(steps, frac)


def late_from(steps, frac: float = LATE_FRACTION) -> float:
    """Where the late window of a phase's evaluated steps begins: ``1 - frac`` of the last one.

    >>> late_from([0, 100, 400])
    320.0
    """
    return (1 - frac) * float(np.max(steps))


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


@dataclass
class Fit:
    """What :func:`fit` returns: ``evals`` (one dict per evaluation, with its ``"step"``), ``losses`` (the loss
    of every update, in order: (updates,), or (updates, replicas) for a loss per replica; float64 numpy),
    ``stopped`` (the step training ended: its last evaluation, or the step whose loss was not finite),
    ``diverged`` (the first step whose loss was not finite; inf if none) and ``seconds``."""

    evals: list[dict] = field(default_factory=list)
    losses: np.ndarray = field(default_factory=lambda: np.zeros(0))
    stopped: int = 0
    diverged: float = float("inf")
    seconds: float = 0.0

    def series(self, key: str) -> np.ndarray:
        """``key`` at every evaluation that has it, as an array."""
        return np.asarray([row[key] for row in self.evals if key in row])


def fit(
    model: torch.nn.Module | None,
    opt,
    steps: int,
    loss_at: Callable[[int], torch.Tensor],
    *,
    evaluate: Callable[[int], dict | None] | None = None,
    eval_at: Callable[[int], bool] | Iterable[int] = (),
    stop: Callable[[dict], bool] | None = None,
    before: Callable[[int], None] | None = None,
    nonfinite: str = "raise",
    clip: float | None = None,
    progress: bool = True,
    desc: str = "train",
    accumulate: int = 1,
) -> Fit:
    """The one training loop. For each step s = 0, 1, ..., ``steps``:

    1. evaluate, when s is in ``eval_at`` (a set of steps or a predicate) or s = ``steps``: ``evaluate(s)``
       (the model in eval mode) gives a dict (None: nothing to log) logged with ``"step"`` = s; training ends
       after the evaluation of s = ``steps``, or of any s where ``stop(row)`` is true;
    2. ``before(s)`` (curriculum moves, unfreezing, snapshots);
    3. ``loss_at(s)``: the loss of a fresh batch (a scalar, or one loss per replica, whose sum is minimised);
    4. a loss that is not finite raises ``FloatingPointError`` (``nonfinite="raise"``: noted on the device and
       raised, naming the first bad step, before the next evaluation or at the end, so no step waits for the
       device), ends training without the update (``"stop"``: read every step), or is kept and training goes on
       (``"continue"``, no check per step);
    5. zero the gradients, backward, clip the gradient norm to ``clip`` if given, ``opt.step()``.

    ``accumulate`` = k > 1 computes a step's gradient in k pieces, for models whose activations on a whole batch
    exceed the device's memory: ``loss_at(s, piece)`` for piece = 0, ..., k - 1 gives each piece's share of the
    step's loss (the caller weights it: a mean over the batch is the sum of each piece's mean times its share of
    the batch), each piece's backward adds to the gradient before the next piece is computed, and the step's
    loss (checked, logged) is the sum of the pieces'. Only one piece's graph is held at a time. The gradient is
    the whole batch's up to rounding; k = 1 calls ``loss_at(s)`` as above.

    The losses are kept on the loss's device and read once, at the end.

    >>> w = torch.nn.Parameter(torch.tensor([2.0]))
    >>> opt = torch.optim.SGD([w], lr=0.25)
    >>> out = fit(None, opt, 3, lambda s: (w**2).sum(), evaluate=lambda s: {"w": w.item()}, progress=False)
    >>> [(r["step"], r["w"]) for r in out.evals], out.losses.tolist()
    ([(3, 0.25)], [4.0, 1.0, 0.25])
    """
    check_int("steps", steps, low=0)
    check_int("accumulate", accumulate, low=1)
    check_choice("nonfinite", nonfinite, NONFINITE)
    if clip is not None:
        check_float("clip", clip, 0.0, None, low_open=True)
    at = eval_at if callable(eval_at) else set(eval_at).__contains__
    out = Fit()
    losses: list[torch.Tensor] = []
    finite: list[torch.Tensor] = []  # "raise": whether every loss so far was finite, on the device

    def check() -> None:
        if finite and not bool(finite[0]):
            bad = next(i for i, x in enumerate(losses) if not bool(torch.isfinite(x).all()))
            raise FloatingPointError(
                f"loss became {losses[bad].tolist()} at step {bad}: lower the learning rate"
            )

    start = time.perf_counter()
    step = 0
    for step in tqdm(range(steps + 1), desc=desc, disable=not progress, mininterval=2.0, leave=False):
        if evaluate is not None and (step == steps or at(step)):
            check()
            if model is not None:
                model.eval()
            row = evaluate(step)
            if model is not None:
                model.train()
            if row is not None:
                out.evals.append({"step": step, **row})
                if stop is not None and stop(out.evals[-1]):
                    break
        if step == steps:
            break
        if before is not None:
            before(step)
        if accumulate == 1:
            loss = loss_at(step)
        else:  # each piece's graph is freed by its backward; the update waits for the last piece
            opt.zero_grad(set_to_none=True)
            loss = sum(_backward(loss_at(step, piece)).detach() for piece in range(accumulate))
        if nonfinite == "raise":
            ok = torch.isfinite(loss.detach()).all()
            finite[:] = [finite[0] & ok if finite else ok]
        elif nonfinite == "stop" and not bool(torch.isfinite(loss).all()):
            out.diverged = step
            break
        if accumulate == 1:
            opt.zero_grad(set_to_none=True)
            _backward(loss)
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(loss.detach())
    check()
    out.stopped = step
    if losses:
        out.losses = torch.stack(losses).cpu().double().numpy()
        if nonfinite == "continue":
            bad = np.nonzero(~np.isfinite(out.losses.reshape(len(losses), -1)).all(1))[0]
            out.diverged = float(bad[0]) if len(bad) else float("inf")
    out.seconds = time.perf_counter() - start
    return out


def _backward(loss: torch.Tensor) -> torch.Tensor:
    """Backward of a scalar loss, or of the sum of one loss per replica; ``loss`` back."""
    (loss.sum() if loss.ndim else loss).backward()
    return loss


REPLICA_OPTIMIZERS = ("sgd", "adam", "adamw")


class Replicas:
    """The optimiser of a packed computation and its per-replica book-keeping.

    ``params`` are tensors whose first dimension is the replica (R runs trained as one computation); each
    replica has its own learning rate and weight decay, ``kind`` is "sgd" (momentum, weight decay added to the
    gradient, as :class:`torch.optim.SGD`), "adam" (as :class:`torch.optim.Adam`) or "adamw" (decoupled decay,
    as :class:`torch.optim.AdamW`), with torch's update formulas. ``frozen`` (R,) marks replicas that met their
    stopping rule or diverged: their parameters no longer move. ``diverged`` (R,) is the first step whose loss
    was not finite (inf: none). Both stay on the device; nothing couples replicas.

    >>> w = torch.nn.Parameter(torch.ones(2, 3))
    >>> reps = Replicas([w], "sgd", lr=[0.25, 0.5])
    >>> (w**2).sum().backward(); reps.step()
    >>> w[:, 0].tolist()
    [0.5, 0.0]

    Raises:
        ValueError: no replica, an unknown optimiser, per-replica settings of another length, a parameter
            without the replica dimension, a non-positive learning rate.
    """

    def __init__(
        self,
        params: list[torch.Tensor],
        kind: str,
        lr,
        weight_decay=0.0,
        momentum: float = 0.0,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ):
        check_choice("optimizer", kind, REPLICA_OPTIMIZERS)
        lrs = [float(x) for x in np.atleast_1d(lr)]
        R = len(lrs)
        check_int("replicas", R, low=1)
        decays = [float(x) for x in np.atleast_1d(weight_decay)]
        decays = decays * R if len(decays) == 1 else decays
        if len(decays) != R:
            raise ValueError(f"weight_decay has {len(decays)} values for {R} replicas: give 1 or {R}")
        for x in lrs:
            check_float("lr", x, 0.0, None, low_open=True)
        for x in decays:
            check_float("weight_decay", x, 0.0, None)
        check_float("momentum", momentum, 0.0, 1.0, high_open=True)
        for p in params:
            if p.ndim < 1 or p.shape[0] != R:
                raise ValueError(
                    f"a parameter of shape {tuple(p.shape)} has no replica dimension of size {R}"
                )
        self.params, self.kind, self.mu, self.betas, self.eps = list(params), kind, momentum, betas, eps
        device, dtype = self.params[0].device, self.params[0].dtype
        self.lr = torch.tensor(lrs, dtype=dtype, device=device)
        self.weight_decay = torch.tensor(decays, dtype=dtype, device=device)
        self.frozen = torch.zeros(R, dtype=torch.bool, device=device)
        self.diverged = torch.full((R,), float("inf"), device=device)
        self.state = [{} for _ in self.params]
        self.t = 0

    def __len__(self) -> int:
        return len(self.lr)

    def watch(self, step: int, loss: torch.Tensor) -> None:
        """Freeze the replicas whose loss (R,) at ``step`` is not finite, and note the step (on the device)."""
        bad = ~torch.isfinite(loss.detach()) & ~self.frozen
        self.diverged = torch.where(bad, torch.as_tensor(float(step), device=loss.device), self.diverged)
        self.frozen |= bad

    def freeze(self, which) -> None:
        """Freeze the replicas in ``which`` (indices, or an (R,) mask)."""
        self.frozen[torch.as_tensor(which, device=self.frozen.device)] = True

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    def _shape(self, x: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return x.view(-1, *([1] * (p.ndim - 1)))

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        for p, st in zip(self.params, self.state):
            if p.grad is None:
                continue
            lr, wd, keep = (self._shape(x, p) for x in (self.lr, self.weight_decay, self.frozen))
            g = p.grad
            if self.kind == "adamw":
                new = p * (1 - lr * wd)
            else:
                new = p.clone()
                g = g + wd * p
            if self.kind == "sgd":
                if self.mu:
                    st["buf"] = g.clone() if "buf" not in st else st["buf"].mul_(self.mu).add_(g)
                    g = st["buf"]
                new -= lr * g
            else:
                m = st.setdefault("m", torch.zeros_like(p)).lerp_(g, 1 - b1)
                v = st.setdefault("v", torch.zeros_like(p)).mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = (v.sqrt() / (1 - b2**self.t) ** 0.5).add_(self.eps)
                new -= lr / (1 - b1**self.t) * m / denom
            p.copy_(torch.where(keep, p, new))


class Pack:
    """Models of one architecture and shape as one computation: their parameters and buffers stacked along a
    leading replica dimension (``torch.func.stack_module_state``), and a function of one model mapped over
    them (``torch.func.vmap``). Nothing couples the replicas.

    >>> lin = [torch.nn.Linear(3, 1) for _ in range(4)]
    >>> pack = Pack(lin)
    >>> x = torch.ones(2, 3)
    >>> pack.map(lambda model, x: model(x).sum(), x).shape
    torch.Size([4])
    >>> torch.allclose(pack.map(lambda model, x: model(x).sum(), x)[1], lin[1](x).sum())
    True
    >>> xs = torch.randn(4, 2, 3)  # one input per replica
    >>> torch.allclose(pack.map(lambda model, x: model(x).sum(), xs, each=(0,))[2], lin[2](xs[2]).sum())
    True
    """

    def __init__(self, models: list[torch.nn.Module]):
        from torch.func import stack_module_state

        check_int("replicas", len(models), low=1)
        self.params, self.buffers = stack_module_state(models)
        self.base = copy.deepcopy(models[0]).to("meta")

    def __len__(self) -> int:
        return next(iter(self.params.values())).shape[0]

    def parameters(self) -> list[torch.Tensor]:
        return list(self.params.values())

    def map(self, fn: Callable, *args, each: tuple[int, ...] = ()) -> torch.Tensor:
        """``fn(model, *args)`` for every replica's model, stacked. ``args`` are shared, except those at the
        positions in ``each``: tensors with a leading replica dimension, replica r's model getting its slice r
        (its own batch, its own test set).

        Raises:
            ValueError: a position of ``each`` that is not an argument, or an argument there whose first
                dimension is not the number of replicas.
        """
        from torch.func import functional_call, vmap

        R = len(self)
        for i in each:
            if not 0 <= i < len(args):
                raise ValueError(f"each names argument {i}: allowed 0..{len(args) - 1}")
            if not torch.is_tensor(args[i]) or args[i].ndim < 1 or args[i].shape[0] != R:
                shape = tuple(args[i].shape) if torch.is_tensor(args[i]) else type(args[i]).__name__
                raise ValueError(f"argument {i} ({shape}) has no leading replica dimension of size {R}")

        base = self.base

        class Bound:  # the base module called with one replica's tensors
            takes_positions = getattr(base, "takes_positions", False)

            def __init__(self, params, buffers):
                self.state = (params, buffers)

            def __call__(self, *a, **k):
                return functional_call(base, self.state, a, k)

        dims = tuple(0 if i in each else None for i in range(len(args)))
        return vmap(lambda p, b, *a: fn(Bound(p, b), *a), in_dims=(0, 0, *dims))(
            self.params, self.buffers, *args
        )

    def model(self, r: int) -> torch.nn.Module:
        """Replica ``r`` as a module of its own (a copy, on the pack's device)."""
        device = next(iter(self.params.values())).device
        out = copy.deepcopy(self.base).to_empty(device=device)
        with torch.no_grad():  # parameters and every buffer, persistent or not
            for name, v in self.params.items():
                out.get_parameter(name).copy_(v[r])
            for name, v in self.buffers.items():
                out.get_buffer(name).copy_(v[r])
        return out


def run_packed(
    exps: dict,
    key: Callable,
    alone: Callable,
    together: Callable,
    kind: str,
    modules: tuple[str, ...],
    *,
    max_replicas: int = 64,
    progress: bool = True,
    use_cache: bool = True,
    device=None,
    pack_one: bool = False,
) -> dict[str, dict]:
    """Every run of ``exps`` ({name: configuration}), those of one ``key(configuration)`` trained together in
    packs of at most ``max_replicas`` by ``together(configurations, progress, device)`` (a list of results, one
    per configuration, in order); a run alone in its group by ``alone(configuration, progress=, use_cache=,
    device=)``, or with ``pack_one`` as a pack of one (it then rounds as a replica of any pack, as the packed
    runs it is set against do, not as the run alone). A pack is cached under ``kind`` and the configurations of all its runs (a packed run equals the
    run alone up to rounding, not bitwise, so the run alone's cache does not serve it); the groups keep the order
    of ``exps``, so the same runs make the same packs.

    Raises:
        ValueError: ``max_replicas`` below 1.
    """
    check_int("max_replicas", max_replicas, low=1)
    groups: dict[tuple, list[str]] = {}
    for name, e in exps.items():
        groups.setdefault(key(e), []).append(name)
    packs = [
        names[i : i + max_replicas] for names in groups.values() for i in range(0, len(names), max_replicas)
    ]
    out = {}
    for names in packs:
        if len(names) == 1 and not pack_one:
            out[names[0]] = alone(exps[names[0]], progress=progress, use_cache=use_cache, device=device)
            continue
        members = [exps[n] for n in names]
        results = cache.load_or_compute(
            kind,
            {"members": [dataclasses.asdict(e) for e in members]},
            lambda m=members: together(m, progress, device),
            modules,
            use_cache=use_cache,
        )
        out.update(zip(names, results))
    return {n: out[n] for n in exps}


def train(
    model,
    task,
    cfg: TrainConfig,
    rng: np.random.Generator | TrainingStream,
    evaluate: Callable[[int], dict] | None = None,
    eval_at: Iterable[int] = (),
    progress: bool = True,
    desc: str = "train",
    step_offset: int = 0,
    stop_on_nonfinite: bool = False,
    unfreeze: dict[int, list] | None = None,
) -> list[dict]:
    """Train ``model`` on batches of ``task`` drawn from ``rng``: a numpy Generator (drawn in order), or a
    :class:`~companion.data.streams.TrainingStream`, asked for the batch of each step (with ``step_offset``
    added, so that a second phase continues the first's steps).

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

    def before(step: int) -> None:
        for p in unfreeze.get(step, ()):
            p.requires_grad_(True)

    def draw(step: int):
        if isinstance(rng, TrainingStream):
            return rng.batch(task, cfg.batch, step + step_offset)
        return task.sample(rng, cfg.batch)

    out = fit(
        model,
        opt,
        cfg.steps,
        lambda step: batch_loss(model, draw(step), device),
        evaluate=None if evaluate is None else lambda step: evaluate(step + step_offset),
        eval_at=eval_at,
        before=before,
        nonfinite="stop" if stop_on_nonfinite else "raise",
        progress=progress,
        desc=desc,
    )
    evals = {row["step"]: row for row in out.evals}
    logs = [
        {**evals.get(step, {}), "step": step + step_offset, "loss": float(loss)}
        for step, loss in enumerate(out.losses)
    ]
    if out.diverged < float("inf"):
        return logs + [{"step": out.stopped + step_offset, "diverged": True}]
    if evaluate is not None:
        logs.append({**evals[cfg.steps], "step": cfg.steps + step_offset})
    return logs
