"""Recorded runs, the files: their format, reading them back, choosing one, and the recordable experiments'
description (:class:`Recordable`). The ground floor of the package: studies that read a recording import this
module; :mod:`companion.record` (the registry of recordables, recording, staleness and the command line) stands
on it.

>>> file_name("recall", "quick", {"d": 8}), command("recall", "quick", {"d": 8})
('recall-quick-d=8.json', 'python -m companion record recall --profile quick --set d=8')
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import json
import os
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from companion import config

RECORDED_DIR = config.committed_data_dir() / "recorded"
RECORDED_CLAIMS_FILE = config.REPO_ROOT / "data" / "recorded_claims.toml"
# a file where every recording that :func:`latest` chooses is logged, one JSON line each (scripts/book_run.py sets
# it: which recordings, of which profile, a chapter read its values from; listings of every recording are not)
READS_LOG_ENV = "COMPANION_READS_LOG"


@functools.lru_cache(maxsize=1)
def recorded_claims() -> dict[str, dict[str, str]]:
    """``data/recorded_claims.toml``: per recordable, the claims a recording stores (claim id -> summary entry).

    >>> recorded_claims()["recall"]["recall.drop_f2_correct"]
    'p_correct_drop'
    >>> recorded_claims()["fact_scaling"]
    {'fc.facts_linear': 's_slope'}
    """
    with open(RECORDED_CLAIMS_FILE, "rb") as f:
        return tomllib.load(f)


FORMAT = 1


@dataclass(frozen=True)
class Recordable:
    """An experiment that can be recorded: the runs of one chapter, how to measure them, what they check.

    ``members(profile)`` gives the chapter's configurations by name (one for the core run, several for a
    chapter that compares runs); ``--set`` overrides apply to each, as ``member_overrides(name, overrides)``
    adapts them (default: unchanged; a member that runs a multiple of the others' steps keeps the multiple).
    ``summary``, ``curves`` and ``views`` take the finished runs by the same names; ``views`` gives the chapter's
    rows read on late means or on runs as they ended, each judged again at each evaluation of the late window
    (:mod:`companion.experiments.late_verdicts`), so that a recording can be checked for timing as its chapter is. ``claims`` (claim id -> summary entry) are
    what a recording stores, as the registry declares them (``data/recorded_claims.toml``): the lines of the
    chapter's Check cell that check an entry of its variable ``summary_var`` (a chapter that shows two recorded
    experiments names their summaries differently); a test, not the package, reads the chapter and compares.
    """

    name: str
    chapter: str  # docname of the chapter that shows it
    members: Callable  # profile -> {name: validated configuration}
    summary: Callable  # {name: run} -> report.Summary (the chapter's own call)
    curves: Callable = lambda runs: {}  # {name: run} -> {curve: list} along training
    # {name: run} -> {claim id: (its value, its value in each view)}: late_verdicts.late_values or stopped_values of
    # the chapter's rows (stored as "views": {claim id: values in the views})
    views: Callable = lambda runs: {}
    # (configuration, device=) -> run; default (None): the ``run`` of the module that defines the configuration's
    # class (:meth:`runner`)
    run: Callable | None = None
    # ({name: configuration}, device=) -> {name: run}: every member at once (runs packed as replicas); default:
    # ``run`` on each member in turn
    run_all: Callable | None = None
    summary_var: str = "summary"  # the chapter's name for this experiment's summary in its Check cell
    member_overrides: Callable = lambda name, overrides: overrides  # (member, overrides) -> that member's
    # (profile, members) -> None; raises ValueError for a recording its summary
    # could not make (a comparison with other recorded runs), before any run
    precheck: Callable | None = None
    # {name: configuration} -> why these runs do not train on the paper's data ("": they do); a recording on a
    # stand-in is shown, never held to the paper's values
    stand_in: Callable = lambda members: ""
    claims: dict = dataclasses.field(default_factory=dict)  # claim id -> the summary entry that measures it
    # docnames of the other chapters that check its claims (a chapter split by section)
    also: tuple[str, ...] = ()
    # False where its runs draw no training batch from the sampler in force (companion.config.sampler): data drawn
    # once by the numpy generators, or a full batch; its recordings store no sampler version and are the same
    # under either sampler (tests/test_recorded.py compares each recordable's first batch under both)
    draws: bool = True
    # (the sampler in force) -> (the sampler whose recording of it the chapter reads, why: "" where it is the one
    # in force): a named exception for a study whose subject the sampler in force does not give (book/khop_stall:
    # companion.experiments.khop_stall.study_sampler); its recording drawn by the other sampler is kept, not made
    # again
    reads_under: Callable = lambda sampler: (sampler, "")

    def build(self, profile: str | None = None, overrides: dict | None = None) -> dict:
        """The validated configurations ({member: configuration}) of a profile, with ``overrides`` applied to
        each (fails before any work)."""
        return configure(self.members(config.get_profile(profile)), overrides, self.member_overrides)

    def _of_module(self, exp, name: str) -> Callable:
        """The function ``name`` of the module that defines ``exp``'s class."""
        import importlib

        module = type(exp).__module__
        fn = getattr(importlib.import_module(module), name, None)
        if fn is None:
            raise ValueError(f"{module} has no {name}(exp): recordings of {self.name!r} need one")
        return fn

    def runner(self, exp) -> Callable:
        """What trains member ``exp``: ``run`` where the declaration names one, else the ``run`` function of the
        module that defines its configuration's class."""
        return self.run if self.run is not None else self._of_module(exp, "run")

    def first_batch(self, exp):
        """The first training batch of member ``exp``: the ``first_batch`` function of the module that defines
        its configuration's class."""
        return self._of_module(exp, "first_batch")(exp)


