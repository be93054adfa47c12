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

>>> exp = InductionExperiment.quick(steps=2, eval_every=1, n_test=4, batch=2, seq_len=16, early_cutoff=8)
>>> r = run(exp, progress=False, use_cache=False)
>>> sorted(r.metrics)[:4], len(r.metrics["step"])
(['acc', 'loss_bigram', 'loss_head', 'probe_OV2'], 3)
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from companion import cache, config, report
from companion.config import check_choice, check_float, check_int
from companion.data.recall import LOSS_POSITIONS, TRIGGER_DRAWS, RecallTask
from companion.models import ModelConfig, Transformer
from companion.train import OPTIMIZERS, TrainConfig, batch_loss, train

THREE = ("W_QK^1", "W_QK^2", "W_V^2")  # the three memories of the induction head
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
    trained matrices that stay frozen until step ``unfreeze_at``.
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
    seed: int = 0

    def __post_init__(self):
        config.check_run(self)
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
        return ModelConfig(vocab_size=self.task().vocab_size, d=self.d, max_len=self.seq_len, ff=self.ff)

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


@torch.no_grad()
def construct(
    model: Transformer, triggers, n_tokens: int, scale: float = 20.0, names=STEP_ORDER
) -> Transformer:
    """Write the slide's three memories (or those of ``names``) into a two-layer model, in place (W_V^1 and the
    embeddings untouched).

    W_QK^1 = sum_t p_t p_{t-1}^T, W_QK^2 = sum_{q in Q} w_E(q) (W_V^1 w_E(q))^T and
    W_V^2 = sum_k W_U(k) w_E(k)^T, each pair normalised so that its own score
    is ``scale`` (with attention's 1/sqrt(d) undone) and the value memory's is
    ``scale`` / 2 (:data:`PAIR_SCORE`).
    """
    check_float("scale", scale, 0.0, None, low_open=True)
    for name in names:
        check_choice("memory", name, STEP_ORDER)
    if len(model.layers) < 2:
        raise ValueError(f"the induction head needs two layers; this model has {len(model.layers)}")
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
        model.matrix(name).copy_(written[name]())
    return model


def constructed_run(exp: InductionExperiment, scale: float = 20.0, device=None) -> dict:
    """The constructed head on ``exp``'s model and test batch: its in-context accuracy and probes."""
    device = config.get_device(device)
    model = Transformer(exp.model_config(), seed=exp.seed).to(device)
    task = exp.task()
    construct(model, task.triggers, task.n, scale)
    return Evaluator(exp, model.eval(), device)(0)


# --- measurements ---


def _key_order(triggers, n_tokens: int) -> list[int]:
    """Token ids with the triggers first (in trigger order): the columns of the W_QK^2 score matrix."""
    return list(triggers) + [k for k in range(n_tokens) if k not in set(triggers)]


@torch.no_grad()
def memory_scores(model: Transformer, triggers, n_tokens: int) -> dict[str, torch.Tensor]:
    """The score matrices of the three memories, stored pair i at (i, i): ``W_V^2`` (N, V), the output logits
    W_U(j)^T W_V^2 w_E(k); ``W_QK^2`` (K, N), each trigger query w_E(q) against every token's remapped key
    W_V^1 w_E(k), the triggers' keys first (:func:`_key_order`); ``W_QK^1`` (T - 1, T - 1), query p_t against
    key p_s (t = 1.., s = 0..). Attention scores without the 1/sqrt(d)."""
    l1, l2 = model.layers[0], model.layers[1]
    E = model.W_E[:n_tokens]
    keys = (E @ l1.v().T)[_key_order(triggers, n_tokens)]
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
        "probe_OV2": _recall(scores["W_V^2"]),
        "probe_QK2": _recall(scores["W_QK^2"][:, : len(triggers)]),
        "probe_QK2_all": _recall(scores["W_QK^2"]),
        "probe_QK1": _recall(scores["W_QK^1"]),
        "probe_QK1_early": _recall(scores["W_QK^1"][:c, :c]),
    }


def _recall(scores: torch.Tensor) -> float:
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
        self.b10 = task.trigger_draw == "unigram" and len(model.layers) == 2  # B10's measures along training
        if self.b10:
            self.b10_masks, self.b10_top1 = b10_test_masks(task, self.tokens, self.targets, self.head)

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
        if self.b10:
            scores = pair_scores(self.model, self.task)
            for layer in ("W_QK^1", "W_QK^2"):
                row[f"b10_pair_{layer[2:].replace('^', '')}"] = scores[layer]["likely_minus_other"]
            preds = {"": logits.argmax(-1)}
            for end, key in B10_EDITS.items():  # the same measure on the edited models
                _, strengths, how = DISCOUNT_EDITS[key]
                edit = edit_bias(discount_edit(self.model, self.task, strengths, how), self.tokens)
                preds[end] = self.model(self.tokens, score_bias=edit).argmax(-1)
            for end, pred in preds.items():
                for side, where in self.b10_masks.items():
                    row[f"b10_top1_{side}{end}"] = (pred[where] == self.b10_top1[where]).float().mean().item()
        return row


def b10_sides(rank):
    """B10's two kinds of repeated-trigger positions from the rank of o among q's successors
    (:func:`successor_ranks`; a tensor or an array): ``in``, o q's 2nd to :data:`BIGRAM_TOP`-th likeliest
    successor, and ``off``, o not among its :data:`BIGRAM_TOP` likeliest (:data:`NEVER` included)."""
    return {"in": (rank >= 2) & (rank <= BIGRAM_TOP), "off": rank > BIGRAM_TOP}


