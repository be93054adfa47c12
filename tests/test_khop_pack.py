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


def test_compare_and_stage_steps(pack_script):
    a = {"step": [100, 200, 300], "acc": [[1, 0.1], [1, 0.5], [1, 1]], "stage": [1, 2, 2]}
    b = {"step": [100, 200], "acc": [[1, 0.1], [1, 0.4]], "stage": [1, 1]}
    got = pack_script.compare(a, b)
    assert got["first_differing_eval"] == 200 and got["last_shared_step"] == 200
    assert got["stages_alone"] == {"2": 100.0} and got["stages_packed"] == {"2": None}
    assert pack_script.compare(a, a)["first_differing_eval"] is None


def test_a_packed_recording_or_a_bad_step_count_is_refused(pack_script):
    packed = record.RECORDED_DIR / "counter" / "khop_seeds-quick-depth=4-eval_every=100-k=4-steps=16000.json"
    with pytest.raises(ValueError, match="trained in packs of 4; allowed a recording made run by run"):
        pack_script.main(["--alone", str(packed)])
    with pytest.raises(ValueError, match="steps"):
        pack_script.main(["--steps", "0"])


def test_a_recording_of_another_sampler_is_refused_before_training(pack_script, monkeypatch):
    monkeypatch.setenv("COMPANION_SAMPLER", "counter")
    monkeypatch.setattr(pack_script.khop, "run_many", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(ValueError, match="drew from the numpy sampler; the packed from counter"):
        pack_script.main(["--steps", "10"])