def normalise(overrides: dict, exp) -> dict:
    """Overrides with the experiment's field types (a tuple field given one value becomes a 1-tuple, given a list
    the tuple of its values).

    >>> from companion.experiments.allocation import AllocationExperiment
    >>> normalise({"budgets": 256, "lrs": [0.1, 0.3], "mlp_fracs": (0.5,), "d": 8}, AllocationExperiment())
    {'budgets': (256,), 'lrs': (0.1, 0.3), 'mlp_fracs': (0.5,), 'd': 8}
    """
    fields = {f.name for f in dataclasses.fields(exp)}
    unknown = set(overrides) - fields
    if unknown:
        raise ValueError(f"unknown setting(s) {sorted(unknown)}: allowed {sorted(fields)}")

    def typed(k, v):
        if not isinstance(getattr(exp, k), tuple) or isinstance(v, tuple):
            return v
        return tuple(v) if isinstance(v, list) else (v,)

    return {k: typed(k, v) for k, v in overrides.items()}


def configure(members: dict, overrides: dict | None = None, member_overrides=lambda name, o: o) -> dict:
    """``members`` ({name: configuration}) with ``overrides`` applied to each, as ``member_overrides(name,
    overrides)`` adapts them, validated (the configurations' own checks run before any work)."""
    overrides = normalise(dict(overrides or {}), next(iter(members.values())))
    return {k: dataclasses.replace(exp, **member_overrides(k, overrides)) for k, exp in members.items()}


def configs(members: dict):
    """What a results file keeps of the configurations: one member's fields, or {member: fields}."""
    if len(members) == 1:
        return jsonable(dataclasses.asdict(next(iter(members.values()))))
    return {k: jsonable(dataclasses.asdict(exp)) for k, exp in members.items()}


def jsonable(value):
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)  # JSON has no NaN/inf: "nan", "inf"
    return value


def _number(value):
    return float(value) if isinstance(value, str) and value in ("nan", "inf", "-inf") else value


def file_name(name: str, profile: str, overrides: dict, precision: str = "fp32") -> str:
    """``recall-full.json``, ``recall-quick-d=256-seq_len=64.json``, ... (settings sorted by name; a precision
    other than fp32 after the profile).

    >>> file_name("recall", "quick", {"seq_len": 64, "d": 256, "ff": ("mlp", "linear")})
    'recall-quick-d=256-ff=mlp,linear-seq_len=64.json'
    >>> file_name("recall", "full", {}, "tf32")
    'recall-full-tf32.json'
    """
    parts = (
        [name, profile]
        + ([precision] if precision != "fp32" else [])
        + [
            f"{k}={','.join(map(str, v)) if isinstance(v, tuple) else v}"
            for k, v in sorted(overrides.items())
        ]
    )
    return "-".join(parts) + ".json"