def b10_test_masks(
    task: RecallTask, tokens: torch.Tensor, targets: torch.Tensor, head: torch.Tensor
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """B10's two kinds of repeated-trigger positions in a test batch (``head``: second and later occurrences,
    where the input is the trigger q and the target its output o): ``in``, o the 2nd to :data:`BIGRAM_TOP`-th
    likeliest successor of q (:func:`successor_ranks`), and ``off``, o not among the :data:`BIGRAM_TOP`
    likeliest; and, per position, the input token's likeliest successor (what the bigram predicts)."""
    N = task.stats.bigram.shape[0]
    x, y = tokens.clamp(max=N - 1).cpu(), targets.clamp(max=N - 1).cpu()
    rank = successor_ranks(task)[x, y]
    head = head.cpu() & (tokens.cpu() < N) & (targets.cpu() < N)
    masks = {side: head & where for side, where in b10_sides(rank).items()}
    top1 = torch.as_tensor(task.stats.bigram).argmax(-1)[x]
    return {k: v.to(tokens.device) for k, v in masks.items()}, top1.to(tokens.device)


@dataclass
class InductionRun:
    """A finished run: its configuration and the measurements along training (one entry per evaluation)."""

    exp: InductionExperiment
    metrics: dict[str, np.ndarray]
    seconds: float = 0.0
    device: str = "cpu"
    state: dict = field(default_factory=dict, repr=False)

    def at(self, key: str, step: int) -> float:
        """The metric at the last evaluation at or before ``step``."""
        steps = self.metrics["step"]
        if step < steps[0]:
            raise ValueError(f"step={step} is before the first evaluation (step {steps[0]})")
        return float(self.metrics[key][np.nonzero(steps <= step)[0][-1]])

    def final(self, key: str) -> float:
        return float(self.metrics[key][-1])

    def model(self, trained: bool = True) -> Transformer:
        """The run's model (on the CPU): as trained, or at its initialisation (the same seed)."""
        m = Transformer(self.exp.model_config(), seed=self.exp.seed)
        if trained:
            m.load_state_dict(self.state)
        return m

    def first_step_reaching(self, key: str, threshold: float = 0.9) -> float:
        """First evaluated step at which the metric is at least ``threshold``; inf if never."""
        hit = np.nonzero(self.metrics[key] >= threshold)[0]
        return float(self.metrics["step"][hit[0]]) if len(hit) else float("inf")


MODULES = ("companion.experiments.induction",)


def first_batch(exp: InductionExperiment):
    """The first training batch of ``exp``, drawn as training draws it (recordings keep its digest)."""
    rng = np.random.default_rng(config.seed_streams(exp.seed, ["train-data"])["train-data"])
    return exp.task().sample(rng, exp.batch)


def run(
    exp: InductionExperiment, *, device=None, progress: bool = True, use_cache: bool = True
) -> InductionRun:
    """Train and measure (or load the cached result of) ``exp``."""
    blob = cache.load_or_compute(
        "induction", exp, lambda: _train(exp, device, progress), MODULES, fmt="torch", use_cache=use_cache
    )
    return InductionRun(exp, blob["metrics"], blob["seconds"], blob["device"], blob["state"])


def _train(exp: InductionExperiment, device, progress: bool) -> dict:
    device = config.get_device(device)
    streams = config.seed_streams(exp.seed, ["train-data"])
    model = Transformer(exp.model_config(), seed=exp.seed).to(device)
    trained = exp.trained or model.matrix_names()
    for p in model.parameters():
        p.requires_grad_(False)
    for name in trained:
        model.matrix(name).requires_grad_(name not in exp.frozen_first)
    unfreeze = {exp.unfreeze_at: [model.matrix(n) for n in exp.frozen_first]} if exp.frozen_first else {}
    evaluate = Evaluator(exp, model, device)
    start = time.perf_counter()
    logs = train(
        model,
        exp.task(),
        exp.train_config(),
        np.random.default_rng(streams["train-data"]),
        evaluate=evaluate,
        eval_at=range(0, exp.steps, exp.eval_every),
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
    }


# --- induction head or feed-forward layer (Birth, Section 4.2; the slides' pasted text, B10) ---

# B10's "top predictions from the global bigram": the trigger's 5 likeliest successors (our choice)
BIGRAM_TOP = 5
COLUMNS = ("acc", "top1", "head_acc", "bigram_top1", "attention")  # head_or_bigram's measures per position
# head_or_bigram's measures of the second layer's attention on the keys that hold o, per position
MECHANISM = {
    "attention": "second layer's attention on the keys that hold o",
    "key_score": "second layer's mean logit of those keys",
    "pair_score": "its token-token part, c w_E(q)^T W_QK^2 w_E(o)",
    "match_score": "its part from the query's token and the keys' first-layer output h^1",
    "prev_attention": "first layer's attention of those keys on their previous token q",
    "rest_score": "log-sum-exp of the second layer's logits of the other keys",
    "attention_query_token": "second layer's attention on the keys holding q itself (its own position included)",
    "attention_target_elsewhere": "its attention on the keys holding o elsewhere (not after q)",
    "attention_rest": "its attention on all other keys",
}
OCCURRENCE_BINS = (2, 3, 5, 9)  # which occurrence of q (2nd; 3rd-4th; 5th-8th; 9th on): how much evidence
NEVER = 10**6  # the rank of an output that never follows the trigger in the bigram (pi_b(o | q) = 0)
RANK_BINS = ((1, 1), (2, BIGRAM_TOP), (BIGRAM_TOP + 1, 10), (11, 20), (21, NEVER - 1), (NEVER, NEVER))
HEAD_OR_BIGRAM_HEADER = (
    "rank of o among the trigger's bigram successors",
    "positions",
    "accuracy (argmax = o)",
    "argmax = the bigram's top successor",
    "head path alone: argmax = o",
    "bigram path alone: argmax = the bigram's top successor",
    "second layer's attention on the positions after earlier q",
)


@torch.no_grad()
def head_and_bigram_paths(
    model: Transformer, tokens: torch.Tensor, rec: dict | None = None, score_bias: dict | None = None
) -> tuple[torch.Tensor, ...]:
    """Logits (batch, T, V) of a two-layer model with a final linear W_F, and their two exact parts:
    the head path W_U (h^2 + W_F h^2) and the bigram path W_U (x^1 + W_F x^1), which add up to the logits.
    ``rec``, if a dict, receives what ``Transformer.forward`` records (the attention maps among them);
    ``score_bias`` is passed to it (attention-logit shifts per layer)."""
    rec = {} if rec is None else rec
    logits = model(tokens, record=rec, score_bias=score_bias)
    x1 = model.feed_forward(0, rec["u1"])  # the stream leaving layer 1
    h2 = rec["u2"] - x1  # the second attention layer's output
    W_F = model.layers[1].ff.W_F
    return logits, model.unembed(h2 + h2 @ W_F.T), model.unembed(x1 + x1 @ W_F.T)


@torch.no_grad()
def head_or_bigram(r: InductionRun, n_seq: int = 2048, chunk: int = 256, edit: dict | None = None) -> dict:
    """What the model predicts at the second and later occurrences of a trigger q (target: its output o),
    by the rank of o among the global bigram's successors of q (:func:`successor_ranks`; :data:`NEVER` when
    o never follows q).

    The model must have two layers and a linear final feed-forward layer W_F, so that the logits split
    exactly into a *bigram path* W_U (x^1 + W_F x^1) (everything but the second attention layer) and a
    *head path* W_U (h^2 + W_F h^2) (the second layer's output, read directly and through W_F). Measured on
    ``n_seq`` fresh sequences from the run's task (stream "head-or-bigram" of its seed), ``chunk`` at a time.

    Returns:
        ``bins``: one dict per :data:`RANK_BINS` entry (``ranks``, ``n``, ``acc``, ``top1``, ``head_acc``,
        ``bigram_top1``). ``acc_in`` / ``top1_in``: accuracy and share predicting q's likeliest successor
        when o is q's 2nd to :data:`BIGRAM_TOP`-th likeliest; ``acc_off`` / ``top1_off`` the same when o is
        not among its :data:`BIGRAM_TOP` likeliest. ``*_matched``: the same compared within strata of equal
        trigger and evidence (the occurrence of q, binned by :data:`OCCURRENCE_BINS`): the mean per stratum
        over the ``strata_matched`` strata with both kinds of positions, weighted by each one's positions of the
        first kind (``matched_share`` of them), so that which triggers fall in which group, and how often
        they occurred before, do not enter.
        ``attention`` (per bin, and ``attention_in`` / ``attention_off``): the second layer's attention on
        the positions s <= t with z_{s-1} = q, the keys that hold o. The other :data:`MECHANISM` measures
        (``*_in_matched`` / ``*_off_matched`` only) split where that attention comes from (see
        :func:`_key_measures`).

    ``edit``, if given, maps layer indices (0-based) to (V, V) tables [query token, key token] added to that
    layer's attention logits (:func:`discount_edit`): the same positions measured on an edited model.
    """
    exp = r.exp
    if exp.ff != ("none", "linear"):
        raise ValueError(
            f"head_or_bigram needs ff=('none', 'linear') (two layers, a final linear W_F); got {exp.ff}"
        )
    check_int("n_seq", n_seq, low=1)
    check_int("chunk", chunk, low=1)
    model = r.model()
    task = exp.task()
    V = task.vocab_size
    for l, table in (edit or {}).items():
        if l not in (0, 1) or tuple(table.shape) != (V, V):
            raise ValueError(
                f"edit must map layers 0 and 1 to ({V}, {V}) tables; got layer {l!r}, shape "
                f"{tuple(table.shape)}"
            )
    rng = np.random.default_rng(config.seed_streams(exp.seed, ["head-or-bigram"])["head-or-bigram"])
    cols = {k: [] for k in ("q", "occurrence", "rank", *COLUMNS, *MECHANISM)}
    bigram, ranks = torch.as_tensor(task.stats.bigram), successor_ranks(task)
    for start in range(0, n_seq, chunk):
        b = task.sample(rng, min(chunk, n_seq - start))
        x, rec = torch.as_tensor(b.inputs), {}
        bias = edit_bias(edit, x)
        logits, head, rest = head_and_bigram_paths(model, x, rec, bias)
        at = torch.as_tensor(b.recall_positions)
        q, o = x[at], torch.as_tensor(b.targets)[at]
        after_q = _after_earlier(x)
        for k, v in _key_measures(model, x, rec, after_q, torch.as_tensor(b.targets), bias.get(1)).items():
            cols[k].append(v[at])
        top = bigram[q].argmax(-1)  # q's likeliest successor
        cols["q"].append(q)
        cols["occurrence"].append(torch.as_tensor(b.occurrence)[at])
        cols["rank"].append(ranks[q, o])
        cols["acc"].append(logits[at].argmax(-1) == o)
        cols["top1"].append(logits[at].argmax(-1) == top)
        cols["head_acc"].append(head[at].argmax(-1) == o)
        cols["bigram_top1"].append(rest[at].argmax(-1) == top)
    c = {k: torch.cat(v).numpy() for k, v in cols.items()}
    inside, outside = b10_sides(c["rank"]).values()

    def mean(key: str, g: np.ndarray) -> float:
        return float(c[key][g].mean()) if g.any() else float("nan")

    bins = [
        {
            "ranks": (lo, hi),
            "n": int(((c["rank"] >= lo) & (c["rank"] <= hi)).sum()),
            **{k: mean(k, (c["rank"] >= lo) & (c["rank"] <= hi)) for k in COLUMNS},
        }
        for lo, hi in RANK_BINS
    ]
    stratum = (
        c["q"] * len(OCCURRENCE_BINS) + np.searchsorted(OCCURRENCE_BINS, c["occurrence"], side="right") - 1
    )
    both = [
        t for t in np.unique(stratum) if (inside & (stratum == t)).any() and (outside & (stratum == t)).any()
    ]
    weight = np.array([(inside & (stratum == t)).sum() for t in both])

    def matched(key: str, g: np.ndarray) -> float:  # per stratum, weighted by the stratum's inside positions
        return (
            float(np.average([mean(key, g & (stratum == t)) for t in both], weights=weight))
            if both
            else float("nan")
        )

    sides = (("in", inside), ("off", outside))
    return {
        "bins": bins,
        "positions": int(len(c["rank"])),
        "acc_in": mean("acc", inside),
        "top1_in": mean("top1", inside),
        "acc_off": mean("acc", outside),
        "top1_off": mean("top1", outside),
        "attention_in": mean("attention", inside),
        "attention_off": mean("attention", outside),
        **{f"{k}_{side}_matched": matched(k, g) for k in ("acc", "top1", *MECHANISM) for side, g in sides},
        "strata_matched": len(both),
        "matched_share": float(weight.sum() / max(inside.sum(), 1)),
    }


def head_or_bigram_rows(hb: dict) -> list[list]:
    """Rows for :data:`HEAD_OR_BIGRAM_HEADER`."""

    def name(lo, hi):
        return (
            "never follows the trigger"
            if lo == NEVER
            else str(lo)
            if lo == hi
            else f"{lo} and above"
            if hi == NEVER - 1
            else f"{lo} to {hi}"
        )

    return [[name(*b["ranks"]), b["n"], *(b[k] for k in COLUMNS)] for b in hb["bins"]]


MECHANISM_HEADER = (
    "at the second and later occurrences of q, within strata of equal trigger and occurrence",
    f"o is q's 2nd to {BIGRAM_TOP}th likeliest successor",
    f"o is not among q's {BIGRAM_TOP} likeliest",
    "difference",
)


def matched_gap(hb: dict, measure: str) -> float:
    """A :func:`head_or_bigram` measure (``acc``, ``top1`` or one of :data:`MECHANISM`) within strata, o in the
    top minus o off the top."""
    return hb[f"{measure}_in_matched"] - hb[f"{measure}_off_matched"]


def top1_ratio(hb: dict, matched: bool = False) -> float:
    """B10's ratio R: the share predicting q's likeliest successor with o its 2nd to :data:`BIGRAM_TOP`-th
    likeliest over the same share with o off the top (within strata when ``matched``)."""
    end = "_matched" if matched else ""
    return hb[f"top1_in{end}"] / hb[f"top1_off{end}"]


def head_or_bigram_mechanism_rows(hb: dict) -> list[list]:
    """Rows for :data:`MECHANISM_HEADER`: each :data:`MECHANISM` measure compared within strata."""
    return [
        [name, hb[f"{k}_in_matched"], hb[f"{k}_off_matched"], matched_gap(hb, k)]
        for k, name in MECHANISM.items()
    ]


def _after_earlier(x: torch.Tensor) -> torch.Tensor:
    """(batch, T, T) bool: [i, t, s] when s <= t and z_{s-1} = z_t, the keys that follow an earlier occurrence
    of the query's token (for a trigger q, the keys that hold its output o)."""
    prev = torch.cat([torch.full_like(x[:, :1], -1), x[:, :-1]], 1)  # z_{s-1}
    T = x.shape[1]
    return (prev[:, None, :] == x[:, :, None]) & torch.ones(T, T, dtype=torch.bool, device=x.device).tril()


def _key_measures(
    model: Transformer,
    x: torch.Tensor,
    rec: dict,
    keys: torch.Tensor,
    targets: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Per query position (batch, T), what sets the second layer's attention on ``keys`` (batch, T, T), a
    causal mask of the keys that hold the answer: their total attention, their mean logit, its token-token
    part c w_E(z_t)^T W_QK^2 w_E(z_s) and its part from the query's token and the keys' first-layer output
    h^1_s, the first layer's attention of those keys on their previous token, and the log-sum-exp of the
    other keys' logits; and where the rest of the attention goes: to the other keys holding the query's
    token z_t (s = t included), to the other keys holding the target ``targets`` (batch, T), and to all the
    others (the four attention shares add up to 1). ``rec`` is what the forward pass of the two-layer model
    recorded; its first feed-forward layer must be none, so that the stream entering layer 2 is w_E + p + h^1.
    ``bias`` (batch, T, T), if the forward pass added one to the second layer's logits, is a token-token edit
    (:func:`discount_edit`): it enters the logits and their token-token part."""
    n = keys.sum(-1).clamp_min(1)
    W2, c = model.layers[1].qk(), model.scale
    emb = model.W_E[x]
    h1 = rec["u1"] - model.embed(x)  # the first attention layer's output
    bias = torch.zeros(()) if bias is None else bias
    scores = (rec["u1"] @ W2) @ rec["u1"].transpose(1, 2) * c + bias  # (batch, t, s)
    q2 = emb @ W2 * c  # the query's token part, (batch, t, d)
    prev = F.pad(rec["attn1"].diagonal(offset=-1, dim1=1, dim2=2), (1, 0))  # a^1(s, s - 1)
    causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device).tril()

    def key_mean(v: torch.Tensor) -> torch.Tensor:  # (batch, t, s) -> (batch, t): mean over the keys
        return (v * keys).sum(-1) / n

    own = (x[:, None, :] == x[:, :, None]) & causal & ~keys  # other keys holding the query's token
    target = (x[:, None, :] == targets[:, :, None]) & causal & ~keys & ~own  # other keys holding the target
    rest = causal & ~keys & ~own & ~target
    return {
        "attention": (rec["attn2"] * keys).sum(-1),
        "key_score": key_mean(scores),
        "pair_score": key_mean(q2 @ emb.transpose(1, 2) + bias),
        "match_score": key_mean(q2 @ h1.transpose(1, 2)),
        "prev_attention": key_mean(prev[:, None, :].expand_as(scores)),
        "rest_score": torch.logsumexp(scores.masked_fill(keys | ~causal, float("-inf")), -1),
        "attention_query_token": (rec["attn2"] * own).sum(-1),
        "attention_target_elsewhere": (rec["attn2"] * target).sum(-1),
        "attention_rest": (rec["attn2"] * rest).sum(-1),
    }


def successor_ranks(task: RecallTask) -> torch.Tensor:
    """(N, N) long: [q, y] is the rank of y among q's bigram successors, 1 + the number of tokens j with
    pi_b(j | q) > pi_b(y | q), or :data:`NEVER` when pi_b(y | q) = 0 (y never follows q)."""
    big = torch.as_tensor(task.stats.bigram)
    rank = (big[:, None, :] > big[:, :, None]).sum(-1) + 1
    return torch.where(big > 0, rank, NEVER)


def _likely_pairs(task: RecallTask) -> torch.Tensor:
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
    likely = _likely_pairs(task)[qs]
    kinds = dict(zip(PAIR_KINDS, (likely, (big > 0) & ~likely, big == 0)))
    tables = token_token_logits(model, edit)
    out = {}
    for name, M in (("W_QK^2", tables["W_QK^2"][qs, :N]), ("W_QK^1", tables["W_QK^1"][:N, qs].T)):
        m = {k: float(M[g].mean()) if g.any() else float("nan") for k, g in kinds.items()}
        out[name] = {**m, "likely_minus_other": m[PAIR_KINDS[0]] - m[PAIR_KINDS[1]]}
    return out


PAIR_MODELS = ("random triggers, trained", "random triggers, at initialisation", "fixed triggers, trained")


def pair_score_models(random_run: InductionRun, fixed_run: InductionRun) -> dict[str, dict]:
    """:func:`pair_scores` of the random-trigger model, of the same model at its initialisation, and of the
    fixed-trigger model (pairs with its fixed triggers), keyed by :data:`PAIR_MODELS`."""
    task = random_run.exp.task()
    return dict(
        zip(
            PAIR_MODELS,
            (
                pair_scores(random_run.model(), task),
                pair_scores(random_run.model(trained=False), task),
                pair_scores(fixed_run.model(), fixed_run.exp.task()),
            ),
        )
    )


PAIR_SCORE_HEADER = ("model", "layer", *PAIR_KINDS, "likely minus another successor")


def pair_score_rows(models: dict[str, dict]) -> list[list]:
    """Rows (model, layer, one column per :data:`PAIR_KINDS`, likely minus other) of :func:`pair_score_models`."""
    return [
        [m, layer, *(v[k] for k in PAIR_KINDS), v["likely_minus_other"]]
        for m, by_layer in models.items()
        for layer, v in by_layer.items()
    ]


# --- does the pair discount cause the preference? An edit of the token-token logits ---

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
    likely[qs[:, None], torch.arange(N)] = _likely_pairs(task)[qs]  # [q, y]
    other = torch.zeros(V, V, dtype=torch.bool)
    other[:N, :N] = (torch.as_tensor(task.stats.bigram) > 0) & ~_likely_pairs(task)
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


def discount_edits(r: InductionRun, n_seq: int = 2048, chunk: int = 256) -> dict[str, dict]:
    """:func:`head_or_bigram` of a random-trigger run for each of :data:`DISCOUNT_EDITS` (``"trained"``: no
    edit), on the same ``n_seq`` sequences, so that every edit is measured at the same positions."""
    model, task = r.model(), r.exp.task()
    return {
        k: head_or_bigram(r, n_seq, chunk, edit=discount_edit(model, task, strengths, how) or None)
        for k, (_, strengths, how) in DISCOUNT_EDITS.items()
    }


def edit_bias(edit: dict | None, tokens: torch.Tensor) -> dict[int, torch.Tensor]:
    """The attention-logit biases {layer: (batch, T, T)} of a token-token ``edit`` ({layer: (V, V) table},
    :func:`discount_edit`) on ``tokens`` (batch, T): entry [b, t, s] is table[z_t, z_s]."""
    return {
        l: table.to(tokens.device)[tokens[:, :, None], tokens[:, None, :]]
        for l, table in (edit or {}).items()
    }


DISCOUNT_EDIT_HEADER = (
    "edit",
    f"accuracy, o q's 2nd to {BIGRAM_TOP}th likeliest",
    "accuracy, o off the top",
    "top-1 share, o in the top",
    "top-1 share, o off the top",
    "ratio",
    "ratio within strata",
    "attention on o's keys, in - off (within strata)",
    "first layer on q, in - off",
)


def discount_edit_rows(edits: dict[str, dict]) -> list[list]:
    """Rows for :data:`DISCOUNT_EDIT_HEADER` from :func:`discount_edits`."""
    return [
        [
            DISCOUNT_EDITS[k][0],
            hb["acc_in"],
            hb["acc_off"],
            hb["top1_in"],
            hb["top1_off"],
            top1_ratio(hb),
            top1_ratio(hb, matched=True),
            matched_gap(hb, "attention"),
            matched_gap(hb, "prev_attention"),
        ]
        for k, hb in edits.items()
    ]


# keys after an earlier q that hold one of q's BIGRAM_TOP likeliest successors, or not
KEY_KINDS = ("likely", "other")
# positions of a trigger seen before (target o), of another token seen before
QUERY_PARTS = ("trigger", "non-trigger")


def pair_masks(likely: torch.Tensor, b) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """For a batch ``b`` of :class:`RecallTask` sequences and ``likely`` (:func:`_likely_pairs`): the keys
    s <= t that follow an earlier occurrence of z_t, split by :data:`KEY_KINDS` (batch, T, T), and the query
    positions whose token occurred before, split by :data:`QUERY_PARTS` (batch, T)."""
    x = torch.as_tensor(b.inputs)
    N = likely.shape[0]
    keys = _after_earlier(x)
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
    :data:`BIGRAM_TOP` likeliest bigram successors (``likely``) and for the others (``other``), split by
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
    likely = _likely_pairs(task)
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


def b10_values(edits: dict, pg: dict, scores: dict) -> dict[str, float]:
    """B10's numbers of one random-trigger model from :func:`discount_edits` (``"trained"``: its
    :func:`head_or_bigram`), :func:`pair_gradient` and :func:`pair_scores` (of the trained model), named as
    :data:`B10_MEASURES`. R, the ratio of ``top1_in`` to ``top1_off``, is read for every edit on the same
    positions; ``discount_removed_share`` is (R trained - R both removed) / (R trained - 1), the share of R's
    excess over 1 (no preference) that goes with both discounts, ``discount_doubled_growth`` (R both doubled -
    R trained) / (R trained - 1), ``discount_pairwise_share`` the share that goes with both removed pair by pair."""
    hb = edits["trained"]
    ratio = {k: top1_ratio(e) for k, e in edits.items()}
    excess = ratio["trained"] - 1 or float("nan")  # no preference to explain: the shares are undefined
    return {
        "acc_off": hb["acc_off"],
        "top1_ratio": ratio["trained"],
        "top1_ratio_matched": top1_ratio(hb, matched=True),
        **{f"{k}_gap": matched_gap(hb, k) for k in MECHANISM},
        "pair_QK1": scores["W_QK^1"]["likely_minus_other"],
        "pair_QK2": scores["W_QK^2"]["likely_minus_other"],
        "pair_discount_weaker": max(v["likely_minus_other"] for v in scores.values()),
        "balance_gap": pg["likely"]["balance"] - pg["other"]["balance"],
        **{f"ratio_{k}": ratio[k] for k in DISCOUNT_EDITS if k != "trained"},
        "discount_removed_share": (ratio["trained"] - ratio["both_removed"]) / excess,
        "discount_doubled_growth": (ratio["both_doubled"] - ratio["trained"]) / excess,
        "discount_pairwise_share": (ratio["trained"] - ratio["both_pairwise"]) / excess,
    }


B10_MEASURES = {  # b10_values and b10_training_values: name -> (column header, meaning)
    "acc_off": (
        "accuracy, o off the top",
        f"accuracy where o is not among q's {BIGRAM_TOP} likeliest successors",
    ),
    "top1_ratio": (
        "top-1 share, in / off",
        f"share predicting q's likeliest successor, o its 2nd to {BIGRAM_TOP}th likeliest over o off the top",
    ),
    "top1_ratio_matched": (
        "the same within strata",
        "the same ratio within strata (trigger, occurrence bin)",
    ),
    "attention_gap": (
        "attention on o's keys, in - off",
        "second layer's attention on the keys holding o, in minus off, within strata",
    ),
    "prev_attention_gap": (
        "first layer on q, in - off",
        "first layer's attention of the keys holding o on q, in minus off, within strata",
    ),
    "key_score_gap": (
        "mean logit of o's keys",
        "second layer's mean logit of the keys holding o, in minus off, within strata",
    ),
    "pair_score_gap": ("its token-token part", "its token-token part, in minus off, within strata"),
    "match_score_gap": (
        "its induction match",
        "its part from the query's token and the keys' h^1, in minus off, within strata",
    ),
    "rest_score_gap": (
        "other keys' log-sum-exp",
        "log-sum-exp of the other keys' logits, in minus off, within strata",
    ),
    "attention_query_token_gap": (
        "attention on q's keys",
        "attention on the keys holding q itself, in minus off, within strata",
    ),
    "attention_target_elsewhere_gap": (
        "on o elsewhere",
        "attention on the keys holding o elsewhere, in minus off, within strata",
    ),
    "attention_rest_gap": ("on all other keys", "attention on all other keys, in minus off, within strata"),
    "pair_QK1": (
        "W_QK^1 likely - other",
        "token-token logit in W_QK^1, q's likeliest successors minus others",
    ),
    "pair_QK2": ("W_QK^2 likely - other", "the same in W_QK^2"),
    "pair_discount_weaker": ("weaker layer", "the larger (weaker) of the two"),
    "balance_gap": (
        "push undone, likely - other",
        "share of the triggers' push that the other repeated positions undo, likely keys minus other keys",
    ),
    **{
        f"ratio_{k}": (f"ratio, {name}", f"the top-1 share ratio with {name}")
        for k, (name, *_) in DISCOUNT_EDITS.items()
        if k != "trained"
    },
    "discount_removed_share": ("share of the excess gone", "(R trained - R both removed) / (R trained - 1)"),
    "discount_doubled_growth": ("growth, doubled", "(R both doubled - R trained) / (R trained - 1)"),
    "discount_pairwise_share": (
        "share gone, pair by pair",
        "(R trained - R both pair by pair) / (R trained - 1)",
    ),
    **{
        f"{m}_{w}": (f"{head}, {w}", f"{w} window of training (test batch): {meaning}")  # b10_training_values
        for w in ("early", "late")
        for m, head, meaning in (
            ("ratio", "ratio", "the top-1 share ratio R"),
            ("ratio_removed", "ratio, both removed", "R with both discounts removed"),
            ("removed_share", "share gone", "(R - R both removed) / (R - 1)"),
            ("ratio_pairwise", "ratio, pair by pair", "R with both discounts removed pair by pair"),
            ("pairwise_share", "share gone, pair by pair", "(R - R both pair by pair) / (R - 1)"),
            ("pair_QK1", "W_QK^1 likely - other", "W_QK^1's pair discount, mean over the window"),
            ("pair_QK2", "W_QK^2 likely - other", "W_QK^2's pair discount, mean over the window"),
        )
    },
}
TRAINING_MEASURES = (
    "ratio",
    "ratio_removed",
    "removed_share",
    "ratio_pairwise",
    "pairwise_share",
    "pair_QK1",
    "pair_QK2",
)


# --- B10 over seeds (recorded: ``python -m companion record induction_b10_seeds``) ---

B10_SEEDS = (0, 1, 2, 3, 4)
# the edits the Evaluator also measures
# along training (:data:`DISCOUNT_EDITS`), by the suffix of their curves: both discounts removed, as a mean and pair
# by pair
B10_EDITS = {"_removed": "both_removed", "_pairwise": "both_pairwise"}
B10_CURVES = (
    "acc",
    "b10_top1_in",
    "b10_top1_off",
    "b10_pair_QK1",
    "b10_pair_QK2",
    # along training, per seed
    *(f"b10_top1_{side}{end}" for end in B10_EDITS for side in ("in", "off")),
)


def b10_seed_members(profile: str | None = None) -> dict[str, InductionExperiment]:
    """The random-trigger run of :func:`random_trigger_experiment` for each of :data:`B10_SEEDS` (``"seed 0"``,
    ...; the seed fixes the data, the initialisation and the test streams)."""
    base = random_trigger_experiment(profile)
    return {f"seed {s}": dataclasses.replace(base, seed=s) for s in B10_SEEDS}


def b10_seeds_summary(runs: dict[str, InductionRun]) -> report.Summary:
    """B10's numbers (:func:`b10_values`) of each run of a :func:`b10_seed_members` set, named
    ``b10s_<measure>_s<seed>``, and over the seeds: the smallest accuracy off the top and ratio, the largest
    ratio, how many seeds have a ratio above 2 (the bar of the single-seed row ``ih.b10_bigram_when_top``), and
    the largest (weakest) first-layer gap and pair discount and the smallest balance gap; the extremes of the
    discount edits' shares (:func:`discount_edits`) and how many seeds the first layer's edit lowers the ratio
    more in; and the share the edit takes away along training (:func:`b10_along_training`'s
    ``b10t_removed_share*``, as ``b10s_<window>_removed_share_<mean|min>``)."""
    per = {
        r.exp.seed: {
            **b10_values(discount_edits(r), pair_gradient(r), pair_scores(r.model(), r.exp.task())),
            **b10_training_values(r),
        }
        for r in runs.values()
    }
    out = {
        f"b10s_{m}_s{s}": (v[m], f"seed {s}: {B10_MEASURES[m][1]}")
        for s, v in per.items()
        for m in B10_MEASURES
    }
    col = {m: np.array([v[m] for v in per.values()]) for m in B10_MEASURES}
    first = next(iter(runs.values())).exp
    out.update(
        {
            "b10s_n": (len(per), "seeds"),
            "b10s_first_seed": (min(per), "the first seed"),
            "b10s_last_seed": (max(per), "the last seed"),
            "b10s_steps": (first.steps, "training steps per seed"),
            "b10s_acc_off_min": (col["acc_off"].min(), "smallest over seeds: accuracy off the top"),
            "b10s_top1_ratio_min": (col["top1_ratio"].min(), "smallest over seeds: the top-1 share ratio"),
            "b10s_top1_ratio_max": (col["top1_ratio"].max(), "largest over seeds: the top-1 share ratio"),
            "b10s_top1_ratio_matched_min": (
                col["top1_ratio_matched"].min(),
                "smallest over seeds: the ratio within strata",
            ),
            "b10s_above_2": (int((col["top1_ratio"] > 2).sum()), "seeds whose ratio is above 2"),
            "b10s_attention_gap_max": (col["attention_gap"].max(), "largest over seeds: the attention gap"),
            "b10s_prev_attention_gap_max": (
                col["prev_attention_gap"].max(),
                "largest over seeds: the first-layer gap",
            ),
            "b10s_pair_discount_max": (
                col["pair_discount_weaker"].max(),
                "largest over seeds: the weaker layer's pair discount",
            ),
            "b10s_balance_gap_min": (col["balance_gap"].min(), "smallest over seeds: the balance gap"),
            "b10s_match_score_gap_max": (
                col["match_score_gap"].max(),
                "largest over seeds: the induction-match gap",
            ),
            "b10s_pair_score_gap_max": (
                col["pair_score_gap"].max(),
                "largest over seeds: the token-token gap",
            ),
            "b10s_rest_share_min": (
                (col["attention_rest_gap"] / -col["attention_gap"]).min(),
                "smallest over seeds: share of the lost attention that goes to the keys holding "
                "neither q nor o",
            ),
            "b10s_discount_removed_share_min": (
                col["discount_removed_share"].min(),
                "smallest over seeds: share of the ratio's excess that goes with both discounts removed",
            ),
            "b10s_discount_removed_share_max": (
                col["discount_removed_share"].max(),
                "largest over seeds: the same",
            ),
            "b10s_discount_doubled_growth_min": (
                col["discount_doubled_growth"].min(),
                "smallest over seeds: the ratio's growth with both discounts doubled, over its excess",
            ),
            "b10s_discount_doubled_growth_max": (
                col["discount_doubled_growth"].max(),
                "largest over seeds: the same",
            ),
            "b10s_discount_pairwise_share_min": (
                col["discount_pairwise_share"].min(),
                "smallest over seeds: the share that goes with both discounts removed pair by pair",
            ),
            "b10s_discount_pairwise_share_max": (
                col["discount_pairwise_share"].max(),
                "largest over seeds: the same",
            ),
            "b10s_qk1_stronger": (
                int((col["ratio_QK1_removed"] < col["ratio_QK2_removed"]).sum()),
                "seeds where removing "
                "W_QK^1's discount alone lowers the ratio more than removing W_QK^2's alone",
            ),
            "b10s_pairwise_more": (
                int((col["discount_pairwise_share"] > col["discount_removed_share"]).sum()),
                "seeds where the pair-by-pair edit takes away more of the excess than the mean edit",
            ),
            "b10s_ratio_both_pairwise_min": (
                col["ratio_both_pairwise"].min(),
                "smallest over seeds: the ratio with both discounts removed pair by pair",
            ),
        }
    )
    for w in ("early", "late"):  # the edits along training, on the Evaluator's test batches
        for e, how in (("removed", ""), ("pairwise", " pair by pair")):
            share = col[f"{e}_share_{w}"]
            out[f"b10s_{w}_{e}_share_min"] = (
                share.min(),
                f"smallest over seeds: {w} window, share of the ratio's "
                f"excess that goes with both discounts removed{how}",
            )
            out[f"b10s_{w}_{e}_share_argmin"] = (
                int(list(per)[int(share.argmin())]),
                "the seed with that smallest share",
            )
            out[f"b10s_{w}_{e}_share_above"] = (
                int((share > 0.25).sum()),
                f"seeds whose {w} share{how} is above 0.25",
            )
        weakest = col[f"pair_QK2_{w}"]
        out[f"b10s_{w}_pair_QK2_max"] = (
            weakest.max(),
            f"largest (weakest) over seeds: W_QK^2's pair discount, mean over the {w} window",
        )
        out[f"b10s_{w}_pair_QK2_argmax"] = (
            int(list(per)[int(weakest.argmax())]),
            "the seed with that weakest discount",
        )
        out[f"b10s_{w}_pairwise_more"] = (
            int((col[f"pairwise_share_{w}"] > col[f"removed_share_{w}"]).sum()),
            f"seeds where, in the {w} window, the pair-by-pair edit takes away more "
            "of the excess than the mean edit",
        )
    return report.Summary(out)


def b10_training_values(r: InductionRun) -> dict[str, float]:
    """One run's edits along training (:func:`b10_along_training` of that run alone): per window, the ratio R,
    R with both discounts removed (as a mean, and pair by pair) and the share of R's excess that goes, and the
    two layers' pair discounts (``ratio_early``, ``ratio_removed_early``, ..., ``pair_QK2_late``:
    :data:`TRAINING_MEASURES`)."""
    along = b10_along_training(b10_seed_curves({"run": r}))
    return {f"{m}_{w}": along[f"b10t_{m}_{w}"] for w in ("early", "late") for m in TRAINING_MEASURES}


def b10_seed_curves(runs: dict[str, InductionRun]) -> dict[str, dict[str, list]]:
    """Along training, per seed: the evaluated steps and :data:`B10_CURVES`."""
    return {k: {name: r.metrics[k].tolist() for name, r in runs.items()} for k in ("step", *B10_CURVES)}


def b10_seed_overview(summary) -> report.Summary:
    """The entries of a :func:`b10_seeds_summary` (live or recorded) that are not one seed's: the extremes."""
    return report.Summary(
        {k: (v, summary.meaning.get(k, "")) for k, v in summary.items() if not re.search(r"_s\d+$", k)}
    )


