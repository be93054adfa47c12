"""Recorded runs (companion.record): the committed files are current, and recording round-trips."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from companion import claims, config, record, record_pages, recorded, report
from companion.data import batch_digest
from companion.experiments import catalog, scale_study

RECORDED = record.runs(directory=record.RECORDED_DIR)
# made again under the counter sampler ahead of the switch (issue 54), read by builds under that sampler
AGAIN = record.runs(directory=record.RECORDED_DIR / "counter")
# made again under the numpy generators with their counter namesakes' arithmetic (the flip list's rounding control)
ROUNDING = record.runs(directory=record.RECORDED_DIR / "rounding")
# a line of a chapter's Check cell that checks an entry of a summary: claims.check("id", summary["entry"])
CHECK_LINE = re.compile(r'claims\.check\("([A-Za-z0-9_.]+)", ([a-z_][a-z0-9_]*)\["([A-Za-z0-9_.]+)"\]')


def chapter_claims(chapter: str, summary_var: str = "summary") -> dict[str, str]:
    """The (claim id -> summary entry) pairs of a chapter's Check cell that read the variable ``summary_var``."""
    text = (config.REPO_ROOT / f"{chapter}.md").read_text()
    return {cid: key for cid, var, key in CHECK_LINE.findall(text) if var == summary_var}


@pytest.mark.parametrize("name", record.EXPERIMENTS)
def test_a_recordable_stores_what_its_chapter_checks(name):
    """The claims the registry declares for a recordable (data/recorded_claims.toml) are the lines of its chapters'
    Check cells (its own and those it is ``also`` shown in) that check its summary, entry for entry; the file lists
    the recordables and nothing else."""
    rec = record.experiment(name)
    checked = {}
    for chapter in (rec.chapter, *rec.also):
        checked |= chapter_claims(chapter, rec.summary_var)
    assert rec.claims and rec.claims == checked
    assert set(record.recorded_claims()) == set(record.EXPERIMENTS)


def test_a_chapter_shows_the_recorded_entries_its_summary_has():
    """side_by_side (record_pages.show) leaves out the entries a chapter's live summary lacks: one recordable, two
    chapters (Appendix J's figures), each showing its part."""
    from companion.report import Summary

    rec = record.latest("synthetic_ioi", "quick", catalog.IOI_LARGER)
    table = record.side_by_side(Summary({"sgd_gain": 0.5}), [rec], ["sgd_gain", "adam_gain"])
    assert "`sgd_gain`" in table and "`adam_gain`" not in table


def test_the_ioi_experiments_by_optimiser_refuse_an_unknown_one():
    """catalog.ioi gives the runs of the optimisers named (each chapter's), and names a bad one."""
    assert {opt for opt, _ in catalog.ioi("quick", ("sgd",))} == {"sgd"}
    assert set(catalog.ioi("quick")) == set(catalog.ioi("quick", ("sgd",))) | set(
        catalog.ioi("quick", ("adam",))
    )
    with pytest.raises(ValueError, match="unknown optimizer 'sg': allowed values are 'sgd', 'adam'"):
        catalog.ioi("quick", ("sg",))
    with pytest.raises(ValueError, match="optimizers=\\(\\) names none"):
        catalog.ioi("quick", ())


@pytest.mark.parametrize(
    "rec",
    RECORDED + AGAIN + ROUNDING,
    ids=[r.path.name for r in RECORDED]
    + [f"counter/{r.path.name}" for r in AGAIN]
    + [f"rounding/{r.path.name}" for r in ROUNDING],
)
def test_recorded_file_is_current(rec):
    """A recorded file whose experiment's configuration changed since it was made is stale (the counter
    sampler's first batches recomputed for those made again under it)."""
    assert not record.stale(rec), f"{rec.path.name} is stale: {record.stale(rec)}"
    assert rec.path.name == record.file_name(rec.experiment, rec.profile, rec.settings(), rec.precision)
    assert set(rec.claims) <= set(claims.CLAIMS), "a recorded claim id is not in data/claims.toml"


def test_stale_names_the_change_and_the_command(tmp_path):
    rec = record.load(_fake(tmp_path))
    data = dict(rec.data, config=dict(rec.config, lr=0.5))
    why = record.stale(record.Recorded(rec.path, data))
    assert "lr: recorded 0.5, now 0.03" in why and "python -m companion record recall --profile quick" in why
    assert record.stale(rec) == ""


def test_latest_filters_by_profile_and_exact_settings(tmp_path):
    path = _fake(tmp_path)
    assert record.latest("recall", "quick", directory=tmp_path).path == path
    assert record.runs("recall", tmp_path, profile="full") == []
    assert record.runs("recall", tmp_path, settings={"d": 8}) == []
    with pytest.raises(ValueError, match=r"python -m companion record recall --profile quick --set d=8`"):
        record.latest("recall", "quick", {"d": 8}, directory=tmp_path)


def test_as_summary_keeps_values_meanings_and_time(tmp_path):
    rec = record.load(_fake(tmp_path))
    s = rec.as_summary("t_minutes")
    assert set(s) == {"x", "t_minutes"} and s["t_minutes"] == 1.0 / 60 and "cpu" in s.meaning["t_minutes"]
    assert s["x"] != s["x"]  # "nan" in the file reads back as NaN


def test_check_holds_only_paper_configuration(tmp_path):
    rec = record.load(_fake(tmp_path))
    with pytest.raises(ValueError, match="only full-profile runs of the paper's configuration"):
        record.check(rec)


@pytest.mark.parametrize("name", record.EXPERIMENTS)
def test_recorded_run_checks_every_claim_of_its_chapter(name):
    """A recorded run checks what its chapter's Check cell checks of the run: every claim row of that chapter
    except those the chapter checks on another computation (``claims.check("id", other[...])``: live, or
    another recorded experiment's summary)."""
    import re

    rec = record.experiment(name)
    rows = {c.id for c in claims.CLAIMS.values() if c.chapter == rec.chapter}
    text = (config.REPO_ROOT / f"{rec.chapter}.md").read_text()
    checked = dict(re.findall(r'claims\.check\("([A-Za-z0-9_.]+)", ([a-z_][a-z0-9_]*)\[', text))
    others = {cid for cid, var in checked.items() if var != rec.summary_var}
    parsed = set(chapter_claims(rec.chapter, rec.summary_var))
    assert parsed and parsed | others == rows and not parsed & others


def test_group_overrides_apply_to_every_member():
    members = record.build("architectures", "quick", {"steps": 7})
    assert len(members) == 4 and {e.steps for e in members.values()} == {7}
    assert members["MLP, linear"].truncate == "F2.W_F"


def test_bad_settings_fail_before_work():
    with pytest.raises(ValueError, match="unknown setting"):
        record.build("recall", "quick", {"depth": 3})
    with pytest.raises(ValueError, match="d=0 is out of range"):
        record.build("recall", "quick", {"d": 0})
    with pytest.raises(ValueError, match="unknown experiment 'nope'"):
        record.build("nope")


