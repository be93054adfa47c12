"""benchmarks/khop_pack_divergence.py: the seed study's k-hop runs packed against the same runs alone."""

from __future__ import annotations

import json

import pytest

from companion import config, record


def test_the_committed_comparison_is_recomputed_from_its_curves(pack_script):
    """The committed result's per-run comparison follows from its packed curves and the alone recording; the
    finding it records (the runs part between steps 600 and 1100; seed 0 alone moves to four hops at the
    evaluation of step 2800, packed not by 3000) is what those curves say."""
    path = config.REPO_ROOT / "benchmarks/results/CPU_AMD_EPYC__1_threads-khop-pack.json"
    out = json.loads(path.read_text())
    alone = record.load(record.RECORDED_DIR / out["alone"])
    assert alone.packing == "alone" and alone.drawn_by == out["sampler"] == "numpy"
    for name, got in out["runs"].items():
        curves = {f: alone.curves[f][name] for f in ("step", "acc", "stage")}
        assert pack_script.compare(curves, out["packed"][name]) == got
    firsts = [r["first_differing_eval"] for r in out["runs"].values()]
    assert min(firsts) == 600 and max(firsts) == 1100
    seed0 = out["runs"]["seed 0"]
    assert seed0["stages_alone"]["4"] == 2800 and seed0["stages_packed"]["4"] is None


def test_the_committed_controls_tell_the_thread_count_from_the_pack(pack_script):
    """The recording trained on two threads, the pack on one. The controls (one thread, alone) are recomputed
    from their curves; what they say: the thread count changes both runs from step 750-800, as early as the
    pack does; seed 0 alone on one thread still moves to four hops at 2800 (the pack delays it), and seed 0
    every 250 alone on one thread has not learned three hops by step 3000, as packed (the thread count did that,
    not the pack; on two threads it had them)."""
    path = config.REPO_ROOT / "benchmarks/results/CPU_AMD_EPYC__1_threads-khop-pack.json"
    out = json.loads(path.read_text())
    alone = record.load(record.RECORDED_DIR / out["alone"])
    assert out["alone_device"] == alone.data["device"] == "CPU AMD EPYC, 2 threads"
    assert out["device"] == "CPU AMD EPYC, 1 threads"
    for name, c in out["control"].items():
        assert c["device"] == out["device"]
        curves = {f: alone.curves[f][name] for f in ("step", "acc", "stage")}
        assert pack_script.compare(curves, c["curves"]) == c["against_recording"]
        assert pack_script.compare(c["curves"], out["packed"][name]) == c["against_pack"]
    seed0, every250 = out["control"]["seed 0"], out["control"]["seed 0, every 250"]
    assert seed0["against_recording"]["first_differing_eval"] == 800
    assert (
        seed0["against_recording"]["stages_packed"]["4"] == 2800
        and seed0["against_pack"]["stages_packed"]["4"] is None
    )
    assert every250["against_recording"]["first_differing_eval"] == 750
    assert every250["against_recording"]["acc_alone"][2] == 1.0  # two threads: three hops kept
    assert every250["against_pack"]["acc_alone"][2] < 0.2 and every250["against_pack"]["acc_packed"][2] < 0.2


def test_compare_and_stage_steps(pack_script):
    a = {"step": [100, 200, 300], "acc": [[1, 0.1], [1, 0.5], [1, 1]], "stage": [1, 2, 2]}
    b = {"step": [100, 200], "acc": [[1, 0.1], [1, 0.4]], "stage": [1, 1]}
    got = pack_script.compare(a, b)
    assert got["first_differing_eval"] == 200 and got["last_shared_step"] == 200
    assert got["stages_alone"] == {"2": 100.0} and got["stages_packed"] == {"2": None}
    assert pack_script.compare(a, a)["first_differing_eval"] is None
    # a shorter run's last evaluation (step 150) is not one the other made: compared up to step 100
    c = {"step": [100, 150], "acc": [[1, 0.1], [1, 0.9]], "stage": [1, 2]}
    got = pack_script.compare(a, c)
    assert got["last_shared_step"] == 100 and got["first_differing_eval"] is None
    assert got["stages_packed"] == {"2": None}


def test_a_packed_recording_or_a_bad_step_count_is_refused(pack_script):
    packed = record.RECORDED_DIR / "counter" / "khop_seeds-quick-depth=4-eval_every=100-k=4-steps=16000.json"
    with pytest.raises(ValueError, match="trained in packs of 4; allowed a recording made run by run"):
        pack_script.main(["--alone", str(packed)])
    with pytest.raises(ValueError, match="steps"):
        pack_script.main(["--steps", "0"])


def test_the_pack_trains_under_the_recordings_sampler_and_an_earlier_pack_of_another_is_refused(
    pack_script, monkeypatch, tmp_path
):
    """Under the counter sampler the pack still trains on the numpy recording's batches (same batches, the
    rounding alone differs); an earlier call's pack drawn by another sampler than the recording's is refused
    before any training."""
    monkeypatch.setenv("COMPANION_SAMPLER", "counter")

    class Trained(Exception):
        pass

    def run_many(*a, **k):
        raise Trained(config.sampler())

    monkeypatch.setattr(pack_script.khop, "run_many", run_many)
    with pytest.raises(Trained, match="numpy"):
        pack_script.main(["--steps", "10"])
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"steps": 10, "device": "CPU X", "commit": "abc", "sampler": "counter"}))
    monkeypatch.setattr(pack_script.khop, "run_many", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(ValueError, match="drew from the numpy sampler; the packed from counter"):
        pack_script.main(["--steps", "10", "--curves", str(earlier)])


def test_a_short_pack_and_its_control_are_written(pack_script, monkeypatch, tmp_path):
    """Two steps trained packed and, for one run, alone here: the file holds both comparisons, the curves as
    plain lists, and the recording's device beside this call's. An unknown control run is refused first."""
    monkeypatch.setattr(pack_script.results_file, "RESULTS", tmp_path)
    with pytest.raises(ValueError, match="--control 'seed 9': allowed one of the recording's runs"):
        pack_script.main(["--steps", "2", "--control", "seed 9"])
    pack_script.main(["--steps", "2", "--control", "seed 0"])
    (path,) = tmp_path.glob("*-khop-pack.json")
    out = json.loads(path.read_text())
    assert out["device"] == config.device_name() and out["alone_device"].startswith("CPU")
    assert set(out["runs"]) == {"seed 0", "seed 1", "seed 2", "seed 0, every 250"}
    control = out["control"]["seed 0"]
    assert control["curves"]["step"] == [0.0, 2.0] and len(control["curves"]["acc"][0]) == 4
    # the only evaluation both make is step 0's, before any update: the same model and test sets, the same
    # accuracies, whatever the thread count
    got = control["against_recording"]
    assert got["last_shared_step"] == 0.0 and got["first_differing_eval"] is None
