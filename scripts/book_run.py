"""Execute the book's chapters under nbval at one profile and record what happened (issue 56): per chapter the
cells passed, failed and not reached, seconds, device, commit and versions, and the result of every claim row the
chapter checked, in ``data/recorded/book/<profile>.json``. The scorecard shows each row's status in that run beside
this build's (:func:`companion.claims.book_run`).

    python scripts/book_run.py --profile full --deadline 540               # every chapter, in priority order
    python scripts/book_run.py --profile full book/synthetic_ioi book/paper_scale

The chapters run one after another, each in its own pytest process (``--nbval-lax``, as ``make test`` runs them),
with ``COMPANION_CHECKS=record`` (a row that does not hold is recorded, not raised, so the chapter goes on) and one
cache folder for the whole run. Each is bounded by the time left before ``--deadline`` (and ``--chapter-timeout``):
a chapter stopped at its bound is recorded as "timed out" with the cells it finished. The file is written after
every chapter, so a run stopped at any point keeps what it finished; run again with the same ``--out``, it resumes:
a chapter already recorded is not run again, except one that timed out under a shorter bound than this run gives
it, or every chapter named with ``--again``. Without chapters named, the order is the table of contents', the
chapters that carry a row registered at the papers' scale only (``scale = "full"``) first.

The GPU machine lacks nbval, jupytext, ipykernel and myst-nb: ``benchmarks/gpu_wheels.py`` fetches them as wheels
and ``benchmarks/gpu_session.sh`` (BOOK=1) installs them there and runs this script.

This module is also the pytest plugin that records the cells (``-p book_run``): with ``$BOOK_RUN_LOG`` set, each
cell's outcome is appended to that file as one JSON line as soon as the cell ends.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOG_ENV = "BOOK_RUN_LOG"


# --- the pytest plugin: one JSON line per cell, written when the cell ends ---------------------------------------
def _log(entry: dict) -> None:
    path = os.environ.get(LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def pytest_collection_finish(session) -> None:
    _log({"collected": len(session.items)})


def pytest_runtest_logreport(report) -> None:
    if (
        report.when == "call" or report.outcome == "failed"
    ):  # a setup failure (no kernel) is a failed cell too
        entry = {"cell": report.nodeid.split("::")[-1], "outcome": report.outcome, "seconds": report.duration}
        if report.failed:  # its last lines, without the terminal's colour codes
            entry["message"] = re.sub(r"\x1b\[[0-9;]*m", "", str(report.longrepr))[-2000:]
        _log(entry)


# --- the runner --------------------------------------------------------------------------------------------------
def chapters(root: Path = ROOT, registry=None) -> list[str]:
    """The book's chapters (docnames such as ``book/khop``) in the table of contents' order, those with a row
    registered at the papers' scale only first."""
    import yaml

    from companion import book_ext, claims

    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [ch["file"] for part in toc["parts"] for ch in part["chapters"]]
    files = [f for f in files if book_ext.is_chapter(root / f"{f}.md")]
    registry = claims.CLAIMS if registry is None else registry
    at_full = {c.chapter for c in registry.values() if c.scale == "full"}
    return sorted(files, key=lambda f: f not in at_full)  # stable: the toc's order within each group


def cells(log: Path) -> dict:
    """What the plugin wrote for one chapter: cells collected, passed, failed, the seconds they took and the first
    failure's message (its last 2000 characters)."""
    lines = [json.loads(s) for s in log.read_text().splitlines() if s.strip()] if log.is_file() else []
    collected = next((e["collected"] for e in lines if "collected" in e), 0)
    ran = [e for e in lines if "cell" in e]
    failed = [e for e in ran if e["outcome"] == "failed"]
    return {
        "cells": collected,
        "passed": sum(e["outcome"] == "passed" for e in ran),
        "failed": len(failed),
        "cell_seconds": round(sum(e["seconds"] for e in ran), 2),
        "first_failure": f"{failed[0]['cell']}: {failed[0].get('message', '')}" if failed else "",
    }


def rows_checked(cache: Path, profile: str, since: float) -> dict:
    """The claim results a chapter wrote into the run's cache (``claims/<profile>/``) from ``since`` on:
    {claim id: its result (observed, criterion, passed, asserted, package; or skipped and why)}."""
    folder = Path(cache) / "claims" / profile
    out = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path.stat().st_mtime >= since:
            rec = json.loads(path.read_text())
            out[rec["id"]] = {k: rec[k] for k in ("observed", "criterion", "passed", "skipped") if k in rec}
    return out


def recordings_read(log: Path) -> dict[str, list[str]]:
    """The recorded files a chapter chose to read its values from (``$COMPANION_READS_LOG``,
    :func:`companion.recorded.latest`), by profile: {profile: sorted file names}."""
    out: dict[str, set] = {}
    for line in log.read_text().splitlines() if log.is_file() else []:
        rec = json.loads(line)
        out.setdefault(rec["profile"], set()).add(rec["file"])
    return {p: sorted(files) for p, files in sorted(out.items())}