def test_record_needs_the_chapters_check_lines_before_work(tmp_path, monkeypatch):
    import dataclasses

    def no_run(exp, device=None):
        raise AssertionError("record ran before checking the chapter")

    real = record._registry()
    blind = dataclasses.replace(real["recall"], claims={}, run=no_run)
    monkeypatch.setattr(record, "_registry", lambda: {**real, "recall": blind})
    with pytest.raises(ValueError, match=r"recorded_claims.toml lists no claim of 'recall'"):
        record.record("recall", "quick", out_dir=tmp_path)
    odd = dataclasses.replace(
        real["recall"],
        run=lambda exp, device=None: {"device": "cpu", "seconds": 0.0},
        summary=lambda runs: report.Summary({"x": (1.0, "one")}),
    )
    monkeypatch.setattr(record, "_registry", lambda: {**real, "recall": odd})
    with pytest.raises(
        ValueError, match=r"stores \[.*'p_correct_drop'.*\] of 'recall' but its summary has no such"
    ):
        record.record("recall", "quick", out_dir=tmp_path)
    assert not list(tmp_path.iterdir())  # nothing written


def _fake(tmp_path):
    """A recorded-file of the quick recall configuration, without training (the format, not a result)."""
    import dataclasses

    exp = record.build("recall", "quick")["recall"]
    path = tmp_path / record.file_name("recall", "quick", {})
    path.write_text(
        json.dumps(
            {
                "format": record.FORMAT,
                "experiment": "recall",
                "chapter": "book/noisy_recall",
                "profile": "quick",
                "overrides": {},
                "config": record.jsonable(dataclasses.asdict(exp)),
                "summary": {"x": "nan"},
                "meaning": {},
                "claims": {},
                "curves": {},
                "version": "0",
                "commit": "c",
                "package": "p",
                "device": "cpu",
                "train_seconds": 1.0,
                "date": "2026-11-21",
                "command": record.command("recall", "quick", {}),
            }
        )
    )
    return path


def test_a_claim_registered_after_recording_is_read_off_the_recorded_summary(tmp_path):
    """A claim that data/recorded_claims.toml lists for the experiment but the file does not store (registered
    later) is read off the recorded summary entry that measures it; a stored value is kept as stored."""
    path = _fake(tmp_path)
    data = json.loads(path.read_text())
    entry = record.recorded_claims()["recall"]["recall.drop_f2_correct"]
    other, other_entry = next((c, e) for c, e in record.recorded_claims()["recall"].items() if e != entry)
    data["summary"] = {entry: 0.25, other_entry: "inf"}
    data["claims"] = {other: 3.0}
    path.write_text(json.dumps(data))
    rec = record.load(path)
    assert rec.claims == {other: 3.0, "recall.drop_f2_correct": 0.25}
    data["summary"] = {}
    path.write_text(json.dumps(data))
    assert record.load(path).claims == {other: 3.0}  # nothing to read it off


@pytest.mark.parametrize("name", ["recall", "architectures", "synthetic_ioi"])
def test_record_roundtrip_tiny(name, tmp_path, monkeypatch):
    """Recording runs the chapter's own summary on real (tiny) runs, writes a file that reads back current."""
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path / "cache"))
    tiny = {"d": 8, "seq_len": 12, "batch": 4, "steps": 3, "n_test": 8, "eval_every": 1, "dense_until": 0}
    path = record.record(name, "quick", tiny, device="cpu", out_dir=tmp_path)
    rec = record.load(path)
    assert path.name == record.file_name(name, "quick", tiny) and record.stale(rec) == ""
    assert set(rec.claims) == set(record.experiment(name).claims) and rec.train_seconds > 0
    assert rec.wall_seconds > 0  # the whole call: the runs and the summary
    table = record_pages.listing([rec, record.load(_fake(tmp_path))])
    assert "minutes (whole call" in table and f"| {report.format_value(rec.wall_seconds / 60, 3)} |" in table
    assert "| nan |" in table  # the older file has no whole-call time
    assert "python -m companion record " + name in rec.command and "--set d=8" in rec.command
    assert "| `" in record_pages.show(name, rec.summary, "live", [rec])
    if name == "synthetic_ioi":  # its curves give back the runs the chapter's summary reads (float32 metrics)
        import numpy as np

        from companion.experiments import summaries

        runs = summaries.ioi_recorded(rec.curves)
        assert sorted(runs) == sorted(summaries.ioi_key(k) for k in rec.config)
        again = summaries.ioi_summary(runs)
        assert set(again) == set(rec.summary)
        assert all(np.isclose(again[k], rec.summary[k], rtol=1e-6, equal_nan=True) for k in again), (
            dict(again),
            rec.summary,
        )
        with pytest.raises(ValueError, match="'clean_loss@0.5' is not recorded"):
            runs["adam", 3].series("clean_loss", rho=0.5)
        with pytest.raises(ValueError, match="no recorded run 'adam L=9'"):
            summaries.CurveRun(rec.curves, "adam L=9")


def test_lr_sweep_reads_the_recorded_runs():
    import math

    from companion.experiments import scale_study

    runs = scale_study.lr_runs("quick")
    assert sorted(runs) == sorted(scale_study.LRS)
    assert all(r.overrides == {"steps": 2000, "lr": lr} for lr, r in runs.items())
    s = scale_study.lr_summary(runs)
    p = [r.summary["p_correct_drop"] for r in runs.values()]
    assert s["lr_p_spread"] == max(p) - min(p) and s["lr_low"] == min(scale_study.LRS)
    empty = scale_study.lr_summary({})
    assert math.isnan(empty["lr_p_spread"]) and math.isnan(empty["lr_noise_step_max"])
    assert len(scale_study.lr_commands("full")) == len(scale_study.LRS)


def test_check_lines_may_name_a_summary_with_digits():
    """A summary variable with digits in its name (``random_seeds``) is read, not silently skipped."""
    line = 'claims.check("ih.x", random_seeds["random_seeds_min"])\nclaims.check("ih.y", summary["y"])'
    assert CHECK_LINE.findall(line) == [
        ("ih.x", "random_seeds", "random_seeds_min"),
        ("ih.y", "summary", "y"),
    ]


def test_a_field_added_after_recording_is_current_only_at_its_default(tmp_path):
    """A file recorded before a field existed still matches while that field has its default (which keeps the
    old behaviour); set to anything else, the file is stale."""
    rec = record.load(_fake(tmp_path))
    old = {k: v for k, v in rec.config.items() if k != "final_trigger"}
    assert (
        "final_trigger" in rec.config
        and record.stale(record.Recorded(rec.path, dict(rec.data, config=old))) == ""
    )
    changed = dict(
        rec.data, config=old, overrides={**rec.settings(), "final_trigger": False, "loss_on": "triggers"}
    )
    why = record.stale(record.Recorded(rec.path, changed))
    assert "final_trigger: recorded None, now False" in why