def command(name: str, profile: str, overrides: dict, precision: str = "fp32") -> str:
    """The command line that (re)generates a recorded file."""
    sets = " ".join(
        f"--set {shlex.quote(k + '=' + (','.join(map(str, v)) if isinstance(v, tuple) else str(v)))}"
        for k, v in sorted(overrides.items())
    )
    line = f"python -m companion record {name} --profile {profile}" + (f" {sets}" if sets else "")
    return line + (f" --precision {precision}" if precision != "fp32" else "")


@dataclass(frozen=True)
class Recorded:
    """A recorded results file, read back (NaN and infinities restored)."""

    path: Path
    data: dict

    def __getattr__(self, key):
        try:
            return self.data[key]
        except KeyError:
            raise AttributeError(key) from None

    @property
    def precision(self) -> str:
        """How its float32 matrix products were computed (files written before the field: fp32)."""
        return self.data.get("precision", "fp32")

    @property
    def views(self) -> dict[str, list[float]]:
        """{claim id: the row's value in each view of its late window} (:attr:`Recordable.views`; files written
        before the field, or of an experiment without views: empty)."""
        return self.data.get("views", {})

    @property
    def views_error(self) -> str:
        """Why a recording has no views of its rows where making them failed ("" where they did not, and for files
        written before the field)."""
        return self.data.get("views_error", "")

    @property
    def drawn_by(self) -> str | None:
        """The sampler that drew its training batches (:func:`companion.config.sampler_of_version` of its
        ``sampler``; files written before the field: the numpy generators), None for runs that draw none from a
        sampler (``sampler`` null: :attr:`Recordable.draws` false)."""
        version = self.data.get("sampler", config.SAMPLER_VERSIONS["numpy"])
        return None if version is None else config.sampler_of_version(version)

    @property
    def other_sampler(self) -> bool:
        """True where its runs trained on batches drawn by another sampler than the one in force (a recording kept
        as evidence until it is made again; False for one whose runs draw no batch from a sampler, ``sampler``
        null)."""
        return self.drawn_by not in (None, config.sampler())

    @property
    def packing(self) -> str:
        """How its runs trained: ``"alone"`` (none packed; files written before ``packs``), or in packs of
        replicas (:func:`companion.train.run_packed`), by their sizes. A packed run equals the run alone up to
        rounding only, which can decide a long run's outcome (a k-hop run that stalls alone may learn in a pack).

        >>> Recorded(Path("x.json"), {"packs": {"a": {"replicas": 4}, "b": {"replicas": 2}}}).packing
        'packs of 2, 4'
        >>> Recorded(Path("x.json"), {"packs": {}}).packing
        'alone'
        """
        sizes = sorted({p["replicas"] for p in (self.data.get("packs") or {}).values()})
        return "packs of " + ", ".join(map(str, sizes)) if sizes else "alone"

    @property
    def trained(self) -> str:
        """How its runs' arithmetic was done, as far as it decides their rounding: :attr:`packing`, and on a CPU
        the thread count the runs give (their ``device``; ``threads`` where it names none), on a GPU the device. A run's rounding changes with either, and a long k-hop run's outcome can turn on it
        (benchmarks/results/CPU_AMD_EPYC__1_threads-khop-pack.json).

        >>> Recorded(Path("x.json"), {"device": "CPU AMD EPYC, 2 threads"}).trained
        'alone, 2 threads'
        >>> Recorded(Path("x.json"), {"device": "CPU AMD EPYC, 1 threads", "threads": 1, "sm_count": None}).trained
        'alone, 1 thread'
        >>> Recorded(Path("x.json"), {"device": "NVIDIA H200", "sm_count": 132, "threads": 16}).trained
        'alone, NVIDIA H200'
        >>> Recorded(Path("x.json"), {"device": "CPU AMD EPYC, 1 threads; CPU AMD EPYC, 2 threads", "threads": 2}).trained
        'alone, CPU AMD EPYC, 1 threads; CPU AMD EPYC, 2 threads'
        """
        return f"{self.packing}, {_unit(self.data['device'], self.data.get('threads'))}"

    @property
    def rounding(self) -> str:
        """What decides its runs' rounding: :attr:`trained` without the pack sizes (``"packed"`` or ``"alone"``).
        A replica of a pack rounds as in a pack of any other size (the pack computes each replica on its own;
        tests/test_khop_agree.py checks it on recordings made in packs of 4 and 10), but not as the run alone (the
        pack computes attention explicitly, the run alone with the fused kernel), nor on another thread count.
        Two recordings promised to repeat each other to the last digit must agree here
        (:func:`same_rounding`).

        >>> Recorded(Path("x.json"), {"device": "CPU AMD EPYC, 2 threads", "packs": {"a": {"replicas": 4}}}).rounding
        'packed, 2 threads'
        >>> Recorded(Path("x.json"), {"device": "NVIDIA H200", "sm_count": 132, "threads": 16}).rounding
        'alone, NVIDIA H200'
        """
        return f"{'alone' if self.packing == 'alone' else 'packed'}, {_unit(self.data['device'], self.data.get('threads'))}"

    @property
    def read_other_samplers(self) -> list[str]:
        """The recordings its runs or summary read (``reads``, written since 2026-12-02) that were drawn by another
        sampler than its own: a recording made again under the counter sampler before those it compares with (its
        summary then sets its runs against the other sampler's). Empty for a file that read none, or whose runs
        draw no batch from a sampler."""
        return [r["file"] for r in other_sampler_reads(self.data.get("reads", []), self.drawn_by)]

    @property
    def paper_config(self) -> bool:
        """A full-profile fp32 run of the paper's own configuration (no overrides) on the paper's data (no
        stand-in): held to the paper's values."""
        return (
            self.data["profile"] == "full"
            and not self.data["overrides"]
            and self.precision == "fp32"
            and not self.data.get("stand_in")
        )

    def label(self) -> str:
        """Who made it: ``full profile, NVIDIA H200, 2026-11-21, commit abc123``; and, where its batches were drawn
        by another sampler than the book's (:attr:`other_sampler`), which."""
        sets = ", ".join(f"{k}={v}" for k, v in self.data["overrides"].items())
        return (
            f"{self.data['profile']} profile{' (' + sets + ')' if sets else ''}, {self.data['device']}, "
            f"{self.data['date']}, commit {self.data['commit']}"
            + (f", {self.precision}" if self.precision != "fp32" else "")
            + (", stand-in data" if self.data.get("stand_in") else "")
            + (
                f", batches of the {self.drawn_by} sampler (the book's: {config.sampler()})"
                if self.other_sampler
                else ""
            )
        )

    def as_summary(self, minutes_key: str = "minutes", summary=None, prefix: str = ""):
        """The recorded summary as the chapter's call made it (values and meanings), or ``summary`` (one
        recomputed from the recorded curves), names prefixed with ``prefix`` (to glue two runs on one page),
        with the training time in minutes under ``prefix + minutes_key``: what a chapter that reads a recorded
        run glues and shows."""
        from companion.report import Summary

        values, meaning = (
            (self.data["summary"], self.data["meaning"]) if summary is None else (summary, summary.meaning)
        )
        out = Summary({prefix + k: (v, meaning.get(k, "")) for k, v in values.items()})
        minutes_key = prefix + minutes_key
        out[minutes_key] = self.data["train_seconds"] / 60
        out.meaning[minutes_key] = f"training and evaluation time of the recording ({self.data['device']})"
        return out

    def settings(self) -> dict:
        """The recorded overrides as :func:`build` takes them (JSON lists back to tuples)."""
        return {k: tuple(v) if isinstance(v, list) else v for k, v in self.data["overrides"].items()}

    def short_label(self) -> str:
        """Sizes (those the configuration has), device, date and commit: ``d=256, T=256, batch 512, 2000 steps
        (NVIDIA H200; 2026-11-21, cdedf07)``; a recording on a stand-in says so."""
        c, d = self.data["config"], self.data
        c = c if "d" in c else next(iter(c.values()))  # several runs: the first one's sizes
        sizes = [
            text.format(c[key])
            for key, text in (
                ("d", "d={}"),
                ("seq_len", "T={}"),
                ("batch", "batch {}"),
                ("steps", "{} steps"),
            )
            if key in c
        ]
        return f"{', '.join(sizes)} ({d['device']}; {d['date']}, {d['commit'][:7]}" + (
            "; stand-in data)" if d.get("stand_in") else ")"
        )


