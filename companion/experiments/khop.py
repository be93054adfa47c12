"""k-hop reasoning: composing k in-context permutations, directly or from easy to hard (the talk, K1-K3).

The talk's last result (Wang, Nichani, Bietti, Damian, Hsu, Lee, Wu, COLT 2025):
gradient descent on k-hop data alone needs exp(k) samples or compute (a
statistical-query lower bound), while a curriculum from easy to hard, or a
mixture of hop counts, solves it with O(k), learning hops 1, 2, 4, ... in turn;
log2 k + 1 layers suffice. The slides give no sizes and no public code was
found, so this module builds the task as the paper's abstract defines it and
chooses the rest (the chapter says which choices are ours).

Task: :class:`companion.data.khop.KHopTask` (k in-context permutation tables after hidden ones, read at
position 0). Model: :class:`companion.models.hop.HopTransformer` (bidirectional, pre-LayerNorm, readout at
position 0); the default depth here is the paper's ceil(log2 k) + 1.

Training data (``data``): ``"direct"`` (every example has k hops), ``"mixture"``
(k' drawn from ``weights`` over 1..k, uniform by default) or ``"curriculum"``
(k' = the current stage, starting at 1 and moving to the next hop count once
the test accuracy at the current one reaches ``advance_at``) or ``"cumulative"`` (the same stages, but
stage s draws k' uniformly from the stages up to s, so the easier hop counts stay in the data). The stages
(``levels``) are every hop count 1, 2, ..., k (``"every"``, ours) or the powers of two 1, 2, 4, ..., k
(``"doubling"``, the slides' "hops 1, 2, 4, etc. are learned incrementally"; k a power of two). A training
example starts at table 1 (``starts="first"``), or at a table drawn uniformly from those from which its k' hops
fit (``"any"``: a one-hop example from table 3 composes sigma_3 o pi_3 alone, the other tables padding; ours, to
show every pi_i from the first stage on); test examples start at table 1. AdamW (weight decay 0), fresh batches;
test accuracy at every hop count every ``eval_every`` steps.

This module is the family's task, model and training (configurations, training and packs, runs, continuations
from a run's state). The talk's first chapter's comparison (``book/khop``: its members, summary and curves) and the
names every study's members share are :mod:`companion.experiments.khop_members`, kept apart so that editing what a
chapter reads re-keys no run. The recorded k = 4 studies' settings,
members and readers are :mod:`companion.experiments.khop_studies`; what a run's curves say (when each hop count
was learned, the move to the last stage, how a run ended there) is :mod:`companion.experiments.khop_curves`; the
probes of a trained model are :mod:`companion.experiments.khop_probes`. The other chapters' analyses are modules of their own:
:mod:`companion.experiments.khop_four_hops` (the talk's curriculum at k = 4), :mod:`companion.experiments.khop_starts`
and :mod:`companion.experiments.khop_stall` (our studies); the recordings are declared in
:mod:`companion.experiments.khop_recordings`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from companion import cache, config, train
from companion.config import check_choice, check_float, check_int
from companion.data import counter
from companion.data.khop import HopBatch, KHopTask
from companion.data.streams import TrainingStream
from companion.models.hop import HopBlock, HopTransformer, table_hidden

DATA = ("direct", "mixture", "curriculum", "cumulative")


LEVELS = ("every", "doubling")  # a curriculum's stages: 1, 2, ..., k or 1, 2, 4, ..., k


# a training example's first table: table 1, any from which its hops
# fit, any for one-hop examples and table 1 for longer ones, or table 1 for one-hop examples and any for longer ones
STARTS = ("first", "any", "one", "longer")


def hop_levels(levels: str, k: int) -> tuple[int, ...]:
    """The hop counts a curriculum's stages train on, in order.

    >>> hop_levels("every", 4), hop_levels("doubling", 8)
    ((1, 2, 3, 4), (1, 2, 4, 8))

    Raises:
        ValueError: an unknown ``levels``, or ``"doubling"`` with k not a power of two.
    """
    check_choice("levels", levels, LEVELS)
    if levels == "every":
        return tuple(range(1, k + 1))
    if k & (k - 1):
        raise ValueError(
            f"levels='doubling' with k={k}: allowed k a power of two (1, 2, 4, 8, ...), or levels='every'"
        )
    return tuple(2**i for i in range(k.bit_length()))


@dataclass(frozen=True)
class KHopExperiment(config.Profiled):
    """One run: the task (N, k), the model (d, depth, heads, mlp; ``hide_k_from``, blocks that never see table
    k) and the training data (direct, mixture, curriculum or cumulative; ``last_stage_data``: 0, one stream of
    batches throughout; r >= 1, the batches of the last stage, from the evaluation at which a curriculum moves to
    k hops, come from stream "last-stage-data-<r>" of its seed, so that the run is the same up to there and sees
    other data after; ``last_stage_delay``: the move to k hops comes at the first evaluation at least that many
    steps after the one at which the accuracy at the stage before k first reaches ``advance_at``, the steps between
    still on that stage, whatever the accuracy does then; earlier moves are not delayed; ``levels``: the stages,
    :func:`hop_levels`; ``starts``: "any" draws the first table of each training example with k' hops uniformly
    from 1..k - k' + 1, independently of everything else, where "first" always starts at table 1; "one" makes the
    same draws as "any" and keeps them for the one-hop examples only, the longer ones starting at table 1, so that
    its batches with one hop only are those of "any"; "longer" starts one-hop examples at table 1 and draws for the
    longer ones only, so that its batches with one hop only are those of "first"; the test sets start at table 1
    either way)."""

    profile: str = "quick"
    N: int = 8
    k: int = 4
    data: str = "mixture"
    weights: tuple = ()  # mixture: the distribution of k' over 1..k (empty: uniform)
    advance_at: float = 0.9  # curriculum: move to the next hop count at this test accuracy
    depth: int = 0  # 0: ceil(log2 k) + 1, the paper's
    d: int = 32
    heads: int = 4
    mlp: bool = False
    lr: float = 3e-3
    batch: int = 128
    steps: int = 4000
    eval_every: int = 100
    n_test: int = 1024
    seed: int = field(default_factory=config.book_seed)
    hide_k_from: tuple = ()  # blocks (from 1) whose keys never include table k, in training and when measured
    # curriculum, cumulative: r >= 1 draws the last stage's batches from stream r (0: none)
    last_stage_data: int = 0
    # curriculum, cumulative: move to k hops at the evaluation this many steps after the bar
    last_stage_delay: int = 0
    # curriculum, cumulative: stages 1, 2, ..., k ("every") or 1, 2, 4, ..., k ("doubling")
    levels: str = "every"
    # training examples start at table 1 ("first"), at any table from which they fit ("any"),
    # at any table with one hop and at table 1 with more ("one"), or the other way round ("longer")
    starts: str = "first"

    def __post_init__(self):
        config.get_profile(self.profile)
        check_int("N (values)", self.N, low=2)
        check_int("k (hops)", self.k, low=1)
        check_choice("data", self.data, DATA)
        check_int("d", self.d, low=1)
        check_int("batch", self.batch, low=1)
        check_int("steps", self.steps, low=1)
        check_int("eval_every", self.eval_every, low=1)
        check_int("n_test", self.n_test, low=1)
        check_int("depth", self.depth, low=0)
        check_float("lr", self.lr, 0.0, None, low_open=True)
        check_float("advance_at", self.advance_at, 0.0, 1.0, low_open=True)
        check_int("last_stage_data (stream)", self.last_stage_data, low=0)
        if self.last_stage_data and self.data not in ("curriculum", "cumulative"):
            raise ValueError(
                f"last_stage_data={self.last_stage_data} with data={self.data!r}: allowed 0 (one batch "
                "stream throughout), or data 'curriculum' or 'cumulative' (a run with stages)"
            )
        check_int("last_stage_delay (steps)", self.last_stage_delay, low=0)
        if self.last_stage_delay and self.data not in ("curriculum", "cumulative"):
            raise ValueError(
                f"last_stage_delay={self.last_stage_delay} with data={self.data!r}: allowed 0 (no "
                "stages to delay), or data 'curriculum' or 'cumulative' (a run with stages)"
            )
        hop_levels(self.levels, self.k)
        check_choice("starts", self.starts, STARTS)
        if self.levels != "every" and self.data not in ("curriculum", "cumulative"):
            raise ValueError(
                f"levels={self.levels!r} with data={self.data!r}: allowed 'every', or data "
                "'curriculum' or 'cumulative' (a run with stages)"
            )
        if not isinstance(self.hide_k_from, tuple):
            raise ValueError(
                f"hide_k_from={self.hide_k_from!r} is not a tuple: allowed a tuple of blocks in "
                f"1..{self.layers}"
            )
        if len(set(self.hide_k_from)) != len(self.hide_k_from):
            raise ValueError(
                f"hide_k_from={self.hide_k_from!r} names a block twice: allowed distinct blocks in "
                f"1..{self.layers}"
            )
        self.mixture()
        self.model()

    @property
    def layers(self) -> int:
        """The depth used: ``depth``, or ceil(log2 k) + 1."""
        return self.depth or math.ceil(math.log2(self.k)) + 1

    @property
    def stages(self) -> tuple[int, ...]:
        """The hop counts of a curriculum's stages (:func:`hop_levels`)."""
        return hop_levels(self.levels, self.k)

    def task(self) -> KHopTask:
        return KHopTask(self.N, self.k, self.seed)

    def mixture(self) -> np.ndarray:
        """The distribution of k' over 1..k that ``data="mixture"`` draws from.

        Raises:
            ValueError: ``weights`` is not a distribution over 1..k (its length, a negative entry, or a sum
                other than 1).
        """
        if not self.weights:
            return np.full(self.k, 1.0 / self.k)
        w = np.asarray(self.weights, dtype=float)
        if w.ndim != 1 or len(w) != self.k:
            raise ValueError(
                f"weights={self.weights!r} has {w.size} entries: allowed one per hop count 1..{self.k}"
            )
        if not np.isfinite(w).all() or w.min() < 0 or abs(w.sum() - 1) > 1e-9:
            raise ValueError(
                f"weights={self.weights!r} is not a distribution: allowed entries >= 0 summing to 1 "
                f"(they sum to {w.sum():g})"
            )
        return w

    def model(self) -> HopTransformer:
        """The freshly initialised model (table k hidden from the blocks of ``hide_k_from``).

        Raises:
            ValueError: a block of ``hide_k_from`` outside 1..depth.
        """
        return HopTransformer(
            self.task(), self.d, self.layers, self.heads, self.mlp, self.seed, self.hide_k_from
        )