def test_full_only_rows_set_larger_runs_against_the_paper_bar():
    from companion.experiments import catalog

    rows = record_pages.full_only_rows(["architectures"])
    larger = record.latest("architectures", "quick", catalog.ARCH_LARGER)
    mine = {r[0]: r for r in rows if "seq_len=64" in r[2]}
    # the chapter's four full-scale-only rows
    assert set(mine) == {
        "`arch.ml_drop_f1`",
        "`arch.nn_best_rho`",
        "`arch.nn_best_rho_validated`",
        "`arch.nn_small_rho`",
    }
    for cid, row in mine.items():
        value = larger.claims[cid.strip("`")]
        claim = claims.CLAIMS[cid.strip("`")]
        crit = claim.criterion("full")
        assert row[3] == value and row[4] == str(crit) and row[6] == (claim.finding or "")
        assert row[5] == ("yes" if crit.holds(value) else "no")
    assert all(
        r[0].strip("`") in claims.CLAIMS and claims.CLAIMS[r[0].strip("`")].scale == "full" for r in rows
    )
    with pytest.raises(ValueError, match="unknown experiment 'nope'"):
        record_pages.full_only_rows(["nope"])


def test_paper_rows_judge_every_claim_of_the_paper_configuration_runs():
    """One row per recorded claim of each full-profile paper-configuration run, judged as ``check`` judges it."""
    recs = [r for r in record.runs() if r.paper_config]
    rows = record_pages.paper_rows(recs)
    assert len(rows) == sum(len(r.claims) for r in recs) and len(rows[0]) == len(record_pages.PAPER_HEADER)
    for row, (r, (cid, value)) in zip(rows, ((rec, kv) for rec in recs for kv in rec.claims.items())):
        claim = claims.CLAIMS[cid]
        assert row[0] == f"`{cid}`" and row[3] == value and r.experiment in row[2]
        assert row[5] == ("yes" if claim.criterion("full").holds(value, claim.infinite_ok) else "no")
        assert row[6] == (claim.finding or "")
    assert record_pages.paper_rows([record.load(p) for p in []]) == []
    quick = [r for r in record.runs() if not r.paper_config][:3]
    assert record_pages.paper_rows(quick) == []  # other runs are shown, never held to the paper


def test_ioi_stability_reads_best_and_late_losses():
    """A converging run ends at its best; one that learns and loses it rises; a diverged one has no late loss."""
    import math

    from companion.experiments import summaries

    steps = list(range(0, 1000, 100))
    curves = {
        "step": {"adam L=3": steps, "adam L=5": steps, "sgd L=7": [0]},
        "diverged_at": {"adam L=3": None, "adam L=5": None, "sgd L=7": 17},
        "clean_loss@1.0": {
            "adam L=3": [5, 4, 3, 2, 1.5, 1.2, 1.1, 1.0, 1.0, 1.0],
            "adam L=5": [5, 3, 2, 1.0, 2, 9, 50, 90, 100, "nan"],
            "sgd L=7": [6.0],
        },
    }
    s = summaries.ioi_stability(summaries.ioi_recorded(curves))
    assert (s["adam3_best"], s["adam3_best_step"], s["adam3_late"], s["adam3_rise"]) == (1.0, 700.0, 1.0, 0.0)
    # nan at 900
    assert s["adam5_best"] == 1.0 and s["adam5_best_step"] == 300.0 and math.isnan(s["adam5_late"])
    assert s["sgd7_best"] == 6.0 and math.isnan(s["sgd7_late"]) and math.isnan(s["sgd7_rise"])
    assert s["sgd7_diverged_at"] == 17.0 and math.isnan(s["adam3_diverged_at"])
    table = summaries.ioi_stability_markdown(summaries.ioi_recorded(curves))
    assert "| sgd | 7 | 17 |" in table and "| adam | 3 | - | 1 | 700 |" in table


def test_commit_is_the_senders_when_given_else_gits(tmp_path, monkeypatch):
    """A working tree sent to a GPU machine labels its files with $COMPANION_COMMIT (its copy of .git, if any, may
    be stale: on 2026-11-26 it described the previous commit); without it, git's answer, else "unknown"."""
    monkeypatch.setenv("COMPANION_COMMIT", "abc123def456")
    assert record.commit() == "abc123def456"
    monkeypatch.delenv("COMPANION_COMMIT")
    if (config.REPO_ROOT / ".git").exists():
        assert record.commit() not in ("abc123def456", "unknown")  # this checkout's git describe
    monkeypatch.setattr(config, "REPO_ROOT", tmp_path)
    assert record.commit() == "unknown"


# --- record --all ---------------------------------------------------------------------------------------


# claims of ours that a source experiment's run measures besides the source's: a quick-size reading of Fig. 11, the
# condition T >> N that App. B.3 leaves unstated, our re-derivation of Eq. (25), and our bars where the paper gives no
# number (the sharpness of Fig. 7's previous-token head, App. B.1's even pre-trained head) or states nothing (the
# dropped-F2 accuracy after fine-tuning)
OURS_ON_SOURCE_RUNS = {
    "finetune.drop_f2_correct",
    "arch.ml_drop_f1_quick",
    "f.eq25_rederived",
    "recall.prev_token_sharp",
    "finetune.pretrain_even",
}


def test_the_source_experiments_check_the_sources_claims():
    """:data:`record.SOURCE_EXPERIMENTS` (what ``record --all`` runs) check claims of the sources (origin "paper"),
    and of ours only the few listed above; a recordable that checks none of the sources' is one of our studies."""
    assert set(record.SOURCE_EXPERIMENTS) <= set(record.EXPERIMENTS)
    ours_on_sources = set()
    for name in record.EXPERIMENTS:
        rec = record.experiment(name)
        papers = [claims.CLAIMS[c].origin == "paper" for c in rec.claims]
        if name in record.SOURCE_EXPERIMENTS:
            assert any(papers), name
            ours_on_sources |= {c for c in rec.claims if claims.CLAIMS[c].origin == "ours"}
        elif not any(papers):
            assert name not in record.SOURCE_EXPERIMENTS
    assert ours_on_sources == OURS_ON_SOURCE_RUNS


def test_record_all_refuses_bad_input_before_any_work():
    def launch(*args):
        raise AssertionError("no recording may start")

    for deadline in (0.0, -5.0):
        with pytest.raises(ValueError, match="deadline"):
            record.record_all("quick", deadline, launch=launch)
    with pytest.raises(ValueError, match="nope"):
        record.record_all("quick", 60.0, include=("nope",), launch=launch)
    with pytest.raises(ValueError, match="profile"):
        record.record_all("huge", 60.0, launch=launch)


