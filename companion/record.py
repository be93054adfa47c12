"""Recorded runs: paper-scale (or any-scale) results made outside the book, committed, checked by CI.

``python -m companion record recall --profile full`` trains the experiment
(CPU or GPU), measures it with the same package calls as its chapter, and
writes one small JSON file under ``data/recorded/``: the configuration, the
chapter's summary values and claim values, curves along training (never
weights), the package version and commit, the device, the wall time and the
command that regenerates it. Chapters show recorded runs next to the live
quick one; :func:`check` asserts the claims of a recorded ``full``-profile run
of the paper's configuration against the paper's values (a miss fails CI,
unless the claim row records it as a finding), while runs at other sizes or
with other choices are shown and described, not held to the paper's number.

A recorded file is *stale* when its experiment's configuration, rebuilt today
from the recorded profile and overrides, differs from the recorded one
(:func:`stale`); ``tests/test_recorded.py`` fails then and names the command
that regenerates it. A field added to an experiment after a file was recorded
counts as unchanged while it has its default, so a new field must default to the
old behaviour; a change of behaviour under an unchanged configuration is not
seen here, and its recorded files must be regenerated or removed by hand.

>>> parse_overrides(["d=256", "ff=mlp,linear", "noise=existing", "lr=0.01"])
{'d': 256, 'ff': ('mlp', 'linear'), 'noise': 'existing', 'lr': 0.01}
>>> parse_overrides(["d"])
Traceback (most recent call last):
...
ValueError: override 'd' is not of the form key=value
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from companion import __version__, claims, config
from companion.data import sampler_version
from companion.io import atomic_write_text
from companion.recorded import (  # noqa: F401 (the files' names, read here by the chapters and the tests)
    FORMAT,
    RECORDED_CLAIMS_FILE,
    RECORDED_DIR,
    Recordable,
    Recorded,
    batches_cell,
    command,
    committed_paths,
    configs,
    file_name,
    jsonable,
    latest,
    load,
    normalise,
    not_yet_under,
    other_sampler_reads,
    reading,
    recorded_claims,
    runs,
    sampler_dir,
    side_by_side,
)


def check(rec: Recorded, registry=None, quiet: bool = False) -> list[dict]:
    """Assert a recorded full-profile run of the paper's configuration against the paper's (full) criteria.

    Every claim is judged and recorded (the scorecard's "recorded" column) before any miss raises.

    Raises:
        ValueError: the run is not a full-profile run of the paper's configuration (show those, don't hold them
            to the paper's number: :func:`show`).
        AssertionError: an asserted claim does not hold.
    """
    if not rec.paper_config:
        raise ValueError(
            f"{rec.path.name} is a {rec.label()} run: only full-profile runs of the paper's "
            f"configuration are held to the paper's values"
        )
    out, failures = [], []
    for cid, value in rec.claims.items():
        try:
            out.append(
                claims.check(
                    cid,
                    value,
                    profile="full",
                    recorded=rec.label(),
                    source=rec.path.name,
                    quiet=quiet,
                    registry=registry,
                )
            )
        except AssertionError as e:
            failures.append(str(e))
    if failures:
        raise AssertionError(f"recorded run {rec.path.name} ({rec.label()}): " + "; ".join(failures))
    return out


def check_over(
    claim_id: str, observed: float, recs: list[Recorded], registry=None, quiet: bool = False
) -> dict:
    """Assert a claim measured over several recorded full-profile runs (seeds, a sweep) by its full criterion,
    recorded as a value of those runs (the scorecard's "recorded" column; label: their profile, devices and dates;
    source: their file names).

    Raises:
        ValueError: no run, or a run that is not at the full profile.
        AssertionError: the claim does not hold.
    """
    if not recs or any(r.profile != "full" for r in recs):
        raise ValueError(
            f"claim {claim_id}: expected recorded full-profile runs, got {[r.path.name for r in recs]}"
        )
    made = sorted({f"{r.data['device']} ({r.data['date']})" for r in recs})
    return claims.check(
        claim_id,
        observed,
        profile="full",
        recorded=f"full profile, {len(recs)} recorded runs: {', '.join(made)}",
        source=", ".join(r.path.name for r in recs),
        quiet=quiet,
        registry=registry,
    )


def first_batches(name: str, members: dict) -> dict:
    """{member: digest of its first training batch} (:func:`companion.data.batch_digest`; None where a member
    trains nothing)."""
    from companion.data import batch_digest

    rec = experiment(name)
    return {k: (None if (b := rec.first_batch(e)) is None else batch_digest(b)) for k, e in members.items()}


def _registry() -> dict[str, Recordable]:
    from companion.experiments import (
        allocation,
        catalog,
        fact_capacity,
        induction_head,
        induction_layers,
        induction_random_seeds,
        khop_members,
        khop_recordings,
        late_rows,
        late_verdicts,
        scan_snap_text,
        summaries,
    )
    from companion.theory import attention_study, leading_study, one_step_study

    def only(fn):
        return lambda runs: fn(next(iter(runs.values())))

    def architectures_make(runs):
        best = summaries.truncation_searches({"MLP, MLP": runs["MLP, MLP"]})["MLP, MLP"][0]
        return lambda r: summaries.architectures_summary(r, best_mm=best)

    def architectures(runs):
        return architectures_make(runs)(runs)

    def ioi_members(profile):
        return {f"{opt} L={L}": exp for (opt, L), exp in catalog.ioi(profile).items()}

    def ioi_runs(runs):
        return {summaries.ioi_key(k): r for k, r in runs.items()}

    def ioi(runs):
        return summaries.ioi_summary(ioi_runs(runs))

    def late(make, rows, **kw):  # the views of a chapter's rows read on late means
        return lambda run: late_verdicts.late_values(make, run, rows, **kw)

    def finetune_views(run):
        return late(summaries.finetune_summary, late_rows.FINETUNE)(run) | late(
            summaries.finetune_summary, late_rows.FINETUNE_PRETRAIN, phase=0
        )(run)

    def studied(module, rows, keys=(), **fields):
        """A chapter's study (its module's study_members, study_from_runs, summary and summary_of_runs), its rows
        judged on runs cut at each evaluation of their late window (``keys``: what a dict run holds per
        evaluation)."""

        def views(runs):
            make = module.summary_of_runs(module.study_from_runs(runs))
            return late_verdicts.stopped_values(make, runs, rows, keys)

        name = module.__name__.rsplit(".", 1)[-1]
        return Recordable(
            name,
            f"book/{name}",
            module.study_members,
            lambda runs: module.summary(module.study_from_runs(runs)),
            views=views,
            **fields,
        )

    khop_recordables = khop_recordings.recordables()
    # here, not in khop_recordings: late_verdicts reads the claims registry, which no cached k-hop run is keyed on
    khop_recordables["khop"] = dataclasses.replace(
        khop_recordables["khop"],
        views=lambda runs: late_verdicts.stopped_values(
            khop_members.summary, runs, late_rows.KHOP, khop_members.EVALUATED
        ),
    )

    table = recorded_claims()
    return {
        r.name: dataclasses.replace(r, claims=dict(table.get(r.name, {})))
        for r in [
            Recordable(
                "recall",
                "book/noisy_recall",
                lambda p: {"recall": catalog.recall(p)},
                only(summaries.recall_summary),
                only(summaries.recall_curves),
                only(late(summaries.recall_summary, late_rows.NOISY_RECALL)),
            ),
            Recordable(
                "finetune",
                "book/finetune",
                lambda p: {"finetune": catalog.finetune(p)},
                only(summaries.finetune_summary),
                only(summaries.recall_curves),
                only(finetune_views),
            ),
            Recordable(
                "triggers",
                "book/triggers",
                catalog.triggers,
                summaries.triggers_of,
                views=late(summaries.triggers_of, late_rows.TRIGGERS),
            ),
            Recordable(
                "architectures",
                "book/architectures",
                catalog.architectures,
                architectures,
                views=lambda runs: late(architectures_make(runs), late_rows.ARCHITECTURES)(runs),
            ),
            Recordable(
                "synthetic_ioi",
                "book/synthetic_ioi",
                ioi_members,
                ioi,
                summaries.ioi_curves,
                views=lambda runs: late(summaries.ioi_summary, late_rows.RECORDED_ROWS["synthetic_ioi"])(
                    ioi_runs(runs)
                ),
                also=("book/synthetic_ioi_sgd",),
            ),
            studied(induction_head, late_rows.INDUCTION_HEAD),
            studied(induction_layers, late_rows.INDUCTION_LAYERS),
            studied(
                scan_snap_text,
                late_rows.SCAN_SNAP_TEXT,
                scan_snap_text.EVALUATED,
                curves=scan_snap_text.curves,
                stand_in=scan_snap_text.stand_in,
                draws=False,
            ),
            Recordable(
                "leading_text",
                "book/leading_terms_text",
                lambda p: {"text": leading_study.configs(p)["text"]},
                only(leading_study.text_summary),
                run=leading_study.text_study,
                stand_in=leading_study.stand_in,
            ),
            Recordable(
                "leading_bpe",
                "book/leading_terms_text",
                lambda p: {"bpe": leading_study.configs(p)["bpe"]},
                only(leading_study.bpe_summary),
                run=leading_study.text_study,
                summary_var="bpe_summary",
                stand_in=leading_study.stand_in,
            ),
            Recordable(
                "theory_one_step",
                "book/theory_one_step",
                lambda p: {"study": one_step_study.OneStepStudy.for_profile(p)},
                only(lambda res: one_step_study.summary(res, one_step_study.gradient_check()[0])),
                draws=False,
            ),
            Recordable(
                "theory_attention",
                "book/theory_attention",
                lambda p: {"study": attention_study.AttentionStudy.for_profile(p)},
                only(attention_study.summary),
                draws=False,
            ),
            Recordable(
                "allocation",
                "book/allocation",
                lambda p: {"allocation": catalog.allocation_experiment(p)},
                only(allocation.summary),
                views=only(
                    lambda result: late_verdicts.view_values(
                        allocation.summary, result, allocation.late_views(result), late_rows.ALLOCATION
                    )
                ),
            ),
            Recordable(
                "fact_capacity",
                "book/fact_capacity",
                fact_capacity.grid,
                fact_capacity.grid_summary,
                fact_capacity.grid_curves,
                run_all=fact_capacity.run_many,
            ),
            Recordable(
                "fact_scaling",
                "book/fact_capacity",
                lambda p: {"sweep": fact_capacity.ScalingExperiment.for_profile(p)},
                only(fact_capacity.scaling_summary),
                only(fact_capacity.scaling_curves),
                run=fact_capacity.scaling,
                summary_var="scaling",
            ),
            *khop_recordables.values(),
            Recordable(
                "induction_order",
                "book/induction_head",
                induction_head.order_members,
                induction_head.order_summary,
                induction_head.order_curves,
                summary_var="order",
            ),
            Recordable(
                "induction_random_seeds",
                "book/induction_random",
                induction_random_seeds.random_seed_members,
                induction_random_seeds.random_seeds_summary,
                induction_random_seeds.random_seed_curves,
                summary_var="random_seeds",
                views=lambda runs: late_verdicts.stopped_values(
                    induction_random_seeds.stopped_summary(runs), runs, late_rows.INDUCTION_RANDOM_SEEDS
                ),
            ),
        ]
    }


# The recordables that reproduce an experiment of the sources (their chapters check only the sources' claims)
SOURCE_EXPERIMENTS = (
    "recall",
    "finetune",
    "triggers",
    "architectures",
    "synthetic_ioi",
    "allocation",
    "induction_head",
    "induction_layers",
    "fact_capacity",
    "fact_scaling",
    "khop",
    "khop_rates",
    "scan_snap_text",
    "leading_text",
    "leading_bpe",
    "theory_one_step",
    "theory_attention",
)
# and our own studies, which ``record --all`` runs only when named (``include``)
STUDIES = (
    "induction_order",
    "khop_seeds",
    "khop_interval",
    "khop_interval_long",
    "khop_interval_long250",
    "khop_wide",
    "khop_lr",
    "khop_doubling",
    "khop_anystart",
    "khop_anystart_move",
    "khop_doubling_move",
    "khop_onestart",
    "khop_onestart_move",
    "khop_longstart",
    "khop_longstart_move",
    "khop_probe",
    "khop_probe_seeds",
    "khop_escape",
    "khop_hidden",
    "khop_hidden12",
    "khop_hidden12_long",
    "khop_stage_entry",
    "khop_reseed",
    "khop_reseed_long",
    "khop_delay",
    "khop_onset",
    "induction_random_seeds",
)
EXPERIMENTS = SOURCE_EXPERIMENTS + STUDIES


def experiment(name: str) -> Recordable:
    """The recordable experiment ``name``.

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    config.check_choice("experiment", name, EXPERIMENTS)
    return _registry()[name]


