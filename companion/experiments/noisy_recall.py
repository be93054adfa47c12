"""The core experiment: a two-layer transformer on noisy in-context recall.

Main paper Section 3 (Figs. 3, 4, 7, 8), Appendix B.1 (pre-train on
alpha = 0, then fine-tune on alpha > 0), B.4 (several triggers), B.5 (other
feed-forward kinds; the first and last feed-forward layers are also
measured fully dropped) and J (synthetic IOI with L layers: ``task_kind="ioi"``). One function, :func:`run`, trains
and measures along training; the result is cached on disk (:mod:`companion.cache`), keyed by the
configuration and the source of the modules it uses, so re-running a chapter is cheap.

>>> RecallExperiment.quick().profile, RecallExperiment.full().d
('quick', 256)
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from companion import cache, config, probes
from companion.config import check_choice, check_float, check_int
from companion.data.ioi import IOITask
from companion.data.recall import LOSS_POSITIONS, NOISE_KINDS, RecallTask
from companion.data.streams import TrainingStream
from companion.models import ModelConfig, Transformer
from companion.train import LATE_FRACTION, TrainConfig, eval_schedule, late_from, late_mask, train

SCHEDULES = ("noisy", "finetune")
TASK_KINDS = ("recall", "ioi")  # Section 3 / Appendix J
RHO_GRID = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class RecallExperiment(config.Profiled):
    """Everything that determines a run. Validated before any work.

    ``schedule="noisy"`` trains ``steps`` steps on alpha; ``"finetune"``
    first trains ``pretrain_steps`` on alpha = 0 (Appendix B.1), then
    ``steps`` on alpha. Measurements are taken at every step up to
    ``dense_until`` (of each phase) and every ``eval_every`` steps after.
    ``final_trigger=False`` trains on the public code's sequences, which do not
    end with a forced trigger (only with ``loss_on="triggers"``); the test
    sequences end with one either way.
    """

    profile: str = "quick"
    d: int = 256
    seq_len: int = 256
    batch: int = 512
    steps: int = 2000
    lr: float = 0.03
    momentum: float = 0.9
    weight_decay: float = 1e-4
    alpha: float = 0.5
    noise: str = "new"
    loss_on: str = "final"
    triggers: tuple[int, ...] | None = None
    ff: tuple[str, ...] = ("mlp", "mlp")
    schedule: str = "noisy"
    task_kind: str = "recall"
    optimizer: str = "sgd"
    final_trigger: bool = True
    pretrain_steps: int = 0
    rhos: tuple[float, ...] = RHO_GRID
    truncate: str = "F2.U_in"
    eval_every: int = 50
    dense_until: int = 20
    n_test: int = 512
    seed: int = field(default_factory=config.book_seed)

    def __post_init__(self):
        config.check_run(self)
        check_float("alpha", self.alpha, 0.0, 1.0, high_open=True)
        check_choice("noise kind", self.noise, NOISE_KINDS)
        check_choice("loss_on", self.loss_on, LOSS_POSITIONS)
        check_choice("schedule", self.schedule, SCHEDULES)
        check_choice("task_kind", self.task_kind, TASK_KINDS)
        check_int("pretrain_steps", self.pretrain_steps, low=1 if self.schedule == "finetune" else 0)
        for rho in self.rhos:
            check_float("rho", rho, 0.0, 1.0)
        check_int("eval_every", self.eval_every, low=1)
        check_int("dense_until", self.dense_until, low=0)
        check_int("n_test", self.n_test, low=1)
        # build the pieces once so that bad values (trigger, ff kind, lr, ...) fail now
        self.task()
        self.model_config()
        self.train_config(self.steps)
        if self.truncate:
            Transformer(dataclasses.replace(self.model_config(), d=1, max_len=1)).matrix(self.truncate)

    @classmethod
    def quick(cls, **overrides) -> "RecallExperiment":
        """CPU-sized run (minutes on 2 cores); see the chapter for what it checks."""
        base = dict(
            profile="quick",
            d=128,
            seq_len=32,
            batch=128,
            steps=600,
            lr=0.03,
            eval_every=25,
            dense_until=20,
            n_test=256,
        )
        return cls(**{**base, **overrides})

    @classmethod
    def full(cls, **overrides) -> "RecallExperiment":
        """The paper's sizes: d = T = 256, batch 512, 2000 steps (B.6)."""
        base = dict(
            profile="full",
            d=256,
            seq_len=256,
            batch=512,
            steps=2000,
            lr=0.03,
            eval_every=50,
            dense_until=20,
            n_test=2048,
        )
        return cls(**{**base, **overrides})

    def task(self, alpha: float | None = None, final_trigger: bool | None = None) -> RecallTask | IOITask:
        """The training distribution (``alpha`` and ``final_trigger`` default to the run's). The test sequences
        always end with a trigger (``test_batches``): Fig. 3 measures the prediction after it."""
        alpha = self.alpha if alpha is None else alpha
        final_trigger = self.final_trigger if final_trigger is None else final_trigger
        if self.task_kind == "ioi":
            if not final_trigger:
                raise ValueError(
                    "synthetic IOI ends with its trigger: final_trigger=False is a recall-task option"
                )
            if self.triggers is not None and len(self.triggers) != 1:
                raise ValueError(f"triggers={self.triggers}: synthetic IOI has exactly one trigger")
            if (self.noise, self.loss_on) != ("new", "final"):
                raise ValueError("synthetic IOI uses noise='new' and loss_on='final' (Appendix J)")
            return IOITask(
                seq_len=self.seq_len, alpha=alpha, trigger=None if self.triggers is None else self.triggers[0]
            )
        return RecallTask(
            seq_len=self.seq_len,
            alpha=alpha,
            triggers=self.triggers,
            noise=self.noise,
            loss_on=self.loss_on,
            final_trigger=final_trigger,
        )

    def model_config(self) -> ModelConfig:
        return ModelConfig(vocab_size=self.task().vocab_size, d=self.d, max_len=self.seq_len, ff=self.ff)

    def train_config(self, steps: int) -> TrainConfig:
        return TrainConfig(
            steps=steps,
            batch=self.batch,
            lr=self.lr,
            momentum=self.momentum,
            weight_decay=self.weight_decay,
            optimizer=self.optimizer,
        )

    def test_batches(self):
        """The fixed clean (alpha = 0) and noisy (training alpha) test batches of this run."""
        streams = config.seed_streams(self.seed, ["test-data"])
        task = self.task(final_trigger=True)
        rng = np.random.default_rng(streams["test-data"])
        clean = task.with_alpha(0.0).sample(rng, self.n_test)
        noisy = task.sample(rng, self.n_test)
        return clean, noisy

    def validation_batch(self):
        """A clean (alpha = 0) held-out batch as large as the test set, from a stream of its own: for choices
        (a truncation's rho) that the test set must not make."""
        rng = np.random.default_rng(config.seed_streams(self.seed, ["validation-data"])["validation-data"])
        return self.task(final_trigger=True).with_alpha(0.0).sample(rng, self.n_test)

    def key(self) -> str:
        """Cache key: the configuration and the source of the modules that train and measure it."""
        return cache.key(self, MODULES)