@pytest.mark.usefixtures("numpy_sampler")
def test_record_all_skips_what_is_recorded_and_starts_nothing_after_the_deadline(tmp_path):
    """At quick: recall is recorded (data/recorded/recall-quick.json) and skipped; the first recording not yet
    made runs past the deadline (its stand-in sleeps), so none after it starts; a named study comes last."""
    import time

    launched = []

    def launch(name, cmd, seconds):
        launched.append((name, cmd, seconds))
        time.sleep(1.5)
        return "recorded"

    # the checks before the first launch must take less than the second of slack (a loaded machine took 0.2 s)
    margin = record.START_MARGIN
    rows = record.record_all("quick", margin + 1.0, ("khop_seeds",), "cpu", tmp_path, 1, launch=launch)
    sweeps = [f"recall lr={s['lr']} steps=2000" for s in scale_study.lr_settings("quick")]
    assert [r[0] for r in rows] == [*record.SOURCE_EXPERIMENTS, *sweeps, "khop_seeds"]
    assert rows[0][3] == "already recorded (recall-quick.json)" and rows[0][2] == 0.0
    assert [n for n, _, _ in launched] == ["finetune"]
    name, cmd, seconds = launched[0]
    assert cmd[-9:] == [
        "finetune",
        "--profile",
        "quick",
        "--device",
        "cpu",
        "--out-dir",
        str(tmp_path),
        "--threads",
        "1",
    ]
    assert margin <= seconds <= margin + 1.0
    assert rows[1][1:] == [1, pytest.approx(1.5, abs=0.5), "recorded"]
    assert all(
        r[3] in ("not started: the deadline", f"already recorded ({r[0]}-quick.json)") for r in rows[2:-5]
    )
    # the learning-rate sweep at quick is committed (recall-quick-lr=0.001-steps=2000.json, ...)
    assert all(
        r[3] == f"already recorded (recall-quick-{r[0][7:].replace(' ', '-')}.json)" for r in rows[-5:-1]
    )
    assert rows[-1][3] == "not started: the deadline"


@pytest.mark.usefixtures("numpy_sampler")
def test_record_all_makes_the_sweeps_of_the_sources_with_their_settings(tmp_path, monkeypatch):
    """At full, after the source experiments: Appendix B.6's learning rates, each a ``record recall --set lr=``
    command (the stand-in launcher records nothing); with the committed files, the sweep is already recorded."""

    def record_all(recorded_dir):
        for module in (record, recorded):
            monkeypatch.setattr(module, "RECORDED_DIR", recorded_dir)
        launched = []
        rows = record.record_all(
            "full",
            600.0,
            out_dir=tmp_path,
            launch=lambda name, cmd, s: launched.append((name, cmd)) or "recorded",
        )
        return rows, [(n, c) for n, c in launched if n.startswith("recall lr=")]

    committed = record.RECORDED_DIR
    rows, sweep = record_all(tmp_path / "nothing recorded")
    assert [n for n, _ in sweep] == [f"recall lr={lr}" for lr in scale_study.LRS]
    assert sweep[0][1][4:9] == ["recall", "--profile", "full", "--set", "lr=0.001"]
    assert [r[0] for r in rows][: len(record.SOURCE_EXPERIMENTS)] == list(record.SOURCE_EXPERIMENTS)
    # recorded on an H200 on 2026-11-27 (data/recorded/recall-full-lr=0.001.json, ...)
    rows, sweep = record_all(committed)
    assert sweep == []
    assert [r[3] for r in rows if r[0].startswith("recall lr=")] == [
        f"already recorded (recall-full-lr={lr}.json)" for lr in scale_study.LRS
    ]
    # architectures-full.json (H100, 2026-11-27) predates the summary entry of arch.nn_best_rho_validated
    # (val_nn_gain): incomplete, so it is recorded again; recall-full.json is complete and skipped
    arch = record.latest("architectures", "full")
    assert record.incomplete(arch) == ["arch.nn_best_rho_validated"]
    assert record.incomplete(record.latest("recall", "full")) == []
    by_name = {r[0]: r[3] for r in rows}
    assert (
        by_name["architectures"] == "recorded" and by_name["recall"] == "already recorded (recall-full.json)"
    )


def test_a_recording_is_stopped_at_its_deadline_and_a_failure_says_why():
    import sys
    import time

    t0 = time.monotonic()
    assert record._launch("x", [sys.executable, "-c", "import time; time.sleep(60)"], 1.0).startswith(
        "stopped"
    )
    assert time.monotonic() - t0 < 30
    assert record._launch("x", [sys.executable, "-c", "import sys; sys.exit('no such run')"], 30.0) == (
        "failed (exit 1): no such run"
    )
    assert record._launch("x", [sys.executable, "-c", "pass"], 30.0) == "recorded"


def test_the_command_line_takes_one_experiment_or_all(capsys):
    from companion.cli import main

    for argv in (["record"], ["record", "recall", "--all"], ["record", "--all", "--deadline", "0"]):
        with pytest.raises(SystemExit):
            main(argv)
    err = capsys.readouterr().err
    assert "name one experiment, or give --all" in err and "deadline" in err


# --- precision ------------------------------------------------------------------------------------------


def test_precision_is_validated_and_keys_its_cache_apart():
    from companion import cache

    with pytest.raises(ValueError, match="bf16"):
        with config.precision("bf16"):
            pass
    with pytest.raises(ValueError, match="precision"):
        record.record("recall", "quick", precision="bf16")  # before any run
    settings = {"d": 8}
    fp32 = cache.key(settings, ("companion.config",))
    with config.precision("tf32"):
        assert config.current_precision() == "tf32"
        tf32 = cache.key(settings, ("companion.config",))
        with config.precision("fp32"):
            assert cache.key(settings, ("companion.config",)) == fp32
    assert tf32 != fp32 and config.current_precision() == "fp32"


@pytest.mark.usefixtures("numpy_sampler")
def test_a_tf32_recording_is_read_apart_and_not_held_to_the_paper(tmp_path):
    src = record.latest("recall", "full")
    data = dict(src.data, precision="tf32", command=record.command("recall", "full", {}, "tf32"))
    (tmp_path / src.path.name).write_text(json.dumps(src.data))
    (tmp_path / record.file_name("recall", "full", {}, "tf32")).write_text(json.dumps(data))
    assert record.latest("recall", "full", directory=tmp_path).precision == "fp32"
    tf32 = record.latest("recall", "full", directory=tmp_path, precision="tf32")
    assert tf32.path.name == "recall-full-tf32.json" and tf32.label().endswith(", tf32")
    assert src.paper_config and not tf32.paper_config
    assert tf32.command.endswith("--precision tf32") and not record.stale(tf32)
    assert len(record.runs("recall", tmp_path, "full", {})) == 2


@pytest.mark.usefixtures("numpy_sampler")
def test_a_stand_in_recording_is_shown_not_held_to_the_paper(tmp_path):
    """A full recording whose runs did not train on the paper's data (``stand_in`` says why) is not the paper's
    configuration: its label says so and ``check`` refuses it."""
    src = record.latest("recall", "full")
    path = tmp_path / src.path.name
    path.write_text(json.dumps(dict(src.data, stand_in="trained on another split")))
    rec = record.load(path)
    assert src.paper_config and not rec.paper_config and rec.label().endswith(", stand-in data")
    with pytest.raises(ValueError, match="only full-profile runs of the paper's configuration"):
        record.check(rec)
    text = record.latest("scan_snap_text", "quick")  # its configuration has no seq_len
    assert text.short_label().startswith("d=64, 600 steps (") and text.short_label().endswith(
        "; stand-in data)"
    )