MODULES = ("companion.experiments.khop",)


def first_batch(exp: KHopExperiment):
    """The first training batch of ``exp`` (curriculum stage 1), drawn as training draws it, by the sampler in
    force."""
    return _batches(exp, 1).batch(HopTraining(exp, exp.task(), 1), exp.batch, 0)


def run(exp: KHopExperiment, *, device=None, progress: bool = True, use_cache: bool = True) -> dict:
    """Train (or load) ``exp``: ``"step"`` (every evaluation), ``"acc"`` ((evaluations, k): test accuracy at
    each hop count), ``"stage"`` (the curriculum's hop count at each evaluation; k for direct, 0 for mixture),
    ``"loss"`` (the training loss at each evaluation step), ``"N"``, ``"seconds"``, ``"device"`` and ``"state"``
    (the trained model's state dict, on the CPU)."""
    return cache.load_or_compute(
        "khop", exp, lambda: train_run(exp, progress, device), MODULES, use_cache=use_cache
    )


def train_run(exp: KHopExperiment, progress: bool, device=None, keep: tuple = ()) -> dict:
    """:func:`run`'s training; ``keep``: also return (``"kept"``) the model's state dict after each of these
    numbers of training steps on the last stage (0: where it moves there), as a run of exactly that many steps
    would end."""
    device = config.get_device(device)
    task, tests = exp.task(), _test_sets(exp, device)
    model = exp.model().to(device)
    # the curriculum's stage and batches; the step of the move to the last stage, once its bar is met
    # (``last_stage_delay`` later); the step at which training on the last stage starts; the last loss
    now = {
        "stage": 1,
        "data": _batches(exp, 1, device),
        "move_at": None,
        "moved": None,
        "loss": torch.tensor(float("nan")),
    }
    kept = {}  # the states of ``keep``

    def evaluate(step: int) -> dict:
        row = _advance(exp, now, step, hop_accuracy(model, tests), float(now["loss"].detach()))
        if step == exp.steps:
            snapshot(step)
        return row

    def snapshot(step: int) -> None:
        if now["moved"] is not None and step - now["moved"] in keep:
            kept[step - now["moved"]] = _snapshot(model)

    def loss_at(step: int) -> torch.Tensor:
        now["loss"] = _batch_loss(model, task, exp, now["stage"], now["data"], step, device)
        return now["loss"]

    out = train.fit(
        model,
        torch.optim.AdamW(model.parameters(), lr=exp.lr, weight_decay=0.0),
        exp.steps,
        loss_at,
        evaluate=evaluate,
        eval_at=lambda step: step % exp.eval_every == 0,
        before=snapshot,
        nonfinite="continue",
        progress=progress,
        desc=f"{exp.k}-hop {exp.data}",
    )
    res = {
        "step": out.series("step"),
        "acc": out.series("acc"),
        "stage": out.series("stage"),
        "loss": out.series("loss"),
        "N": exp.N,
        "seconds": out.seconds,
        "device": config.device_name(device),
        "state": {k: v.cpu() for k, v in model.state_dict().items()},
    }
    return {**res, "kept": kept} if keep else res


