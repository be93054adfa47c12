"""Birth of an induction head on the bigram task with triggers (the talk; Bietti et al., NeurIPS 2023).

Data: the main paper's generator (:class:`companion.data.recall.RecallTask`)
with no noise (alpha = 0): K fixed triggers, the K most frequent characters of
tiny Shakespeare; per sequence one output per trigger, uniform over all 65
characters (the trigger itself and the other triggers included, as in the
public code); every other transition from the global bigram pi_b, the first
token from the unigram. The in-context accuracy is measured at the positions
that hold the second or a later occurrence of their trigger (the next token
is then predictable from the context); the other positions are "bigram"
positions. As in the public code, the last input is not forced to be a trigger
(``RecallTask(final_trigger=False)``); the three gradient steps, whose loss is
at the final trigger, keep it, and their measures leave out the position before
it, whose target is that trigger (``Batch.recall_positions``,
``Batch.bigram_positions``).

Model: the transformer of :mod:`companion.models.transformer` (W_E, the
positions and W_U fixed at random init, attention scores scaled by
1/sqrt(d), which is the public code's model). In the public code the
attention is W_K alone (W_Q the identity), so ``W_QK^l`` here is its W_K^l;
W_O^2 W_V^2 is one learned matrix ``W_V^2`` here ("W_OV^2"), and W_O^1 W_V^1
is the frozen random ``W_V^1``.

Memory-recall probes, Eq. (9), R = mean over the stored pairs of
1{argmax_j' v_j'^T W u_i = j}:

* ``probe_OV2``: W_V^2 maps w_E(k) to W_U(k), over all tokens k;
* ``probe_QK2``: W_QK^2 matches the query w_E(q) with the key W_V^1 w_E(q)
  (the remapped previous token), over the triggers q, argmax over the triggers
  (the public code's probe, a K-way choice); ``probe_QK2_all``: the argmax
  over every token's remapped key (an N-way choice);
* ``probe_QK1``: W_QK^1 matches the query p_t with the key p_{t-1}, argmax over
  all positions; ``probe_QK1_early`` the same over t < ``early_cutoff``.

Feed-forward probe, Eq. (10): the mean over non-trigger tokens k of the KL
divergence between pi_b(. | k) and softmax(W_U F_L(w_E(k))). Eq. (10) writes
the model's distribution first; that order is infinite here (tiny
Shakespeare's bigram table has zero entries, see :func:`bigram_zero_share`),
so we compute KL(pi_b || model), the public code's order.

This module is the family's shared part (configurations, training, probes, the memories by construction, and
the random-trigger measures the evaluation also takes along training); each chapter's analysis is a module of its
own: :mod:`companion.experiments.induction_head`, :mod:`companion.experiments.induction_random` and
:mod:`companion.experiments.three_steps`.

>>> exp = InductionExperiment.quick(steps=2, eval_every=1, n_test=4, batch=2, seq_len=16, early_cutoff=8)
>>> r = run(exp, progress=False, use_cache=False)
>>> sorted(r.metrics)[:4], len(r.metrics["step"])
(['acc', 'loss_bigram', 'loss_head', 'probe_OV2'], 3)
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from companion import cache, config
from companion.config import check_choice, check_float, check_int
from companion.data.recall import LOSS_POSITIONS, TRIGGER_DRAWS, RecallTask
from companion.data.streams import TrainingStream
from companion.models import ModelConfig, Transformer
from companion.train import OPTIMIZERS, TrainConfig, late_mask, train

THREE = ("W_QK^1", "W_QK^2", "W_V^2")  # the three memories of the induction head
# The value maps: one learned matrix W_V per layer (ours), or W_O W_V as the public code writes them
# (``ihead_basic_model.py``: W_V frozen at its random init in both layers, W_O^2 learned, W_O^1 frozen)
VALUE_MAPS = ("W_V", "W_O W_V")
PUBLIC_THREE = ("W_QK^1", "W_QK^2", "W_O^2")  # the three memories with the public code's value maps


# Birth Fig. 3: which matrices stay frozen (at random init) until the unfreeze step
SCHEDULES = {
    "joint": (),
    "W_OV^2 frozen first": ("W_V^2",),
    "W_QK^1 frozen first": ("W_QK^1",),
    "W_QK^2 frozen first": ("W_QK^2",),
    "both W_QK frozen first": ("W_QK^1", "W_QK^2"),
}


PROBES = ("probe_OV2", "probe_QK2", "probe_QK1_early", "probe_QK1")


@dataclass(frozen=True)
class InductionExperiment(config.Profiled):
    """One training run on the bigram task with triggers. Validated before any work.

    ``trained``: the learnable matrices that are trained (paper names), ``None``
    for all of them; the others stay at their random init. ``frozen_first``:
    trained matrices that stay frozen until step ``unfreeze_at``. ``value_map``: one of :data:`VALUE_MAPS`;
    with ``"W_O W_V"`` the output memory is ``W_O^2`` (train :data:`PUBLIC_THREE`).
    """

    profile: str = "quick"
    d: int = 128
    seq_len: int = 64
    batch: int = 64
    steps: int = 300
    n_triggers: int = 5
    trigger_draw: str = "fixed"
    ff: tuple[str, ...] = ("none", "none")
    trained: tuple[str, ...] | None = THREE
    frozen_first: tuple[str, ...] = ()
    unfreeze_at: int = 100
    loss_on: str = "triggers"
    optimizer: str = "sgd"
    lr: float = 0.2
    momentum: float = 0.9
    weight_decay: float = 1e-4
    eval_every: int = 10
    n_test: int = 256
    early_cutoff: int = 16
    seed: int = field(default_factory=config.book_seed)
    value_map: str = "W_V"

    def __post_init__(self):
        config.check_run(self)
        check_choice("value_map", self.value_map, VALUE_MAPS)
        n = self.task_stats_n()
        check_int("n_triggers (K)", self.n_triggers, low=1, high=n - 1)
        check_choice("trigger_draw", self.trigger_draw, TRIGGER_DRAWS)
        check_choice("loss_on", self.loss_on, LOSS_POSITIONS)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_int("eval_every", self.eval_every, low=1)
        check_int("n_test", self.n_test, low=1)
        check_int("early_cutoff", self.early_cutoff, low=2, high=self.seq_len)
        object.__setattr__(self, "ff", tuple(self.ff))
        object.__setattr__(self, "frozen_first", tuple(self.frozen_first))
        if self.trained is not None:
            object.__setattr__(self, "trained", tuple(self.trained))
        self.train_config()
        names = Transformer(dataclasses.replace(self.model_config(), d=1, max_len=1)).matrix_names()
        for name in self.trained or ():
            if name not in names:
                raise ValueError(f"trained matrix {name!r} is not in this model: choose from {names}")
        for name in self.frozen_first:
            if name not in (self.trained or names):
                raise ValueError(
                    f"frozen_first matrix {name!r} is not trained: choose from {self.trained or names}"
                )
        if self.frozen_first:
            check_int("unfreeze_at", self.unfreeze_at, low=1, high=self.steps)

    @staticmethod
    def task_stats_n() -> int:
        from companion.data.shakespeare import load_char_stats

        return load_char_stats().n

    @classmethod
    def quick(cls, **overrides) -> "InductionExperiment":
        """CPU-sized: d = 128, T = 64 (early positions t < 16), batch 64, 300 SGD steps, release at step 100."""
        return cls(**{**dict(profile="quick"), **overrides})

    @classmethod
    def full(cls, **overrides) -> "InductionExperiment":
        """The public code's README command for Fig. 3: d = 256, T = 256, batch 512, 1000 steps, release at 300."""
        base = dict(
            profile="full",
            d=256,
            seq_len=256,
            batch=512,
            steps=1000,
            unfreeze_at=300,
            eval_every=10,
            n_test=512,
            early_cutoff=64,
        )
        return cls(**{**base, **overrides})

    def task(self) -> RecallTask:
        """The public code's data: no noise, and no forced final trigger (``final_trigger=False``)."""
        return RecallTask(
            seq_len=self.seq_len,
            alpha=0.0,
            n_triggers=self.n_triggers,
            noise="existing",
            loss_on=self.loss_on,
            trigger_draw=self.trigger_draw,
            final_trigger=False,
        )

    def model_config(self) -> ModelConfig:
        return ModelConfig(
            vocab_size=self.task().vocab_size,
            d=self.d,
            max_len=self.seq_len,
            ff=self.ff,
            value_out=self.value_map == "W_O W_V",
        )

    def train_config(self) -> TrainConfig:
        return TrainConfig(
            steps=self.steps,
            batch=self.batch,
            lr=self.lr,
            momentum=self.momentum,
            weight_decay=self.weight_decay,
            optimizer=self.optimizer,
        )


