"""The stall studies' subject rule (companion.experiments.khop_stall) and benchmarks/khop_subjects.py, which
surveys which seeds' k-hop runs stall on their last stage and which learn it."""

from __future__ import annotations

import dataclasses
import json

import pytest

from companion import config, record, record_pages, record_reads
from companion.experiments import khop, khop_curves, khop_members, khop_stall

PROBE = record.RECORDED_DIR / "khop_probe-quick-depth=4-eval_every=100-k=4-steps=8000.json"


def test_members_are_the_recorded_probe_study_runs_with_other_seeds():
    """The survey trains the very runs the probe study recorded (so the seed-0 runs are the recorded ones and
    the survey's cache keys stay those of the runs trained before these helpers moved); bad sizes are refused."""
    probe = record.load(PROBE).config
    m = khop_stall.subject_members(2)
    assert m == khop_stall.subject_members(2, 8000)
    assert set(m) == {(0, 100), (0, 250), (1, 100), (1, 250)}

    def stored(
        e,
    ):  # as a recording (or a cache key) stores a configuration: JSON, later fields at their defaults
        return json.loads(json.dumps(dataclasses.asdict(e)))

    assert stored(m[0, 100]) == stored(khop.KHopExperiment(**probe["seed 0"]))
    assert stored(m[0, 250]) == stored(khop.KHopExperiment(**probe[khop_members.EXPLORED]))
    assert m[1, 250].seed == 1 and m[1, 250].eval_every == 250 and m[1, 100].depth == 4
    assert khop_stall.subject_members(1, 3)[0, 100].steps == 3
    with pytest.raises(ValueError, match="seeds"):
        khop_stall.subject_members(0)
    with pytest.raises(ValueError, match="steps"):
        khop_stall.subject_members(1, 0)


def test_a_short_survey_is_written(subjects_script, monkeypatch, tmp_path):
    """Two steps of seed 0's two runs: neither reaches its last stage, no seed pairs; the file says where, at
    which commit and under which sampler they trained. Bad sizes are refused first."""
    monkeypatch.setattr(subjects_script.results_file, "RESULTS", tmp_path)
    with pytest.raises(ValueError, match="seeds"):
        subjects_script.main(["--seeds", "0"])
    subjects_script.main(["--seeds", "1", "--steps", "2"])
    (path,) = tmp_path.glob("*-khop-subjects-*.json")
    out = json.loads(path.read_text())
    assert path.name.endswith(f"-khop-subjects-{config.sampler()}.json") and out["steps"] == 2
    assert set(out["runs"]) == {"seed 0, every 100", "seed 0, every 250"} and out["pairs"] == []
    for r in out["runs"].values():
        assert r["outcome"] == "short of its last stage" and r["moves"] == [None, None, None]
        assert r["seconds"] > 0  # the run's own training time, also when a later call reads it from the cache
    assert (
        out["subject"] is None and "seeds [1, 2, 3, 4, 5, 6, 7, 8, 9] not surveyed" in out["subject_pending"]
    )


def test_a_share_of_the_survey_writes_no_file(subjects_script, monkeypatch, tmp_path):
    """``--first``: the later seeds only (cached for the call over all); refused past the last seed."""
    monkeypatch.setattr(subjects_script.results_file, "RESULTS", tmp_path)
    with pytest.raises(ValueError, match="first"):
        subjects_script.main(["--seeds", "2", "--first", "2"])
    subjects_script.main(["--seeds", "2", "--first", "1", "--steps", "2"])
    assert not list(tmp_path.glob("*.json"))


def test_the_registered_rule_takes_the_lowest_pair_of_seeds_0_to_9():
    """Every seed below the subject must have been surveyed; none of 0 .. 9: no subject (not a wider search)."""
    stalled, learned = khop_curves.OUTCOMES[1], khop_curves.OUTCOMES[2]
    every = {(s, e): learned for s in range(10) for e in (100, 250)}
    assert khop_stall.subject(every) is None
    assert khop_stall.subject(every | {(3, 100): stalled, (8, 100): stalled}) == 3
    assert khop_stall.subject({(0, 100): stalled, (0, 250): learned}) == 0
    assert khop_stall.subject(every | {(12, 100): stalled}) is None  # past the rule's seeds
    with pytest.raises(ValueError, match=r"seeds \[1\] not surveyed"):
        khop_stall.subject({k: v for k, v in every.items() if k[0] != 1} | {(3, 100): stalled})


def test_pairs_need_a_stall_every_100_and_a_learner_every_250():
    stalled, learned, short = khop_curves.OUTCOMES[1], khop_curves.OUTCOMES[2], khop_curves.OUTCOMES[0]
    outcomes = {(0, 100): short, (0, 250): learned, (1, 100): stalled, (1, 250): learned, (2, 100): stalled}
    assert khop_stall.subject_pairs(outcomes) == [1]
    assert khop_stall.subject_pairs({(3, 100): stalled, (3, 250): stalled}) == []