def _stop(proc: subprocess.Popen) -> None:
    """Stop pytest and the kernel it started (one process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_chapter(
    chapter: str, *, profile: str, cache: Path, bound: float, cell_timeout: int, root: Path
) -> dict:
    """Execute one chapter under nbval in its own process group, stopped after ``bound`` seconds."""
    from companion.recorded import READS_LOG_ENV

    log = Path(cache) / "book_run" / f"{chapter.replace('/', '_')}.jsonl"
    read_log = log.with_suffix(".reads.jsonl")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    read_log.unlink(missing_ok=True)
    env = dict(
        os.environ,
        COMPANION_PROFILE=profile,
        COMPANION_CHECKS="record",
        COMPANION_CACHE_DIR=str(cache),
        **{LOG_ENV: str(log), READS_LOG_ENV: str(read_log)},
        PYTHONPATH=os.pathsep.join(
            filter(None, [str(ROOT / "scripts"), str(ROOT), os.environ.get("PYTHONPATH")])
        ),
    )
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "book_run", "-p", "no:cacheprovider", "-o", "addopts="]
    cmd += ["--nbval-lax", f"--nbval-cell-timeout={cell_timeout}", f"{chapter}.md"]
    start = time.time()
    proc = subprocess.Popen(cmd, cwd=root, env=env, start_new_session=True, stdout=subprocess.PIPE, text=True)
    try:
        tail = proc.communicate(timeout=bound)[0][-2000:]
        timed_out = False
    except subprocess.TimeoutExpired:
        _stop(proc)
        tail, timed_out = "", True
    except BaseException:  # Ctrl-C or SIGTERM: the chapter's session (its own process group) would outlive us
        _stop(proc)
        raise
    seconds = time.time() - start
    got = cells(log)
    if timed_out:
        outcome = "timed out"
    elif got["failed"]:
        outcome = "failed"
    else:
        outcome = "passed" if proc.returncode == 0 and got["passed"] == got["cells"] > 0 else "error"
    entry = {"outcome": outcome, **got, "not_reached": got["cells"] - got["passed"] - got["failed"]}
    entry |= {"seconds": round(seconds, 1), "bound_s": round(bound, 1), "cell_timeout_s": cell_timeout}
    if outcome == "error":
        entry["pytest_tail"] = tail
    entry["rows"] = rows_checked(cache, profile, start)
    entry["reads"] = recordings_read(read_log)
    return entry


def _to_run(chapter: str, done: dict, bound: float, again: bool = False) -> bool:
    """Whether a resumed run executes ``chapter``: not yet recorded, or timed out under a shorter bound, or
    ``again`` (``--again``: every chapter named, e.g. on a GPU after a run on a CPU)."""
    old = done.get(chapter)
    return again or old is None or (old["outcome"] == "timed out" and old["bound_s"] < bound)


def _about() -> dict:
    """Where a chapter ran: device, sampler, seed and versions (:func:`companion.config.environment`), the commit
    (``$COMPANION_COMMIT``, else git's HEAD) and the date."""
    from companion import config

    commit = (
        os.environ.get("COMPANION_COMMIT")
        or subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    )
    env = {k: v for k, v in config.environment().items() if k != "profile"}
    versions = {}
    for name in ("nbval", "jupytext", "ipykernel", "myst-nb", "transformers"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "missing"
    return env | versions | {"commit": commit or "unknown", "date": dt.date.today().isoformat()}


def main(argv: list[str] | None = None) -> int:
    from companion import config
    from companion.io import atomic_write_text

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="docnames such as book/khop (default: every chapter)")
    parser.add_argument("--profile", default="full", help="quick or full (default full)")
    parser.add_argument("--out", type=Path, help="the record (default data/recorded/book/<profile>.json)")
    parser.add_argument(
        "--deadline", type=float, default=3600.0, help="seconds for the whole run (default 3600)"
    )
    parser.add_argument("--chapter-timeout", type=float, default=3600.0, help="seconds per chapter at most")
    parser.add_argument(
        "--cell-timeout", type=int, default=3600, help="nbval's per-cell bound (default 3600)"
    )
    parser.add_argument("--cache", type=Path, help="the run's cache folder (default $COMPANION_CACHE_DIR)")
    parser.add_argument("--again", action="store_true", help="run the chapters named even where recorded")
    parser.add_argument("--root", type=Path, default=ROOT, help="the book's root (default this repository)")
    args = parser.parse_args(argv)
    config.check_choice("--profile", args.profile, config.PROFILES)
    for name in ("deadline", "chapter_timeout", "cell_timeout"):
        config.check_float(f"--{name.replace('_', '-')}", getattr(args, name), low=1)
    todo = args.chapters or chapters(args.root)
    missing = [c for c in todo if not (args.root / f"{c}.md").is_file()]
    if missing:
        raise ValueError(
            f"chapters {missing} are not files <root>/<chapter>.md under root={str(args.root)!r}"
        )
    out = args.out or config.committed_data_dir() / "recorded" / "book" / f"{args.profile}.json"
    record = json.loads(out.read_text()) if out.is_file() else {"profile": args.profile, "chapters": {}}
    if record["profile"] != args.profile:
        raise ValueError(f"{out} records the {record['profile']!r} profile, not --profile={args.profile!r}")
    cache = args.cache or config.cache_dir()
    about, t0 = _about(), time.time()
    print(
        f"book run at the {args.profile} profile: {about['device']}, commit {about['commit'][:10]}",
        flush=True,
    )
    for chapter in todo:
        bound = min(args.chapter_timeout, args.deadline - (time.time() - t0))
        if bound < 5:
            print(f"{chapter}: not run (the deadline)", flush=True)
            continue
        if not _to_run(chapter, record["chapters"], bound, args.again):
            print(f"{chapter}: recorded already ({record['chapters'][chapter]['outcome']})", flush=True)
            continue
        entry = run_chapter(
            chapter,
            profile=args.profile,
            cache=cache,
            bound=bound,
            cell_timeout=min(args.cell_timeout, max(1, int(bound))),
            root=args.root,
        )
        record["chapters"][chapter] = entry | about
        atomic_write_text(out, json.dumps(record, indent=1, sort_keys=True) + "\n")
        print(
            f"{chapter}: {entry['outcome']}, {entry['passed']}/{entry['cells']} cells, {entry['seconds']} s, "
            f"{len(entry['rows'])} rows",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    # SIGTERM ends the run as Ctrl-C does: the chapter running is stopped with its kernel, the record keeps the rest
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    sys.exit(main())
