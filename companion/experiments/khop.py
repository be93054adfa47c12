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
        "khop", exp, lambda: _train(exp, progress, device), MODULES, use_cache=use_cache
    )


def _train(exp: KHopExperiment, progress: bool, device=None, keep: tuple = ()) -> dict:
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
        row = _advance(exp, now, step, _accuracy(model, tests), float(now["loss"].detach()))
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
    return _tensors(task.sample(rng, hops, training_starts(exp, hops, rng)), device)


def _test_sets(exp: KHopExperiment, device) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The run's test sets, one per hop count 1..k (``n_test`` examples each, stream "test-data" of its seed)."""
    rng = np.random.default_rng(config.seed_streams(exp.seed, ["test-data"])["test-data"])
    return [_tensors(exp.task().sample(rng, np.full(exp.n_test, h)), device) for h in range(1, exp.k + 1)]


def _accuracy(model: HopTransformer, tests: list, hide: torch.Tensor | None = None) -> list[float]:
    """The model's test accuracy on each of :func:`_test_sets` (``hide``: as the model's forward)."""
    with torch.no_grad():
        return [float((model(t, m, hide=hide).argmax(1) == y).float().mean()) for t, m, y in tests]


def _tensors(b: HopBatch, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
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
    does a member named by its interval (:func:`interval_name`, :data:`EXPLORED` among them) its ``eval_every``,
    and a run of any of them with other last-stage data (:func:`reseed_name`).

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
    kept = KEPT.get(base, ("eval_every",) if _interval_of(base) else ())
    return {
        key: m * v if key in ("steps", "eval_every") else v for key, v in overrides.items() if key not in kept
    }


def _sizes(r: dict, prefix: str = "") -> dict:
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
        **_sizes(runs["mixture"]),
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


LEARNED_HEADER = ["run", "data", "layers", "learned at (steps), hops 1..k", "final accuracy, hops 1..k"]


def learned_rows(runs: dict[str, dict], members: dict[str, KHopExperiment], level: float = 0.9) -> list[list]:
    """One row per run: its data, depth, the step each hop count is first learned (``-`` never) and the final
    accuracies."""
    return [
        [name, members[name].data, members[name].layers, *_learned_cells(r, level)]
        for name, r in runs.items()
    ]


def _learned_cells(r: dict, level: float) -> tuple[str, str]:
    """A run's table cells: the step each hop count is first learned (``-`` never) and the final accuracies."""
    at = ", ".join("-" if not np.isfinite(s) else str(int(s)) for s in learned_at(r, level))
    return at, ", ".join(f"{a:.2f}" for a in np.asarray(r["acc"])[-1])


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
    """The chapter's summary of a recorded study (:func:`summary`, or :func:`seeds_summary`), recomputed from
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


def seeds_summary(runs: dict[str, dict], level: float = 0.9, solved: float = 0.95) -> report.Summary:
    """The numbers of a finished :func:`seed_members` set, named ``seeds_*`` (to glue beside the other studies):
    how many of the seeds at the study's evaluation interval end with every hop count above ``solved`` (lowest
    final accuracy), the earliest step at which one learns the k-th hop (first evaluation at ``level``) and the
    fewest steps one spends on its last stage before that, and the same numbers of seed 0 advancing every
    :data:`EXPLORED_EVERY` steps."""
    seeds = [seed_name(s) for s in SEEDS]
    low = np.array([np.asarray(runs[n]["acc"])[-1].min() for n in seeds])
    hopk = np.array([learned_at(runs[n], level)[-1] for n in seeds])
    wait = np.array([last_stage_wait(runs[n], level) for n in seeds])
    alt, every = runs[EXPLORED], f"seed 0 advancing every {EXPLORED_EVERY} steps"
    return report.Summary(
        {
            **_sizes(runs[seeds[0]], prefix="seeds_"),
            "seeds_n": (len(seeds), "seeds at the study's evaluation interval"),
            "seeds_solved": (
                float((low > solved).mean()),
                f"fraction of those seeds whose lowest final accuracy over 1..k hops is above {solved}",
            ),
            "seeds_solved_n": (
                int((low > solved).sum()),
                f"seeds whose lowest final accuracy is above {solved}",
            ),
            "seeds_worst_min": (float(low.min()), "the worst seed's lowest final accuracy over 1..k hops"),
            "seeds_hopk_first": (
                float(hopk.min()),
                "the earliest step at which a seed learns the k-th hop (inf: none)",
            ),
            "seeds_wait_last": (
                float(wait.min()),
                "the fewest steps a seed trains on its last stage before it learns the k-th hop "
                "(inf: none learns it)",
            ),
            "seeds_alt_min": (
                float(np.asarray(alt["acc"])[-1].min()),
                f"{every}: lowest final accuracy over 1..k hops",
            ),
            "seeds_alt_hopk_at": (
                float(learned_at(alt, level)[-1]),
                f"{every}: first step with the k-th hop learned",
            ),
            "seeds_alt_stagek_at": (last_stage_at(alt), f"{every}: the step it moved to its last stage"),
        }
    )


def seed_rows(runs: dict[str, dict], members: dict[str, KHopExperiment], level: float = 0.9) -> list[list]:
    """:func:`learned_rows` of a seed study with each run's seed, evaluation interval and the step it moved
    to its last stage."""
    rows = []
    for name, r in runs.items():
        at, final = _learned_cells(r, level)
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


# --- the seed study at two evaluation intervals (recorded: ``record khop_interval``) ---

INTERVALS = (100, EXPLORED_EVERY)  # the seed study's interval and the exploratory run's
# seeds recorded here at each interval; with the seed study's runs (read up to INTERVAL_SETTINGS' steps) every
# seed of 0..6 is run at both
INTERVAL_SEEDS = {100: (3, 4, 5, 6), EXPLORED_EVERY: (1, 2, 3, 4, 5, 6)}
# the longest wait for four hops so far is about 4000 steps
INTERVAL_SETTINGS = SEED_SETTINGS | {"steps": 10000}


def interval_name(seed: int, every: int) -> str:
    """A member of :func:`interval_members`: ``"seed 3, every 100"``; seed 0 every 250 is :data:`EXPLORED`."""
    return f"seed {seed}, every {every}"


def _interval_of(name: str) -> tuple[int, int] | None:
    """(seed, interval) of an :func:`interval_name`, None for another name.

    >>> _interval_of("seed 3, every 100"), _interval_of("seed 3")
    ((3, 100), None)
    """
    parts = name.split(", every ")
    if len(parts) != 2 or not parts[0].startswith("seed ") or not (parts[0][5:] + parts[1]).isdigit():
        return None
    return int(parts[0][5:]), int(parts[1])


def _seed_interval(name: str) -> tuple[int, int]:
    """(seed, interval) of a run of the seed or interval studies: an :func:`interval_name`, or a
    :func:`seed_name`, which advances every :data:`SEED_SETTINGS`' interval.

    >>> _seed_interval("seed 3, every 250"), _seed_interval("seed 1")
    ((3, 250), (1, 100))
    """
    return _interval_of(name) or (int(name[5:]), SEED_SETTINGS["eval_every"])


def interval_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """The cumulative curriculum of :func:`seed_members` for the seeds :data:`INTERVAL_SEEDS` at each of
    :data:`INTERVALS` (each member keeps its interval under a study-wide override)."""
    size = SIZES[config.get_profile(profile)]
    return {
        interval_name(s, every): KHopExperiment.for_profile(
            profile, data="cumulative", **{**size, "seed": s, "eval_every": every}
        )
        for every, seeds in INTERVAL_SEEDS.items()
        for s in seeds
    }


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


def interval_pool(runs: dict[str, dict], earlier: dict[str, dict] | None = None) -> dict[str, dict]:
    """:func:`interval_members`' runs with the seed study's (``earlier``, default its recording) cut to the same
    budget and named by :func:`interval_name`: seeds 0..6, each at both :data:`INTERVALS`."""
    if earlier is None:
        earlier = recorded_runs(recorded(SEED_SETTINGS, experiment="khop_seeds"))[0]
    steps = int(next(iter(runs.values()))["step"][-1])
    renamed = {interval_name(*_seed_interval(name)): r for name, r in earlier.items()}
    return {**{name: truncated(r, steps) for name, r in renamed.items()}, **runs}


def _seed_list(seeds) -> str:
    """Seeds as the text names them: ``"0, 2"``, ``"none"``."""
    return ", ".join(str(s) for s in sorted(seeds)) or "none"


def _solved(r: dict, solved: float, hops: tuple | None = None) -> bool:
    """Whether the run's lowest final accuracy over ``hops`` (default: every hop count) is above ``solved``."""
    final = np.asarray(r["acc"])[-1]
    return bool((final if hops is None else final[np.asarray(hops) - 1]).min() > solved)


def by_interval(pool: dict[str, dict]) -> dict[int, dict[int, dict]]:
    """:func:`interval_pool`'s runs as {interval: {seed: run}}, for each of :data:`INTERVALS`."""
    return {
        every: {s: r for name, r in pool.items() for s, e in [_interval_of(name)] if e == every}
        for every in INTERVALS
    }


def _population(
    rs: dict[int, dict], ok: dict[int, bool], p: str, t: str, who: str, level: float, solved: float
) -> dict:
    """Summary entries of one population of runs ({seed: run}, ``ok``: solved or not): the runs, the solved
    seeds, their count and fraction, the median step of their move to the last stage and their median wait there
    before the k-th hop (first evaluation at ``level``); named ``<p>n<t>``, ``<p>solved<t>_seeds``,
    ``<p>solved<t>_n``, ``<p>solved<t>``, ``<p>move<t>_med``, ``<p>wait<t>_med``."""
    moves = [last_stage_at(r) for s, r in rs.items() if ok[s]]
    waits = [last_stage_wait(r, level) for s, r in rs.items() if ok[s]]
    return {
        f"{p}n{t}": (len(rs), f"runs {who}"),
        f"{p}solved{t}_seeds": (_seed_list(s for s in rs if ok[s]), f"{who}: the solved seeds"),
        f"{p}solved{t}_n": (
            int(sum(ok.values())),
            f"runs {who} whose lowest final accuracy is above {solved}",
        ),
        f"{p}solved{t}": (float(np.mean(list(ok.values()))), "the same, as a fraction of the runs"),
        f"{p}move{t}_med": (
            float(np.median(moves)) if moves else math.nan,
            f"{who}, solved runs: median step of the move to the last stage",
        ),
        f"{p}wait{t}_med": (
            float(np.median(waits)) if waits else math.nan,
            f"{who}, solved runs: median steps on the last stage before the k-th hop is learned",
        ),
    }


def _unsolved(
    unsolved: list[dict], solved_runs: list[dict], p: str, level: float, hops: tuple | None = None
) -> dict:
    """Summary entries of the unsolved runs of a study, and what bears on its budget: how many had not learned
    hops 1..k-1 (at ``level``; of ``hops``, the hop counts trained on, those below k), the longest wait of a
    solved run on its last stage before the k-th hop, the fewest steps an unsolved run had there, the highest
    final k-hop accuracy of an unsolved run and how many end below twice chance; named ``<p>unsolved_n``,
    ``<p>unsolved_early_n``, ``<p>wait_max``, ``<p>unsolved_time_min``, ``<p>unsolved_last_max``,
    ``<p>unsolved_flat_n``."""
    below = slice(None, -1) if hops is None else np.asarray(hops[:-1], dtype=int) - 1
    early = sum(bool(np.isinf(learned_at(r, level)[below]).any()) for r in unsolved)
    waits = [last_stage_wait(r, level) for r in solved_runs]
    final = np.array([np.asarray(r["acc"])[-1, -1] for r in unsolved])
    chance = 1.0 / (unsolved or solved_runs)[0]["N"]
    return {
        f"{p}unsolved_n": (len(unsolved), "unsolved runs"),
        f"{p}unsolved_early_n": (
            int(early),
            f"unsolved runs that never learned one of hops 1..k-1 (at {level})",
        ),
        f"{p}wait_max": (
            float(max(waits)) if waits else math.nan,
            "solved runs: the most steps one trained on its last stage before the k-th hop",
        ),
        f"{p}unsolved_time_min": (
            min(max(0.0, float(r["step"][-1]) - last_stage_at(r)) for r in unsolved)
            if unsolved
            else math.nan,
            "unsolved runs: the fewest steps one trained on its last stage (0: never got there)",
        ),
        f"{p}unsolved_last_max": (
            float(final.max()) if unsolved else math.nan,
            "unsolved runs: the highest final k-hop accuracy",
        ),
        f"{p}unsolved_flat_n": (
            int((final < 2 * chance).sum()),
            "unsolved runs whose final k-hop accuracy is below twice chance",
        ),
    }


