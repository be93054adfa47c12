"""The headline claim as a function of scale (Fig. 3: dropping F2 gives the correct token with p ~ 0.98).

A ladder of sizes from the quick profile towards the paper's (d = T = 256,
batch 512, 2000 steps), each run for the paper's choices (a new noise token,
loss on the final position) and the public code's (an existing token as noise,
loss on every trigger occurrence, training sequences without a forced final
trigger). The runs are made outside the book with ``python -m companion record``
(see :func:`commands`) and committed under ``data/recorded/``; the chapter plots
what is there.

>>> len(LADDER), sorted(CHOICES)
(4, ['paper', 'public code'])
>>> commands()[1]
'python -m companion record recall --profile quick --set final_trigger=False --set loss_on=triggers --set noise=existing'
"""

from __future__ import annotations

import numpy as np

from companion import config, recorded
from companion.experiments import catalog
from companion.experiments.noisy_recall import RecallExperiment, late_curve
from companion.report import Summary

# Rungs of the ladder: overrides of the quick profile (rung 0 is the quick profile itself). The last two took
# about 25 and 50 minutes on two CPU threads (see each record's train_seconds); the paper's size (the full
# profile) needs a GPU.
LADDER = (
    {},
    dict(d=128, seq_len=64, batch=256, steps=1000, eval_every=50, n_test=512),
    dict(d=128, seq_len=128, batch=256, steps=2000, eval_every=100, n_test=512),
    dict(d=256, seq_len=128, batch=256, steps=2000, eval_every=100, n_test=512),
)
# The public code (leichen2018/ATTN_vs_MLP) also has no forced final trigger in its training sequences.
CHOICES = {"paper": {}, "public code": dict(noise="existing", loss_on="triggers", final_trigger=False)}
PAPER_SIZE = dict(d=256, seq_len=256, batch=512, steps=2000)


def commands(rungs=None) -> list[str]:
    """The ``record`` command of every (rung, choice), smallest first."""
    rungs = range(len(LADDER)) if rungs is None else rungs
    out = []
    for i in rungs:
        for c in CHOICES.values():
            settings = {**LADDER[i], **c}
            recorded.configure(
                {"recall": catalog.recall("quick")}, settings
            )  # validated before anything runs
            out.append(recorded.command("recall", "quick", settings))
    return out


def size(rec: recorded.Recorded) -> dict:
    """d, T, batch and steps of a recorded run."""
    return {k: rec.config[k] for k in PAPER_SIZE}


def work(rec: recorded.Recorded) -> float:
    """Training tokens processed (batch x T x steps), the x axis of the scale plot."""
    s = size(rec)
    return float(s["batch"] * s["seq_len"] * s["steps"])


def choice(rec: recorded.Recorded) -> str | None:
    """Which choice a recorded run made ('paper', 'public code'), or None if neither."""
    fields = RecallExperiment.__dataclass_fields__  # a field a file predates has its default (record.stale)
    defaults = {k: fields[k].default for k in ("noise", "loss_on", "final_trigger")}
    mine = {k: rec.config.get(k, v) for k, v in defaults.items()}
    for name, c in CHOICES.items():
        if mine == {**defaults, **c}:
            return name
    return None


def runs() -> dict[str, list[recorded.Recorded]]:
    """The committed ladder runs per choice, in order of work (rungs not yet recorded are absent)."""
    wanted = [{**r, **c} for r in LADDER for c in CHOICES.values()]
    out = {name: [] for name in CHOICES}
    for rec in recorded.runs("recall"):
        if rec.profile == "quick" and any(rec.overrides == w for w in wanted):
            out[choice(rec)].append(rec)
    return {k: sorted(v, key=work) for k, v in out.items()}


