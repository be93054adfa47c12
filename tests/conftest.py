"""Fixtures shared by the test modules."""

from __future__ import annotations

import importlib.util

import pytest

from companion import config


def load_script(path: str):
    """A script of the repository that is not part of the package (``benchmarks/prose_stats.py``,
    ``scripts/migrate_recordings.py``), loaded as a module from its path relative to the repository root."""
    full = config.REPO_ROOT / path
    if not full.is_file():
        raise ValueError(f"path={path!r} is not a file of the repository")
    spec = importlib.util.spec_from_file_location(full.stem, full)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def prose_stats():
    """benchmarks/prose_stats.py, issue 52's sentence counter."""
    return load_script("benchmarks/prose_stats.py")


@pytest.fixture
def results_file():
    """benchmarks/results_file.py, where the benchmarks write their results."""
    return load_script("benchmarks/results_file.py")


@pytest.fixture
def chapter_times(monkeypatch):
    """benchmarks/chapter_times.py, the chapters' seconds under nbval from a pytest log."""
    monkeypatch.syspath_prepend(str(config.REPO_ROOT / "benchmarks"))  # it imports results_file beside it
    return load_script("benchmarks/chapter_times.py")


@pytest.fixture
def flip_script():
    """scripts/flip_list.py, issue 54's flip list."""
    return load_script("scripts/flip_list.py")


@pytest.fixture
def prose_script():
    """scripts/prose_under.py, a chapter's prose under each sampler (issue 54's switch)."""
    return load_script("scripts/prose_under.py")


@pytest.fixture
def build_book():
    """scripts/build_book.py, the book build with its chapters read in parallel."""
    return load_script("scripts/build_book.py")


@pytest.fixture
def book_run_script():
    """scripts/book_run.py, the book executed under nbval at one profile and recorded (issue 56)."""
    return load_script("scripts/book_run.py")


@pytest.fixture
def subjects_script(monkeypatch):
    """benchmarks/khop_subjects.py, the seeds' k-hop runs classified by how they end (issue 54)."""
    monkeypatch.syspath_prepend(str(config.REPO_ROOT / "benchmarks"))  # it imports results_file beside it
    return load_script("benchmarks/khop_subjects.py")


@pytest.fixture
def pack_script(monkeypatch):
    """benchmarks/khop_pack_divergence.py, k-hop runs packed against the same runs alone (issue 54)."""
    monkeypatch.syspath_prepend(str(config.REPO_ROOT / "benchmarks"))  # it imports results_file beside it
    return load_script("benchmarks/khop_pack_divergence.py")


@pytest.fixture
def gpu_wheels():
    """benchmarks/gpu_wheels.py, the wheels a book run on the GPU machine needs (issue 56)."""
    return load_script("benchmarks/gpu_wheels.py")


@pytest.fixture
def migrations():
    """scripts/migrate_recordings.py, the migrations of the committed recordings."""
    return load_script("scripts/migrate_recordings.py")


@pytest.fixture
def numpy_sampler(monkeypatch):
    """Training batches from the numpy generators, whatever ``$COMPANION_SAMPLER`` says: for a test whose reference
    is numpy-only by construction (the old training loops of ``tests/engine_reference.py``, a spy on the numpy
    tasks' ``sample``, the committed recordings' skip and label logic). The counter sampler has its own tests
    (``tests/test_streams.py``, ``tests/test_counter.py``)."""
    monkeypatch.setenv("COMPANION_SAMPLER", "numpy")