def _pair_counts(
    a: dict[int, bool], b: dict[int, bool], p: str, only_a: str, only_b: str, what_a: str, what_b: str
) -> dict:
    """Over the seeds of both ``a`` and ``b`` ({seed: solved}): how many (and which) are solved in one only, and
    solved in ``b`` minus solved in ``a`` (``<p>pairs_n``, ``<p><only_a>_n``/``_seeds``, ``<p><only_b>_n``/``_seeds``,
    ``<p>gap_n``)."""
    pairs = sorted(set(a) & set(b))
    just_a = [s for s in pairs if a[s] and not b[s]]
    just_b = [s for s in pairs if b[s] and not a[s]]
    return {
        f"{p}pairs_n": (len(pairs), f"seeds run {what_a} and {what_b}"),
        f"{p}{only_b}_n": (len(just_b), f"seeds solved {what_b} and not {what_a}"),
        f"{p}{only_b}_seeds": (_seed_list(just_b), "those seeds"),
        f"{p}{only_a}_n": (len(just_a), f"seeds solved {what_a} and not {what_b}"),
        f"{p}{only_a}_seeds": (_seed_list(just_a), "those seeds"),
        f"{p}gap_n": (
            sum(b[s] for s in pairs) - sum(a[s] for s in pairs),
            f"over those seeds, solved {what_b} minus solved {what_a}",
        ),
    }


def sign_test(summary, p: str, only_a: str, only_b: str) -> report.Summary:
    """The exact two-sided sign test (McNemar's, exact) of a seed-by-seed comparison in ``summary``
    (:func:`_pair_counts`' ``<p><only_a>_n`` and ``<p><only_b>_n``, the seeds solved at one setting only): the
    probability, with each such seed equally likely to fall either way, of a split at least as uneven
    (``<p>sign_p``, 1 when none differ), and the same for the most uneven split the seeds allow, all of them one
    way (``<p>sign_p_best``): below 0.05 only when six or more seeds differ.

    >>> s = sign_test({"x_lost_n": 1, "x_gained_n": 2, "x_pairs_n": 7}, "x_", "lost", "gained")
    >>> s["x_sign_p"], s["x_sign_p_best"]
    (1.0, 0.015625)
    """
    a, b, n = int(summary[f"{p}{only_a}_n"]), int(summary[f"{p}{only_b}_n"]), int(summary[f"{p}pairs_n"])

    def two_sided(low: int, m: int) -> float:
        return min(1.0, 2 * sum(math.comb(m, i) for i in range(low + 1)) / 2**m) if m else 1.0

    return report.Summary(
        {
            f"{p}sign_p": (
                two_sided(min(a, b), a + b),
                f"exact two-sided sign test of {p}{only_a}_n = {a} against {p}{only_b}_n = {b}",
            ),
            f"{p}sign_p_best": (two_sided(0, n), f"the same test had all {n} seeds fallen one way"),
        }
    )


def interval_summary(
    runs: dict[str, dict], earlier: dict[str, dict] | None = None, level: float = 0.9, solved: float = 0.95
) -> report.Summary:
    """The numbers of the interval study, named ``int_*``: over :func:`interval_pool` (the runs with the seed
    study's), per interval the runs and how many end solved (lowest final accuracy over 1..k above ``solved``;
    :func:`_population`); over the seeds run at both, how many are solved at one interval only; and the
    unsolved runs of both intervals (:func:`_unsolved`)."""
    by = by_interval(interval_pool(runs, earlier))
    ok = {every: {s: _solved(r, solved) for s, r in rs.items()} for every, rs in by.items()}
    fast, slow = INTERVALS
    out = _sizes(next(iter(runs.values())), prefix="int_")
    for every in INTERVALS:
        out |= _population(
            by[every], ok[every], "int_", str(every), f"advancing every {every} steps", level, solved
        )
    out |= _pair_counts(
        ok[fast], ok[slow], "int_", "only_fast", "only_slow", f"every {fast}", f"every {slow}"
    )
    # the runs of both intervals
    both = [(r, ok[every][s]) for every in INTERVALS for s, r in by[every].items()]
    return report.Summary(
        out | _unsolved([r for r, good in both if not good], [r for r, good in both if good], "int_", level)
    )


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
                at, final = _learned_cells(r, level)
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


def interval_rows(runs: dict[str, dict], level: float = 0.9) -> list[list]:
    """One row per seed of :func:`interval_pool`'s runs (pass the pool): at each interval, the step each hop
    count is first learned, the move to the last stage and the final accuracies (:func:`paired_rows`)."""
    by = by_interval(runs)
    return paired_rows([by[every] for every in INTERVALS], level)


# the seeds that every 100 steps had not learned four hops in 10000 steps (khop_interval), run for twice the budget
INTERVAL_LONG = tuple(interval_name(s, 100) for s in INTERVAL_SEEDS[100])
INTERVAL_LONG_SETTINGS = INTERVAL_SETTINGS | {"steps": 20000}
# of those, the seeds whose k-hop accuracy was flat at chance at 10000 steps (khop_interval)
INTERVAL_FLAT = (3, 6)


# the seeds that every 250 steps had not learned four hops in 10000 steps and whose budget was in doubt (khop_interval):
# seed 3 moved to its last stage late (step 5000, its four-hop accuracy flat at chance since), seed 6 rising at the end
INTERVAL_LONG250 = tuple(interval_name(s, EXPLORED_EVERY) for s in (3, 6))
INTERVAL_FLAT250 = (3,)  # of those, the one flat at chance at 10000 steps


def interval_long_members(
    profile: str | None = None, names: tuple = INTERVAL_LONG
) -> dict[str, KHopExperiment]:
    """The runs ``names`` (:data:`INTERVAL_LONG`, :data:`INTERVAL_LONG250`) of :func:`interval_members`."""
    every = interval_members(profile)
    return {name: every[name] for name in names}


def interval_long_summary(
    runs: dict[str, dict],
    level: float = 0.9,
    solved: float = 0.95,
    prefix: str = "ilong_",
    flat: tuple = INTERVAL_FLAT,
) -> report.Summary:
    """The numbers of :func:`interval_long_members`' runs, named ``<prefix>*`` (``"ilong_"``; ``"il250_"`` for
    :data:`INTERVAL_LONG250`): per seed the first step at which the k-hop accuracy reaches ``level`` (inf: never)
    and the final k-hop accuracy; the largest rise of the k-hop accuracy over the second half of the budget; how
    many end solved (lowest final accuracy over 1..k above ``solved``), in all and among the seeds ``flat`` (flat
    at chance at the shorter budget: :data:`INTERVAL_FLAT`, :data:`INTERVAL_FLAT250`)."""
    p = prefix
    out = {**_sizes(next(iter(runs.values())), prefix=p), f"{p}n": (len(runs), "runs")}
    ok, gain = {}, []
    for name, r in runs.items():
        seed = _interval_of(name)[0]
        ok[seed] = _solved(r, solved)
        out[f"{p}s{seed}_hk_at"] = (
            float(learned_at(r, level)[-1]),
            f"seed {seed}: first step with the k-hop accuracy at {level} (inf: never)",
        )
        out[f"{p}s{seed}_final"] = (float(np.asarray(r["acc"])[-1, -1]), f"seed {seed}: final k-hop accuracy")
        step = np.asarray(r["step"])
        half = int(np.argmin(np.abs(step - step[-1] / 2)))
        gain.append(float(np.asarray(r["acc"])[-1, -1] - np.asarray(r["acc"])[half, -1]))
    return report.Summary(
        out
        | {
            f"{p}gain_max": (
                max(gain),
                "the largest rise of a run's k-hop accuracy over the second half of its "
                "budget (final minus at the middle evaluation)",
            ),
            f"{p}solved_n": (sum(ok.values()), f"runs whose lowest final accuracy is above {solved}"),
            f"{p}flat_solved_n": (
                sum(ok[s] for s in flat if s in ok),
                f"of seeds {flat} (flat at chance at 10000 steps), those solved",
            ),
        }
    )