def b10_along_training(
    curves: dict, early: tuple[float, float] = (0.2, 0.4), late: tuple[float, float] = (0.7, 1.0)
) -> report.Summary:
    """:func:`b10_seed_curves` (live or recorded) in two windows of training, given as fractions of the last
    evaluated step (``early``: [0.2, 0.4), after the induction head forms; ``late``: [0.7, 1.0]): the mean over
    the evaluations in the window, then over the seeds, of each of :data:`B10_CURVES`, named
    ``b10t_<curve>_<window>``, and ``b10t_<window>_from`` / ``_to``, the window's first and last evaluated step
    (of the last run; the runs of a seed study share their steps). The default windows are ours, chosen on the
    recorded curves to describe them. And the edit along training: per seed and window, the ratio
    R = top-1 share in / off (of the window's means) as trained and with each of :data:`B10_EDITS` (``<e>``:
    ``removed`` or ``pairwise``), ``b10t_ratio_<e>_<window>``, and the share of R's excess over 1 that the edit
    takes away, (R - R_edited) / (R - 1): ``b10t_<e>_share_<window>`` is its mean over the seeds and
    ``b10t_<e>_share_min_<window>`` its smallest."""
    for name, (lo, hi) in (("early", early), ("late", late)):
        if not 0 <= lo < hi <= 1:
            raise ValueError(f"{name}={(lo, hi)} is not a window of training: need 0 <= start < end <= 1")
    out = {}
    for window, (lo, hi) in (("early", early), ("late", late)):
        means = {k: [] for k in B10_CURVES}
        for name, steps in curves["step"].items():
            steps = np.asarray(steps)
            end = steps[-1]
            keep = (steps >= lo * end) & ((steps < hi * end) | (hi == 1))
            if not keep.any():
                raise ValueError(
                    f"{window}={(lo, hi)} holds no evaluation of {name!r} (steps {steps.tolist()})"
                )
            for k in B10_CURVES:
                means[k].append(float(np.mean(np.asarray(curves[k][name])[keep])))
        out[f"b10t_{window}_from"] = (int(steps[keep][0]), f"the {window} window's first evaluated step")
        out[f"b10t_{window}_to"] = (int(steps[keep][-1]), f"the {window} window's last evaluated step")
        out.update(
            {
                f"b10t_{k.removeprefix('b10_')}_{window}": (
                    float(np.mean(v)),
                    f"{k}: mean over the {window} window, then over seeds",
                )
                for k, v in means.items()
            }
        )
        m = {k: np.array(v) for k, v in means.items()}
        ratio = m["b10_top1_in"] / m["b10_top1_off"]
        out[f"b10t_ratio_{window}"] = (
            float(ratio.mean()),
            f"{window} window: the ratio R of the shares (in / off, of the window's means), mean over seeds",
        )
        for end, key in B10_EDITS.items():
            e, edit = end[1:], DISCOUNT_EDITS[key][0]
            edited = m[f"b10_top1_in{end}"] / m[f"b10_top1_off{end}"]
            out[f"b10t_ratio_{e}_{window}"] = (
                float(edited.mean()),
                f"{window} window: R with {edit}, mean over seeds",
            )
            with np.errstate(divide="ignore", invalid="ignore"):  # R = 1: no excess, no share (nan)
                share = (ratio - edited) / (ratio - 1)
            out[f"b10t_{e}_share_{window}"] = (
                float(share.mean()),
                f"{window} window: share of the ratio's excess "
                f"over 1 taken away with {edit}, mean over seeds",
            )
            out[f"b10t_{e}_share_min_{window}"] = (
                float(share.min()),
                f"{window} window: the same, smallest over seeds",
            )
    return report.Summary(out)


