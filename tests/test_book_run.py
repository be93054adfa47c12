"""scripts/book_run.py (issue 56): the book executed under nbval at one profile, recorded per chapter, and the
scorecard's column that reads the record (companion.claims.book_run)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest

from companion import claim_pages, claims, config

HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
    format_version: 0.13
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# {title}
"""


def _cell(code: str) -> str:
    return f"\n```{{code-cell}} ipython3\n{code}\n```\n"


@pytest.fixture
def tiny_book(tmp_path):
    """A book of two chapters beside the repository's conftest.py (which collects MyST chapters for nbval): one,
    named as a registered row's chapter, that reads a quick recording, checks the row (at a value that does not
    hold) and then fails in its third cell; one that sleeps past any bound a test gives it."""
    root = tmp_path / "root"
    (root / "book").mkdir(parents=True)
    shutil.copy(config.REPO_ROOT / "conftest.py", root)
    row = claims.CLAIMS["b3.no_overshoot"]
    (root / f"{row.chapter}.md").write_text(
        HEADER.format(title="Checks")
        + _cell("from companion import recorded\nrec = recorded.latest('allocation', 'quick')")
        + _cell(f"from companion import claims\nclaims.check({row.id!r}, 1.0)")
        + _cell("raise RuntimeError('the third cell fails')")
        + _cell("y = 2")
    )
    (root / "book" / "slow.md").write_text(HEADER.format(title="Slow") + _cell("import time\ntime.sleep(60)"))
    toc = {"format": "jb-book", "root": "intro", "parts": [{"chapters": [{"file": row.chapter}]}]}
    toc["parts"][0]["chapters"].append({"file": "book/slow"})
    (root / "_toc.yml").write_text(json.dumps(toc))  # JSON is YAML
    return root, row


def test_a_book_run_records_each_chapter_its_cells_and_the_rows_it_checked(
    book_run_script, tiny_book, tmp_path
):
    root, row = tiny_book
    out, cache = tmp_path / "book" / "full.json", tmp_path / "cache"
    args = ["--root", str(root), "--out", str(out), "--cache", str(cache), "--profile", "full"]
    assert book_run_script.main([*args, "--chapter-timeout", "8", row.chapter, "book/slow"]) == 0
    run = json.loads(out.read_text())
    checks, slow = run["chapters"][row.chapter], run["chapters"]["book/slow"]
    assert (checks["outcome"], checks["cells"], checks["passed"], checks["failed"]) == ("failed", 4, 3, 1)
    assert "the third cell fails" in checks["first_failure"]
    assert checks["rows"] == {
        row.id: {"criterion": str(row.criterion("full")), "observed": 1.0, "passed": False}
    }
    assert (slow["outcome"], slow["cells"], slow["passed"], slow["not_reached"]) == ("timed out", 1, 0, 1)
    assert slow["bound_s"] == 8 and slow["rows"] == {} and slow["reads"] == {}
    assert checks["reads"] == {"quick": ["allocation-quick.json"]}  # what the chapter's kernel read
    assert {checks["commit"], checks["device"][:3]} == {book_run_script._about()["commit"], "cpu"}
    # the scorecard's column judges the row by the registry's criterion; a row the run did not reach says why
    in_run = {r["claim"]: r["book_run"] for r in claims.results("quick", book=claims.book_run(path=out))}
    assert in_run[row.id].startswith(f"{claims.FAIL}: 1 (cpu")
    assert in_run[row.id].endswith("; its chapter read 1 recording at quick)")
    other = next(c.id for c in claims.CLAIMS.values() if c.chapter == row.chapter and c.id != row.id)
    assert in_run[other] == f"{claims.NOT_CHECKED}: the chapter failed, 3 of 4 cells"
    elsewhere = next(c.id for c in claims.CLAIMS.values() if c.chapter != row.chapter)
    assert in_run[elsewhere] == f"{claims.NOT_CHECKED}: the chapter was not run at full"
    # resumed: a chapter recorded is not run again; one that timed out is, under a longer bound only
    before = out.read_text()
    assert book_run_script.main([*args, "--chapter-timeout", "6", row.chapter, "book/slow"]) == 0
    assert out.read_text() == before
    assert book_run_script._to_run("book/slow", run["chapters"], 9)
    assert not book_run_script._to_run(row.chapter, run["chapters"], 9)
    assert book_run_script._to_run(row.chapter, run["chapters"], 9, again=True)
    assert "\x1b[" not in checks["first_failure"]  # the terminal's colour codes are left out


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    status = Path(f"/proc/{pid}/status")
    try:
        return "\tZ" not in next(
            line for line in status.read_text().splitlines() if line.startswith("State:")
        )
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_book_run_stopped_stops_the_chapter_s_kernel(tiny_book, tmp_path, sig):
    """Ctrl-C (SIGINT) or SIGTERM to the runner stops the chapter it is running with its kernel, which run in a
    session of their own (so that a bound can kill them together): they would otherwise go on computing, for up to
    an hour at the full profile, after the run was stopped."""
    root, _ = tiny_book
    pid_file = tmp_path / "kernel.pid"
    (root / "book" / "pid.md").write_text(
        HEADER.format(title="Pid")
        + _cell(f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)")
    )
    cmd = [sys.executable, str(config.REPO_ROOT / "scripts" / "book_run.py"), "--root", str(root)]
    cmd += ["--out", str(tmp_path / "full.json"), "--cache", str(tmp_path / "cache"), "book/pid"]
    runner = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kernel = None
    try:
        for _ in range(600):  # the kernel starts within seconds; 60 s at most
            if pid_file.is_file() and pid_file.read_text():
                kernel = int(pid_file.read_text())
                break
            time.sleep(0.1)
        assert kernel is not None and _alive(kernel)
        runner.send_signal(sig)
        assert runner.wait(timeout=30) != 0
        deadline = time.time() + 10
        while _alive(kernel) and time.time() < deadline:
            time.sleep(0.1)
        assert not _alive(kernel)
    finally:
        runner.kill()
        if kernel is not None and _alive(kernel):
            os.kill(kernel, signal.SIGKILL)