INTERVAL_HEADER = paired_header(f"every {e}" for e in INTERVALS)


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
        """Refuse, before any run, a recording that :func:`variant_summary` cannot compare with the recorded base
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
# a third of the step size, for 1.5 times the budget (the profile's runs of these seeds are recorded that long)
LR = SeedVariant(
    "lr", "lr", 1, 3, 15000, "with a third of the step size", "base", "with the profile's step size"
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
    """The runs of ``variant`` (:data:`WIDE`, :data:`LR`, :data:`DOUBLING`, :data:`ANYSTART`, :data:`ONESTART`,
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
    the interval study's (10000) and the longer runs of :data:`INTERVAL_LONG` and :data:`INTERVAL_LONG250` (20000).

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
            seed, e = _seed_interval(name)
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


def variant_summary(
    runs: dict[str, dict],
    base: dict[int, dict] | None = None,
    level: float = 0.9,
    solved: float = 0.95,
    variant: SeedVariant = WIDE,
) -> report.Summary:
    """The numbers of :func:`variant_members`' runs, named ``<tag>_*``, against the same seeds at the profile's
    settings or ``over``'s (``base``: {seed: run}, default :meth:`SeedVariant.base_runs` at the variant's budget):
    the variant's runs and how many end solved (:func:`_population`), the same of the base runs
    (``<tag>_<base>_*``), over the seeds of both how many are solved in one only (``<tag>_gained_*``,
    ``<tag>_lost_*``, ``<tag>_gap_n``), and the variant's unsolved runs (:func:`_unsolved`). "Solved" counts the hop
    counts each population trains on (:meth:`SeedVariant.trained`); a variant of the stages adds what its runs do at
    the hop counts they never train on and where they part from the base runs (:func:`_split`).

    Raises:
        ValueError: the base runs were trained for another budget.
    """
    p = f"{variant.tag}_"
    runs_by = seeded(runs)
    base = variant.base_runs(variant.steps) if base is None else base
    steps = {int(r["step"][-1]) for r in [*runs_by.values(), *base.values()]}
    if len(steps) != 1:
        raise ValueError(
            f"budgets {sorted(steps)}: allowed {variant.tag} and {variant.base} runs of the same "
            "number of steps"
        )
    k = np.asarray(next(iter(runs.values()))["acc"]).shape[1]
    hops = variant.trained(k)
    ok = {s: _solved(r, solved, hops) for s, r in runs_by.items()}
    ok_base = {
        s: _solved(r, solved, variant.over.trained(k) if variant.over else None) for s, r in base.items()
    }
    out = _sizes(next(iter(runs.values())), prefix=p) | _population(
        runs_by, ok, p, "", variant.who, level, solved
    )
    out |= _population(base, ok_base, f"{p}{variant.base}_", "", variant.base_who, level, solved)
    out |= _pair_counts(ok_base, ok, p, "lost", "gained", variant.base_who, variant.who)
    if variant.field == "levels":
        out |= _split(runs_by, base, ok, variant, level)
    return report.Summary(
        out
        | _unsolved(
            [r for s, r in runs_by.items() if not ok[s]],
            [r for s, r in runs_by.items() if ok[s]],
            p,
            level,
            hops,
        )
    )


def _split(
    runs: dict[int, dict],
    base: dict[int, dict],
    ok: dict[int, bool],
    variant: SeedVariant,
    level: float = 0.9,
) -> dict:
    """Summary entries of ``variant``'s runs ({seed: run}), whose stages differ from the base runs' of the same
    seeds: each is the base run until the evaluation at which the two move to different stages (the last before
    their recorded stages, the stage trained on before each evaluation, differ), so their test accuracies up to
    there agree (``<p>split_gap``, the largest difference; 0 when the code keeps that promise); the median step of
    that evaluation (``<p>split_med``, over the runs that get there); how many runs learned the stage they moved to
    there (accuracy at ``level``; ``<p>split_next_n``), how many base runs learned theirs
    (``<p>split_base_next_n``) and the most steps one took (``<p>split_base_next_max``); over the seeds that part,
    how many learned their next stage in one of the pair only (:func:`_pair_counts`, named ``<p>next_*``); and the
    final accuracy of the solved runs at the hop counts they never train on (``<p>untrained_min``/``_max``)."""
    p = f"{variant.tag}_"
    gaps, at, nxt, nxt_base, base_took = [], [], {}, {}, []
    for s, r in runs.items():
        a, b = np.asarray(r["stage"]), np.asarray(base[s]["stage"])
        n = min(len(a), len(b))
        diff = np.flatnonzero(a[:n] != b[:n])
        end = int(diff[0]) if len(diff) else n
        if len(diff):
            t = float(np.asarray(r["step"])[end - 1])
            at.append(t)
            nxt[s] = bool(np.isfinite(learned_at(r, level)[a[end] - 1]))
            base_took.append(float(learned_at(base[s], level)[b[end] - 1]) - t)
            nxt_base[s] = bool(np.isfinite(base_took[-1]))
        gaps.append(_difference(r, base[s], slice(0, end)))
    k = np.asarray(next(iter(runs.values()))["acc"]).shape[1]
    never = [h - 1 for h in range(1, k + 1) if h not in variant.trained(k)]
    free = [float(v) for s, r in runs.items() if ok[s] for v in np.asarray(r["acc"])[-1, never]]
    return {
        f"{p}split_gap": (
            max(gaps),
            "largest difference of test accuracy from the base run of the same seed up to "
            "the evaluation at which the two move to different stages",
        ),
        f"{p}split_med": (
            float(np.median(at)) if at else math.nan,
            "median step of that evaluation (the runs part after it)",
        ),
        f"{p}split_next_n": (
            sum(nxt.values()),
            f"runs that learned (at {level}) the stage they moved to there",
        ),
        f"{p}split_base_next_n": (
            sum(nxt_base.values()),
            "base runs that learned the stage they moved to there",
        ),
        f"{p}split_base_next_max": (
            max(base_took) if base_took else math.nan,
            "base runs: the most steps from there to learning the stage they moved to (inf: one never did)",
        ),
        **_pair_counts(
            nxt_base,
            nxt,
            f"{p}next_",
            "lost",
            "gained",
            f"{variant.base_who}, counting the stage after the split as solved",
            f"{variant.who}, counting the same",
        ),
        f"{p}untrained_min": (
            min(free) if free else math.nan,
            "solved runs: lowest final accuracy at a hop count never trained on",
        ),
        f"{p}untrained_max": (
            max(free) if free else math.nan,
            "solved runs: highest final accuracy at a hop count never trained on",
        ),
    }


def stage_gap(runs: dict[int, dict], other: dict[int, dict], stage: int, prefix: str) -> report.Summary:
    """Two studies' runs of the same seeds ({seed: run}) whose batches agree while they train on the stages up to
    ``stage`` (as :data:`ONESTART`'s and :data:`ANYSTART`'s, or :data:`LONGSTART`'s and :data:`DOUBLING`'s, on the
    first stage): the largest difference of their test accuracies over the evaluations before the first at which
    either trained past ``stage``, and of their stages up to that one (``<prefix>_stage_gap``; 0 when the code keeps
    that promise); ``<prefix>_stage_med``, the median step of the last evaluation before it.

    Raises:
        ValueError: ``stage`` below 1, or a seed of ``runs`` missing from ``other``.
    """
    check_int("stage", stage, low=1)
    gaps, at = [], []
    for s, a in runs.items():
        if s not in other:
            raise ValueError(f"seed {s} is not among the other study's seeds: allowed {sorted(other)}")
        b = other[s]
        n = min(len(a["stage"]), len(b["stage"]))
        sa, sb = np.asarray(a["stage"])[:n], np.asarray(b["stage"])[:n]
        past = np.flatnonzero((sa > stage) | (sb > stage))
        end = int(past[0]) if len(past) else n
        gaps.append(_difference(a, b, slice(0, end), stages=slice(0, min(end + 1, n))))
        at.append(float(np.asarray(a["step"])[end - 1]))
    return report.Summary(
        {
            f"{prefix}_stage_gap": (
                max(gaps),
                f"largest difference of test accuracy (or stage) from the other study's run "
                f"of the same seed before either trains past {stage} hops",
            ),
            f"{prefix}_stage_med": (float(np.median(at)), "median step of the last evaluation before that"),
        }
    )


def start_accuracy(exp: KHopExperiment, state: dict, n: int = 1024) -> np.ndarray:
    """(k, k): the trained model's accuracy on ``n`` fresh examples of k' hops starting at table s (row k' - 1,
    column s - 1; :meth:`KHopTask.sample`), stream "start-test" of its seed; NaN where the hops do not fit
    (s + k' - 1 > k). Row k' - 1, column 0 is the test set's kind of example (from table 1).

    Raises:
        ValueError: ``n`` below 1.
    """
    check_int("n (examples per cell)", n, low=1)
    task, model = exp.task(), exp.model()
    model.load_state_dict(state)
    rng = np.random.default_rng(config.seed_streams(exp.seed, ["start-test"])["start-test"])
    cells = [(h, s) for h in range(1, task.k + 1) for s in range(1, task.k - h + 2)]
    tests = [_tensors(task.sample(rng, np.full(n, h), np.full(n, s)), "cpu") for h, s in cells]
    out = np.full((task.k, task.k), np.nan)
    for (h, s), acc in zip(cells, _accuracy(model, tests)):
        out[h - 1, s - 1] = acc
    return out


# the seed and budget of the khop_anystart run trained live and tested from every table
START_PROBE = (0, 2000)


def start_rows(acc: np.ndarray) -> tuple[list[str], list[list]]:
    """:func:`start_accuracy` as a table: header and one row per hop count, "" where the hops do not fit."""
    k = acc.shape[0]
    return (
        ["hops"] + [f"from table {s}" for s in range(1, k + 1)],
        [[h] + [f"{a:.2f}" if np.isfinite(a) else "" for a in acc[h - 1]] for h in range(1, k + 1)],
    )


def start_summary(acc: np.ndarray, exp: KHopExperiment, prefix: str = "start_") -> report.Summary:
    """Summary entries of :func:`start_accuracy` for ``exp``'s model (a curriculum whose examples start at any
    table; k hops only from table 1): the run's seed and budget (``<prefix>seed``, ``<prefix>steps``), the lowest
    accuracy over the starts of each hop count below k that its stages train on (``<prefix>h<k'>_min``), the
    accuracy at k hops (``<prefix>k``), the highest over the hop counts never trained on, at every start
    (``<prefix>untrained_max``, NaN if none), and chance (``<prefix>chance``)."""
    k, trained = exp.k, exp.stages
    never = [h for h in range(1, k + 1) if h not in trained]
    out = {f"{prefix}seed": (exp.seed, "the run's seed"), f"{prefix}steps": (exp.steps, "its training steps")}
    out |= {
        f"{prefix}h{h}_min": (
            float(np.nanmin(acc[h - 1])),
            f"lowest accuracy over the start tables, {h} hop(s)",
        )
        for h in trained
        if h < k
    }
    out[f"{prefix}k"] = (float(acc[k - 1, 0]), f"accuracy at {k} hops (from table 1, the only start)")
    out[f"{prefix}untrained_max"] = (
        float(np.nanmax(acc[np.asarray(never) - 1])) if never else math.nan,
        "highest accuracy at a hop count never trained on, over its start tables",
    )
    out[f"{prefix}chance"] = (1 / exp.N, "chance accuracy, 1 / N")
    return report.Summary(out)


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
# the seeds that learned four hops advancing every 100 steps (the seed study)
SEED_PROBED = ("seed 1", "seed 2")
# recorded: ``khop_probe_seeds``
SEED_PROBE = ProbeStudy({n: f"s{n.split()[-1]}" for n in SEED_PROBED}, "sprobe")
# the khop_anystart run trained live (:data:`START_PROBE`)
START_PROBED = f"seed {START_PROBE[0]}, from any table"
# its four-hop and two-hop examples
ANYSTART_PROBE = ProbeStudy({START_PROBED: "a0"}, "aprobe", hops=(RECORDED_K, 2))
# the same run stopped where it moves to four hops (none trained yet)
MOVE_PROBED = f"{START_PROBED}, at the move"
ANYSTART_MOVE_PROBE = ProbeStudy({MOVE_PROBED: "m0"}, "mprobe", hops=(RECORDED_K, 2))


def probe_members(profile: str | None = None, study: ProbeStudy = PROBE) -> dict[str, KHopExperiment]:
    """The runs of ``study`` (of :func:`seed_members`); by default :data:`PROBED`, the two runs of seed 0 advancing
    every 100 steps and every :data:`EXPLORED_EVERY`."""
    return {k: v for k, v in seed_members(profile).items() if k in study.tags}


def seed_probe_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """:func:`probe_members` of :data:`SEED_PROBE`: the seeds of :data:`SEED_PROBED`."""
    return probe_members(profile, SEED_PROBE)


def probe_run(exp: KHopExperiment, progress: bool = True, device=None) -> dict:
    """:func:`run` of ``exp``, carrying ``exp`` itself (``"exp"``), as :func:`probe_summary` reads it."""
    return {**run(exp, progress=progress, device=device), "exp": exp}


def probe_run_and_move(exp: KHopExperiment, progress: bool = True, device=None) -> tuple[dict, dict]:
    """:func:`probe_run` of a curriculum run ``exp`` and, from the same training, what :func:`probe_run` of the
    run stopped at its move to the last stage gives (``exp`` with ``steps`` = that evaluation step: the curves up
    to it, the state there, which ``_train(..., keep=(0,))`` keeps; a run's training does not depend on its
    budget), trained once and cached as one run.

    Raises:
        ValueError: a run that never moves to its last stage, or starts there.
    """
    r = cache.load_or_compute("khop-and-move", exp, lambda: _train(exp, progress, device, keep=(0,)), MODULES)
    at = last_stage_at(r)
    if not np.isfinite(at) or at <= 0 or 0 not in r["kept"]:
        raise ValueError(
            f"the run moves to its last stage at {at}: allowed a step after the start and within "
            f"steps={exp.steps}"
        )
    full = {k: v for k, v in r.items() if k != "kept"}
    short = dataclasses.replace(exp, steps=int(at))
    return {**full, "exp": exp}, {**truncated(full, int(at)), "state": r["kept"][0], "exp": short}


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
        tag, exp = study.tags[name], _member_of(name, r)
        for h in study.probed(exp.k):
            pre = study.prefix(tag, h, exp.k)
            _probe_values(out, f"{name}, {h}-hop examples", pre, hop_probe(exp, r["state"], hops=h), level)
        if exp.k > 1:
            _interference_values(out, name, tag, table_interference(exp, r["state"]))
        out[f"{tag}_depth"] = (exp.layers, f"{name}: blocks")
    out[f"{study.shared}_chance"] = (1 / exp.N, "chance: 1/N")  # the probed runs share their task and budget
    out[f"{study.shared}_k"] = (exp.k, "hops")
    out[f"{study.shared}_steps"] = (exp.steps, "training steps of each probed run")
    return report.Summary(out)


def seed_probe_summary(runs: dict[str, dict], level: float = 0.9) -> report.Summary:
    """:func:`probe_summary` of :data:`SEED_PROBE` (entries ``s1_*``, ``s2_*`` and ``sprobe_*``)."""
    return probe_summary(runs, level, SEED_PROBE)


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


def _interference_values(out: dict, name: str, tag: str, res: dict) -> None:
    """:func:`probe_summary`'s entries of one :func:`table_interference` result: ``<tag>_tk_<shown>_prev`` and
    ``_answer`` (``shown``: ``none``, ``b<block>`` (that block only), ``not<block>`` (all but it) or ``all``)
    and ``<tag>_tkattn_l<block>_e<i>``."""
    depth = len(res["attention"])
    for key, p, a in zip(_shown_keys(depth), res["prev"], res["answer"]):
        where = _shown_to(key)
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


def _shown_keys(depth: int) -> list[str]:
    """The names of :func:`table_interference`'s visibilities, in its order."""
    return ["none", *(f"b{b}" for b in range(1, depth + 1)), *(f"not{b}" for b in range(1, depth + 1)), "all"]


def _shown_to(key: str) -> str:
    """Which blocks see the last table under the visibility ``key`` of :func:`_shown_keys`."""
    if key.startswith("not"):
        return f"every block but block {key[3:]}"
    return {"none": "no block", "all": "every block (the model as it is)"}.get(key, f"block {key[1:]} only")


def interference_header(k: int) -> list[str]:
    """Columns of :func:`interference_rows`."""
    return ["run", f"table {k} shown to", f"answers v_{k - 1}", f"answers v_{k}"]


def interference_rows(summary, study: ProbeStudy = PROBE) -> list[list]:
    """One row per probed run of ``study`` and visibility of the last table (no block, each block alone, every
    block but one, every block) of its :func:`probe_summary`: the shares of k-hop answers that are v_(k-1) and
    v_k."""
    rows = []
    for name, tag in study.tags.items():
        depth = int(summary[f"{tag}_depth"])
        for key in _shown_keys(depth):
            where = _shown_to(key)
            rows.append([name, where, summary[f"{tag}_tk_{key}_prev"], summary[f"{tag}_tk_{key}_answer"]])
    return rows


def _member_of(name: str, r: dict) -> KHopExperiment:
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


def answers_rows(summary, study: ProbeStudy = PROBE) -> tuple[list[str], list[list]]:
    """What the probed models answer: header and one row per run of ``study`` and probed hop count h (its
    :func:`probe_summary`), the share of the model's answers on the h-hop examples that are x and each v_j (blank
    past v_h)."""
    k = int(summary[f"{study.shared}_k"])
    hops = study.probed(k)
    rows = [
        [
            name,
            h,
            *(summary[f"{study.prefix(tag, h, k)}_answers_v{j}"] for j in range(h + 1)),
            *[""] * (max(hops) - h),
        ]
        for name, tag in study.tags.items()
        for h in hops
    ]
    return ["run", "hops", "answers x", *(f"answers v_{j}" for j in range(1, max(hops) + 1))], rows


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


# --- the stages 1, 2, 4, every seed at its move to four hops (recorded: ``khop_anystart_move``, ``khop_doubling_move``)


def move_members(profile: str | None = None, variant: SeedVariant = ANYSTART) -> dict[str, KHopExperiment]:
    """The recorded runs of ``variant`` (``khop_<tag>``; :data:`ANYSTART` by default, :data:`DOUBLING`,
    :data:`ONESTART`, :data:`LONGSTART`) for seeds :data:`VARIANT_SEEDS`, each stopped at the evaluation where its
    recording moves to k hops (:meth:`SeedVariant.member` with that budget: the recorded run's first steps, no batch
    with k hops; the probe of seed 0 at its move in the chapter is the first of :data:`ANYSTART`'s).

    Raises:
        ValueError: a profile other than quick (the budgets come from the quick recording), or a recorded run that
            never moves.
    """
    name = f"khop_{variant.tag}"
    if config.get_profile(profile) != "quick":
        raise ValueError(
            f"{name}_move with profile {profile!r}: allowed 'quick' (its budgets are the moves of the "
            f"quick {name} recording)"
        )
    runs = seeded(recorded_runs(recorded(variant.settings(), experiment=name))[0])
    out = {}
    for s in VARIANT_SEEDS:
        move = last_stage_at(runs[s])
        if not np.isfinite(move) or move <= 0:
            raise ValueError(
                f"seed {s}'s recorded {name} run moves to its last stage at {move}: allowed a step "
                "after the start (a budget that ends there)"
            )
        out[seed_name(s)] = variant.member(s, int(move))
    return out


MOVE_MEASURES = {
    "v2": "v_2 at position 0, best over the layers",
    "walk": "v_2 at hop 1's entry, best over the layers",
    "read": "position 0's attention on hop 1's entry, largest over the blocks",
    "answers_v2": "share of the answers that are v_2",
    "acc": "accuracy",
}


def move_summary(runs: dict[str, dict], level: float = 0.9, prefix: str = "mv") -> report.Summary:
    """:func:`hop_probe` of each run of :func:`move_members` (from :func:`probe_run`) on k-hop (four in the recorded
    studies) and two-hop examples, reduced to what the chapter's probe of seed 0 at its move turned on
    (:data:`MOVE_MEASURES`): ``mv<seed>_<measure>`` on k hops and ``mv<seed>_h2_<measure>`` on two;
    ``mv<seed>_step``, its move (``mv``: ``prefix``, so that two studies glue on one page). Across the seeds:
    ``mv_n``; ``mv_walk2_n``, the seeds whose hop 1's entry holds v_2 on two hops (probe at ``level`` or more:
    table 1's entries walk to table 2) and ``mv_walk2_seeds``; ``mv_walk_kept_n``, of those, the seeds where it
    still does on k hops, and ``mv_walk_max``, the highest k-hop value among them (NaN if none); ``mv_v2_n``, the
    seeds whose position 0 holds v_2 on k hops (at ``level``), and ``mv_v2_max``; ``mv_h2_acc_min``, the lowest
    two-hop accuracy; ``mv_chance``, 1/N.

    Raises:
        ValueError: a run without its configuration, or one with fewer than three hops.
    """
    out, per, k = {}, {}, 0
    for name, r in runs.items():
        exp = _member_of(name, r)
        k = exp.k
        check_int("k (hops) of a run probed at its move", exp.k, low=3)
        tag, per[name] = f"{prefix}{exp.seed}", {}
        out[f"{tag}_step"] = (exp.steps, f"{name}: its move to {exp.k} hops (its training steps)")
        for h in (exp.k, 2):
            res, pre = hop_probe(exp, r["state"], hops=h), tag if h == exp.k else f"{tag}_h{h}"
            got = {
                "v2": res["probe"][:, 1].max(),
                "walk": np.nanmax(res["chain"][:, 0, 1]),
                "read": res["attention"][:, 0].max(),
                "answers_v2": res["answers"][2],
                "acc": res["acc"],
            }
            for key, what in MOVE_MEASURES.items():
                out[f"{pre}_{key}"] = (float(got[key]), f"{name}, {h}-hop examples: {what}")
                per[name][h if h == 2 else "k", key] = float(got[key])
    walkers = [n for n, v in per.items() if v[2, "walk"] >= level]
    out[f"{prefix}_n"] = (len(runs), "runs probed at their move")
    out[f"{prefix}_walk2_n"] = (
        len(walkers),
        f"seeds whose hop 1's entry holds v_2 on two hops (probe >= {level})",
    )
    out[f"{prefix}_walk2_seeds"] = (_seed_list(int(n.split()[-1]) for n in walkers), "those seeds")
    out[f"{prefix}_walk_kept_n"] = (
        sum(per[n]["k", "walk"] >= level for n in walkers),
        f"of those, seeds where it still does on {k} hops",
    )
    out[f"{prefix}_walk_max"] = (
        max((per[n]["k", "walk"] for n in walkers), default=math.nan),
        f"of those, the highest probe of v_2 at hop 1's entry on {k} hops",
    )
    out[f"{prefix}_v2_n"] = (
        sum(v["k", "v2"] >= level for v in per.values()),
        f"seeds whose position 0 holds v_2 on {k} hops (probe >= {level})",
    )
    out[f"{prefix}_v2_max"] = (
        max((v["k", "v2"] for v in per.values()), default=math.nan),
        f"the highest probe of v_2 at position 0 on {k} hops",
    )
    out[f"{prefix}_h2_acc_min"] = (
        min((v[2, "acc"] for v in per.values()), default=math.nan),
        "the lowest two-hop accuracy at the move",
    )
    out[f"{prefix}_chance"] = (1 / exp.N, "chance: 1/N")
    return report.Summary(out)


MOVE_HEADER = [
    "run",
    "moves at",
    "2 hops: accuracy",
    "2 hops: v_2 at hop 1's entry",
    "2 hops: position 0 on hop 1's entry",
    "4 hops: v_2 at hop 1's entry",
    "4 hops: position 0 on hop 1's entry",
    "4 hops: v_2 at position 0",
    "4 hops: answers v_2",
]


def move_rows(summary, prefix: str = "mv") -> list[list]:
    """One row per seed of :func:`move_summary` with ``prefix`` (columns :data:`MOVE_HEADER`)."""
    seeds = [s for s in VARIANT_SEEDS if f"{prefix}{s}_step" in summary]
    return [
        [
            seed_name(s),
            summary[f"{prefix}{s}_step"],
            *(summary[f"{prefix}{s}_h2_{k}"] for k in ("acc", "walk", "read")),
            *(summary[f"{prefix}{s}_{k}"] for k in ("walk", "read", "v2", "answers_v2")),
        ]
        for s in seeds
    ]


def move_medians(summary, prefix: str = "mv") -> report.Summary:
    """The medians over the seeds of :func:`move_summary`'s per-seed measures (``prefix``): ``<prefix>_v2_med`` and
    ``<prefix>_answers_v2_med`` (k hops: v_2 at position 0, answers v_2), ``<prefix>_walk_med`` and
    ``<prefix>_h2_walk_med`` (v_2 at hop 1's entry on k and on two hops), and the range of each,
    ``<prefix>_<measure>_lo`` and ``_hi``; read from the per-seed entries, so that a recording made before these
    medians existed gives them too.

    Raises:
        ValueError: no seed of ``prefix`` in ``summary``.
    """
    seeds = [s for s in VARIANT_SEEDS if f"{prefix}{s}_step" in summary]
    if not seeds:
        raise ValueError(
            f"prefix {prefix!r}: no seed's entries ({prefix}0_step, ...) in the summary; allowed the "
            "prefix of a move_summary"
        )
    out = {}
    for key, what in (
        ("v2", MOVE_MEASURES["v2"]),
        ("answers_v2", MOVE_MEASURES["answers_v2"]),
        ("walk", MOVE_MEASURES["walk"]),
        ("h2_walk", f"two hops: {MOVE_MEASURES['walk']}"),
    ):
        v = np.asarray([summary[f"{prefix}{s}_{key}"] for s in seeds], dtype=float)
        where = "" if key.startswith("h2") else "k hops: "
        out[f"{prefix}_{key}_med"] = (float(np.median(v)), f"median over the seeds, {where}{what}")
        out[f"{prefix}_{key}_lo"] = (float(v.min()), f"lowest over the seeds, {where}{what}")
        out[f"{prefix}_{key}_hi"] = (float(v.max()), f"highest over the seeds, {where}{what}")
    return report.Summary(out)


MOVE_COMPARE_HEADER = [
    "study",
    "seeds walking at table 1 (2 hops)",
    "of those, still on 4 hops",
    "4 hops: v_2 at position 0, median (range)",
    "4 hops: answers v_2, median (range)",
]


def move_compare_rows(studies: dict[str, tuple]) -> list[list]:
    """One row per study ({label: (move summary, prefix)}) of :data:`MOVE_COMPARE_HEADER`: the counts of
    :func:`move_summary` and the medians and ranges of :func:`move_medians`."""
    rows = []
    for label, (summary, p) in studies.items():
        m = move_medians(summary, p)
        rows.append(
            [
                label,
                summary[f"{p}_walk2_n"],
                summary[f"{p}_walk_kept_n"],
                *(
                    f"{m[f'{p}_{k}_med']:.2f} ({m[f'{p}_{k}_lo']:.2f}-{m[f'{p}_{k}_hi']:.2f})"
                    for k in ("v2", "answers_v2")
                ),
            ]
        )
    return rows


# --- leaving the stall: training continued from the stalled run's state (recorded: ``khop_escape``) ---

ESCAPE_STEPS = 3000  # steps of each continuation
ESCAPE_EVERY = 250  # its evaluation interval


@dataclass(frozen=True)
class Continuation:
    """One way of training on from a state (:func:`continue_training`): ``data`` (``"cumulative"``, the
    curriculum's last stage, or ``"direct"``, k hops only), the learning rate as a multiple of the run's
    (``lr_scale``), a block re-initialised first (``reinit``: 1..depth; -1, the last; 0, none), a fresh block
    added on top (``extra``), the blocks from whose keys table k is hidden (``hide``) and its length as a
    multiple of :data:`ESCAPE_STEPS` (``length``); ``tag`` prefixes its summary entries."""

    tag: str
    data: str = "cumulative"
    lr_scale: float = 1.0
    reinit: int = 0
    extra: bool = False
    hide: tuple = ()
    length: int = 1


CONTINUATIONS = {
    "cumulative": Continuation("cum"),
    "k hops only": Continuation("direct", data="direct"),
    "cumulative, lr x 3": Continuation("cum_lr3", lr_scale=3.0),
    "block 2 re-initialised": Continuation("re2", reinit=2),
    "last block re-initialised": Continuation("relast", reinit=-1),
    "one block more": Continuation("extra", extra=True),
    "table k hidden from block 1": Continuation("hide1", hide=(1,)),
    "k hops only, twice as long": Continuation("direct_long", data="direct", length=2),
    "table k hidden from block 1, k hops only, twice as long": Continuation(
        "hide1_direct_long", data="direct", hide=(1,), length=2
    ),
}
ESCAPE_TAGS = {name: c.tag for name, c in CONTINUATIONS.items()}  # summary prefixes
HIDING = (
    "table k hidden from block 1",
    "k hops only, twice as long",
    "table k hidden from block 1, k hops only, twice as long",
)  # the chapter's second table
CHANGES = tuple(n for n in CONTINUATIONS if n not in HIDING)  # its first: data, step size, the model's blocks


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
        evaluate=lambda step: {"acc": _accuracy(model, tests, mask)},
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


def escape_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """The stalled run: seed 0 of :func:`seed_members`, advancing every 100 steps (with ``PROBE_SETTINGS``)."""
    return {"seed 0": seed_members(profile)["seed 0"]}


def escape_run(exp: KHopExperiment, progress: bool = True, device=None) -> dict:
    """:func:`run` of ``exp``, then each of :data:`CONTINUATIONS` from its final state (``"continued"``, by name);
    ``"seconds"`` counts the run's training and the continuations."""
    for name, c in CONTINUATIONS.items():  # before any work
        check_int(f"block re-initialised by {name!r}", c.reinit, low=-1, high=exp.layers)
        for blk in c.hide:
            check_int(f"block hiding the last table in {name!r}", blk, low=1, high=exp.layers + c.extra)
    r = run(exp, progress=progress, device=device)
    cont = {
        name: continue_training(
            exp,
            r["state"],
            c.data,
            exp.lr * c.lr_scale,
            progress=progress,
            device=device,
            reinit=c.reinit,
            extra=c.extra,
            hide=c.hide,
            steps=ESCAPE_STEPS * c.length,
        )
        for name, c in CONTINUATIONS.items()
    }
    return {**r, "continued": cont, "seconds": r["seconds"] + sum(c["seconds"] for c in cont.values())}


def escape_curves(runs: dict[str, dict]) -> dict:
    """What a recorded file keeps of the continuations: their :func:`curves` by continuation name."""
    cont = runs["seed 0"]["continued"]
    return {key: {name: c[key] for name, c in cont.items()} for key in ("step", "acc", "stage")}


def escape_summary(runs: dict[str, dict]) -> report.Summary:
    """The continuations of :func:`escape_run`, named ``esc_<tag>_*`` (:data:`ESCAPE_TAGS`): the best k-hop
    accuracy over the continuation's evaluations (``_best_hk``), its final accuracy at each hop count
    (``_final_h<j>``) and the lowest accuracy over hop counts 1..k-1 at its last evaluation (``_final_below``);
    ``esc_start_h<j>``, the accuracy at each hop count where they start."""
    cont = runs["seed 0"]["continued"]
    first = np.asarray(next(iter(cont.values()))["acc"])[0]
    k = len(first)
    out = {
        f"esc_start_h{j + 1}": (float(v), f"accuracy at {j + 1} hops where the continuations start")
        for j, v in enumerate(first)
    }
    for name, c in cont.items():
        tag, acc = ESCAPE_TAGS[name], np.asarray(c["acc"])
        out[f"esc_{tag}_best_hk"] = (
            float(acc[:, -1].max()),
            f"{name}: best accuracy at {k} hops over its evaluations",
        )
        for j in range(k):
            out[f"esc_{tag}_final_h{j + 1}"] = (float(acc[-1, j]), f"{name}: final accuracy at {j + 1} hops")
        out[f"esc_{tag}_final_below"] = (
            float(acc[-1, :-1].min()),
            f"{name}: lowest final accuracy over 1..{k - 1} hops",
        )
        out[f"esc_{tag}_hk_at"] = (
            float(learned_at(c)[-1]),
            f"{name}: first step at which the {k}-hop accuracy reaches 0.9 (inf: never)",
        )
        out[f"esc_{tag}_start_below"] = (
            float(acc[0, :-1].min()),
            f"{name}: lowest accuracy over 1..{k - 1} hops at its start (after its change to the model)",
        )
    out["esc_steps"] = (
        int(np.asarray(next(iter(cont.values()))["step"])[-1]),
        "steps of each continuation (unless twice as long)",
    )
    out["esc_k"] = (k, "hops")
    return report.Summary(out)


def escape_rows(summary, names=None) -> list[list]:
    """One row per continuation (``names``, of :data:`CONTINUATIONS`; default all) of an :func:`escape_summary`
    (live or recorded): its name, the lowest accuracy over 1..k-1 hops at its start, its best k-hop accuracy, and
    its final accuracy at each hop count (columns :func:`escape_header`).

    Raises:
        ValueError: a name that is not a continuation.
    """
    k = int(summary["esc_k"])
    for name in names or ():
        check_choice("continuation", name, tuple(CONTINUATIONS))
    return [
        [
            name,
            summary[f"esc_{tag}_start_below"],
            summary[f"esc_{tag}_best_hk"],
            *(summary[f"esc_{tag}_final_h{j}"] for j in range(1, k + 1)),
        ]
        for name, tag in ESCAPE_TAGS.items()
        if names is None or name in names
    ]


def escape_header(k: int) -> list[str]:
    """Columns of :func:`escape_rows`."""
    return [
        "continued from the stall",
        f"at its start, lowest over 1..{k - 1} hops",
        f"best accuracy at {k} hops",
        *(f"final, {j} hop{'s' if j > 1 else ''}" for j in range(1, k + 1)),
    ]


# --- table k hidden from blocks from the first step (recorded: ``khop_hidden``, ``khop_hidden12``, ``_long``) ---

HIDDEN_FROM = (1,)  # the block that reads table k in seed 0's stall (and in seed 2's algorithm)
HIDDEN_TAGS = {**{seed_name(s): f"s{s}" for s in SEEDS}, EXPLORED: f"e{EXPLORED_EVERY}"}  # ``hid_<tag>_*``
# ``h<tag>_*``
HIDDEN_PROBE = ProbeStudy({name: f"h{tag[1:]}" for name, tag in HIDDEN_TAGS.items()}, "hprobe")


@dataclass(frozen=True)
class HiddenStudy:
    """The runs ``names`` of :func:`seed_members` (by default all four), each with table k hidden from the keys of
    ``blocks`` (from 1) from the first step: summary entries ``<prefix>_<tag>_*`` (tags :data:`HIDDEN_TAGS`),
    probes as ``probe`` (none: a study of the curves only)."""

    blocks: tuple
    prefix: str
    probe: ProbeStudy | None = None
    names: tuple = tuple(HIDDEN_TAGS)

    @property
    def where(self) -> str:
        """``block 1``, ``blocks 1 and 2``: the blind blocks in words."""
        *first, last = self.blocks
        return f"blocks {', '.join(map(str, first))} and {last}" if first else f"block {last}"


# table k hidden from block 1 (``hid_*``, ``h0_*``, ...)
HIDDEN = HiddenStudy(HIDDEN_FROM, "hid", HIDDEN_PROBE)
HIDDEN12 = HiddenStudy(
    (1, 2), "hid12", ProbeStudy({n: f"hh{t[1:]}" for n, t in HIDDEN_TAGS.items()}, "hhprobe")
)
"""Table k hidden from blocks 1 and 2 (``hid12_*``, ``hh0_*``, ...): does the harm follow it to block 3?"""
HIDDEN12_LONG = HiddenStudy((1, 2), "hid12l", names=("seed 0", EXPLORED))
"""Seed 0's two runs of :data:`HIDDEN12`, recorded for the seed study's budget (``hid12l_*``, curves only): do they
stall or only learn late?"""


def hidden_members(profile: str | None = None, study: HiddenStudy = HIDDEN) -> dict[str, KHopExperiment]:
    """The runs ``study.names`` of :func:`seed_members` (by default ``"seed 0"``, ..., and seed 0 advancing every
    :data:`EXPLORED_EVERY` steps), each with table k hidden from the keys of the blocks ``study.blocks`` (by default
    :data:`HIDDEN_FROM`) from the first step, in training and when measured (``hide_k_from``). Table k is
    padding before the last stage, so each run is its seed study run until then."""
    return {
        name: dataclasses.replace(e, hide_k_from=study.blocks)
        for name, e in seed_members(profile).items()
        if name in study.names
    }


def hidden_summary(runs: dict[str, dict], level: float = 0.9, study: HiddenStudy = HIDDEN) -> report.Summary:
    """The numbers of a finished :func:`hidden_members` set, named ``<prefix>_*`` (``hid_*`` by default): for
    each run (``hid_<tag>_*``, :data:`HIDDEN_TAGS`: ``s0``, ``s1``, ``s2``, ``e250``) the best k-hop accuracy over
    its evaluations (``_best_hk``), the first step at which it reaches ``level`` (``_hk_at``, inf: never), the
    step it moved to its last stage (``_stagek_at``), the steps between (``_wait``) and its lowest final accuracy
    over 1..k hops (``_final_min``); ``hid_learned_n``, the seeds advancing every 100 steps that learn the k-th
    hop; of the runs ``study.names`` only (:func:`hidden_study_summary` adds the probes)."""
    pre = study.prefix
    out = {**_sizes(runs[study.names[0]], prefix=f"{pre}_")}
    learned = 0
    for name in study.names:
        r, tag, who = runs[name], f"{pre}_{HIDDEN_TAGS[name]}", f"{name}, table k hidden from {study.where}"
        out |= _outcome(r, tag, who, level)
        learned += bool(np.isfinite(out[f"{tag}_hk_at"][0])) and name != EXPLORED
        out[f"{tag}_wait"] = (
            last_stage_wait(r, level),
            f"{who}: steps on its last stage before it learns the k-th hop (inf: never)",
        )
    out[f"{pre}_learned_n"] = (
        learned,
        f"seeds that learn the k-th hop with table k hidden from {study.where}",
    )
    return report.Summary(out)


def _outcome(r: dict, tag: str, who: str, level: float) -> dict:
    """How a curriculum run ends, as summary entries ``<tag>_*``: its best k-hop accuracy over its evaluations
    (``_best_hk``), the first step at which it reaches ``level`` (``_hk_at``, inf: never), the step it moved to its
    last stage (``_stagek_at``) and its lowest final accuracy over 1..k hops (``_final_min``); ``who`` names the
    run in the meanings."""
    acc = np.asarray(r["acc"])
    return {
        f"{tag}_best_hk": (float(acc[:, -1].max()), f"{who}: best accuracy at k hops over its evaluations"),
        f"{tag}_hk_at": (
            float(learned_at(r, level)[-1]),
            f"{who}: first step at which the k-hop accuracy reaches {level} (inf: never)",
        ),
        f"{tag}_stagek_at": (last_stage_at(r), f"{who}: the step it moved to its last stage"),
        f"{tag}_final_min": (float(acc[-1].min()), f"{who}: lowest final accuracy over 1..k hops"),
    }


def hidden_study_summary(
    runs: dict[str, dict], level: float = 0.9, study: HiddenStudy = HIDDEN
) -> report.Summary:
    """What the recorded study keeps: :func:`hidden_summary` and, of runs from :func:`probe_run` (with ``state``
    and ``exp``), their :func:`probe_summary` as ``study.probe`` (by default :data:`HIDDEN_PROBE`: ``h0_*``, ...,
    ``h250_*``, ``hprobe_*``): where each uses table k.

    Raises:
        ValueError: a study without probes (its summary is :func:`hidden_summary`).
    """
    if study.probe is None:
        raise ValueError(
            f"the study {study.prefix!r} has no probes: allowed a study with a ProbeStudy, or "
            "hidden_summary for the curves only"
        )
    return report.Summary(
        hidden_summary(runs, level, study).entries() | probe_summary(runs, level, study.probe).entries()
    )


def hidden_vs_plain(
    runs: dict[str, dict], plain: dict[str, dict], level: float = 0.9, study: HiddenStudy = HIDDEN
) -> report.Summary:
    """Each run of :func:`hidden_members` against the same run without the hiding (``plain``, by the same names):
    before the last stage, the largest difference of their accuracies at hop counts 1..k-1 or of their stages
    over the common evaluations at which ``plain`` is not yet training on k hops (``hid_<tag>_gap``, tags
    :data:`HIDDEN_TAGS`, and ``hid_gap``, the largest; zero when hiding table k changes nothing while it is
    padding); the plain run's steps on its last stage before it learns the k-th hop (``hid_<tag>_plain_wait``,
    inf: never, as :func:`hidden_summary`'s ``_wait``) and the hidden run's minus it (``hid_<tag>_wait_change``;
    NaN when neither learns it). Named with ``study.prefix`` for ``hid``.

    Raises:
        ValueError: a run missing from ``plain``, or two runs evaluated at different steps.
    """
    out, worst, pre = {}, 0.0, study.prefix
    for name in study.names:
        s = HIDDEN_TAGS[name]
        if name not in plain:
            raise ValueError(f"{name!r} is not among the runs without hiding: allowed {sorted(plain)}")
        a, b = runs[name], plain[name]
        gap = _gap_before_last_stage(name, a, b)
        out[f"{pre}_{s}_gap"] = (
            gap,
            f"{name}: largest difference before the last stage, hidden from {study.where} or not",
        )
        worst = max(worst, gap)
        wait = [last_stage_wait(r, level) for r in (a, b)]
        out[f"{pre}_{s}_plain_wait"] = (
            wait[1],
            f"{name} without the hiding: steps on its last stage before it learns the k-th hop (inf: never)",
        )
        out[f"{pre}_{s}_wait_change"] = (
            wait[0] - wait[1] if np.isfinite(wait).any() else math.nan,
            f"{name}: steps on the last stage before the k-th hop is learned, hidden "
            f"from {study.where} minus plain (inf: only the plain run learns it; "
            "NaN: neither)",
        )
    out[f"{pre}_gap"] = (
        worst,
        f"largest difference before the last stage over the runs, hidden from {study.where} or not",
    )
    return report.Summary(out)


def _gap_before_last_stage(name: str, a: dict, b: dict) -> float:
    """The largest difference of run ``a``'s accuracies at hop counts 1..k-1 or stages from run ``b``'s, over
    their common evaluations at which ``b`` is not yet training on k hops.

    Raises:
        ValueError: the two are evaluated at different steps.
    """
    n = _common_evaluations(name, a, b)
    before = np.flatnonzero(np.asarray(b["stage"])[:n] < np.asarray(b["acc"]).shape[1])
    return _difference(a, b, before, stages=before, hops=slice(0, -1))


def _difference(a: dict, b: dict, rows, stages=None, hops=slice(None)) -> float:
    """The largest absolute difference of two runs' test accuracies at the hop counts ``hops`` (columns) over the
    evaluations ``rows`` (a slice or index array valid for both runs), and of their stages over the evaluations
    ``stages`` (None: stages not compared); 0.0 over no evaluation. The one measure of "the same run until X"
    behind :func:`prefix_gap`, :func:`stage_gap`, ``_split``'s ``split_gap`` and ``_gap_before_last_stage``,
    each of which keeps only its own rule for X.

    >>> a = {"acc": [[1.0, 0.5], [1.0, 0.25]], "stage": [1, 2]}
    >>> b = {"acc": [[1.0, 0.5], [0.5, 0.25]], "stage": [1, 1]}
    >>> _difference(a, b, slice(0, 1)), _difference(a, b, slice(0, 2)), _difference(a, b, slice(0, 2), hops=[1])
    (0.0, 0.5, 0.0)
    >>> _difference(a, b, slice(0, 1), stages=slice(0, 2)), _difference(a, b, slice(0, 0))
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


def _common_evaluations(name: str, a: dict, b: dict) -> int:
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
        n = _common_evaluations(name, a, b)
        worst = max(worst, _difference(a, b, slice(0, n), stages=slice(0, n)))
    return report.Summary(
        {
            f"{prefix}_prefix_gap": (
                worst,
                "largest difference of accuracies or stages over the "
                "shorter runs' evaluations, longer against shorter",
            )
        }
    )


def hiding_rows(studies: dict[str, dict[str, dict]], steps: int) -> list[list]:
    """One row per run name (the names every study shares, in the first study's order): the best k-hop test
    accuracy over its evaluations up to step ``steps`` in each study (``studies``: {column label: {run name:
    run}}, e.g. no hiding, table k hidden from block 1, from blocks 1 and 2), so that runs recorded for
    different budgets compare over the same steps.

    Raises:
        ValueError: ``steps`` below 1, or a study with none of the first study's runs.
    """
    check_int("steps", steps, low=1)
    first = next(iter(studies.values()))
    for label, runs in studies.items():
        if not set(first) & set(runs):
            raise ValueError(
                f"study {label!r} has none of the runs {sorted(first)}: allowed the same run names"
            )
    names = [n for n in first if all(n in runs for runs in studies.values())]
    rows = []
    for name in names:
        best = []
        for runs in studies.values():
            r = runs[name]
            upto = np.asarray(r["step"]) <= steps
            best.append(float(np.asarray(r["acc"])[upto, -1].max()))
        rows.append([name, *best])
    return rows


def hiding_header(studies, k: int) -> list[str]:
    """Columns of :func:`hiding_rows`."""
    return ["run", *(f"best {k}-hop accuracy, {label}" for label in studies)]


# --- seed 0's two runs where they move to the last stage (recorded: ``khop_stage_entry``) ---

# ``n100_*``, ``n250_*``
ENTRY_PROBE = ProbeStudy({"seed 0": "n100", EXPLORED: f"n{EXPLORED_EVERY}"}, "nprobe")


def stage_entry_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """Seed 0's two runs (advancing every 100 and every :data:`EXPLORED_EVERY` steps, the probe study's), which
    :func:`stage_entry_run` trains to the step at which each moves to its last stage."""
    return probe_members(profile, ENTRY_PROBE)


def stage_entry_run(exp: KHopExperiment, progress: bool = True, device=None) -> dict:
    """:func:`run` of ``exp``, then of ``exp`` trained only up to the step at which that run moves to its last
    stage (:func:`last_stage_at`): the model there, before one step on k hops. One seed and a constant step size
    make the shorter run the longer one's prefix (``stage_entry_summary`` checks it). Returns the shorter run
    (curves and ``state``) with its configuration (``"exp"``, as :func:`probe_summary` reads it), the longer
    run's curves (``"full"``) and both runs' training time (``"seconds"``).

    Raises:
        ValueError: a run that never moves to its last stage.
    """
    full = run(exp, progress=progress, device=device)
    at = last_stage_at(full)
    if not np.isfinite(at) or at < 1:
        raise ValueError(
            f"{exp.data} run of seed {exp.seed}: its last stage starts at step {at}: allowed a run "
            f"that moves to it after step 0 within its {exp.steps} steps"
        )
    short = dataclasses.replace(exp, steps=int(at))
    r = run(short, progress=progress, device=device)
    return {
        **r,
        "exp": short,
        "full": {key: full[key] for key in ("step", "acc", "stage")},
        "seconds": full["seconds"] + r["seconds"],
    }


def stage_entry_summary(runs: dict[str, dict], level: float = 0.9) -> report.Summary:
    """:func:`probe_summary` of :func:`stage_entry_run`'s runs as :data:`ENTRY_PROBE` (``n100_*``, ``n250_*``,
    ``nprobe_*``: the models where they move to the last stage, on k-hop and (k - 1)-hop examples, and where
    table k disturbs them), with ``<tag>_at`` (that step), ``nprobe_prefix_gap`` (:func:`prefix_gap` of the
    shorter runs against the longer: zero when they are its prefix) and ``nprobe_tk_b1_gap`` (the difference of
    the two runs' shares of v_(k-1) answers with table k shown to block 1 only: how differently block 1 reacts
    to the table it has never seen)."""
    out = probe_summary(runs, level, ENTRY_PROBE).entries()
    for name, tag in ENTRY_PROBE.tags.items():
        out[f"{tag}_at"] = (float(runs[name]["exp"].steps), f"{name}: the step it moves to its last stage")
    out |= prefix_gap({name: r["full"] for name, r in runs.items()}, runs, "nprobe").entries()
    a, b = (out[f"{tag}_tk_b1_prev"][0] for tag in ENTRY_PROBE.tags.values())
    out["nprobe_tk_b1_gap"] = (
        abs(a - b),
        "the two runs where they move to the last stage: difference of their "
        "shares of v_(k-1) answers with table k shown to block 1 only",
    )
    return report.Summary(out)


# --- seed 0's two runs with other data on the last stage (recorded: ``khop_reseed``) ---

RESEED_STREAMS = (1, 2, 3, 4)  # the last stage's batch streams (``last_stage_data``) of each run
# ``<tag>_d<r>_*`` per run, ``<tag>_*`` per state
RESEED_TAGS = {"seed 0": "rs100", EXPLORED: f"rs{EXPLORED_EVERY}"}


def reseed_name(name: str, stream: int) -> str:
    """The member of :func:`reseed_members` that is run ``name`` with last-stage batch stream ``stream``."""
    return f"{name}{RESEED_SUFFIX}{stream}"


def reseed_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """Seed 0's two runs (:data:`PROBED`: advancing every 100 and every :data:`EXPLORED_EVERY` steps), each with
    the batches of its last stage drawn from each of :data:`RESEED_STREAMS` (``last_stage_data``): each run is
    its seed study run up to the move to k hops, and for a given stream the two runs then see the same batches
    in the same order. Does the state at the move decide which of them stalls, or the data after it?"""
    base = seed_members(profile)
    return {
        reseed_name(name, r): dataclasses.replace(base[name], last_stage_data=r)
        for name in RESEED_TAGS
        for r in RESEED_STREAMS
    }


def _reseed_parts(name: str) -> tuple[str, int]:
    """The run and the stream of a member of :func:`reseed_members`, from its name.

    Raises:
        ValueError: a name that is not one of them.
    """
    allowed = [reseed_name(n, r) for n in RESEED_TAGS for r in RESEED_STREAMS]
    check_choice("run with last-stage data", name, allowed)
    base, r = name.rsplit(RESEED_SUFFIX, 1)
    return base, int(r)


def reseed_summary(runs: dict[str, dict], level: float = 0.9) -> report.Summary:
    """The runs of :func:`reseed_members` (from :func:`probe_run`: with ``state`` and ``exp``), each named
    ``<tag>_d<r>_*`` (tags :data:`RESEED_TAGS`, r the stream): the best k-hop accuracy over its evaluations
    (``_best_hk``), the first step at which it reaches ``level`` (``_hk_at``, inf: never), the step it moved to
    its last stage (``_stagek_at``), its lowest final accuracy over 1..k hops (``_final_min``) and, at its end,
    where table k disturbs it (:func:`table_interference`: ``_tk_<shown>_prev``, ``_tk_<shown>_answer``,
    ``_tkattn_l<block>_e<i>``); per run of seed 0, the streams on which it learns the k-th hop
    (``<tag>_learned_n``); ``reseed_split_n``, the streams on which one of the two learns it and the other not;
    ``reseed_n``, the streams; ``reseed_stalled_b1_max`` and ``reseed_learned_b1_min``, the largest share of
    v_(k-1) answers with table k shown to block 1 only over the runs that never learn the k-th hop, and the
    smallest over those that do (NaN: no such run); and the sizes (``reseed_k``, ``reseed_steps``,
    ``reseed_chance``).

    Raises:
        ValueError: a run that is not one of :func:`reseed_members`, or a stream missing for one of the runs.
    """
    learned, out = {}, {}
    for name, r in runs.items():
        base, stream = _reseed_parts(name)
        learned[base, stream] = _reseed_values(out, name, r, f"{RESEED_TAGS[base]}_d{stream}", level)
    streams = sorted({s for _, s in learned})
    for base, tag in RESEED_TAGS.items():
        missing = [s for s in streams if (base, s) not in learned]
        if missing:
            raise ValueError(
                f"{base!r} has no run with last-stage data {missing}: allowed a study with every run "
                f"on every stream ({streams})"
            )
        out[f"{tag}_learned_n"] = (
            sum(learned[base, s] for s in streams),
            f"{base}: streams of last-stage data on which it learns the k-th hop",
        )
    a, b = RESEED_TAGS
    out["reseed_split_n"] = (
        sum(learned[a, s] != learned[b, s] for s in streams),
        "streams of last-stage data on which one of seed 0's two runs learns the k-th hop and "
        "the other does not",
    )
    out["reseed_n"] = (len(streams), "streams of last-stage data per run")
    b1 = {key: out[f"{RESEED_TAGS[key[0]]}_d{key[1]}_tk_b1_prev"][0] for key in learned}
    stalled, learnt = [b1[key] for key in b1 if not learned[key]], [b1[key] for key in b1 if learned[key]]
    out["reseed_stalled_b1_max"] = (
        max(stalled, default=math.nan),
        "the runs that never learn the k-th hop: the largest share of k-hop answers that "
        "are v_(k-1) with table k shown to block 1 only (NaN: none stalls)",
    )
    out["reseed_learned_b1_min"] = (
        min(learnt, default=math.nan),
        "the runs that learn the k-th hop: the smallest share of k-hop answers that are "
        "v_(k-1) with table k shown to block 1 only (NaN: none learns)",
    )
    out |= _sizes(next(iter(runs.values())), prefix="reseed_")
    return report.Summary(out)


def _reseed_values(out: dict, name: str, r: dict, tag: str, level: float) -> bool:
    """:func:`reseed_summary`'s entries of one run (``<tag>_*``); whether it learns the k-th hop."""
    out |= _outcome(r, tag, name, level)
    _interference_values(out, name, tag, table_interference(_member_of(name, r), r["state"]))
    return bool(np.isfinite(out[f"{tag}_hk_at"][0]))


