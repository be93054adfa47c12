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

This module is the family's shared part (configurations, training and packs, runs, the probes, continuations and
the readers of recorded runs), and all the talk's first chapter (``book/khop``) reads; the other chapters'
analyses are modules of their own: :mod:`companion.experiments.khop_four_hops` (the talk's curriculum at k = 4),
:mod:`companion.experiments.khop_starts` and :mod:`companion.experiments.khop_stall` (our studies); the recordings
are declared in :mod:`companion.experiments.khop_recordings`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from companion import cache, config, report, train
from companion import recorded as recorded_files  # the recorded files (this module's `recorded` reads one)
from companion.config import check_choice, check_float, check_int
from companion.data.khop import HopBatch, KHopTask
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
    seed: int = 0
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
    """The first training batch of ``exp`` (curriculum stage 1), drawn as training draws it."""
    rng = _batches(exp, 1)
    hops = training_hops(exp, 1, rng)
    return exp.task().sample(rng, hops, training_starts(exp, hops, rng))


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
        "rng": _batches(exp, 1),
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
        now["loss"] = _batch_loss(model, task, exp, now["stage"], now["rng"], device)
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
    the curriculum's move that the evaluation decides: ``now`` (the run's stage, batch generator, and the steps of
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
            now["rng"] = _batches(exp, exp.k)
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
    explicitly (``HopBlock.fused`` False), so a packed run equals the run alone up to rounding."""
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
    now = [{"stage": 1, "rng": _batches(e, 1), "move_at": None, "moved": None} for e in exps]
    last = {"loss": torch.full((R,), float("nan"), device=device)}
    evals: list[list[dict]] = [[] for _ in exps]

    def loss_at(step: int) -> torch.Tensor:
        t, m, y = (
            torch.stack(x)
            for x in zip(*(_batch(e, k, s["stage"], s["rng"], device) for e, k, s in zip(exps, tasks, now)))
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
) -> dict[str, dict]:
    """:func:`run` for each of ``exps``, the runs of one :func:`pack_key` trained together in packs of at most
    ``max_replicas`` (:func:`companion.train.run_packed`: a packed run is cached under its pack and equals the run
    alone up to rounding).

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
    )


def _snapshot(model: torch.nn.Module) -> dict:
    """A copy of the model's state dict, on the CPU."""
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def _batches(exp: KHopExperiment, stage: int) -> np.random.Generator:
    """The generator of the training batches at curriculum ``stage``: stream "train-data" of the run's seed, or
    on the last stage of a run with ``last_stage_data`` r >= 1, stream "last-stage-data-<r>" (fresh)."""
    name = (
        f"last-stage-data-{exp.last_stage_data}" if exp.last_stage_data and stage == exp.k else "train-data"
    )
    return np.random.default_rng(config.seed_streams(exp.seed, [name])[name])


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
    rng: np.random.Generator,
    device,
    hide: torch.Tensor | None = None,
) -> torch.Tensor:
    """The loss of a fresh batch of ``exp``'s training examples at curriculum ``stage``: their hop counts
    (:func:`training_hops`), then their start tables (:func:`training_starts`), then the examples, all from ``rng``
    (``hide``: as the model's forward)."""
    t, m, y = _batch(exp, task, stage, rng, device)
    return F.cross_entropy(model(t, m, hide=hide), y)


def _batch(exp: KHopExperiment, task: KHopTask, stage: int, rng: np.random.Generator, device):
    """A fresh batch of ``exp``'s training examples at curriculum ``stage`` (tokens, mask, answers): their hop
    counts (:func:`training_hops`), then their start tables (:func:`training_starts`), then the examples."""
    hops = training_hops(exp, stage, rng)
    return as_tensors(task.sample(rng, hops, training_starts(exp, hops, rng)), device)


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


# --- the chapter's comparison: one task, the same budget, four kinds of training data and one shallow model ---

SIZES = {
    # quick: k = 2, a CPU runs each member in about 20 s
    "quick": dict(N=8, k=2, d=32, steps=1500, eval_every=50),
    # full: k = 8 with log2 k + 1 = 4 layers (our guess at a GPU size: the slides give none)
    "full": dict(N=16, k=8, d=128, batch=256, steps=30000, eval_every=250, n_test=2048),
}


# the single-layer run gets this many times the others' steps: its failure is not the budget's
SHALLOW_STEPS = 4


def members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """The chapter's runs of a profile, by name: ``"direct"`` (k hops only), ``"mixture"`` (k' uniform),
    ``"curriculum"`` (1, 2, ..., k in turn), ``"cumulative"`` (stage s draws k' from 1..s) and
    ``"mixture, 1 layer"`` (the mixture with a single layer, fewer than log2 k + 1 when k >= 2, given
    :data:`SHALLOW_STEPS` times the budget). Same task, model width and seed; the same budget but for the
    single layer's."""
    size = SIZES[config.get_profile(profile)]
    out = {data: KHopExperiment.for_profile(profile, data=data, **size) for data in DATA}
    long = {**size, "steps": SHALLOW_STEPS * size["steps"], "eval_every": SHALLOW_STEPS * size["eval_every"]}
    out["mixture, 1 layer"] = KHopExperiment.for_profile(profile, data="mixture", depth=1, **long)
    return out


# a member's departures from a study-wide override (``python -m companion record khop --set ...``), by name
# runs this multiple of the others' steps and evaluation interval
SCALED = {"mixture, 1 layer": SHALLOW_STEPS}


# the evaluation interval of the exploratory run that learned four hops (see the chapter)
EXPLORED_EVERY = 250


EXPLORED = f"seed 0, every {EXPLORED_EVERY}"  # its member in the seed study (:func:`seed_members`)


# keeps these settings of its own (and a "seed N, every M" its interval)
KEPT = {"mixture, 1 layer": ("depth",)}


RESEED_SUFFIX = ", last-stage data "  # a run of a member with other batches on its last stage (reseed_name)


def member_overrides(name: str, overrides: dict) -> dict:
    """The overrides of a whole study (``python -m companion record khop --set ...``) as member ``name`` takes
    them: a member in :data:`SCALED` multiplies ``steps`` and ``eval_every``, and one in :data:`KEPT` keeps
    those settings of its own (the single-layer run keeps its one layer: a ``depth`` override is the others'), as
    does a member named by its interval (:func:`companion.experiments.khop_four_hops.interval_name`, :data:`EXPLORED` among them) its ``eval_every``,
    and a run of any of them with other last-stage data (:func:`companion.experiments.khop_stall.reseed_name`).

    >>> member_overrides("mixture, 1 layer", {"steps": 100, "k": 4, "depth": 4})
    {'steps': 400, 'k': 4}
    >>> member_overrides("mixture", {"steps": 100, "depth": 4})
    {'steps': 100, 'depth': 4}
    >>> member_overrides("seed 0, every 250", {"steps": 100, "eval_every": 100})
    {'steps': 100}
    >>> member_overrides("seed 0, every 250, last-stage data 2", {"steps": 100, "eval_every": 100})
    {'steps': 100}
    """
    base = name.split(RESEED_SUFFIX)[0]
    m = SCALED.get(base, 1)
    kept = KEPT.get(base, ("eval_every",) if interval_of(base) else ())
    return {
        key: m * v if key in ("steps", "eval_every") else v for key, v in overrides.items() if key not in kept
    }