def _advance(exp: KHopExperiment, now: dict, step: int, acc: list[float], loss: float) -> dict:
    """The evaluation row of ``step`` (test accuracies ``acc``, the last training loss ``loss``, the stage), and
    the curriculum's move that the evaluation decides: ``now`` (the run's stage, training stream, and the steps of
    the move to the last stage, planned and made) is updated in place."""
    stage = now["stage"]
    row = {"acc": acc, "loss": loss, "stage": {"direct": exp.k, "mixture": 0}.get(exp.data, stage)}
    if exp.data in ("curriculum", "cumulative") and acc[stage - 1] >= exp.advance_at and stage < exp.k:
        after = exp.stages[exp.stages.index(stage) + 1]
        if after < exp.k:
            now["stage"] = after
        elif now["move_at"] is None:
            now["move_at"] = step + exp.last_stage_delay
    if now["move_at"] is not None and now["move_at"] <= step and now["stage"] < exp.k:
        now["stage"], now["moved"] = exp.k, step
        if exp.last_stage_data:
            now["data"] = _batches(exp, exp.k, now["data"].device)
    return row


# what the runs of one pack share: the model's shape, the batch and test sizes, the number of steps; the rest (seed,
# data, mixture weights, curriculum, learning rate, evaluation interval, starts) is each replica's own
PACK_SHARED = ("N", "k", "layers", "d", "heads", "mlp", "hide_k_from", "batch", "n_test", "steps")


