"""The factual-recall capacity experiment (seed 002, F3-F4): model, configuration, grid and summary."""

import numpy as np
import pytest
import torch

from companion.experiments import fact_capacity as fc


def test_token_count_attention_equals_the_per_position_form():
    exp = fc.CapacityExperiment(H=3, m=5, d=16, d_h=4, S=6, R=5, D=3)
    model = exp.model().double()
    tokens = torch.as_tensor(exp.task().sample(np.random.default_rng(0), 64).tokens)
    a, b = model(tokens), model.forward_positions(tokens)
    assert a.shape == (64, exp.D * exp.R)
    assert torch.allclose(a, b, atol=1e-12, rtol=0)


def test_embeddings_are_fixed_and_the_rest_trains():
    model = fc.CapacityExperiment(H=2, m=3).model()
    names = {n for n, _ in model.named_parameters()}
    assert names == {"Q", "K", "V", "O", "W1", "b1", "W2"}
    assert {n for n, _ in model.named_buffers()} == {"E", "U"}


def test_parameter_counts_follow_the_paper():
    e = fc.CapacityExperiment(H=4, m=32, d=32, d_h=8)
    assert e.attention_params == 4 * 4 * 8 * 32 and e.mlp_params == 2 * 32 * 32


def test_grids_of_both_profiles():
    quick, full = fc.grid("quick"), fc.grid("full")
    assert len(quick) == 9 and len(full) == 169
    assert all(e.steps == 4096 for e in quick.values()) and all(e.steps == 2 ** 14 for e in full.values())
    assert {e.profile for e in full.values()} == {"full"}


def test_training_is_reproducible_and_stops_early():
    exp = fc.CapacityExperiment(S=4, R=2, D=2, H=2, m=8, d=16, d_h=8, seq_len=8, batch=64, steps=60,
                                eval_every=10, n_test=64, lr=3e-2)
    a = fc.run(exp, progress=False, use_cache=False)
    b = fc.run(exp, progress=False, use_cache=False)
    assert np.array_equal(a["acc"], b["acc"]) and a["best"] == b["best"]
    assert a["best"] == a["acc"].max()
    if a["best"] > exp.stop_at:  # stopped at the first evaluation above stop_at
        assert a["stopped"] == a["step"][-1] and a["acc"][-1] == a["best"]


def test_summary_reads_the_corners_of_the_grid():
    runs = {f"H={H}, m={m}": {"best": b} for (H, m), b in
            {(1, 1): 0.1, (1, 128): 0.3, (4, 1): 0.5, (4, 128): 0.9, (16, 1): 0.97, (16, 128): 1.0}.items()}
    s = fc.grid_summary(runs)
    assert s["big_heads_min"] == 0.97 and s["small_heads_max"] == 0.3
    assert s["mid_mlp_gain"] == pytest.approx(0.4) and s["H_mid"] == 4


@pytest.mark.parametrize("kwargs,match", [(dict(H=0), "H=0"), (dict(m=0), "m=0"), (dict(d_h=0), "d_h=0"),
                                          (dict(lr=0.0), "lr"), (dict(stop_at=1.5), "stop_at"),
                                          (dict(D=0), "answers_per_relation"), (dict(profile="huge"), "huge")])
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fc.CapacityExperiment(**kwargs)


def test_recorded_grid_is_required():
    with pytest.raises(ValueError, match="python -m companion record fact_capacity --profile full"):
        fc.recorded("full")


def test_attention_survives_scores_far_apart():
    """A large score on a token absent from the sequence must not zero every weight (the max is over tokens
    present)."""
    exp = fc.CapacityExperiment(H=1, m=2, d=8, d_h=8, S=4, R=2, D=2, seq_len=6)
    model = exp.model().double()
    tokens = torch.as_tensor(exp.task().sample(np.random.default_rng(1), 16).tokens)
    with torch.no_grad():
        model.K.mul_(1e4)
        model.Q.mul_(1e4)
    a = model(tokens)
    assert torch.isfinite(a).all()
    assert torch.allclose(a, model.forward_positions(tokens), atol=1e-9, rtol=0)


def test_construction_stores_every_fact_when_wide_enough():
    exp = fc.CapacityExperiment(S=8, R=4, D=2, d=1024, H=2, d_h=8, m=1)
    for readout in fc.READOUTS:
        assert fc.construction_accuracy(exp, n=512, readout=readout) == 1.0
    narrow = fc.CapacityExperiment(S=8, R=4, D=2, d=8, H=2, d_h=8, m=1)
    assert fc.construction_accuracy(narrow, n=512, readout="embedding") < 0.9


def test_construction_needs_a_head_slot_per_token():
    with pytest.raises(ValueError, match=r"H d_h = 8 < S \+ R = 12"):
        fc.construct(fc.CapacityExperiment(S=8, R=4, D=2, H=1, d_h=8))
    with pytest.raises(ValueError, match="readout"):
        fc.construct(fc.CapacityExperiment(S=8, R=4, D=2, H=2, d_h=8), readout="other")


def test_construction_attention_is_exact_with_the_dual_readout():
    exp = fc.CapacityExperiment(S=4, R=4, D=2, d=64, H=1, d_h=8, m=1)  # vocabulary 17 <= d
    model = fc.construct(exp, beta=3.0, readout="dual")
    scores = (model.E @ model.K[0]) @ (model.E[exp.task().eos] @ model.Q[0]) / 8 ** 0.5
    expected = torch.zeros(exp.task().vocab_size)
    expected[: exp.S + exp.R] = 3.0
    assert torch.allclose(scores, expected, atol=1e-4)