def schedules(profile: str | None = None) -> dict[str, InductionExperiment]:
    """Birth Fig. 3: W_QK^1, W_QK^2 and W_OV^2 trained, some frozen until the unfreeze step."""
    return {
        name: InductionExperiment.for_profile(profile, frozen_first=frozen)
        for name, frozen in SCHEDULES.items()
    }


SEEDS = {"quick": (0, 1, 2), "full": (0, 1, 2)}


def seeds(profile: str | None = None) -> dict[int, InductionExperiment]:
    """The joint run (three matrices, nothing frozen) for several seeds (data, init and order)."""
    return {s: InductionExperiment.for_profile(profile, seed=s) for s in SEEDS[config.get_profile(profile)]}


def ff_experiment(profile: str | None = None, **overrides) -> InductionExperiment:
    """The three memories plus a final linear feed-forward W_F (the public code's ``final_ffn``), loss on all tokens."""
    return InductionExperiment.for_profile(
        profile, **{**dict(ff=("none", "linear"), trained=(*THREE, "F2.W_F"), loss_on="all"), **overrides}
    )


RANDOM_STEPS = 1000  # random triggers are learned more slowly: at 300 steps the accuracy is still rising


def random_trigger_experiment(profile: str | None = None) -> InductionExperiment:
    """:func:`ff_experiment` with random triggers, K drawn afresh per sequence from pi_u (Birth's default
    data), trained :data:`RANDOM_STEPS` steps (``full`` already has as many)."""
    return ff_experiment(profile, trigger_draw="unigram", steps=RANDOM_STEPS, eval_every=RANDOM_STEPS // 30)


def layer_experiments(profile: str | None = None) -> dict[int, InductionExperiment]:
    """The slide 'Transformers on the bigram task': one and two layers, attention + MLP, all trained.

    Loss on every token and Adam (lr 0.01, no weight decay), as the public
    code's full model; single-head, no layer norm (our model, see the chapter).
    """
    p = config.get_profile(profile)
    steps = {"quick": 300, "full": 2000}[p]
    return {
        L: InductionExperiment.for_profile(
            p,
            ff=("mlp",) * L,
            trained=None,
            loss_on="all",
            optimizer="adam",
            lr=0.01,
            weight_decay=0.0,
            steps=steps,
            eval_every=steps // 20,
        )
        for L in (1, 2)
    }


# --- the memories by construction (the slide "Induction head with associative memories") ---


STEP_ORDER = ("W_V^2", "W_QK^2", "W_QK^1")  # the slide's order: W_OV^2, then W_QK^2, then W_QK^1


# what construct's stored pairs score, per unit of scale
PAIR_SCORE = {"W_QK^1": 1.0, "W_QK^2": 1.0, "W_V^2": 0.5}


# How a key-query matrix W scores key x_k against query x_q: our model's x_q^T W x_k (query on the left), or the
# slide's x_k^T W_KQ x_q ("Examples in Transformers: logits in attention heads"), under which the matrix that
# the model holds is the slide's transposed
CONVENTIONS = ("query left", "key left")


@torch.no_grad()
def construct(
    model: Transformer,
    triggers,
    n_tokens: int,
    scale: float = 20.0,
    names=STEP_ORDER,
    convention: str = "query left",
) -> Transformer:
    """Write the slide's three memories (or those of ``names``) into a two-layer model, in place (W_V^1 and the
    embeddings untouched).

    W_QK^1 = sum_t p_t p_{t-1}^T, W_QK^2 = sum_{q in Q} w_E(q) (W_V^1 w_E(q))^T and
    W_V^2 = sum_k W_U(k) w_E(k)^T, each pair normalised so that its own score
    is ``scale`` (with attention's 1/sqrt(d) undone) and the value memory's is
    ``scale`` / 2 (:data:`PAIR_SCORE`). ``convention`` (:data:`CONVENTIONS`): how the slide's key-query
    formulas are read; with "key left" (the slide's own x_k^T W_KQ x_q) the model holds their transposes.
    """
    check_float("scale", scale, 0.0, None, low_open=True)
    check_choice("convention", convention, CONVENTIONS)
    for name in names:
        check_choice("memory", name, STEP_ORDER)
    if len(model.layers) < 2:
        raise ValueError(f"the induction head needs two layers; this model has {len(model.layers)}")
    if model.cfg.value_out:
        raise ValueError("construct writes W_V^2 as the value map: give a model with value_out=False")
    l1 = model.layers[0]
    c = scale / model.scale

    # sum_i outs_i ins_i^T / (|outs_i|^2 |ins_i|^2)
    def memory(outs: torch.Tensor, ins: torch.Tensor) -> torch.Tensor:
        w = 1.0 / (outs.pow(2).sum(1) * ins.pow(2).sum(1))
        return (outs * w[:, None]).T @ ins

    P, q, E = model.P, model.W_E[list(triggers)], model.W_E[:n_tokens]
    written = {
        "W_QK^1": lambda: c * PAIR_SCORE["W_QK^1"] * memory(P[1:], P[:-1]),
        "W_QK^2": lambda: c * PAIR_SCORE["W_QK^2"] * memory(q, q @ l1.v().T),
        "W_V^2": lambda: scale * PAIR_SCORE["W_V^2"] * memory(model.W_U[:n_tokens], E),
    }
    for name in names:
        m = written[name]()
        model.matrix(name).copy_(m.T if convention == "key left" and name.startswith("W_QK") else m)
    return model


def constructed_run(
    exp: InductionExperiment, scale: float = 20.0, device=None, convention: str = "query left"
) -> dict:
    """The constructed head (:func:`construct`, read with ``convention``) on ``exp``'s model and test batch:
    its in-context accuracy and probes."""
    device = config.get_device(device)
    model = Transformer(exp.model_config(), seed=exp.seed).to(device)
    task = exp.task()
    construct(model, task.triggers, task.n, scale, convention=convention)
    return Evaluator(exp, model.eval(), device)(0)


# --- measurements ---


def key_order(triggers, n_tokens: int) -> list[int]:
    """Token ids with the triggers first (in trigger order): the columns of the W_QK^2 score matrix."""
    return list(triggers) + [k for k in range(n_tokens) if k not in set(triggers)]


@torch.no_grad()
def memory_scores(model: Transformer, triggers, n_tokens: int) -> dict[str, torch.Tensor]:
    """The score matrices of the three memories, stored pair i at (i, i): ``W_V^2`` (N, V), the output logits
    W_U(j)^T W_V^2 w_E(k); ``W_QK^2`` (K, N), each trigger query w_E(q) against every token's remapped key
    W_V^1 w_E(k), the triggers' keys first (:func:`key_order`); ``W_QK^1`` (T - 1, T - 1), query p_t against
    key p_s (t = 1.., s = 0..). Attention scores without the 1/sqrt(d)."""
    l1, l2 = model.layers[0], model.layers[1]
    E = model.W_E[:n_tokens]
    keys = (E @ l1.v().T)[key_order(triggers, n_tokens)]
    return {
        "W_V^2": model.unembed(E @ l2.v().T),
        "W_QK^2": model.W_E[list(triggers)] @ l2.qk() @ keys.T,
        "W_QK^1": model.P[1:] @ l1.qk() @ model.P[:-1].T,
    }


@torch.no_grad()
def memory_probes(model: Transformer, triggers, n_tokens: int, early_cutoff: int) -> dict[str, float]:
    """The recall probes of Eq. (9) for the three memories of a two-layer model (see the module docstring)."""
    if len(model.layers) < 2:
        return {}
    scores = memory_scores(model, triggers, n_tokens)
    c = early_cutoff - 1
    return {
        "probe_OV2": strict_recall(scores["W_V^2"]),
        "probe_QK2": strict_recall(scores["W_QK^2"][:, : len(triggers)]),
        "probe_QK2_all": strict_recall(scores["W_QK^2"]),
        "probe_QK1": strict_recall(scores["W_QK^1"]),
        "probe_QK1_early": strict_recall(scores["W_QK^1"][:c, :c]),
    }


def strict_recall(scores: torch.Tensor) -> float:
    """Share of rows i whose argmax is column i (the stored pair (i, i)), counted only when strict: a tie (an
    all-zero matrix, say) recalls nothing."""
    n = scores.shape[0]
    own = scores[torch.arange(n), torch.arange(n)]
    others = scores.clone()
    others[torch.arange(n), torch.arange(n)] = -torch.inf
    return (own > others.max(-1).values).float().mean().item()


@torch.no_grad()
def ff_bigram_kl(
    model: Transformer, bigram: np.ndarray, exclude=(), residual: bool = False, layer: int | None = None
) -> float:
    """Eq. (10) in the public code's order: mean over tokens k (not in ``exclude``) of
    KL(pi_b(.|k) || softmax(W_U F_l(w_E(k)))) for layer ``l`` (1-based; default the last); with
    ``residual``, of softmax(W_U (w_E(k) + F_l(w_E(k)))), the residual stream through that layer."""
    keep = [k for k in range(bigram.shape[0]) if k not in set(exclude)]
    e = model.W_E[keep]
    ff = model.layers[(layer or len(model.layers)) - 1].ff
    logq = torch.log_softmax(model.unembed(ff(e) + (e if residual else 0)), dim=-1)[:, : bigram.shape[1]]
    p = torch.as_tensor(bigram[keep], dtype=logq.dtype, device=logq.device)
    return (torch.where(p > 0, p * (torch.log(p.clamp_min(1e-30)) - logq), 0.0)).sum(-1).mean().item()


def bigram_zero_share(task: RecallTask) -> float:
    """Share of zero entries pi_b(j | k) = 0 in the bigram rows of non-trigger tokens (KL(model || pi_b) is infinite)."""
    keep = [k for k in range(task.n) if k not in task.fixed_triggers]
    return float((task.stats.bigram[keep] == 0).mean())


class Evaluator:
    """In-context accuracy and losses on a fixed test batch, and the probes (one call per evaluation)."""

    def __init__(self, exp: InductionExperiment, model: Transformer, device):
        task = exp.task()
        rng = np.random.default_rng(config.seed_streams(exp.seed, ["test-data"])["test-data"])
        b = task.sample(rng, exp.n_test)
        self.exp, self.model, self.task = exp, model, task
        self.tokens = torch.as_tensor(b.inputs, device=device)
        self.targets = torch.as_tensor(b.targets, device=device)
        self.head = torch.as_tensor(b.recall_positions, device=device)
        self.other = torch.as_tensor(b.bigram_positions, device=device)
        self.random_triggers = (
            task.trigger_draw == "unigram" and len(model.layers) == 2
        )  # the head-or-bigram measures along training
        if self.random_triggers:
            self.random_masks, self.random_top1 = random_test_masks(
                task, self.tokens, self.targets, self.head
            )

    @torch.no_grad()
    def __call__(self, step: int) -> dict:
        logits = self.model(self.tokens)
        row = {
            "acc": (logits.argmax(-1)[self.head] == self.targets[self.head]).float().mean().item(),
            "loss_head": F.cross_entropy(logits[self.head], self.targets[self.head]).item(),
            "loss_bigram": F.cross_entropy(logits[self.other], self.targets[self.other]).item(),
        }
        row.update(memory_probes(self.model, self.task.triggers, self.task.n, self.exp.early_cutoff))
        # their next token is never the bigram's
        bigram, trig = self.task.stats.bigram, self.task.fixed_triggers
        for l, kind in enumerate(self.exp.ff, start=1):
            if kind != "none":
                row[f"ff{l}_kl"] = ff_bigram_kl(self.model, bigram, trig, layer=l)
                row[f"ff{l}_kl_residual"] = ff_bigram_kl(self.model, bigram, trig, residual=True, layer=l)
        if self.random_triggers:
            scores = pair_scores(self.model, self.task)
            for layer in ("W_QK^1", "W_QK^2"):
                row[f"random_pair_{layer[2:].replace('^', '')}"] = scores[layer]["likely_minus_other"]
            preds = {"": logits.argmax(-1)}
            for end, key in RANDOM_EDITS.items():  # the same measure on the edited models
                _, strengths, how = DISCOUNT_EDITS[key]
                edit = edit_bias(discount_edit(self.model, self.task, strengths, how), self.tokens)
                preds[end] = self.model(self.tokens, score_bias=edit).argmax(-1)
            for end, pred in preds.items():
                for side, where in self.random_masks.items():
                    row[f"random_top1_{side}{end}"] = (
                        (pred[where] == self.random_top1[where]).float().mean().item()
                    )
        return row


def random_sides(rank):
    """The head-or-bigram claim's two kinds of repeated-trigger positions from the rank of o among q's successors
    (:func:`successor_ranks`; a tensor or an array): ``in``, o q's 2nd to :data:`BIGRAM_TOP`-th likeliest
    successor, and ``off``, o not among its :data:`BIGRAM_TOP` likeliest (:data:`NEVER` included)."""
    return {"in": (rank >= 2) & (rank <= BIGRAM_TOP), "off": rank > BIGRAM_TOP}


def random_test_masks(
    task: RecallTask, tokens: torch.Tensor, targets: torch.Tensor, head: torch.Tensor
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The head-or-bigram claim's two kinds of repeated-trigger positions in a test batch (``head``: second and later occurrences,
    where the input is the trigger q and the target its output o): ``in``, o the 2nd to :data:`BIGRAM_TOP`-th
    likeliest successor of q (:func:`successor_ranks`), and ``off``, o not among the :data:`BIGRAM_TOP`
    likeliest; and, per position, the input token's likeliest successor (what the bigram predicts)."""
    N = task.stats.bigram.shape[0]
    x, y = tokens.clamp(max=N - 1).cpu(), targets.clamp(max=N - 1).cpu()
    rank = successor_ranks(task)[x, y]
    head = head.cpu() & (tokens.cpu() < N) & (targets.cpu() < N)
    masks = {side: head & where for side, where in random_sides(rank).items()}
    top1 = torch.as_tensor(task.stats.bigram).argmax(-1)[x]
    return {k: v.to(tokens.device) for k, v in masks.items()}, top1.to(tokens.device)


@dataclass
class InductionRun:
    """A finished run: its configuration, the measurements along training (one entry per evaluation), its weights at
    the end (``state``) and at the evaluations of its late window before the end (``late_states``, {step: state}:
    :func:`companion.train.late_mask` of the evaluations planned, so that a run cut there still has a model)."""

    exp: InductionExperiment
    metrics: dict[str, np.ndarray]
    seconds: float = 0.0
    device: str = "cpu"
    state: dict = field(default_factory=dict, repr=False)
    late_states: dict = field(default_factory=dict, repr=False)

    def at(self, key: str, step: int) -> float:
        """The metric at the last evaluation at or before ``step``."""
        steps = self.metrics["step"]
        if step < steps[0]:
            raise ValueError(f"step={step} is before the first evaluation (step {steps[0]})")
        return float(self.metrics[key][np.nonzero(steps <= step)[0][-1]])

    def final(self, key: str) -> float:
        return float(self.metrics[key][-1])

    @property
    def steps(self) -> np.ndarray:
        """The evaluated steps."""
        return self.metrics["step"]

    def stopped_after(self, i: int) -> InductionRun:
        """The run as if it had stopped after its evaluation ``i`` (counted from 0): every measurement cut there, and
        the weights of that evaluation where the run kept them (its late window, ``late_states``); elsewhere it
        holds none (``state`` is empty), so :meth:`model` refuses it.

        Raises:
            ValueError: ``i`` outside 0 .. the last evaluation.
        """
        n = len(self.steps)
        if not 0 <= i < n:
            raise ValueError(
                f"stopped_after: i={i} is out of range (allowed: 0 to {n - 1}, the run's evaluations)"
            )
        state = self.state if i == n - 1 else self.late_states.get(int(self.steps[i]), {})
        return dataclasses.replace(
            self, metrics={k: v[: i + 1] for k, v in self.metrics.items()}, state=state, late_states={}
        )

    def model(self, trained: bool = True) -> Transformer:
        """The run's model (on the CPU): as trained, or at its initialisation (the same seed)."""
        if trained and not self.state:
            raise ValueError(
                "model: this run holds no weights (a run cut by stopped_after before its late window); "
                "trained=False gives its start"
            )
        m = Transformer(self.exp.model_config(), seed=self.exp.seed)
        if trained:
            m.load_state_dict(self.state)
        return m

    def first_step_reaching(self, key: str, threshold: float = 0.9) -> float:
        """First evaluated step at which the metric is at least ``threshold``; inf if never."""
        hit = np.nonzero(self.metrics[key] >= threshold)[0]
        return float(self.metrics["step"][hit[0]]) if len(hit) else float("inf")


def curves(runs: dict[str, InductionRun], keys) -> dict[str, dict[str, list]]:
    """Along training, per run: the evaluated steps and the metrics ``keys`` ({metric: {run: values}})."""
    return {k: {name: r.metrics[k].tolist() for name, r in runs.items()} for k in ("step", *keys)}


MODULES = ("companion.experiments.induction",)


def first_batch(exp: InductionExperiment):
    """The first training batch of ``exp``, drawn as training draws it, by the sampler in force (recordings keep
    its digest)."""
    return TrainingStream(exp.seed, "train-data").batch(exp.task(), exp.batch, 0)


def run(
    exp: InductionExperiment, *, device=None, progress: bool = True, use_cache: bool = True
) -> InductionRun:
    """Train and measure (or load the cached result of) ``exp``."""
    blob = cache.load_or_compute(
        "induction", exp, lambda: _train(exp, device, progress), MODULES, fmt="torch", use_cache=use_cache
    )
    return InductionRun(
        exp, blob["metrics"], blob["seconds"], blob["device"], blob["state"], blob["late_states"]
    )


def _train(exp: InductionExperiment, device, progress: bool) -> dict:
    device = config.get_device(device)
    model = Transformer(exp.model_config(), seed=exp.seed).to(device)
    trained = exp.trained or model.matrix_names()
    for p in model.parameters():
        p.requires_grad_(False)
    for name in trained:
        model.matrix(name).requires_grad_(name not in exp.frozen_first)
    unfreeze = {exp.unfreeze_at: [model.matrix(n) for n in exp.frozen_first]} if exp.frozen_first else {}
    evaluator = Evaluator(exp, model, device)
    eval_at = range(0, exp.steps, exp.eval_every)
    # the weights kept: at the evaluations planned in the late window, the last one (``state``) apart
    keep_at = {s for s, k in zip(eval_at, late_mask([*eval_at, exp.steps])) if k}
    late_states = {}

    def evaluate(step: int) -> dict:
        if step in keep_at:  # a copy: the optimiser updates the weights in place
            late_states[step] = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        return evaluator(step)

    start = time.perf_counter()
    logs = train(
        model,
        exp.task(),
        exp.train_config(),
        TrainingStream(exp.seed, "train-data", device=device),
        evaluate=evaluate,
        eval_at=eval_at,
        progress=progress,
        desc=f"induction d={exp.d} {'+'.join(exp.frozen_first) or 'joint'}",
        unfreeze=unfreeze,
    )
    seconds = time.perf_counter() - start
    rows = [r for r in logs if "acc" in r]
    metrics = {k: np.asarray([r[k] for r in rows]) for k in rows[0] if k != "loss"}
    return {
        "metrics": metrics,
        "seconds": seconds,
        "device": config.device_name(device),
        "state": {k: v.cpu() for k, v in model.state_dict().items()},
        "late_states": late_states,
    }


# --- measures of the random-trigger runs, also taken along training (the Evaluator's head-or-bigram curves) ---


# the head-or-bigram claim's "top predictions from the global bigram": the trigger's 5 likeliest successors (our choice)
BIGRAM_TOP = 5


NEVER = 10**6  # the rank of an output that never follows the trigger in the bigram (pi_b(o | q) = 0)


def successor_ranks(task: RecallTask) -> torch.Tensor:
    """(N, N) long: [q, y] is the rank of y among q's bigram successors, 1 + the number of tokens j with
    pi_b(j | q) > pi_b(y | q), or :data:`NEVER` when pi_b(y | q) = 0 (y never follows q)."""
    big = torch.as_tensor(task.stats.bigram)
    rank = (big[:, None, :] > big[:, :, None]).sum(-1) + 1
    return torch.where(big > 0, rank, NEVER)


def likely_pairs(task: RecallTask) -> torch.Tensor:
    """(N, N) bool: [q, y] is True when y is among q's :data:`BIGRAM_TOP` likeliest bigram successors."""
    return successor_ranks(task) <= BIGRAM_TOP


PAIR_KINDS = (
    f"y among q's {BIGRAM_TOP} likeliest successors",
    "y another successor of q",
    "y never follows q",
)


QK_LAYERS = {"W_QK^1": 0, "W_QK^2": 1}  # the attention layers' key-query matrices and their (0-based) index


@torch.no_grad()
def token_token_logits(model: Transformer, edit: dict | None = None) -> dict[str, torch.Tensor]:
    """Per :data:`QK_LAYERS` name, the (V, V) table [query token, key token] of the token-token part
    c w_E(a)^T W_QK w_E(b) of that layer's attention logits, plus ``edit``'s table for the layer if any."""
    E, c = model.W_E, model.scale
    return {
        name: E @ model.layers[l].qk() @ E.T * c + (edit or {}).get(l, 0.0) for name, l in QK_LAYERS.items()
    }


def _trigger_pool(task: RecallTask) -> torch.Tensor:
    """The triggers of ``task`` (any token of its pool when triggers are drawn per sequence) that are ordinary
    tokens (below the bigram's N)."""
    return torch.as_tensor([q for q in task.triggers if q < task.stats.bigram.shape[0]])


@torch.no_grad()
def pair_scores(
    model: Transformer, task: RecallTask, edit: dict | None = None
) -> dict[str, dict[str, float]]:
    """The token-token parts of both attention layers' logits on pairs (q, y), q a trigger of ``task``
    (:func:`_trigger_pool`), y any ordinary token, averaged by :data:`PAIR_KINDS` (y's place among q's bigram
    successors), with ``likely_minus_other``. ``W_QK^2``: c w_E(q)^T W_QK^2 w_E(y), the second layer at q
    looking at a key that holds y; ``W_QK^1``: c w_E(y)^T W_QK^1 w_E(q), the first layer at a y looking at its
    previous token q. ``edit``: as in :func:`token_token_logits` (the parts of an edited model)."""
    N = task.stats.bigram.shape[0]
    qs = _trigger_pool(task)
    big = torch.as_tensor(task.stats.bigram)[qs]
    likely = likely_pairs(task)[qs]
    kinds = dict(zip(PAIR_KINDS, (likely, (big > 0) & ~likely, big == 0)))
    tables = token_token_logits(model, edit)
    out = {}
    for name, M in (("W_QK^2", tables["W_QK^2"][qs, :N]), ("W_QK^1", tables["W_QK^1"][:N, qs].T)):
        m = {k: float(M[g].mean()) if g.any() else float("nan") for k, g in kinds.items()}
        out[name] = {**m, "likely_minus_other": m[PAIR_KINDS[0]] - m[PAIR_KINDS[1]]}
    return out


DISCOUNT_EDITS = {  # key -> (name, {layer: strength}, how) for discount_edit; strength: the share taken away
    "trained": ("as trained", {}, "mean"),
    "QK1_removed": ("W_QK^1's discount removed", {"W_QK^1": 1.0}, "mean"),
    "QK2_removed": ("W_QK^2's discount removed", {"W_QK^2": 1.0}, "mean"),
    "both_removed": ("both discounts removed", {"W_QK^1": 1.0, "W_QK^2": 1.0}, "mean"),
    "both_doubled": ("both discounts doubled", {"W_QK^1": -1.0, "W_QK^2": -1.0}, "mean"),
    "both_pairwise": ("both, pair by pair", {"W_QK^1": 1.0, "W_QK^2": 1.0}, "pair"),
}


EDIT_HOW = ("mean", "pair")


@torch.no_grad()
def discount_edit(
    model: Transformer, task: RecallTask, strengths: dict[str, float], how: str = "mean"
) -> dict[int, torch.Tensor]:
    """An edit that takes away ``strengths[name]`` times the pair discount of layer ``name`` (:data:`QK_LAYERS`):
    per layer index, a (V, V) table [query token, key token] that is 0 except on the pairs (q, y), q in the
    trigger pool and y among q's :data:`BIGRAM_TOP` likeliest successors (the second layer: query q, key y; the
    first: query y, key q). There it holds, with ``how="mean"``, -strength x ``likely_minus_other`` of
    :func:`pair_scores` (of ``model`` on ``task``), so that with strength 1 the edited model's ``pair_scores``
    read ``likely_minus_other = 0`` for that layer; with ``how="pair"``, strength x (the mean token-token logit
    of q's other successors - the pair's own), so that with strength 1 every likely pair of q scores that mean
    (0 for a q without other successors).
    Added to the attention logits (``head_or_bigram(edit=)``), it changes only their token-token part: the
    positions, the first layer's output and the other layer are untouched."""
    check_choice("how", how, EDIT_HOW)
    for name, st in strengths.items():
        check_choice("layer", name, tuple(QK_LAYERS))
        check_float(f"strength of {name}", st, low=-10.0, high=10.0)
    scores, tables = pair_scores(model, task), token_token_logits(model)
    V, N = task.vocab_size, task.stats.bigram.shape[0]
    qs = _trigger_pool(task)
    likely = torch.zeros(V, V, dtype=torch.bool)
    likely[qs[:, None], torch.arange(N)] = likely_pairs(task)[qs]  # [q, y]
    other = torch.zeros(V, V, dtype=torch.bool)
    other[:N, :N] = (torch.as_tensor(task.stats.bigram) > 0) & ~likely_pairs(task)
    # the masks live where the model's tables do (the Evaluator edits the model being trained, on its device)
    device = model.W_E.device
    likely, other = likely.to(device), other.to(device)
    out = {}
    for name, st in strengths.items():
        M = tables[name] if name == "W_QK^2" else tables[name].T  # [q, y]
        if how == "mean":
            shift = torch.full_like(M, -scores[name]["likely_minus_other"])
        else:
            n = other.sum(1, keepdim=True)  # a q without other successors keeps its pairs: nothing to compare
            shift = torch.where(n > 0, (M * other).sum(1, keepdim=True) / n.clamp_min(1) - M, torch.zeros(()))
        table = torch.where(likely, st * shift, torch.zeros(()))
        out[QK_LAYERS[name]] = table if name == "W_QK^2" else table.T
    return out


def edit_bias(edit: dict | None, tokens: torch.Tensor) -> dict[int, torch.Tensor]:
    """The attention-logit biases {layer: (batch, T, T)} of a token-token ``edit`` ({layer: (V, V) table},
    :func:`discount_edit`) on ``tokens`` (batch, T): entry [b, t, s] is table[z_t, z_s]."""
    return {
        l: table.to(tokens.device)[tokens[:, :, None], tokens[:, None, :]]
        for l, table in (edit or {}).items()
    }


# the edits the Evaluator also measures
# along training (:data:`DISCOUNT_EDITS`), by the suffix of their curves: both discounts removed, as a mean and pair
# by pair
RANDOM_EDITS = {"_removed": "both_removed", "_pairwise": "both_pairwise"}
