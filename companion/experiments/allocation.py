"""Parameter allocation between MLPs and attention (main paper, Appendix A, Fig. 6).

For a fixed budget of learnable parameters, the split between the MLP
feed-forward layers and attention is varied: the MLP width h and the
attention head dimension k (``ModelConfig.attn_rank``: W_QK = W_Q^T W_K,
W_V = W_O W_Vk) are set so that a fraction ``f`` of the budget sits in the
MLPs. Each configuration is trained on the bigram chain of tiny Shakespeare
(:class:`~companion.data.recall.BigramTask`, a purely distributional task)
for ``steps`` SGD steps at every learning rate of a small grid; the best
learning rate (lowest final training loss) is kept, as the paper does.

The paper does not say how attention parameters are varied, nor the model,
sizes or grids; the choices here are listed in the chapter.

>>> split(4096, 0.5, d=16, n_layers=2)
(32, 16)
>>> split(100, 0.5, d=16, n_layers=2)
Traceback (most recent call last):
...
ValueError: budget=100 is too small for MLP fraction 0.5 at d=16, L=2: MLP width 0, attention rank 0 (each must be >= 1)
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from companion import cache, config, train
from companion.config import check_float, check_int
from companion.data.recall import BigramTask
from companion.data.streams import TrainingStream
from companion.models import ModelConfig, Transformer
from companion.report import Summary, markdown_table, strict_max, strict_min
from companion.train import TrainConfig


def split(budget: int, mlp_frac: float, d: int, n_layers: int) -> tuple[int, int]:
    """(MLP width h, attention rank k) putting about ``mlp_frac`` of ``budget`` in the MLPs.

    Per layer an MLP has 2dh parameters and factorised attention 4dk.

    Raises:
        ValueError: h or k below 1 (budget too small for the split) or k above d.
    """
    check_int("budget", budget, low=1)
    check_float("mlp_frac", mlp_frac, 0.0, 1.0, low_open=True, high_open=True)
    h = math.floor(mlp_frac * budget / (2 * d * n_layers))
    k = math.floor((1 - mlp_frac) * budget / (4 * d * n_layers))
    if h < 1 or k < 1:
        raise ValueError(
            f"budget={budget} is too small for MLP fraction {mlp_frac} at d={d}, L={n_layers}: "
            f"MLP width {h}, attention rank {k} (each must be >= 1)"
        )
    if k > d:
        raise ValueError(
            f"budget={budget} with MLP fraction {mlp_frac} needs attention rank {k} > d={d}: "
            f"lower the budget or raise mlp_frac to at least "
            f"{1 - 4 * d * d * n_layers / budget:.3f}"
        )
    return h, k


@dataclass(frozen=True)
class AllocationExperiment(config.Profiled):
    """Budgets x MLP fractions x learning rates; validated (every split too) before any training."""

    profile: str = "quick"
    d: int = 64
    seq_len: int = 32
    n_layers: int = 2
    batch: int = 64
    steps: int = 100
    budgets: tuple[int, ...] = (8192, 16384, 32768)
    mlp_fracs: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.9)
    lrs: tuple[float, ...] = (0.03, 0.1, 0.2, 0.3, 0.5, 0.7)
    momentum: float = 0.9
    weight_decay: float = 1e-4
    last: int = 10
    n_test: int = 256
    seed: int = field(default_factory=config.book_seed)

    def __post_init__(self):
        config.check_int("seed", self.seed, low=0)
        config.get_profile(self.profile)
        check_int("d", self.d, low=1)
        check_int("n_layers (L)", self.n_layers, low=1)
        check_int("steps", self.steps, low=1)
        check_int("last", self.last, low=1, high=self.steps)
        for name in ("budgets", "mlp_fracs", "lrs"):
            if len(getattr(self, name)) == 0:
                raise ValueError(f"{name} is empty: give at least one value")
        for budget in self.budgets:
            for f in self.mlp_fracs:
                split(budget, f, self.d, self.n_layers)
        for lr in self.lrs:
            TrainConfig(steps=1, lr=lr)
        BigramTask(self.seq_len)

    @classmethod
    def full(cls, **overrides) -> "AllocationExperiment":
        """d = T = 256, batch 512 (the sizes of B.6); budgets around the full model's 2^19 parameters."""
        base = dict(
            profile="full", d=256, seq_len=256, batch=512, budgets=(131072, 262144, 524288), n_test=1024
        )
        return cls(**{**base, **overrides})

    def model_config(self, budget: int, mlp_frac: float) -> ModelConfig:
        h, k = split(budget, mlp_frac, self.d, self.n_layers)
        return ModelConfig(
            vocab_size=BigramTask(self.seq_len).vocab_size,
            d=self.d,
            max_len=self.seq_len,
            ff=("mlp",) * self.n_layers,
            mlp_width=h,
            attn_rank=k,
        )

    def key(self) -> str:
        return cache.key(self, MODULES)