def table(ladder: dict[str, list[recorded.Recorded]]) -> list[list]:
    """Rows (choice, d, T, batch, steps, p_correct dropped, p_noise full, train minutes, device)."""
    return [
        [
            name,
            *size(r).values(),
            r.summary["p_correct_drop"],
            r.summary["p_noise_full"],
            r.train_seconds / 60,
            r.device,
        ]
        for name, recs in ladder.items()
        for r in recs
    ]


TABLE_HEADER = [
    "choice",
    "d",
    "T",
    "batch",
    "steps",
    "p(correct), F2 dropped",
    "p(noise), full model",
    "minutes",
    "device",
]


def summary(ladder: dict[str, list[recorded.Recorded]]) -> Summary:
    """The trend of the headline number over the ladder, per choice: first and last rung, and the slope of
    p(correct | F2 dropped) in log10(training tokens) fitted over the recorded rungs."""
    out = {}
    for name, recs in ladder.items():
        key = name.replace(" ", "_")
        if not recs:
            continue
        x = np.log10([work(r) for r in recs])
        y = np.array([r.summary["p_correct_drop"] for r in recs])
        out[f"{key}_rungs"] = (len(recs), f"{name} choices: rungs recorded")
        out[f"{key}_first"] = (y[0], f"{name}: p(correct), F2 dropped, smallest rung")
        out[f"{key}_last"] = (y[-1], f"{name}: p(correct), F2 dropped, largest rung")
        out[f"{key}_noise_last"] = (
            recs[-1].summary["p_noise_full"],
            f"{name}: p(noise) of the full model, largest rung",
        )
        if len(recs) > 1:
            slope, intercept = np.polyfit(x, y, 1)
            out[f"{key}_slope"] = (
                float(slope),
                f"{name}: d p / d log10(tokens), least squares over the rungs",
            )
            out[f"{key}_at_paper_size"] = (
                float(min(1.0, intercept + slope * np.log10(paper_work()))),
                f"{name}: the fitted line at the paper's size (capped at 1)",
            )
    by_size = {
        name: {tuple(size(r).values()): r.summary["p_correct_drop"] for r in recs}
        for name, recs in ladder.items()
    }
    common = sorted(set(by_size.get("paper", {})) & set(by_size.get("public code", {})))
    if common:
        gaps = [by_size["public code"][k] - by_size["paper"][k] for k in common]
        out["choice_gap"] = (
            float(np.mean(gaps)),
            f"public code minus paper choices: p(correct), F2 dropped, "
            f"mean over the {len(common)} sizes run with both",
        )
        out["choice_gap_min"] = (float(np.min(gaps)), "the smallest of those differences")
    return Summary(out)


def paper_work() -> float:
    """Training tokens of the paper's run: batch 512 x T 256 x 2000 steps."""
    return float(PAPER_SIZE["batch"] * PAPER_SIZE["seq_len"] * PAPER_SIZE["steps"])


# --- Appendix B.6: "stable for any learning rate between 0.001 and 0.03" ---

LRS = (0.001, 0.003, 0.01, 0.03)  # the paper's range, a factor of about 3 apart
LR_BASE = {"quick": dict(steps=2000), "full": {}}  # each profile's sizes with the paper's 2000 steps


def lr_settings(profile: str = "quick") -> list[dict]:
    """The ``record recall`` settings of every learning rate of the sweep at a profile's sizes."""
    return [{**LR_BASE[config.get_profile(profile)], "lr": lr} for lr in LRS]


def lr_commands(profile: str = "quick") -> list[str]:
    """The ``record`` command of every learning rate of the sweep at a profile's sizes."""
    out = []
    for settings in lr_settings(profile):
        recorded.configure({"recall": catalog.recall(profile)}, settings)  # validated before anything runs
        out.append(recorded.command("recall", profile, settings))
    return out


def lr_runs(profile: str = "quick") -> dict[float, recorded.Recorded]:
    """The committed runs of the sweep at a profile's sizes, by learning rate (absent if not recorded)."""
    base = LR_BASE[profile]
    out = {}
    for rec in recorded.runs("recall"):
        o = rec.overrides
        if rec.profile == profile and set(o) == {*base, "lr"} and all(o[k] == v for k, v in base.items()):
            out[float(o["lr"])] = rec
    return dict(sorted(out.items()))


