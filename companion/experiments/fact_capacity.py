"""How many facts a one-layer transformer stores, and how attention and MLP parameters trade (the talk, F3-F4).

Nichani, Lee, Bietti (ICLR 2025), Figs. 3-4 of the talk: facts stored grow
linearly with the parameter count, and at S = R = 32, D = 8 "the model can
trade off MLP parameters for attention parameters" while accuracy stays near
1, provided attention has enough parameters (H d_h = Omega~(S + R)).

Model: :class:`companion.models.one_layer.OneLayerTF`, the public code's ``TF_one_layer`` re-implemented
(H heads reading the last token, an MLP of width m); parameters counted as the paper does: 4 H d_h d
(attention) + 2 m d (MLP).

Training: Adam (AdamW with weight decay 0, as the code) on fresh batches of
the structured-by-relation random fact table (:class:`companion.data.facts.FactTask`
with ``facts="random"``, noise tokens S + R as in the code); accuracy on a
fixed test set every ``eval_every`` steps, and the reported value is the
largest accuracy seen, stopping early once it passes ``stop_at`` (the code's
rule).

>>> exp = CapacityExperiment(H=2, m=4, steps=2, eval_every=1, n_test=8, batch=4)
>>> exp.attention_params, exp.mlp_params
(2048, 256)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from companion import cache, config, report, train
from companion import recorded as recorded_files  # the recorded files (this module's `recorded` reads one)
from companion.config import check_float, check_int
from companion.data.facts import FactTask
from companion.data.streams import TrainingStream
from companion.models.one_layer import OneLayerTF, PackedOneLayerTF


@dataclass(frozen=True)
class CapacityExperiment(config.Profiled):
    """One run: the fact task (S, R, D; noise tokens S + R; T = 32) and the model (d, H, d_h, m)."""

    profile: str = "quick"
    S: int = 32
    R: int = 32
    D: int = 8
    seq_len: int = 32
    d: int = 32
    d_h: int = 8
    H: int = 4
    m: int = 32
    lr: float = 1e-2
    batch: int = 1024
    steps: int = 2**14
    eval_every: int = 128
    n_test: int = 1024
    stop_at: float = 0.99
    seed: int = field(default_factory=config.book_seed)

    def __post_init__(self):
        config.check_run(self)
        check_float("lr", self.lr, 0.0, None, low_open=True)
        check_float("stop_at", self.stop_at, 0.0, 1.0, low_open=True)
        check_int("eval_every", self.eval_every, low=1)
        check_int("n_test", self.n_test, low=1)
        self.task()
        self.model()

    def task(self) -> FactTask:
        return FactTask(
            n_subjects=self.S,
            n_relations=self.R,
            answers_per_relation=self.D,
            n_noise=self.S + self.R,
            seq_len=self.seq_len,
            facts="random",
            facts_seed=self.seed,
        )

    def model(self) -> OneLayerTF:
        t = self.task()
        return OneLayerTF(t.vocab_size, t.n_answers, self.d, self.H, self.d_h, self.m, self.seed)

    @property
    def attention_params(self) -> int:
        return 4 * self.H * self.d_h * self.d

    @property
    def mlp_params(self) -> int:
        return 2 * self.m * self.d


MODULES = ("companion.experiments.fact_capacity", "companion.experiments.factual")


def first_batch(exp):
    """The first training batch of a :class:`CapacityExperiment`, or of a :class:`ScalingExperiment`'s first
    trial (its smallest width, the middle of its size range, its first learning rate; None if its range holds
    no trial), drawn as training draws it."""
    if isinstance(exp, ScalingExperiment):
        if exp.max_size - exp.min_size <= 1:
            return None
        exp = exp.point(exp.ds[0], (exp.min_size + exp.max_size) // 2, exp.lrs[0])
    return TrainingStream(exp.seed, "train-data").batch(exp.task(), exp.batch, 0)


def run(exp: CapacityExperiment, *, device=None, progress: bool = True, use_cache: bool = True) -> dict:
    """Train (or load) ``exp``: ``{"step", "acc"}`` at every evaluation, ``"best"`` (the largest accuracy),
    ``"stopped"`` (the step training ended), ``"diverged"`` (the step the loss stopped being finite, which ends
    training; inf if it never did), ``"seconds"`` and ``"device"``."""
    return cache.load_or_compute(
        "fact_capacity", exp, lambda: _train(exp, progress, device), MODULES, use_cache=use_cache
    )


def _train(exp: CapacityExperiment, progress: bool, device=None) -> dict:
    device = config.get_device(device)
    streams = config.seed_streams(exp.seed, ["test-data"])
    data = TrainingStream(exp.seed, "train-data", device=device)
    task = exp.task()
    test = task.sample(np.random.default_rng(streams["test-data"]), exp.n_test)
    test_x, test_y = torch.as_tensor(test.tokens, device=device), torch.as_tensor(test.answer, device=device)
    model = exp.model().to(device)

    def loss_at(step: int) -> torch.Tensor:
        b = data.batch(task, exp.batch, step)
        tokens, answer = torch.as_tensor(b.tokens, device=device), torch.as_tensor(b.answer, device=device)
        return F.cross_entropy(model(tokens), answer)

    def evaluate(step: int) -> dict:
        with torch.no_grad():
            return {"acc": float((model(test_x).argmax(1) == test_y).float().mean())}

    # a diverged run is data: the best accuracy so far stands (the code's max)
    out = train.fit(
        model,
        torch.optim.Adam(model.parameters(), lr=exp.lr),
        exp.steps,
        loss_at,
        evaluate=evaluate,
        eval_at=lambda step: step % exp.eval_every == 0,
        stop=lambda row: row["acc"] > exp.stop_at,
        nonfinite="stop",
        progress=progress,
        desc=f"facts d={exp.d} S=R={exp.S} H={exp.H} m={exp.m} lr={exp.lr:g}",
    )
    return {
        "step": out.series("step"),
        "acc": out.series("acc"),
        "best": float(out.series("acc").max()),
        "stopped": out.stopped,
        "diverged": out.diverged,
        "seconds": out.seconds,
        "device": config.device_name(device),
    }


# --- several runs as one computation (replicas) ---

# what the runs of one pack share; they may differ in H and m (padded), lr, seed (each its own streams) and stop_at
PACK_SHARED = ("S", "R", "D", "seq_len", "d", "d_h", "batch", "steps", "eval_every", "n_test")


def pack_key(exp: CapacityExperiment, pad_heads: bool = False) -> tuple:
    """The runs with equal keys train as one pack: equal :data:`PACK_SHARED` and, unless ``pad_heads``, equal H
    (padding heads costs the largest H's attention for every replica; padding the MLP costs little)."""
    return tuple(getattr(exp, f) for f in PACK_SHARED) + (() if pad_heads else (exp.H,))


def _train_pack(
    exps: list[CapacityExperiment], progress: bool, device=None, states: bool = False
) -> list[dict]:
    """The runs ``exps`` (of one :func:`pack_key`) trained as one computation; one result per run, as
    :func:`run` gives, plus ``"pack"``: how many replicas trained together and the pack's H and m. Each replica
    has its own data and test set (the streams of its own seed: replicas of one seed share the draws, which are
    the same), learning rate, early stop and divergence (the replica is frozen there); losses are summed over
    replicas, never averaged. ``states``: each result also holds ``"state"``, its replica's trained parameters
    without the padding (named as :class:`OneLayerTF`'s)."""
    if len({pack_key(e, pad_heads=True) for e in exps}) != 1:
        raise ValueError(f"these runs differ in one of {PACK_SHARED} and cannot share a pack")
    device = config.get_device(device)
    first, R = exps[0], len(exps)
    seeds = sorted({e.seed for e in exps})
    seed_of = torch.as_tensor([seeds.index(e.seed) for e in exps], device=device)
    tasks = {e.seed: e.task() for e in exps}
    streams = {sd: config.seed_streams(sd, ["test-data"]) for sd in seeds}
    datas = [TrainingStream(sd, "train-data", device=device) for sd in seeds]
    tests = [tasks[sd].sample(np.random.default_rng(streams[sd]["test-data"]), first.n_test) for sd in seeds]
    test_x = torch.as_tensor(np.stack([t.tokens for t in tests]), device=device)[seed_of]
    test_y = torch.as_tensor(np.stack([t.answer for t in tests]), device=device)[seed_of]
    model = PackedOneLayerTF([e.model() for e in exps]).to(device)
    reps = train.Replicas(list(model.parameters()), "adam", lr=[e.lr for e in exps])
    stop_at = torch.as_tensor([e.stop_at for e in exps], device=device)
    evals: list[list] = [[] for _ in exps]  # per replica: (step, accuracy)
    stopped = [first.steps] * R

    def loss_at(step: int) -> torch.Tensor:
        batches = [data.batch(tasks[sd], first.batch, step) for sd, data in zip(seeds, datas)]
        tokens = torch.stack([torch.as_tensor(b.tokens, device=device) for b in batches])[seed_of]
        answer = torch.stack([torch.as_tensor(b.answer, device=device) for b in batches])[seed_of]
        logits = model(tokens)
        loss = F.cross_entropy(logits.flatten(0, 1), answer.flatten(), reduction="none").view(R, -1).mean(1)
        reps.watch(step, loss)
        return loss

    def evaluate(step: int) -> dict:
        with torch.no_grad():
            acc = (model(test_x).argmax(-1) == test_y).float().mean(1)
        done = acc > stop_at
        frozen = reps.frozen.tolist()  # read once per evaluation
        for r, (a, d) in enumerate(zip(acc.tolist(), done.tolist())):
            if not frozen[r]:
                evals[r].append((step, a))
                if d:
                    stopped[r] = step
        reps.freeze(done)
        return {"active": int((~reps.frozen).sum())}

    out = train.fit(
        model,
        reps,
        first.steps,
        loss_at,
        evaluate=evaluate,
        eval_at=lambda step: step % first.eval_every == 0,
        stop=lambda row: row["active"] == 0,
        nonfinite="continue",
        progress=progress,
        desc=f"facts pack of {R} d={first.d} H<={model.Q.shape[1]} m<={model.W1.shape[2]}",
    )
    diverged = reps.diverged.tolist()
    pack = {"replicas": R, "H": model.Q.shape[1], "m": model.W1.shape[2]}
    results = []
    for r in range(R):
        steps, accs = zip(*evals[r])
        results.append(
            {
                "step": np.asarray(steps),
                "acc": np.asarray(accs),
                "best": max(accs),
                "stopped": int(diverged[r]) if diverged[r] < float("inf") else stopped[r],
                "diverged": int(diverged[r]) if diverged[r] < float("inf") else float("inf"),
                "seconds": out.seconds / R,
                "device": config.device_name(device),
                "pack": pack,
            }
        )
        if states:
            H, m, d_h = exps[r].H, exps[r].m, first.d_h
            P = {k: v.detach()[r].cpu() for k, v in model.named_parameters()}
            results[-1]["state"] = {
                "Q": P["Q"][:H], "K": P["K"][:H], "V": P["V"][:H], "O": P["O"][: H * d_h],
                "W1": P["W1"][:, :m], "b1": P["b1"][:m], "W2": P["W2"][:m],
            }  # fmt: skip
    return results


def run_many(
    exps: dict[str, CapacityExperiment],
    progress: bool = True,
    use_cache: bool = True,
    device=None,
    max_replicas: int = 64,
    pad_heads: bool = False,
) -> dict[str, dict]:
    """:func:`run` for each of ``exps``, the runs of one :func:`pack_key` trained together in packs of at most
    ``max_replicas``. A packed run is cached under its configuration and its pack (its numbers are those of the
    run alone up to rounding, not bitwise), so :func:`run` alone does not find it. ``"seconds"`` of a packed run
    is its share of the pack's time.

    Raises:
        ValueError: ``max_replicas`` below 1.
    """
    return train.run_packed(
        exps,
        lambda e: pack_key(e, pad_heads),
        run,
        _train_pack,
        "fact_capacity-pack",
        MODULES,
        max_replicas=max_replicas,
        progress=progress,
        use_cache=use_cache,
        device=device,
    )


# --- the grid of Fig. 4 (right): heads H against MLP width m at S = R = 32, D = 8, d = 32, d_h = 8 ---

GRID = {
    # quick: the corners and the middle of the paper's grid, 4096 steps (a CPU runs it in minutes per point)
    "quick": dict(H=(1, 4, 16), m=(1, 32, 128), steps=4096),
    # full: the paper's grid and budget (169 runs of 2^14 steps: a GPU)
    "full": dict(
        H=(1, 2, 4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32),
        m=(1, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128),
        steps=2**14,
    ),
}


def grid(profile: str | None = None) -> dict[str, CapacityExperiment]:
    """The (H, m) grid of a profile, named ``"H=4, m=32"``."""
    g = GRID[config.get_profile(profile)]
    return {
        f"H={H}, m={m}": CapacityExperiment.for_profile(profile, H=H, m=m, steps=g["steps"])
        for H in g["H"]
        for m in g["m"]
    }


def accuracy_table(
    runs: dict[str, dict], members: dict[str, CapacityExperiment]
) -> tuple[list, list, np.ndarray]:
    """(Hs, ms, best accuracy array (len(Hs), len(ms))) of a finished grid."""
    Hs = sorted({e.H for e in members.values()})
    ms = sorted({e.m for e in members.values()})
    acc = np.full((len(Hs), len(ms)), np.nan)
    for name, e in members.items():
        acc[Hs.index(e.H), ms.index(e.m)] = runs[name]["best"]
    return Hs, ms, acc


def grid_summary(
    runs: dict[str, dict], members: dict[str, CapacityExperiment] | None = None
) -> report.Summary:
    """The trade-off in numbers: accuracy with many heads for any MLP, with one head for any MLP, and what the
    MLP adds at a middle number of heads."""
    members = members or {name: _parse(name) for name in runs}
    Hs, ms, acc = accuracy_table(runs, members)
    e0 = next(iter(members.values()))
    mid = Hs[len(Hs) // 2]
    return report.Summary(
        {
            "S_plus_R": (e0.S + e0.R, "S + R"),
            "d_h": (e0.d_h, "head dimension"),
            "H_big": (Hs[-1], "largest H"),
            "H_small": (Hs[0], "smallest H"),
            "H_mid": (mid, "middle H"),
            "m_small": (ms[0], "smallest MLP width"),
            "m_big": (ms[-1], "largest MLP width"),
            "big_heads_min": (float(acc[-1].min()), "largest H: the lowest accuracy over MLP widths"),
            "small_heads_max": (float(acc[0].max()), "smallest H: the highest accuracy over MLP widths"),
            "mid_mlp_gain": (
                float(acc[Hs.index(mid), -1] - acc[Hs.index(mid), 0]),
                "middle H: accuracy with the widest MLP minus with the narrowest",
            ),
            "best_overall": (float(np.nanmax(acc)), "the highest accuracy on the grid"),
            "diverged": (
                sum(np.isfinite(r.get("diverged", np.inf)) for r in runs.values()),
                "runs whose loss stopped being finite (their best accuracy before that is kept)",
            ),
        }
    )


def _parse(name: str) -> CapacityExperiment:
    """``"H=4, m=32"`` -> the quick experiment with those values (for summaries of bare run dicts)."""
    kv = dict(part.strip().split("=") for part in name.split(","))
    return CapacityExperiment(H=int(kv["H"]), m=int(kv["m"]))


def grid_curves(runs: dict[str, dict]) -> dict:
    """What a recorded file keeps of each run: the best accuracy, the step training stopped, the accuracy
    curve (every evaluation)."""
    return {
        "best": {k: r["best"] for k, r in runs.items()},
        "stopped": {k: r["stopped"] for k, r in runs.items()},
        "diverged": {k: r["diverged"] for k, r in runs.items()},
        "step": {k: r["step"] for k, r in runs.items()},
        "acc": {k: r["acc"] for k, r in runs.items()},
    }


def recorded(profile: str | None = None):
    """The recorded run of a profile's grid (``python -m companion record fact_capacity --profile P``).

    Raises:
        ValueError: none is recorded (the message gives the command that records it).
    """
    return recorded_files.latest("fact_capacity", config.get_profile(profile))


def recorded_grid(rec) -> tuple[list, list, np.ndarray]:
    """(Hs, ms, best accuracy (len(Hs), len(ms))) of a recorded grid."""
    best = rec.curves["best"]
    members = {name: _parse(name) for name in best}
    return accuracy_table({k: {"best": v} for k, v in best.items()}, members)


def grid_stopped(rec) -> tuple[Callable[[dict], report.Summary], dict[str, dict]]:
    """(summary, runs) of a recorded grid, for :func:`companion.experiments.late_verdicts.judged_study`: each run's
    evaluated steps and accuracies, and :func:`grid_summary` of the best accuracy over them (what the recording
    stores as the run's best: training stops once an evaluation passes ``stop_at``), each run's divergence as
    recorded (the file writes infinities as text).

    Raises:
        ValueError: a run without an evaluation.
    """
    c = rec.curves
    empty = sorted(n for n in c["best"] if not len(c["acc"][n]))
    if empty:
        raise ValueError(
            f"runs {empty} of {rec.path.name} have no evaluation: allowed runs evaluated at least once"
        )
    runs = {n: {"step": np.asarray(c["step"][n]), "acc": np.asarray(c["acc"][n])} for n in c["best"]}

    def make(cut: dict[str, dict]) -> report.Summary:
        return grid_summary(
            {n: {"best": float(r["acc"].max()), "diverged": float(c["diverged"][n])} for n, r in cut.items()}
        )

    return make, runs


ROWS_HEADER = ["H", "m", "H d_h", "attention params", "MLP params", "best accuracy", "stopped at step"]


def recorded_rows(rec) -> list[list]:
    """One row per grid point of a recorded grid (see :data:`ROWS_HEADER`)."""
    out = []
    for name, best in rec.curves["best"].items():
        e = _parse(name)
        out.append(
            [e.H, e.m, e.H * e.d_h, e.attention_params, e.mlp_params, best, rec.curves["stopped"][name]]
        )
    return out


# --- Fig. 4 (left): the facts a model of each width stores, against its parameters (F3) ---


@dataclass(frozen=True)
class ScalingExperiment(config.Profiled):
    """Fig. 4 (left): at each width d, the largest problem S = R = size (D fixed) stored at accuracy ``level``.

    The public code's ``fact_recall_sweep.py`` ("linear" scaling): heads of d_h = int(alpha d / H), MLP width
    m = int(beta d), and for each d (in increasing order) a binary search over the size between the previous
    d's result and ``max_size``: a size counts as stored when one of the learning rates ``lrs`` (tried in
    order) reaches best test accuracy ``level`` within ``steps`` Adam steps (a :class:`CapacityExperiment`;
    evaluations every steps // 128 steps, as the code). Facts = size^2, parameters 4 H d_h d + 2 m d. The
    learning rates of one size train together as one pack (:func:`run_many`): the trials are the code's, every
    rate is computed.

    The alpha, beta, H and D of the paper's curves are not recorded (they are command-line arguments of the
    script); these are our choice. Quick: d in {8, 16, 32}, one learning rate, 4096 steps, sizes 2..128;
    full: the code's widths 8..181, its three learning rates, 2^14 steps and sizes 8..512.

    >>> [ScalingExperiment().d_h(d) for d in (8, 16, 32)], ScalingExperiment().params(32)
    ([4, 8, 16], 6144)
    """

    profile: str = "quick"
    ds: tuple = (8, 16, 32)
    alpha: float = 1.0
    beta: float = 1.0
    H: int = 2
    D: int = 8
    lrs: tuple = (1e-2,)
    min_size: int = 2
    max_size: int = 128
    steps: int = 4096
    level: float = 0.99
    seed: int = field(default_factory=config.book_seed)

    @classmethod
    def full(cls, **overrides) -> "ScalingExperiment":
        """The public code's sweep: d = int(2^i), i = 3, 3.5, ..., 7.5; lr 1e-3, 3e-3, 1e-2; 2^14 steps; 8..512."""
        base = dict(
            profile="full",
            ds=tuple(int(2 ** (i / 2)) for i in range(6, 16)),
            lrs=(1e-3, 3e-3, 1e-2),
            min_size=8,
            max_size=512,
            steps=2**14,
        )
        return cls(**{**base, **overrides})

    def __post_init__(self):
        config.get_profile(self.profile)
        if not self.ds or list(self.ds) != sorted(set(self.ds)):
            raise ValueError(f"ds={self.ds!r} must be a non-empty increasing tuple of widths (each >= 1)")
        for d in self.ds:
            check_int("d", d, low=1)
        check_int("H", self.H, low=1)
        check_float("alpha", self.alpha, 0.0, None, low_open=True)
        check_float("beta", self.beta, 0.0, None, low_open=True)
        if not self.lrs:
            raise ValueError("lrs=() is empty: allowed one or more positive learning rates")
        for lr in self.lrs:
            check_float("lr", lr, 0.0, None, low_open=True)
        check_float("level", self.level, 0.0, 1.0, low_open=True)
        check_int("min_size", self.min_size, low=1)
        check_int("max_size", self.max_size, low=self.min_size + 1)
        for d in self.ds:  # every width's model at the largest problem, validated before any work
            if self.d_h(d) < 1 or self.m(d) < 1:
                raise ValueError(
                    f"d={d}: d_h = int(alpha d / H) = {self.d_h(d)} and m = int(beta d) = {self.m(d)} "
                    f"must both be >= 1 (alpha={self.alpha}, beta={self.beta}, H={self.H})"
                )
            self.point(d, self.max_size, self.lrs[0])

    def d_h(self, d: int) -> int:
        return int(d * self.alpha / self.H)

    def m(self, d: int) -> int:
        return int(d * self.beta)

    def params(self, d: int) -> int:
        """Attention and MLP parameters, counted as the paper does: 4 H d_h d + 2 m d."""
        return 4 * self.H * self.d_h(d) * d + 2 * self.m(d) * d

    def point(self, d: int, size: int, lr: float) -> CapacityExperiment:
        """The run that decides whether width d stores the problem S = R = size at learning rate lr."""
        return CapacityExperiment(
            profile=self.profile,
            S=size,
            R=size,
            D=self.D,
            d=d,
            d_h=self.d_h(d),
            H=self.H,
            m=self.m(d),
            lr=lr,
            steps=self.steps,
            eval_every=max(1, self.steps // 128),
            stop_at=self.level,
            seed=self.seed,
        )


def scaling(exp: ScalingExperiment, progress: bool = True, use_cache: bool = True, device=None) -> dict:
    """Run (or load) the sweep: per width, the sizes tried (size, lr, best accuracy, stopped step), the size found,
    whether that size was itself trained and stored (``verified``; False when nothing above the lower end of
    the search stored, which then stands untested), facts and parameters; ``seconds`` and ``device``.

    The trials of each size are a cached :func:`run_many` (with ``use_cache``), so an interrupted sweep resumes
    where it stopped.
    """
    return cache.load_or_compute(
        "fact_scaling",
        exp,
        lambda: _scaling(exp, progress, device, use_cache),
        MODULES,
        fmt="json",
        use_cache=use_cache,
    )


def _scaling(exp: ScalingExperiment, progress: bool, device, use_cache: bool = True) -> dict:
    widths, seconds, name = [], 0.0, None
    low = exp.min_size
    for d in exp.ds:
        lo, hi, trials, verified = low, exp.max_size, [], False
        # the code's binary search: lo is stored (or the lower end), hi is not (or the upper end)
        while hi - lo > 1:
            size = (lo + hi) // 2
            # the learning rates of one size train as one pack; a trial counts as the code's: in order, up to
            # the first that stores (the pack's time is the sweep's, every rate included)
            points = {lr: exp.point(d, size, lr) for lr in exp.lrs}
            runs = run_many(points, progress=progress, use_cache=use_cache, device=device)
            seconds += sum(r["seconds"] for r in runs.values())
            for lr, r in runs.items():
                name = r["device"]
                trials.append([size, lr, r["best"], int(r["stopped"])])
                if r["best"] >= exp.level:
                    break
            if trials[-1][2] >= exp.level:
                lo, verified = size, True
            else:
                hi = size
        widths.append(
            {
                "d": d,
                "d_h": exp.d_h(d),
                "m": exp.m(d),
                "params": exp.params(d),
                "size": lo,
                "facts": lo * lo,
                "verified": verified,
                "trials": trials,
            }
        )
        low = lo  # the next width starts where this one ended (the code's min_size = size)
    return {
        "widths": widths,
        "max_size": exp.max_size,
        "level": exp.level,
        "seconds": seconds,
        "device": name or config.device_name(device),
    }


def scaling_summary(res: dict) -> report.Summary:
    """Facts against parameters in numbers: the log-log slope over the widths whose size was verified (NaN with
    fewer than three), the facts per parameter, and how many widths were verified."""
    ws = [w for w in res["widths"] if w["verified"]]
    params = np.array([w["params"] for w in ws], dtype=float)
    facts = np.array([w["facts"] for w in ws], dtype=float)
    per = facts / params if ws else np.array([np.nan])
    return report.Summary(
        {
            "s_widths": (len(res["widths"]), "widths d swept"),
            "s_verified": (len(ws), "widths whose size was itself trained and stored"),
            "s_slope": (
                report.loglog_slope(params, facts) if len(ws) >= 3 else float("nan"),
                "log-log slope of the facts stored against the parameters, over the verified widths",
            ),
            "s_per_param_min": (
                float(per.min()),
                "facts stored per parameter: smallest over the verified widths",
            ),
            "s_per_param_max": (float(per.max()), "the same, largest"),
            "s_trials": (sum(len(w["trials"]) for w in res["widths"]), "training runs of the sweep"),
            "s_capped": (
                sum(w["size"] == res["max_size"] - 1 for w in res["widths"]),
                "widths that stored the largest size the search allows (their capacity may be larger)",
            ),
            "s_inversion": (
                max((_inversion(w["trials"], res["level"]) for w in res["widths"]), default=0.0),
                "largest gain in best accuracy of a failed larger problem over a failed smaller one at "
                "the same width (> 0: the run's budget, not the size, decided)",
            ),
        }
    )


def _inversion(trials, level: float) -> float:
    """Over pairs of failed sizes at one width (a < b, none of their trials reaching ``level``), the largest
    best(b) - best(a); 0 if none."""
    failed = {}
    for size, _, best, _ in trials:  # a size tried at several learning rates: its best over them
        failed[size] = max(best, failed.get(size, 0.0))
    passed = {size for size, _, best, _ in trials if best >= level}
    sizes = sorted(set(failed) - passed)
    return max([failed[b] - failed[a] for i, a in enumerate(sizes) for b in sizes[i + 1 :]] + [0.0])


def scaling_curves(res: dict) -> dict:
    """What a recorded file keeps: per width its size, facts, parameters, verification and every trial."""
    return {
        k: [w[k] for w in res["widths"]]
        for k in ("d", "d_h", "m", "params", "size", "facts", "verified", "trials")
    }


def recorded_scaling(rec, prefix: str = "") -> report.Summary:
    """:func:`scaling_summary` of a recorded sweep (``python -m companion record fact_scaling``), recomputed from
    its recorded trials, names prefixed with ``prefix`` (to glue two sweeps on one page), with its training
    time."""
    keys = list(rec.curves)
    res = {
        "widths": [dict(zip(keys, vals)) for vals in zip(*rec.curves.values())],
        "max_size": rec.config["max_size"],
        "level": rec.config["level"],
    }
    return rec.as_summary("s_minutes", scaling_summary(res), prefix)


# The quick widths with the paper's per-run budget (2^14 steps): what limits the quick sweep (chapter fact_capacity)
BUDGET_SETTINGS = {"steps": 2**14, "max_size": 64}
TRIAL_HEADER = ["S = R", "learning rate", "best accuracy", "stopped at step", "stored"]


def trial_rows(curves: dict, d: int, level: float = 0.99) -> list[list]:
    """The search's trials at width ``d`` of a (recorded) sweep, in the order run (see :data:`TRIAL_HEADER`)."""
    trials = curves["trials"][list(curves["d"]).index(d)]
    return [[size, lr, best, stopped, best >= level] for size, lr, best, stopped in trials]


SCALING_HEADER = [
    "d",
    "d_h",
    "m",
    "parameters",
    "largest S = R stored",
    "facts S R",
    "facts per parameter",
    "verified",
    "runs",
]


def scaling_rows(curves: dict) -> list[list]:
    """One row per width of a (recorded) sweep (see :data:`SCALING_HEADER`)."""
    return [
        [d, dh, m, p, s, f, f / p, v, len(t)]
        for d, dh, m, p, s, f, v, t in zip(
            *(curves[k] for k in ("d", "d_h", "m", "params", "size", "facts", "verified", "trials"))
        )
    ]


def budget_text(short: dict, long: dict) -> str:
    """Which widths store a larger problem when every trial gets the longer budget (the curves of two recorded
    sweeps over the same widths: ``short``, ``long``), as book/fact_capacity says it.

    >>> budget_text({"d": [8, 16, 32], "size": [4, 8, 10]}, {"d": [8, 16, 32], "size": [4, 8, 14]})
    'Only the widest width gains (the two tables above). The smaller ones store no larger problem with the longer budget; the widest, with the largest problems, is the one a short run cuts off.'
    >>> budget_text({"d": [8, 16, 32], "size": [3, 7, 14]}, {"d": [8, 16, 32], "size": [3, 10, 14]})
    'Only the width d = 16 gains (the two tables above); the others store no larger problem with the longer budget.'
    """
    before, after = dict(zip(short["d"], short["size"])), dict(zip(long["d"], long["size"]))
    gained = [d for d in before if d in after and after[d] > before[d]]
    if not gained:
        return "No width stores a larger problem with the longer budget (the two tables above)."
    if gained == [max(before)]:
        return (
            "Only the widest width gains (the two tables above). The smaller ones store no larger problem with the "
            "longer budget; the widest, with the largest problems, is the one a short run cuts off."
        )
    which = ", ".join(map(str, gained))
    return (
        f"{'Only the width' if len(gained) == 1 else 'The widths'} d = {which} "
        f"{'gains' if len(gained) == 1 else 'gain'} (the two tables above); the others store no larger problem with "
        "the longer budget."
    )