def first_batch(exp: AllocationExperiment):
    """The first training batch (every run of ``exp`` draws the same batches), as training draws it, by the
    sampler in force."""
    return TrainingStream(exp.seed, "train-data").batch(BigramTask(exp.seq_len), exp.batch, 0)


def run(exp: AllocationExperiment, *, device=None, progress: bool = True, use_cache: bool = True) -> dict:
    """Train every (budget, fraction, lr); return rows with losses, cached as JSON.

    Each row: budget, mlp_frac (requested), mlp_params, attn_params, lr,
    train_loss (mean of the last ``exp.last`` steps), test_loss (fixed test
    batch), both None if the run diverged, best (the row's lr is the best
    for its configuration). Every run sees the same data batches and starts
    from the same seed.
    """
    return cache.load_or_compute(
        "allocation", exp, lambda: _train_all(exp, device, progress), MODULES, fmt="json", use_cache=use_cache
    )


MODULES = ("companion.experiments.allocation",)


def _train_all(exp: AllocationExperiment, device, progress: bool) -> dict:
    device = config.get_device(device)
    streams = config.seed_streams(exp.seed, ["test-data"])
    task = BigramTask(exp.seq_len)
    test_batch = task.sample(np.random.default_rng(streams["test-data"]), exp.n_test)
    rows, t0 = [], time.perf_counter()
    shapes = [(b, f) for b in exp.budgets for f in exp.mlp_fracs]
    for budget, f in tqdm(shapes, desc="configurations (learning rates packed)", disable=not progress):
        cfg = exp.model_config(budget, f)
        # the learning rates of one configuration as one computation: same start, same batches
        pack = train.Pack([Transformer(cfg, seed=exp.seed).to(device) for _ in exp.lrs])
        reps = train.Replicas(
            pack.parameters(), "sgd", lr=exp.lrs, weight_decay=exp.weight_decay, momentum=exp.momentum
        )
        data = TrainingStream(exp.seed, "train-data", device=device)

        def loss_at(step, pack=pack, reps=reps, data=data):
            batch = data.batch(task, exp.batch, step)
            loss = pack.map(lambda model, b: train.batch_loss(model, b, device), batch)
            reps.watch(step, loss)
            return loss

        out = train.fit(None, reps, exp.steps, loss_at, nonfinite="continue", progress=False)
        with torch.no_grad():
            tests = pack.map(lambda model, b: train.batch_loss(model, b, device), test_batch).tolist()
        diverged = reps.diverged.tolist()
        n = cfg.n_params()
        for r, lr in enumerate(exp.lrs):
            # None: this lr diverged, so it cannot be the best one
            ok = diverged[r] == float("inf") and np.isfinite(tests[r])
            rows.append(
                {
                    "budget": budget,
                    "mlp_frac": f,
                    "mlp_params": n["feed_forward"],
                    "attn_params": n["attention"],
                    "mlp_width": cfg.hidden,
                    "attn_rank": cfg.attn_rank,
                    "lr": lr,
                    "train_loss": float(np.mean(out.losses[-exp.last :, r])) if ok else None,
                    # the losses that mean reads, one per step (late_views reads each alone)
                    "late_losses": out.losses[-exp.last :, r].tolist() if ok else None,
                    "test_loss": tests[r] if ok else None,
                }
            )
    for budget in exp.budgets:
        for f in exp.mlp_fracs:
            _mark_best([r for r in rows if r["budget"] == budget and r["mlp_frac"] == f])
    return {
        "rows": rows,
        "entropy": task.entropy(),
        "seconds": time.perf_counter() - t0,
        "device": config.device_name(device),
        "exp": dataclasses.asdict(exp),
        # how the runs trained: the learning rates of each configuration as one pack
        "pack": {"replicas": len(exp.lrs), "packed": "the learning rates of one configuration"},
    }


def _mark_best(group: list[dict]) -> None:
    """Mark the row of the lowest training loss among one configuration's learning rates as its best (``best``);
    none where every one diverged."""
    finite = [r for r in group if r["train_loss"] is not None]
    best = min(finite, key=lambda r: r["train_loss"]) if finite else None  # None: every lr diverged
    for r in group:
        r["best"] = r is best


# what a view of late_views is, for late_verdicts.judged_views' sentence
LATE_LEAD = "With one run read at one step of its mean alone"


