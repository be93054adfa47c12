"""The slide's K1 and K2 as rates (issue 55): how many training steps the model needs before its test accuracy
at k hops first reaches a level, as k grows, with k-hop data alone, a uniform mixture of 1..k hops and a
curriculum 1, 2, ..., k. Steps are samples over the batch (every run has the same batch). A run that never
reaches the level within its budget is censored there: its steps are at least the budget.

The same model at every k of a profile (the depth of the largest k's construction, log2 k + 1, and one layer
more, which the four-hop runs needed), so that only the task changes with k. Recorded
(``python -m companion record khop_rates``), one pack of replicas per k; shown in ``book/khop``."""

from __future__ import annotations

import math

import numpy as np

from companion import config, report
from companion.experiments.khop import KHopExperiment
from companion.experiments.khop_curves import learned_at
from companion.experiments.khop_members import SIZES

RATE_DATA = ("direct", "mixture", "curriculum")  # the slide's three kinds of training data

RATE_SEEDS = (0, 1)

RATE_LEVEL = 0.9  # the test accuracy at k hops that counts as solved

# the hop counts of each profile, and the settings every run of it shares (the step budget among them)
RATE_KS = {"quick": (2, 3, 4), "full": (2, 4, 8)}

RATE_SETTINGS = {
    "quick": {**SIZES["quick"], "steps": 6000, "eval_every": 100},
    "full": {**SIZES["full"], "steps": 30000, "eval_every": 250},
}


def rate_depth(profile: str | None = None) -> int:
    """The depth of every run of a profile: log2 of its largest k, rounded up, plus two.

    >>> rate_depth("quick"), rate_depth("full")
    (4, 5)
    """
    return math.ceil(math.log2(max(RATE_KS[config.get_profile(profile)]))) + 2


def rate_name(k: int, data: str, seed: int) -> str:
    """A member's name: ``"k=3, mixture, seed 1"``."""
    return f"k={k}, {data}, seed {seed}"


def rate_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """Every (k, kind of data, seed) of a profile (:data:`RATE_KS`, :data:`RATE_DATA`, :data:`RATE_SEEDS`), with
    the profile's :data:`RATE_SETTINGS` and :func:`rate_depth`."""
    profile = config.get_profile(profile)
    shared = {**RATE_SETTINGS[profile], "depth": rate_depth(profile)}
    return {
        rate_name(k, data, s): KHopExperiment.for_profile(profile, data=data, **{**shared, "k": k, "seed": s})
        for k in RATE_KS[profile]
        for data in RATE_DATA
        for s in RATE_SEEDS
    }


def steps_to_level(
    runs: dict[str, dict], level: float = RATE_LEVEL, censored: bool = False
) -> dict[tuple[int, str], np.ndarray]:
    """{(k, data): the steps at which each seed's test accuracy at k hops first reaches ``level``} (inf: never,
    within the run's budget; with ``censored``, the run's last evaluated step instead, a lower bound), from runs
    named as :func:`rate_name` names them."""
    out: dict[tuple[int, str], list[float]] = {}
    for name, r in runs.items():
        k, data, _ = _parse(name)
        at = float(learned_at(r, level)[-1])
        out.setdefault((k, data), []).append(float(r["step"][-1]) if censored and math.isinf(at) else at)
    return {key: np.asarray(v) for key, v in out.items()}


def _parse(name: str) -> tuple[int, str, int]:
    """(k, data, seed) of a member's name.

    >>> _parse("k=3, mixture, seed 1")
    (3, 'mixture', 1)
    """
    k, data, seed = name.split(", ")
    if not (k.startswith("k=") and seed.startswith("seed ") and data in RATE_DATA):
        raise ValueError(f"name={name!r}: allowed 'k=<k>, <data>, seed <s>' with data one of {RATE_DATA}")
    return int(k[2:]), data, int(seed[5:])