RESEED_LONG = (*(reseed_name("seed 0", r) for r in RESEED_STREAMS), reseed_name(EXPLORED, 1))
"""The runs of :func:`reseed_members` that had not learned k hops in the recorded 8000 steps (``khop_reseed``),
recorded again for the seed study's budget (``khop_reseed_long``)."""


def reseed_long_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """The runs :data:`RESEED_LONG` of :func:`reseed_members`."""
    return {name: e for name, e in reseed_members(profile).items() if name in RESEED_LONG}


def reseed_long_summary(runs: dict[str, dict], level: float = 0.9) -> report.Summary:
    """:func:`reseed_summary`'s entries of each run of :func:`reseed_long_members` (from :func:`probe_run`),
    named ``rl_<tag>_d<r>_*``, with ``rl_learned_n`` (the runs that learn the k-th hop) and the sizes
    (``rl_k``, ``rl_steps``, ``rl_chance``).

    Raises:
        ValueError: a run that is not one of :data:`RESEED_LONG`.
    """
    out, learned = {}, 0
    for name, r in runs.items():
        check_choice("run of the longer study", name, RESEED_LONG)
        base, stream = _reseed_parts(name)
        learned += _reseed_values(out, name, r, f"rl_{RESEED_TAGS[base]}_d{stream}", level)
    out["rl_learned_n"] = (learned, f"runs of the longer study that learn the k-th hop (accuracy {level})")
    out |= _sizes(next(iter(runs.values())), prefix="rl_")
    return report.Summary(out)