def _unit(device: str, threads: int | None = None) -> str:
    """The thread count on a CPU, the device on a GPU, as the runs give it (a recording's ``device`` joins its runs'
    own: a run read back from the cache keeps the device it trained on; ``threads``, the recording process's, where
    the device names none); runs of several devices give them all."""
    if not device.startswith("CPU") or "; " in device:
        return device
    found = re.search(r"(\d+) threads?$", device)
    n = int(found.group(1)) if found else threads
    return f"{n} thread{'s' if n != 1 else ''}"


def run_rounding(run: dict) -> str:
    """What decides a run's rounding, as :attr:`Recorded.rounding` says it of a recording's: a run trained in a
    pack carries its ``pack``, and every run its ``device`` (a live run set against a recording of it).

    >>> run_rounding({"device": "CPU AMD EPYC, 1 threads"}), run_rounding({"device": "NVIDIA H200", "pack": {}})
    ('alone, 1 thread', 'packed, NVIDIA H200')
    """
    return f"{'packed' if 'pack' in run else 'alone'}, {_unit(run['device'])}"


def same_rounding(*recs: Recorded) -> str:
    """The one :attr:`Recorded.rounding` of ``recs``, whose runs a chapter compares to the last digit (a run
    cut at a step against the same run recorded for fewer steps, two configurations until they part).

    Raises:
        ValueError: two of them round otherwise; their runs can then part by rounding alone, and a difference
            would say nothing of the code.

    >>> a = Recorded(Path("a.json"), {"device": "CPU AMD EPYC, 2 threads", "packs": {"x": {"replicas": 4}}})
    >>> same_rounding(a, Recorded(Path("b.json"), {"device": "CPU AMD EPYC, 2 threads", "packs": {"x": {"replicas": 10}}}))
    'packed, 2 threads'
    >>> same_rounding(a, Recorded(Path("c.json"), {"device": "CPU AMD EPYC, 1 threads", "packs": {}}))
    Traceback (most recent call last):
    ValueError: trained a.json packed, 2 threads; c.json alone, 1 thread: allowed recordings of one rounding
    """
    kinds = {r.rounding for r in recs}
    if len(kinds) > 1:
        trained = "; ".join(f"{r.path.name} {r.rounding}" for r in recs)
        raise ValueError(f"trained {trained}: allowed recordings of one rounding")
    return kinds.pop()