# the seed study's tables: B10's preference and the claims' mechanism; where the attention goes; edits
B10_TABLES = {
    "claims": (
        "acc_off",
        "top1_ratio",
        "top1_ratio_matched",
        "attention_gap",
        "prev_attention_gap",
        "pair_QK1",
        "pair_QK2",
        "pair_discount_weaker",
        "balance_gap",
    ),
    "attention": (
        "attention_gap",
        "key_score_gap",
        "pair_score_gap",
        "match_score_gap",
        "rest_score_gap",
        "attention_query_token_gap",
        "attention_target_elsewhere_gap",
        "attention_rest_gap",
    ),
    "edits": (
        "top1_ratio",
        *(f"ratio_{k}" for k in DISCOUNT_EDITS if k != "trained"),
        "discount_removed_share",
        "discount_doubled_growth",
        "discount_pairwise_share",
    ),
    "training": tuple(
        f"{m}_{w}" for w in ("early", "late") for m in ("ratio", "ratio_removed", "removed_share")
    ),
    "training_pairwise": tuple(
        f"{m}_{w}"
        for w in ("early", "late")
        for m in ("ratio_pairwise", "pairwise_share", "pair_QK1", "pair_QK2")
    ),
}


def b10_seed_header(table: str = "claims") -> tuple[str, ...]:
    """The column headers of one of :data:`B10_TABLES`."""
    check_choice("table", table, tuple(B10_TABLES))
    return ("seed", *(B10_MEASURES[m][0] for m in B10_TABLES[table]))


def b10_seed_rows(summary, table: str = "claims") -> list[list]:
    """One row per seed of a :func:`b10_seeds_summary` (live or recorded), the columns of
    :func:`b10_seed_header` ``(table)``."""
    check_choice("table", table, tuple(B10_TABLES))
    seeds = sorted(int(k.rsplit("_s", 1)[1]) for k in summary if k.startswith("b10s_acc_off_s"))
    return [[s, *(summary[f"b10s_{m}_s{s}"] for m in B10_TABLES[table])] for s in seeds]


# --- the chapter's numbers ---


def study_members(profile: str | None = None) -> dict[str, InductionExperiment]:
    """Every run :func:`study` trains, by name: the freeze schedules (by their names), the seeds other than the
    joint schedule's (``"seed 1"``, ...), the one- and two-layer models (``"1 layer"``, ``"2 layers"``) and the
    final-W_F model (``"final W_F"``)."""
    sched = schedules(profile)
    out = dict(sched)
    out.update({f"seed {s}": e for s, e in seeds(profile).items() if e != sched["joint"]})
    out.update({f"{L} layer{'s' * (L > 1)}": e for L, e in layer_experiments(profile).items()})
    out["final W_F"] = ff_experiment(profile)
    return out


def study_from_runs(runs: dict) -> dict:
    """:func:`study`'s result from the runs of :func:`study_members` (trained here, or by a recording): a seed
    that is not among them is the joint schedule's run."""
    joint = runs["joint"]
    named = {k: r for k, r in runs.items() if k.startswith("seed ")}
    by_seed = {joint.exp.seed: joint, **{int(k.split()[1]): r for k, r in named.items()}}
    return {
        "schedules": {n: runs[n] for n in SCHEDULES},
        "seeds": dict(sorted(by_seed.items())),
        "layers": {int(k.split()[0]): r for k, r in runs.items() if k.split()[-1] in ("layer", "layers")},
        "ff": runs["final W_F"],
        "constructed": constructed_run(joint.exp),
    }


def study(profile: str | None = None, progress: bool = True) -> dict:
    """Every run of ``book/induction_head``: the freeze schedules, the seed runs, the one- and two-layer
    models, the final-W_F model with fixed triggers, and the slide's memories written in. The random-trigger
    runs are :func:`random_study`'s."""
    return study_from_runs({n: run(e, progress=progress) for n, e in study_members(profile).items()})


def random_study(profile: str | None = None, progress: bool = True) -> dict:
    """Every run of ``book/induction_random``: the final-W_F models with random and with fixed triggers
    (the latter shared with :func:`study`, cached), and what the random-trigger model does at repeated
    triggers: head or bigram, the pair gradient, the pair scores and the discount edits."""
    ffr = run(ff_experiment(profile), progress=progress)
    rnd = run(random_trigger_experiment(profile), progress=progress)
    edits = discount_edits(rnd)
    return {
        "ff": ffr,
        "random": rnd,
        "discount_edits": edits,
        "head_or_bigram": edits["trained"],
        "pair_gradient": pair_gradient(rnd),
        "pair_scores": pair_score_models(rnd, ffr),
    }


def learning_order(runs: dict) -> dict[str, np.ndarray]:
    """Per run (e.g. per seed): t90 of each probe, the first evaluated step at which it reaches 0.9."""
    return {
        p: np.array([r.first_step_reaching(p) for r in runs.values()]) for p in (*PROBES, "probe_QK2_all")
    }


def ff_curves(r: InductionRun) -> dict[str, np.ndarray]:
    """Eq. (10) along a run with a last feed-forward layer: without and with the residual."""
    L = len(r.exp.ff)
    return {
        "W_U F(w_E(k)) (Eq. (10))": r.metrics[f"ff{L}_kl"],
        "W_U (w_E(k) + F(w_E(k)))": r.metrics[f"ff{L}_kl_residual"],
    }


def summary(res: dict) -> report.Summary:
    """The claim values of :func:`study` (see ``data/claims.toml``, ids ``ih.*`` of ``book/induction_head``)."""
    sched, layers = res["schedules"], res["layers"]
    joint = sched["joint"]
    s = joint.exp.unfreeze_at
    t = learning_order(res["seeds"])
    one, two, ffr = layers[1], layers[2], res["ff"]
    n_seeds = len(res["seeds"])
    return report.Summary(
        {
            "acc_two_layers": (two.final("acc"), "two layers: in-context accuracy at the end"),
            "acc_one_layer": (one.final("acc"), "one layer: in-context accuracy at the end"),
            "layer_gap": (two.final("acc") - one.final("acc"), "two layers minus one layer"),
            "one_ff1_kl_end": (
                one.final("ff1_kl"),
                "one layer (MLP): KL(pi_b || W_U F_1(w_E(k))) at the end (nats)",
            ),
            "mlp_ff1_kl_end": (two.final("ff1_kl"), "two layers (MLPs): the same for F_1"),
            "mlp_ff2_kl_start": (two.metrics["ff2_kl"][0], "two layers (MLPs): the same for F_2 at step 0"),
            "mlp_ff2_kl_end": (two.final("ff2_kl"), "the same for F_2 at the end"),
            "acc_ff": (
                ffr.final("acc"),
                "memories + final linear W_F, loss on all tokens: in-context accuracy at the end",
            ),
            "ff_kl_start": (
                ffr.metrics["ff2_kl"][0],
                "the same run: KL(pi_b || W_U W_F w_E(k)) at step 0 (nats)",
            ),
            "ff_kl_end": (ffr.final("ff2_kl"), "the same at the end"),
            "ff_kl_ratio": (ffr.final("ff2_kl") / ffr.metrics["ff2_kl"][0], "end over start"),
            "ff_kl_residual_end": (
                ffr.final("ff2_kl_residual"),
                "the same at the end, with the residual w_E(k)",
            ),
            "bigram_zero_share": (
                bigram_zero_share(joint.exp.task()),
                "share of zero entries of pi_b (non-trigger rows)",
            ),
            "acc_constructed": (
                res["constructed"]["acc"],
                "the slide's memories written in: in-context accuracy",
            ),
            "acc_joint": (
                joint.final("acc"),
                "three matrices trained jointly: in-context accuracy at the end",
            ),
            "n_seeds": (n_seeds, "seeds of the joint run"),
            "t90_OV2": (
                np.median(t["probe_OV2"]),
                "joint: first step with the W_OV^2 probe >= 0.9 (median over seeds)",
            ),
            "t90_QK2": (np.median(t["probe_QK2"]), "joint: the same for W_QK^2 (median)"),
            "t90_QK2_all": (
                np.median(t["probe_QK2_all"]),
                "joint: the same for W_QK^2, N-way probe (median)",
            ),
            "t90_QK1_early": (
                np.median(t["probe_QK1_early"]),
                f"joint: the same for W_QK^1 on t < {joint.exp.early_cutoff} (median)",
            ),
            "t90_QK1": (np.median(t["probe_QK1"]), "joint: the same for W_QK^1 on all positions (median)"),
            "order_ov_qk2_min": (
                (t["probe_QK2"] - t["probe_OV2"]).min(),
                "t90(W_QK^2) - t90(W_OV^2), smallest over seeds",
            ),
            "order_ov_qk2_max": ((t["probe_QK2"] - t["probe_OV2"]).max(), "the same, largest over seeds"),
            "order_ov_qk2_abs": (
                -(t["probe_QK2"] - t["probe_OV2"]).max(),
                "W_QK^2's lead over W_OV^2, smallest over seeds",
            ),
            "order_ov_qk2all_max": (
                (t["probe_QK2_all"] - t["probe_OV2"]).max(),
                "t90(W_QK^2, N-way probe) - t90(W_OV^2), largest over seeds",
            ),
            "order_qk2_qk1_min": (
                (t["probe_QK1_early"] - t["probe_QK2"]).min(),
                "t90(W_QK^1 early) - t90(W_QK^2), smallest over seeds",
            ),
            "early_cutoff": (joint.exp.early_cutoff, "early positions are t < this"),
            "qk1_early_final": (
                joint.final("probe_QK1_early"),
                "joint: W_QK^1 probe on early positions at the end",
            ),
            "qk1_all_final": (joint.final("probe_QK1"), "joint: W_QK^1 probe on all positions at the end"),
            "early_gap": (
                joint.final("probe_QK1_early") - joint.final("probe_QK1"),
                "early minus all positions",
            ),
            "unfreeze_at": (s, "the unfreeze step of the staged runs"),
            "ov_late_acc": (
                sched["W_OV^2 frozen first"].at("acc", s),
                "W_OV^2 frozen first: in-context accuracy at the unfreeze step",
            ),
            "ov_alone_acc": (
                sched["both W_QK frozen first"].at("acc", s),
                "both W_QK frozen first: in-context accuracy at the unfreeze step",
            ),
            "ov_alone_probe": (
                sched["both W_QK frozen first"].at("probe_OV2", s),
                "the same run: W_OV^2 probe at the unfreeze step",
            ),
            "qk2_first_acc_gap": (
                sched["W_QK^1 frozen first"].at("acc", s) - sched["W_QK^2 frozen first"].at("acc", s),
                "accuracy at the unfreeze step: W_QK^1 frozen first minus W_QK^2 frozen first",
            ),
            "qk2_first_t90_gap": (
                sched["W_QK^2 frozen first"].first_step_reaching("acc")
                - sched["W_QK^1 frozen first"].first_step_reaching("acc"),
                "first step with accuracy >= 0.9: W_QK^2 frozen first minus W_QK^1 frozen first",
            ),
            **{
                f"{k}_t90": (
                    sched[name].first_step_reaching("acc"),
                    f"{name}: first step with accuracy >= 0.9",
                )
                for k, name in (("qk2_first", "W_QK^1 frozen first"), ("qk1_first", "W_QK^2 frozen first"))
            },
            "eval_every": (joint.exp.eval_every, "steps between evaluations"),
            "seconds": (
                sum(
                    r.seconds
                    for r in [
                        *sched.values(),
                        *layers.values(),
                        ffr,
                        *(r for s_, r in res["seeds"].items() if r is not joint),
                    ]
                ),
                "training time of all runs (s)",
            ),
        }
    )