def pack_key(exp: KHopExperiment) -> tuple:
    """The runs with equal keys can train as one pack (:data:`PACK_SHARED`)."""
    return tuple(getattr(exp, f) for f in PACK_SHARED)


def _train_pack(exps: list[KHopExperiment], progress: bool, device=None) -> list[dict]:
    """The runs ``exps`` (of one :func:`pack_key`) trained as one computation (:class:`~companion.train.Pack`,
    :class:`~companion.train.Replicas` with AdamW): one result per run, as :func:`run` gives, plus ``"pack"``.
    Each replica draws its batches from its own seed's streams at its own curriculum stage, has its own test sets,
    learning rate and evaluation interval, and moves through its curriculum on its own accuracies; losses are
    summed over replicas, never averaged. A non-finite loss is kept, as in a run alone. The attention is computed
    explicitly (``HopBlock.fused`` False), so a packed run equals the run alone up to rounding. Over thousands
    of steps that rounding can decide a curriculum run's outcome, as any change of rounding can (the thread
    count does too): the seed study's runs packed and alone part within 1100 steps, and under the counter
    sampler seed 0 stays on three hops for 8000 steps alone but learns all four packed, both on one thread
    (benchmarks/khop_pack_divergence.py; the khop_reseed and khop_seeds recordings), so a study that needs
    the run that stalls alone cannot take it from a packed recording."""
    if len({pack_key(e) for e in exps}) != 1:
        raise ValueError(f"these runs differ in one of {PACK_SHARED} and cannot share a pack")
    device = config.get_device(device)
    first, R = exps[0], len(exps)
    tasks = [e.task() for e in exps]
    tests = [_test_sets(e, device) for e in exps]  # per replica, per hop count: (tokens, mask, answer)
    tests = [tuple(torch.stack([t[h][i] for t in tests]) for i in range(3)) for h in range(first.k)]
    pack = train.Pack([e.model().to(device) for e in exps])
    for blk in pack.base.blocks:
        blk.fused = False
    reps = train.Replicas(pack.parameters(), "adamw", lr=[e.lr for e in exps], weight_decay=0.0)
    now = [{"stage": 1, "data": _batches(e, 1, device), "move_at": None, "moved": None} for e in exps]
    last = {"loss": torch.full((R,), float("nan"), device=device)}
    evals: list[list[dict]] = [[] for _ in exps]

    def loss_at(step: int) -> torch.Tensor:
        t, m, y = (
            torch.stack(x)
            for x in zip(
                *(_batch(e, k, s["stage"], s["data"], step, device) for e, k, s in zip(exps, tasks, now))
            )
        )
        last["loss"] = pack.map(
            lambda model, t, m, y: F.cross_entropy(model(t, m), y), t, m, y, each=(0, 1, 2)
        )
        return last["loss"]

    def correct(model, t, m, y) -> torch.Tensor:
        return (model(t, m).argmax(1) == y).float().mean()

    def evaluate(step: int) -> None:
        due = [r for r, e in enumerate(exps) if step % e.eval_every == 0 or step == first.steps]
        if due:
            with torch.no_grad():
                acc = torch.stack([pack.map(correct, *test, each=(0, 1, 2)) for test in tests], 1).tolist()
            loss = last["loss"].detach().tolist()
            for r in due:
                evals[r].append({"step": step, **_advance(exps[r], now[r], step, acc[r], loss[r])})

    out = train.fit(
        None,
        reps,
        first.steps,
        loss_at,
        evaluate=evaluate,
        eval_at=lambda step: any(step % e.eval_every == 0 for e in exps),
        nonfinite="continue",
        progress=progress,
        desc=f"{first.k}-hop pack of {R}",
    )
    pack_info = {"replicas": R, "packed": "runs of one shape (khop.PACK_SHARED)"}
    results = []
    for r, e in enumerate(exps):
        rows = evals[r]
        results.append(
            {
                **{key: np.asarray([row[key] for row in rows]) for key in ("step", "acc", "stage", "loss")},
                "N": e.N,
                "seconds": out.seconds / R,
                "device": config.device_name(device),
                "state": {k: v.cpu() for k, v in pack.model(r).state_dict().items()},
                "pack": pack_info,
            }
        )
    return results