def load(path: Path | str) -> Recorded:
    """The recorded file at ``path``, read back: NaN and infinities restored, and every claim that
    ``data/recorded_claims.toml`` lists for its experiment among its ``claims``, a claim registered after the file
    was recorded read off the recorded summary.

    Raises:
        ValueError: a file of another format than :data:`FORMAT`.
    """
    data = json.loads(Path(path).read_text(), parse_constant=float)
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: recorded format {data.get('format')!r}, this package reads {FORMAT}")
    for key in ("summary", "claims"):
        data[key] = {k: _number(v) for k, v in data[key].items()}
    if "views" in data:
        data["views"] = {k: [_number(x) for x in v] for k, v in data["views"].items()}
    # a claim registered for the experiment after the file was recorded is read off the recorded summary, as the
    # recording would have stored it (claim id -> the summary entry that measures it, data/recorded_claims.toml)
    for cid, entry in recorded_claims().get(data.get("experiment"), {}).items():
        if cid not in data["claims"] and entry in data["summary"]:
            data["claims"][cid] = data["summary"][entry]
    return Recorded(Path(path), data)


def other_sampler_reads(reads: list[dict], own: str | None) -> list[dict]:
    """The entries of ``reads`` (``[{"file": ..., "sampler": ...}]``, as a recording stores what it read) drawn by
    another sampler than ``own``; none when ``own`` is None (runs that draw no batch from a sampler).

    >>> other_sampler_reads([{"file": "a.json", "sampler": "numpy"}, {"file": "b.json", "sampler": None}], "counter")
    [{'file': 'a.json', 'sampler': 'numpy'}]
    >>> other_sampler_reads([{"file": "a.json", "sampler": "numpy"}], None)
    []
    """
    return [r for r in reads if own is not None and r["sampler"] not in (None, own)]