def test_a_recording_says_its_precision_torch_and_device_facts(tmp_path, monkeypatch):
    """A recording written through a stand-in run (no training): the fields that say how it was computed."""
    import dataclasses

    import torch

    real = record._registry()
    checked = record.experiment("recall").claims
    quick = dataclasses.replace(
        real["recall"],
        run=lambda exp, device=None: {"device": "cpu", "seconds": 0.0, "tf32": config.current_precision()},
        summary=lambda runs: report.Summary(
            {k: (float(next(iter(runs.values()))["tf32"] == "tf32"), "") for k in checked.values()}
        ),
        curves=lambda runs: {},
        views=lambda runs: {},
    )
    monkeypatch.setattr(record, "_registry", lambda: {**real, "recall": quick})
    for precision in ("fp32", "tf32"):
        rec = record.load(
            record.record("recall", "quick", device="cpu", out_dir=tmp_path, precision=precision)
        )
        assert rec.precision == precision and rec.torch == torch.__version__ and rec.sm_count is None
        assert rec.threads == torch.get_num_threads()
        assert set(rec.claims.values()) == {float(precision == "tf32")}  # the runs ran in that precision
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recall-quick-tf32.json", "recall-quick.json"]


def test_a_recordable_draws_from_the_sampler_exactly_where_it_says(migrations):
    """``Recordable.draws``: the first training batch of a recordable's quick members differs between the two
    samplers exactly where it is declared to draw from the sampler; such a recording stores the version, the
    others store none and are never another sampler's (the migration's frozen list is the registry's)."""
    free = []
    for name in record.SOURCE_EXPERIMENTS + ("induction_order", "induction_random_seeds", "khop_seeds"):
        rec, members = record.experiment(name), record.build(name, "quick")
        drawn = {}
        for s in config.SAMPLERS:
            with config.using_sampler(s):
                drawn[s] = record.first_batches(name, members)
        assert rec.draws == (drawn["numpy"] != drawn["counter"]), name
        free += [] if rec.draws else [name]
    assert sorted(free) == sorted(migrations.SAMPLER_FREE)
    assert all(record.experiment(n).draws for n in record.EXPERIMENTS if n not in free)
    for r in record.runs():
        assert (r.data.get("sampler", 1) is None) == (r.experiment in free), r.path.name
        assert not (r.experiment in free and r.other_sampler), r.path.name


def test_record_all_makes_a_recording_of_the_other_sampler_again_unless_its_folder_has_one(
    tmp_path, monkeypatch
):
    """Under the counter sampler, the committed recall-quick.json (numpy batches) is kept as evidence but is not
    "already recorded": ``record --all`` launches it again, unless data/recorded/counter/ holds its namesake (the
    one a build under counter reads). Until 2026-12-07 that folder was not looked at, so every recording committed
    there would have been made again; a recording made under counter without an out_dir is written there."""
    launched = []

    def launch(name, cmd, seconds):
        launched.append(name)
        return "recorded"

    monkeypatch.setenv("COMPANION_SAMPLER", "counter")
    assert record.sampler_dir() == record.RECORDED_DIR / "counter"
    assert record.load(record.RECORDED_DIR / "recall-quick.json").other_sampler
    assert not record.load(record.RECORDED_DIR / "counter" / "recall-quick.json").other_sampler
    rows = record.record_all("quick", 600.0, (), "cpu", tmp_path, 1, launch=launch)
    assert "recall" not in launched and rows[0][3] == "already recorded (recall-quick.json)"
    # the same committed files without the counter folder: recall-quick.json is launched again
    bare = tmp_path / "recorded"
    bare.mkdir()
    for f in record.RECORDED_DIR.glob("*.json"):
        (bare / f.name).write_bytes(f.read_bytes())
    for module in (record, recorded):
        monkeypatch.setattr(module, "RECORDED_DIR", bare)
    launched.clear()
    rows = record.record_all("quick", 600.0, (), "cpu", tmp_path / "out", 1, launch=launch)
    assert launched[0] == "recall" and rows[0][3] == "recorded"


def test_a_build_reads_the_recordings_made_under_its_own_sampler(monkeypatch):
    """The recordings made again under the counter sampler (data/recorded/counter/) take the place of their
    namesakes for a build under that sampler only: the chapter then reads the counter batches' values, labelled
    as the book's own; under the numpy generators it reads data/recorded/ as it is."""
    again = sorted(p.name for p in (record.RECORDED_DIR / "counter").glob("*.json"))
    assert again and all((record.RECORDED_DIR / name).is_file() for name in again)
    for sampler, folder in (("numpy", record.RECORDED_DIR), ("counter", record.RECORDED_DIR / "counter")):
        monkeypatch.setenv("COMPANION_SAMPLER", sampler)
        rec = record.latest("induction_order", "quick")
        assert rec.path == folder / "induction_order-quick.json" and rec.drawn_by == sampler
        assert not rec.other_sampler and "sampler" not in rec.label()
        paths = record.committed_paths()
        assert [p.name for p in paths] == sorted(p.name for p in record.RECORDED_DIR.glob("*.json"))
        assert [p for p in paths if p.parent != record.RECORDED_DIR] == (
            [folder / name for name in again] if sampler == "counter" else []
        )
    # a folder given is read as it is
    assert {r.path.parent for r in record.runs(directory=record.RECORDED_DIR)} == {record.RECORDED_DIR}


@pytest.mark.usefixtures("numpy_sampler")
def test_a_recording_notices_other_batches(tmp_path, monkeypatch):
    """A recording keeps the sampler version and each member's first-batch digest; a file whose first batch is
    not the one its sampler draws today, or whose sampler version is unknown, is stale and says so. A file of
    the other sampler is not stale: it is labelled with its sampler, and ``record --all`` makes it again."""
    path = tmp_path / "allocation-quick.json"
    members = record.build("allocation", "quick")
    data = {
        "format": record.FORMAT, "experiment": "allocation", "chapter": "book/allocation", "profile": "quick",
        "overrides": {}, "config": record.configs(members), "summary": {}, "meaning": {}, "claims": {},
        "curves": {}, "command": "python -m companion record allocation", "device": "cpu", "date": "2026-12-02",
        "commit": "abc1234",
        "sampler": record.sampler_version(), "first_batch": record.first_batches("allocation", members),
    }  # fmt: skip
    path.write_text(json.dumps(data))
    assert record.stale(record.load(path)) == ""
    rec = record.load(path)
    assert rec.drawn_by == config.sampler() and not rec.other_sampler and "sampler" not in rec.label()
    path.write_text(json.dumps({**data, "first_batch": {"allocation": "0" * 16}}))
    assert "the first training batch of allocation is not the one the numpy sampler draws today" in (
        record.stale(record.load(path))
    )
    path.write_text(json.dumps({**data, "sampler": 7}))
    assert "sampler version 7: allowed [1, 2]" in record.stale(record.load(path))
    # the counter sampler's numpy-drawn first batch: stale; its own: a recording of the other sampler
    path.write_text(json.dumps({**data, "sampler": config.sampler_version("counter")}))
    assert "the counter sampler draws today" in record.stale(record.load(path))
    with config.using_sampler("counter"):
        counter_first = record.first_batches("allocation", members)
    assert counter_first != data["first_batch"] and config.sampler() == "numpy"
    path.write_text(json.dumps({**data, "sampler": 2, "first_batch": counter_first}))
    rec = record.load(path)
    assert record.stale(rec) == "" and rec.drawn_by == "counter" and rec.other_sampler
    assert rec.label().endswith(", batches of the counter sampler (the book's: numpy)")
    monkeypatch.setenv("COMPANION_SAMPLER", "counter")
    assert not rec.other_sampler and record.stale(rec) == "" and "sampler" not in rec.label()
    # a file written before the fields was drawn by the numpy generators; one whose runs draw no batch is never
    # labelled
    old = record.load(path)
    old = record.Recorded(old.path, {k: v for k, v in data.items() if k not in ("sampler", "first_batch")})
    assert old.drawn_by == "numpy" and old.other_sampler
    assert not record.Recorded(old.path, {**data, "sampler": None}).other_sampler


