"""The k-hop family's members: the talk's first chapter's comparison (``book/khop``) and the names every study shares.

The comparison (K1-K3): one task and budget, four kinds of training data and one shallow model (:func:`members`,
:data:`SIZES`), what the chapter asserts of them (:func:`summary`), what a recorded file keeps of each run
(:func:`curves`) and the table of when each hop count is learned (:func:`learned_rows`). The names the studies share:
the exploratory run (:data:`EXPLORED`, advancing every :data:`EXPLORED_EVERY` steps), a member named by its
interval (:func:`interval_of`) or run with other last-stage data (:data:`RESEED_SUFFIX`), how a study-wide
override reaches each member (:func:`member_overrides`) and the sizes every study's summary reports
(:func:`run_sizes`).

The runs themselves are :mod:`companion.experiments.khop`'s; nothing it trains imports this module, so editing a
summary here re-keys no run of the base family (its cache key hashes :data:`companion.experiments.khop.MODULES`'
imports). The studies' modules that import these names train runs of their own, keyed on their imports, this
module among them.
"""

from __future__ import annotations

import numpy as np

from companion import config, report
from companion.experiments.khop import DATA, KHopExperiment
from companion.experiments.khop_curves import last_stage_at, learned_at, learned_cells

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


# the evaluation interval of the exploratory run that learned four hops (see the chapter)
EXPLORED_EVERY = 250


# its member in the seed study (:func:`companion.experiments.khop_studies.seed_members`)
EXPLORED = f"seed 0, every {EXPLORED_EVERY}"


# a run of a member with other batches on its last stage (:func:`companion.experiments.khop_stall_paths.reseed_name`)
RESEED_SUFFIX = ", last-stage data "


# a member's departures from a study-wide override (``python -m companion record khop --set ...``), by name:
# runs this multiple of the others' steps and evaluation interval
SCALED = {"mixture, 1 layer": SHALLOW_STEPS}


# keeps these settings of its own (and a "seed N, every M" its interval)
KEPT = {"mixture, 1 layer": ("depth",)}


def member_overrides(name: str, overrides: dict) -> dict:
    """The overrides of a whole study (``python -m companion record khop --set ...``) as member ``name`` takes
    them: a member in :data:`SCALED` multiplies ``steps`` and ``eval_every``, and one in :data:`KEPT` keeps
    those settings of its own (the single-layer run keeps its one layer: a ``depth`` override is the others'), as
    does a member named by its interval (:func:`companion.experiments.khop_four_hops.interval_name`, :data:`EXPLORED` among them) its ``eval_every``,
    and a run of any of them with other last-stage data (:func:`companion.experiments.khop_stall_paths.reseed_name`).

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
        "cumulative_stage": (
            int(np.asarray(runs["cumulative"]["stage"])[-1]),
            "cumulative: the stage it trains on at the end (its hop count)",
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


EVALUATED = ("step", "acc", "stage", "loss")  # what a run holds one entry of per evaluation


def curves(runs: dict[str, dict]) -> dict:
    """What a recorded file keeps of each run: the evaluation steps, the accuracy at every hop count, the
    curriculum stage and the training loss (:data:`EVALUATED`)."""
    return {key: {name: r[key] for name, r in runs.items()} for key in EVALUATED}


LEARNED_HEADER = ["run", "data", "layers", "learned at (steps), hops 1..k", "final accuracy, hops 1..k"]


def learned_rows(runs: dict[str, dict], members: dict[str, KHopExperiment], level: float = 0.9) -> list[list]:
    """One row per run: its data, depth, the step each hop count is first learned (``-`` never) and the final
    accuracies."""
    return [
        [name, members[name].data, members[name].layers, *learned_cells(r, level)] for name, r in runs.items()
    ]


def interval_of(name: str) -> tuple[int, int] | None:
    """(seed, interval) of an :func:`companion.experiments.khop_four_hops.interval_name`, None for another name.

    >>> interval_of("seed 3, every 100"), interval_of("seed 3")
    ((3, 100), None)
    """
    parts = name.split(", every ")
    if len(parts) != 2 or not parts[0].startswith("seed ") or not (parts[0][5:] + parts[1]).isdigit():
        return None
    return int(parts[0][5:]), int(parts[1])