def random_summary(res: dict) -> report.Summary:
    """The claim values of :func:`random_study` (see ``data/claims.toml``, ids ``ih.b10_*`` of
    ``book/induction_random``)."""
    ffr, hb = res["ff"], res["head_or_bigram"]
    ps, pg = res["pair_scores"], res["pair_gradient"]
    b10 = b10_values(res["discount_edits"], pg, ps[PAIR_MODELS[0]])
    return report.Summary(
        {
            "acc_ff": (
                ffr.final("acc"),
                "memories + final linear W_F, fixed triggers: in-context accuracy at the end",
            ),
            "acc_random": (
                res["random"].final("acc"),
                "the same model, random triggers: in-context accuracy at the end",
            ),
            "hb_k": (res["random"].exp.n_triggers, "random triggers: triggers drawn per sequence"),
            "hb_steps": (res["random"].exp.steps, "random triggers: training steps"),
            "hb_positions": (
                hb["positions"],
                "random triggers: second and later trigger occurrences measured",
            ),
            "hb_top": (
                BIGRAM_TOP,
                "the bigram's 'top predictions': the trigger's likeliest successors counted",
            ),
            "hb_acc_off": (
                hb["acc_off"],
                f"accuracy where o is not among the trigger's {BIGRAM_TOP} likeliest successors",
            ),
            "hb_acc_in": (
                hb["acc_in"],
                f"accuracy where o is the trigger's 2nd to {BIGRAM_TOP}th likeliest successor",
            ),
            "hb_top1_off": (
                hb["top1_off"],
                "share predicting the trigger's likeliest successor, o not in the top",
            ),
            "hb_top1_in": (hb["top1_in"], f"the same, o the 2nd to {BIGRAM_TOP}th likeliest"),
            "hb_top1_ratio": (b10["top1_ratio"], "o in the top over o not in the top"),
            "hb_attention_in": (
                hb["attention_in"],
                "second layer's attention on the keys after earlier q, o in the top",
            ),
            "hb_attention_off": (hb["attention_off"], "the same, o not in the top"),
            "hb_acc_first": (hb["bins"][0]["acc"], "accuracy where o is the trigger's likeliest successor"),
            "hb_head_first": (
                hb["bins"][0]["head_acc"],
                "the same positions: the head path alone predicts o",
            ),
            "hb_attention_first": (
                hb["bins"][0]["attention"],
                "the same positions: attention on the keys after q",
            ),
            "hb_strata_matched": (
                hb["strata_matched"],
                "strata (trigger, occurrence bin) with both kinds of positions",
            ),
            "hb_matched_share": (hb["matched_share"], "share of the top positions in those strata"),
            "hb_attention_in_matched": (
                hb["attention_in_matched"],
                "attention on the keys after earlier q, o in the top, within strata",
            ),
            "hb_attention_off_matched": (
                hb["attention_off_matched"],
                "the same, o not in the top, same strata",
            ),
            "hb_acc_in_matched": (hb["acc_in_matched"], "accuracy, o in the top, within strata"),
            "hb_acc_off_matched": (
                hb["acc_off_matched"],
                "accuracy, o not in the top, weighted to the same strata",
            ),
            "hb_top1_ratio_matched": (
                b10["top1_ratio_matched"],
                "share predicting the likeliest successor, in over off, within strata",
            ),
            **{
                f"hb_{k}_{side}": (
                    hb[f"{k}_{side}_matched"],
                    f"{MECHANISM[k]}, o {'in' if side == 'in' else 'not in'} the top, within strata",
                )
                for k in MECHANISM
                if k != "attention"
                for side in ("in", "off")
            },
            "hb_prev_attention_gap": (
                b10["prev_attention_gap"],
                "first layer's attention of the keys holding o on q: in minus off, within strata",
            ),
            "hb_key_score_gap": (
                b10["key_score_gap"],
                "second layer's mean logit of the keys holding o: in minus off, within strata",
            ),
            "hb_pair_score_gap": (b10["pair_score_gap"], "its token-token part"),
            "hb_match_score_gap": (b10["match_score_gap"], "its query-token x first-layer part"),
            "hb_rest_score_gap": (
                b10["rest_score_gap"],
                "log-sum-exp of the other keys' logits: in minus off, within strata",
            ),
            **{
                f"pair_{layer[2:].replace('^', '')}_{m}": (
                    ps[name][layer]["likely_minus_other"],
                    f"{name}, {layer}: token-token logit, y among q's "
                    f"{BIGRAM_TOP} likeliest successors minus another successor",
                )
                for m, name in zip(("random", "init", "fixed"), PAIR_MODELS)
                for layer in ("W_QK^1", "W_QK^2")
            },
            "pair_discount_weaker": (
                b10["pair_discount_weaker"],
                "random triggers: the weaker (larger) of the two layers' likely-minus-other",
            ),
            **{
                f"pg_{k}_{p.replace('-', '')}": (
                    pg[k][p],
                    f"d(loss per sequence)/d(shift of the logits of {k} keys), {p} positions",
                )
                for k in KEY_KINDS
                for p in (*QUERY_PARTS, "net")
            },
            **{
                f"pg_{k}_balance": (
                    pg[k]["balance"],
                    f"share of the triggers' push on {k} keys that the other positions undo",
                )
                for k in KEY_KINDS
            },
            "pg_balance_gap": (b10["balance_gap"], "likely keys' balance minus other keys'"),
            **{
                f"hb_ratio_{k}": (b10[f"ratio_{k}"], B10_MEASURES[f"ratio_{k}"][1])
                for k in DISCOUNT_EDITS
                if k != "trained"
            },
            **{
                f"hb_{k}": (b10[k], B10_MEASURES[k][1])
                for k in ("discount_removed_share", "discount_doubled_growth", "discount_pairwise_share")
            },
            "seconds": (res["random"].seconds, "training time of the random-trigger run (s)"),
        }
    )


def schedule_table(res: dict) -> str:
    """Markdown: per schedule, accuracy and probes at the unfreeze step and at the end, and t90 of the accuracy."""
    rows = []
    for name, r in res["schedules"].items():
        s = r.exp.unfreeze_at
        rows.append(
            [
                name,
                *(report.format_value(r.at(k, s), 3) for k in ("acc", *PROBES)),
                report.format_value(r.final("acc"), 3),
                report.format_value(r.first_step_reaching("acc")),
            ]
        )
    head = ["schedule", "acc", "W_OV^2", "W_QK^2", "W_QK^1 early", "W_QK^1", "final acc", "t90(acc)"]
    return report.markdown_table(head, rows)