def test_a_recordable_trains_with_its_configuration_modules_run_unless_it_names_another():
    """A declaration without ``run`` trains each member with the ``run`` of the module that defines the member's
    configuration class; one that names ``run`` trains with it; a module without ``run`` is refused by name."""
    import dataclasses

    from companion.experiments import fact_capacity, induction, khop_probes, noisy_recall

    expected = {
        "recall": noisy_recall.run,
        "induction_order": induction.run,
        "fact_capacity": fact_capacity.run,
        "fact_scaling": fact_capacity.scaling,
        "khop_probe": khop_probes.probe_run,
    }
    for name, run in expected.items():
        rec = record.experiment(name)
        assert all(rec.runner(e) is run for e in record.build(name, "quick").values()), name
    rec = dataclasses.replace(record.experiment("recall"), run=None)
    with pytest.raises(
        ValueError, match=r"companion.recorded has no run\(exp\): recordings of 'recall' need one"
    ):
        rec.runner(rec)  # a Recordable's own class lives in companion.recorded, which defines no run


@pytest.mark.usefixtures("numpy_sampler")
@pytest.mark.parametrize(
    "name", ["recall", "finetune", "allocation", "fact_capacity", "khop", "induction_random_seeds"]
)
def test_first_batch_is_the_batch_training_draws_first(name, tmp_path, monkeypatch):
    """Each family's first_batch is the first batch of the training size (16) that its recording's runs draw
    (a spy on every task sampler; test sets are drawn at another size, 24), alone or, for a family whose runs are
    packed, in a pack."""
    import dataclasses

    from companion.data.ioi import IOITask
    from companion.data.recall import BigramTask, RecallTask
    from companion.experiments.factual import FactTask
    from companion.experiments.khop import KHopTask

    rec = record.experiment(name)
    exp = next(iter(record.build(name, "quick").values()))
    fields = {f.name for f in dataclasses.fields(exp)}
    small = {"steps": 2, "eval_every": 1, "pretrain_steps": 2, "last": 1, "n_test": 24, "batch": 16}
    exp = dataclasses.replace(exp, **{k: v for k, v in small.items() if k in fields})
    drawn = []
    for cls in (RecallTask, IOITask, BigramTask, FactTask, KHopTask):

        def spy(self, *a, _original=cls.sample, **k):
            drawn.append(_original(self, *a, **k))
            return drawn[-1]

        monkeypatch.setattr(cls, "sample", spy)
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path))
    if rec.run_all is not None:  # a pack of two: the first member's batch comes first
        rec.run_all({"m": exp, "other": dataclasses.replace(exp, seed=exp.seed + 1)}, device="cpu")
    else:
        rec.runner(exp)(exp, device="cpu")
    first_train = next(b for b in drawn if b.tokens.shape[0] == 16)
    assert batch_digest(first_train) == batch_digest(rec.first_batch(exp))


@pytest.mark.parametrize(
    "name,tiny,first",
    [
        (
            "theory_one_step",
            {"Ns": (4, 8), "ms": (10, 100, 200), "repeats": 2, "m_ref": 300, "table_m": 200},
            1,
        ),
        ("theory_attention", {"Ns": (4, 8), "m": 200, "Ts": (64, 128), "dyn_Ns": (4, 8), "dyn_steps": 3}, 0),
    ],
)
def test_theory_studies_record_and_their_first_batch_is_drawn_first(name, tiny, first, tmp_path, monkeypatch):
    """The theorem chapters' Monte Carlo records (tiny sizes) like any experiment, every claim of its chapter; the
    recorded first batch is the first the study steps on (the one-step study draws its test sequences before)."""
    from companion.data.recall import RecallTask

    drawn = []

    def spy(self, *a, _original=RecallTask.sample, **k):
        drawn.append(_original(self, *a, **k))
        return drawn[-1]

    monkeypatch.setattr(RecallTask, "sample", spy)
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path / "cache"))
    rec = record.load(record.record(name, "quick", tiny, device="cpu", out_dir=tmp_path))
    assert record.stale(rec) == "" and set(rec.claims) == set(record.experiment(name).claims)
    assert rec.train_seconds > 0 and rec.config["Ns"] == [4, 8]
    assert rec.data["first_batch"]["study"] == batch_digest(drawn[first])
    assert "--set Ns=4,8" in rec.command


def test_a_recording_says_which_recordings_it_read_and_their_samplers(tmp_path, monkeypatch):
    """A recording stores the recordings its members and summary read (once each) with the sampler of each, so
    that one made again under the counter sampler before those it compares with shows it
    (Recorded.read_other_samplers); one that read none stores an empty list."""
    import dataclasses

    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path / "cache"))
    tiny = {"d": 8, "seq_len": 12, "batch": 4, "steps": 3, "n_test": 8, "eval_every": 1, "dense_until": 0}
    rec = record.load(record.record("recall", "quick", tiny, device="cpu", out_dir=tmp_path))
    assert rec.data["reads"] == [] and rec.read_other_samplers == []
    with record.reading() as seen:
        record.latest("induction_order", "quick")
        record.latest("induction_order", "quick")
    assert [r.path.name for r in seen] == ["induction_order-quick.json"]

    real = record.experiment("recall")

    def summary(runs):
        record.latest("induction_order", "quick")  # a summary that compares with another recording
        return real.summary(runs)

    monkeypatch.setattr(record, "experiment", lambda name: dataclasses.replace(real, summary=summary))
    for sampler, file in (
        ("numpy", "induction_order-quick.json"),
        ("counter", "counter/induction_order-quick.json"),
    ):
        monkeypatch.setenv("COMPANION_SAMPLER", sampler)
        rec = record.load(record.record("recall", "quick", tiny, device="cpu", out_dir=tmp_path))
        assert rec.data["reads"] == [{"file": file, "sampler": sampler}] and rec.read_other_samplers == []
    other = record.Recorded(rec.path, {**rec.data, "sampler": config.sampler_version("numpy")})
    assert other.read_other_samplers == ["counter/induction_order-quick.json"]
    assert record.Recorded(rec.path, {**rec.data, "sampler": None}).read_other_samplers == []