def test_the_committed_survey_is_read_back_and_the_rule_applied(tmp_path):
    """The survey files the chapter reads: one per sampler on one thread; none or two are refused, as is an
    unknown sampler."""
    numpy = khop_stall.survey_outcomes("numpy")
    assert set(numpy) == {(0, 100), (0, 250)} and set(numpy.values()) <= set(khop_curves.OUTCOMES)
    assert khop_stall.surveyed_subject("numpy").startswith("not yet: seeds [1, 2, 3")
    # under the counter sampler seeds 0-9 are surveyed (2026-12-03) and none gives the pair: no subject
    assert set(khop_stall.survey_outcomes("counter")) == {(s, e) for s in range(10) for e in (100, 250)}
    assert khop_stall.surveyed_subject("counter").startswith("none of seeds 0 .. 9")
    run = {"moves": [], "final": [], "seconds": 1.0}
    learned, stalled = khop_curves.OUTCOMES[2], khop_curves.OUTCOMES[1]

    def survey(name, outcomes, device="CPU X, 1 threads"):
        runs = {f"seed {s}, every {e}": run | {"outcome": o} for (s, e), o in outcomes.items()}
        (tmp_path / name).write_text(json.dumps({"device": device, "runs": runs}))

    every = {(s, e): learned for s in range(10) for e in (100, 250)}
    with pytest.raises(ValueError, match="0 surveys"):
        khop_stall.survey_outcomes("counter", tmp_path)
    survey("CPU_X__2_threads-khop-subjects-counter.json", every, "CPU X, 2 threads")  # not the rule's runs
    survey("CPU_X__1_threads-khop-subjects-counter.json", every)
    assert khop_stall.survey_outcomes("counter", tmp_path) == every
    assert khop_stall.surveyed_subject("counter", tmp_path).startswith("none of seeds 0 .. 9")
    survey("CPU_X__1_threads-khop-subjects-counter.json", every | {(6, 100): stalled})
    assert khop_stall.surveyed_subject("counter", tmp_path) == "seed 6"
    survey("CPU_Y__1_threads-khop-subjects-counter.json", every)
    with pytest.raises(ValueError, match="2 surveys"):
        khop_stall.survey_outcomes("counter", tmp_path)
    with pytest.raises(ValueError, match="sampler"):
        khop_stall.survey_outcomes("torch")


def test_the_stall_chapter_reads_the_study_as_made_where_the_rule_finds_no_subject(tmp_path):
    """book/khop_stall's named exception: under the sampler that made its studies it reads that sampler's
    recordings; under another, the rule decides: no subject, and it reads the study as made (with why); a subject,
    and the build is refused until the studies are made again with it; an unknown sampler is refused."""
    assert khop_stall.study_sampler("numpy") == ("numpy", "")
    read, why = khop_stall.study_sampler("counter")
    assert read == khop_stall.STUDY_SAMPLER == "numpy" and "no subject under counter" in why
    learned, stalled = khop_curves.OUTCOMES[2], khop_curves.OUTCOMES[1]
    outcomes = {(s, e): learned for s in range(10) for e in (100, 250)} | {(3, 100): stalled}
    runs = {f"seed {s}, every {e}": {"outcome": o} for (s, e), o in outcomes.items()}
    path = tmp_path / "CPU_X__1_threads-khop-subjects-counter.json"
    path.write_text(json.dumps({"device": "CPU X, 1 threads", "runs": runs}))
    with pytest.raises(ValueError, match="takes seed 3 for the stall studies"):
        khop_stall.study_sampler("counter", tmp_path)
    with pytest.raises(ValueError, match="unknown sampler 'torch'"):
        khop_stall.study_sampler("torch")


def test_a_build_under_the_counter_sampler_reads_the_stall_studies_as_made():
    """What a build under each sampler reads (record_reads.in_force): the stall studies' recordings drawn by the numpy
    generators under both, a study read by another chapter under its own sampler; the stall recordings not made
    again are kept under counter (record_reads.kept_under), not waiting, and the listing says so."""
    stall = {n for n in record.EXPERIMENTS if record.experiment(n).chapter == "book/khop_stall"}
    for sampler in config.SAMPLERS:
        read = {
            r.experiment: r.drawn_by
            for r in record_reads.in_force(sampler)
            if r.experiment.startswith("khop")
        }
        assert {read[n] for n in stall} == {"numpy"}
        assert (
            read["khop_seeds"] == sampler
        )  # read by book/khop_four_hops (and, pinned, by the stall chapter)
    kept = {r.experiment for r, _ in record_reads.kept_under("counter")}
    assert kept == stall and not record_reads.kept_under("numpy")
    assert not kept & {r.experiment for r in record_reads.waiting_under("counter")}
    assert {r.experiment for r in record_reads.waiting_under("counter")} <= {
        r.experiment for r in record.runs()
    }
    onset = next(r for r, _ in record_reads.kept_under("counter") if r.experiment == "khop_onset")
    assert record_reads.read_under(onset) == {"counter": khop_stall.study_sampler("counter")[1]}
    cell = next(line for line in record_pages.listing().splitlines() if onset.path.name in line)
    assert "read under counter as well: the study as made under the numpy sampler" in cell
    assert "not yet recorded" not in cell
    with config.using_sampler("counter"):
        lines = record_pages.listing(download_from="../data/recorded").splitlines()
    assert any("<../data/recorded/counter/khop_probe-" in line for line in lines)
    assert any("<../data/recorded/khop_probe-" in line for line in lines)  # the stall chapter's, kept


def test_a_recording_read_by_a_named_exception_must_be_committed(monkeypatch):
    """A build whose chapter reads another sampler's recording of a study, with none committed under that
    sampler, is refused, naming the file and the command."""
    committed = record_reads.committed_paths
    monkeypatch.setattr(
        record_reads,
        "committed_paths",
        lambda s=None: [p for p in committed(s) if s == "counter" or not p.name.startswith("khop_probe-")],
    )
    with pytest.raises(
        ValueError, match=r"khop_probe-quick.*reads the numpy sampler's recording under counter"
    ):
        record_reads.in_force("counter")