def growth(slow: dict[int, float], floor: dict[int, float]) -> tuple[float, float]:
    """From {k: steps} (inf: censored) and {k: the same steps, a censored run counted at its last step}, the factor
    from the smallest k to the largest: (the factor, inf when the largest k is censored; a lower bound, from
    ``floor`` at the largest k). Both are NaN when the smallest k is censored: there is nothing to grow from.

    >>> growth({2: 500.0, 4: 1500.0}, {2: 500.0, 4: 1500.0})
    (3.0, 3.0)
    >>> growth({2: 500.0, 4: math.inf}, {2: 500.0, 4: 6000.0})
    (inf, 12.0)
    """
    lo, hi = slow[min(slow)], slow[max(slow)]
    if not math.isfinite(lo):
        return math.nan, math.nan
    return hi / lo, floor[max(floor)] / lo


def rate_summary(runs: dict[str, dict], level: float = RATE_LEVEL) -> report.Summary:
    """The numbers of a finished :func:`rate_members` set: for each kind of data and k, the steps by which every
    seed reached ``level`` at k hops (the slower seed; inf: one never did within the budget) and how many seeds
    did; the factor from the smallest k to the largest (:func:`growth`), with its lower bound."""
    at = steps_to_level(runs, level)
    floor = steps_to_level(runs, level, censored=True)
    ks = sorted({k for k, _ in at})
    budget = max(float(r["step"][-1]) for r in runs.values())  # every run's, unless one is cut short
    out = {
        "rate_level": (level, "test accuracy at k hops that counts as solved"),
        "rate_budget": (int(budget), "training steps of every run (the censoring point; the longest run's)"),
        "rate_seeds": (len(next(iter(at.values()))), "seeds per kind of data and k"),
        "rate_k_min": (ks[0], "smallest k"),
        "rate_k_max": (ks[-1], "largest k"),
    }
    for data in RATE_DATA:
        slow = {k: float(at[(k, data)].max()) for k in ks}
        for k in ks:
            out[f"rate_{data}_k{k}"] = (
                slow[k],
                f"{data}, k = {k}: steps by which every seed reached the level",
            )
            out[f"rate_{data}_k{k}_n"] = (
                int(np.isfinite(at[(k, data)]).sum()),
                f"{data}, k = {k}: seeds that reached the level within the budget",
            )
        factor, low = growth(slow, {k: float(floor[(k, data)].max()) for k in ks})
        out[f"rate_{data}_growth"] = (factor, f"{data}: steps at the largest k over those at the smallest")
        out[f"rate_{data}_growth_low"] = (
            low,
            f"{data}: the same factor, a censored run counted at its last step (the budget)",
        )
    return report.Summary(out)


def rate_table(runs: dict[str, dict], level: float = RATE_LEVEL) -> tuple[list[str], list[list]]:
    """(header, rows) of the steps to ``level`` at k hops: one row per kind of data, one column per k, each
    seed's steps (``> budget`` for a run that never reached it)."""
    at = steps_to_level(runs, level)
    ks = sorted({k for k, _ in at})
    budget = max(int(r["step"][-1]) for r in runs.values())

    def cell(v: np.ndarray) -> str:
        return ", ".join(f"{s:.0f}" if math.isfinite(s) else f"> {budget}" for s in v)

    return ["data", *(f"k = {k}" for k in ks)], [
        [data, *(cell(at[(k, data)]) for k in ks)] for data in RATE_DATA
    ]


def _k(ks) -> str:
    return report.and_list([f"$k = {k}$" for k in ks])