def test_a_recording_whose_runs_read_another_samplers_recording_is_refused_before_training(
    tmp_path, monkeypatch
):
    """A recording whose members or precheck read a recording drawn by another sampler than the one in force (a
    study compared seed by seed with base runs not yet made again under it) is refused before any run, naming
    what to record first; the same reads under their own sampler pass."""
    import dataclasses

    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path / "cache"))
    waiting = record.not_yet_under("counter")[0]  # a recording the counter folder has not replaced yet
    real = record.experiment("recall")

    def precheck(profile, members):  # a precheck that compares with that recording, as SeedVariant's does
        record.latest(waiting.experiment, waiting.profile, waiting.settings(), precision=waiting.precision)

    monkeypatch.setattr(record, "experiment", lambda name: dataclasses.replace(real, precheck=precheck))
    tiny = {"d": 8, "seq_len": 12, "batch": 4, "steps": 3, "n_test": 8, "eval_every": 1, "dense_until": 0}
    monkeypatch.setenv("COMPANION_SAMPLER", "counter")
    with pytest.raises(
        ValueError, match=rf"reads \['{re.escape(waiting.path.name)}'\], drawn by \['numpy'\]"
    ):
        record.record("recall", "quick", tiny, device="cpu", out_dir=tmp_path)
    # no run trained (the cache holds none), no file written
    assert not list(tmp_path.rglob("*.pt")) and not list(tmp_path.rglob("*.json"))
    monkeypatch.setenv("COMPANION_SAMPLER", "numpy")
    rec = record.load(record.record("recall", "quick", tiny, device="cpu", out_dir=tmp_path))
    assert rec.data["reads"] == [{"file": waiting.path.name, "sampler": "numpy"}]


def test_the_recordings_made_again_read_recordings_of_their_own_sampler():
    """A recording made again under the counter sampler compares with recordings made under it, not with the
    numpy generators' (those written before the field cannot say: see the issue 54 notes)."""
    assert {r.path.name: r.read_other_samplers for r in AGAIN if r.read_other_samplers} == {}


def test_fig3_seeds_of_both_choices_and_precisions_are_read_and_judged():
    """The committed Fig. 3 runs at the paper's size (2026-11-26/27): seeds 0-2 of each choice in fp32 and of the
    paper's in TF32; the rule's excess and the precision ratio computed from them."""
    by_choice = {name: scale_study.seed_runs(name) for name in scale_study.CHOICES}
    assert all(list(runs) == list(scale_study.SEEDS) for runs in by_choice.values())
    assert by_choice["paper"][0].path.name == "recall-full.json"
    assert all(r.overrides.get("noise") == "existing" for r in by_choice["public code"].values())
    s = scale_study.choice_summary(by_choice)
    p = [r.summary["p_correct_drop"] for r in by_choice["paper"].values()]
    assert s["seeds_paper_mean"] == pytest.approx(sum(p) / 3)
    assert s["seeds_paper_excess"] == scale_study.excess(p) > 0 > s["seeds_public_code_excess"]
    tf32 = scale_study.seed_runs("paper", "tf32")
    assert list(tf32) == list(scale_study.SEEDS) and all(r.precision == "tf32" for r in tf32.values())
    rows = scale_study.precision_table(by_choice["paper"], tf32)
    ps = scale_study.precision_summary(by_choice["paper"], tf32)
    assert ps["precision_seeds"] == 3 and ps["precision_claims"] == len(rows) >= 10
    assert ps["precision_ratio_max"] == max(
        scale_study.precision_ratio(
            [by_choice["paper"][k].claims[r[0]] for k in scale_study.SEEDS],
            [tf32[k].claims[r[0]] for k in scale_study.SEEDS],
        )
        for r in rows
    )
    # fewer seeds than the rule needs: NaN, so that a check fails rather than passes
    assert np.isnan(scale_study.excess(p[:2]))
    assert np.isnan(
        scale_study.precision_summary({0: by_choice["paper"][0]}, {0: tf32[0]})["precision_ratio_max"]
    )
    assert len(scale_study.seed_commands("public code")) == 3
    with pytest.raises(ValueError, match="choice"):
        scale_study.seed_runs("papers")
    with pytest.raises(ValueError, match="precision"):
        scale_study.seed_runs("paper", "bf16")


def test_check_over_asserts_a_claim_of_several_full_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path))
    runs = list(scale_study.lr_runs("full").values())
    out = record.check_over("scale.lr_stable", 0.5, runs, quiet=True)
    assert (
        out["passed"]
        and out["source"].startswith("recall-full-lr=0.001.json")
        and "4 recorded runs" in out["recorded"]
    )
    # the scorecard's recorded column shows it: the claim's source names four files, all committed
    (row,) = [r for r in claims.results("quick") if r["claim"] == "scale.lr_stable"]
    assert row["recorded"].startswith("0.5 (the finding holds; full profile, 4 recorded runs")
    with pytest.raises(AssertionError, match="scale.lr_stable"):
        record.check_over("scale.lr_stable", 0.05, runs, quiet=True)
    with pytest.raises(ValueError, match="full-profile"):
        record.check_over("scale.lr_stable", 0.5, list(scale_study.lr_runs("quick").values()), quiet=True)
    with pytest.raises(ValueError, match="full-profile"):
        record.check_over("scale.lr_stable", 0.5, [], quiet=True)


def test_the_committed_recordings_are_migrated(tmp_path, migrations):
    """scripts/migrate_recordings.py has nothing left to change in data/recorded/, and on a copy of a recording
    that still lists a retired claim it drops that claim and nothing else (runs, summary and provenance kept)."""
    assert migrations.migrate(write=False) == []
    (rec,) = [r for r in RECORDED if r.experiment == "khop_stage_entry"]
    old = dict(rec.data, claims={**rec.data["claims"], "khop.k4_entry_prefix": 0.0})
    path = tmp_path / rec.path.name
    path.write_text(migrations.dumps(old))
    assert migrations.migrate(tmp_path) == [rec.path.name] and migrations.migrate(tmp_path) == []
    assert json.loads(path.read_text()) == rec.data
    assert not set(migrations.DROPPED_CLAIMS) & set(claims.CLAIMS)


def test_a_recording_under_its_old_names_migrates_to_the_committed_file(tmp_path, migrations):
    """The random-trigger seed study as recorded (experiment induction_b10_seeds, entries b10s_*, curves b10_*,
    claims ih.b10_*) becomes the committed file, name and content, and is left alone after that."""
    (rec,) = [r for r in RECORDED if r.experiment == "induction_random_seeds"]

    def back(names: dict, new: str, old: str) -> dict:
        return {old + k.removeprefix(new) if k.startswith(new) else k: v for k, v in names.items()}

    old = dict(
        rec.data,
        experiment="induction_b10_seeds",
        command=rec.data["command"].replace("induction_random_seeds", "induction_b10_seeds"),
        summary=back(rec.data["summary"], "random_seeds_", "b10s_"),
        meaning=back(rec.data["meaning"], "random_seeds_", "b10s_"),
        curves=back(rec.data["curves"], "random_", "b10_"),
        claims=back(rec.data["claims"], "ih.random_", "ih.b10_"),
    )
    assert old["summary"] != rec.data["summary"] and old["curves"] != rec.data["curves"]
    (tmp_path / "induction_b10_seeds-quick.json").write_text(migrations.dumps(old))
    assert migrations.migrate(tmp_path) == ["induction_b10_seeds-quick.json"]
    assert [p.name for p in tmp_path.iterdir()] == [rec.path.name]
    assert (tmp_path / rec.path.name).read_text() == rec.path.read_text()
    assert migrations.migrate(tmp_path) == []