LR_HEADER = [
    "lr",
    "p(correct), F2 dropped",
    "p(noise), full model",
    "p(noise) > 0.5 from step",
    "p(correct), F2 dropped, > 0.5 from step",
    "minutes",
    "device",
]


def lr_table(runs: dict[float, recorded.Recorded]) -> list[list]:
    """Rows of :data:`LR_HEADER`, one per recorded learning rate."""
    return [
        [
            lr,
            r.summary["p_correct_drop"],
            r.summary["p_noise_full"],
            r.summary["noise_step"],
            r.summary["icl_step"],
            r.train_seconds / 60,
            r.device,
        ]
        for lr, r in runs.items()
    ]


def lr_summary(runs: dict[float, recorded.Recorded], prefix: str = "") -> Summary:
    """The sweep's headline numbers: their spread over the learning rates and the ends of the range
    (NaN when nothing is recorded, so that a check of them fails rather than passes); names prefixed with
    ``prefix`` (to glue two sweeps on one page).

    ``noise_step`` and ``icl_step`` are the noisy-recall chapter's: the first step at which the full model's
    p(noise) on noisy data, and p(correct) with F2 dropped on clean data, exceed 0.5 (inf: never).
    """
    nan = float("nan")
    p = {lr: r.summary["p_correct_drop"] for lr, r in runs.items()} or {nan: nan}
    lo, hi = min(p), max(p)
    entries = {
        "lr_runs": (len(runs), "learning rates recorded"),
        "lr_low": (lo, "the smallest learning rate recorded"),
        "lr_high": (hi, "the largest"),
        "lr_p_low": (p[lo], "p(correct), F2 dropped, at the smallest learning rate"),
        "lr_p_high": (p[hi], "the same at the largest"),
        "lr_p_spread": (
            max(p.values()) - min(p.values()),
            "max - min of p(correct), F2 dropped, over the sweep",
        ),
        "lr_noise_step_max": (
            max((r.summary["noise_step"] for r in runs.values()), default=nan),
            "the latest step at which the noise is learned, over the sweep",
        ),
        "lr_icl_step_low": (
            runs[lo].summary["icl_step"] if runs else nan,
            "step at which the in-context mechanism is learned, smallest learning rate (inf: never)",
        ),
    }
    return Summary({prefix + k: v for k, v in entries.items()})


# --- Fig. 3 over seeds at the paper's configuration: the two choices, and fp32 against TF32 ---

SEEDS = (0, 1, 2)
REFERENCE = 0.98  # the paper's p(correct | F2 dropped), Fig. 3
AGREEMENT_FLOOR = 0.01  # the least distance from REFERENCE counted as agreement, whatever the seeds' spread


def seed_runs(
    choice: str = "paper", precision: str = "fp32", profile: str = "full"
) -> dict[int, recorded.Recorded]:
    """The committed Fig. 3 runs at a profile's sizes with one of :data:`CHOICES` and one precision, by seed
    (seeds of :data:`SEEDS` only; absent if not recorded; nothing else overridden).

    Raises:
        ValueError: an unknown choice, precision or profile.
    """
    config.check_choice("choice", choice, tuple(CHOICES))
    config.check_choice("precision", precision, config.PRECISIONS)
    profile = config.get_profile(profile)
    out = {}
    for rec in recorded.runs("recall", profile=profile, precision=precision):
        others = {k: v for k, v in rec.overrides.items() if k != "seed"}
        if others == CHOICES[choice] and rec.config["seed"] in SEEDS:
            out[rec.config["seed"]] = rec
    return dict(sorted(out.items()))