_READ: contextvars.ContextVar[list | None] = contextvars.ContextVar("recordings_read", default=None)


@contextlib.contextmanager
def reading():
    """Within the block, the recordings that :func:`runs` (and so :func:`latest`) gives are collected, once each,
    in the list the block receives: what a recording's runs and summary read (:func:`companion.record.record`
    stores it)."""
    seen: list[Recorded] = []
    token = _READ.set(seen)
    try:
        yield seen
    finally:
        _READ.reset(token)


def sampler_dir(sampler: str | None = None) -> Path:
    """Where the recordings whose batches ``sampler`` (default: the one in force) draws are committed, and where a
    recording made under it is written unless told otherwise: ``data/recorded/`` for the numpy generators, the
    sampler's own folder for another (read there by :func:`committed_paths`).

    >>> sampler_dir("numpy") == RECORDED_DIR, sampler_dir("counter") == RECORDED_DIR / "counter"
    (True, True)
    """
    name = config.sampler(sampler)
    return RECORDED_DIR if name == "numpy" else RECORDED_DIR / name


def committed_paths(sampler: str | None = None) -> list[Path]:
    """The committed recordings a build reads, sorted by file name: those of ``data/recorded/``, each replaced by
    the file of the same name in the folder named after the sampler (default: the one in force,
    :func:`companion.config.sampler`) where that folder has one, with that folder's other files. So recordings
    made again under another sampler (``data/recorded/counter/``, issue 54) are read by builds under that sampler
    only, and the book's build reads ``data/recorded/`` as it is.

    >>> numpy, counter = committed_paths("numpy"), committed_paths("counter")
    >>> {p.name for p in numpy} <= {p.name for p in counter}
    True
    >>> RECORDED_DIR / "counter" / "induction_order-quick.json" in counter
    True
    >>> RECORDED_DIR / "induction_order-quick.json" in numpy
    True
    """
    files = {p.name: p for p in RECORDED_DIR.glob("*.json")}
    own = RECORDED_DIR / (sampler or config.sampler())
    files |= {p.name: p for p in own.glob("*.json")} if own.is_dir() else {}
    return [files[name] for name in sorted(files)]


def made_again(rec: Recorded) -> list[str]:
    """The samplers other than the one that drew ``rec``'s batches under which a committed recording of its
    name was made (``data/recorded/`` and its samplers' folders, :func:`committed_paths`); empty for one whose
    runs draw none from a sampler.

    >>> made_again(load(RECORDED_DIR / "induction_order-quick.json"))
    ['counter']
    >>> made_again(load(RECORDED_DIR / "counter" / "induction_order-quick.json"))
    ['numpy']
    """
    if rec.drawn_by is None:
        return []
    namesakes = [RECORDED_DIR / rec.path.name, *(RECORDED_DIR / s / rec.path.name for s in config.SAMPLERS)]
    drawn = {load(p).drawn_by for p in namesakes if p.is_file() and p.resolve() != rec.path.resolve()}
    return [s for s in config.SAMPLERS if s != rec.drawn_by and s in drawn]


def not_yet_under(sampler: str, recs: list[Recorded] | None = None) -> list[Recorded]:
    """The recordings (default: the committed ones a build reads, :func:`runs`) whose runs draw batches from a
    sampler and of which none is recorded under ``sampler``: those kept as evidence until made again.

    >>> waiting = not_yet_under("counter")
    >>> {r.drawn_by for r in waiting}, "induction_order-quick.json" in {r.path.name for r in waiting}
    ({'numpy'}, False)

    Raises:
        ValueError: an unknown ``sampler``.
    """
    config.check_choice("sampler", sampler, config.SAMPLERS)
    recs = runs() if recs is None else recs
    return [r for r in recs if r.drawn_by not in (None, sampler) and sampler not in made_again(r)]