def late_views(result: dict) -> list[dict]:
    """``result`` with one run's training loss read at one step of its last ``exp.last`` alone, in place of their
    mean, its configuration's best learning rate chosen again, the other runs as they are: one view per step of each
    run that did not diverge, in the order of the rows (the late-mean check of
    :mod:`companion.experiments.late_verdicts`). A view shares the rows it does not change with ``result``.

    Raises:
        ValueError: a result without the per-step losses (recorded before they were kept).
    """
    if any("late_losses" not in r for r in result["rows"]):
        raise ValueError(
            "late_views: the result keeps no per-step losses ('late_losses'): allowed a result of allocation.run "
            "made since it keeps them (8dcf93a)"
        )
    out = []
    for i, row in enumerate(result["rows"]):
        group = [
            j
            for j, r in enumerate(result["rows"])
            if (r["budget"], r["mlp_frac"]) == (row["budget"], row["mlp_frac"])
        ]
        for loss in row["late_losses"] or []:
            rows = list(result["rows"])
            for j in group:  # the configuration's rows are copied, their best marked again
                rows[j] = {**rows[j], "train_loss": loss} if j == i else dict(rows[j])
            _mark_best([rows[j] for j in group])
            out.append({**result, "rows": rows})
    return out


def best_rows(result: dict) -> list[dict]:
    """The best-learning-rate row of every (budget, fraction)."""
    return [r for r in result["rows"] if r["best"]]


def curves(result: dict) -> dict[int, tuple[np.ndarray, np.ndarray, list[dict]]]:
    """{budget: (MLP share of learnable parameters, best-lr training loss, rows)}, by increasing share.

    A configuration where every learning rate diverged has no best row; it enters with loss NaN
    (its first row stands in for the sizes), so every statistic over that budget is NaN and fails.
    """
    out = {}
    rows_all = result["rows"]
    for budget in dict.fromkeys(r["budget"] for r in rows_all):
        rows = []
        for f in dict.fromkeys(r["mlp_frac"] for r in rows_all if r["budget"] == budget):
            group = [r for r in rows_all if r["budget"] == budget and r["mlp_frac"] == f]
            rows.append(
                next(
                    (r for r in group if r["best"]),
                    {**group[0], "train_loss": float("nan"), "test_loss": float("nan"), "lr": float("nan")},
                )
            )
        rows.sort(key=lambda r: r["mlp_frac"])
        share = np.array([r["mlp_params"] / (r["mlp_params"] + r["attn_params"]) for r in rows])
        out[budget] = (share, np.array([r["train_loss"] for r in rows], dtype=float), rows)
    return out


def summary(result: dict) -> Summary:
    """Fig. 6's claims: how the best-lr loss orders with the MLP share, per budget."""
    from scipy.stats import spearmanr

    c = curves(result)
    lrs = result["exp"]["lrs"]
    best = best_rows(result)
    # NaN (a configuration where every lr diverged) propagates: the claims then fail
    rho = [
        float("nan") if np.isnan(loss).any() else float(spearmanr(share, loss).statistic)
        for share, loss, _ in c.values()
    ]
    return Summary(
        {
            "worst_rho": (strict_max(rho), "largest Spearman correlation (MLP share vs loss) over budgets"),
            "min_gap": (
                strict_min(float(loss[0] - loss[-1]) for _, loss, _ in c.values()),
                "smallest loss gap, smallest share minus largest share, over budgets (nats)",
            ),
            "n_monotone": (
                sum(bool(np.all(np.diff(loss) < 0)) for _, loss, _ in c.values()),
                "budgets where the loss falls at every step of the MLP share",
            ),
            "n_budgets": (len(c), "budgets"),
            "n_diverged": (
                sum(np.isnan(loss).sum() for _, loss, _ in c.values()),
                "configurations where every learning rate diverged",
            ),
            "entropy": (result["entropy"], "conditional entropy of the bigram chain (nats)"),
            "edge": (
                sum(r["lr"] in (min(lrs), max(lrs)) for r in best),
                "best learning rates at an end of the grid",
            ),
            "n_best": (len(best), "configurations (budget x split)"),
        }
    )


def markdown(result: dict) -> str:
    """The best-lr rows as a Markdown table."""
    rows = [
        [f"{b:,d}", s, r["mlp_width"], r["attn_rank"], r["lr"], r["train_loss"], r["test_loss"]]
        for b, (share, _, rs) in curves(result).items()
        for s, r in zip(share, rs)
    ]
    return markdown_table(
        ["budget", "MLP share", "MLP width h", "head dim k", "best lr", "training loss", "test loss"],
        rows,
        digits=3,
    )