def seed_commands(choice: str = "paper", precision: str = "fp32", profile: str = "full") -> list[str]:
    """The ``record`` command of every seed of :func:`seed_runs`."""
    profile = config.get_profile(profile)
    out = []
    for seed in SEEDS:
        settings = {**CHOICES[choice], **({"seed": seed} if seed else {})}
        recorded.configure({"recall": catalog.recall(profile)}, settings)  # validated before anything runs
        out.append(recorded.command("recall", profile, settings, precision))
    return out


def excess(values, reference: float = REFERENCE) -> float:
    """How far the mean of ``values`` (one per seed) lies from ``reference`` beyond what agreement allows:
    ``|mean - reference| - max(2 SD, AGREEMENT_FLOOR)`` (SD over the seeds, ddof = 1). At most 0: the seeds
    reproduce ``reference``. NaN with fewer than :data:`SEEDS` values (a check of it fails rather than passes).

    >>> round(excess([0.97, 0.98, 0.99]), 3)  # mean on the reference
    -0.02
    >>> round(excess([0.958, 0.962, 0.963]), 4)  # 0.019 away, allowed max(0.0053, 0.01)
    0.009
    """
    v = np.asarray(values, dtype=float)
    if len(v) < len(SEEDS):
        return float("nan")
    return float(abs(v.mean() - reference) - max(2 * v.std(ddof=1), AGREEMENT_FLOOR))


def late_excess(by_choice: dict[str, dict[int, recorded.Recorded]]) -> dict[str, np.ndarray]:
    """Per choice, :func:`excess` of its seeds' p(correct | F2 dropped) at each evaluation of the recorded curves'
    late window (:func:`companion.experiments.noisy_recall.late_curve`, the window of the late means that
    :func:`choice_summary` reads), the seeds taken at the same evaluation: what the verdict on the late means would
    have been had the runs stopped there (:func:`companion.experiments.late_verdicts.require_same_verdicts`).

    Raises:
        ValueError: a choice whose seeds' curves were evaluated at different steps.
    """
    out = {}
    for name, runs in by_choice.items():
        steps = {tuple(r.curves["step"]) for r in runs.values()}
        if len(steps) > 1:
            raise ValueError(f"{name} choices: the seeds' curves are evaluated at different steps")
        windows = [late_curve(r.curves, "p_correct_drop") for r in runs.values()]
        out[name] = np.array([excess(list(at)) for at in np.array(windows).T])
    return out


CHOICE_HEADER = [
    "choice",
    "seeds",
    "p(correct), F2 dropped: each seed",
    "mean",
    "SD",
    "excess",
    "reproduces 0.98",
]


def choice_table(by_choice: dict[str, dict[int, recorded.Recorded]]) -> list[list]:
    """Rows of :data:`CHOICE_HEADER`: each choice's seeds, their mean and SD, :func:`excess` and its verdict."""
    rows = []
    for name, runs in by_choice.items():
        p = [r.summary["p_correct_drop"] for r in runs.values()]
        e = excess(p)
        rows.append(
            [
                name,
                ", ".join(map(str, runs)),
                ", ".join(f"{x:.4f}" for x in p),
                float(np.mean(p)) if p else float("nan"),
                float(np.std(p, ddof=1)) if len(p) > 1 else float("nan"),
                e,
                "yes" if e <= 0 else "no" if e > 0 else "not recorded",
            ]
        )
    return rows


def choice_summary(by_choice: dict[str, dict[int, recorded.Recorded]]) -> Summary:
    """Per choice: seeds recorded, mean and SD of p(correct | F2 dropped) over them, and :func:`excess`."""
    out = {}
    for name, runs in by_choice.items():
        key = name.replace(" ", "_")
        p = [r.summary["p_correct_drop"] for r in runs.values()]
        out[f"seeds_{key}_n"] = (len(p), f"{name} choices: seeds recorded at the paper's size")
        out[f"seeds_{key}_mean"] = (
            float(np.mean(p)) if p else float("nan"),
            f"{name} choices: p(correct), F2 dropped, mean over the seeds",
        )
        out[f"seeds_{key}_sd"] = (
            float(np.std(p, ddof=1)) if len(p) > 1 else float("nan"),
            f"{name} choices: its SD over the seeds",
        )
        out[f"seeds_{key}_excess"] = (
            excess(p),
            f"{name} choices: |mean - {REFERENCE}| - max(2 SD, {AGREEMENT_FLOOR}) (at most 0: reproduces)",
        )
    return Summary(out)