def _literal(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_overrides(items: list[str] | None) -> dict:
    """``["key=value", ...]`` -> ``{key: value}``: numbers as numbers, ``a,b`` as a tuple, else strings."""
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"override {item!r} is not of the form key=value")
        key, text = (s.strip() for s in item.split("=", 1))
        out[key] = tuple(_literal(t) for t in text.split(",") if t) if "," in text else _literal(text)
    return out


def build(name: str, profile: str | None = None, overrides: dict | None = None) -> dict:
    """The validated configurations ({member: configuration}) of a recordable experiment, with ``overrides``
    applied to each (fails before any work)."""
    return experiment(name).build(profile, overrides)


def commit() -> str:
    """``$COMPANION_COMMIT`` when set (the commit of a working tree sent to a remote GPU machine, as the sender
    gave it: such a copy may carry no ``.git``, or a stale one), else the checkout's ``git describe --dirty``,
    else ``"unknown"``."""
    given = os.environ.get("COMPANION_COMMIT", "").strip()
    if given:
        return given
    try:
        out = subprocess.run(
            ["git", "-C", str(config.REPO_ROOT), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        described = out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        described = ""
    return described or "unknown"


def record(
    name: str,
    profile: str | None = None,
    overrides: dict | None = None,
    device=None,
    out_dir: Path | str | None = None,
    precision: str = "fp32",
) -> Path:
    """Run experiment ``name`` and write its recorded results file (atomically) in ``out_dir``, by default the
    folder of the sampler in force (:func:`sampler_dir`: ``data/recorded/counter/`` for the book's, where its builds
    read it); return its path. ``precision``: how float32 matrix products are computed
    (:data:`companion.config.PRECISIONS`); recorded in the file and its name, and in the cache keys of its runs.

    Raises:
        ValueError: before any run, when ``data/recorded_claims.toml`` lists no claim of the experiment, the
            experiment's ``precheck`` refuses the recording, or its members or precheck read a recording drawn
            by another sampler than the one in force (:attr:`Recorded.other_sampler`); after the runs (which are
            cached, so a second call is quick), when a listed claim reads an entry that the summary lacks.
    """
    rec = experiment(name)
    config.check_choice("precision", precision, config.PRECISIONS)
    profile = config.get_profile(profile)
    with reading() as read:  # the recordings its members and summary read (stored as "reads")
        members = build(name, profile, overrides)  # validates first
        checked = rec.claims
        if not checked:
            raise ValueError(
                f"{RECORDED_CLAIMS_FILE.name} lists no claim of {name!r}: write the check lines of {rec.chapter}.md "
                f'(claims.check("...", {rec.summary_var}["..."])) and list them there before recording it'
            )
        if rec.precheck is not None:
            rec.precheck(profile, members)
        other = other_sampler_reads(_reads(read), config.sampler() if rec.draws else None)
        if other:  # its runs would be set against another sampler's: refused before hours of training
            files = [r["file"] for r in other]
            raise ValueError(
                f"{name!r} under the {config.sampler()} sampler reads {files}, drawn by "
                f"{sorted({r['sampler'] for r in other})}: allowed recordings of its own sampler; record "
                f"{sorted({r.experiment for r in read if _relative(r.path) in files})} under {config.sampler()} first"
            )
        overrides = normalise(dict(overrides or {}), next(iter(members.values())))
        # the code the runs start with, not what a long run ends with
        at_commit, package = commit(), config.package_hash()
        facts = config.device_facts(device)
        start = time.perf_counter()
        with config.precision(precision):
            if rec.run_all is not None:
                runs = rec.run_all(members, device=device)
            else:  # cached: re-recording is cheap
                runs = {k: rec.runner(exp)(exp, device=device) for k, exp in members.items()}
            summary = rec.summary(runs)
    missing = sorted(set(checked.values()) - set(summary))
    if missing:
        raise ValueError(
            f"{RECORDED_CLAIMS_FILE.name} stores {missing} of {name!r} but its summary has no such entries "
            f"(it has {sorted(summary)}); nothing written, the runs are cached"
        )
    # the timing views of the chapter's rows: a failure is stored and said, never the loss of the runs' recording
    try:
        with config.precision(precision):
            views = rec.views(runs)
        _check_views(name, views, {cid: summary[key] for cid, key in checked.items()})
        views_error = ""
    except Exception as e:  # any: the recording is written without views, and says why
        views, views_error = {}, f"{type(e).__name__}: {e}"
        print(f"record {name}: no views of its rows ({views_error})", file=sys.stderr)
    wall = time.perf_counter() - start
    result = {
        "format": FORMAT,
        "experiment": name,
        "chapter": rec.chapter,
        "profile": profile,
        "overrides": jsonable(overrides),
        "config": configs(members),
        "summary": jsonable(dict(summary)),
        "meaning": summary.meaning,
        "claims": jsonable({cid: summary[key] for cid, key in checked.items()}),
        "curves": jsonable(rec.curves(runs)),
        # the rows read on late means or on runs as they ended, at each evaluation of the late window (late_verdicts)
        "views": jsonable({cid: list(at_each) for cid, (_, at_each) in views.items()}),
        "views_error": views_error,  # why there are none, where making them failed ("": they did not)
        "version": __version__,
        "commit": at_commit,
        "package": package,
        "precision": precision,
        # how batches are drawn from a seed, and each member's first training batch (tests/test_recorded.py
        # recomputes them: a change of the sampler shows there)
        "sampler": sampler_version() if rec.draws else None,
        "first_batch": first_batches(name, members),
        # the runs trained together as replicas: {member: pack}, for the members that were
        "packs": {k: r["pack"] for k, r in runs.items() if isinstance(r, dict) and "pack" in r},
        # why the runs did not train on the paper's data ("": they did)
        "stand_in": rec.stand_in(members),
        **facts,  # torch's version, the GPU's SM count, torch's CPU threads
        "device": "; ".join(dict.fromkeys(_field(r, "device") for r in runs.values())),
        # training and evaluation, when computed
        "train_seconds": sum(_field(r, "seconds") for r in runs.values()),
        # the runs (or their cache) and the summary (probes included), as this call took them
        "wall_seconds": wall,
        "date": time.strftime("%Y-%m-%d"),
        "command": command(name, profile, overrides, precision),
        # the recordings its members and summary read, and the sampler of each (Recorded.read_other_samplers)
        "reads": _reads(read),
    }
    path = Path(out_dir or sampler_dir()) / file_name(name, profile, overrides, precision)
    atomic_write_text(path, json.dumps(result, indent=1) + "\n")
    return path


def _check_views(name: str, views: dict, values: dict) -> None:
    """Refuse views (:attr:`Recordable.views`: {claim id: (value, values in the views)}) of a row the recording
    does not store, or whose value is not the stored one: they would judge another number than the recording's.

    >>> _check_views("x", {"a.b": (0.5, [0.4, 0.6])}, {"a.b": 0.5})
    >>> _check_views("x", {"a.b": (0.5, [0.4])}, {"a.b": 0.7})
    Traceback (most recent call last):
    ...
    ValueError: 'x': the views of ['a.b'] are made on other values than its summary's ([0.5] against [0.7]); nothing written, the runs are cached
    """
    import numpy as np

    bad = sorted(
        cid
        for cid, (value, _) in views.items()
        if cid not in values or not np.isclose(value, values[cid], rtol=1e-9, atol=1e-12, equal_nan=True)
    )
    if bad:
        raise ValueError(
            f"{name!r}: the views of {bad} are made on other values than its summary's "
            f"({[views[c][0] for c in bad]} against {[values.get(c) for c in bad]}); nothing written, the runs are "
            "cached"
        )


def _reads(read: list[Recorded]) -> list[dict]:
    """The recordings ``read`` as a recording stores them: each one's path below data/recorded/ and sampler."""
    return [{"file": _relative(r.path), "sampler": r.drawn_by} for r in read]


def _relative(path: Path) -> str:
    """A recording's path below data/recorded/ (``counter/x.json``), or as it is when elsewhere."""
    try:
        return str(Path(path).relative_to(RECORDED_DIR))
    except ValueError:
        return str(path)


ALL_HEADER = ("experiment", "runs", "seconds", "result")


def sweeps(profile: str | None = None) -> list[tuple[str, dict]]:
    """(experiment, settings): the recordings of a source experiment at other settings that claims of the
    sources are about, which ``record --all`` makes after the experiments themselves: Appendix B.6's learning
    rates (``book/paper_scale``)."""
    from companion.experiments import scale_study

    return [("recall", s) for s in scale_study.lr_settings(profile)]


START_MARGIN = 5.0  # seconds: a recording is not started with less than this left before the deadline


def record_all(
    profile: str | None = None,
    deadline: float = 600.0,
    include: tuple[str, ...] = (),
    device=None,
    out_dir: Path | str | None = None,
    threads: int | None = None,
    launch: Callable | None = None,
    progress: bool = False,
    precision: str = "fp32",
) -> list[list]:
    """Record every experiment of the sources (:data:`SOURCE_EXPERIMENTS`), then their :func:`sweeps`, then the
    studies named in ``include``, one after another, each in its own process, within ``deadline`` seconds; one
    row per recording (:data:`ALL_HEADER`; a sweep's row names its settings).

    An experiment whose file is already recorded for the profile's configuration (in ``out_dir``, ``data/recorded``
    or the folder of the sampler in force, :func:`sampler_dir`; not :func:`stale`, not :func:`incomplete` and drawn
    by the sampler in force) is skipped. A recording still running at the deadline is stopped and writes nothing
    (a file is written whole at the end of a recording); one is not started with less than :data:`START_MARGIN`
    seconds left. ``launch(name, command, seconds)`` -> the result's words runs one
    recording (default: a child process bounded by ``seconds``). ``progress``: each row on stderr as it ends.

    Raises:
        ValueError: before any work, a deadline that is not positive, an unknown name in ``include``, or an
            experiment that has no configuration at ``profile``.
    """
    config.check_float("deadline", deadline, 0.0, None, low_open=True)
    config.check_choice("precision", precision, config.PRECISIONS)
    for name in include:
        config.check_choice("experiment", name, EXPERIMENTS)
    profile = config.get_profile(profile)
    jobs = [(n, {}) for n in SOURCE_EXPERIMENTS] + sweeps(profile)
    jobs += [(n, {}) for n in include if n not in SOURCE_EXPERIMENTS]
    # every configuration valid before any work
    members = [len(build(n, profile, settings)) for n, settings in jobs]
    launch = launch or _launch
    # out_dir, then the committed recordings a build under the sampler in force reads (data/recorded/ and the
    # sampler's folder, committed_paths): a recording committed there is not made again
    places = list(
        dict.fromkeys(Path(d) for d in [*([out_dir] if out_dir else []), RECORDED_DIR, sampler_dir()])
    )
    start, rows = time.monotonic(), []
    for (name, settings), n_runs in zip(jobs, members):
        label = " ".join([name, *(f"{k}={v}" for k, v in sorted(settings.items()))])
        done = [
            r
            for d in places
            if d.is_dir()
            for r in runs(name, d, profile, settings, precision)
            if not stale(r) and not incomplete(r) and not r.other_sampler
        ]
        left = deadline - (time.monotonic() - start)
        if done or left < START_MARGIN:
            why = f"already recorded ({done[-1].path.name})" if done else "not started: the deadline"
            rows.append([label, n_runs, 0.0, why])
            continue
        cmd = [sys.executable, "-m", "companion", "record", name, "--profile", profile]
        cmd += [arg for k, v in sorted(settings.items()) for arg in ("--set", f"{k}={v}")]
        cmd += ["--device", str(device)] if device is not None else []
        cmd += ["--out-dir", str(out_dir)] if out_dir is not None else []
        cmd += ["--threads", str(threads)] if threads is not None else []
        cmd += ["--precision", precision] if precision != "fp32" else []
        t0 = time.monotonic()
        result = launch(label, cmd, left)
        rows.append([label, n_runs, round(time.monotonic() - t0, 1), result])
        if progress:
            print(f"record {label}: {result} ({rows[-1][2]} s)", file=sys.stderr, flush=True)
    return rows


def incomplete(rec: Recorded) -> list[str]:
    """The claims that ``data/recorded_claims.toml`` reads off this recording's experiment and that the recording
    cannot give (its summary predates the entry that measures them); :func:`record_all` records it again."""
    return sorted(cid for cid in recorded_claims().get(rec.experiment, {}) if cid not in rec.claims)


def _launch(name: str, cmd: list[str], seconds: float) -> str:
    """Run one recording's command, stopped after ``seconds``; the result in words."""
    try:
        proc = subprocess.run(cmd, timeout=seconds, capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        return "stopped at the deadline (nothing written)"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return f"failed (exit {proc.returncode}): {last}"
    return "recorded"


def _field(run, key: str):
    """A run's attribute (the recall family's run objects) or key (runs returned as dicts)."""
    return run[key] if isinstance(run, dict) else getattr(run, key)


def stale(rec: Recorded) -> str:
    """Why a recorded file no longer matches its experiment's configuration ('' when it does). Its configuration
    is built under the sampler that drew it, so that one made from another recording's runs (the moves of
    ``khop_anystart_move``) is compared with what that sampler's recordings give (:func:`committed_paths`)."""
    try:
        own = rec.drawn_by or config.sampler()  # None: the runs draw the same batches under either
    except ValueError as e:  # an unknown sampler version
        return f"{e}; regenerate with: {rec.command}"
    try:
        with config.using_sampler(own):
            exp = build(rec.experiment, rec.profile, rec.settings())
    except ValueError as e:
        return f"its settings are no longer valid ({e}); regenerate with: {rec.command}"
    now = configs(exp)
    if len(exp) == 1:
        now = _without_new_defaults(now, rec.config, next(iter(exp.values())))
    else:
        now = {k: _without_new_defaults(v, rec.config.get(k, {}), exp[k]) for k, v in now.items()}
    changed = sorted(k for k in set(now) | set(rec.config) if now.get(k) != rec.config.get(k))
    if changed:
        diffs = ", ".join(f"{k}: recorded {rec.config.get(k)!r}, now {now.get(k)!r}" for k in changed)
        return f"configuration changed ({diffs}); regenerate with: {rec.command}"
    return _sampler_changed(rec, exp, own)


def _sampler_changed(rec: Recorded, members: dict, drawn_by: str) -> str:
    """Why the batches a recording trained on are no longer those its configuration draws today with the sampler
    that drew them, ``drawn_by`` (the one in force for runs that draw the same batches under either; '' when they
    are, or when the file predates these fields): another first batch. A recording of another sampler than the
    one in force is not stale for that: it is kept as evidence, labelled (:attr:`Recorded.other_sampler`), until
    it is made again."""
    if "first_batch" in rec.data:
        with config.using_sampler(drawn_by):
            now = first_batches(rec.experiment, members)
        moved = sorted(
            k for k in set(now) | set(rec.data["first_batch"]) if now.get(k) != rec.data["first_batch"].get(k)
        )
        if moved:
            return (
                f"the first training batch of {', '.join(moved)} is not the one the {drawn_by} sampler draws "
                f"today (it changed without a new version in config.SAMPLER_VERSIONS?); regenerate with: "
                f"{rec.command}"
            )
    return ""


def _without_new_defaults(now: dict, recorded: dict, exp) -> dict:
    """``now`` less the fields a recorded configuration predates whose value today is their default: a field is
    added with the default that keeps the old behaviour, so such a file still describes its run."""
    defaults = {f.name: f.default for f in dataclasses.fields(exp) if f.default is not dataclasses.MISSING}
    return {k: v for k, v in now.items() if k in recorded or k not in defaults or v != jsonable(defaults[k])}
