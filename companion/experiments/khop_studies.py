"""The k-hop family's recorded studies at k = 4: their settings and members (the seed, interval, width,
step-size, stage and start studies, :class:`SeedVariant`), the readers of their recordings (:func:`recorded`,
:func:`recorded_runs`, :func:`recorded_summary`), cutting a run at a step (:func:`truncated`) and comparing two
runs of a seed (:func:`paired_difference`, :func:`prefix_gap`). The task, the model and the training are
:mod:`companion.experiments.khop`'s; the chapters' analyses are their own modules."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from companion import config, report
from companion import recorded as recorded_files  # the recorded files (this module's `recorded` reads one)
from companion.experiments.khop import KHopExperiment, hop_levels
from companion.experiments.khop_curves import last_stage_at, learned_cells
from companion.experiments.khop_members import EXPLORED, EXPLORED_EVERY, SIZES, interval_of

# --- recorded runs at a larger k (``python -m companion record khop --profile quick --set k=4 ...``) ---

RECORDED_K = 4  # the recorded CPU study beside the live runs: the quick members at k = 4, longer


RECORDED_SETTINGS = {"k": RECORDED_K, "steps": 8000, "eval_every": 100}


# the same study with one more layer than log2 k + 1 (the single-layer run keeps its one layer)
RECORDED_DEEPER = {**RECORDED_SETTINGS, "depth": math.ceil(math.log2(RECORDED_K)) + 2}


def recorded(settings: dict | None = None, experiment: str = "khop", sampler: str | None = None):
    """A recorded CPU study: the quick profile's members (``experiment="khop"``; ``"khop_seeds"``: the
    :func:`seed_members`) with ``settings`` (default :data:`RECORDED_SETTINGS`; :data:`RECORDED_DEEPER`,
    :data:`SEED_SETTINGS`), the latest file a build under ``sampler`` reads (default: the sampler in force).

    Raises:
        ValueError: none is recorded (the message gives the command that records it).
    """
    settings = RECORDED_SETTINGS if settings is None else settings
    return recorded_files.latest(experiment, "quick", settings, sampler=sampler)


def study_recorded(study: tuple[str, dict] | SeedVariant, sampler: str | None = None):
    """The recording a build under ``sampler`` (default: the sampler in force) reads of a study named by
    (experiment, settings), or of a variant (its recording ``khop_<tag>``): :func:`recorded`.

    Raises:
        ValueError: none is recorded (the message gives the command that records it).
    """
    if isinstance(study, SeedVariant):
        return recorded(study.settings(), experiment=f"khop_{study.tag}", sampler=sampler)
    experiment, settings = study
    return recorded(settings, experiment=experiment, sampler=sampler)


def recorded_runs(rec) -> tuple[dict[str, dict], dict[str, KHopExperiment]]:
    """A recorded study's runs (as :func:`run` returns them, curves only) and their configurations."""
    from companion.experiments.khop_recordings import recordables  # declared apart, read back here

    members = recordables()[rec.experiment].build(rec.profile, rec.settings())
    c = rec.curves
    if set(members) - set(c["step"]):
        raise ValueError(
            f"{rec.path.name} holds the runs {sorted(c['step'])}, and the study's members are now "
            f"{sorted(members)}: allowed a recording of every member (record it again: {rec.command})"
        )
    runs = {
        name: {
            "step": np.asarray(c["step"][name]),
            "acc": np.asarray(c["acc"][name]),
            "stage": np.asarray(c["stage"][name]),
            "loss": np.asarray(c["loss"][name], dtype=float),
            "N": members[name].N,
        }
        for name in members
    }
    return runs, members


def study_summary(rec):
    """The summary a recorded study's recordable declares (:func:`companion.experiments.khop_members.summary`,
    :func:`companion.experiments.khop_four_hops.seeds_summary`, ...): a function of its runs."""
    from companion.experiments.khop_recordings import recordables  # declared apart, read back here

    return recordables()[rec.experiment].summary


def recorded_summary(rec, prefix: str = "rec_", minutes_key: str = "minutes") -> report.Summary:
    """The chapter's summary of a recorded study (:func:`study_summary`), recomputed from its curves, its names
    prefixed (to glue beside the live ones), with its training time (``prefix + minutes_key``)."""
    runs, _ = recorded_runs(rec)
    return rec.as_summary(minutes_key, study_summary(rec)(runs), prefix)


# --- several seeds of the cumulative curriculum at k = 4 with one more layer (recorded: ``record khop_seeds``) ---

SEEDS = (0, 1, 2)