def reseed_by_path(long, short, level: float = 0.5) -> report.Summary:
    """The longer runs (:func:`reseed_long_summary`, ``long``) by the path each had taken at the end of the shorter
    study (:func:`reseed_summary`, ``short``; as :func:`reseed_paths`, block 1 breaking the (k - 1)-hop answer
    below ``level``): the best k-hop accuracy of the longer runs whose block 1 broke it (``rl_broken_best_max``,
    the largest; NaN: none) and of those whose block 1 did not (``rl_unbroken_best_min``, the smallest; NaN:
    none), and how many of each (``rl_broken_n``, ``rl_unbroken_n``).

    Raises:
        ValueError: ``level`` outside (0, 1], or a run of :data:`RESEED_LONG` missing from either study.
    """
    check_float("level", level, 0.0, 1.0, low_open=True)
    broken, unbroken = [], []
    for name in RESEED_LONG:
        base, stream = _reseed_parts(name)
        tag = f"{RESEED_TAGS[base]}_d{stream}"
        if f"rl_{tag}_best_hk" not in long or f"{tag}_tk_b1_prev" not in short:
            raise ValueError(
                f"{name!r} is missing from the longer or the shorter study: allowed summaries of both "
                f"studies, with every run of {list(RESEED_LONG)}"
            )
        (broken if _block1_breaks(short, tag, level) else unbroken).append(long[f"rl_{tag}_best_hk"])
    return report.Summary(
        {
            "rl_broken_best_max": (
                max(broken, default=math.nan),
                "longer runs whose block 1 broke the (k-1)-hop answer "
                "at the shorter study's end: largest best k-hop "
                "accuracy",
            ),
            "rl_unbroken_best_min": (
                min(unbroken, default=math.nan),
                "longer runs whose block 1 did not: smallest best k-hop accuracy",
            ),
            "rl_broken_n": (
                len(broken),
                "longer runs whose block 1 broke the (k-1)-hop answer at the shorter study's end",
            ),
            "rl_unbroken_n": (len(unbroken), "longer runs whose block 1 did not"),
        }
    )