def test_a_setting_the_profile_no_longer_gives_is_named_in_the_recording(tmp_path, migrations):
    """The larger IOI run as recorded, when the quick batch was 128 and its settings did not name it, becomes the
    committed file that names batch=128 (catalog.IOI_LARGER), name and content, and is left alone after that; a
    recording whose runs had another batch is not touched."""
    (rec,) = [r for r in RECORDED if r.experiment == "synthetic_ioi" and r.profile == "quick"]
    assert rec.settings() == catalog.IOI_LARGER
    raw = json.loads(rec.path.read_text())  # as written (NaN as the string "nan")
    old = dict(raw, overrides={k: v for k, v in raw["overrides"].items() if k != "batch"})
    old["command"] = raw["command"].replace(" --set batch=128", "")
    name = record.file_name("synthetic_ioi", "quick", old["overrides"])
    (tmp_path / name).write_text(migrations.dumps(old))
    assert migrations.migrate(tmp_path) == [name]
    assert [p.name for p in tmp_path.iterdir()] == [rec.path.name]
    assert (tmp_path / rec.path.name).read_text() == rec.path.read_text()
    assert migrations.migrate(tmp_path) == []
    other = dict(old, config={k: dict(c, batch=64) for k, c in old["config"].items()})
    assert migrations.name_inherited(other) == other


@pytest.mark.skipif(
    not Path("/proc/self/status").is_file(), reason="reads the thread count from /proc (Linux)"
)
def test_threads_caps_numpys_blas_before_numpy_loads():
    """``--threads N`` caps numpy's OpenBLAS too (``companion.__main__.cap_native_threads``, set before numpy is
    imported): a process that imports numpy after the cap runs one thread, one without it as many as OpenBLAS
    starts on this machine. Bad values are left to the command's own check."""
    import os
    import subprocess
    import sys

    from companion.__main__ import NATIVE_THREAD_VARIABLES, cap_native_threads

    env = {}
    assert cap_native_threads(["record", "x", "--threads", "3"], env) == "3"
    assert env == dict.fromkeys(NATIVE_THREAD_VARIABLES, "3")
    for bad in (["--threads", "0"], ["--threads=-2"], ["--threads", "one"], ["--threads"], []):
        assert cap_native_threads(bad, env := {}) is None and env == {}
    count = (
        "import sys; from companion.__main__ import cap_native_threads; "
        "cap_native_threads(sys.argv[1:]); import numpy as np; a = np.ones((300, 300)); a @ a; "
        "print([int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('Threads')][0])"
    )
    clean = {k: v for k, v in os.environ.items() if k not in NATIVE_THREAD_VARIABLES}

    def threads(*args):
        out = subprocess.run([sys.executable, "-c", count, *args], env=clean, capture_output=True, text=True)
        return int(out.stdout)

    assert threads("--threads", "1") == 1
    if (os.cpu_count() or 1) > 1:
        assert threads() > 1  # the control: OpenBLAS starts more threads when nothing caps it


def test_the_rounding_control_is_the_flip_lists():
    """data/recorded/rounding holds the numpy generators' recordings made with their counter namesakes'
    arithmetic, each in the flip list's rounding entry, and none read by a build (not a sampler's folder)."""
    flip = json.loads((config.committed_data_dir() / "flip_list.json").read_text())
    assert ROUNDING and sorted(m["file"] for m in flip["rounding"]["made"]) == sorted(
        r.path.name for r in ROUNDING
    )
    for r in ROUNDING:
        counter = record.load(record.RECORDED_DIR / "counter" / r.path.name)
        assert r.drawn_by == "numpy" and r.trained == counter.trained
    assert not any(
        p.parent.name == "rounding" for s in ("numpy", "counter") for p in record.committed_paths(s)
    )


def test_the_recordings_not_yet_under_the_counter_sampler_are_those_without_a_namesake_there():
    """The scorecard's mark (issue 54 item 4): a recording whose runs draw batches is kept as evidence, marked
    "not yet recorded under: counter", exactly when data/recorded/counter/ has no file of its name; one made again
    says so, under either sampler's build."""
    counter = {p.name for p in (record.RECORDED_DIR / "counter").glob("*.json")}
    with config.using_sampler("numpy"):
        recs = record.runs()
        waiting = {r.path.name for r in record.not_yet_under("counter", recs)}
        drawing = {r.path.name for r in recs if r.drawn_by is not None}
        assert waiting == drawing - counter and waiting and drawing & counter
        cells = {r.path.name: record.batches_cell(r) for r in recs}
    assert all(cells[n].endswith("not yet recorded under: counter") for n in waiting)
    assert all(cells[n] == "numpy (version 1); also recorded under: counter" for n in drawing & counter)
    with config.using_sampler("counter"):
        swapped = {r.path.name: record.batches_cell(r) for r in record.runs()}
    assert all(swapped[n] == "counter (version 2); also recorded under: numpy" for n in drawing & counter)
    with pytest.raises(ValueError, match="unknown sampler 'torch'"):
        record.not_yet_under("torch")


def test_a_recording_whose_views_fail_is_written_without_them_and_says_why(tmp_path, monkeypatch, capsys):
    """Making the timing views of a chapter's rows comes after the runs: a failure there, or views made on other
    values than the file stores (record._check_views), must not lose the recording of runs that may have taken a
    GPU's hours. The file is written with no views and the reason; recorded_values then reads its curves."""
    import dataclasses

    from companion.experiments import late_verdicts

    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path / "cache"))
    tiny = {"d": 8, "seq_len": 12, "batch": 4, "steps": 5, "n_test": 8, "eval_every": 1, "dense_until": 0}
    real = record._registry()

    def broken(runs):
        raise RuntimeError("no view today")

    for views, why in (
        (broken, "RuntimeError: no view today"),
        (
            lambda runs: {"recall.full_noise": (-1.0, [0.5])},
            "the views of ['recall.full_noise'] are made on other",
        ),
    ):
        monkeypatch.setattr(
            record,
            "_registry",
            lambda v=views: {**real, "recall": dataclasses.replace(real["recall"], views=v)},
        )
        rec = record.load(record.record("recall", "quick", tiny, device="cpu", out_dir=tmp_path))
        assert rec.views == {} and why in rec.views_error and why in capsys.readouterr().err
        values, left = late_verdicts.recorded_values(rec, {"recall.full_noise": "p_noise_full"})
        assert left == [] and len(values["recall.full_noise"][1]) > 0  # from its curves
    monkeypatch.setattr(record, "_registry", lambda: real)
    assert (
        record.load(record.record("recall", "quick", tiny, device="cpu", out_dir=tmp_path)).views_error == ""
    )