SEED_SETTINGS = {"k": RECORDED_K, "steps": 16000, "eval_every": 100, "depth": RECORDED_DEEPER["depth"]}


def seed_name(seed: int) -> str:
    """A seed study member's name: ``"seed 0"``, ..."""
    return f"seed {seed}"


def seed_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """The cumulative curriculum of :func:`members` over :data:`SEEDS` (``"seed 0"``, ...; the seed fixes the
    hidden permutations, the initialisation and the data), and seed 0 again with its stages advanced (and its
    accuracy measured) every :data:`EXPLORED_EVERY` steps (:data:`EXPLORED`, which keeps that interval under a
    study-wide override)."""
    size = SIZES[config.get_profile(profile)]
    out = {
        seed_name(s): KHopExperiment.for_profile(profile, data="cumulative", **{**size, "seed": s})
        for s in SEEDS
    }
    out[EXPLORED] = KHopExperiment.for_profile(
        profile, data="cumulative", **{**size, "seed": 0, "eval_every": EXPLORED_EVERY}
    )
    return out


def seed_rows(runs: dict[str, dict], members: dict[str, KHopExperiment], level: float = 0.9) -> list[list]:
    """:func:`learned_rows` of a seed study with each run's seed, evaluation interval and the step it moved
    to its last stage."""
    rows = []
    for name, r in runs.items():
        at, final = learned_cells(r, level)
        rows.append(
            [name, members[name].seed, members[name].eval_every, at, f"{last_stage_at(r):.0f}", final]
        )
    return rows


SEED_HEADER = [
    "run",
    "seed",
    "advances every",
    "learned at (steps), hops 1..k",
    "on the last stage from",
    "final accuracy, hops 1..k",
]


# the longest wait for four hops so far is about 4000 steps
INTERVAL_SETTINGS = SEED_SETTINGS | {"steps": 10000}


def seed_interval(name: str) -> tuple[int, int]:
    """(seed, interval) of a run of the seed or interval studies: an :func:`companion.experiments.khop_four_hops.interval_name`, or a
    :func:`seed_name`, which advances every :data:`SEED_SETTINGS`' interval.

    >>> seed_interval("seed 3, every 250"), seed_interval("seed 1")
    ((3, 250), (1, 100))
    """
    return interval_of(name) or (int(name[5:]), SEED_SETTINGS["eval_every"])


def truncated(r: dict, steps: int) -> dict:
    """A run's curves up to step ``steps`` (what a run of that many steps records, for a run whose training does
    not depend on its budget, as this module's do).

    Raises:
        ValueError: the run did not train that long.
    """
    step = np.asarray(r["step"])
    if steps > step[-1]:
        raise ValueError(f"steps={steps} is beyond the run's last evaluation {int(step[-1])}")
    keep = step <= steps
    return {**r, **{key: np.asarray(r[key])[keep] for key in ("step", "acc", "stage", "loss")}}


def seed_list(seeds) -> str:
    """Seeds as the text names them: ``"0, 2"``, ``"none"``."""
    return ", ".join(str(s) for s in sorted(seeds)) or "none"


def seed_phrase(seeds: str, one: str, many: str | None = None) -> str:
    """The subject and verb of a sentence about the seeds :func:`seed_list` names (``"none"``: no seed), the verb
    agreeing: ``one`` with one seed or none, ``many`` (default ``one``) with several.

    >>> seed_phrase("2", "is lost", "are lost"), seed_phrase("1, 4", "is lost", "are lost")
    ('Seed 2 is lost', 'Seeds 1, 4 are lost')
    >>> seed_phrase("none", "learns four hops only every 250 steps")
    'No seed learns four hops only every 250 steps'
    """
    if seeds == "none":
        return f"No seed {one}"
    several = "," in seeds
    return f"Seed{'s' if several else ''} {seeds} {(many or one) if several else one}"


def paired_rows(groups: list[dict[int, dict]], level: float = 0.9) -> list[list]:
    """One row per seed of several studies ({seed: run} each, in the columns' order): in each, the step each
    hop count is first learned, the move to the last stage ("-": never) and the final accuracies ("(not run)"
    where a study lacks the seed)."""
    rows = []
    for s in sorted(set().union(*groups)):
        row = [s]
        for runs in groups:
            r = runs.get(s)
            if r is None:
                row += ["(not run)"] * 3
            else:
                at, final = learned_cells(r, level)
                move = last_stage_at(r)
                row += [at, f"{move:.0f}" if np.isfinite(move) else "-", final]
        rows.append(row)
    return rows