def run_many(
    exps: dict[str, KHopExperiment],
    progress: bool = True,
    use_cache: bool = True,
    device=None,
    max_replicas: int = 16,
    pack_one: bool = False,
) -> dict[str, dict]:
    """:func:`run` for each of ``exps``, the runs of one :func:`pack_key` trained together in packs of at most
    ``max_replicas`` (:func:`companion.train.run_packed`: a packed run is cached under its pack and equals the run
    alone up to rounding); with ``pack_one`` a run alone in its group too is trained as a pack (of one).

    Raises:
        ValueError: ``max_replicas`` below 1.
    """
    return train.run_packed(
        exps,
        pack_key,
        run,
        _train_pack,
        "khop-pack",
        MODULES,
        max_replicas=max_replicas,
        progress=progress,
        use_cache=use_cache,
        device=device,
        pack_one=pack_one,
    )


def _snapshot(model: torch.nn.Module) -> dict:
    """A copy of the model's state dict, on the CPU."""
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def _batches(exp: KHopExperiment, stage: int, device=None) -> TrainingStream:
    """The training stream at curriculum ``stage``: stream "train-data" of the run's seed, or on the last stage
    of a run with ``last_stage_data`` r >= 1, stream "last-stage-data-<r>" (fresh)."""
    name = (
        f"last-stage-data-{exp.last_stage_data}" if exp.last_stage_data and stage == exp.k else "train-data"
    )
    return TrainingStream(exp.seed, name, device=device)


