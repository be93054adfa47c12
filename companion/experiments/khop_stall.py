"""The chapter ``book/khop_stall`` (our study): why a k = 4 curriculum run stalls at its last stage: probes of
the stalled and solved runs, continuations (escapes), hidden tables, re-seeded streams, delayed moves and the
onset of the stall, with the numbers the chapter checks. Task, model, training, runs and probes are
:mod:`companion.experiments.khop`'s."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from companion import report
from companion.config import check_choice, check_int
from companion.config import sampler as sampler_in_force
from companion.experiments.khop import ESCAPE_STEPS, KHopExperiment, continue_training, run
from companion.experiments.khop_curves import (
    OUTCOMES,
    last_stage_at,
    last_stage_wait,
    learned_at,
    short_of_last_stage,
)
from companion.experiments.khop_members import EXPLORED, EXPLORED_EVERY, interval_of, run_sizes
from companion.experiments.khop_probes import (
    PROBE,
    PROBE_SETTINGS,
    ProbeStudy,
    probe_summary,
    shown_keys,
    shown_to,
)
from companion.experiments.khop_studies import (
    SEEDS,
    common_evaluations,
    paired_difference,
    seed_members,
    seed_name,
)

# the recorded studies of this chapter whose runs are about the last stage (four hops): the stalled run, the runs
# that learned, their variants and continuations' sources (khop_stage_entry ends its runs at the move, khop_escape
# continues from a kept state on the last stage's data, khop_seeds is the study they are taken from)
ON_LAST_STAGE = (
    "khop_probe",
    "khop_probe_seeds",
    "khop_hidden",
    "khop_hidden12",
    "khop_hidden12_long",
    "khop_reseed",
    "khop_reseed_long",
    "khop_delay",
    "khop_onset",
)


def last_stage_premise(recordings) -> dict:
    """The runs of ``recordings`` (:class:`companion.recorded.Recorded`, studies of :data:`ON_LAST_STAGE`) that
    ended before their last stage (:func:`companion.experiments.khop_curves.short_of_last_stage`), the runs that a row
    about a stalled or a learned four-hop run cannot be about: ``"short"``, {experiment: those runs} (empty lists
    where every run reached it), and ``"short_n"``, their number.

    Raises:
        ValueError: a recording of another experiment than those of :data:`ON_LAST_STAGE`.
    """
    short = {}
    for rec in recordings:
        if rec.experiment not in ON_LAST_STAGE:
            raise ValueError(f"{rec.experiment!r}: allowed the studies on the last stage {ON_LAST_STAGE}")
        short[rec.experiment] = short_of_last_stage(rec.curves["stage"], rec.config)
    return {"short": short, "short_n": sum(map(len, short.values()))}


# The stall studies' subject (issue 54): which run stalls on its last stage turns on the rounding and the batches
# (benchmarks/khop_pack_divergence.py), so the studies take their runs by outcome, by a rule registered on
# 2026-12-03 before seeds 3-9 were trained under either sampler (benchmarks/khop_subjects.py surveys the seeds):
# the lowest seed in 0 .. 9 whose probe-study run advancing every 100 steps stalls on its last stage and whose run
# advancing every EXPLORED_EVERY steps learns it, trained alone on one thread under the sampler in force. None of
# 0 .. 9: no subject at that size under that sampler (the rows wait for the full profile; no wider search).
SUBJECT_SEEDS = 10  # the rule's seeds: 0 .. 9


def subject_members(seeds: int, steps: int | None = None) -> dict[tuple[int, int], KHopExperiment]:
    """{(seed, interval): the recorded probe study's run of seed 0 (``khop_probe``, quick, with
    :data:`companion.experiments.khop_probes.PROBE_SETTINGS`) advancing every interval steps, with that seed} for
    seeds 0 .. ``seeds`` - 1 and intervals 100 and :data:`EXPLORED_EVERY`; ``steps`` replaces the study's budget
    where given. The rule is about quick size: at full the studies take their runs as the full profile builds
    them.

    >>> m = subject_members(2)
    >>> sorted(m), m[1, 250].seed, m[1, 250].eval_every, m[0, 100].steps, m[0, 100].k
    ([(0, 100), (0, 250), (1, 100), (1, 250)], 1, 250, 8000, 4)
    """
    from companion.experiments.khop_recordings import recordables  # declared apart (it imports this module)

    check_int("seeds", seeds, low=1)
    if steps is not None:
        check_int("steps", steps, low=1)
    probe = recordables()["khop_probe"].build("quick", PROBE_SETTINGS)
    base = {100: probe[seed_name(0)], EXPLORED_EVERY: probe[EXPLORED]}
    return {
        (s, every): dataclasses.replace(e, seed=s, steps=e.steps if steps is None else steps)
        for s in range(seeds)
        for every, e in base.items()
    }


def subject_pairs(outcomes: dict[tuple[int, int], str]) -> list[int]:
    """The seeds of ``outcomes`` ({(seed, interval): :func:`companion.experiments.khop_curves.last_stage_outcome`})
    whose run every 100 stalled on its last stage and whose run every :data:`EXPLORED_EVERY` learned it.

    >>> subject_pairs({(0, 100): "short of its last stage", (0, 250): "learned",
    ...                (1, 100): "stalled on its last stage", (1, 250): "learned"})
    [1]
    """
    seeds = sorted({s for s, _ in outcomes})
    return [
        s
        for s in seeds
        if outcomes.get((s, 100)) == OUTCOMES[1] and outcomes.get((s, EXPLORED_EVERY)) == OUTCOMES[2]
    ]


def subject(outcomes: dict[tuple[int, int], str]) -> int | None:
    """The registered rule's subject: the lowest seed below :data:`SUBJECT_SEEDS` of :func:`subject_pairs`,
    None if none of them gives a pair.

    >>> stalled, learned = "stalled on its last stage", "learned"
    >>> subject({(s, e): learned for s in range(10) for e in (100, 250)} | {(4, 100): stalled, (7, 100): stalled})
    4

    Raises:
        ValueError: a seed below the first pair (or below :data:`SUBJECT_SEEDS`, when there is none) whose two
            runs are not both in ``outcomes``: the rule cannot be applied yet.
    """
    found = [s for s in subject_pairs(outcomes) if s < SUBJECT_SEEDS]
    upto = found[0] if found else SUBJECT_SEEDS
    missing = [s for s in range(upto) if (s, 100) not in outcomes or (s, EXPLORED_EVERY) not in outcomes]
    if missing:
        raise ValueError(
            f"seeds {missing} not surveyed: the rule needs every seed below {upto} "
            f"(allowed: 0 .. {SUBJECT_SEEDS - 1})"
        )
    return found[0] if found else None


SURVEY_THREADS = "1 threads"  # the rule's runs train on one thread (the survey file's device name ends so)


def survey_outcomes(sampler: str, directory=None) -> dict[tuple[int, int], str]:
    """{(seed, interval): how the run ended} of the committed survey of the rule's runs under ``sampler``
    (``benchmarks/results/*-khop-subjects-<sampler>.json``, one thread, written by
    ``benchmarks/khop_subjects.py``; ``directory`` replaces that folder).

    Raises:
        ValueError: an unknown ``sampler``; no survey on one thread under it, or more than one (machines differ:
            the rule names none of them).
    """
    import json
    from pathlib import Path

    from companion.config import REPO_ROOT, SAMPLERS

    check_choice("sampler", sampler, SAMPLERS)
    folder = Path(directory or REPO_ROOT / "benchmarks" / "results")
    found = [
        p
        for p in sorted(folder.glob(f"*-khop-subjects-{sampler}.json"))
        if json.loads(p.read_text())["device"].endswith(SURVEY_THREADS)
    ]
    if len(found) != 1:
        raise ValueError(
            f"{len(found)} surveys of the stall studies' runs on one thread under the {sampler} sampler in "
            f"{folder} ({[p.name for p in found]}): the rule reads exactly one (benchmarks/khop_subjects.py)"
        )
    runs = json.loads(found[0].read_text())["runs"]  # named by khop_four_hops.interval_name
    return {interval_of(name): r["outcome"] for name, r in runs.items()}


def surveyed_subject(sampler: str, directory=None) -> str:
    """The registered rule (:func:`subject`) applied to the committed survey under ``sampler``
    (:func:`survey_outcomes`), in words: the subject seed, no subject (the rows wait for the full profile), or
    which seeds the survey still lacks.

    >>> surveyed_subject("numpy")
    'not yet: seeds [1, 2, 3, 4, 5, 6, 7, 8, 9] not surveyed: the rule needs every seed below 10 (allowed: 0 .. 9)'
    """
    outcomes = survey_outcomes(sampler, directory)
    try:
        found = subject(outcomes)
    except ValueError as e:
        return f"not yet: {e}"
    if found is None:
        return (
            f"none of seeds 0 .. {SUBJECT_SEEDS - 1} (no seed's run every 100 stalls on four hops while its run "
            f"every {EXPLORED_EVERY} learns them): these rows wait for the full profile"
        )
    return f"seed {found}"


# The sampler that drew the stall studies' recorded runs: seed 0's pair (its run every 100 stalled on four hops, its
# run every 250 learned them), trained on two threads before the rule above was registered.
STUDY_SAMPLER = "numpy"


def study_sampler(sampler: str | None = None, directory=None) -> tuple[str, str]:
    """(the sampler whose recordings of the stall studies ``book/khop_stall`` reads in a build under ``sampler``
    (default: the one in force), why where that is not ``sampler``). The studies were made under
    :data:`STUDY_SAMPLER`; under another sampler the registered rule (:func:`surveyed_subject`, its committed
    survey; ``directory`` replaces that folder) decides: no subject, and the chapter reads the study as made (its
    recordings kept as evidence, its rows waiting for the full profile); a subject, and the studies must be made
    again with it first.

    >>> study_sampler("numpy")
    ('numpy', '')
    >>> read, why = study_sampler("counter")
    >>> read, why.split(":")[0]
    ('numpy', 'the study as made under the numpy sampler')

    Raises:
        ValueError: an unknown ``sampler``; a survey under it that the rule cannot read yet, or whose rule gives
            a subject (the studies are not made with it).
    """
    sampler = sampler_in_force(sampler)
    if sampler == STUDY_SAMPLER:
        return sampler, ""
    found = subject(survey_outcomes(sampler, directory))
    if found is not None:
        raise ValueError(
            f"under the {sampler} sampler the registered rule takes seed {found} for the stall studies: make "
            f"them again with that seed before a build under it reads them (allowed: a survey with no subject)"
        )
    return STUDY_SAMPLER, (
        f"the study as made under the {STUDY_SAMPLER} sampler: the registered rule finds no subject under "
        f"{sampler} (khop_stall.surveyed_subject), so its rows wait for the full profile"
    )


# the seeds that learned four hops advancing every 100 steps (the seed study)
SEED_PROBED = ("seed 1", "seed 2")


# recorded: ``khop_probe_seeds``
SEED_PROBE = ProbeStudy({n: f"s{n.split()[-1]}" for n in SEED_PROBED}, "sprobe")


def probe_members(profile: str | None = None, study: ProbeStudy = PROBE) -> dict[str, KHopExperiment]:
    """The runs of ``study`` (of :func:`companion.experiments.khop_studies.seed_members`); by default :data:`companion.experiments.khop_probes.PROBED`, the two runs of seed 0 advancing
    every 100 steps and every :data:`companion.experiments.khop_members.EXPLORED_EVERY`."""
    return {k: v for k, v in seed_members(profile).items() if k in study.tags}


def seed_probe_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """:func:`probe_members` of :data:`SEED_PROBE`: the seeds of :data:`SEED_PROBED`."""
    return probe_members(profile, SEED_PROBE)


def seed_probe_summary(runs: dict[str, dict], level: float = 0.9) -> report.Summary:
    """:func:`companion.experiments.khop_probes.probe_summary` of :data:`SEED_PROBE` (entries ``s1_*``, ``s2_*`` and ``sprobe_*``)."""
    return probe_summary(runs, level, SEED_PROBE)


def interference_header(k: int) -> list[str]:
    """Columns of :func:`interference_rows`."""
    return ["run", f"table {k} shown to", f"answers v_{k - 1}", f"answers v_{k}"]


def interference_rows(summary, study: ProbeStudy = PROBE) -> list[list]:
    """One row per probed run of ``study`` and visibility of the last table (no block, each block alone, every
    block but one, every block) of its :func:`companion.experiments.khop_probes.probe_summary`: the shares of k-hop answers that are v_(k-1) and
    v_k."""
    rows = []
    for name, tag in study.tags.items():
        depth = int(summary[f"{tag}_depth"])
        for key in shown_keys(depth):
            where = shown_to(key)
            rows.append([name, where, summary[f"{tag}_tk_{key}_prev"], summary[f"{tag}_tk_{key}_answer"]])
    return rows


@dataclass(frozen=True)
class Continuation:
    """One way of training on from a state (:func:`companion.experiments.khop.continue_training`): ``data`` (``"cumulative"``, the
    curriculum's last stage, or ``"direct"``, k hops only), the learning rate as a multiple of the run's
    (``lr_scale``), a block re-initialised first (``reinit``: 1..depth; -1, the last; 0, none), a fresh block
    added on top (``extra``), the blocks from whose keys table k is hidden (``hide``) and its length as a
    multiple of :data:`companion.experiments.khop.ESCAPE_STEPS` (``length``); ``tag`` prefixes its summary entries."""

    tag: str
    data: str = "cumulative"
    lr_scale: float = 1.0
    reinit: int = 0
    extra: bool = False
    hide: tuple = ()
    length: int = 1


CONTINUATIONS = {
    "cumulative": Continuation("cum"),
    "k hops only": Continuation("direct", data="direct"),
    "cumulative, lr x 3": Continuation("cum_lr3", lr_scale=3.0),
    "block 2 re-initialised": Continuation("re2", reinit=2),
    "last block re-initialised": Continuation("relast", reinit=-1),
    "one block more": Continuation("extra", extra=True),
    "table k hidden from block 1": Continuation("hide1", hide=(1,)),
    "k hops only, twice as long": Continuation("direct_long", data="direct", length=2),
    "table k hidden from block 1, k hops only, twice as long": Continuation(
        "hide1_direct_long", data="direct", hide=(1,), length=2
    ),
}


ESCAPE_TAGS = {name: c.tag for name, c in CONTINUATIONS.items()}  # summary prefixes


HIDING = (
    "table k hidden from block 1",
    "k hops only, twice as long",
    "table k hidden from block 1, k hops only, twice as long",
)  # the chapter's second table


CHANGES = tuple(n for n in CONTINUATIONS if n not in HIDING)  # its first: data, step size, the model's blocks


def escape_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """The stalled run: seed 0 of :func:`companion.experiments.khop_studies.seed_members`, advancing every 100 steps (with ``PROBE_SETTINGS``)."""
    return {"seed 0": seed_members(profile)["seed 0"]}


def escape_run(exp: KHopExperiment, progress: bool = True, device=None) -> dict:
    """:func:`companion.experiments.khop.run` of ``exp``, then each of :data:`CONTINUATIONS` from its final state (``"continued"``, by name);
    ``"seconds"`` counts the run's training and the continuations."""
    for name, c in CONTINUATIONS.items():  # before any work
        check_int(f"block re-initialised by {name!r}", c.reinit, low=-1, high=exp.layers)
        for blk in c.hide:
            check_int(f"block hiding the last table in {name!r}", blk, low=1, high=exp.layers + c.extra)
    r = run(exp, progress=progress, device=device)
    cont = {
        name: continue_training(
            exp,
            r["state"],
            c.data,
            exp.lr * c.lr_scale,
            progress=progress,
            device=device,
            reinit=c.reinit,
            extra=c.extra,
            hide=c.hide,
            steps=ESCAPE_STEPS * c.length,
        )
        for name, c in CONTINUATIONS.items()
    }
    return {**r, "continued": cont, "seconds": r["seconds"] + sum(c["seconds"] for c in cont.values())}


def escape_curves(runs: dict[str, dict]) -> dict:
    """What a recorded file keeps of the continuations: their :func:`companion.experiments.khop_members.curves` by continuation name."""
    cont = runs["seed 0"]["continued"]
    return {key: {name: c[key] for name, c in cont.items()} for key in ("step", "acc", "stage")}


def escape_summary(runs: dict[str, dict]) -> report.Summary:
    """The continuations of :func:`escape_run`, named ``esc_<tag>_*`` (:data:`ESCAPE_TAGS`): the best k-hop
    accuracy over the continuation's evaluations (``_best_hk``), its final accuracy at each hop count
    (``_final_h<j>``) and the lowest accuracy over hop counts 1..k-1 at its last evaluation (``_final_below``);
    ``esc_start_h<j>``, the accuracy at each hop count where they start."""
    cont = runs["seed 0"]["continued"]
    first = np.asarray(next(iter(cont.values()))["acc"])[0]
    k = len(first)
    out = {
        f"esc_start_h{j + 1}": (float(v), f"accuracy at {j + 1} hops where the continuations start")
        for j, v in enumerate(first)
    }
    for name, c in cont.items():
        tag, acc = ESCAPE_TAGS[name], np.asarray(c["acc"])
        out[f"esc_{tag}_best_hk"] = (
            float(acc[:, -1].max()),
            f"{name}: best accuracy at {k} hops over its evaluations",
        )
        for j in range(k):
            out[f"esc_{tag}_final_h{j + 1}"] = (float(acc[-1, j]), f"{name}: final accuracy at {j + 1} hops")
        out[f"esc_{tag}_final_below"] = (
            float(acc[-1, :-1].min()),
            f"{name}: lowest final accuracy over 1..{k - 1} hops",
        )
        out[f"esc_{tag}_hk_at"] = (
            float(learned_at(c)[-1]),
            f"{name}: first step at which the {k}-hop accuracy reaches 0.9 (inf: never)",
        )
        out[f"esc_{tag}_start_below"] = (
            float(acc[0, :-1].min()),
            f"{name}: lowest accuracy over 1..{k - 1} hops at its start (after its change to the model)",
        )
    out["esc_steps"] = (
        int(np.asarray(next(iter(cont.values()))["step"])[-1]),
        "steps of each continuation (unless twice as long)",
    )
    out["esc_k"] = (k, "hops")
    return report.Summary(out)


def escape_rows(summary, names=None) -> list[list]:
    """One row per continuation (``names``, of :data:`CONTINUATIONS`; default all) of an :func:`escape_summary`
    (live or recorded): its name, the lowest accuracy over 1..k-1 hops at its start, its best k-hop accuracy, and
    its final accuracy at each hop count (columns :func:`escape_header`).

    Raises:
        ValueError: a name that is not a continuation.
    """
    k = int(summary["esc_k"])
    for name in names or ():
        check_choice("continuation", name, tuple(CONTINUATIONS))
    return [
        [
            name,
            summary[f"esc_{tag}_start_below"],
            summary[f"esc_{tag}_best_hk"],
            *(summary[f"esc_{tag}_final_h{j}"] for j in range(1, k + 1)),
        ]
        for name, tag in ESCAPE_TAGS.items()
        if names is None or name in names
    ]


def escape_header(k: int) -> list[str]:
    """Columns of :func:`escape_rows`."""
    return [
        "continued from the stall",
        f"at its start, lowest over 1..{k - 1} hops",
        f"best accuracy at {k} hops",
        *(f"final, {j} hop{'s' if j > 1 else ''}" for j in range(1, k + 1)),
    ]


# --- table k hidden from blocks from the first step (recorded: ``khop_hidden``, ``khop_hidden12``, ``_long``) ---

HIDDEN_FROM = (1,)  # the block that reads table k in seed 0's stall (and in seed 2's algorithm)


HIDDEN_TAGS = {**{seed_name(s): f"s{s}" for s in SEEDS}, EXPLORED: f"e{EXPLORED_EVERY}"}  # ``hid_<tag>_*``


# ``h<tag>_*``
HIDDEN_PROBE = ProbeStudy({name: f"h{tag[1:]}" for name, tag in HIDDEN_TAGS.items()}, "hprobe")


@dataclass(frozen=True)
class HiddenStudy:
    """The runs ``names`` of :func:`companion.experiments.khop_studies.seed_members` (by default all four), each with table k hidden from the keys of
    ``blocks`` (from 1) from the first step: summary entries ``<prefix>_<tag>_*`` (tags :data:`HIDDEN_TAGS`),
    probes as ``probe`` (none: a study of the curves only)."""

    blocks: tuple
    prefix: str
    probe: ProbeStudy | None = None
    names: tuple = tuple(HIDDEN_TAGS)

    @property
    def where(self) -> str:
        """``block 1``, ``blocks 1 and 2``: the blind blocks in words."""
        *first, last = self.blocks
        return f"blocks {', '.join(map(str, first))} and {last}" if first else f"block {last}"


# table k hidden from block 1 (``hid_*``, ``h0_*``, ...)
HIDDEN = HiddenStudy(HIDDEN_FROM, "hid", HIDDEN_PROBE)


HIDDEN12 = HiddenStudy(
    (1, 2), "hid12", ProbeStudy({n: f"hh{t[1:]}" for n, t in HIDDEN_TAGS.items()}, "hhprobe")
)


HIDDEN12_LONG = HiddenStudy((1, 2), "hid12l", names=("seed 0", EXPLORED))


def hidden_members(profile: str | None = None, study: HiddenStudy = HIDDEN) -> dict[str, KHopExperiment]:
    """The runs ``study.names`` of :func:`companion.experiments.khop_studies.seed_members` (by default ``"seed 0"``, ..., and seed 0 advancing every
    :data:`companion.experiments.khop_members.EXPLORED_EVERY` steps), each with table k hidden from the keys of the blocks ``study.blocks`` (by default
    :data:`HIDDEN_FROM`) from the first step, in training and when measured (``hide_k_from``). Table k is
    padding before the last stage, so each run is its seed study run until then."""
    return {
        name: dataclasses.replace(e, hide_k_from=study.blocks)
        for name, e in seed_members(profile).items()
        if name in study.names
    }


def hidden_summary(runs: dict[str, dict], level: float = 0.9, study: HiddenStudy = HIDDEN) -> report.Summary:
    """The numbers of a finished :func:`hidden_members` set, named ``<prefix>_*`` (``hid_*`` by default): for
    each run (``hid_<tag>_*``, :data:`HIDDEN_TAGS`: ``s0``, ``s1``, ``s2``, ``e250``) the best k-hop accuracy over
    its evaluations (``_best_hk``), the first step at which it reaches ``level`` (``_hk_at``, inf: never), the
    step it moved to its last stage (``_stagek_at``), the steps between (``_wait``) and its lowest final accuracy
    over 1..k hops (``_final_min``); ``hid_learned_n``, the seeds advancing every 100 steps that learn the k-th
    hop; of the runs ``study.names`` only (:func:`hidden_study_summary` adds the probes)."""
    pre = study.prefix
    out = {**run_sizes(runs[study.names[0]], prefix=f"{pre}_")}
    learned = 0
    for name in study.names:
        r, tag, who = runs[name], f"{pre}_{HIDDEN_TAGS[name]}", f"{name}, table k hidden from {study.where}"
        out |= run_outcome(r, tag, who, level)
        learned += bool(np.isfinite(out[f"{tag}_hk_at"][0])) and name != EXPLORED
        out[f"{tag}_wait"] = (
            last_stage_wait(r, level),
            f"{who}: steps on its last stage before it learns the k-th hop (inf: never)",
        )
    out[f"{pre}_learned_n"] = (
        learned,
        f"seeds that learn the k-th hop with table k hidden from {study.where}",
    )
    return report.Summary(out)


def run_outcome(r: dict, tag: str, who: str, level: float) -> dict:
    """How a curriculum run ends, as summary entries ``<tag>_*``: its best k-hop accuracy over its evaluations
    (``_best_hk``), the first step at which it reaches ``level`` (``_hk_at``, inf: never), the step it moved to its
    last stage (``_stagek_at``) and its lowest final accuracy over 1..k hops (``_final_min``); ``who`` names the
    run in the meanings."""
    acc = np.asarray(r["acc"])
    return {
        f"{tag}_best_hk": (float(acc[:, -1].max()), f"{who}: best accuracy at k hops over its evaluations"),
        f"{tag}_hk_at": (
            float(learned_at(r, level)[-1]),
            f"{who}: first step at which the k-hop accuracy reaches {level} (inf: never)",
        ),
        f"{tag}_stagek_at": (last_stage_at(r), f"{who}: the step it moved to its last stage"),
        f"{tag}_final_min": (float(acc[-1].min()), f"{who}: lowest final accuracy over 1..k hops"),
    }


def hidden_study_summary(
    runs: dict[str, dict], level: float = 0.9, study: HiddenStudy = HIDDEN
) -> report.Summary:
    """What the recorded study keeps: :func:`hidden_summary` and, of runs from :func:`companion.experiments.khop_probes.probe_run` (with ``state``
    and ``exp``), their :func:`companion.experiments.khop_probes.probe_summary` as ``study.probe`` (by default :data:`HIDDEN_PROBE`: ``h0_*``, ...,
    ``h250_*``, ``hprobe_*``): where each uses table k.

    Raises:
        ValueError: a study without probes (its summary is :func:`hidden_summary`).
    """
    if study.probe is None:
        raise ValueError(
            f"the study {study.prefix!r} has no probes: allowed a study with a ProbeStudy, or "
            "hidden_summary for the curves only"
        )
    return report.Summary(
        hidden_summary(runs, level, study).entries() | probe_summary(runs, level, study.probe).entries()
    )


def hidden_vs_plain(
    runs: dict[str, dict], plain: dict[str, dict], level: float = 0.9, study: HiddenStudy = HIDDEN
) -> report.Summary:
    """Each run of :func:`hidden_members` against the same run without the hiding (``plain``, by the same names):
    before the last stage, the largest difference of their accuracies at hop counts 1..k-1 or of their stages
    over the common evaluations at which ``plain`` is not yet training on k hops (``hid_<tag>_gap``, tags
    :data:`HIDDEN_TAGS`, and ``hid_gap``, the largest; zero when hiding table k changes nothing while it is
    padding); the plain run's steps on its last stage before it learns the k-th hop (``hid_<tag>_plain_wait``,
    inf: never, as :func:`hidden_summary`'s ``_wait``) and the hidden run's minus it (``hid_<tag>_wait_change``;
    NaN when neither learns it). Named with ``study.prefix`` for ``hid``.

    Raises:
        ValueError: a run missing from ``plain``, or two runs evaluated at different steps.
    """
    out, worst, pre = {}, 0.0, study.prefix
    for name in study.names:
        s = HIDDEN_TAGS[name]
        if name not in plain:
            raise ValueError(f"{name!r} is not among the runs without hiding: allowed {sorted(plain)}")
        a, b = runs[name], plain[name]
        gap = gap_before_last_stage(name, a, b)
        out[f"{pre}_{s}_gap"] = (
            gap,
            f"{name}: largest difference before the last stage, hidden from {study.where} or not",
        )
        worst = max(worst, gap)
        wait = [last_stage_wait(r, level) for r in (a, b)]
        out[f"{pre}_{s}_plain_wait"] = (
            wait[1],
            f"{name} without the hiding: steps on its last stage before it learns the k-th hop (inf: never)",
        )
        out[f"{pre}_{s}_wait_change"] = (
            wait[0] - wait[1] if np.isfinite(wait).any() else math.nan,
            f"{name}: steps on the last stage before the k-th hop is learned, hidden "
            f"from {study.where} minus plain (inf: only the plain run learns it; "
            "NaN: neither)",
        )
    out[f"{pre}_gap"] = (
        worst,
        f"largest difference before the last stage over the runs, hidden from {study.where} or not",
    )
    return report.Summary(out)


def gap_before_last_stage(name: str, a: dict, b: dict) -> float:
    """The largest difference of run ``a``'s accuracies at hop counts 1..k-1 or stages from run ``b``'s, over
    their common evaluations at which ``b`` is not yet training on k hops.

    Raises:
        ValueError: the two are evaluated at different steps.
    """
    n = common_evaluations(name, a, b)
    before = np.flatnonzero(np.asarray(b["stage"])[:n] < np.asarray(b["acc"]).shape[1])
    return paired_difference(a, b, before, stages=before, hops=slice(0, -1))


def hiding_rows(studies: dict[str, dict[str, dict]], steps: int) -> list[list]:
    """One row per run name (the names every study shares, in the first study's order): the best k-hop test
    accuracy over its evaluations up to step ``steps`` in each study (``studies``: {column label: {run name:
    run}}, e.g. no hiding, table k hidden from block 1, from blocks 1 and 2), so that runs recorded for
    different budgets compare over the same steps.

    Raises:
        ValueError: ``steps`` below 1, or a study with none of the first study's runs.
    """
    check_int("steps", steps, low=1)
    first = next(iter(studies.values()))
    for label, runs in studies.items():
        if not set(first) & set(runs):
            raise ValueError(
                f"study {label!r} has none of the runs {sorted(first)}: allowed the same run names"
            )
    names = [n for n in first if all(n in runs for runs in studies.values())]
    rows = []
    for name in names:
        best = []
        for runs in studies.values():
            r = runs[name]
            upto = np.asarray(r["step"]) <= steps
            best.append(float(np.asarray(r["acc"])[upto, -1].max()))
        rows.append([name, *best])
    return rows


def hiding_header(studies, k: int) -> list[str]:
    """Columns of :func:`hiding_rows`."""
    return ["run", *(f"best {k}-hop accuracy, {label}" for label in studies)]