def paired_header(titles) -> list[str]:
    """:func:`paired_rows`' header, the studies titled ``titles``."""
    return [
        "seed",
        *[
            f"{t}: {c}"
            for t in titles
            for c in ("learned at, hops 1..k", "last stage from", "final, hops 1..k")
        ],
    ]


INTERVAL_LONG_SETTINGS = INTERVAL_SETTINGS | {"steps": 20000}


# --- the same seeds with one setting changed: twice the width (``record khop_wide``), a third of the step size
# (``record khop_lr``), the stages 1, 2, 4 (``record khop_doubling``) ---


@dataclass(frozen=True)
class SeedVariant:
    """The cumulative curriculum of :func:`seed_members` for seeds :data:`VARIANT_SEEDS` advancing every 100 steps
    (the interval study's runs) with one setting changed: ``field`` is the profile's value times ``num / den`` (or
    ``to``, when given), the rest as before, for ``steps`` steps; with ``over``, another variant, that variant's
    runs with this setting changed too, compared with its recorded runs instead of the profile's. Recorded as
    ``khop_<tag>``; its summary entries are ``<tag>_*`` and those of the base runs of the same seeds
    ``<tag>_<base>_*``; ``who`` and ``base_who`` name the two populations."""

    tag: str
    field: str
    num: int
    den: int
    steps: int
    who: str
    base: str
    base_who: str
    to: object = None
    over: SeedVariant | None = None

    def value(self, profile: str | None = None):
        """The changed setting's value in ``profile``."""
        if self.to is not None:
            return self.to
        v = SIZES[config.get_profile(profile)].get(self.field, getattr(KHopExperiment, self.field))
        return v * self.num // self.den if isinstance(v, int) else v * self.num / self.den

    def check_recording(self, profile: str, members: dict[str, KHopExperiment]) -> None:
        """Refuse, before any run, a recording that :func:`companion.experiments.khop_four_hops.variant_summary` cannot compare with the recorded base
        runs: another profile than quick, runs other than those of :meth:`settings` (the budget aside), or a
        budget longer than the base runs' recordings (:func:`base_runs`).

        Raises:
            ValueError: naming what differs and what is allowed.
        """
        if profile != "quick":
            raise ValueError(
                f"khop_{self.tag} with profile {profile!r}: allowed 'quick' (its runs are compared "
                "seed by seed with recorded runs of the quick profile, khop_studies.SeedVariant.base_runs)"
            )
        steps = next(iter(members.values())).steps
        want = {seed_name(s): self.member(s, steps) for s in VARIANT_SEEDS}
        for n, e in members.items():
            diff = {
                f.name: getattr(e, f.name)
                for f in dataclasses.fields(e)
                if getattr(e, f.name) != getattr(want.get(n, e), f.name)
            }
            if n not in want or diff:
                raise ValueError(
                    f"khop_{self.tag}: run {n!r} with {diff or 'another name'}: allowed the runs of "
                    f"settings {self.settings()} (steps aside), which the base runs share"
                )
        self.base_runs(steps)

    def trained(self, k: int) -> tuple[int, ...]:
        """The hop counts the variant's runs train on (its stages: 1..k unless it, or ``over``, changes
        ``levels``)."""
        return hop_levels(self.settings().get("levels", "every"), k)

    def changes(self, profile: str | None = None) -> dict:
        """The settings the variant's runs change from the profile's, in ``profile`` (``over``'s too)."""
        return (self.over.changes(profile) if self.over else {}) | {self.field: self.value(profile)}

    def settings(self) -> dict:
        """The recording's settings (``record khop_<tag> --set ...``): the interval study's, with its budget and
        the changed settings' quick values."""
        return INTERVAL_SETTINGS | self.changes("quick") | {"steps": self.steps}

    def member(self, seed: int, steps: int) -> KHopExperiment:
        """The recording's run of ``seed`` (:meth:`settings`) with a budget of ``steps``: with a constant step size
        and nothing drawn that depends on the budget, the recorded run's first ``steps`` steps."""
        member = variant_members("quick", self)[seed_name(seed)]
        return dataclasses.replace(member, **{**self.settings(), "steps": steps})

    def base_runs(self, steps: int) -> dict[int, dict]:
        """The runs this variant is compared with, {seed: run}, cut at ``steps``: the profile's own
        (:func:`base_runs`), or ``over``'s recorded runs.

        Raises:
            ValueError: those runs are shorter than ``steps`` (or not recorded).
        """
        return {s: run for s, (run, _) in self.base_pairs(steps).items()}

    def base_pairs(self, steps: int) -> dict[int, tuple[dict, object]]:
        """{seed: (run, the recording it comes from)} of :meth:`base_runs` (:func:`base_pairs`, or ``over``'s),
        each recording read once.

        Raises:
            ValueError: those runs are shorter than ``steps`` (or not recorded).
        """
        if self.over is None:
            return base_pairs(steps)
        if steps > self.over.steps:
            raise ValueError(
                f"steps={steps}: allowed at most {self.over.steps} (the recorded khop_{self.over.tag} "
                "runs this variant is compared with)"
            )
        rec = recorded(self.over.settings(), experiment=f"khop_{self.over.tag}")
        return {s: (truncated(r, steps), rec) for s, r in seeded(recorded_runs(rec)[0]).items()}