@dataclass(frozen=True)
class HopTraining:
    """``exp``'s training examples at curriculum ``stage`` as a task a training stream draws from: their hop
    counts (:func:`training_hops`), then their start tables (:func:`training_starts`), then the examples of
    ``task``; ``sample`` from a numpy generator (all three from it, in that order), ``draw`` counter-based (the
    hop counts and starts from their own draws of (seed, stream, step), with the same distributions)."""

    exp: KHopExperiment
    task: KHopTask
    stage: int

    def sample(self, rng: np.random.Generator, batch: int) -> HopBatch:
        hops = training_hops(self.exp, self.stage, rng)
        return self.task.sample(rng, hops, training_starts(self.exp, hops, rng))

    def draw(self, seeds, steps, batch: int, *, stream: int = 0, device=None) -> HopBatch:
        exp, k = self.exp, self.exp.k
        draws = counter.Draws("khop", seeds, steps, stream, batch, device)
        b = draws.bits("hop counts", 1)[..., 0]
        if exp.data == "mixture":
            hops = (
                counter.choose(counter.flat_cdf(exp.mixture(), draws.device), k, torch.zeros_like(b), b) + 1
            )
        elif exp.data == "cumulative":
            so_far = torch.as_tensor([h for h in exp.stages if h <= self.stage], device=draws.device)
            hops = so_far[counter.uniform_int(b, len(so_far))]
        else:
            hops = torch.full_like(b, k if exp.data == "direct" else self.stage)
        starts = None
        if exp.starts != "first":
            drawn = 1 + ((draws.bits("starts", 1)[..., 0] * (k - hops + 1)) >> 32)  # uniform in 1..k - k' + 1
            one = hops == 1
            starts = {"any": drawn, "one": torch.where(one, drawn, 1), "longer": torch.where(one, 1, drawn)}[
                exp.starts
            ]
        return self.task.draw(seeds, steps, hops, starts, stream=stream, device=device)


def training_hops(exp: KHopExperiment, stage: int, rng: np.random.Generator) -> np.ndarray:
    """(batch,): the hop counts k' of one training batch, given the curriculum ``stage`` (ignored by direct and
    mixture data)."""
    if exp.data == "mixture":
        return rng.choice(exp.k, size=exp.batch, p=exp.mixture()) + 1
    # uniform over the stages so far (every: the same draws as integers(1, stage + 1))
    if exp.data == "cumulative":
        so_far = np.asarray([h for h in exp.stages if h <= stage])
        return so_far[rng.integers(0, len(so_far), exp.batch)]
    return np.full(exp.batch, exp.k if exp.data == "direct" else stage)