def late_curve(curves: dict, key: str, frac: float = LATE_FRACTION) -> np.ndarray:
    """A recorded curve's values in its late window (``curves``: a recording's, as
    :func:`companion.experiments.summaries.recall_curves` writes them, with ``step``)."""
    return np.asarray(curves[key], dtype=float)[late_mask(curves["step"], frac)]


@dataclass
class RecallRun:
    """A finished run: its configuration, metric log and final model."""

    exp: RecallExperiment
    metrics: dict[str, np.ndarray]  # each (n_evals,) or (n_evals, n_rhos)
    state: dict = field(repr=False)
    seconds: float = 0.0
    device: str = "cpu"
    pretrained_state: dict | None = field(default=None, repr=False)
    diverged_at: int | None = None  # step at which the loss became non-finite (training stopped there)
    late_at: int | None = None  # a view at one late evaluation (:meth:`at_late`); None: the whole window
    late_phase: int = 1  # the phase whose late window the view reads at one evaluation

    def model(self, pretrained: bool = False) -> Transformer:
        """The final model (or the end of pre-training), on the CPU, in eval mode."""
        m = Transformer(self.exp.model_config(), seed=self.exp.seed)
        m.load_state_dict(self.pretrained_state if pretrained else self.state)
        return m.eval()

    def rho_index(self, rho: float) -> int:
        """Column of ``rho`` in the sweep metrics (``clean_p_correct[:, j]``, ...)."""
        j = int(np.argmin(np.abs(np.asarray(self.exp.rhos) - rho)))
        if abs(self.exp.rhos[j] - rho) > 1e-12:
            raise ValueError(f"rho={rho} was not measured: the grid is {self.exp.rhos}")
        return j

    def series(self, key: str, rho: float | None = None, phase: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """(steps since the phase started, values) of an evaluated metric in one phase.

        Phase 1 is training on alpha (the only phase of the noisy schedule),
        phase 0 pre-training on alpha = 0. ``rho`` picks a column of the sweep.
        """
        m = self.metrics
        keep = m["eval_phase"] == phase
        values = m[key][keep]
        if rho is not None:
            values = values[:, self.rho_index(rho)]
        start = self.exp.pretrain_steps if (phase == 1 and self.exp.schedule == "finetune") else 0
        return m["eval_step"][keep] - start, values

    def late_mean(
        self, key: str, rho: float | None = None, phase: int = 1, frac: float = LATE_FRACTION
    ) -> float:
        """Mean of a metric over the evaluations in the last ``frac`` of a phase's steps (:meth:`late_window`)."""
        return float(self.late_window(key, rho, phase, frac).mean())

    def late_drift(
        self, key: str, rho: float | None = None, phase: int = 1, frac: float = LATE_FRACTION
    ) -> float:
        """How far a metric still moves across the window of :meth:`late_mean`: the mean of the window's later half
        of evaluations less that of its earlier half (the middle one left out when their number is odd; 0 for a
        window of one). Near 0 where the curve has settled; a late mean read on a slope measures when the run got
        there, which moves with the seed and the machine's rounding (book/finetune)."""
        window = self.late_window(key, rho, phase, frac)
        half = len(window) // 2
        return float(window[-half:].mean() - window[:half].mean()) if half else 0.0

    def late_start(
        self, key: str, rho: float | None = None, phase: int = 1, frac: float = LATE_FRACTION
    ) -> float:
        """Where the last ``frac`` of a phase's evaluated steps begins (since the phase started): the window of
        :meth:`late_mean`."""
        return late_from(self.series(key, rho, phase)[0], frac)

    def late_window(
        self, key: str, rho: float | None = None, phase: int = 1, frac: float = LATE_FRACTION
    ) -> np.ndarray:
        """A metric's values at the evaluations from :meth:`late_start` on: what :meth:`late_mean` averages and
        :meth:`late_drift` compares (in a view of :meth:`at_late`, its one evaluation there)."""
        steps, values = self.series(key, rho, phase)
        window = values[late_mask(steps, frac)]
        if self.late_at is None or phase != self.late_phase:
            return window
        return window[self.late_at : self.late_at + 1]

    def late_count(self, phase: int = 1, frac: float = LATE_FRACTION) -> int:
        """How many evaluations the late window of a phase holds (in the whole run, whatever the view)."""
        return int(late_mask(self.series("eval_step", phase=phase)[0], frac).sum())

    def at_late(self, i: int, phase: int = 1) -> RecallRun:
        """The run read at the ``i``-th evaluation of the late window of ``phase`` alone: every ``late_*`` statistic
        of that phase sees that evaluation only, the rest of the run is the same (shared, not copied; the other
        phase's windows whole). For the check that a verdict read on a late mean does not depend on which evaluation
        the run stopped at (:func:`companion.experiments.late_verdicts.require_late_verdicts`).

        Raises:
            ValueError: ``i`` outside 0 .. late_count() - 1.
        """
        n = self.late_count(phase)
        if not (isinstance(i, (int, np.integer)) and 0 <= i < n):
            raise ValueError(f"i={i!r}: allowed an integer in 0 .. {n - 1} (the late window's evaluations)")
        view = copy.copy(self)
        view.late_at, view.late_phase = int(i), phase
        return view

    def first_step_above(self, key: str, threshold: float, rho: float | None = None, phase: int = 1) -> float:
        """First evaluated step (since the phase started) where the metric exceeds ``threshold``; inf if never."""
        steps, values = self.series(key, rho, phase)
        hit = np.nonzero(values > threshold)[0]
        return float(steps[hit[0]]) if len(hit) else float("inf")


MODULES = ("companion.experiments.noisy_recall",)  # what a cached run depends on (imports followed)


def first_batch(exp: RecallExperiment):
    """The first training batch of ``exp`` (pre-training's, for the fine-tuning schedule), drawn as training
    draws it, by the sampler in force (recordings keep its digest, :func:`companion.data.batch_digest`)."""
    task = exp.task().with_alpha(0.0) if exp.schedule == "finetune" else exp.task()
    return TrainingStream(exp.seed, "train-data").batch(task, exp.batch, 0)


def run(exp: RecallExperiment, *, device=None, progress: bool = True, use_cache: bool = True) -> RecallRun:
    """Train and measure (or load the cached result of) experiment ``exp``."""
    blob = cache.load_or_compute(
        "noisy_recall", exp, lambda: _train(exp, device, progress), MODULES, fmt="torch", use_cache=use_cache
    )
    return RecallRun(
        exp,
        blob["metrics"],
        blob["state"],
        blob["seconds"],
        blob["device"],
        blob.get("pretrained_state"),
        blob.get("diverged_at"),
    )


class Evaluator:
    """The measurements taken along training on the fixed clean and noisy test sets (one call per evaluation)."""

    def __init__(self, exp: RecallExperiment, model: Transformer, device):
        task = exp.task()
        clean_batch, noisy_batch = exp.test_batches()
        self.exp, self.model = exp, model
        self.clean_tokens = torch.as_tensor(clean_batch.inputs, device=device)
        self.clean_correct = torch.as_tensor(clean_batch.final_ybar, device=device)
        self.noisy_tokens = torch.as_tensor(noisy_batch.inputs, device=device)
        self.noisy_correct = torch.as_tensor(noisy_batch.final_ybar, device=device)
        self.distractor = (
            None if clean_batch.distractor is None else torch.as_tensor(clean_batch.distractor, device=device)
        )
        self.tau, self.q, self.triggers = task.noise_token, task.triggers[0], task.triggers

    @torch.no_grad()
    def __call__(self, step: int) -> dict:
        # One forward pass per test set: the rho sweep of the last feed-forward layer, the full model and the
        # dropped last feed-forward layer all start from the recorded stream u^L entering it, and dropping F1
        # re-runs the layers after the first attention from the recorded stream u^1 (exactly the same values
        # as separate forward passes, at a third of the cost).
        model, exp, tau = self.model, self.exp, self.tau
        L = len(model.layers)
        row, rec = {}, {}
        logits = model(self.clean_tokens, last_only=True, record=rec)
        if exp.truncate:
            sweep = probes.rho_sweep(
                model,
                self.clean_tokens,
                self.clean_correct,
                tau,
                exp.truncate,
                exp.rhos,
                self.distractor,
                u=rec[f"u{L}"],
            )
            row.update({f"clean_{k}": v for k, v in sweep.items()})
        full = probes.final_position_metrics(logits, self.clean_correct, tau, self.distractor)
        row.update({f"clean_full_{k}": v for k, v in full.items()})
        for l in sorted({1, L}):  # Figs. 10-12, 19: the first and the last feed-forward layer dropped
            if exp.ff[l - 1] != "none":  # a dropped F_l outputs zero, so x^l = u^l
                drop_logits = (
                    model.unembed(rec[f"u{L}"])
                    if l == L
                    else model.forward_from(1, rec["u1"], last_only=True)
                )
                drop = probes.final_position_metrics(drop_logits, self.clean_correct, tau, self.distractor)
                row.update({f"clean_dropF{l}_{k}": v for k, v in drop.items()})
        rec = {}
        noisy = probes.final_position_metrics(
            model(self.noisy_tokens, last_only=True, record=rec), self.noisy_correct, tau
        )
        row.update({f"noisy_{k}": v for k, v in noisy.items()})
        att = probes.recall_attention(
            model, self.noisy_tokens, self.triggers, tau, attn=rec[f"attn{L}"][:, 0]
        )
        row.update({f"attn_{k}": v for k, v in att.items() if k != "attn"})
        if exp.ff[-1] != "none":
            row[f"margin_F{L}"] = probes.ff_margin(model, L, self.q, tau)
        _, row["attn1_prev"] = probes.previous_token_attention(model, self.noisy_tokens[:64])
        if (
            L >= 2
        ):  # Fig. 9's matching logits of the first two layers: the trigger contrast at each evaluation
            ratio, ok = probes.trigger_contrast(probes.matching_logits(model, layer=2), self.triggers)
            row["match_ratio"], row["match_argmax_ok"] = ratio, float(sum(ok))
        return row


def _train(exp: RecallExperiment, device, progress: bool) -> dict:
    device = config.get_device(device)
    task = exp.task()
    clean = task.with_alpha(0.0)
    model = Transformer(exp.model_config(), seed=exp.seed).to(device)
    evaluate = Evaluator(exp, model, device)

    data_rng = TrainingStream(exp.seed, "train-data", device=device)
    t0 = time.perf_counter()
    logs, pretrained_state = [], None
    if exp.schedule == "finetune":
        pre = train(
            model,
            clean,
            exp.train_config(exp.pretrain_steps),
            data_rng,
            evaluate,
            eval_schedule(exp.pretrain_steps, exp.eval_every, exp.dense_until),
            progress=progress,
            desc="pre-train (alpha=0)",
            stop_on_nonfinite=True,
        )
        logs += [{**r, "phase": 0} for r in pre]
        pretrained_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    offset = exp.pretrain_steps if exp.schedule == "finetune" else 0
    if not any(r.get("diverged") for r in logs):
        main = train(
            model,
            task,
            exp.train_config(exp.steps),
            data_rng,
            evaluate,
            eval_schedule(exp.steps, exp.eval_every, exp.dense_until),
            progress=progress,
            desc=f"train (alpha={exp.alpha})",
            step_offset=offset,
            stop_on_nonfinite=True,
        )
        logs += [{**r, "phase": 1} for r in main]
    diverged_at = next((r["step"] for r in logs if r.get("diverged")), None)
    logs = [r for r in logs if not r.get("diverged")]
    if diverged_at is not None:
        print(f"training diverged (non-finite loss) at step {diverged_at}; metrics stop there")
    seconds = time.perf_counter() - t0

    metrics = _collate(logs)
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    return {
        "metrics": metrics,
        "state": state,
        "seconds": seconds,
        "device": config.device_name(device),
        "pretrained_state": pretrained_state,
        "exp": dataclasses.asdict(exp),
        "diverged_at": diverged_at,
    }


def _collate(logs: list[dict]) -> dict[str, np.ndarray]:
    """Rows -> columns. ``train_*`` columns hold every step; the rest only evaluated steps."""
    out = {
        "train_step": np.array([r["step"] for r in logs if "loss" in r]),
        "train_loss": np.array([r["loss"] for r in logs if "loss" in r]),
        "train_phase": np.array([r["phase"] for r in logs if "loss" in r]),
    }
    evals = [r for r in logs if len(r) > 3]
    if evals:
        keys = [k for k in evals[0] if k not in ("loss",)]
        for k in keys:
            out[k if k not in ("step", "phase") else f"eval_{k}"] = np.array([r[k] for r in evals])
    return out


IOI_LAYERS = {  # profile -> optimizer -> depths L (Figs. 19 and 20); the quick profile thins the SGD grid
    "quick": {"sgd": (3, 5, 7), "adam": (3, 4, 5)},
    "full": {"sgd": (3, 4, 5, 6, 7), "adam": (3, 4, 5)},
}
IOI_LR = {"sgd": 0.01, "adam": 1e-3}


def ioi_experiment(
    n_layers: int, optimizer: str = "sgd", profile: str | None = None, **overrides
) -> RecallExperiment:
    """Synthetic IOI (Appendix J) with L MLP layers; the last MLP's U_in is swept over rho.

    Quick: d = 128, T = 12, batch 64, 600 SGD or 400 Adam steps (the six runs of the quick grid take about
    2.5 minutes on one CPU thread; batch 128 took 4.5, over a chapter's 3). Full: the
    paper's d = T = 256, batch 512, 2000 steps. Learning rates (not given by
    the paper): SGD 0.01 (0.03 diverges without normalisation at these
    depths), Adam 1e-3.

    >>> ioi_experiment(3).truncate, ioi_experiment(3, "adam").lr
    ('F3.U_in', 0.001)
    >>> ioi_experiment(0)
    Traceback (most recent call last):
    ...
    ValueError: n_layers (L)=0 is out of range: allowed [1, inf)
    """
    check_int("n_layers (L)", n_layers, low=1)
    check_choice("optimizer", optimizer, ("sgd", "adam"))
    sizes = (
        dict(
            d=128,
            seq_len=12,
            batch=64,
            steps=600 if optimizer == "sgd" else 400,
            eval_every=50,
            dense_until=0,
            n_test=512,
            rhos=(0.0, 0.01, 0.05, 1.0),
        )
        if config.get_profile(profile) == "quick"
        else dict(eval_every=100, dense_until=0, rhos=(0.0, 0.01, 0.02, 0.05, 0.1, 1.0))
    )
    base = dict(
        task_kind="ioi",
        ff=("mlp",) * n_layers,
        truncate=f"F{n_layers}.U_in",
        optimizer=optimizer,
        lr=IOI_LR[optimizer],
        **sizes,
    )
    return RecallExperiment.for_profile(profile, **{**base, **overrides})
