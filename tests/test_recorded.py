"""Recorded runs (companion.record): the committed files are current, and recording round-trips."""

import json
import re

import pytest

from companion import claims, record
from companion.config import REPO_ROOT
from companion.experiments import summaries

RECORDED = record.runs()


@pytest.mark.parametrize("rec", RECORDED, ids=[r.path.name for r in RECORDED])
def test_recorded_file_is_current(rec):
    """A recorded file whose experiment's configuration changed since it was made is stale."""
    assert not record.stale(rec), f"{rec.path.name} is stale: {record.stale(rec)}"
    assert rec.path.name == record.file_name(rec.experiment, rec.profile, record.parse_overrides(
        [f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in rec.overrides.items()]))
    assert set(rec.claims) <= set(claims.CLAIMS), "a recorded claim id is not in data/claims.toml"


def test_stale_names_the_change_and_the_command(tmp_path):
    rec = record.load(_fake(tmp_path))
    data = dict(rec.data, config=dict(rec.config, lr=0.5))
    why = record.stale(record.Recorded(rec.path, data))
    assert "lr: recorded 0.5, now 0.03" in why and "python -m companion record recall --profile quick" in why
    assert record.stale(rec) == ""


def test_check_holds_only_paper_configuration(tmp_path):
    rec = record.load(_fake(tmp_path))
    with pytest.raises(ValueError, match="only full-profile runs of the paper's configuration"):
        record.check(rec)


def test_chapter_checks_what_a_recorded_run_checks():
    """The noisy-recall chapter's Check cell and summaries.RECALL_CLAIMS name the same (claim, entry) pairs."""
    text = (REPO_ROOT / "book" / "noisy_recall.md").read_text()
    pairs = dict(re.findall(r'claims\.check\("(recall\.[a-z0-9_]+)", summary\["([a-z0-9_]+)"\]\)', text))
    assert pairs == summaries.RECALL_CLAIMS


def test_bad_settings_fail_before_work():
    with pytest.raises(ValueError, match="unknown setting"):
        record.build("recall", "quick", {"depth": 3})
    with pytest.raises(ValueError, match="d=0 is out of range"):
        record.build("recall", "quick", {"d": 0})
    with pytest.raises(ValueError, match="unknown experiment 'nope'"):
        record.build("nope")


def _fake(tmp_path):
    """A recorded-file of the quick recall configuration, without training (the format, not a result)."""
    import dataclasses

    exp = record.build("recall", "quick")
    path = tmp_path / record.file_name("recall", "quick", {})
    path.write_text(json.dumps({
        "format": record.FORMAT, "experiment": "recall", "chapter": "book/noisy_recall", "profile": "quick",
        "overrides": {}, "config": record._jsonable(dataclasses.asdict(exp)), "summary": {"x": "nan"},
        "meaning": {}, "claims": {}, "curves": {}, "version": "0", "commit": "c", "package": "p", "device": "cpu",
        "train_seconds": 1.0, "date": "2026-11-21", "command": record.command("recall", "quick", {})}))
    return path