def training_starts(exp: KHopExperiment, hops: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
    """(batch,): the first table of each training example with hop counts ``hops``, uniform over the tables from
    which its hops fit (``starts="any"``), or that for the one-hop examples and table 1 for the others, from the
    same draws (``"one"``), or table 1 for the one-hop examples and a draw for the others only (``"longer"``: a
    batch of one-hop examples draws nothing); None (table 1, nothing drawn) for ``starts="first"``."""
    if exp.starts == "first":
        return None
    if exp.starts == "longer":
        out, longer = np.ones_like(hops), hops > 1
        out[longer] = rng.integers(1, exp.k - hops[longer] + 2)
        return out
    drawn = rng.integers(1, exp.k - hops + 2)
    return drawn if exp.starts == "any" else np.where(hops == 1, drawn, 1)


def _batch_loss(
    model: HopTransformer,
    task: KHopTask,
    exp: KHopExperiment,
    stage: int,
    data: TrainingStream,
    step: int,
    device,
    hide: torch.Tensor | None = None,
) -> torch.Tensor:
    """The loss of training batch ``step`` of stream ``data``, ``exp``'s examples at curriculum ``stage``
    (:class:`HopTraining`; ``hide``: as the model's forward)."""
    t, m, y = _batch(exp, task, stage, data, step, device)
    return F.cross_entropy(model(t, m, hide=hide), y)


def _batch(exp: KHopExperiment, task: KHopTask, stage: int, data: TrainingStream, step: int, device):
    """Training batch ``step`` of stream ``data`` (tokens, mask, answers): ``exp``'s examples at curriculum
    ``stage`` (:class:`HopTraining`)."""
    return as_tensors(data.batch(HopTraining(exp, task, stage), exp.batch, step), device)


def _test_sets(exp: KHopExperiment, device) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The run's test sets, one per hop count 1..k (``n_test`` examples each, stream "test-data" of its seed)."""
    rng = np.random.default_rng(config.seed_streams(exp.seed, ["test-data"])["test-data"])
    return [as_tensors(exp.task().sample(rng, np.full(exp.n_test, h)), device) for h in range(1, exp.k + 1)]


def hop_accuracy(model: HopTransformer, tests: list, hide: torch.Tensor | None = None) -> list[float]:
    """The model's test accuracy on each of :func:`_test_sets` (``hide``: as the model's forward)."""
    with torch.no_grad():
        return [float((model(t, m, hide=hide).argmax(1) == y).float().mean()) for t, m, y in tests]


def as_tensors(b: HopBatch, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (
        torch.as_tensor(b.tokens, device=device),
        torch.as_tensor(b.mask, device=device),
        torch.as_tensor(b.answer, device=device),
    )


# --- leaving the stall: training continued from the stalled run's state (recorded: ``khop_escape``) ---

ESCAPE_STEPS = 3000  # steps of each continuation


ESCAPE_EVERY = 250  # its evaluation interval


def continue_training(
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
    data = TrainingStream(exp.seed, "continue-data", device=device)
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
    out = train.fit(
        model,
        torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0),
        steps,
        lambda step: _batch_loss(model, task, cont, exp.k, data, step, device, mask),
        evaluate=lambda step: {"acc": hop_accuracy(model, tests, mask)},
        eval_at=lambda step: step % eval_every == 0,
        nonfinite="continue",
        progress=progress,
        desc=f"continued, {data}, lr {lr:g}",
    )
    return {
        "step": out.series("step"),
        "acc": out.series("acc"),
        "stage": np.full(len(out.evals), exp.k),
        "seconds": out.seconds,
    }


def _fresh_block(exp: KHopExperiment, stream: str) -> HopBlock:
    """A newly initialised block of ``exp``'s width, from stream ``stream`` of its seed."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(config.seed_streams(exp.seed, [stream])[stream].generate_state(1)[0]))
        return HopBlock(exp.d, exp.heads, exp.mlp)