VARIANT_SEEDS = tuple(range(7))  # the interval study's seeds


WIDE = SeedVariant(
    "wide",
    "d",
    2,
    1,
    INTERVAL_SETTINGS["steps"],
    "with twice the width",
    "narrow",
    # d = 64 in quick, with the same 4 heads (so each twice as wide)
    "with the profile's width",
)


# the stages 1, 2, 4 (the slides' "hops 1, 2, 4, etc."): the same run as the profile's until it moves past two hops
DOUBLING = SeedVariant(
    "doubling",
    "levels",
    1,
    1,
    INTERVAL_SETTINGS["steps"],
    "with stages 1, 2, 4",
    "every",
    "with stages 1, 2, 3, 4",
    to="doubling",
)


# those runs with training examples that start at any table (one hop from tables 1-4 from the first stage on)
ANYSTART = SeedVariant(
    "anystart",
    "starts",
    1,
    1,
    DOUBLING.steps,
    "with stages 1, 2, 4 starting at any table",
    "doubling",
    "with stages 1, 2, 4 from table 1",
    to="any",
    over=DOUBLING,
)


# those runs with one-hop examples from any table and longer ones from table 1: the tables ANYSTART trains on, with the
# two-hop examples of DOUBLING (its batches are ANYSTART's until the move to two hops)
ONESTART = SeedVariant(
    "onestart",
    "starts",
    1,
    1,
    DOUBLING.steps,
    "with stages 1, 2, 4, one hop from any table",
    "doubling",
    "with stages 1, 2, 4 from table 1",
    to="one",
    over=DOUBLING,
)


# the other way round: one-hop examples from table 1 and longer ones from any table (its batches are DOUBLING's until
# the move to two hops)
LONGSTART = SeedVariant(
    "longstart",
    "starts",
    1,
    1,
    DOUBLING.steps,
    "with stages 1, 2, 4, one hop from table 1, longer from any table",
    "doubling",
    "with stages 1, 2, 4 from table 1",
    to="longer",
    over=DOUBLING,
)


def variant_members(profile: str | None = None, variant: SeedVariant = WIDE) -> dict[str, KHopExperiment]:
    """The runs of ``variant`` (:data:`WIDE`, :data:`companion.experiments.khop_four_hops.LR`, :data:`DOUBLING`, :data:`ANYSTART`, :data:`ONESTART`,
    :data:`LONGSTART`): ``"seed 0"``, ... (:class:`SeedVariant`)."""
    size = SIZES[config.get_profile(profile)]
    return {
        seed_name(s): KHopExperiment.for_profile(
            profile, data="cumulative", **{**size, "seed": s, **variant.changes(profile)}
        )
        for s in VARIANT_SEEDS
    }


def seeded(runs: dict[str, dict]) -> dict[int, dict]:
    """{seed: run} of a study whose runs are named :func:`seed_name`."""
    return {int(name[5:]): r for name, r in runs.items()}


def base_runs(steps: int, every: int = 100) -> dict[int, dict]:
    """The profile's own runs of seeds 0..6 at k = 4 (depth 4, cumulative) advancing every ``every`` steps, by seed,
    each cut at ``steps`` (:func:`truncated`) from the shortest recording that long: the seed study's (16000 steps),
    the interval study's (10000) and the longer runs of :func:`companion.experiments.khop_four_hops.interval_long_members` and :func:`companion.experiments.khop_four_hops.interval_long250_members` (20000).

    Raises:
        ValueError: a seed has no recorded run of ``steps`` steps at that interval.
    """
    return {s: run for s, (run, _) in base_pairs(steps, every).items()}


def base_pairs(steps: int, every: int = 100) -> dict[int, tuple[dict, object]]:
    """{seed: (run, the recording it comes from)} of :func:`base_runs` (a :class:`companion.recorded.Recorded`):
    what decides whether a run set against one of them rounds as it did (:attr:`companion.recorded.Recorded.rounding`).

    Raises:
        ValueError: a seed has no recorded run of ``steps`` steps at that interval.
    """
    return {s: (truncated(r, steps), rec) for s, (r, rec) in _base_choice(steps, every).items()}


