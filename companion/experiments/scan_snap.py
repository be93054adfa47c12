"""Scan and Snap (Tian, Wang, Chen, Du, NeurIPS 2023): the reparameterised one-layer model and its training.

Model (Sec. 3.2). Two M x M matrices: Z holds the attention logits, Z[m, l]
the score of contextual token l for the query m = x_T (the last token, masked
out of its own attention, as in the public code's ``Model2``), and Y the
decoder, logits = Y^T f over all M tokens. For a sequence with contextual
tokens x_1..x_{T-1} and last token m,

    X^T b = sum_t softmax_t(Z[m, x_t]) e_{x_t},   f = X^T b / ||X^T b||_2

(``normalize=False`` leaves out the l2 normalisation; ``residual=True`` adds
e_m before it, the public code's residual). There is no positional encoding,
so X^T b depends on the sequence only through its token counts:
:func:`forward` computes it from the counts, :func:`forward_positions` as the
literal sum over positions (a test holds the two equal). Z[m, l] is the paper's
z_{ml} (its Eq. (4) updates "row m = x_T"; the public code's ``K2`` has the same
orientation) and Y the transpose of ``K1.weight``.

Training (:func:`run`) follows the public code: Y and Z with their own
learning rates eta_Y and eta_Z, SGD with momentum (PyTorch's rule) or Adam,
fresh batches each step, zero initialisation (the theory's Y(0) = Z(0) = 0) or
the default ``nn.Linear`` initialisation U(-1/sqrt(M), 1/sqrt(M)). Many runs
train at once: every (seed, eta_Z, eta_Y / eta_Z) combination is one replica
of a batched computation; the replicas of one seed share its batches and its
initialisation.

The population attention of Eq. (5), c_{l|n} proportional to P(l | n)
exp(z_{psi(n) l}), is :func:`population_c`; :func:`distinct_entropy` is the
entropy of c_n restricted to the distinct tokens of class n and renormalised.

>>> from companion.data.seqclass import synthetic
>>> sc = synthetic(2, 1)
>>> Y = torch.zeros(1, sc.vocab_size, sc.vocab_size); Z = torch.zeros_like(Y)
>>> cls, counts = sc.sample_counts(np.random.default_rng(0), 4, 16)
>>> logits = forward(Y, Z, torch.as_tensor(sc.last[cls])[None], torch.as_tensor(counts)[None].float())
>>> tuple(logits.shape), round(float(distinct_entropy(population_c(Z, sc), sc)[0, 0]), 3)
((1, 4, 34), 2.151)
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from companion import cache, config, report, train
from companion.config import check_choice, check_float, check_int
from companion.data.seqclass import CountTask, SeqClasses, synthetic
from companion.data.streams import TrainingStream

OPTIMIZERS = ("sgd", "adam")
INITS = ("zero", "random")


# --- the model -------------------------------------------------------------------------------------------


def mix(z_rows: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """X^T b from counts: ``counts * exp(z)`` normalised over the tokens present (any leading dims)."""
    present = counts > 0
    z = z_rows.masked_fill(~present, -math.inf)
    w = torch.softmax(z, dim=-1) * counts  # softmax over present tokens, times their multiplicity
    return w / w.sum(-1, keepdim=True)


def _readout(mix: torch.Tensor, last: torch.Tensor, M: int, normalize: bool, residual: bool) -> torch.Tensor:
    if residual:
        mix = mix + F.one_hot(last, M).to(mix.dtype)
    return mix / mix.norm(dim=-1, keepdim=True) if normalize else mix


def forward(
    Y: torch.Tensor,
    Z: torch.Tensor,
    last: torch.Tensor,
    counts: torch.Tensor,
    normalize: bool = True,
    residual: bool = False,
) -> torch.Tensor:
    """Logits (R, B, M) of R replicas: ``Y``, ``Z`` (R, M, M); ``last`` (R, B) the last tokens; ``counts``
    (R, B, M) the contextual token counts of each sequence."""
    R, M, _ = Z.shape
    z_rows = Z[torch.arange(R, device=Z.device)[:, None], last]  # (R, B, M): row psi(n) of each replica's Z
    f = _readout(mix(z_rows, counts), last, M, normalize, residual)
    return torch.bmm(f, Y)


def forward_positions(
    Y: torch.Tensor, Z: torch.Tensor, tokens: torch.Tensor, normalize: bool = True, residual: bool = False
) -> torch.Tensor:
    """The same logits (B, M) for one replica (``Y``, ``Z`` of size (M, M)) from the token sequences (B, T),
    as the literal softmax over positions 1..T-1 with the last token as the query (the reference)."""
    M = Z.shape[0]
    ctx, last = tokens[:, :-1], tokens[:, -1]
    scores = Z[last[:, None], ctx]  # (B, T-1)
    b = torch.softmax(scores, dim=-1)
    mix = torch.zeros(len(tokens), M, dtype=Z.dtype).scatter_add_(1, ctx, b)
    return _readout(mix, last, M, normalize, residual) @ Y


def population_c(Z: torch.Tensor, classes: SeqClasses) -> torch.Tensor:
    """c_n of Eq. (5) for every replica and class: (R, K, M), c_{l|n} proportional to P(l|n) exp(Z[psi(n), l])."""
    P = torch.as_tensor(classes.probs, dtype=Z.dtype, device=Z.device)
    return mix(Z[:, torch.as_tensor(classes.last, device=Z.device)], P.expand(Z.shape[0], -1, -1))


def distinct_entropy(c: torch.Tensor | np.ndarray, classes: SeqClasses) -> np.ndarray:
    """Entropy (nats) of c_n restricted to class n's distinct tokens and renormalised: (..., K) from c of
    shape (..., K, M)."""
    c = torch.as_tensor(c, dtype=torch.float64)
    out = []
    for n in range(classes.n_classes):
        p = c[..., n, torch.as_tensor(classes.distinct_tokens(n))]
        p = p / p.sum(-1, keepdim=True)
        out.append(-(p * torch.log(p.clamp_min(1e-300))).sum(-1))
    return torch.stack(out, -1).numpy()


def population_loss(
    Y: torch.Tensor, Z: torch.Tensor, classes: SeqClasses, normalize: bool = True, residual: bool = False
) -> torch.Tensor:
    """The T -> infinity loss (Lemma 2): each class once, X^T b replaced by c_n; mean over classes, (R,)."""
    R = Y.shape[0]
    P = torch.as_tensor(classes.probs, dtype=Y.dtype, device=Y.device).expand(R, -1, -1)
    last = torch.as_tensor(classes.last, device=Y.device).expand(R, -1)
    logits = forward(Y, Z, last, P, normalize, residual)
    target = torch.as_tensor(classes.next_token, device=Y.device).expand(R, -1)
    return F.cross_entropy(logits.transpose(1, 2), target, reduction="none").mean(1)


# --- optimisers on stacked replicas (PyTorch's update rules, one learning rate per replica) ----------------


class _Optim:
    def __init__(self, kind: str, params: list[torch.Tensor], lrs: list[torch.Tensor], momentum: float):
        self.kind, self.params, self.lrs, self.mu = kind, params, lrs, momentum
        self.state = [dict() for _ in params]
        self.t = 0

    def zero_grad(self, set_to_none: bool = True):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        self.t += 1
        for p, lr, st in zip(self.params, self.lrs, self.state):
            g = p.grad
            if self.kind == "sgd":
                if self.mu:
                    st["buf"] = g.clone() if "buf" not in st else st["buf"].mul_(self.mu).add_(g)
                    g = st["buf"]
                p.sub_(lr * g)
            else:
                m = st.setdefault("m", torch.zeros_like(p)).mul_(0.9).add_(g, alpha=0.1)
                v = st.setdefault("v", torch.zeros_like(p)).mul_(0.999).addcmul_(g, g, value=0.001)
                denom = (v / (1 - 0.999**self.t)).sqrt_().add_(1e-8)
                p.sub_(lr / (1 - 0.9**self.t) * m / denom)
            p.grad = None


# --- the experiment ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SynExperiment(config.Profiled):
    """One batched training computation on the sequence classes ``synthetic(**classes)``: every (seed, eta_Z,
    eta_Y / eta_Z) combination of ``seeds`` x ``lr_z`` x ``lr_ratio`` is a replica. ``record_every`` > 0 keeps
    the population attention c_n every that many steps (0: the first and the last only).

    Raises:
        ValueError: a negative or zero learning rate, an unknown optimiser or initialisation, sizes below 1.
    """

    profile: str = "quick"
    classes: dict = field(default_factory=lambda: {"num_last": 2, "num_next_per_last": 1})
    seq_len: int = 128
    batch: int = 128
    steps: int = 100
    optimizer: str = "sgd"
    momentum: float = 0.9
    lr_z: tuple = (1.0,)
    lr_ratio: tuple = (1.0,)
    seeds: tuple = (2,)
    init: str = "zero"
    normalize: bool = True
    residual: bool = False
    record_every: int = 2

    def __post_init__(self):
        config.get_profile(self.profile)
        check_int("seq_len (T)", self.seq_len, low=2)
        check_int("batch", self.batch, low=1)
        check_int("steps", self.steps, low=1)
        check_int("record_every", self.record_every, low=0)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("init", self.init, INITS)
        check_float("momentum", self.momentum, low=0, high=1, high_open=True)
        for name in ("lr_z", "lr_ratio", "seeds"):
            if not isinstance(getattr(self, name), tuple) or not getattr(self, name):
                raise ValueError(f"{name} must be a non-empty tuple, got {getattr(self, name)!r}")
        for v in self.lr_z:
            check_float("lr_z (eta_Z)", v, low=0, low_open=True)
        for v in self.lr_ratio:
            check_float("lr_ratio (eta_Y / eta_Z)", v, low=0, low_open=True)
        for s in self.seeds:
            check_int("seed", s, low=0)
        self.seq_classes()  # the class specification checked now

    def seq_classes(self) -> SeqClasses:
        return synthetic(**self.classes)

    def replicas(self) -> list[dict]:
        """One dict per replica: seed, eta_Z, eta_Y / eta_Z and eta_Y, in the order of the result arrays."""
        return [
            {"seed": s, "lr_z": z, "ratio": r, "lr_y": z * r}
            for s, z, r in itertools.product(self.seeds, self.lr_z, self.lr_ratio)
        ]


MODULES = ("companion.experiments.scan_snap",)


def run(exp: SynExperiment, *, device=None, progress: bool = True, use_cache: bool = True) -> dict:
    """Train (or load) every replica of ``exp``. Returns ``loss`` (R, steps): each step's batch loss;
    ``c`` (n_rec, R, K, M): the population attention c_n at the steps ``c_step``; ``entropy`` (R, K): the
    distinct-token entropy at the end; ``row_sum_drift`` (R,): the largest change of a row sum of Y or Z;
    ``replicas``, ``seconds`` and ``device``."""
    return cache.load_or_compute(
        "scan_snap", exp, lambda: _train(exp, progress, device), MODULES, use_cache=use_cache
    )


def _init(exp: SynExperiment, M: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    if exp.init == "zero":
        return torch.zeros(M, M), torch.zeros(M, M)
    g = torch.Generator().manual_seed(int(config.seed_streams(seed, ["init"])["init"].generate_state(1)[0]))
    bound = 1 / math.sqrt(M)
    return tuple((torch.rand(M, M, generator=g) * 2 - 1) * bound for _ in range(2))


def _train(exp: SynExperiment, progress: bool, device=None) -> dict:
    device = config.get_device(device)
    sc = exp.seq_classes()
    M = sc.vocab_size
    reps = exp.replicas()
    seed_of = torch.as_tensor([exp.seeds.index(r["seed"]) for r in reps])
    inits = [_init(exp, M, s) for s in exp.seeds]  # drawn on the CPU: the same start on every device
    Y = torch.stack([inits[i][0] for i in seed_of]).to(device).requires_grad_(True)
    Z = torch.stack([inits[i][1] for i in seed_of]).to(device).requires_grad_(True)
    Y0, Z0 = Y.detach().sum(-1).clone(), Z.detach().sum(-1).clone()

    def lr(key):  # (replicas, 1, 1)
        return torch.as_tensor([r[key] for r in reps], dtype=torch.float32, device=device)[:, None, None]

    opt = _Optim(exp.optimizer, [Y, Z], [lr("lr_y"), lr("lr_z")], exp.momentum)
    datas = [TrainingStream(s, "data", device=device) for s in exp.seeds]
    task = CountTask(sc, exp.seq_len)
    rec_steps = sorted(
        {0, exp.steps} | (set(range(0, exp.steps, exp.record_every)) if exp.record_every else set())
    )
    cs = []
    last, next_token = (torch.as_tensor(a, device=device) for a in (sc.last, sc.next_token))

    def record(step: int) -> None:
        with torch.no_grad():
            cs.append(population_c(Z.detach(), sc).cpu().numpy())

    def loss_at(step: int) -> torch.Tensor:
        """(replicas,): each replica's mean loss on its seed's batch."""
        draws = [data.batch(task, exp.batch, step) for data in datas]
        cls = torch.stack([torch.as_tensor(d.cls) for d in draws])[seed_of].to(device)
        counts = torch.stack([torch.as_tensor(d.counts, dtype=torch.float32) for d in draws])[seed_of].to(
            device
        )
        logits = forward(Y, Z, last[cls], counts, exp.normalize, exp.residual)
        return F.cross_entropy(logits.transpose(1, 2), next_token[cls], reduction="none").mean(1)

    out = train.fit(
        None, opt, exp.steps, loss_at, evaluate=record, eval_at=rec_steps, nonfinite="continue",
        progress=progress, desc="scan and snap",
    )  # fmt: skip
    Yd, Zd = Y.detach(), Z.detach()
    drift = torch.maximum((Yd.sum(-1) - Y0).abs().amax(-1), (Zd.sum(-1) - Z0).abs().amax(-1))
    c = np.stack(cs)
    return {
        "loss": out.losses.T.astype(np.float32),
        "c": c,
        "c_step": np.asarray(rec_steps),
        "entropy": distinct_entropy(c[-1], sc),
        "row_sum_drift": drift.cpu().numpy(),
        "replicas": reps,
        "seconds": out.seconds,
        "device": config.device_name(device),
    }


# --- the chapters' studies ---------------------------------------------------------------------------------


def small_experiments(profile: str | None = None) -> dict[str, SynExperiment]:
    """Syn-Small (Figs. 4 and 5) at the paper's size (the public code's Fig. 4 command; it fits a CPU), four
    seeds (the authors' log is seed 2; ours draws from its own streams), 100 steps. Adam (Fig. 5): eta_Y =
    eta_Z in {0.1, 0.5, 1}, five seeds (the authors record neither the steps nor the seed)."""
    p = config.get_profile(profile)
    base = SynExperiment(profile=p, seeds=(2, 3, 4, 5))
    return {
        "SGD, eta_Y = eta_Z = 1": base,
        "SGD, eta_Y = 10, eta_Z = 1": SynExperiment(profile=p, seeds=(2, 3, 4, 5), lr_ratio=(10.0,)),
        "Adam, eta_Y = eta_Z": SynExperiment(
            profile=p, optimizer="adam", lr_z=(0.1, 0.5, 1.0), seeds=(1, 2, 3, 4, 5), record_every=0
        ),
    }


def medium_experiments(profile: str | None = None) -> dict[int, SynExperiment]:
    """Syn-Medium (Fig. 6), the public code's sweep: num_last in {1, 3, 5, 10} with two next tokens each
    (K = 2, 6, 10, 20), eta_Z in {0.5, 1, 2, 3}, eta_Y / eta_Z in {1, 2, 5, 10}, the default random
    initialisation, 100 SGD steps, seeds 1-10: the paper's sweep, in both profiles (half a minute on 2 cores)."""
    p = config.get_profile(profile)
    seeds = tuple(range(1, 11))
    return {
        2 * nl: SynExperiment(
            profile=p,
            classes={"num_last": nl, "num_next_per_last": 2},
            init="random",
            seeds=seeds,
            lr_z=(0.5, 1.0, 2.0, 3.0),
            lr_ratio=(1.0, 2.0, 5.0, 10.0),
            record_every=0,
        )
        for nl in (1, 3, 5, 10)
    }


def published_fig6() -> dict:
    """The published numbers of Fig. 6 (``data/scan_snap_fig6.json``): mean and spread over 10 seeds,
    indexed [K][eta_Z][ratio]."""
    import json

    return json.loads((config.committed_data_dir() / "scan_snap_fig6.json").read_text())


def fig4_log() -> dict:
    """The authors' logged Syn-Small losses (``data/scan_snap_fig4_log.json``): ``step`` and ``loss``."""
    import json

    return json.loads((config.committed_data_dir() / "scan_snap_fig4_log.json").read_text())


def synthetic_study(profile: str | None = None, progress: bool = True) -> dict:
    """Every run of the synthetic chapter: ``small`` (name -> result) and ``medium`` (K -> result)."""
    exps = {"small": small_experiments(profile), "medium": medium_experiments(profile)}
    return {
        "small": {k: run(e, progress=progress) for k, e in exps["small"].items()},
        "medium": {k: run(e, progress=progress) for k, e in exps["medium"].items()},
        "experiments": exps,
    }


def medium_table(res: dict) -> dict[str, np.ndarray]:
    """Fig. 6 from our runs, indexed [K][eta_Z][ratio]: ``mean`` and ``std`` over seeds of the class-averaged
    distinct-token entropy, the published ``pub_mean`` and ``pub_std``, and ``z``: the difference over its
    standard error pub_std sqrt(1 / n + 1 / 10), the published spread standing for the seed-to-seed
    standard deviation of both (the larger of the two for most points)."""
    pub = published_fig6()
    exps = res["experiments"]["medium"]
    mean, std = [], []
    for K in pub["K"]:
        e = exps[K]
        ent = res["medium"][K]["entropy"].mean(1).reshape(len(e.seeds), len(e.lr_z), len(e.lr_ratio))
        mean.append(ent.mean(0))
        std.append(ent.std(0))
    n = len(exps[pub["K"][0]].seeds)
    mean, std = np.stack(mean), np.stack(std)
    pm, ps = np.asarray(pub["mean"]), np.asarray(pub["spread"])
    return {
        "mean": mean,
        "std": std,
        "pub_mean": pm,
        "pub_std": ps,
        "n": n,
        "z": (mean - pm) / (ps * np.sqrt(1 / n + 1 / 10)),
    }


def _first_below(loss: np.ndarray, level: float) -> np.ndarray:
    hit = loss < level
    return np.where(hit.any(1), hit.argmax(1), loss.shape[1]).astype(float)


def total_variation(a, b) -> float:
    """Half the L1 distance between attention distributions ``a`` and ``b`` (numpy arrays or torch tensors of
    the same shape, distributions along the last axis), mean over every other axis: the attention mass that
    moved.

    >>> total_variation(np.array([[1.0, 0.0], [0.5, 0.5]]), np.array([[0.5, 0.5], [0.5, 0.5]]))
    0.25
    """
    return float(abs(a - b).sum(-1).mean() / 2)


def attention_movement(c: np.ndarray) -> np.ndarray:
    """:func:`total_variation` of the attention between consecutive recorded steps: ``c`` (recorded steps, ...,
    M) gives (recorded steps - 1,); here the mean is over replicas and classes.

    >>> c = np.zeros((3, 1, 1, 2)); c[:, 0, 0] = [[1, 0], [0.5, 0.5], [0.5, 0.5]]
    >>> attention_movement(c).tolist()
    [0.5, 0.0]
    """
    return np.array([total_variation(c[i + 1], c[i]) for i in range(len(c) - 1)])


def late_movement(moved) -> float:
    """How nearly the attention has stopped, against its fastest movement: the mean of ``moved`` (the movement
    per recorded interval, :func:`attention_movement`) over its last quarter of intervals, over its largest.
    The one reading of the source's "frozen" (Scan and Snap, Fig. 2(d) and Sec. 8) for both of its models.

    >>> late_movement([0.1, 0.4, 0.2, 0.1])
    0.25
    """
    moved = np.asarray(moved, dtype=float)
    if moved.size == 0 or not np.isfinite(moved).all():
        raise ValueError(f"moved={moved.tolist()!r}: need one or more finite movements")
    if moved.max() <= 0:
        raise ValueError("the attention never moved: late movement over the fastest is undefined")
    return float(moved[-max(1, len(moved) // 4) :].mean() / moved.max())


def scan_gains(c0: np.ndarray, c: np.ndarray, probs: np.ndarray, distinct: list) -> tuple[list, list]:
    """Per (replica, class): does the most likely distinct token gain the most attention, and do the gains
    increase strictly with P(l|n) over the distinct tokens? The gain is c_n / c_n at the start: at Z = 0, c_n is
    P(l|n) itself, so the most likely token is the most attended before any training and only the gain says what
    training did (all gains 1: both answers False).

    >>> c0 = np.array([[[0.2, 0.3, 0.5]]])
    >>> scan_gains(c0, c0, np.array([[0.2, 0.3, 0.5]]), [np.arange(3)])
    ([False], [False])
    >>> scan_gains(c0, np.array([[[0.1, 0.2, 0.7]]]), np.array([[0.2, 0.3, 0.5]]), [np.arange(3)])
    ([True], [True])
    >>> with np.errstate(all="raise"):  # a token the class does not use (c0 = 0) is not divided
    ...     scan_gains(c0 * [0, 1, 1], np.array([[[0.0, 0.2, 0.8]]]), np.array([[0.0, 0.4, 0.6]]), [np.arange(1, 3)])
    ([True], [True])
    """
    top, ranks = [], []
    for r in range(len(c)):
        for n, d in enumerate(distinct):
            # divided at the distinct tokens only, where c0 = P(l|n) > 0 (elsewhere c0 may be 0: 0/0 warned in the
            # built book)
            by_p = (c[r, n, d] / c0[r, n, d])[np.argsort(probs[n, d])]
            top.append(bool(np.all(by_p[-1] > by_p[:-1])))
            ranks.append(bool(np.all(np.diff(by_p) > 0)))
    return top, ranks


def synthetic_summary(res: dict):
    small, exps = res["small"], res["experiments"]["small"]
    sgd, fast, adam = (
        small[k] for k in ("SGD, eta_Y = eta_Z = 1", "SGD, eta_Y = 10, eta_Z = 1", "Adam, eta_Y = eta_Z")
    )
    sc = exps["SGD, eta_Y = eta_Z = 1"].seq_classes()
    top = [
        int(sc.distinct_tokens(n)[np.argmax(sc.probs[n, sc.distinct_tokens(n)])]) for n in range(sc.n_classes)
    ]
    final = sgd["c"][-1]  # (R, K, M)
    argmax_top, ranks = scan_gains(
        sgd["c"][0], final, sc.probs, [sc.distinct_tokens(n) for n in range(sc.n_classes)]
    )
    common = sc.common_tokens()
    log = fig4_log()
    ls = np.asarray(log["step"])
    log_gap = np.abs(np.log(sgd["loss"][:, ls] / np.asarray(log["loss"]))).max(1)
    seed2 = exps["SGD, eta_Y = eta_Z = 1"].seeds.index(2)
    # Adam: the most attended distinct token of class 0 at the end, per seed and learning rate
    ea = exps["Adam, eta_Y = eta_Z"]
    d0 = sc.distinct_tokens(0)
    am = adam["c"][-1][:, 0, d0].argmax(-1).reshape(len(ea.seeds), len(ea.lr_z))
    differ = np.mean([len(set(row)) == len(ea.lr_z) for row in am])
    same_across_seeds = np.mean([len(set(am[:, j])) == 1 for j in range(len(ea.lr_z))])
    tab = medium_table(res)
    m = tab["mean"]
    falls = np.mean([np.all(np.diff(m[k, :, j]) < 0) for k in range(m.shape[0]) for j in range(m.shape[2])])
    argmin = m.argmin(2)  # [K][eta_Z]: the ratio index of the lowest entropy
    pub_argmin = tab["pub_mean"].argmin(2)
    return report.Summary(
        {
            "log_gap": (
                float(log_gap[seed2]),
                "Fig. 4 (left), seed 2: largest |ln(our loss / logged loss)| at the logged steps",
            ),
            "log_gap_seeds": (float(log_gap.max()), "the same, largest over our four seeds"),
            "loss_0": (float(sgd["loss"][seed2, 0]), "our first batch loss (ln 34 = 3.526)"),
            "loss_end": (float(sgd["loss"][:, -1].max()), "largest last batch loss over the seeds"),
            "entropy_init": (
                float(distinct_entropy(sgd["c"][0], sc).mean()),
                "distinct-token entropy of c_n at Z = 0",
            ),
            "entropy_sgd": (
                float(sgd["entropy"].mean()),
                "distinct-token entropy at the end, eta_Y = eta_Z = 1",
            ),
            "entropy_fast": (float(fast["entropy"].mean()), "the same with eta_Y = 10"),
            "entropy_gain": (
                float(fast["entropy"].mean() - sgd["entropy"].mean()),
                "entropy at eta_Y = 10 minus at eta_Y = 1 (mean over seeds and classes)",
            ),
            "argmax_top": (
                float(np.mean(argmax_top)),
                "fraction of (seed, class) whose most likely distinct token gains the most attention over its "
                "share at Z = 0 (c_n / c_n(Z = 0); all gains are 1 at the start)",
            ),
            "rank_order": (
                float(np.mean(ranks)),
                "fraction of (seed, class) whose gains c_n / c_n(Z = 0) increase strictly with P(l|n) on the "
                "distinct tokens",
            ),
            "top_c_init": (
                float(
                    np.mean(
                        [sgd["c"][0][r, n, top[n]] for r in range(len(final)) for n in range(sc.n_classes)]
                    )
                ),
                "c_n on the most likely distinct token at Z = 0 (its P(l|n))",
            ),
            "top_c": (
                float(np.mean([final[r, n, top[n]] for r in range(len(final)) for n in range(sc.n_classes)])),
                "final c_n on the most likely distinct token (mean)",
            ),
            "common_init": (
                float(sgd["c"][0][:, :, common].sum(-1).mean()),
                "attention on the common tokens at Z = 0",
            ),
            "common_end": (
                float(final[:, :, common].sum(-1).mean()),
                "attention on the common tokens at the end",
            ),
            "steps_1e3_sgd": (
                float(np.median(_first_below(sgd["loss"], 1e-3))),
                "median first step with batch loss < 1e-3, eta_Y = 1",
            ),
            "steps_1e3_fast": (
                float(np.median(_first_below(fast["loss"], 1e-3))),
                "the same with eta_Y = 10",
            ),
            "moved_late": (
                late_movement(attention_movement(sgd["c"])),
                "eta_Y = eta_Z = 1: attention movement (total variation) per recorded interval over the last quarter "
                "of training, over the largest interval's",
            ),
            "moved_peak_step": (
                int(sgd["c_step"][1:][attention_movement(sgd["c"]).argmax()]),
                "the step ending the interval in which the attention moves most, eta_Y = eta_Z = 1",
            ),
            "moved_peak_step_fast": (
                int(fast["c_step"][1:][attention_movement(fast["c"]).argmax()]),
                "the same with eta_Y = 10",
            ),
            "row_sum_drift": (
                float(sgd["row_sum_drift"].max()),
                "largest change of a row sum of Y or Z (zero init, float32)",
            ),
            "adam_differ": (
                float(differ),
                "Adam: fraction of seeds whose three learning rates pick three different top tokens",
            ),
            "adam_same_across_seeds": (
                float(same_across_seeds),
                "Adam: fraction of learning rates with one top token for every seed",
            ),
            "adam_top": (
                " / ".join(
                    f"{lr:g}: token {int(d0[np.bincount(am[:, j]).argmax()])}" for j, lr in enumerate(ea.lr_z)
                ),
                "Adam: the most common top token of class 1 per learning rate",
            ),
            "medium_max_abs": (
                float(np.abs(m - tab["pub_mean"]).max()),
                "Fig. 6: largest |ours - published| over the 64 points",
            ),
            "medium_max_z": (
                float(np.abs(tab["z"]).max()),
                "Fig. 6: largest |difference| / standard error over the 64 points",
            ),
            "medium_seeds": (tab["n"], "seeds per point (ours)"),
            "entropy_falls_eta_z": (
                float(falls),
                "fraction of the 16 (K, ratio) columns where entropy falls as eta_Z grows",
            ),
            "dip_at_2": (
                float(np.mean(argmin[1:] == 1)),
                "K = 6, 10, 20: fraction of eta_Z rows with the lowest entropy at ratio 2",
            ),
            "k2_min_at_1": (
                float(np.mean(argmin[0] == 0)),
                "K = 2: fraction of eta_Z rows with the lowest entropy at ratio 1",
            ),
            "k2_min_at_1_published": (
                float(np.mean(pub_argmin[0] == 0)),
                "the same in the published numbers",
            ),
            "seconds": (
                float(sum(r["seconds"] for r in [*small.values(), *res["medium"].values()])),
                "training time",
            ),
        }
    )