PRECISION_HEADER = [
    "claim",
    "fp32: mean",
    "fp32: SD",
    "TF32: mean",
    "difference (absolute)",
    "2 SD",
    "within",
]


def precision_ratio(fp32, tf32) -> float:
    """|mean(tf32) - mean(fp32)| over 2 SD of the fp32 values (ddof = 1): below 1 where TF32 moves the mean by
    less than the seeds do. Equal constant values give 0; a difference where the fp32 seeds agree exactly, inf;
    NaN with fewer than :data:`SEEDS` values on either side.

    >>> precision_ratio([1.0, 1.0, 1.0], [1.0, 1.0, 1.0]), precision_ratio([1.0, 1.0, 1.0], [1.0, 1.0, 2.0])
    (0.0, inf)
    >>> round(precision_ratio([0.1, 0.2, 0.3], [0.2, 0.3, 0.4]), 3)
    0.5
    """
    a, b = np.asarray(fp32, dtype=float), np.asarray(tf32, dtype=float)
    if min(len(a), len(b)) < len(SEEDS):
        return float("nan")
    d, two_sd = abs(b.mean() - a.mean()), 2 * a.std(ddof=1)
    if two_sd == 0:
        return 0.0 if d == 0 else float("inf")
    return float(d / two_sd)


def precision_table(fp32: dict[int, recorded.Recorded], tf32: dict[int, recorded.Recorded]) -> list[list]:
    """Rows of :data:`PRECISION_HEADER`, one per claim the Fig. 3 runs record (the seeds both precisions have)."""
    seeds = sorted(set(fp32) & set(tf32))
    claim_ids = sorted(set.intersection(*(set(r.claims) for r in [*fp32.values(), *tf32.values()])))
    rows = []
    for cid in claim_ids:
        a = [fp32[s].claims[cid] for s in seeds]
        b = [tf32[s].claims[cid] for s in seeds]
        r = precision_ratio(a, b)
        two_sd = 2 * float(np.std(a, ddof=1)) if len(a) > 1 else float("nan")
        rows.append(
            [
                cid,
                float(np.mean(a)),
                two_sd / 2,
                float(np.mean(b)),
                abs(np.mean(b) - np.mean(a)),
                two_sd,
                r < 1,
            ]
        )
    return rows


def precision_summary(fp32: dict[int, recorded.Recorded], tf32: dict[int, recorded.Recorded]) -> Summary:
    """The comparison's verdict: seeds compared, and the largest :func:`precision_ratio` over Fig. 3's claims
    (NaN when fewer than :data:`SEEDS` seeds are recorded in both precisions)."""
    seeds = sorted(set(fp32) & set(tf32))
    claim_ids = (
        sorted(set.intersection(*(set(r.claims) for r in [*fp32.values(), *tf32.values()]))) if seeds else []
    )
    ratios = {
        cid: precision_ratio([fp32[s].claims[cid] for s in seeds], [tf32[s].claims[cid] for s in seeds])
        for cid in claim_ids
    }
    worst = max(ratios, key=lambda c: ratios[c]) if ratios else ""
    return Summary(
        {
            "precision_seeds": (len(seeds), "seeds recorded in both fp32 and TF32"),
            "precision_claims": (len(ratios), "Fig. 3 claims compared"),
            "precision_ratio_max": (
                ratios[worst] if ratios else float("nan"),
                f"the largest |mean(TF32) - mean(fp32)| / (2 SD of fp32) over the claims ({worst})",
            ),
        }
    )