def _base_choice(steps: int, every: int) -> dict[int, tuple[dict, object]]:
    studies = [
        (SEED_SETTINGS, "khop_seeds"),
        (INTERVAL_SETTINGS, "khop_interval"),
        (INTERVAL_LONG_SETTINGS, "khop_interval_long"),
        (INTERVAL_LONG_SETTINGS, "khop_interval_long250"),
    ]
    found: dict[int, list[tuple[dict, object]]] = {s: [] for s in VARIANT_SEEDS}
    for settings, experiment in studies:
        rec = recorded(settings, experiment=experiment)
        for name, r in recorded_runs(rec)[0].items():
            seed, e = seed_interval(name)
            if e == every and seed in found:
                found[seed].append((r, rec))
    longest = {s: max((int(r["step"][-1]) for r, _ in rs), default=0) for s, rs in found.items()}
    if min(longest.values()) < steps:
        raise ValueError(
            f"steps={steps}, every={every}: allowed at most {min(longest.values())} steps (the longest "
            f"recorded run of each seed: {longest})"
        )
    return {
        s: min((p for p in rs if p[0]["step"][-1] >= steps), key=lambda p: p[0]["step"][-1])
        for s, rs in found.items()
    }


def paired_difference(a: dict, b: dict, rows, stages=None, hops=slice(None)) -> float:
    """The largest absolute difference of two runs' test accuracies at the hop counts ``hops`` (columns) over the
    evaluations ``rows`` (a slice or index array valid for both runs), and of their stages over the evaluations
    ``stages`` (None: stages not compared); 0.0 over no evaluation. The one measure of "the same run until X"
    behind :func:`prefix_gap`, :func:`companion.experiments.khop_starts.stage_gap`, ``_split``'s ``split_gap`` and ``_gap_before_last_stage``,
    each of which keeps only its own rule for X.

    >>> a = {"acc": [[1.0, 0.5], [1.0, 0.25]], "stage": [1, 2]}
    >>> b = {"acc": [[1.0, 0.5], [0.5, 0.25]], "stage": [1, 1]}
    >>> paired_difference(a, b, slice(0, 1)), paired_difference(a, b, slice(0, 2)), paired_difference(a, b, slice(0, 2), hops=[1])
    (0.0, 0.5, 0.0)
    >>> paired_difference(a, b, slice(0, 1), stages=slice(0, 2)), paired_difference(a, b, slice(0, 0))
    (1.0, 0.0)
    """
    acc = np.abs(np.asarray(a["acc"])[rows][:, hops] - np.asarray(b["acc"])[rows][:, hops])
    worst = float(acc.max(initial=0.0))
    if stages is not None:
        worst = max(
            worst,
            float(np.abs(np.asarray(a["stage"])[stages] - np.asarray(b["stage"])[stages]).max(initial=0.0)),
        )
    return worst


def common_evaluations(name: str, a: dict, b: dict) -> int:
    """How many evaluations two runs share from the first (the shorter run's count).

    Raises:
        ValueError: the two are evaluated at different steps.
    """
    n = min(len(a["step"]), len(b["step"]))
    if not np.array_equal(np.asarray(a["step"])[:n], np.asarray(b["step"])[:n]):
        raise ValueError(f"{name}: the two runs are evaluated at different steps: allowed the same interval")
    return n


def prefix_gap(runs: dict[str, dict], shorter: dict[str, dict], prefix: str) -> report.Summary:
    """Runs recorded for a longer budget against the same configurations recorded for a shorter one (the same
    names): the largest difference of their accuracies at any hop count or of their stages over the shorter
    runs' evaluations (``<prefix>_prefix_gap``; zero when the longer runs repeat the shorter ones to the last
    digit before going on, as one seed and a constant step size make them).

    Raises:
        ValueError: a run of ``runs`` missing from ``shorter``, or two runs evaluated at different steps.
    """
    worst = 0.0
    for name, a in runs.items():
        if name not in shorter:
            raise ValueError(f"{name!r} is not among the shorter runs: allowed {sorted(shorter)}")
        b = shorter[name]
        n = common_evaluations(name, a, b)
        worst = max(worst, paired_difference(a, b, slice(0, n), stages=slice(0, n)))
    return report.Summary(
        {
            f"{prefix}_prefix_gap": (
                worst,
                "largest difference of accuracies or stages over the "
                "shorter runs' evaluations, longer against shorter",
            )
        }
    )