def reach_text(runs: dict[str, dict], data: str, level: float = RATE_LEVEL) -> str:
    """What one kind of data's runs reach (:func:`steps_to_level`), as clauses: the k at which every seed reaches
    ``level`` (by the slower seed's step), those at which some do, those at which none does within the budget.

    >>> run = lambda at: {"acc": [[0.1], [0.1 if at > 100 else 1.0], [1.0 if at <= 200 else 0.1]], "step": [0, 100, 200]}
    >>> runs = {"k=2, mixture, seed 0": run(100), "k=2, mixture, seed 1": run(200),
    ...         "k=3, mixture, seed 0": run(200), "k=3, mixture, seed 1": run(900),
    ...         "k=4, mixture, seed 0": run(900), "k=4, mixture, seed 1": run(900)}
    >>> reach_text(runs, "mixture")
    "every seed reaches the level at $k = 2$ by step 200 (the slower seed's step); at $k = 3$ one of the two seeds does (by step 200); at $k = 4$ no seed does within the budget"
    >>> reach_text({n.replace("mixture", "direct"): run(900) for n in runs}, "direct")
    'no seed reaches the level at $k = 2$, $k = 3$ and $k = 4$ within the budget'
    """
    at = steps_to_level(runs, level)
    ks = sorted(k for k, d in at if d == data)
    every = [
        f"at $k = {k}$ by step {at[(k, data)].max():.0f}" for k in ks if np.isfinite(at[(k, data)]).all()
    ]
    clauses = (
        [f"every seed reaches the level {' and '.join(every)} (the slower seed's step)"] if every else []
    )
    for k in ks:
        v = at[(k, data)]
        n = int(np.isfinite(v).sum())
        if 0 < n < len(v):
            verb = (
                ("does" if n == 1 else "do") if clauses else ("reaches" if n == 1 else "reach") + " the level"
            )
            clauses.append(
                f"at $k = {k}$ {report.count_word(n)} of the {report.count_word(len(v))} seeds {verb} "
                f"(by step {v[np.isfinite(v)].min():.0f})"
            )
    none = [k for k in ks if not np.isfinite(at[(k, data)]).any()]
    if none:
        clauses.append(
            f"at {_k(none)} no seed does within the budget"
            if clauses
            else f"no seed reaches the level at {_k(none)} within the budget"
        )
    return "; ".join(clauses)


def rate_texts(rates: report.Summary, runs: dict[str, dict]) -> report.Summary:
    """book/khop's sentences on the rates study whose words follow the runs: the mixture's steps at each k for the
    overview (``rate_mixture_steps_text``), what direct training, the mixture and the curriculum reach
    (``rate_<data>_reach_text``, :func:`reach_text`) and the mixture's factor from the smallest k to the largest
    (``rate_mixture_factor_text``)."""
    budget = rates["rate_budget"]
    ks = sorted({int(n.split(", ")[0][2:]) for n in runs})
    steps = [
        (
            f"{rates[f'rate_mixture_k{k}']:.0f}"
            if math.isfinite(rates[f"rate_mixture_k{k}"])
            else f"more than {budget}"
        )
        + (f" steps at {report.count_word(k)} hops" if i == 0 else f" at {report.count_word(k)}")
        for i, k in enumerate(ks)
    ]
    kmin, kmax = ks[0], ks[-1]
    growth, low = rates["rate_mixture_growth"], rates["rate_mixture_growth_low"]
    if math.isnan(low):
        factor = f"no factor can be read, since at $k = {kmin}$ not every seed reaches the level"
    elif math.isinf(growth):
        factor = f"a factor of at least {low:.0f} from $k = {kmin}$ to $k = {kmax}$, where $O(k)$ gives {kmax / kmin:g}"
    else:
        factor = (
            f"a factor of {growth:.1f} from $k = {kmin}$ to $k = {kmax}$, where $O(k)$ gives {kmax / kmin:g}"
        )
    return report.Summary(
        {
            "rate_mixture_steps_text": (", ".join(steps), "the mixture's steps to the level at each k"),
            **{
                f"rate_{data}_reach_text": (
                    reach_text(runs, data, rates["rate_level"]),
                    f"what {data} reaches",
                )
                for data in RATE_DATA
            },
            "rate_mixture_factor_text": (factor, "the mixture's factor from the smallest k to the largest"),
        }
    )