def run_sizes(r: dict, prefix: str = "") -> dict:
    """The entries that every study's summary shares, read off one of its runs: hops, steps and chance."""
    return {
        f"{prefix}k": (int(np.asarray(r["acc"]).shape[1]), "hops"),
        f"{prefix}steps": (int(r["step"][-1]), "training steps of every run"),
        f"{prefix}chance": (1.0 / r["N"], "chance accuracy, 1 / N"),
    }


def summary(runs: dict[str, dict], level: float = 0.9) -> report.Summary:
    """The K1-K3 numbers of a finished :func:`members` set (every run at the same k, N and budget): the final
    test accuracy at k hops of each kind of data, the lowest final accuracy over the hop counts (a curriculum
    can forget the easy ones), when the mixture learns hop 1 and hop k (first evaluation at ``level``), and the
    best accuracy that direct training and the single-layer mixture ever reach at k hops."""
    acc = {name: np.asarray(r["acc"]) for name, r in runs.items()}
    mix_at = learned_at(runs["mixture"], level)
    out = {
        **run_sizes(runs["mixture"]),
        "N": (int(runs["mixture"]["N"]), "values"),
        "level": (level, "accuracy at which a hop count counts as learned"),
        "direct_best": (
            float(acc["direct"][:, -1].max()),
            "direct (k hops only): best test accuracy at k hops",
        ),
    }
    for name in ("mixture", "curriculum", "cumulative"):
        out[f"{name}_final"] = (float(acc[name][-1, -1]), f"{name}: final test accuracy at k hops")
        out[f"{name}_min"] = (
            float(acc[name][-1].min()),
            f"{name}: lowest final test accuracy over 1..k hops",
        )
        out[f"{name}_learned"] = (
            int((acc[name][-1] >= level).sum()),
            f"{name}: hop counts at or above the level at the end",
        )
    out |= {
        "mix_hop1_at": (float(mix_at[0]), "mixture: first step with hop 1 learned"),
        "mix_hopk_at": (float(mix_at[-1]), "mixture: first step with hop k learned"),
        "hop_gap": (float(mix_at[-1] - mix_at[0]), "mixture: steps from hop 1 learned to hop k learned"),
        "curriculum_hopk_at": (
            float(learned_at(runs["curriculum"], level)[-1]),
            "curriculum: first step with hop k learned",
        ),
        "cumulative_hopk_at": (
            float(learned_at(runs["cumulative"], level)[-1]),
            "cumulative: first step with hop k learned",
        ),
        "cumulative_stagek_at": (
            last_stage_at(runs["cumulative"]),
            "cumulative: the step at which it moved to its last stage (k hops)",
        ),
    }
    shallow = acc["mixture, 1 layer"][:, -1]
    out |= {
        "shallow_steps": (
            int(runs["mixture, 1 layer"]["step"][-1]),
            "mixture with one layer: training steps",
        ),
        "shallow_best": (float(shallow.max()), "mixture with one layer: best test accuracy at k hops"),
        "shallow_half": (
            float(shallow[: len(shallow) // 2 + 1].max()),
            "mixture with one layer: best test accuracy at k hops over the first half of training",
        ),
        "depth_gap": (
            float(acc["mixture"][-1, -1] - shallow.max()),
            "mixture: final accuracy at k hops with log2 k + 1 layers minus the best with one layer",
        ),
    }
    return report.Summary(out)


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


def last_stage_wait(r: dict, level: float = 0.9) -> float:
    """The steps a run trains on its last stage before its k-hop accuracy first reaches ``level`` (inf: never).

    >>> last_stage_wait({"step": np.array([0, 100, 200]), "stage": np.array([1, 2, 2]),
    ...                  "acc": np.array([[0.1, 0.1], [0.95, 0.2], [1.0, 0.95]])})
    200.0
    """
    at = float(learned_at(r, level)[-1])
    return at - last_stage_at(r) if np.isfinite(at) else math.inf


def curves(runs: dict[str, dict]) -> dict:
    """What a recorded file keeps of each run: the evaluation steps, the accuracy at every hop count, the
    curriculum stage and the training loss."""
    return {key: {name: r[key] for name, r in runs.items()} for key in ("step", "acc", "stage", "loss")}


def learned_cells(r: dict, level: float) -> tuple[str, str]:
    """A run's table cells: the step each hop count is first learned (``-`` never) and the final accuracies."""
    at = ", ".join("-" if not np.isfinite(s) else str(int(s)) for s in learned_at(r, level))
    return at, ", ".join(f"{a:.2f}" for a in np.asarray(r["acc"])[-1])


LEARNED_HEADER = ["run", "data", "layers", "learned at (steps), hops 1..k", "final accuracy, hops 1..k"]


def learned_rows(runs: dict[str, dict], members: dict[str, KHopExperiment], level: float = 0.9) -> list[list]:
    """One row per run: its data, depth, the step each hop count is first learned (``-`` never) and the final
    accuracies."""
    return [
        [name, members[name].data, members[name].layers, *learned_cells(r, level)] for name, r in runs.items()
    ]


# --- recorded runs at a larger k (``python -m companion record khop --profile quick --set k=4 ...``) ---

RECORDED_K = 4  # the recorded CPU study beside the live runs: the quick members at k = 4, longer


RECORDED_SETTINGS = {"k": RECORDED_K, "steps": 8000, "eval_every": 100}


# the same study with one more layer than log2 k + 1 (the single-layer run keeps its one layer)
RECORDED_DEEPER = {**RECORDED_SETTINGS, "depth": math.ceil(math.log2(RECORDED_K)) + 2}


def recorded(settings: dict | None = None, experiment: str = "khop"):
    """A recorded CPU study: the quick profile's members (``experiment="khop"``; ``"khop_seeds"``: the
    :func:`seed_members`) with ``settings`` (default :data:`RECORDED_SETTINGS`; :data:`RECORDED_DEEPER`,
    :data:`SEED_SETTINGS`), the latest file.

    Raises:
        ValueError: none is recorded (the message gives the command that records it).
    """
    return recorded_files.latest(experiment, "quick", RECORDED_SETTINGS if settings is None else settings)


def recorded_runs(rec) -> tuple[dict[str, dict], dict[str, KHopExperiment]]:
    """A recorded study's runs (as :func:`run` returns them, curves only) and their configurations."""
    from companion.experiments.khop_recordings import recordables  # declared apart, read back here

    members = recordables()[rec.experiment].build(rec.profile, rec.settings())
    c = rec.curves
    runs = {
        name: {
            "step": np.asarray(c["step"][name]),
            "acc": np.asarray(c["acc"][name]),
            "stage": np.asarray(c["stage"][name]),
            "loss": np.asarray(c["loss"][name], dtype=float),
            "N": members[name].N,
        }
        for name in members
    }
    return runs, members


def recorded_summary(rec, prefix: str = "rec_", minutes_key: str = "minutes") -> report.Summary:
    """The chapter's summary of a recorded study (:func:`summary`, or :func:`companion.experiments.khop_four_hops.seeds_summary`), recomputed from
    its curves, its names prefixed (to glue beside the live ones), with its training time (``prefix +
    minutes_key``)."""
    runs, _ = recorded_runs(rec)
    from companion.experiments.khop_recordings import recordables

    return rec.as_summary(minutes_key, recordables()[rec.experiment].summary(runs), prefix)


# --- several seeds of the cumulative curriculum at k = 4 with one more layer (recorded: ``record khop_seeds``) ---

SEEDS = (0, 1, 2)


SEED_SETTINGS = {"k": RECORDED_K, "steps": 16000, "eval_every": 100, "depth": RECORDED_DEEPER["depth"]}


def seed_name(seed: int) -> str:
    """A seed study member's name: ``"seed 0"``, ..."""
    return f"seed {seed}"


def seed_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """The cumulative curriculum of :func:`members` over :data:`SEEDS` (``"seed 0"``, ...; the seed fixes the
    hidden permutations, the initialisation and the data), and seed 0 again with its stages advanced (and its
    accuracy measured) every :data:`EXPLORED_EVERY` steps (:data:`EXPLORED`, which keeps that interval under a
    study-wide override)."""
    size = SIZES[config.get_profile(profile)]
    out = {
        seed_name(s): KHopExperiment.for_profile(profile, data="cumulative", **{**size, "seed": s})
        for s in SEEDS
    }
    out[EXPLORED] = KHopExperiment.for_profile(
        profile, data="cumulative", **{**size, "seed": 0, "eval_every": EXPLORED_EVERY}
    )
    return out


def seed_rows(runs: dict[str, dict], members: dict[str, KHopExperiment], level: float = 0.9) -> list[list]:
    """:func:`learned_rows` of a seed study with each run's seed, evaluation interval and the step it moved
    to its last stage."""
    rows = []
    for name, r in runs.items():
        at, final = learned_cells(r, level)
        rows.append(
            [name, members[name].seed, members[name].eval_every, at, f"{last_stage_at(r):.0f}", final]
        )
    return rows


SEED_HEADER = [
    "run",
    "seed",
    "advances every",
    "learned at (steps), hops 1..k",
    "on the last stage from",
    "final accuracy, hops 1..k",
]


# the longest wait for four hops so far is about 4000 steps
INTERVAL_SETTINGS = SEED_SETTINGS | {"steps": 10000}


def interval_of(name: str) -> tuple[int, int] | None:
    """(seed, interval) of an :func:`companion.experiments.khop_four_hops.interval_name`, None for another name.

    >>> interval_of("seed 3, every 100"), interval_of("seed 3")
    ((3, 100), None)
    """
    parts = name.split(", every ")
    if len(parts) != 2 or not parts[0].startswith("seed ") or not (parts[0][5:] + parts[1]).isdigit():
        return None
    return int(parts[0][5:]), int(parts[1])


def seed_interval(name: str) -> tuple[int, int]:
    """(seed, interval) of a run of the seed or interval studies: an :func:`companion.experiments.khop_four_hops.interval_name`, or a
    :func:`seed_name`, which advances every :data:`SEED_SETTINGS`' interval.

    >>> seed_interval("seed 3, every 250"), seed_interval("seed 1")
    ((3, 250), (1, 100))
    """
    return interval_of(name) or (int(name[5:]), SEED_SETTINGS["eval_every"])


def truncated(r: dict, steps: int) -> dict:
    """A run's curves up to step ``steps`` (what a run of that many steps records, for a run whose training does
    not depend on its budget, as this module's do).

    Raises:
        ValueError: the run did not train that long.
    """
    step = np.asarray(r["step"])
    if steps > step[-1]:
        raise ValueError(f"steps={steps} is beyond the run's last evaluation {int(step[-1])}")
    keep = step <= steps
    return {**r, **{key: np.asarray(r[key])[keep] for key in ("step", "acc", "stage", "loss")}}


def seed_list(seeds) -> str:
    """Seeds as the text names them: ``"0, 2"``, ``"none"``."""
    return ", ".join(str(s) for s in sorted(seeds)) or "none"


def paired_rows(groups: list[dict[int, dict]], level: float = 0.9) -> list[list]:
    """One row per seed of several studies ({seed: run} each, in the columns' order): in each, the step each
    hop count is first learned, the move to the last stage ("-": never) and the final accuracies ("(not run)"
    where a study lacks the seed)."""
    rows = []
    for s in sorted(set().union(*groups)):
        row = [s]
        for runs in groups:
            r = runs.get(s)
            if r is None:
                row += ["(not run)"] * 3
            else:
                at, final = learned_cells(r, level)
                move = last_stage_at(r)
                row += [at, f"{move:.0f}" if np.isfinite(move) else "-", final]
        rows.append(row)
    return rows


def paired_header(titles) -> list[str]:
    """:func:`paired_rows`' header, the studies titled ``titles``."""
    return [
        "seed",
        *[
            f"{t}: {c}"
            for t in titles
            for c in ("learned at, hops 1..k", "last stage from", "final, hops 1..k")
        ],
    ]


INTERVAL_LONG_SETTINGS = INTERVAL_SETTINGS | {"steps": 20000}


# --- the same seeds with one setting changed: twice the width (``record khop_wide``), a third of the step size
# (``record khop_lr``), the stages 1, 2, 4 (``record khop_doubling``) ---


@dataclass(frozen=True)
class SeedVariant:
    """The cumulative curriculum of :func:`seed_members` for seeds :data:`VARIANT_SEEDS` advancing every 100 steps
    (the interval study's runs) with one setting changed: ``field`` is the profile's value times ``num / den`` (or
    ``to``, when given), the rest as before, for ``steps`` steps; with ``over``, another variant, that variant's
    runs with this setting changed too, compared with its recorded runs instead of the profile's. Recorded as
    ``khop_<tag>``; its summary entries are ``<tag>_*`` and those of the base runs of the same seeds
    ``<tag>_<base>_*``; ``who`` and ``base_who`` name the two populations."""

    tag: str
    field: str
    num: int
    den: int
    steps: int
    who: str
    base: str
    base_who: str
    to: object = None
    over: SeedVariant | None = None

    def value(self, profile: str | None = None):
        """The changed setting's value in ``profile``."""
        if self.to is not None:
            return self.to
        v = SIZES[config.get_profile(profile)].get(self.field, getattr(KHopExperiment, self.field))
        return v * self.num // self.den if isinstance(v, int) else v * self.num / self.den

    def check_recording(self, profile: str, members: dict[str, KHopExperiment]) -> None:
        """Refuse, before any run, a recording that :func:`companion.experiments.khop_four_hops.variant_summary` cannot compare with the recorded base
        runs: another profile than quick, runs other than those of :meth:`settings` (the budget aside), or a
        budget longer than the base runs' recordings (:func:`base_runs`).

        Raises:
            ValueError: naming what differs and what is allowed.
        """
        if profile != "quick":
            raise ValueError(
                f"khop_{self.tag} with profile {profile!r}: allowed 'quick' (its runs are compared "
                "seed by seed with recorded runs of the quick profile, khop.SeedVariant.base_runs)"
            )
        steps = next(iter(members.values())).steps
        want = {seed_name(s): self.member(s, steps) for s in VARIANT_SEEDS}
        for n, e in members.items():
            diff = {
                f.name: getattr(e, f.name)
                for f in dataclasses.fields(e)
                if getattr(e, f.name) != getattr(want.get(n, e), f.name)
            }
            if n not in want or diff:
                raise ValueError(
                    f"khop_{self.tag}: run {n!r} with {diff or 'another name'}: allowed the runs of "
                    f"settings {self.settings()} (steps aside), which the base runs share"
                )
        self.base_runs(steps)

    def trained(self, k: int) -> tuple[int, ...]:
        """The hop counts the variant's runs train on (its stages: 1..k unless it, or ``over``, changes
        ``levels``)."""
        return hop_levels(self.settings().get("levels", "every"), k)

    def changes(self, profile: str | None = None) -> dict:
        """The settings the variant's runs change from the profile's, in ``profile`` (``over``'s too)."""
        return (self.over.changes(profile) if self.over else {}) | {self.field: self.value(profile)}

    def settings(self) -> dict:
        """The recording's settings (``record khop_<tag> --set ...``): the interval study's, with its budget and
        the changed settings' quick values."""
        return INTERVAL_SETTINGS | self.changes("quick") | {"steps": self.steps}

    def member(self, seed: int, steps: int) -> KHopExperiment:
        """The recording's run of ``seed`` (:meth:`settings`) with a budget of ``steps``: with a constant step size
        and nothing drawn that depends on the budget, the recorded run's first ``steps`` steps."""
        member = variant_members("quick", self)[seed_name(seed)]
        return dataclasses.replace(member, **{**self.settings(), "steps": steps})

    def base_runs(self, steps: int) -> dict[int, dict]:
        """The runs this variant is compared with, {seed: run}, cut at ``steps``: the profile's own
        (:func:`base_runs`), or ``over``'s recorded runs.

        Raises:
            ValueError: those runs are shorter than ``steps`` (or not recorded).
        """
        if self.over is None:
            return base_runs(steps)
        if steps > self.over.steps:
            raise ValueError(
                f"steps={steps}: allowed at most {self.over.steps} (the recorded khop_{self.over.tag} "
                "runs this variant is compared with)"
            )
        rec = recorded(self.over.settings(), experiment=f"khop_{self.over.tag}")
        return {s: truncated(r, steps) for s, r in seeded(recorded_runs(rec)[0]).items()}


VARIANT_SEEDS = tuple(range(7))  # the interval study's seeds


WIDE = SeedVariant(
    "wide",
    "d",
    2,
    1,
    INTERVAL_SETTINGS["steps"],
    "with twice the width",
    "narrow",
    # d = 64 in quick, with the same 4 heads (so each twice as wide)
    "with the profile's width",
)


# the stages 1, 2, 4 (the slides' "hops 1, 2, 4, etc."): the same run as the profile's until it moves past two hops
DOUBLING = SeedVariant(
    "doubling",
    "levels",
    1,
    1,
    INTERVAL_SETTINGS["steps"],
    "with stages 1, 2, 4",
    "every",
    "with stages 1, 2, 3, 4",
    to="doubling",
)


# those runs with training examples that start at any table (one hop from tables 1-4 from the first stage on)
ANYSTART = SeedVariant(
    "anystart",
    "starts",
    1,
    1,
    DOUBLING.steps,
    "with stages 1, 2, 4 starting at any table",
    "doubling",
    "with stages 1, 2, 4 from table 1",
    to="any",
    over=DOUBLING,
)


# those runs with one-hop examples from any table and longer ones from table 1: the tables ANYSTART trains on, with the
# two-hop examples of DOUBLING (its batches are ANYSTART's until the move to two hops)
ONESTART = SeedVariant(
    "onestart",
    "starts",
    1,
    1,
    DOUBLING.steps,
    "with stages 1, 2, 4, one hop from any table",
    "doubling",
    "with stages 1, 2, 4 from table 1",
    to="one",
    over=DOUBLING,
)


# the other way round: one-hop examples from table 1 and longer ones from any table (its batches are DOUBLING's until
# the move to two hops)
LONGSTART = SeedVariant(
    "longstart",
    "starts",
    1,
    1,
    DOUBLING.steps,
    "with stages 1, 2, 4, one hop from table 1, longer from any table",
    "doubling",
    "with stages 1, 2, 4 from table 1",
    to="longer",
    over=DOUBLING,
)


def variant_members(profile: str | None = None, variant: SeedVariant = WIDE) -> dict[str, KHopExperiment]:
    """The runs of ``variant`` (:data:`WIDE`, :data:`companion.experiments.khop_four_hops.LR`, :data:`DOUBLING`, :data:`ANYSTART`, :data:`ONESTART`,
    :data:`LONGSTART`): ``"seed 0"``, ... (:class:`SeedVariant`)."""
    size = SIZES[config.get_profile(profile)]
    return {
        seed_name(s): KHopExperiment.for_profile(
            profile, data="cumulative", **{**size, "seed": s, **variant.changes(profile)}
        )
        for s in VARIANT_SEEDS
    }


def seeded(runs: dict[str, dict]) -> dict[int, dict]:
    """{seed: run} of a study whose runs are named :func:`seed_name`."""
    return {int(name[5:]): r for name, r in runs.items()}


def base_runs(steps: int, every: int = 100) -> dict[int, dict]:
    """The profile's own runs of seeds 0..6 at k = 4 (depth 4, cumulative) advancing every ``every`` steps, by seed,
    each cut at ``steps`` (:func:`truncated`) from the shortest recording that long: the seed study's (16000 steps),
    the interval study's (10000) and the longer runs of :data:`companion.experiments.khop_four_hops.INTERVAL_LONG` and :data:`companion.experiments.khop_four_hops.INTERVAL_LONG250` (20000).

    Raises:
        ValueError: a seed has no recorded run of ``steps`` steps at that interval.
    """
    studies = [
        (SEED_SETTINGS, "khop_seeds"),
        (INTERVAL_SETTINGS, "khop_interval"),
        (INTERVAL_LONG_SETTINGS, "khop_interval_long"),
        (INTERVAL_LONG_SETTINGS, "khop_interval_long250"),
    ]
    found: dict[int, list[dict]] = {s: [] for s in VARIANT_SEEDS}
    for settings, experiment in studies:
        for name, r in recorded_runs(recorded(settings, experiment=experiment))[0].items():
            seed, e = seed_interval(name)
            if e == every and seed in found:
                found[seed].append(r)
    longest = {s: max((int(r["step"][-1]) for r in rs), default=0) for s, rs in found.items()}
    if min(longest.values()) < steps:
        raise ValueError(
            f"steps={steps}, every={every}: allowed at most {min(longest.values())} steps (the longest "
            f"recorded run of each seed: {longest})"
        )
    return {
        s: truncated(min((r for r in rs if r["step"][-1] >= steps), key=lambda r: r["step"][-1]), steps)
        for s, rs in found.items()
    }


# --- what a trained model computes where: linear probes of the chain (recorded: ``khop_probe``) ---

# the depth-4 study's budget: seed 0 stalls, every 250 it does not
PROBE_SETTINGS = SEED_SETTINGS | {"steps": 8000}


PROBED = ("seed 0", EXPLORED)  # the two runs of seed 0 that differ only in when the curriculum advances


def read_positions(task: KHopTask, b: HopBatch) -> np.ndarray:
    """(batch, h): the position that hop j reads, 1 + (j - 1) N + pi_j(v_{j-1}) (v_0 = x, the query), the entry
    of table j that holds v_j, in a batch of h-hop examples (one hop count h for all).

    Raises:
        ValueError: examples with different hop counts.
    """
    counts = sorted(set(b.hops.tolist()))
    if len(counts) != 1:
        raise ValueError(f"read_positions needs examples of one hop count: got hop counts {counts}")
    h, pi = counts[0], task.hidden()
    before = np.concatenate([b.tokens[:, :1], b.chain[:, : h - 1]], axis=1)  # v_{j-1}
    return 1 + np.arange(h) * task.N + pi[np.arange(h), before]


def linear_probe(
    X: torch.Tensor,
    y: torch.Tensor,
    X_test: torch.Tensor,
    y_test: torch.Tensor,
    classes: int,
    l2: float = 1e-3,
    iters: int = 200,
) -> float:
    """Test accuracy of a softmax regression of ``y`` on ``X`` (features standardised on the training set, L2
    penalty ``l2``, L-BFGS from zero, so that the fit is deterministic; a convex fit on fixed features, kept apart
    from the training engine, :func:`companion.train.fit`)."""
    mu, sd = X.mean(0), X.std(0).clamp_min(1e-6)
    X, X_test = (X - mu) / sd, (X_test - mu) / sd
    W = torch.zeros(X.shape[1] + 1, classes, requires_grad=True)
    ones = torch.ones(len(X), 1)
    opt = torch.optim.LBFGS([W], max_iter=iters, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(torch.cat([X, ones], 1) @ W, y) + l2 * (W[:-1] ** 2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    pred = (torch.cat([X_test, torch.ones(len(X_test), 1)], 1) @ W).argmax(1)
    return float((pred == y_test).float().mean())


def hop_probe(
    exp: KHopExperiment, state: dict, n_train: int = 4096, n_test: int = 2048, hops: int | None = None
) -> dict:
    """Where a trained model has the chain of an h-hop example (``hops``, default k), on fresh h-hop examples
    (stream "hop-probe" of its seed): ``probe`` (depth + 1, h), the test accuracy of a linear probe
    (:func:`linear_probe`, fitted on ``n_train`` examples, tested on ``n_test`` others) of v_j, the value after
    hop j, from position 0's stream before the first block (row 0) and after each block; ``entry``
    (depth + 1, h), the same probe of v_h, the answer, from the stream at the entry that hop j reads
    (:func:`read_positions`; does that entry hold the rest of the chain before position 0 reads it?);
    ``attention`` (depth, h), position 0's attention in each block on the entry that hop j reads, the largest
    over the heads of its mean over the examples; ``chain`` (depth + 1, h, h), the probe of v_j from the stream
    at the entry that hop i reads, ``chain[l, i - 1, j - 1]`` for j >= i (NaN below: the chain before that entry),
    so that ``entry`` is its last column; ``entry_attention`` (depth, h, h), the attention in each block of hop i's
    entry on hop j's entry, largest head as above (does that entry walk the rest of the chain itself?); ``acc``,
    the model's own accuracy on the test examples; ``answers`` (h + 1,), the share of its answers on them that
    are v_j, j = 0..h (v_0 = x; values of a chain may coincide, so the shares may sum to more than 1)."""
    check_int("n_train", n_train, low=1)
    check_int("n_test", n_test, low=1)
    task, model = exp.task(), exp.model()
    h = task.k if hops is None else hops
    check_int("hops", h, low=1, high=task.k)
    model.load_state_dict(state)
    rng = np.random.default_rng(config.seed_streams(exp.seed, ["hop-probe"])["hop-probe"])
    parts = []
    for n in (n_train, n_test):
        b, rec = task.sample(rng, np.full(n, h)), {}
        with torch.no_grad():
            pred = model(torch.as_tensor(b.tokens), torch.as_tensor(b.mask), record=rec).argmax(1)
        parts.append((b, rec["streams"], rec["attn"], pred))
    (b, streams, _, _), (bt, streams_t, maps_t, pred) = parts
    probe = np.array(
        [
            [
                linear_probe(
                    s[:, 0], torch.as_tensor(b.chain[:, j]), st[:, 0], torch.as_tensor(bt.chain[:, j]), task.N
                )
                for j in range(h)
            ]
            for s, st in zip(streams, streams_t)
        ]
    )
    # (n, h)
    where, where_t = torch.as_tensor(read_positions(task, b)), torch.as_tensor(read_positions(task, bt))
    rows, rows_t = torch.arange(len(where)), torch.arange(len(where_t))
    chain = np.full((len(streams), h, h), np.nan)
    for (l, i, j), _ in np.ndenumerate(chain):
        if j >= i:
            s, st = streams[l], streams_t[l]
            chain[l, i, j] = linear_probe(
                s[rows, where[:, i]],
                torch.as_tensor(b.chain[:, j]),
                st[rows_t, where_t[:, i]],
                torch.as_tensor(bt.chain[:, j]),
                task.N,
            )

    def attending(a: torch.Tensor, query: torch.Tensor) -> np.ndarray:  # (n, heads, T, T), (n,) -> (h,)
        return a[rows_t, :, query][rows_t[:, None], :, where_t].mean(0).max(-1).values.numpy()

    attention = np.array([attending(a, torch.zeros_like(rows_t)) for a in maps_t])
    entry_attention = np.array([[attending(a, where_t[:, i]) for i in range(h)] for a in maps_t])
    return {
        "probe": probe,
        "entry": chain[:, :, -1],
        "attention": attention,
        "chain": chain,
        "entry_attention": entry_attention,
        "acc": float((pred == torch.as_tensor(bt.answer)).float().mean()),
        "answers": (pred.numpy()[:, None] == np.concatenate([bt.tokens[:, :1], bt.chain[:, :h]], 1)).mean(0),
    }


def table_interference(exp: KHopExperiment, state: dict, n: int = 2048) -> dict:
    """Does the last table get in the way? On fresh k-hop examples (stream "interference" of the run's seed), the
    model's answers when table k is shown to the keys of no block, of one block only, of all blocks but one, or
    of all (in that order: none, 1..depth, all but 1..depth, all; the last is the model as it is; a block of the
    run's ``hide_k_from`` never sees it): ``prev``
    (2 depth + 2,), the share of answers that are v_{k-1}, the (k - 1)-hop answer; ``answer``, the share that
    are v_k; and ``attention`` (depth, k - 1): in each block, the attention of hop i's entry on table k's entries
    in total (the largest head of its mean over the examples). Hiding table k from a block hides it from every
    query of that block, table k's own entries included.

    Raises:
        ValueError: ``n`` below 1, or k = 1 (no earlier hop to be disturbed).
    """
    check_int("n", n, low=1)
    task, model = exp.task(), exp.model()
    check_int("k (hops) of a run measured for interference", task.k, low=2)
    model.load_state_dict(state)
    rng = np.random.default_rng(config.seed_streams(exp.seed, ["interference"])["interference"])
    b = task.sample(rng, np.full(n, task.k))
    t, m = torch.as_tensor(b.tokens), torch.as_tensor(b.mask)
    depth, rows, rec = exp.layers, torch.arange(n), {}
    every = list(range(1, depth + 1))
    prev, ans = [], []
    with torch.no_grad():  # shown to: none, each block only, all but each block, all
        for hidden in [every, *([o for o in every if o != s] for s in every), *([s] for s in every), []]:
            hide = table_hidden(task, hidden, depth) if hidden else None
            pred = model(t, m, record=rec if hide is None else None, hide=hide).argmax(1).numpy()
            prev.append(float((pred == b.chain[:, -2]).mean())), ans.append(float((pred == b.answer).mean()))
    # the entries of hops 1..k-1
    where, last = torch.as_tensor(read_positions(task, b))[:, :-1], task.last_table
    attention = np.array(
        [
            [a[rows, :, where[:, i], last].sum(-1).mean(0).max().item() for i in range(task.k - 1)]
            for a in rec["attn"]
        ]
    )
    return {"prev": np.array(prev), "answer": np.array(ans), "attention": attention}


@dataclass(frozen=True)
class ProbeStudy:
    """A set of probed runs of :func:`seed_members`: ``tags`` maps each member's name to the prefix of its summary
    entries; ``shared`` prefixes the entries the runs share (``<shared>_k``, ``<shared>_chance``, ...), so that two
    studies glue on one page."""

    tags: dict
    shared: str
    hops: tuple = ()  # the hop counts of the probed examples, the first unprefixed (empty: k, then k - 1)

    def probed(self, k: int) -> tuple[int, ...]:
        """The hop counts probed in a run with k hops, the first named without a hop suffix.

        Raises:
            ValueError: a hop count outside 1..k.
        """
        for h in self.hops:
            check_int(f"hops probed (k = {k})", h, low=1, high=k)
        return self.hops or tuple(sorted({k, max(k - 1, 1)}, reverse=True))

    def prefix(self, tag: str, h: int, k: int) -> str:
        """The summary prefix of a run's (``tag``) probe on h-hop examples, k its hop count: the tag for the first
        probed hop count, ``<tag>_h<h>`` for the others."""
        return tag if h == self.probed(k)[0] else f"{tag}_h{h}"


PROBE_TAGS = {"seed 0": "p100", EXPLORED: f"p{EXPLORED_EVERY}"}  # summary prefixes of the probed runs


PROBE = ProbeStudy(PROBE_TAGS, "probe")  # seed 0 stalled and solved (recorded: ``khop_probe``)


def probe_run(exp: KHopExperiment, progress: bool = True, device=None) -> dict:
    """:func:`run` of ``exp``, carrying ``exp`` itself (``"exp"``), as :func:`probe_summary` reads it."""
    return {**run(exp, progress=progress, device=device), "exp": exp}


def probe_summary(runs: dict[str, dict], level: float = 0.9, study: ProbeStudy = PROBE) -> report.Summary:
    """:func:`hop_probe` of each run of ``study`` (from :func:`probe_run`: with ``state`` and ``exp``) on k-hop
    examples, named ``<tag>_probe_l<layer>_v<j>``, ``<tag>_entry_l<layer>_v<j>`` (v_k at hop j's entry),
    ``<tag>_attention_l<layer>_v<j>`` (layers from 0, the embeddings, for the probes; from 1 for the blocks),
    ``<tag>_chain_l<layer>_e<i>_v<j>`` (v_j at hop i's entry, j > i) and ``<tag>_eattn_l<layer>_e<i>_to<j>`` (hop
    i's entry's attention on hop j's, j > i), with per run the model's own k-hop accuracy (``<tag>_acc``), the
    share of its answers that are v_j (``<tag>_answers_v<j>``, j from 0: x), the first layer at which each v_j is
    read above ``level`` (``<tag>_first_v<j>``; inf: none) and the best probe accuracy of each v_j over the layers
    (``<tag>_best_v<j>``; ``<tag>_best_vk`` for v_k); and the same on (k - 1)-hop examples, named with
    ``_h<k - 1>`` after the tag (``p100_h3_probe_l4_v3``, ...), or on the study's own hop counts
    (:meth:`ProbeStudy.probed`: the first unsuffixed, the others with ``_h<h>``).
    ``<shared>_chance`` is 1/N.

    Raises:
        ValueError: a run that is not one of the study's.
    """
    out = {}
    for name, r in runs.items():
        check_choice("probed run", name, tuple(study.tags))
        tag, exp = study.tags[name], member_of(name, r)
        for h in study.probed(exp.k):
            pre = study.prefix(tag, h, exp.k)
            _probe_values(out, f"{name}, {h}-hop examples", pre, hop_probe(exp, r["state"], hops=h), level)
        if exp.k > 1:
            interference_values(out, name, tag, table_interference(exp, r["state"]))
        out[f"{tag}_depth"] = (exp.layers, f"{name}: blocks")
    out[f"{study.shared}_chance"] = (1 / exp.N, "chance: 1/N")  # the probed runs share their task and budget
    out[f"{study.shared}_k"] = (exp.k, "hops")
    out[f"{study.shared}_steps"] = (exp.steps, "training steps of each probed run")
    return report.Summary(out)


def _probe_values(out: dict, name: str, pre: str, res: dict, level: float) -> None:
    """:func:`probe_summary`'s entries of one :func:`hop_probe` result, named with the prefix ``pre``."""
    P, A = res["probe"], res["attention"]
    h = P.shape[1]
    out[f"{pre}_acc"] = (res["acc"], f"{name}: the model's accuracy on the probe's test examples")
    for j, v in enumerate(res["answers"]):
        out[f"{pre}_answers_v{j}"] = (
            float(v),
            f"{name}: share of the model's answers on them that are {'x, the query' if j == 0 else f'v_{j}'}",
        )
    for (l, j), v in np.ndenumerate(P):
        out[f"{pre}_probe_l{l}_v{j + 1}"] = (float(v), f"{name}: probe accuracy of v_{j + 1} after block {l}")
    for (l, j), v in np.ndenumerate(res["entry"]):
        out[f"{pre}_entry_l{l}_v{j + 1}"] = (
            float(v),
            f"{name}: probe accuracy of v_{h} at hop {j + 1}'s entry after block {l}",
        )
    for (l, j), v in np.ndenumerate(A):
        out[f"{pre}_attention_l{l + 1}_v{j + 1}"] = (
            float(v),
            f"{name}: position 0's attention in block {l + 1} on hop {j + 1}'s entry (largest head)",
        )
    for (l, i, j), v in np.ndenumerate(res["chain"]):
        if j > i:
            out[f"{pre}_chain_l{l}_e{i + 1}_v{j + 1}"] = (
                float(v),
                f"{name}: probe accuracy of v_{j + 1} at hop {i + 1}'s entry after block {l}",
            )
    for (l, i, j), v in np.ndenumerate(res["entry_attention"]):
        if j > i:
            out[f"{pre}_eattn_l{l + 1}_e{i + 1}_to{j + 1}"] = (
                float(v),
                f"{name}: hop {i + 1}'s entry's attention in block {l + 1} on hop {j + 1}'s entry "
                "(largest head)",
            )
    # the first layer instead of the first step
    first = learned_at({"step": np.arange(len(P)), "acc": P}, level)
    for j in range(h):
        out[f"{pre}_first_v{j + 1}"] = (
            float(first[j]),
            f"{name}: first layer (0: embeddings) whose probe reads v_{j + 1} at {level} or more",
        )
        out[f"{pre}_best_v{j + 1}"] = (
            float(P[:, j].max()),
            f"{name}: best probe accuracy of v_{j + 1} over the layers",
        )
    out[f"{pre}_best_vk"] = (
        float(P[:, -1].max()),
        f"{name}: best probe accuracy of the answer over the layers",
    )


def interference_values(out: dict, name: str, tag: str, res: dict) -> None:
    """:func:`probe_summary`'s entries of one :func:`table_interference` result: ``<tag>_tk_<shown>_prev`` and
    ``_answer`` (``shown``: ``none``, ``b<block>`` (that block only), ``not<block>`` (all but it) or ``all``)
    and ``<tag>_tkattn_l<block>_e<i>``."""
    depth = len(res["attention"])
    for key, p, a in zip(shown_keys(depth), res["prev"], res["answer"]):
        where = shown_to(key)
        out[f"{tag}_tk_{key}_prev"] = (
            p,
            f"{name}: share of k-hop answers that are v_(k-1), the last table shown to {where}",
        )
        out[f"{tag}_tk_{key}_answer"] = (
            a,
            f"{name}: share of k-hop answers that are v_k, the last table shown to {where}",
        )
    for (l, i), v in np.ndenumerate(res["attention"]):
        out[f"{tag}_tkattn_l{l + 1}_e{i + 1}"] = (
            float(v),
            f"{name}: hop {i + 1}'s entry's attention in block "
            f"{l + 1} on the last table in total (largest head)",
        )


def shown_keys(depth: int) -> list[str]:
    """The names of :func:`table_interference`'s visibilities, in its order."""
    return ["none", *(f"b{b}" for b in range(1, depth + 1)), *(f"not{b}" for b in range(1, depth + 1)), "all"]


def shown_to(key: str) -> str:
    """Which blocks see the last table under the visibility ``key`` of :func:`shown_keys`."""
    if key.startswith("not"):
        return f"every block but block {key[3:]}"
    return {"none": "no block", "all": "every block (the model as it is)"}.get(key, f"block {key[1:]} only")


def member_of(name: str, r: dict) -> KHopExperiment:
    """The configuration a recorded or live probe run was trained with (its ``exp`` entry)."""
    if "exp" not in r:
        raise ValueError(f"run {name!r} carries no configuration ('exp'): probe runs come from probe_run")
    return r["exp"]


PROBE_KINDS = {
    "probe": "linear probe of v_j at position 0",
    "entry": "linear probe of v_k at hop j's entry",
    "attention": "position 0's attention on hop j's entry",
}


def probe_header(k: int, kind: str = "probe") -> list[str]:
    """Columns of :func:`probe_rows` (``k``: the examples' hop count): the run, the layer (0: the embeddings; the
    blocks from 1), one per hop."""
    check_choice("kind", kind, tuple(PROBE_KINDS))
    what = {
        "probe": "v_{j}, probe accuracy",
        "entry": "v_{k} at hop {j}'s entry",
        "attention": "hop {j}'s entry, attention",
    }[kind]
    return [
        "run",
        "block" if kind == "attention" else "after block",
        *(what.format(j=j, k=k) for j in range(1, k + 1)),
    ]


def _hops(summary, study: ProbeStudy, hops: int | None) -> tuple[int, int]:
    """(k, h): the probed runs' hop count and the examples' (``hops``: one of :meth:`ProbeStudy.probed`, the first
    by default)."""
    k = int(summary[f"{study.shared}_k"])
    probed = study.probed(k)
    h = probed[0] if hops is None else hops
    check_choice("hops (a probed hop count)", h, probed)
    return k, h


def probe_rows(
    summary, kind: str = "probe", hops: int | None = None, study: ProbeStudy = PROBE
) -> list[list]:
    """One row per probed run of ``study`` and layer of its :func:`probe_summary` (live or recorded), on its k-hop
    examples (``hops`` None) or its (k - 1)-hop ones (``hops=k - 1``): ``kind="probe"``, the probe accuracy of each
    v_j at position 0 after that block; ``"entry"``, of the answer at the entry each hop reads; ``"attention"``,
    position 0's attention in that block on the entry each hop reads."""
    check_choice("kind", kind, tuple(PROBE_KINDS))
    k, h = _hops(summary, study, hops)
    rows = []
    for name, tag in study.tags.items():
        depth, pre = int(summary[f"{tag}_depth"]), study.prefix(tag, h, k)
        layers = range(1, depth + 1) if kind == "attention" else range(depth + 1)
        rows += [[name, l, *(summary[f"{pre}_{kind}_l{l}_v{j}"] for j in range(1, h + 1))] for l in layers]
    return rows


WALK_KINDS = {
    "chain": "linear probe of v_j at hop i's entry",
    "eattn": "hop i's entry's attention on hop j's",
}


def walk_header(k: int, kind: str = "chain") -> list[str]:
    """Columns of :func:`walk_rows` (``k``: the examples' hop count): the run, the entry, the layer, one per hop
    after the first."""
    check_choice("kind", kind, tuple(WALK_KINDS))
    what = "v_{j}, probe accuracy" if kind == "chain" else "hop {j}'s entry, attention"
    return [
        "run",
        "entry of hop",
        "after block" if kind == "chain" else "block",
        *(what.format(j=j) for j in range(2, k + 1)),
    ]


def walk_rows(
    summary,
    kind: str = "chain",
    hops: int | None = None,
    study: ProbeStudy = PROBE,
    entries: tuple[int, ...] | None = None,
) -> list[list]:
    """Does the entry that hop i reads walk the rest of the chain itself? One row per probed run of ``study``,
    entry i (``entries``, default every hop but the last) and layer: ``kind="chain"``, the probe accuracy of each
    later v_j (j = 2..h; blank for j <= i) from that entry's stream after that block; ``"eattn"``, that entry's
    attention in that block on each later hop's entry. ``hops`` as in :func:`probe_rows`."""
    check_choice("kind", kind, tuple(WALK_KINDS))
    k, h = _hops(summary, study, hops)
    entries = tuple(range(1, h)) if entries is None else entries
    for i in entries:
        check_int("entry", i, low=1, high=h - 1)
    rows = []
    for name, tag in study.tags.items():
        depth, pre = int(summary[f"{tag}_depth"]), study.prefix(tag, h, k)
        layers = range(1, depth + 1) if kind == "eattn" else range(depth + 1)
        key = "{pre}_chain_l{l}_e{i}_v{j}" if kind == "chain" else "{pre}_eattn_l{l}_e{i}_to{j}"
        rows += [
            [
                name,
                i,
                l,
                *(summary[key.format(pre=pre, l=l, i=i, j=j)] if j > i else "" for j in range(2, h + 1)),
            ]
            for i in entries
            for l in layers
        ]
    return rows


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
    out = train.fit(
        model,
        torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0),
        steps,
        lambda step: _batch_loss(model, task, cont, exp.k, rng, device, mask),
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


def paired_difference(a: dict, b: dict, rows, stages=None, hops=slice(None)) -> float:
    """The largest absolute difference of two runs' test accuracies at the hop counts ``hops`` (columns) over the
    evaluations ``rows`` (a slice or index array valid for both runs), and of their stages over the evaluations
    ``stages`` (None: stages not compared); 0.0 over no evaluation. The one measure of "the same run until X"
    behind :func:`prefix_gap`, :func:`companion.experiments.khop_starts.stage_gap`, ``_split``'s ``split_gap`` and ``_gap_before_last_stage``,
    each of which keeps only its own rule for X.

    >>> a = {"acc": [[1.0, 0.5], [1.0, 0.25]], "stage": [1, 2]}
    >>> b = {"acc": [[1.0, 0.5], [0.5, 0.25]], "stage": [1, 1]}
    >>> paired_difference(a, b, slice(0, 1)), paired_difference(a, b, slice(0, 2)), paired_difference(a, b, slice(0, 2), hops=[1])
    (0.0, 0.5, 0.0)
    >>> paired_difference(a, b, slice(0, 1), stages=slice(0, 2)), paired_difference(a, b, slice(0, 0))
    (1.0, 0.0)
    """
    acc = np.abs(np.asarray(a["acc"])[rows][:, hops] - np.asarray(b["acc"])[rows][:, hops])
    worst = float(acc.max(initial=0.0))
    if stages is not None:
        worst = max(
            worst,
            float(np.abs(np.asarray(a["stage"])[stages] - np.asarray(b["stage"])[stages]).max(initial=0.0)),
        )
    return worst


def common_evaluations(name: str, a: dict, b: dict) -> int:
    """How many evaluations two runs share from the first (the shorter run's count).

    Raises:
        ValueError: the two are evaluated at different steps.
    """
    n = min(len(a["step"]), len(b["step"]))
    if not np.array_equal(np.asarray(a["step"])[:n], np.asarray(b["step"])[:n]):
        raise ValueError(f"{name}: the two runs are evaluated at different steps: allowed the same interval")
    return n


def prefix_gap(runs: dict[str, dict], shorter: dict[str, dict], prefix: str) -> report.Summary:
    """Runs recorded for a longer budget against the same configurations recorded for a shorter one (the same
    names): the largest difference of their accuracies at any hop count or of their stages over the shorter
    runs' evaluations (``<prefix>_prefix_gap``; zero when the longer runs repeat the shorter ones to the last
    digit before going on, as one seed and a constant step size make them).

    Raises:
        ValueError: a run of ``runs`` missing from ``shorter``, or two runs evaluated at different steps.
    """
    worst = 0.0
    for name, a in runs.items():
        if name not in shorter:
            raise ValueError(f"{name!r} is not among the shorter runs: allowed {sorted(shorter)}")
        b = shorter[name]
        n = common_evaluations(name, a, b)
        worst = max(worst, paired_difference(a, b, slice(0, n), stages=slice(0, n)))
    return report.Summary(
        {
            f"{prefix}_prefix_gap": (
                worst,
                "largest difference of accuracies or stages over the "
                "shorter runs' evaluations, longer against shorter",
            )
        }
    )
