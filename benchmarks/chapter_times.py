"""Where the time of `make test`'s chapters goes: per chapter, the seconds of its cells under nbval, read from the
log of a run with pytest's ``--durations=0``.

    PYTEST_ADDOPTS=--durations=0 bash .ci/run 2>&1 | tee ci.log      # or: make notebooks
    python benchmarks/chapter_times.py ci.log                        # a table on stdout, slowest first
    python benchmarks/chapter_times.py ci.log --write                # and add it to results/<machine>-chapters.json

The guide gives each chapter 3 minutes at the quick profile (:data:`BUDGET_S`); the table marks the chapters over
it. A chapter's seconds are the sum of its cells' setup, call and teardown (its kernel's start is the first
cell's setup); the stage's seconds are pytest's own ("N passed in S s"), with the chapters shared between
``TEST_JOBS`` processes, so the stage takes about the chapters' sum over the processes when they are balanced.
Cells faster than ``--durations-min`` (pytest's default 0.005 s) are not in the log: run without a larger one
to have every cell. Times vary by about 30% from day to day on the same kind of machine: compare two commits in
one session, one right after the other. So ``--write`` adds the run, dated, to the machine's list of runs
(:func:`with_run`, the newest :data:`KEEP`) rather than replacing the last one: one slow day's chapters over the
budget then read as one day among others.

>>> log = '''
... ============================== slowest durations ===============================
... 206.54s call     book/three_steps.md::Cell 1
... 3.14s call     book/three_steps.md::Cell 0
... 0.62s setup    book/three_steps.md::Cell 0
... 12.00s call     book/khop.md::Cell 2
... 410 passed in 1658.94s (0:27:38)
... '''
>>> times = parse(log)
>>> times["stage_s"], times["chapters"]["book/three_steps"]
(1658.94, {'seconds': 210.3, 'cells': 2, 'slowest_cell': 'Cell 1', 'slowest_s': 206.54})
>>> over_budget(times)
['book/three_steps']
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from pathlib import Path

import results_file

from companion import config, record

BUDGET_S = 180.0  # the guide: each chapter under 3 minutes at quick
KEEP = 30  # the runs a machine's result file keeps, the newest
HEADER = re.compile(r"^=+ slowest (?:\d+ )?durations =+$", re.M)
ITEM = re.compile(r"^(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(book/\S+?)\.md::(Cell \d+)", re.M)
PASSED = re.compile(r"^.*\b\d+ passed\b.* in (\d+(?:\.\d+)?)s\b", re.M)


def parse(text: str) -> dict:
    """The chapters' times in a pytest log: ``{"stage_s": seconds of the stage, "chapters": {chapter: {"seconds",
    "cells", "slowest_cell", "slowest_s"}}}``, the chapters slowest first.

    Raises:
        ValueError: no durations section lists a chapter's cell (the run had no ``--durations=0``), or more than
            one does (two chapter stages in one log), or the stage's "passed in" line is missing.
    """
    starts = [m.end() for m in HEADER.finditer(text)]
    sections = [text[a : b if b is not None else len(text)] for a, b in zip(starts, [*starts[1:], None])]
    with_cells = [s for s in sections if ITEM.search(s)]
    if len(with_cells) != 1:
        raise ValueError(
            f"the log has {len(with_cells)} durations sections that list chapter cells: it needs exactly one "
            "(run the chapters once with PYTEST_ADDOPTS=--durations=0)"
        )
    section = with_cells[0]
    passed = PASSED.search(section)
    if passed is None:
        raise ValueError("the chapters' durations section has no 'N passed in S s' line after it")
    chapters: dict[str, dict] = {}
    cells: dict[str, dict[str, float]] = {}
    for m in ITEM.finditer(section[: passed.start()]):
        seconds, chapter, cell = float(m.group(1)), m.group(3), m.group(4)
        per_cell = cells.setdefault(chapter, {})
        per_cell[cell] = per_cell.get(cell, 0.0) + seconds
    for chapter, per_cell in cells.items():
        slowest = max(per_cell, key=per_cell.get)
        chapters[chapter] = {
            "seconds": round(sum(per_cell.values()), 2),
            "cells": len(per_cell),
            "slowest_cell": slowest,
            "slowest_s": round(per_cell[slowest], 2),
        }
    ordered = dict(sorted(chapters.items(), key=lambda kv: -kv[1]["seconds"]))
    return {"stage_s": float(passed.group(1)), "chapters": ordered}


def over_budget(times: dict, budget_s: float = BUDGET_S) -> list[str]:
    """The chapters of ``times`` (:func:`parse`) whose cells took more than ``budget_s`` seconds, slowest first."""
    return [ch for ch, t in times["chapters"].items() if t["seconds"] > budget_s]


def with_run(previous: dict | None, run: dict, device: str, keep: int = KEEP) -> dict:
    """A machine's result file with ``run`` added: ``{"device", "budget_s", "runs": [oldest, ..., newest]}``, the
    newest ``keep`` runs. ``previous`` is the file as it stood (None: no file yet).

    >>> one = with_run(None, {"date": "2026-12-03", "stage_s": 1658.9}, "cpu")
    >>> two = with_run(one, {"date": "2026-12-04", "stage_s": 1042.0}, "cpu")
    >>> [r["date"] for r in two["runs"]], two["device"]
    (['2026-12-03', '2026-12-04'], 'cpu')
    >>> with_run(two, {"stage_s": 1.0}, "gpu")
    Traceback (most recent call last):
    ValueError: the result file is of device 'cpu', not 'gpu'

    Raises:
        ValueError: ``keep`` is below 1, or ``previous`` is another machine's file or has no list of runs.
    """
    if keep < 1:
        raise ValueError(f"keep={keep} is out of range: at least 1")
    previous = dict(previous or {"device": device, "runs": []})
    if previous.get("device", device) != device:
        raise ValueError(f"the result file is of device {previous['device']!r}, not {device!r}")
    if not isinstance(previous.get("runs"), list):
        raise ValueError(f"the result file has no list of runs: keys {sorted(previous)}")
    return {"device": device, "budget_s": BUDGET_S, "runs": [*previous["runs"], run][-keep:]}


def device_of(jobs: int) -> str:
    """The machine, as the other results name it: this CPU's model and the ``jobs`` processes of one thread each
    that ran the chapters (run the script on the machine that made the log)."""
    return f"{config.device_name('cpu').rsplit(',', 1)[0]}, {jobs} threads"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path, help="a pytest log of the chapters run with --durations=0")
    ap.add_argument(
        "--write", action="store_true", help="also write the numbers to results/<machine>-chapters.json"
    )
    ap.add_argument(
        "--commit", default=None, help="the commit the log ran (default: record.commit(), this checkout's)"
    )
    ap.add_argument(
        "--jobs", type=int, default=2, help="the processes that ran the chapters (TEST_JOBS; default 2)"
    )
    args = ap.parse_args(argv)
    if args.jobs < 1:
        raise ValueError(f"--jobs={args.jobs} is out of range: at least 1")
    times = parse(args.log.read_text(encoding="utf-8", errors="replace"))
    total = sum(t["seconds"] for t in times["chapters"].values())
    print(f"stage: {times['stage_s']:.0f} s; the chapters' cells: {total:.0f} s in all")
    print("| chapter | seconds | cells | slowest cell | its seconds |")
    print("| --- | ---: | ---: | --- | ---: |")
    over = set(over_budget(times))
    for ch, t in times["chapters"].items():
        mark = " (over 3 min)" if ch in over else ""
        print(
            f"| {ch}{mark} | {t['seconds']:.1f} | {t['cells']} | {t['slowest_cell']} | {t['slowest_s']:.1f} |"
        )
    if args.write:
        device = device_of(args.jobs)
        run = {
            "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
            "commit": args.commit or record.commit(),
            "jobs": args.jobs,
            "over_budget": over_budget(times),
            "cells_s": round(total, 2),
            **times,
        }
        where = results_file.path(device, "-chapters")
        previous = json.loads(where.read_text(encoding="utf-8")) if where.exists() else None
        out = with_run(previous, run, device)
        results_file.write(where, out)
        stages = [r["stage_s"] for r in out["runs"]]
        print(
            f"written: {where} ({len(stages)} runs; the stage from {min(stages):.0f} to {max(stages):.0f} s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
