"""The two three-step chapters' computation: the "three gradient steps" (slide "Gradient steps for the bigram
task", Birth Thm., informal), one gradient step per memory on the population loss from zero, their probes, their
runs (:func:`three_step_runs`: ``book/three_steps``'s :data:`SLIDE_RUNS`, ``book/three_steps_data``'s
:data:`DATA_RUNS`) and the table of a run's steps both chapters show (:func:`three_step_table`). Each chapter's
numbers and analysis are its own module's: :mod:`companion.experiments.three_steps_tables` and
:mod:`companion.experiments.three_steps_mechanism` (``book/three_steps``), :mod:`companion.experiments.three_steps_data`
(``book/three_steps_data``). The model, the memories by construction and the probes are
:mod:`companion.experiments.induction`'s."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from companion import cache, config, report
from companion.config import check_choice, check_float, check_int
from companion.data.recall import LOSS_POSITIONS, RecallTask
from companion.experiments.induction import (
    PAIR_SCORE,
    STEP_ORDER,
    Evaluator,
    InductionExperiment,
    construct,
    key_order,
    memory_scores,
)
from companion.models import ModelConfig, Transformer
from companion.train import batch_loss

MODULES = ("companion.experiments.three_steps",)  # the cache key of three_steps


STEP_PROBE = {"W_V^2": "probe_OV2", "W_QK^2": "probe_QK2_all", "W_QK^1": "probe_QK1"}


EMBEDDINGS = ("orthonormal", "gaussian")


STEP_DATA = ("uniform", "shakespeare", "shakespeare_iid")


ZERO_GRADIENT = 1e-6  # a gradient norm below this is float round-off of an exact zero: no step


@dataclass(frozen=True)
class ThreeStepExperiment(config.Profiled):
    """Three sequential gradient steps on the population loss, one per memory, from W_QK^1 = W_QK^2 = W_V^2 = 0.

    The model is the chapter's two-layer transformer (attention only, W_V^1 frozen). At zero init both
    attentions are uniform, which is where the slide's argument starts. The population loss is estimated
    on ``batch`` sequences (fixed by the seed). Each step moves one matrix along its normalised negative
    gradient by the size in ``etas`` that minimises the loss on the first ``line_batch`` of them (an exact
    line search on a grid).

    ``embeddings="orthonormal"`` replaces the random W_E, p_t, W_U and the remapping W_V^1 w_E(k) by
    mutually orthogonal directions of the same norms: the d -> infinity limit in which random embeddings
    are orthonormal (this needs d >= 3 V + T). ``"gaussian"`` keeps the chapter's random init.
    ``data="uniform"``: pi_u and pi_b uniform over the 65 characters (noise token unused, alpha = 0);
    ``"shakespeare"``: the chapter's bigram data; ``"shakespeare_iid"``: tiny Shakespeare's character
    frequencies with each token drawn independently of the one before (every bigram row is pi_u), the same
    triggers. ``second_step_sizes``: candidate sizes of step 2, each
    followed by step 3 from the same state; the one with the lowest loss after step 3 is kept (step 2's
    own line search would judge it before W_QK^1 can use it); empty: step 2 is line-searched like the others.
    ``loss_on="final_recall"``: one loss position per sequence, the last one, when it holds a trigger seen
    before (its output is in the context). ``scales``: after the three steps, compare the learned memories,
    rescaled, with hand-written ones at these scales (:func:`compare_scales`; orthonormal embeddings only,
    where the memories' blocks are defined); empty: no comparison.

    >>> ThreeStepExperiment.quick(d=64)
    Traceback (most recent call last):
    ...
    ValueError: d=64 is out of range: orthonormal embeddings need d >= 3 V + T = 230
    """

    profile: str = "quick"
    d: int = 256
    seq_len: int = 32
    n_triggers: int = 5
    batch: int = 8192
    chunk: int = 1024
    line_batch: int = 1024
    embeddings: str = "orthonormal"
    data: str = "uniform"
    loss_on: str = "final_recall"
    order: tuple[str, ...] = STEP_ORDER
    etas: tuple[float, ...] = tuple(2.0**k for k in range(-4, 16))
    second_step_sizes: tuple[float, ...] = ()
    scales: tuple[float, ...] = ()
    n_test: int = 1024
    seed: int = field(default_factory=config.book_seed)

    def __post_init__(self):
        config.check_int("seed", self.seed, low=0)
        config.get_profile(self.profile)
        check_int("seq_len (T)", self.seq_len, low=4)
        check_int("batch", self.batch, low=1)
        check_int("chunk", self.chunk, low=1, high=self.batch)
        check_int("line_batch", self.line_batch, low=self.chunk, high=self.batch)
        check_int("n_test", self.n_test, low=1)
        check_choice("embeddings", self.embeddings, EMBEDDINGS)
        check_choice("data", self.data, STEP_DATA)
        check_choice("loss_on", self.loss_on, LOSS_POSITIONS)
        object.__setattr__(self, "order", tuple(self.order))
        object.__setattr__(self, "etas", tuple(float(e) for e in self.etas))
        object.__setattr__(self, "second_step_sizes", tuple(float(e) for e in self.second_step_sizes))
        if any(e <= 0 for e in self.second_step_sizes):
            raise ValueError(f"second_step_sizes={self.second_step_sizes} must all be > 0")
        object.__setattr__(self, "scales", tuple(float(e) for e in self.scales))
        if any(e <= 0 for e in self.scales):
            raise ValueError(f"scales={self.scales} must all be > 0")
        if self.scales and self.embeddings != "orthonormal":
            raise ValueError(
                f"scales={self.scales} need embeddings='orthonormal' (the memories' blocks are defined "
                f"only there), not {self.embeddings!r}"
            )
        if sorted(self.order) != sorted(STEP_ORDER):
            raise ValueError(f"order={self.order} must be an ordering of {STEP_ORDER}")
        if not self.etas or min(self.etas) <= 0:
            raise ValueError(f"etas={self.etas} must be a non-empty list of step sizes > 0")
        check_int("n_triggers (K)", self.n_triggers, low=1, high=self.task_n() - 1)
        check_int("d", self.d, low=1)
        need = 3 * self.task().vocab_size + self.seq_len
        if self.embeddings == "orthonormal" and self.d < need:
            raise ValueError(f"d={self.d} is out of range: orthonormal embeddings need d >= 3 V + T = {need}")

    @classmethod
    def full(cls, **overrides) -> "ThreeStepExperiment":
        """T = 64 with d = 512, and a population of 65536 sequences."""
        return cls(
            **{
                **dict(
                    profile="full", d=512, seq_len=64, batch=65536, chunk=2048, line_batch=8192, n_test=4096
                ),
                **overrides,
            }
        )

    def task_n(self) -> int:
        return 65 if self.data == "uniform" else InductionExperiment.task_stats_n()

    def task(self) -> RecallTask:
        if self.data == "uniform":
            from companion.data.shakespeare import CharStats

            return RecallTask(
                seq_len=self.seq_len,
                alpha=0.0,
                n_triggers=self.n_triggers,
                noise="new",
                loss_on=self.loss_on,
                stats=CharStats.uniform(self.task_n()),
            )
        from companion.data.shakespeare import load_char_stats

        stats = load_char_stats()
        return RecallTask(
            seq_len=self.seq_len,
            alpha=0.0,
            n_triggers=self.n_triggers,
            noise="existing",
            loss_on=self.loss_on,
            stats=stats.independent() if self.data == "shakespeare_iid" else stats,
        )

    def model_config(self) -> ModelConfig:
        return ModelConfig(
            vocab_size=self.task().vocab_size, d=self.d, max_len=self.seq_len, ff=("none", "none")
        )

    # what the Evaluator reads
    ff = ("none", "none")

    @property
    def early_cutoff(self) -> int:
        return self.seq_len // 2


@torch.no_grad()
def orthonormal_embeddings(model: Transformer, seed: int) -> Transformer:
    """Replace W_E, p_t, W_U and W_V^1 (in place) by orthogonal directions of the random init's norms.

    Rows of W_E and P get norm sqrt(d) (a N(0, I_d) vector's), rows of W_U the mean norm of the random W_U,
    and W_V^1 maps w_E(k) to its own direction e~_k (orthogonal to every other embedding) with the random
    W_V^1's RMS gain, and p_t to 0.
    """
    V, d = model.W_E.shape
    T = model.P.shape[0]
    gen = config.torch_generator(
        config.seed_streams(seed, ["orthonormal-embeddings"])["orthonormal-embeddings"]
    )
    # (3V + T, d), orthonormal
    Q = torch.linalg.qr(torch.randn(d, 3 * V + T, generator=gen)).Q.T.to(model.W_E)
    E, P, U, E_remap = Q[:V], Q[V : V + T], Q[V + T : 2 * V + T], Q[2 * V + T :]
    v1 = model.matrix("W_V^1")
    gain = v1.norm() / d**0.5
    model.W_U.copy_(U * model.W_U.norm(dim=1).mean())
    model.W_E.copy_(E * d**0.5)
    model.P.copy_(P * d**0.5)
    v1.copy_(gain * E_remap.T @ E)
    return model


def _loss_positions(batches) -> int:
    """The number of loss positions of ``batches``.

    Raises:
        ValueError: there is none.
    """
    count = sum(int(b.loss_mask.sum()) for b in batches)
    if count == 0:
        raise ValueError("the population has no loss position: raise batch or seq_len")
    return count


def _population_loss(model: Transformer, batches) -> torch.Tensor:
    """Mean cross-entropy over every loss position of ``batches`` (a sum over chunks, one mean), on the model's
    device."""
    count = _loss_positions(batches)
    device = model.W_E.device
    return sum(batch_loss(model, b, device, reduction="sum") for b in batches) / count


# line-search losses this close (relative) to the lowest are compared again on the whole model (_line_search)
LINE_TIE = 1e-4


def _fast_line(model: Transformer, name: str, line) -> bool:
    """Whether :func:`_line_losses` applies: the chapter's model (two attention-only layers with square W_QK and
    W_V), one of their W_QK and W_V, and a loss on final positions only."""
    plain = all(
        not layer.factorised and not layer.value_out and layer.ff.kind == "none" for layer in model.layers
    )
    return (
        len(model.layers) == 2
        and plain
        and name in ("W_QK^1", "W_V^1", "W_QK^2", "W_V^2")
        and not any(b.loss_mask[:, :-1].any() for b in line)
    )


def _line_search(
    model: Transformer, name: str, line, W0: torch.Tensor, direction: torch.Tensor, etas
) -> float:
    """The size among ``etas`` (two or more) whose step W0 - e ``direction`` on ``name`` gives the lowest loss on
    ``line`` (the first of equal ones), as :func:`_population_loss` ranks them. Where :func:`_line_losses` applies it
    ranks the sizes, and the sizes within a relative :data:`LINE_TIE` of its lowest loss, if more than one, are
    compared again on the whole model; elsewhere every size runs the whole model. Leaves ``name`` at the last size
    tried."""
    W = model.matrix(name)

    def exact(e: float) -> float:
        W.copy_(W0 - e * direction)
        return _population_loss(model, line).item()

    candidates = list(range(len(etas)))
    if _fast_line(model, name, line):
        fast = np.asarray(_line_losses(model, name, line, W0, direction, etas))
        if np.isfinite(fast).any():
            best = np.nanmin(np.where(np.isfinite(fast), fast, np.nan))
            candidates = np.flatnonzero(fast <= best + LINE_TIE * abs(best)).tolist()
    if len(candidates) == 1:
        return etas[candidates[0]]
    return etas[candidates[int(np.argmin([exact(etas[i]) for i in candidates]))]]


@torch.no_grad()
def _line_losses(
    model: Transformer, name: str, line, W0: torch.Tensor, direction: torch.Tensor, etas
) -> list[float]:
    """The loss on ``line`` (:func:`_population_loss`) with matrix ``name`` set to W0 - e ``direction``, for each e
    of ``etas``, the other matrices as they are.

    A layer's scores are linear in its W_QK and its values in its W_V, so the changed layer's part is computed once
    at W0 and once along ``direction``, then combined at each size; below the changed layer the streams are computed
    once; the second layer is read at the final position only, its values as (attention @ stream) @ W_V^T. The same
    function as the model's forward in another order of operations, equal up to float rounding (tests/test_induction.py
    holds it to a relative 1e-5), so it serves only to rank the sizes: :func:`gradient_step` compares near-ties
    again on the whole model. Only for :func:`_fast_line`'s model and loss.

    Raises:
        ValueError: a model or loss outside :func:`_fast_line`, or a matrix other than the layers' W_QK and W_V.
    """
    if not _fast_line(model, name, line):
        raise ValueError(
            f"_line_losses: {name!r} needs two attention-only layers, a matrix among W_QK^1, W_V^1, W_QK^2, W_V^2 "
            "and a loss on final positions only"
        )
    kind, layer = name.rsplit("^", 1)
    on_first, first, second = layer == "1", *model.layers
    device, scale = model.W_E.device, model.scale
    totals = np.zeros(len(etas))

    def part(of, fixed, changes: bool):  # (value at W0, along the direction), or (value, None) if it stays
        return (of(W0), of(direction)) if changes else (of(fixed), None)

    def at(pair, e: float):
        return pair[0] if pair[1] is None else pair[0] - e * pair[1]

    def final_scores(M, x1, q):  # the second layer's at the final position, (B, T)
        return torch.einsum("bd,btd->bt", q @ M, x1) * scale

    for b in line:
        rows = torch.as_tensor(b.loss_mask[:, -1], device=device)
        x = model.embed(torch.as_tensor(b.inputs, device=device)[rows])  # (B, T, d)
        targets = torch.as_tensor(b.targets, device=device)[rows][:, -1]
        T = x.shape[1]
        future = ~torch.ones(T, T, dtype=torch.bool, device=device).tril()
        # the first layer: scores (B, T, T) before the mask, values (B, T, d)
        S1 = part(lambda M: (x @ M) @ x.transpose(1, 2) * scale, first.qk(), on_first and kind == "W_QK")
        V1 = part(lambda M: x @ M.T, first.v(), on_first and kind == "W_V")

        def stream(e: float):  # x^1, (B, T, d), and its final position
            x1 = x + torch.softmax(at(S1, e).masked_fill(future, float("-inf")), dim=-1) @ at(V1, e)
            return x1, x1[:, -1]

        if not on_first:  # the second layer's scores (B, T) and mixed values (B, d) at the final position
            x1, q = stream(0.0)
            S2 = part(lambda M: final_scores(M, x1, q), second.qk(), kind == "W_QK")
            if kind == "W_V":
                mixed = torch.einsum("bt,btd->bd", torch.softmax(S2[0], dim=-1), x1)
                out = (mixed @ W0.T, mixed @ direction.T)
        for i, e in enumerate(etas):
            if on_first:
                x1, q = stream(e)
                S2 = (final_scores(second.qk(), x1, q), None)
            if on_first or kind == "W_QK":
                out = (torch.einsum("bt,btd->bd", torch.softmax(at(S2, e), dim=-1), x1) @ second.v().T, None)
            totals[i] += F.cross_entropy(model.unembed(q + at(out, e)), targets, reduction="sum").item()
    return (totals / _loss_positions(line)).tolist()


def three_steps(
    exp: ThreeStepExperiment, *, device=None, progress: bool = True, use_cache: bool = True
) -> dict:
    """Run (or load) ``exp`` on ``device`` (default :func:`companion.config.get_device`'s): per step (0 = zero
    init) the matrix, step size, population loss, in-context accuracy on a test batch, and the recall probes;
    ``"device"`` and ``"seconds"`` besides."""
    return cache.load_or_compute(
        "three_steps",
        exp,
        lambda: _three_steps(exp, progress, device, use_cache),
        MODULES,
        fmt="json",
        use_cache=use_cache,
    )


def step_setup(exp: ThreeStepExperiment, device=None):
    """The model at zero init (embeddings per ``exp``) on ``device`` (default the CPU), the task, the
    population's chunks and the line-search chunks: the start of every three-step computation. The model is
    built on the CPU and moved, so that every device starts from the same weights."""
    model = Transformer(exp.model_config(), seed=exp.seed).to(device or "cpu")
    for p in model.parameters():
        p.requires_grad_(False)
    with torch.no_grad():
        for name in STEP_ORDER:
            model.matrix(name).zero_()
    if exp.embeddings == "orthonormal":
        orthonormal_embeddings(model, exp.seed)
    task = exp.task()
    rng = np.random.default_rng(config.seed_streams(exp.seed, ["population"])["population"])
    population = [task.sample(rng, min(exp.chunk, exp.batch - i)) for i in range(0, exp.batch, exp.chunk)]
    return model, task, population, population[: exp.line_batch // exp.chunk]


def population_gradient(model: Transformer, name: str, population) -> torch.Tensor:
    """The gradient of the population loss with respect to the matrix ``name`` (the others held fixed).

    Kept apart from the training engine (:func:`companion.train.fit`): the step-by-step construction takes
    single line-searched steps on the population loss, one matrix at a time, not minibatch training."""
    W = model.matrix(name)
    W.requires_grad_(True)
    try:
        (grad,) = torch.autograd.grad(_population_loss(model, population), W)
    finally:
        W.requires_grad_(False)
    return grad


def gradient_step(
    model: Transformer, name: str, population, line, etas, grad: torch.Tensor | None = None
) -> tuple[float, float]:
    """One step on ``name`` along its normalised negative population gradient (``grad``, when the caller has
    it for the model as it is now), of the size among ``etas`` with the lowest loss on ``line`` (one size: that
    size, with no loss to compare). A zero gradient (the matrix does not yet affect the loss) leaves the matrix
    as it is. Returns (gradient norm, size taken)."""
    grad = population_gradient(model, name, population) if grad is None else grad
    norm = grad.norm().item()
    if norm <= ZERO_GRADIENT:
        return norm, 0.0
    W = model.matrix(name)
    direction, W0 = grad / norm, W.detach().clone()
    with torch.no_grad():
        eta = _line_search(model, name, line, W0, direction, etas) if len(etas) > 1 else etas[0]
        W.copy_(W0 - eta * direction)
    return norm, eta


def cached(kind: str, exp: ThreeStepExperiment, args: dict, compute, modules, use_cache: bool = True):
    """``compute()`` for ``exp`` and ``args`` (the call's other arguments), cached under ``kind`` with the source
    of ``modules`` in its key: the population computations of both chapters (the steps' states here, the
    analysis modules' own)."""
    settings = {"exp": asdict(exp), **args}
    return cache.load_or_compute(kind, settings, compute, modules, fmt="torch", use_cache=use_cache)


def line_searched_steps(exp: ThreeStepExperiment, n: int, device=None, use_cache: bool = True) -> list[dict]:
    """The first ``n`` steps of ``exp.order`` (1 to 3), each line-searched over ``exp.etas`` as in
    :func:`three_steps` (whatever ``exp.second_step_sizes``): per step, ``"state"`` (the three memories after it,
    on the CPU), ``"grad_norm"`` and ``"eta"``. Cached (every computation of the chapter that starts from these
    states reads them once computed); step ``n`` continues from the cached steps before it, so the states are
    those :func:`three_steps` reaches, bitwise.

    Raises:
        ValueError: ``n`` outside [1, 3].
    """
    check_int("n (steps)", n, low=1, high=len(STEP_ORDER))

    def compute() -> list[dict]:
        before = line_searched_steps(exp, n - 1, device, use_cache) if n > 1 else []
        model, _, population, line = step_setup(exp, device)
        load_state(model, before[-1]["state"] if before else None)
        norm, eta = gradient_step(model, exp.order[n - 1], population, line, exp.etas)
        state = {k: model.matrix(k).detach().cpu().clone() for k in STEP_ORDER}
        return before + [{"state": state, "grad_norm": norm, "eta": eta}]

    return cached("three_steps_states", exp, {"steps": n}, compute, MODULES, use_cache)


@torch.no_grad()
def load_state(model: Transformer, state: dict | None) -> Transformer:
    """Copy the memories of ``state`` (a :func:`line_searched_steps` state; None: leave the model) into
    ``model``, in place, on its device."""
    for k, W in (state or {}).items():
        model.matrix(k).copy_(W)
    return model


def after_first_step(exp: ThreeStepExperiment, device=None, use_cache: bool = True):
    """The model after step 1 of the slide's order (W_V^2, line-searched as in :func:`three_steps`;
    :func:`line_searched_steps`, read from the cache unless ``use_cache`` is False) on ``device`` (default the
    CPU), its task and population: where step 2 starts.

    Raises:
        ValueError: ``exp``'s order does not start with the slide's first step.
    """
    if exp.order[0] != STEP_ORDER[0]:
        raise ValueError(f"after_first_step needs an order that starts with {STEP_ORDER[0]}, not {exp.order}")
    model, task, population, _ = step_setup(exp, device)
    load_state(model, line_searched_steps(exp, 1, device, use_cache)[0]["state"])
    return model, task, population


def _three_steps(exp: ThreeStepExperiment, progress: bool, device=None, use_cache: bool = True) -> dict:
    from tqdm.auto import tqdm

    start = time.perf_counter()
    device = config.get_device(device)
    model, task, population, line = step_setup(exp, device)
    evaluate = Evaluator(exp, model, device)
    bar = tqdm(
        total=1 + 2 * len(exp.second_step_sizes or (None,)), desc="three gradient steps", disable=not progress
    )

    def step(
        i: int,
        name: str,
        size: float | None = None,
        grad: torch.Tensor | None = None,
        done: dict | None = None,
    ) -> dict:
        """One step on ``name``: the line search's size, or ``size`` (``grad``: its gradient, if known); ``done``:
        the step as :func:`line_searched_steps` took it, loaded."""
        if done is None:
            norm, eta = gradient_step(
                model, name, population, line, exp.etas if size is None else (size,), grad
            )
        else:
            norm, eta = done["grad_norm"], done["eta"]
            load_state(model, done["state"])
        with torch.no_grad():
            loss = _population_loss(model, line).item()
        bar.update()
        rows_of = {"W_QK^2": qk2_rows, "W_QK^1": qk1_rows}.get(name)
        extra = rows_of(model, task.triggers, task.n) if rows_of else {}
        return {
            "step": i,
            "matrix": name,
            "grad_norm": norm,
            "eta": eta,
            "loss": loss,
            **evaluate(i),
            **extra,
        }

    with torch.no_grad():
        rows = [
            {
                "step": 0,
                "matrix": "init",
                "grad_norm": 0.0,
                "eta": 0.0,
                "loss": _population_loss(model, line).item(),
                **evaluate(0),
            }
        ]
    if not exp.second_step_sizes:  # three line-searched steps: those every other computation reads
        for i, done in enumerate(line_searched_steps(exp, 3, device, use_cache), start=1):
            rows.append(step(i, exp.order[i - 1], done=done))
        return _finish(exp, model, task, evaluate, rows, [], start, device, bar)
    rows.append(step(1, exp.order[0], done=line_searched_steps(exp, 1, device, use_cache)[0]))
    after_first = {n: model.matrix(n).detach().clone() for n in STEP_ORDER}
    # every step 2 of the sweep starts from the same state: its gradient is computed once
    grad2 = population_gradient(model, exp.order[1], population)
    sweep, states = [], []
    for size in exp.second_step_sizes or (None,):  # None: step 2 line-searched like the others
        second, third = step(2, exp.order[1], size, grad2), step(3, exp.order[2])
        sweep.append({"second_size": size, "second": second, "third": third})
        states.append({n: model.matrix(n).detach().clone() for n in STEP_ORDER})
        with torch.no_grad():
            for n, W in after_first.items():
                model.matrix(n).copy_(W)
    best = int(np.argmin([s["third"]["loss"] for s in sweep]))  # the step-2 size judged after step 3
    with torch.no_grad():
        for n, W in states[best].items():
            model.matrix(n).copy_(W)
    rows += [sweep[best]["second"], sweep[best]["third"]]
    return _finish(exp, model, task, evaluate, rows, sweep, start, device, bar)


def _finish(exp, model, task, evaluate, rows, sweep, start, device, bar) -> dict:
    """The result of :func:`_three_steps` from the model after its three steps."""
    scales = compare_scales(model, task, evaluate, exp.scales)
    blocks = block_shares(model, task.n) if exp.embeddings == "orthonormal" else {}  # defined only there
    bar.close()
    return {
        "rows": rows,
        "sweep": sweep,
        "scales": scales,
        "blocks": blocks,
        "seconds": time.perf_counter() - start,
        "device": config.device_name(device),
    }


# the chapter's scales at which learned and hand-written memories meet
RESCALE = (2.5, 5.0, 10.0, 20.0, 40.0, 80.0)


@torch.no_grad()
def qk2_rows(model: Transformer, triggers, n_tokens: int) -> dict[str, list[int]]:
    """The rows of the W_QK^2 probe: for each trigger q, the scores q^T W_QK^2 W_V^1 w_E(k) over every token k;
    ``qk2_rank`` is the rank of q's own remapped key (1: recalled; a tie counts against it) and
    ``qk2_winner`` the token whose key scores highest."""
    scores = memory_scores(model, triggers, n_tokens)["W_QK^2"]  # (K, N), q's own key in column q
    own = torch.diagonal(scores)
    order = key_order(triggers, n_tokens)
    return {
        "qk2_rank": (scores >= own[:, None]).sum(1).tolist(),
        "qk2_winner": [order[j] for j in scores.argmax(1).tolist()],
    }


@torch.no_grad()
def qk1_rows(model: Transformer, triggers, n_tokens: int) -> dict[str, list[int]]:
    """The rows of the W_QK^1 probe: ``qk1_winner``, for each query position t = 1..T-1, the key position s
    (0..T-2) whose p_s scores highest against p_t (the stored pair is s = t - 1)."""
    return {"qk1_winner": memory_scores(model, triggers, n_tokens)["W_QK^1"].argmax(1).tolist()}


def qk1_misses(res: dict) -> list[tuple[int, int]]:
    """(query position, winning key position) of the W_QK^1 probe's rows that miss, after step 3 of a run."""
    row = next(r for r in res["rows"] if r["matrix"] == "W_QK^1")
    return [(t, s) for t, s in enumerate(row["qk1_winner"], start=1) if s != t - 1]


@torch.no_grad()
def stored_scores(model: Transformer, triggers, n_tokens: int) -> dict[str, float]:
    """The mean score of each memory's stored pairs, on the scale of :func:`companion.experiments.induction.construct`'s ``scale``: the
    attention logit (1/sqrt(d) included) of (p_t, p_{t-1}) for W_QK^1 and of (w_E(q), W_V^1 w_E(q)) for W_QK^2,
    and the output logit W_U(k)^T W_V^2 w_E(k) for W_V^2. With orthogonal embeddings, construct's memories
    score ``scale``, ``scale`` and ``scale`` / 2."""
    scores = memory_scores(model, triggers, n_tokens)
    return {
        name: (1.0 if name == "W_V^2" else model.scale) * torch.diagonal(S).mean().item()
        for name, S in scores.items()
    }


@torch.no_grad()
def rescale_memories(
    model: Transformer, triggers, n_tokens: int, scale: float, names=STEP_ORDER
) -> Transformer:
    """Multiply each memory of ``names`` (in place) so that its stored pairs score, on average, what
    :func:`companion.experiments.induction.construct`'s do at ``scale`` (:func:`stored_scores`, :data:`companion.experiments.induction.PAIR_SCORE`). Only the sizes change, not
    the directions learned.

    Raises:
        ValueError: ``scale`` <= 0, an unknown name, or a memory whose stored pairs score <= 0 on average (no
            scale makes it recall them).
    """
    check_float("scale", scale, 0.0, None, low_open=True)
    for name in names:
        check_choice("memory", name, STEP_ORDER)
    own = {n: s for n, s in stored_scores(model, triggers, n_tokens).items() if n in names}
    bad = {name: s for name, s in own.items() if not s > 0}
    if bad:
        raise ValueError(f"cannot rescale memories whose stored pairs score <= 0 on average: {bad}")
    for name, s in own.items():
        model.matrix(name).mul_(scale * PAIR_SCORE[name] / s)
    return model


MIXES = {
    "learned": STEP_ORDER,
    "constructed": (),
    **{f"learned {n} only": (n,) for n in STEP_ORDER},
    "learned, own blocks": STEP_ORDER,
}  # the last: each learned memory projected on its own block first


@torch.no_grad()
def own_block(model: Transformer, name: str, n_tokens: int) -> torch.Tensor:
    """The block of memory ``name`` between the subspaces its stored pairs live in (:data:`OWN_BLOCK`): token
    embeddings w_E(k) (query) to remapped tokens W_V^1 w_E(k) (key) for W_QK^2, positions to positions for
    W_QK^1, token embeddings to unembeddings W_U(k) for W_V^2; an orthogonal projection on both sides,
    meaningful for orthonormal embeddings (where these subspaces are orthogonal to each other)."""
    check_choice("memory", name, STEP_ORDER)
    out_space, in_space = (token_bases(model, n_tokens)[k] for k in OWN_BLOCK[name])
    return out_space @ (out_space.T @ model.matrix(name) @ in_space) @ in_space.T


# (output or query, input or key)
OWN_BLOCK = {"W_V^2": ("U", "E"), "W_QK^2": ("E", "R"), "W_QK^1": ("P", "P")}


def token_bases(model: Transformer, n_tokens: int) -> dict[str, torch.Tensor]:
    """Orthonormal bases (d, rank) of the token embeddings (E), positions (P), remapped tokens W_V^1 w_E(k) (R)
    and unembeddings (U)."""
    E = model.W_E[:n_tokens]
    rows = {"E": E, "P": model.P, "R": E @ model.layers[0].v().T, "U": model.W_U}
    return {k: torch.linalg.qr(v.T).Q for k, v in rows.items()}


@torch.no_grad()
def block_shares(model: Transformer, n_tokens: int) -> dict[str, dict[str, float]]:
    """For each of the three memories, the share of its squared Frobenius norm in each block (query or output
    subspace) x (key or input subspace) of :func:`token_bases`: E, P, R on both sides of W_QK^1 and W_QK^2,
    U x (E, P, R) for W_V^2 (whose output the unembedding reads). The subspaces are orthogonal only for
    orthonormal embeddings; only then do the shares add up to one (less what lies outside them)."""
    basis = token_bases(model, n_tokens)
    return {
        name: basis_shares(model.matrix(name), basis, ("U",) if name == "W_V^2" else "EPR", "EPR")
        for name in STEP_ORDER
    }


FIRST_LAYERS = ("uniform", "previous token")  # the first layer's attention when the step-2 gradient is taken


STEP2_PARTS = (
    "stored pairs",
    "own token",
    "own position",
    "triggers from the last position",
    "everything else",
)


@torch.no_grad()
def basis_shares(W: torch.Tensor, basis: dict[str, torch.Tensor], left, right) -> dict[str, float]:
    """The share of W's squared Frobenius norm in each block (a in ``left``) x (b in ``right``) of ``basis``."""
    total = W.pow(2).sum().item()
    return {
        f"{a} x {b}": (basis[a].T @ W @ basis[b]).pow(2).sum().item() / total if total else float("nan")
        for a in left
        for b in right
    }


def compare_scales(
    model: Transformer, task: RecallTask, evaluate: Evaluator, scales, mixes=None
) -> list[dict]:
    """The in-context accuracy, at each of ``scales``, of each mix of ``mixes`` (default :data:`MIXES`): the memories it
    names learned and rescaled (:func:`rescale_memories`), the others :func:`companion.experiments.induction.construct`'s, on the same
    embeddings ("learned": all three learned, "constructed": none). NaN when a learned memory has nothing to
    rescale; "learned, own blocks" projects each learned memory on its :func:`own_block` before rescaling it.
    The model is left as it was."""
    learned = {n: model.matrix(n).detach().clone() for n in STEP_ORDER}
    positive = {n for n, s in stored_scores(model, task.triggers, task.n).items() if s > 0}

    @torch.no_grad()
    def accuracy(scale: float, names, blocks: bool = False) -> float:
        if not set(names) <= positive:
            return float("nan")
        for n in names if blocks else ():
            model.matrix(n).copy_(own_block(model, n, task.n))
        rescale_memories(model, task.triggers, task.n, scale, names)
        construct(model, task.triggers, task.n, scale, [n for n in STEP_ORDER if n not in names])
        acc = evaluate(0)["acc"]
        for n, W in learned.items():
            model.matrix(n).copy_(W)
        return acc

    mixes = MIXES if mixes is None else mixes
    return [
        {
            "scale": scale,
            **{mix: accuracy(scale, names, mix.endswith("blocks")) for mix, names in mixes.items()},
        }
        for scale in scales
    ]


SECOND_SIZES = (1.0, 4.0, 16.0)


POPULATION_FACTOR = 4  # the population-size control of the orthonormal Shakespeare run


def three_step_runs(profile: str | None = None) -> dict[str, ThreeStepExperiment]:
    """The runs of the two three-step chapters. ``book/three_steps`` (:data:`SLIDE_RUNS`): the slide's order in
    the idealised setting, the reverse order, the chapter's random embeddings with uniform data.
    ``book/three_steps_data`` (:data:`DATA_RUNS`): the random embeddings with Shakespeare data, and two controls
    that separate the Shakespeare data from the embeddings: orthonormal embeddings with Shakespeare data, and
    random embeddings with Shakespeare's character frequencies drawn independently (in these two, step 2 is
    line-searched: the W_QK^2 probe after it does not depend on its size, since the step starts from zero); and
    the orthonormal Shakespeare run again with :data:`POPULATION_FACTOR` times the population."""
    sweep = dict(second_step_sizes=SECOND_SIZES)
    big = POPULATION_FACTOR * ThreeStepExperiment.for_profile(profile).batch
    return {
        "slide order, orthonormal": ThreeStepExperiment.for_profile(profile, scales=RESCALE, **sweep),
        "reverse order, orthonormal": ThreeStepExperiment.for_profile(profile, order=STEP_ORDER[::-1]),
        "slide order, Gaussian": ThreeStepExperiment.for_profile(profile, embeddings="gaussian", **sweep),
        "slide order, Gaussian, Shakespeare": ThreeStepExperiment.for_profile(
            profile, embeddings="gaussian", data="shakespeare", **sweep
        ),
        "slide order, orthonormal, Shakespeare": ThreeStepExperiment.for_profile(profile, data="shakespeare"),
        "slide order, Gaussian, Shakespeare i.i.d.": ThreeStepExperiment.for_profile(
            profile, embeddings="gaussian", data="shakespeare_iid"
        ),
        f"slide order, orthonormal, Shakespeare, {POPULATION_FACTOR}x population": ThreeStepExperiment.for_profile(
            profile, data="shakespeare", batch=big
        ),
    }


SLIDE_RUNS = ("slide order, orthonormal", "reverse order, orthonormal", "slide order, Gaussian")
"""The runs of ``book/three_steps`` (names of :func:`three_step_runs`)."""

DATA_RUNS = (
    "slide order, Gaussian, Shakespeare",
    "slide order, orthonormal, Shakespeare",
    "slide order, Gaussian, Shakespeare i.i.d.",
    f"slide order, orthonormal, Shakespeare, {POPULATION_FACTOR}x population",
)
"""The runs of ``book/three_steps_data`` (names of :func:`three_step_runs`)."""


def check_runs(results: dict, names: tuple[str, ...], caller: str) -> None:
    """Raise ValueError, naming ``caller``, unless ``results`` (keyed by run name) holds every run of ``names``."""
    missing = [n for n in names if n not in results]
    if missing:
        raise ValueError(f"{caller} needs the results of the runs {list(names)}; missing {missing}")


def three_step_table(results: dict[str, dict]) -> str:
    """Markdown: per run and step, the matrix stepped, its step size, the loss, the accuracy and the probes."""
    rows = []
    for run_name, res in results.items():
        for r in res["rows"]:
            rows.append(
                [
                    run_name if r["step"] == 0 else "",
                    r["step"],
                    r["matrix"],
                    report.format_value(r["eta"]),
                    *(report.format_value(r[k], 3) for k in ("loss", "acc", *STEP_PROBE.values())),
                ]
            )
    head = [
        "run",
        "step",
        "matrix stepped",
        "step size",
        "population loss",
        "in-context acc",
        "W_OV^2 probe",
        "W_QK^2 probe",
        "W_QK^1 probe",
    ]
    return report.markdown_table(head, rows)