# --- the "three gradient steps" (slide "Gradient steps for the bigram task", Birth Thm., informal) ---

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
    rescaled, with hand-written ones at these scales (:func:`_compare_scales`; orthonormal embeddings only,
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
    seed: int = 0

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


def _population_loss(model: Transformer, batches) -> torch.Tensor:
    """Mean cross-entropy over every loss position of ``batches`` (a sum over chunks, one mean)."""
    count = sum(int(b.loss_mask.sum()) for b in batches)
    if count == 0:
        raise ValueError("the population has no loss position: raise batch or seq_len")
    return sum(batch_loss(model, b, "cpu", reduction="sum") for b in batches) / count


def three_steps(exp: ThreeStepExperiment, progress: bool = True, use_cache: bool = True) -> dict:
    """Run (or load) ``exp``: per step (0 = zero init) the matrix, step size, population loss, in-context
    accuracy on a test batch, and the recall probes."""
    return cache.load_or_compute(
        "three_steps", exp, lambda: _three_steps(exp, progress), MODULES, fmt="json", use_cache=use_cache
    )


def _step_setup(exp: ThreeStepExperiment):
    """The model at zero init (embeddings per ``exp``), the task, the population's chunks and the line-search
    chunks: the start of every three-step computation."""
    model = Transformer(exp.model_config(), seed=exp.seed)
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


def _population_gradient(model: Transformer, name: str, population) -> torch.Tensor:
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


def _gradient_step(model: Transformer, name: str, population, line, etas) -> tuple[float, float]:
    """One step on ``name`` along its normalised negative population gradient, of the size among ``etas`` with
    the lowest loss on ``line`` (one size: that size). A zero gradient (the matrix does not yet affect the
    loss) leaves the matrix as it is. Returns (gradient norm, size taken)."""
    grad = _population_gradient(model, name, population)
    norm = grad.norm().item()
    if norm <= ZERO_GRADIENT:
        return norm, 0.0
    W = model.matrix(name)
    direction, W0 = grad / norm, W.detach().clone()
    losses = []
    with torch.no_grad():
        for e in etas:
            W.copy_(W0 - e * direction)
            losses.append(_population_loss(model, line).item())
        eta = etas[int(np.argmin(losses))]
        W.copy_(W0 - eta * direction)
    return norm, eta


def _after_first_step(exp: ThreeStepExperiment):
    """The model after step 1 of the slide's order (W_V^2, line-searched as in :func:`three_steps`), its task and
    population: where step 2 starts."""
    model, task, population, line = _step_setup(exp)
    _gradient_step(model, STEP_ORDER[0], population, line, exp.etas)
    return model, task, population


def _three_steps(exp: ThreeStepExperiment, progress: bool) -> dict:
    from tqdm.auto import tqdm

    start = time.perf_counter()
    model, task, population, line = _step_setup(exp)
    evaluate = Evaluator(exp, model, "cpu")
    bar = tqdm(
        total=1 + 2 * len(exp.second_step_sizes or (None,)), desc="three gradient steps", disable=not progress
    )

    def step(i: int, name: str, size: float | None = None) -> dict:
        """One step on ``name``: the line search's size, or ``size``."""
        norm, eta = _gradient_step(model, name, population, line, exp.etas if size is None else (size,))
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
    rows.append(step(1, exp.order[0]))
    after_first = {n: model.matrix(n).detach().clone() for n in STEP_ORDER}
    sweep, states = [], []
    for size in exp.second_step_sizes or (None,):  # None: step 2 line-searched like the others
        second, third = step(2, exp.order[1], size), step(3, exp.order[2])
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
    scales = _compare_scales(model, task, evaluate, exp.scales)
    blocks = block_shares(model, task.n) if exp.embeddings == "orthonormal" else {}  # defined only there
    bar.close()
    sweep = sweep if exp.second_step_sizes else []
    return {
        "rows": rows,
        "sweep": sweep,
        "scales": scales,
        "blocks": blocks,
        "seconds": time.perf_counter() - start,
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
    order = _key_order(triggers, n_tokens)
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
    """The mean score of each memory's stored pairs, on the scale of :func:`construct`'s ``scale``: the
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
    :func:`construct`'s do at ``scale`` (:func:`stored_scores`, :data:`PAIR_SCORE`). Only the sizes change, not
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
    out_space, in_space = (_bases(model, n_tokens)[k] for k in OWN_BLOCK[name])
    return out_space @ (out_space.T @ model.matrix(name) @ in_space) @ in_space.T


# (output or query, input or key)
OWN_BLOCK = {"W_V^2": ("U", "E"), "W_QK^2": ("E", "R"), "W_QK^1": ("P", "P")}


def _bases(model: Transformer, n_tokens: int) -> dict[str, torch.Tensor]:
    """Orthonormal bases (d, rank) of the token embeddings (E), positions (P), remapped tokens W_V^1 w_E(k) (R)
    and unembeddings (U)."""
    E = model.W_E[:n_tokens]
    rows = {"E": E, "P": model.P, "R": E @ model.layers[0].v().T, "U": model.W_U}
    return {k: torch.linalg.qr(v.T).Q for k, v in rows.items()}


@torch.no_grad()
def block_shares(model: Transformer, n_tokens: int) -> dict[str, dict[str, float]]:
    """For each of the three memories, the share of its squared Frobenius norm in each block (query or output
    subspace) x (key or input subspace) of :func:`_bases`: E, P, R on both sides of W_QK^1 and W_QK^2,
    U x (E, P, R) for W_V^2 (whose output the unembedding reads). The subspaces are orthogonal only for
    orthonormal embeddings; only then do the shares add up to one (less what lies outside them)."""
    basis = _bases(model, n_tokens)
    return {
        name: _shares(model.matrix(name), basis, ("U",) if name == "W_V^2" else "EPR", "EPR")
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
def _shares(W: torch.Tensor, basis: dict[str, torch.Tensor], left, right) -> dict[str, float]:
    """The share of W's squared Frobenius norm in each block (a in ``left``) x (b in ``right``) of ``basis``."""
    total = W.pow(2).sum().item()
    return {
        f"{a} x {b}": (basis[a].T @ W @ basis[b]).pow(2).sum().item() / total if total else float("nan")
        for a in left
        for b in right
    }


def step2_gradient(exp: ThreeStepExperiment, first_layer: str = "uniform") -> dict:
    """The negative population gradient G of W_QK^2 at step 2 of the slide's order (after step 1 on W_V^2, as in
    :func:`three_steps`), split by what it associates. The learned W_QK^2 is G scaled, so this is what step 2 writes.

    ``first_layer="uniform"``: W_QK^1 = 0, as in the three steps; ``"previous token"``: W_QK^1 is
    :func:`construct`'s previous-token memory (scale 20), so that the remapped previous token is not averaged
    over the prefix. Entries are read in the unit directions of the (orthonormal) embeddings: ``parts`` gives,
    for each of :data:`STEP2_PARTS`, the share of |G|^2 in its entries and their mean over the mean stored
    entry. The query at the loss position is a trigger q at position T - 1. "stored pairs": (w_E(q), W_V^1 w_E(q));
    "own token": (w_E(q), w_E(q)); "own position": (w_E(q), p_{T-1}) and (p_{T-1}, p_{T-1});
    "triggers from the last position": (p_{T-1}, w_E(q')) for every trigger q'; "everything else": the rest of
    |G|^2. ``shares``: G's block shares (:func:`block_shares`); ``stored``: the mean stored entry; ``accuracy``:
    for each of ``exp.scales``, the in-context accuracy with W_QK^2 = G rescaled and the other two memories
    :func:`construct`'s at that scale (the mix "learned W_QK^2 only" of :func:`_compare_scales`).

    Raises:
        ValueError: ``first_layer`` not in :data:`FIRST_LAYERS`, embeddings not orthonormal, or an order
            other than the slide's.
    """
    check_choice("first_layer", first_layer, FIRST_LAYERS)
    if exp.embeddings != "orthonormal" or exp.order != STEP_ORDER:
        raise ValueError(
            f"step2_gradient needs embeddings='orthonormal' and the slide's order {STEP_ORDER}, not "
            f"{exp.embeddings!r} and {exp.order}"
        )
    model, task, population = _after_first_step(exp)
    if first_layer == "previous token":
        construct(model, task.triggers, task.n, names=("W_QK^1",))
    G = -_population_gradient(model, "W_QK^2", population)
    basis = _bases(model, task.n)
    trig, T = list(task.triggers), exp.seq_len

    def unit(X: torch.Tensor) -> torch.Tensor:
        return X / X.norm(dim=1, keepdim=True)

    q, last = unit(model.W_E[trig]), unit(model.P[T - 1 : T])
    entries = {
        "stored pairs": torch.diagonal(q @ G @ unit(model.W_E[trig] @ model.layers[0].v().T).T),
        "own token": torch.diagonal(q @ G @ q.T),
        "own position": torch.cat([(q @ G @ last.T)[:, 0], (last @ G @ last.T)[0]]),
        "triggers from the last position": (last @ G @ q.T)[0],
    }
    total = G.pow(2).sum().item()
    stored = entries["stored pairs"].mean().item()
    parts = {
        k: {"share": v.pow(2).sum().item() / total, "mean / stored": v.mean().item() / stored}
        for k, v in entries.items()
    }
    parts["everything else"] = {
        "share": 1.0 - sum(p["share"] for p in parts.values()),
        "mean / stored": float("nan"),
    }
    with torch.no_grad():
        model.matrix("W_QK^2").copy_(G)
    mix = "learned W_QK^2 only"
    scales = _compare_scales(model, task, Evaluator(exp, model, "cpu"), exp.scales, {mix: MIXES[mix]})
    return {
        "first_layer": first_layer,
        "stored": stored,
        "parts": parts,
        "shares": _shares(G, basis, "EPR", "EPR"),
        "accuracy": {row["scale"]: row[mix] for row in scales},
    }


# keys that hold the query's token or place
SELF_PARTS = ("own token", "own position", "triggers from the last position")


def step2_summary(grads: list[dict]) -> report.Summary:
    """The claim values of :func:`step2_gradient` for the uniform and the previous-token first layer."""
    g = {r["first_layer"]: r for r in grads}
    missing = set(FIRST_LAYERS) - set(g)
    if missing:
        raise ValueError(
            f"step2_summary needs a result for each first layer of {FIRST_LAYERS}; missing {sorted(missing)}"
        )
    uni, prev = g["uniform"], g["previous token"]

    def best(r: dict) -> float:
        return max(r["accuracy"].values()) if r["accuracy"] else float("nan")

    return report.Summary(
        {
            "g2_self_share": (
                sum(uni["parts"][p]["share"] for p in SELF_PARTS),
                "uniform first layer: share of |G|^2 in the own-token, own-position and trigger-key entries",
            ),
            "g2_stored_share": (
                uni["parts"]["stored pairs"]["share"],
                "uniform first layer: share in the stored pairs",
            ),
            "g2_own_token": (
                -uni["parts"]["own token"]["mean / stored"],
                "uniform first layer: minus the mean own-token entry over the mean stored entry (how many "
                "times as hard a key holding the query's token is pushed down as its own key is pushed up)",
            ),
            "g2_self_share_prev": (
                sum(prev["parts"][p]["share"] for p in SELF_PARTS),
                "previous-token first layer: share in the same entries",
            ),
            "g2_stored_share_prev": (
                prev["parts"]["stored pairs"]["share"],
                "previous-token first layer: share in the stored pairs",
            ),
            "g2_stored_ratio": (
                prev["stored"] / uni["stored"],
                "mean stored entry, previous-token over uniform first layer",
            ),
            "g2_best_uniform": (
                best(uni),
                "uniform first layer: step 2's W_QK^2 rescaled among hand-written memories, "
                "best accuracy over the scales",
            ),
            "g2_best_prev": (best(prev), "previous-token first layer: the same"),
        }
    )


def step2_table(grads: list[dict]) -> str:
    """Markdown: for each :func:`step2_gradient` result (a column pair), each part's share of |G|^2 and its mean
    entry over the mean stored entry."""
    head = ["entries (query, key)"] + [
        f"{c} ({g['first_layer']} first layer)"
        for g in grads
        for c in ("share of squared norm", "mean / stored")
    ]
    rows = [
        [
            part,
            *(
                g["parts"][part][c] if part != "everything else" or c == "share" else "–"
                for g in grads
                for c in ("share", "mean / stored")
            ),
        ]
        for part in STEP2_PARTS
    ]
    return report.markdown_table(head, rows, digits=3)


# x_t = w_E(z_t) + p_t + h^1_t, the stream entering layer 2
STREAM_PARTS = ("token", "position", "first layer")


@torch.no_grad()
def step2_outer(
    model: Transformer, population, keep: list | None = None
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The negative population gradient of W_QK^2 at W_QK^2 = 0, in closed form and split by source.

    With W_QK^2 = 0 the last position attends uniformly to the T positions, and for a loss at the last position
    -dl/dW_QK^2 = (c / T) sum_s (b_s - mean_s b_s) x_{T-1} x_s^T, with b_s = (e_o - pi)^T W_U W_V^2 x_s (how much
    attending to s would raise log p(o)), x the stream entering layer 2 and c attention's 1/sqrt(d). Each stream is
    the sum of :data:`STREAM_PARTS`: its token's embedding, its position and what the first layer wrote. Returns
    (Q, K), each part's (n, d) rows over the n sequences with a loss position: Q[a] the query's part a,
    K[b] = (c / T) sum_s (b_s - mean b) (part b of x_s); the gradient is sum_{a, b} Q[a]^T K[b] / n.
    ``keep``, if a list, receives per batch (tokens, outputs, gains b_s, pi) for :func:`step2_token_weights`,
    so that it needs no second pass over the population.

    Raises:
        ValueError: not two attention-only layers, W_QK^2 not zero, or a loss position before the last.
    """
    if len(model.layers) != 2 or any(layer.ff.kind != "none" for layer in model.layers):
        raise ValueError(
            "step2_outer needs two attention-only layers, got feed-forward kinds "
            f"{[layer.ff.kind for layer in model.layers]}"
        )
    if model.matrix("W_QK^2").abs().max() > 0:
        raise ValueError("step2_outer needs W_QK^2 = 0 (uniform attention in layer 2)")
    if any(b.loss_mask[:, :-1].any() for b in population):
        raise ValueError("step2_outer needs the loss at the last position only (loss_on='final_recall')")
    Q, K = ({a: [] for a in STREAM_PARTS} for _ in range(2))
    for tokens, target, x, gain, pi in _step2_gains(model, population):
        if keep is not None:
            keep.append((tokens, target, gain, pi))
        w = model.scale / x.shape[1] * (gain - gain.mean(1, keepdim=True))
        token, position = model.W_E[tokens], model.P[: x.shape[1]].expand_as(x)
        for a, X in zip(STREAM_PARTS, (token, position, x - token - position)):
            Q[a].append(X[:, -1])
            K[a].append(torch.einsum("nt,ntd->nd", w, X))
    return {a: torch.cat(v) for a, v in Q.items()}, {a: torch.cat(v) for a, v in K.items()}


def _step2_gains(model: Transformer, population):
    """Per batch of the population (sequences with a loss position): the tokens (n, T), the outputs (n,), the
    streams entering layer 2 (n, T, d), the gains b_s = (e_o - pi)^T W_U W_V^2 x_s (n, T) and pi (n, V)."""
    for b in population:
        keep = torch.as_tensor(b.loss_mask[:, -1])
        tokens, target = torch.as_tensor(b.inputs)[keep], torch.as_tensor(b.targets[:, -1])[keep]
        record = {}
        logits = model(tokens, last_only=True, record=record)  # (n, V)
        x = record["u1"]  # (n, T, d): layer 1 has no feed-forward, so this enters layer 2
        pi = torch.softmax(logits, -1)
        err = F.one_hot(target, logits.shape[-1]).to(x) - pi
        yield tokens, target, x, torch.einsum("nv,ntv->nt", err, model.unembed(x @ model.layers[1].v().T)), pi


KEY_ROLES = ("other", "query's token", "output")  # what a key's token is to its sequence


@torch.no_grad()
def step2_token_weights(
    model: Transformer, population, query: torch.Tensor, gains: list | None = None
) -> dict:
    """Why the keys' token vectors of step 2 add up coherently: each key's weight b_s - mean b split into the
    mean over the population of the keys with its token and role (:data:`KEY_ROLES`: the query's own token, the
    output, another token) and the rest.

    ``m`` (3, V): those means; ``cos`` / ``cos_min``: over the triggers, the cosine between a trigger's row of
    the keys' token part, sum_n sum_s (b_s - mean b) w_E(z_s) over its sequences, and the same with every
    weight replaced by its token's and role's mean (1: the means make the row); ``alpha`` (V,):
    W_U(j)^T W_V^2 w_E(j), how strongly step 1 stored token j; ``pi`` (V,): its mean predicted probability.
    For a key holding another token j, b_s = (e_o - pi)^T W_U W_V^2 x_s has the part -alpha_j pi_j.
    ``query`` as in :func:`key_coherence`, in the population's order. ``gains``: what :func:`step2_outer`
    kept (``keep``) for the same model and population, read instead of a pass over the population.
    """
    _check_query(query, sum(int(b.loss_mask[:, -1].sum()) for b in population))
    if gains is None:
        gains = [
            (tokens, target, gain, pi) for tokens, target, _, gain, pi in _step2_gains(model, population)
        ]
    V = model.W_U.shape[0]
    sums, counts, pi_sum, rows, keys = torch.zeros(3 * V), torch.zeros(3 * V), 0.0, [], []
    for tokens, target, gain, pi in gains:
        w = gain - gain.mean(1, keepdim=True)
        # output wins a tie
        role = torch.where(tokens == target[:, None], 2, (tokens == tokens[:, -1:]).long())
        key = (role * V + tokens).flatten()
        sums.index_add_(0, key, w.flatten())
        counts += torch.bincount(key, minlength=3 * V)
        pi_sum = pi_sum + pi.sum(0)
        rows.append(torch.einsum("nt,ntd->nd", w, model.W_E[tokens]))
        keys.append((role * V + tokens, tokens))
    m = sums / counts.clamp_min(1)
    key, tokens = (torch.cat(k) for k in zip(*keys))
    q = query.T.to(m)
    whole, from_means = q @ torch.cat(rows), q @ torch.einsum("nt,ntd->nd", m[key], model.W_E[tokens])
    cos = F.cosine_similarity(whole, from_means, dim=1)
    alpha = (model.W_U * (model.layers[1].v() @ model.W_E.T).T).sum(1)
    return {
        "m": m.view(3, V),
        "counts": counts.view(3, V),
        "alpha": alpha,
        "pi": pi_sum / len(tokens),
        "cos": cos.mean().item(),
        "cos_min": cos.min().item(),
    }


def step2_probe_parts(exp: ThreeStepExperiment) -> dict:
    """The W_QK^2 probe after step 2 of the slide's order, split by which parts of the query and of the keys
    (:data:`STREAM_PARTS`) each score comes from (:func:`step2_outer`); any embeddings and data. The probe row of
    trigger q scores w_E(q)^T G W_V^1 w_E(k) over every token k, and G is a sum of nine outer products, so each
    row is a sum of nine parts. ``probe``: the whole probe's recall (step 2 scales G, so this is the run's
    ``probe_QK2_all``); ``query`` and ``key``: for each part of the query (keys whole) or of the keys (query
    whole), the recall of its scores alone and their ``spread`` (the rows' standard deviation over keys, mean
    over rows); ``without key``: the recall of the whole probe less one part of the keys; ``key tokens``: how the
    keys' token vectors of the sequences add up in each trigger's row (:func:`key_coherence`).

    Raises:
        ValueError: an order other than the slide's, or a loss other than ``final_recall``.
    """
    if exp.order != STEP_ORDER or exp.loss_on != "final_recall":
        raise ValueError(
            f"step2_probe_parts needs the slide's order {STEP_ORDER} and loss_on='final_recall', not "
            f"{exp.order} and {exp.loss_on!r}"
        )
    model, task, population = _after_first_step(exp)
    kept = []
    Q, K = step2_outer(model, population, keep=kept)
    S = {}
    with torch.no_grad():
        for a in STREAM_PARTS:  # each part of G in W_QK^2 in turn, read by the probe itself
            for b in STREAM_PARTS:
                model.layers[1].W_QK.copy_(Q[a].T @ K[b] / len(Q[a]))
                S[a, b] = memory_scores(model, task.triggers, task.n)["W_QK^2"]
    whole = sum(S.values())

    def read(M: torch.Tensor) -> dict[str, float]:
        return {"probe": _recall(M), "spread": M.std(1).mean().item()}

    key = {b: sum(S[a, b] for a in STREAM_PARTS) for b in STREAM_PARTS}
    with torch.no_grad():
        # (n, K): its trigger
        query = (Q["token"][:, None, :] == model.W_E[list(task.triggers)][None]).all(-1)
    weights = step2_token_weights(model, population, query, gains=kept)
    n = task.n  # ordinary tokens: their frequencies
    unigram = torch.as_tensor(task.stats.unigram, dtype=weights["m"].dtype)

    def corr(a: torch.Tensor, b: torch.Tensor) -> float:  # nan when one is constant (uniform data)
        return (
            float(np.corrcoef(a[:n].numpy(), b[:n].numpy())[0, 1])
            if a[:n].std() > 0 and b[:n].std() > 0
            else float("nan")
        )

    return {
        "probe": _recall(whole),
        "query": {a: read(sum(S[a, b] for b in STREAM_PARTS)) for a in STREAM_PARTS},
        "key": {b: read(M) for b, M in key.items()},
        "without key": {b: _recall(whole - M) for b, M in key.items()},
        "key tokens": key_coherence(K["token"], query),
        "token means": {
            "cos": weights["cos"],
            "cos_min": weights["cos_min"],
            "m_unigram": corr(weights["m"][0], unigram),
            "m_predicted": corr(weights["m"][0], -weights["alpha"] * weights["pi"]),
            "m_query": float(weights["m"][1][list(task.triggers)].mean()),
            "m_other": float(weights["m"][0][list(task.triggers)].mean()),
            "alpha_unigram": corr(weights["alpha"], unigram),
            "pi_unigram": corr(weights["pi"], unigram),
        },
    }


def _check_query(query: torch.Tensor, n: int) -> None:
    if query.ndim != 2 or len(query) != n or not (query.sum(1) == 1).all():
        raise ValueError(
            f"the query needs exactly one trigger per sequence ({n} sequences); got {query.sum(-1)}"
        )


def key_coherence(K: torch.Tensor, query: torch.Tensor) -> dict[str, float]:
    """How the sequences' key vectors ``K`` (n, d) add up in each trigger's row of step 2's gradient, given
    ``query`` (n, K), True where sequence n's query is trigger j (one per row). For trigger j, C_j is the sum of
    its sequences' rows. ``coherence``: the mean over triggers of ||C_j||^2 / sum ||K_n||^2, about 1 when the
    sequences' vectors add like independent ones of mean zero, up to the number of sequences when they are alike;
    ``shared``: the mean over triggers of the share of ||C_j||^2 along sum_j C_j, the direction all rows share (1:
    every trigger's row is the same vector, up to scale); ``sequences``: the fewest sequences of a trigger.

    >>> same = key_coherence(torch.ones(4, 3), torch.tensor([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=torch.bool))
    >>> round(same["coherence"], 6), round(same["shared"], 6)
    (2.0, 1.0)

    Raises:
        ValueError: a sequence whose query is not exactly one trigger.
    """
    _check_query(query, len(K))
    with torch.no_grad():
        q = query.to(K)
        C = q.T @ K  # (K, d)
        own = q.T @ K.pow(2).sum(1)  # (K,): sum of ||K_n||^2 per trigger
        shared = C.sum(0) / C.sum(0).norm()
        return {
            "coherence": (C.pow(2).sum(1) / own).mean().item(),
            "shared": ((C @ shared) ** 2 / C.pow(2).sum(1)).mean().item(),
            "sequences": q.sum(0).min().item(),
        }


GAUSSIAN_RUNS = (
    "slide order, Gaussian",
    "slide order, Gaussian, Shakespeare",
    "slide order, Gaussian, Shakespeare i.i.d.",
)  # the chapter's runs with random embeddings


def step2_probe_summary(parts: dict[str, dict]) -> report.Summary:
    """The claim values of :func:`step2_probe_parts` over the chapter's :data:`GAUSSIAN_RUNS` (keyed by run name)."""
    missing = set(GAUSSIAN_RUNS) - set(parts)
    if missing:
        raise ValueError(
            f"step2_probe_summary needs a result for each of {GAUSSIAN_RUNS}; missing {sorted(missing)}"
        )
    uni, iid = parts[GAUSSIAN_RUNS[0]], parts[GAUSSIAN_RUNS[2]]

    def ratio(r: dict, side: str, part: str, over: str) -> float:
        return r[side][part]["spread"] / r[side][over]["spread"]

    return report.Summary(
        {
            "g2p_first_layer_min": (
                min(parts[n]["key"]["first layer"]["probe"] for n in GAUSSIAN_RUNS),
                "Gaussian runs: the probe's part from the keys' first-layer output (the remapped "
                "tokens) alone, smallest recall over the three runs",
            ),
            "g2p_context_max": (
                max(ratio(parts[n], "query", "first layer", "token") for n in GAUSSIAN_RUNS),
                "Gaussian runs: spread of the part from what the first layer adds to the query over "
                "that of the part from the query's token, largest over the three runs",
            ),
            "g2p_token_iid": (
                ratio(iid, "key", "token", "first layer"),
                "Shakespeare's frequencies i.i.d.: spread "
                "of the part from the keys' token embeddings over that of their first-layer output",
            ),
            "g2p_position_iid": (
                ratio(iid, "key", "position", "first layer"),
                "the same for the keys' positions",
            ),
            "g2p_token_uniform": (
                ratio(uni, "key", "token", "first layer"),
                "uniform data: keys' tokens over their first-layer output",
            ),
            "g2p_position_uniform": (
                ratio(uni, "key", "position", "first layer"),
                "uniform data: keys' positions over their first-layer output",
            ),
            "g2p_without_token_iid": (
                iid["without key"]["token"],
                "Shakespeare's frequencies i.i.d.: recall of the whole probe less the keys' token part",
            ),
            "g2p_without_position_iid": (
                iid["without key"]["position"],
                "the same less the keys' position part",
            ),
            "g2p_coherence_uniform": (
                uni["key tokens"]["coherence"],
                "uniform data: how coherently the keys' token "
                "vectors of one trigger's sequences add (1: as independent ones of mean zero)",
            ),
            "g2p_coherence_iid": (
                iid["key tokens"]["coherence"],
                "Shakespeare's frequencies i.i.d.: the same",
            ),
            "g2p_shared_uniform": (
                uni["key tokens"]["shared"],
                "uniform data: share of each trigger's keys' token "
                "part along the direction common to all triggers",
            ),
            "g2p_shared_iid": (iid["key tokens"]["shared"], "Shakespeare's frequencies i.i.d.: the same"),
            "g2p_sequences_min": (
                min(parts[n]["key tokens"]["sequences"] for n in GAUSSIAN_RUNS),
                "the fewest sequences in one trigger's row, over the three runs",
            ),
            "g2p_coherence_ratio": (
                iid["key tokens"]["coherence"] / uni["key tokens"]["coherence"],
                "coherence of the keys' token vectors, Shakespeare's frequencies i.i.d. over uniform",
            ),
            "g2p_means_cos_iid": (
                iid["token means"]["cos_min"],
                "Shakespeare's frequencies i.i.d.: cosine between a "
                "trigger's keys' token part and the same with each key's weight replaced by its "
                "token's mean, smallest over triggers",
            ),
            "g2p_means_cos_uniform": (
                uni["token means"]["cos"],
                "uniform data: the same, mean over triggers",
            ),
            "g2p_means_cos_iid_mean": (
                iid["token means"]["cos"],
                "Shakespeare's frequencies i.i.d.: the same, mean",
            ),
            "g2p_weight_unigram_iid": (
                iid["token means"]["m_unigram"],
                "Shakespeare's frequencies i.i.d.: correlation "
                "over tokens of the mean weight of keys holding the token (not as the query's token "
                "or the output) with its frequency",
            ),
            "g2p_weight_predicted_iid": (iid["token means"]["m_predicted"], "the same with -alpha_j pi_j"),
            "g2p_weight_predicted_uniform": (uni["token means"]["m_predicted"], "uniform data: the same"),
            "g2p_weight_query_iid": (
                iid["token means"]["m_query"],
                "Shakespeare's frequencies i.i.d.: mean weight of "
                "keys holding the query's own trigger, mean over the triggers",
            ),
            "g2p_weight_trigger_other_iid": (
                iid["token means"]["m_other"],
                "the same run: mean weight of keys holding a trigger character that is not the query",
            ),
            "g2p_alpha_unigram_iid": (
                iid["token means"]["alpha_unigram"],
                "the same run: correlation of step 1's memory strength alpha_j with the frequency",
            ),
            "g2p_pi_unigram_iid": (
                iid["token means"]["pi_unigram"],
                "the same run: correlation of the mean predicted probability pi_j with the frequency",
            ),
        }
    )


def step2_probe_table(parts: dict[str, dict]) -> str:
    """Markdown: for each :func:`step2_probe_parts` result (keyed by run name), the whole probe's recall and, for
    each part of the query and of the keys, the recall of that part alone and its spread."""
    head = ["scores from"] + [f"{c} ({n})" for n in parts for c in ("recall", "spread")]
    rows = [["the whole probe", *(x for r in parts.values() for x in (r["probe"], "–"))]]
    rows += [
        [
            f"{side}: {part}",
            *(x for r in parts.values() for x in (r[side][part]["probe"], r[side][part]["spread"])),
        ]
        for side in ("query", "key")
        for part in STREAM_PARTS
    ]
    return report.markdown_table(head, rows, digits=3)


# how a first-layer logit reaches the loss: through layer 2's keys or its values
STEP3_PATHS = ("key", "value")


def step3_row_paths(exp: ThreeStepExperiment, row: int = 1, factors=(1.0, 2.0)) -> dict:
    """Why the W_QK^1 probe misses a row after step 3: the (row, row - 1) entry (the previous position) of step 3's
    negative population gradient on the first layer's attention logits, split by path and by sequence.

    Step 1 and step 2 are taken as in :func:`three_steps` (step 2 line-searched: ``exp`` must have no
    ``second_step_sizes``); then W_QK^2 is set to each of ``factors`` times step 2 and the gradient is read. At
    W_QK^1 = 0, entry (t, s) of the gradient's P x P block is c |p|^4 times the mean over the loss sequences of
    the logit gradient computed here. A logit of row t < T - 1 reaches the loss only through position t's stream
    as a key of layer 2 (``key``) and as its value (``value``). The entries of a row sum to zero, so in row 1,
    whose keys are positions 0 and 1, the probe recalls exactly when this entry is positive. ``trigger``: the same
    parts from the sequences whose token at ``row - 1`` is the final trigger (so that position ``row`` holds its
    output); ``trigger_share``: their share of the loss sequences. Values are sums over the loss sequences
    divided by their number. ``ov_remapped``: after step 1, the mean score W_U(k)^T W_V^2 x of a token's own
    unembedding for x its remapped token W_V^1 w_E(k), over the same for x = w_E(k).

    Raises:
        ValueError: ``row`` outside [1, T - 2], an empty or non-positive ``factors``, a loss other than
            ``final_recall``, an order other than the slide's, or a run whose step 2 size is swept.
    """
    if exp.order != STEP_ORDER or exp.loss_on != "final_recall" or exp.second_step_sizes:
        raise ValueError(
            f"step3_row_paths needs the slide's order {STEP_ORDER}, loss_on='final_recall' and a "
            f"line-searched step 2, not {exp.order}, {exp.loss_on!r} and second_step_sizes="
            f"{exp.second_step_sizes}"
        )
    check_int("row", row, low=1, high=exp.seq_len - 2)
    factors = tuple(float(f) for f in factors)
    if not factors or min(factors) <= 0:
        raise ValueError(f"factors={factors} must be a non-empty list of numbers > 0")
    model, task, population, line = _step_setup(exp)
    _gradient_step(model, STEP_ORDER[0], population, line, exp.etas)
    # step 1's W_V^2 read on the tokens and on the remapped tokens: its own-token recall
    with torch.no_grad():
        n_tok = task.n
        tokens = model.W_E[:n_tok]
        own = {
            name: torch.diagonal(model.W_U[:n_tok] @ model.matrix(STEP_ORDER[0]) @ X.T).mean().item()
            for name, X in (("token", tokens), ("remapped", tokens @ model.layers[0].v().T))
        }
    _, size = _gradient_step(model, STEP_ORDER[1], population, line, exp.etas)
    step2 = model.matrix(STEP_ORDER[1]).detach().clone()
    layer, T = model.layers[1], exp.seq_len
    out = {
        "row": row,
        "step2_size": size,
        "factors": list(factors),
        "trigger_share": 0.0,
        "ov_remapped": own["remapped"] / own["token"],
        **{p: [] for p in STEP3_PATHS},
        "trigger": {p: [] for p in STEP3_PATHS},
    }
    for f in factors:
        sums = {p: 0.0 for p in STEP3_PATHS}
        case = {p: 0.0 for p in STEP3_PATHS}
        n = n_case = 0
        with torch.no_grad():
            model.matrix(STEP_ORDER[1]).copy_(f * step2)
        for b in population:
            keep = torch.as_tensor(b.loss_mask[:, -1])
            target = torch.as_tensor(b.targets[:, -1])[keep]
            bias = torch.zeros(len(b.inputs), T, T, requires_grad=True)
            u = model.attend(0, model.embed(torch.as_tensor(b.inputs)), score_bias=bias)[keep]
            query = u[:, -1:].detach()

            def loss(keys, values):
                attn = torch.softmax((query @ layer.qk()) @ keys.transpose(1, 2) * model.scale, dim=-1)
                return F.cross_entropy(
                    model.unembed((query + attn @ (values @ layer.v().T))[:, 0]), target, reduction="sum"
                )

            grads = dict(
                zip(
                    STEP3_PATHS,
                    torch.autograd.grad(loss(u, u.detach()), bias, retain_graph=True)
                    + torch.autograd.grad(loss(u.detach(), u), bias),
                )
            )
            first = torch.as_tensor(b.inputs[:, row - 1] == b.inputs[:, -1])[keep]
            for p, g in grads.items():
                entry = -g[keep][:, row, row - 1]
                sums[p] += entry.sum().item()
                case[p] += entry[first].sum().item()
            n, n_case = n + int(keep.sum()), n_case + int(first.sum())
        for p in STEP3_PATHS:
            out[p].append(sums[p] / n)
            out["trigger"][p].append(case[p] / n)
        out["trigger_share"] = n_case / n
    return out


def step3_row_summary(paths: dict) -> report.Summary:
    """The claim values of :func:`step3_row_paths` (factors 1 and 2 needed): ids ``ih.step3_row1_*``."""
    f = paths["factors"]
    if 1.0 not in f or 2.0 not in f:
        raise ValueError(f"step3_row_summary needs factors 1 and 2 (the run's step 2 and twice it), got {f}")
    one, two = f.index(1.0), f.index(2.0)
    key, value = paths["key"][one], paths["value"][one]
    return report.Summary(
        {
            "s3r_row": (paths["row"], "the probe row read"),
            "s3r_size": (paths["step2_size"], "step 2's size, line-searched"),
            "s3r_key": (key, "previous-position entry of the step-3 logit gradient, through layer 2's keys"),
            "s3r_value": (value, "the same, through layer 2's values"),
            "s3r_total": (key + value, "the whole entry (the probe recalls the row when > 0)"),
            "s3r_value_over_key": (
                -value / key,
                "minus the value path over the key path (> 1: the values win)",
            ),
            "s3r_trigger_share": (
                paths["trigger_share"],
                "share of the loss sequences whose token before the row's position is the final trigger",
            ),
            "s3r_value_trigger": (
                paths["trigger"]["value"][one] / value,
                "share of the value path that comes from those sequences",
            ),
            "s3r_key_trigger": (
                paths["trigger"]["key"][one] / key,
                "share of the key path from those sequences",
            ),
            "s3r_total_double": (
                paths["key"][two] + paths["value"][two],
                "the whole entry with step 2 twice as large",
            ),
            "s3r_key_double": (
                paths["key"][two] / key,
                "the key path with step 2 twice as large, over the run's",
            ),
            "s3r_ov_remapped": (
                paths["ov_remapped"],
                "step 1's W_V^2: own-unembedding score of a remapped token over that of the token itself",
            ),
        }
    )


def _compare_scales(
    model: Transformer, task: RecallTask, evaluate: Evaluator, scales, mixes=None
) -> list[dict]:
    """The in-context accuracy, at each of ``scales``, of each mix of ``mixes`` (default :data:`MIXES`): the memories it
    names learned and rescaled (:func:`rescale_memories`), the others :func:`construct`'s, on the same
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
    """The chapter's runs: the slide's order in the idealised setting, the reverse order, the chapter's random
    embeddings with uniform and with Shakespeare data, and two controls that separate the Shakespeare data from
    the embeddings: orthonormal embeddings with Shakespeare data, and random embeddings with Shakespeare's
    character frequencies drawn independently (in these two, step 2 is line-searched: the W_QK^2 probe after
    it does not depend on its size, since the step starts from zero); and the orthonormal Shakespeare run
    again with :data:`POPULATION_FACTOR` times the population."""
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


def three_step_summary(results: dict[str, dict]) -> report.Summary:
    """The claim values of the three-step section (ids ``ih.three_steps_*``)."""
    main, rev = results["slide order, orthonormal"], results["reverse order, orthonormal"]["rows"]
    gauss, text = (
        results["slide order, Gaussian"]["rows"],
        results["slide order, Gaussian, Shakespeare"]["rows"],
    )
    rows = main["rows"]
    after = {r["matrix"]: r for r in rows[1:]}
    sizes = [s["second_size"] for s in main["sweep"]]
    qk1 = [s["third"]["probe_QK1"] for s in main["sweep"]]
    return report.Summary(
        {
            "ov_after_step1": (
                after["W_V^2"]["probe_OV2"],
                "slide order: W_OV^2 probe after step 1 (W_OV^2)",
            ),
            "qk2_after_step2": (
                after["W_QK^2"]["probe_QK2_all"],
                "W_QK^2 probe (N-way) after step 2 (W_QK^2)",
            ),
            "qk1_after_step3": (after["W_QK^1"]["probe_QK1"], "W_QK^1 probe after step 3 (W_QK^1)"),
            "min_after_three": (
                min(rows[-1][p] for p in STEP_PROBE.values()),
                "slide order: the smallest of the three probes after the three steps",
            ),
            "second_size": (after["W_QK^2"]["eta"], "the size of step 2 chosen by the loss after step 3"),
            "qk1_smallest_size": (
                qk1[int(np.argmin(sizes))],
                "W_QK^1 probe after step 3 with the smallest step 2",
            ),
            "qk1_largest_size": (
                qk1[int(np.argmax(sizes))],
                "W_QK^1 probe after step 3 with the largest step 2",
            ),
            "acc_init": (rows[0]["acc"], "slide order: in-context accuracy at zero init"),
            "acc_after_three": (rows[-1]["acc"], "the same after the three steps"),
            "reverse_grad_qk": (
                max(r["grad_norm"] for r in rev[1:3]),
                "reverse order: the larger gradient norm of its steps 1 and 2 (W_QK^1, W_QK^2)",
            ),
            "reverse_min_after_three": (
                min(rev[-1][p] for p in STEP_PROBE.values()),
                "reverse order: the smallest probe after the three steps",
            ),
            "gauss_ov": (gauss[1]["probe_OV2"], "Gaussian embeddings: W_OV^2 probe after step 1"),
            "gauss_qk2": (gauss[2]["probe_QK2_all"], "Gaussian embeddings: W_QK^2 probe after step 2"),
            "gauss_qk1": (gauss[3]["probe_QK1"], "Gaussian embeddings: W_QK^1 probe after step 3"),
            "text_ov": (text[1]["probe_OV2"], "Gaussian, Shakespeare bigram: W_OV^2 probe after step 1"),
            "text_qk2": (text[2]["probe_QK2_all"], "the same: W_QK^2 probe after step 2"),
            "text_qk1": (text[3]["probe_QK1"], "the same: W_QK^1 probe after step 3"),
            **_scale_summary(main),
            "text_ortho_qk2": (
                results["slide order, orthonormal, Shakespeare"]["rows"][2]["probe_QK2_all"],
                "orthonormal embeddings, Shakespeare bigram: W_QK^2 probe after step 2",
            ),
            "iid_qk2": (
                results["slide order, Gaussian, Shakespeare i.i.d."]["rows"][2]["probe_QK2_all"],
                "Gaussian, Shakespeare's frequencies drawn independently: W_QK^2 probe after step 2",
            ),
            "text_ortho_qk1": (
                results["slide order, orthonormal, Shakespeare"]["rows"][3]["probe_QK1"],
                "orthonormal embeddings, Shakespeare bigram: W_QK^1 probe after step 3",
            ),
            "population_factor": (POPULATION_FACTOR, "the population-size control's factor"),
            "text_ortho_qk1_big": (
                results[f"slide order, orthonormal, Shakespeare, {POPULATION_FACTOR}x population"]["rows"][3][
                    "probe_QK1"
                ],
                f"the same with {POPULATION_FACTOR}x the population: W_QK^1 probe after step 3",
            ),
            "text_ortho_step2_size": (
                results["slide order, orthonormal, Shakespeare"]["rows"][2]["eta"],
                "orthonormal embeddings, Shakespeare bigram: step 2's size (line-searched)",
            ),
            "text_ortho_step2_size_big": (
                results[f"slide order, orthonormal, Shakespeare, {POPULATION_FACTOR}x population"]["rows"][2][
                    "eta"
                ],
                f"the same with {POPULATION_FACTOR}x the population",
            ),
            "text_ortho_row1_recalled": (
                float(1 not in dict(qk1_misses(results["slide order, orthonormal, Shakespeare"]))),
                "orthonormal embeddings, Shakespeare bigram: 1 if the W_QK^1 probe recalls row 1 "
                "after step 3",
            ),
            "seconds": (sum(r["seconds"] for r in results.values()), f"time of the {len(results)} runs (s)"),
        }
    )


def _scale_summary(res: dict) -> dict:
    """The rescaling numbers of one run (:func:`_compare_scales`, :func:`block_shares`)."""
    scales = [s["scale"] for s in res["scales"]]

    def best(mix: str) -> float:
        return float(np.nanmax([s[mix] for s in res["scales"]]))

    def at_best(mix: str) -> float:
        return scales[int(np.nanargmax([s[mix] for s in res["scales"]]))]

    shares = res["blocks"]
    return {
        "rescaled_best": (
            best("learned"),
            "the three learned memories rescaled as a whole: best in-context accuracy over the scales",
        ),
        "rescaled_best_scale": (at_best("learned"), "the scale at which it is reached"),
        "constructed_best": (
            best("constructed"),
            "the hand-written memories: best accuracy over the same scales",
        ),
        **{
            f"single_{key}_best": (
                best(f"learned {name} only"),
                f"learned {name} alone (the other two hand-written): best accuracy over the scales",
            )
            for key, name in (("ov", "W_V^2"), ("qk2", "W_QK^2"), ("qk1", "W_QK^1"))
        },
        "blocks_best": (
            best("learned, own blocks"),
            "the learned memories projected on their own blocks, then "
            "rescaled: best accuracy over the scales",
        ),
        "blocks_best_scale": (at_best("learned, own blocks"), "the scale at which it is reached"),
        "largest_scale": (max(scales), "the largest scale tried"),
        **{
            f"{key}_own_share": (
                shares[name][" x ".join(OWN_BLOCK[name])],
                f"share of learned {name}'s squared norm in its own block",
            )
            for key, name in (("ov", "W_V^2"), ("qk2", "W_QK^2"), ("qk1", "W_QK^1"))
        },
    }


def scale_table(res: dict) -> str:
    """Markdown: the in-context accuracy of each mix of :data:`MIXES` at each scale, for one run."""
    head = ["scale", *(m.replace("W_V^2", "W_OV^2") for m in MIXES)]
    return report.markdown_table(
        head, [[s["scale"], *(s[m] for m in MIXES)] for s in res["scales"]], digits=3
    )


def block_table(res: dict) -> str:
    """Markdown: the share of each learned memory's squared norm in each block (rows: the memory and its query
    or output subspace; columns: its key or input subspace); the memory's own block in bold."""
    names = {"W_V^2": "W_OV^2", "W_QK^2": "W_QK^2", "W_QK^1": "W_QK^1"}
    rows = []
    for name, shares in res["blocks"].items():
        for left in dict.fromkeys(k.split(" x ")[0] for k in shares):
            cells = []
            for right in ("E", "P", "R"):
                v = report.format_value(shares[f"{left} x {right}"], 2)
                cells.append(f"**{v}**" if (left, right) == OWN_BLOCK[name] else v)
            rows.append([names[name], left, *cells])
    return report.markdown_table(
        ["memory", "query / output side", "E (tokens)", "P (positions)", "R (remapped tokens)"], rows
    )


def qk2_rank_table(results: dict[str, dict], runs: dict[str, ThreeStepExperiment]) -> str:
    """Markdown: for each trigger of the named runs (which share their triggers), its frequency and, per run,
    the rank of its own remapped key in its W_QK^2 probe row after step 2 (1: recalled) and the winning key."""
    names = list(results)
    stats = runs[names[0]].task().stats
    triggers = runs[names[0]].task().triggers
    if any(runs[n].task().triggers != triggers for n in names):
        raise ValueError(f"the runs {names} do not share their triggers")
    second = {n: next(r for r in results[n]["rows"] if r["matrix"] == "W_QK^2") for n in names}
    rows = []
    for i, q in enumerate(triggers):
        cells = []
        for n in names:
            rank, win = second[n]["qk2_rank"][i], second[n]["qk2_winner"][i]
            cells.append("1" if rank == 1 else f"{rank} ({stats.itos[win]!r} wins)")
        rows.append([repr(stats.itos[q]), float(stats.unigram[q]), *cells])
    return report.markdown_table(["trigger", "frequency", *names], rows, digits=2)