def _block1_breaks(summary, tag: str, level: float) -> bool:
    """Whether run ``tag`` of a :func:`reseed_summary` ended on the stall's path: with table k shown to block 1
    only, fewer than ``level`` of its k-hop answers are v_(k-1)."""
    return summary[f"{tag}_tk_b1_prev"] < level


def reseed_paths(summary, level: float = 0.5) -> report.Summary:
    """Which path each run of :func:`reseed_summary` took on its last stage, read off its end: block 1 breaks its
    (k - 1)-hop answer when table k is shown to block 1 only and fewer than ``level`` of its k-hop answers are
    v_(k-1) (as in seed 0's stall). Per run of seed 0, the streams on which it does (``<tag>_b1_breaks_n``, tags
    :data:`RESEED_TAGS`), and the streams on which one of the two runs does and the other not
    (``reseed_path_split_n``).

    Raises:
        ValueError: ``level`` outside (0, 1].
    """
    check_float("level", level, 0.0, 1.0, low_open=True)
    n = int(summary["reseed_n"])
    breaks = {
        tag: [_block1_breaks(summary, f"{tag}_d{r}", level) for r in range(1, n + 1)]
        for tag in RESEED_TAGS.values()
    }
    out = {
        f"{tag}_b1_breaks_n": (
            sum(b),
            f"{base}: streams of last-stage data on which block 1, shown table k alone, "
            f"leaves fewer than {level} of the k-hop answers at v_(k-1)",
        )
        for (base, tag), b in zip(RESEED_TAGS.items(), breaks.values())
    }
    a, b = breaks.values()
    out["reseed_path_split_n"] = (
        sum(x != y for x, y in zip(a, b)),
        "streams of last-stage data on which block 1 breaks one of seed 0's two runs and not the other",
    )
    return report.Summary(out)