def batches_cell(rec: Recorded, read_under: dict[str, str] | None = None) -> str:
    """What drew a recording's training batches, and under which other samplers it was made again or not yet:
    a recording not yet made again under the sampler that the book switches to is kept as evidence, marked so
    (issue 54). ``read_under`` ({sampler: why}): the other samplers under which its chapter reads this very
    recording (:attr:`Recordable.reads_under`), a named exception: it is kept there, not waiting.

    >>> batches_cell(load(RECORDED_DIR / "induction_order-quick.json"))
    'numpy (version 1); also recorded under: counter'
    >>> batches_cell(load(RECORDED_DIR / "theory_one_step-quick.json"))
    'none from a sampler'
    >>> batches_cell(load(RECORDED_DIR / "khop_onset-quick-depth=4-eval_every=100-k=4-steps=8000.json"),
    ...              {"counter": "no subject"})
    'numpy (version 1); read under counter as well: no subject'
    """
    if rec.drawn_by is None:
        return "none from a sampler"
    read_under = read_under or {}
    again = made_again(rec)
    missing = [s for s in config.SAMPLERS if s not in (rec.drawn_by, *again, *read_under)]
    return (
        config.sampler_label(rec.drawn_by)
        + (f"; also recorded under: {', '.join(again)}" if again else "")
        + "".join(f"; read under {s} as well: {why}" for s, why in read_under.items())
        + (f"; not yet recorded under: {', '.join(missing)}" if missing else "")
    )


def runs(
    name: str | None = None,
    directory: Path | str | None = None,
    profile: str | None = None,
    settings: dict | None = None,
    precision: str | None = None,
    sampler: str | None = None,
) -> list[Recorded]:
    """Every recorded file (of experiment ``name``; of ``profile``; with exactly the overrides ``settings``; in
    ``precision``), sorted by file name: those in ``directory``, by default the committed ones a build under
    ``sampler`` reads (:func:`committed_paths`; default: the sampler in force)."""
    out = [
        load(p)
        for p in (committed_paths(sampler) if directory is None else sorted(Path(directory).glob("*.json")))
    ]
    out = [
        r
        for r in out
        if (name is None or r.experiment == name)
        and (profile is None or r.profile == profile)
        and (settings is None or r.settings() == settings)
        and (precision is None or r.precision == precision)
    ]
    seen = _READ.get()
    if seen is not None:
        seen += [r for r in out if r.path not in {s.path for s in seen}]
    return out


def latest(
    name: str,
    profile: str,
    settings: dict | None = None,
    directory: Path | str | None = None,
    precision: str = "fp32",
    sampler: str | None = None,
) -> Recorded:
    """The last recorded file of experiment ``name`` at ``profile`` with exactly the overrides ``settings``
    (none by default), in ``precision``, among those a build under ``sampler`` reads (default: the sampler in
    force; :func:`runs`); logged in ``$COMPANION_READS_LOG`` where that is set (:data:`READS_LOG_ENV`).

    Raises:
        ValueError: none is recorded (the message gives the command that records it).
    """
    settings = dict(settings or {})
    recs = runs(name, directory, profile=profile, settings=settings, precision=precision, sampler=sampler)
    if not recs:
        raise ValueError(
            f"no recorded {name} run of the {profile!r} profile with settings {settings} in {precision}: run "
            f"`{command(name, profile, settings, precision)}` and commit the file it writes"
        )
    if os.environ.get(READS_LOG_ENV):
        with open(os.environ[READS_LOG_ENV], "a", encoding="utf-8") as f:
            f.write(json.dumps({"file": recs[-1].path.name, "profile": profile}) + "\n")
    return recs[-1]


def side_by_side(live, recs: list[Recorded], keys, live_label: str = "this build") -> str:
    """A Markdown table of summary entries ``keys`` that the live summary has (a recordable may serve two chapters,
    each with its part of the entries): the live run's value beside each recorded run's."""
    from companion.report import markdown_table

    header = ["entry", live_label] + [r.short_label() for r in recs]
    rows = [[f"`{k}`", live[k], *(r.summary.get(k, float("nan")) for r in recs)] for k in keys if k in live]
    return markdown_table(header, rows)