def test_a_book_run_refuses_bad_arguments_before_running_anything(book_run_script, tiny_book, tmp_path):
    root, row = tiny_book
    out = tmp_path / "quick.json"
    with pytest.raises(ValueError, match=r"--deadline=0\.0 is out of range"):
        book_run_script.main(["--root", str(root), "--out", str(out), "--deadline", "0", row.chapter])
    with pytest.raises(ValueError, match=r"chapters \['book/nothing'\] are not files"):
        book_run_script.main(["--root", str(root), "--out", str(out), "book/nothing"])
    with pytest.raises(ValueError, match="unknown --profile 'huge'"):
        book_run_script.main(["--root", str(root), "--out", str(out), "--profile", "huge"])
    out.write_text(json.dumps({"profile": "quick", "chapters": {}}))
    with pytest.raises(ValueError, match="records the 'quick' profile"):
        book_run_script.main(["--root", str(root), "--out", str(out), "--profile", "full", row.chapter])
    with pytest.raises(ValueError, match="not profile='full'"):
        claims.book_run(path=out)
    assert not (tmp_path / "cache").exists()


def test_the_book_runs_first_the_chapters_with_rows_of_the_papers_scale_only(book_run_script):
    order = book_run_script.chapters()
    at_full = {c.chapter for c in claims.CLAIMS.values() if c.scale == "full"}
    assert set(order[: len(at_full)]) == at_full and len(order) == len(set(order))
    assert "book/scorecard" not in order and "book/khop" in order  # pages without code are not chapters


def test_the_scorecard_shows_the_book_run_beside_this_build(monkeypatch, tmp_path):
    c = claims.CLAIMS["b3.no_overshoot"]
    entry = {
        "outcome": "passed",
        "cells": 5,
        "passed": 5,
        "device": "cuda (NVIDIA H100)",
        "date": "2026-12-03",
    }
    run = {
        "profile": "full",
        "chapters": {c.chapter: entry | {"commit": "abc", "rows": {c.id: {"observed": 0}}}},
    }
    monkeypatch.setattr(claims, "BOOK_RUN_DIR", tmp_path)
    assert "at full (book run)" not in claim_pages.scorecard("quick")  # no record: no column
    (tmp_path / "full.json").write_text(json.dumps(run))
    html = claim_pages.scorecard("quick")
    assert "<th" in html and "at full (book run)</th>" in html
    assert "1 chapter (1 passed) on cuda (NVIDIA H100), 2026-12-03, commit abc" in html
    assert f"{claims.HOLDS}: 0 (cuda (NVIDIA H100), 2026-12-03)" in html


def test_the_gpu_machine_gets_what_executing_a_chapter_needs_and_nothing_its_image_holds(gpu_wheels):
    wheels = gpu_wheels.needed()
    assert {"nbval", "jupytext", "ipykernel", "myst-nb", "jupyter-client", "pyzmq", "nbformat"} <= set(wheels)
    assert not set(wheels) & gpu_wheels.IMAGE and {"torch", "numpy", "pytest"} <= gpu_wheels.IMAGE
    assert wheels["nbval"] == metadata.version("nbval")
    with pytest.raises(ValueError, match="no-such-package is required on the GPU machine but not installed"):
        gpu_wheels.needed(roots=("no_such.package",))