def reseed_vs_plain(runs: dict[str, dict], plain: dict[str, dict], level: float = 0.9) -> report.Summary:
    """The runs of :func:`reseed_members` against seed 0's two runs with their own data throughout (``plain``,
    by the names ``"seed 0"`` and :data:`EXPLORED`): the largest difference of their accuracies at 1..k-1 hops or
    stages over the common evaluations before the plain run's last stage (``reseed_gap``: zero when other data
    on the last stage changes nothing before it), and the first step at which each plain run reaches ``level``
    at k hops (``<tag>_own_hk_at``, tags :data:`RESEED_TAGS`; inf: never).

    Raises:
        ValueError: a run that is not one of :func:`reseed_members`, its plain run missing, or two runs
            evaluated at different steps.
    """
    worst = 0.0
    for name, r in runs.items():
        base, _ = _reseed_parts(name)
        if base not in plain:
            raise ValueError(f"{base!r} is not among the runs with their own data: allowed {sorted(plain)}")
        worst = max(worst, _gap_before_last_stage(name, r, plain[base]))
    out = {
        "reseed_gap": (
            worst,
            "largest difference before the last stage, other data on the last stage against the run's own",
        )
    }
    for base, tag in RESEED_TAGS.items():
        if base in plain:
            out[f"{tag}_own_hk_at"] = (
                float(learned_at(plain[base], level)[-1]),
                f"{base} with its own data: first step at which the k-hop accuracy reaches "
                f"{level} (inf: never)",
            )
    return report.Summary(out)


def reseed_header(k: int) -> list[str]:
    """Columns of :func:`reseed_rows`."""
    return [
        "last-stage data",
        "run",
        "moves to k hops at (step)",
        f"best {k}-hop accuracy",
        f"{k}-hop learned at (step)",
        f"v_{k - 1} answers, table {k} shown to block 1 only",
        f"hop {marked_entry(k)}'s entry's attention on table {k}, block 1",
    ]


def marked_entry(k: int) -> int:
    """The hop whose entry's attention on table k in block 1 marks the stall (:func:`reseed_rows`): hop k - 2's,
    which composes v_(k-1) in block 1 in seed 0's runs (hop 1's for k = 2)."""
    return max(k - 2, 1)


def reseed_rows(summary, names=None, prefix: str = "") -> list[list]:
    """One row per run of :func:`reseed_summary` (by stream, then run; ``names``: only those runs, e.g.
    :data:`RESEED_LONG`; ``prefix``: ``"rl_"`` for :func:`reseed_long_summary`): where it moves to the last stage,
    its best k-hop accuracy, when it learns it, and the two marks of the stall at its end
    (:func:`table_interference` with table k shown to block 1 only; block 1's attention from hop k - 2's entry on
    table k)."""
    sizes = prefix or "reseed_"
    rows, e = [], marked_entry(int(summary[f"{sizes}k"]))
    for r in range(1, (int(summary["reseed_n"]) if names is None else max(RESEED_STREAMS)) + 1):
        for base, tag in RESEED_TAGS.items():
            if names is not None and reseed_name(base, r) not in names:
                continue
            rows.append([r, base, *_run_cells(summary, f"{prefix}{tag}_d{r}", e)])
    return rows


def _run_cells(summary, t: str, e: int) -> list:
    """The cells of one run ``t`` of a study with other last-stage data (:func:`reseed_rows`,
    :func:`delay_rows`): its move, best k-hop accuracy, when it learns it, and the two marks of the stall (hop
    ``e``'s entry's attention on table k in block 1)."""
    return [
        summary[f"{t}_stagek_at"],
        summary[f"{t}_best_hk"],
        summary[f"{t}_hk_at"],
        summary[f"{t}_tk_b1_prev"],
        summary[f"{t}_tkattn_l1_e{e}"],
    ]


# --- seed 0's stalled run moved to its last stage later (recorded: ``khop_delay``) ---

# the run advancing every 100 steps: it moves to its last stage when its bar is met, and stalls
DELAYED = "seed 0"
DELAY_GRID = {100: (0, 1, 2, 3, 4), 200: (0,), 400: (1, 2, 3, 4)}
"""The steps by which :func:`delay_members` delays the move of :data:`DELAYED` to its last stage, each with its
last-stage batch streams (0: its own, else ``last_stage_data``). Delay 0 is the run itself and its runs in
:func:`reseed_members`; delay 200 moves it at the step where :data:`EXPLORED` moves. We registered that with its
own data it would be that run again; it is not: the two runs part from their first stage (each advances at its
own evaluations: :func:`stage_moves`), which :func:`delay_vs_plain` shows."""
DELAY_REPEATS = (200, 0)  # (delay, stream) of :data:`DELAY_GRID` moving where :data:`EXPLORED` moves


def delay_name(delay: int, stream: int) -> str:
    """The member of :func:`delay_members` that moves ``delay`` steps later with last-stage stream ``stream``."""
    name = f"{DELAYED}, last stage {delay} steps later"
    return reseed_name(name, stream) if stream else name


def delay_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """:data:`DELAYED` moved to its last stage later (``last_stage_delay``), with its own last-stage data and
    with other streams (:data:`DELAY_GRID`): up to its bar the run is its own; for a given stream the delayed
    runs see the same last-stage batches as the runs of :func:`reseed_members`, from a state trained longer on
    k - 1 hops. How long after the bar must the move come for seed 0 to be spared the stall?"""
    base = seed_members(profile)[DELAYED]
    return {
        delay_name(d, r): dataclasses.replace(base, last_stage_delay=d, last_stage_data=r)
        for d, streams in DELAY_GRID.items()
        for r in streams
    }


def _delay_parts(name: str) -> tuple[int, int]:
    """The delay and the stream of a member of :func:`delay_members`, from its name.

    Raises:
        ValueError: a name that is not one of them.
    """
    grid = {delay_name(d, r): (d, r) for d, streams in DELAY_GRID.items() for r in streams}
    check_choice("run moved to its last stage later", name, list(grid))
    return grid[name]


def delay_summary(runs: dict[str, dict], level: float = 0.9, path: float = 0.5) -> report.Summary:
    """The runs of :func:`delay_members` (from :func:`probe_run`), each named ``dl<delay>_d<stream>_*`` with
    :func:`reseed_summary`'s entries of one run (how it ends; where table k disturbs it at its end); per delay,
    its runs (``dl<delay>_n``), those that learn the k-th hop (``_learned_n``) and those on the stall's path
    (``_breaks_n``: block 1, shown table k alone, leaves fewer than ``path`` of the k-hop answers at v_(k-1), as
    :func:`reseed_paths`); ``delay_path_escapes_n``, the runs on that path whose best k-hop accuracy reaches
    ``path`` all the same; and the sizes (``delay_k``, ``delay_steps``, ``delay_chance``).

    Raises:
        ValueError: ``path`` outside (0, 1], or a run that is not one of :func:`delay_members`.
    """
    check_float("path", path, 0.0, 1.0, low_open=True)
    out, by_delay, escapes = {}, {}, 0
    for name, r in runs.items():
        d, stream = _delay_parts(name)
        tag = f"dl{d}_d{stream}"
        learned = _reseed_values(out, name, r, tag, level)
        breaks = _block1_breaks(report.Summary(out), tag, path)
        escapes += breaks and out[f"{tag}_best_hk"][0] >= path
        by_delay.setdefault(d, []).append((learned, breaks))
    for d, res in sorted(by_delay.items()):
        who = f"{DELAYED}, last stage {d} steps later"
        out[f"dl{d}_n"] = (len(res), f"{who}: runs (streams of last-stage data, its own included)")
        out[f"dl{d}_learned_n"] = (sum(a for a, _ in res), f"{who}: runs that learn the k-th hop ({level})")
        out[f"dl{d}_breaks_n"] = (
            sum(b for _, b in res),
            f"{who}: runs on the stall's path (block 1, shown table k "
            f"alone, leaves fewer than {path} of the k-hop answers at "
            "v_(k-1))",
        )
    out["delay_path_escapes_n"] = (
        escapes,
        f"runs on the stall's path whose best k-hop accuracy reaches {path}",
    )
    out |= _sizes(next(iter(runs.values())), prefix="delay_")
    return report.Summary(out)


def split_streams(curves: dict) -> tuple[dict, dict]:
    """:func:`curves` of runs with and without other last-stage data (as :func:`reseed_name` names them), as two
    :func:`curves`: the runs with it, and those with their own (for :func:`companion.experiments.khop_figures.reseed_panels`)."""
    other = {n for n in curves["acc"] if RESEED_SUFFIX in n}
    return tuple(
        {key: {n: v for n, v in runs.items() if (n in other) == want} for key, runs in curves.items()}
        for want in (True, False)
    )


def delay_vs_plain(runs: dict[str, dict], plain: dict[str, dict]) -> report.Summary:
    """The runs of :func:`delay_members` against seed 0's runs with their own data throughout (``plain``, by the
    names :data:`DELAYED` and :data:`EXPLORED`): the largest difference of their accuracies at 1..k-1 hops or
    stages over the common evaluations before :data:`DELAYED` moves to its last stage (``delay_gap``: zero when
    the delay changes nothing before the bar); the run :data:`DELAY_REPEATS`, which moves to the last stage where
    :data:`EXPLORED` does, against that run at every hop count and stage over the steps at which both are
    evaluated, to the shorter one's end (``delay_repeat_gap``: zero if they were one run; ``delay_repeat_n``, the
    common evaluations; ``delay_repeat_first``, the first of them at which they differ, inf: none); and where each
    plain run moves to each stage (``delay_moves_<tag>``, :func:`stage_moves`, tags :data:`RESEED_TAGS`).

    Raises:
        ValueError: a run that is not one of :func:`delay_members`, the run :data:`DELAY_REPEATS` or a plain run
            missing, or two runs evaluated at different steps (before the move), or with no step in common.
    """
    for name in (DELAYED, EXPLORED):
        if name not in plain:
            raise ValueError(f"{name!r} is not among the runs with their own data: allowed {sorted(plain)}")
    worst = 0.0
    for name, r in runs.items():
        _delay_parts(name)
        worst = max(worst, _gap_before_last_stage(name, r, plain[DELAYED]))
    repeat = delay_name(*DELAY_REPEATS)
    if repeat not in runs:
        raise ValueError(f"{repeat!r} is missing: allowed runs of delay_members that include it")
    a, b = runs[repeat], plain[EXPLORED]
    steps, ia, ib = np.intersect1d(np.asarray(a["step"]), np.asarray(b["step"]), return_indices=True)
    if not len(steps):
        raise ValueError(
            f"{repeat!r} and {EXPLORED!r} have no evaluation step in common: allowed runs that do"
        )
    diff = np.maximum(
        np.abs(np.asarray(a["acc"])[ia] - np.asarray(b["acc"])[ib]).max(1),
        np.abs(np.asarray(a["stage"])[ia] - np.asarray(b["stage"])[ib]),
    )
    out = {
        "delay_gap": (worst, f"largest difference before the bar, {DELAYED} moved later against its own run"),
        "delay_repeat_gap": (
            float(diff.max()),
            f"{repeat} against {EXPLORED}: largest difference of their "
            "accuracies (every hop count) or stages at their common evaluations",
        ),
        "delay_repeat_n": (len(steps), f"{repeat} and {EXPLORED}: common evaluations"),
        "delay_repeat_first": (
            float(steps[np.flatnonzero(diff > 0)[0]]) if (diff > 0).any() else math.inf,
            f"{repeat} and {EXPLORED}: the first common evaluation at which they differ (inf: none)",
        ),
    }
    for name, tag in RESEED_TAGS.items():
        out[f"delay_moves_{tag}"] = (
            ", ".join(f"{m:.0f}" for m in stage_moves(plain[name])),
            f"{name}: the steps at which it moves to 2, ..., k hops",
        )
    return report.Summary(out)


def repeat_curves(runs: dict[str, dict], plain: dict[str, dict]) -> dict:
    """:func:`curves` of :data:`DELAYED`, the run :data:`DELAY_REPEATS` of :func:`delay_members` (``runs``) and
    :data:`EXPLORED` (``plain``: by those names), each to the last step of the delayed run (for
    :func:`companion.plotting.hop_panels`).

    Raises:
        ValueError: one of the three missing, or one shorter than the delayed run.
    """
    repeat = delay_name(*DELAY_REPEATS)
    picked = {name: src.get(name) for name, src in ((DELAYED, plain), (repeat, runs), (EXPLORED, plain))}
    missing = [name for name, r in picked.items() if r is None]
    if missing:
        raise ValueError(
            f"{missing} missing: allowed the delay study's runs and seed 0's two runs with their own data"
        )
    last = int(np.asarray(runs[repeat]["step"])[-1])
    return curves({name: truncated(r, last) for name, r in picked.items()})


def stage_moves(r: dict) -> list[float]:
    """The evaluation steps at which a curriculum run moves to stages 2..k (training on each starts right after;
    inf: never), as :func:`last_stage_at` for the last.

    >>> stage_moves({"step": np.array([0, 100, 200, 300]), "stage": np.array([1, 2, 2, 3]), "acc": np.zeros((4, 3))})
    [0.0, 200.0]
    """
    step, stage = np.asarray(r["step"]), np.asarray(r["stage"])
    out = []
    for s in range(2, np.asarray(r["acc"]).shape[1] + 1):
        first = np.flatnonzero(stage >= s)
        out.append(float(step[max(first[0] - 1, 0)]) if len(first) else math.inf)
    return out


def delay_by_move(delays, reseeds, streams=RESEED_STREAMS, level: float = 0.5) -> report.Summary:
    """:data:`DELAYED` on the same last-stage streams (``streams``) by the delay of its move to the last stage:
    delay 0 from :func:`reseed_summary` (``reseeds``), the others from :func:`delay_summary` (``delays``; the
    delays whose runs cover ``streams``), and as a reference :data:`EXPLORED` on the same streams
    (``reseeds``; key ``e<EXPLORED_EVERY>``: another run, which moves where delay 200 would); per delay (or
    reference) ``<d>``: the step of the move (``dmove<d>_at``), the streams on which the run takes the stall's path
    (``dmove<d>_breaks_n``, :func:`reseed_paths`' test at ``level``) and on which it learns the k-th hop
    (``dmove<d>_learned_n``); ``dmove_n``, the streams.

    Raises:
        ValueError: ``level`` outside (0, 1], or a stream missing from one of the runs.
    """
    check_float("level", level, 0.0, 1.0, low_open=True)
    tags = {"0": (reseeds, RESEED_TAGS[DELAYED])}
    tags |= {str(d): (delays, f"dl{d}") for d, s in sorted(DELAY_GRID.items()) if set(streams) <= set(s)}
    tags[f"e{EXPLORED_EVERY}"] = (reseeds, RESEED_TAGS[EXPLORED])
    out = {}
    for d, (summary, tag) in tags.items():
        runs = [f"{tag}_d{r}" for r in streams]
        missing = [t for t in runs if f"{t}_hk_at" not in summary]
        if missing:
            raise ValueError(
                f"runs {missing} are missing: allowed summaries with every stream of {list(streams)}"
            )
        who = EXPLORED if d.startswith("e") else f"{DELAYED}, last stage {d} steps later"
        out[f"dmove{d}_at"] = (
            max(summary[f"{t}_stagek_at"] for t in runs),
            f"{who}: the step it moves to it",
        )
        out[f"dmove{d}_breaks_n"] = (
            sum(_block1_breaks(summary, t, level) for t in runs),
            f"{who}: streams on which block 1 breaks the (k-1)-hop answer",
        )
        out[f"dmove{d}_learned_n"] = (
            sum(bool(np.isfinite(summary[f"{t}_hk_at"])) for t in runs),
            f"{who}: streams on which it learns the k-th hop",
        )
    out["dmove_n"] = (len(streams), "streams of last-stage data compared")
    return report.Summary(out)


def delay_header(k: int) -> list[str]:
    """Columns of :func:`delay_rows`."""
    return ["last stage later by (steps)", "last-stage data", *reseed_header(k)[2:]]


def delay_rows(summary) -> list[list]:
    """One row per run of :func:`delay_summary` (by delay, then stream; data 0: the run's own): as
    :func:`reseed_rows`."""
    rows, e = [], marked_entry(int(summary["delay_k"]))
    for d, streams in DELAY_GRID.items():
        for r in streams:
            if f"dl{d}_d{r}_hk_at" in summary:
                rows.append([d, r or "own", *_run_cells(summary, f"dl{d}_d{r}", e)])
    return rows


DELAY_MOVE_HEADER = [
    "run",
    "moves to k hops at (step)",
    "streams on the stall's path",
    "streams on which it learns k hops",
]


def delay_move_rows(summary) -> list[list]:
    """One row per delay of :func:`delay_by_move` (by delay), then the reference run: the move's step, and the
    streams (out of ``dmove_n``) on the stall's path and on which the run learns the k-th hop."""
    n = int(summary["dmove_n"])
    keys = [key[5:-3] for key in summary if key.startswith("dmove") and key.endswith("_at")]
    delays = sorted((k for k in keys if k.isdigit()), key=int) + [k for k in keys if not k.isdigit()]
    return [
        [
            f"{DELAYED}, last stage {d} steps later" if d.isdigit() else EXPLORED,
            summary[f"dmove{d}_at"],
            f"{int(summary[f'dmove{d}_breaks_n'])} of {n}",
            f"{int(summary[f'dmove{d}_learned_n'])} of {n}",
        ]
        for d in delays
    ]


# --- where block 1 comes to read table k along the last stage (recorded: ``khop_onset``) ---

# training steps on the last stage at which the model is read
ONSET_AFTER = (0, 100, 200, 400, 800, 1600, 3200)
ONSET_RUNS = {
    "seed 0": "on100",
    EXPLORED: f"on{EXPLORED_EVERY}",
    reseed_name("seed 0", 1): "on100_d1",
    reseed_name("seed 0", 3): "on100_d3",
}
"""The runs read along their last stage (summary tags): seed 0's two runs with their own data (stalled, and
learned), and the stalled run's state on two streams of :func:`reseed_members` on which it took the stall's path
(stream 1) and did not (stream 3), chosen after that study for the contrast within one state."""


def onset_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """The runs :data:`ONSET_RUNS`, as the seed study and :func:`reseed_members` configure them."""
    every = seed_members(profile) | reseed_members(profile)
    return {name: every[name] for name in ONSET_RUNS}


def onset_run(exp: KHopExperiment, progress: bool = True, device=None) -> dict:
    """:func:`run` of ``exp`` that also keeps the model after each of :data:`ONSET_AFTER` training steps on its
    last stage (``"kept"``: {steps: state dict}; the states that runs of exactly that many steps would end with),
    with its configuration (``"exp"``)."""
    r = cache.load_or_compute(
        "khop-onset", exp, lambda: _train(exp, progress, device, keep=ONSET_AFTER), MODULES
    )
    return {**r, "exp": exp}


def onset_summary(runs: dict[str, dict], path: float = 0.5) -> report.Summary:
    """The runs of :func:`onset_members` (from :func:`onset_run`) read after each of :data:`ONSET_AFTER` steps
    ``a`` on their last stage: :func:`table_interference`'s entries as :func:`probe_summary` names them, under
    ``<tag>_a<a>`` (tags :data:`ONSET_RUNS`: ``_tk_b1_prev``, the share of k-hop answers that are v_(k-1) with
    table k shown to block 1 only; ``_tk_all_answer``, the share that are right; ``_tkattn_l<block>_e<i>``, ...);
    per run, the same at its end (``<tag>_end_*``), the first of those steps at which block 1 breaks the
    (k - 1)-hop answer (``<tag>_onset``, as :func:`reseed_paths` at ``path``; inf: at none) and how it ends
    (:func:`_outcome`, at 0.9); over the runs on that path at their end, how many (``onset_path_n``) and the
    latest of their onsets (``onset_path_latest``); over the others, how many (``onset_spared_n``) and the
    smallest share of v_(k-1) answers with table k shown to block 1 only at any step read
    (``onset_spared_min``); and the sizes (``onset_k``, ``onset_steps``, ``onset_chance``).

    Raises:
        ValueError: ``path`` outside (0, 1], a run that is not one of :func:`onset_members`, or one without a
            kept state at one of :data:`ONSET_AFTER` (its last stage too short).
    """
    check_float("path", path, 0.0, 1.0, low_open=True)
    out, onsets, spared = {}, [], []
    for name, r in runs.items():
        check_choice("run read along its last stage", name, list(ONSET_RUNS))
        tag = ONSET_RUNS[name]
        short = [a for a in ONSET_AFTER if a not in r["kept"]]
        if short:
            raise ValueError(
                f"{name!r} has no state after {short} steps on its last stage: allowed runs that train "
                f"at least {max(ONSET_AFTER)} steps on it"
            )
        for a in ONSET_AFTER:
            res = table_interference(r["exp"], r["kept"][a])
            _interference_values(out, f"{name}, after {a} steps on its last stage", f"{tag}_a{a}", res)
        _interference_values(
            out, f"{name}, at its end", f"{tag}_end", table_interference(r["exp"], r["state"])
        )
        breaks = [a for a in ONSET_AFTER if _block1_breaks(report.Summary(out), f"{tag}_a{a}", path)]
        out[f"{tag}_onset"] = (
            float(breaks[0]) if breaks else math.inf,
            f"{name}: first of {list(ONSET_AFTER)} steps on its last stage at which block 1, "
            f"shown table k alone, leaves fewer than {path} of the k-hop answers at v_(k-1) "
            "(inf: none)",
        )
        out |= _outcome(r, tag, name, 0.9)
        on_path = _block1_breaks(report.Summary(out), f"{tag}_end", path)
        (onsets if on_path else spared).append(
            (out[f"{tag}_onset"][0], min(out[f"{tag}_a{a}_tk_b1_prev"][0] for a in ONSET_AFTER))
        )
    out["onset_path_n"] = (
        len(onsets),
        f"runs on the stall's path at their end (block 1's share below {path})",
    )
    out["onset_path_latest"] = (
        max((o for o, _ in onsets), default=math.nan),
        "runs on the stall's path at their end: the latest first step at which they are on it "
        "(NaN: no such run)",
    )
    out["onset_spared_n"] = (len(spared), "runs off the stall's path at their end")
    out["onset_spared_min"] = (
        min((m for _, m in spared), default=math.nan),
        "runs off the stall's path at their end: the smallest share of k-hop answers at "
        "v_(k-1) with table k shown to block 1 only, over every step read (NaN: no such run)",
    )
    out["onset_after"] = (
        ", ".join(map(str, ONSET_AFTER)),
        "the steps on the last stage after which the runs are read",
    )
    out |= _sizes(next(iter(runs.values())), prefix="onset_")
    return report.Summary(out)


def onset_vs_entry(onset, entry) -> report.Summary:
    """The states kept at the move (0 steps on the last stage, :func:`onset_summary`) of seed 0's two runs against
    the same runs trained to that step (:func:`stage_entry_summary`, tags :data:`ENTRY_PROBE`): the largest
    difference of their :func:`table_interference` entries (``onset_entry_gap``: zero when a kept state is the
    state that a run of that many steps ends with), over ``onset_entry_n`` entries.

    Raises:
        ValueError: one of the two runs missing from either summary.
    """
    worst, n = 0.0, 0
    for name, tag in ENTRY_PROBE.tags.items():
        keys = [key[len(tag) :] for key in entry if key.startswith(f"{tag}_tk")]
        mine = f"{ONSET_RUNS.get(name)}_a0"
        if not keys or any(mine + key not in onset for key in keys):
            raise ValueError(
                f"{name!r} is missing from the onset or the stage-entry summary: allowed summaries of "
                "both studies with seed 0's two runs"
            )
        worst = max([worst, *(abs(onset[mine + key] - entry[tag + key]) for key in keys)])
        n += len(keys)
    return report.Summary(
        {
            "onset_entry_gap": (
                float(worst),
                "largest difference of the interference entries, the state kept at the "
                "move against the run trained to it",
            ),
            "onset_entry_n": (n, "interference entries compared"),
        }
    )


ONSET_HEADER_ROWS = (
    "v_(k-1) answers, table k shown to block 1 only",
    "hop (k-2)'s entry's attention on table k, block 1",
    "right k-hop answers",
)


ONSET_HEADER = ["run", "measure", *(f"after {a} steps" for a in ONSET_AFTER)]  # columns of :func:`onset_rows`


def onset_rows(summary) -> list[list]:
    """Three rows per run of :func:`onset_summary` (its share of v_(k-1) answers with table k shown to block 1
    only, block 1's attention on table k, its right answers), one column per step of :data:`ONSET_AFTER`."""
    rows, e = [], marked_entry(int(summary["onset_k"]))
    for name, tag in ONSET_RUNS.items():
        if f"{tag}_onset" not in summary:
            continue
        for key, what in zip(("tk_b1_prev", f"tkattn_l1_e{e}", "tk_all_answer"), ONSET_HEADER_ROWS):
            rows.append([name, what, *(summary[f"{tag}_a{a}_{key}"] for a in ONSET_AFTER)])
    return rows
