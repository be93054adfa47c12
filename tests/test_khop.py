"""k-hop composition task (seed 002, K1-K3): the data, its validation, the model, one short run."""

import numpy as np
import pytest
import torch

from companion.experiments import khop


def _compose(task, tokens, hops):
    """The answer recomputed from the tokens alone, one example at a time (the definition)."""
    pi, N = task.hidden(), task.N
    v = tokens[0]
    for i in range(hops):
        table = tokens[1 + i * N: 1 + (i + 1) * N]
        v = table[pi[i][v]]
    return v


def test_answer_is_the_composition_of_the_tables_shown():
    task = khop.KHopTask(N=5, k=3, hidden_seed=2)
    hops = np.array([1, 2, 3] * 20)
    b = task.sample(np.random.default_rng(1), hops)
    assert b.tokens.shape == (60, 16)
    for t, h, a, m in zip(b.tokens, hops, b.answer, b.mask):
        assert _compose(task, t, h) == a
        assert m.sum() == 1 + h * task.N
        assert (t[~m] == task.pad).all() and (t[m] < task.N).all()
    for t in b.tokens:  # every table shown is a permutation
        for i in range(3):
            blk = t[1 + i * 5: 1 + (i + 1) * 5]
            assert blk.max() == task.pad or sorted(blk) == list(range(5))


def test_hidden_permutations_are_fixed_by_their_seed():
    a, b = khop.KHopTask(N=6, k=2, hidden_seed=0), khop.KHopTask(N=6, k=2, hidden_seed=1)
    assert (a.hidden() == khop.KHopTask(N=6, k=2, hidden_seed=0).hidden()).all()
    assert not (a.hidden() == b.hidden()).all()
    assert sorted(a.hidden()[1]) == list(range(6))


@pytest.mark.parametrize("kw, match", [
    (dict(k=0), r"k \(hops\)=0 is out of range"),
    (dict(N=1), r"N \(values\)=1 is out of range"),
    (dict(data="random"), "data"),
    (dict(weights=(0.5, 0.5)), r"2 entries: allowed one per hop count 1..4"),
    (dict(weights=(0.5, 0.5, 0.5, -0.5)), "not a distribution"),
    (dict(weights=(0.3, 0.3, 0.3, 0.3)), r"summing to 1 \(they sum to 1.2\)"),
    (dict(d=30, heads=4), "d=30 is not a multiple of heads=4"),
    (dict(advance_at=1.5), r"advance_at=1.5 is out of range"),
])
def test_bad_settings_are_refused_before_any_work(kw, match):
    with pytest.raises(ValueError, match=match):
        khop.KHopExperiment(**kw)


def test_bad_hop_counts_are_refused():
    with pytest.raises(ValueError, match=r"allowed 1..3"):
        khop.KHopTask(N=4, k=3).sample(np.random.default_rng(0), [1, 4])


def test_depth_defaults_to_log2_k_plus_one():
    assert [khop.KHopExperiment(k=k).layers for k in (1, 2, 3, 4, 8)] == [1, 2, 3, 3, 4]
    assert khop.KHopExperiment(k=4, depth=2).layers == 2


def test_padding_does_not_leak_into_the_prediction():
    exp = khop.KHopExperiment(N=4, k=3)
    model = exp.model()
    b = exp.task().sample(np.random.default_rng(0), np.array([1, 2]))
    t, m = torch.as_tensor(b.tokens), torch.as_tensor(b.mask)
    other = t.clone()
    other[~m] = 0  # change what sits under the mask
    with torch.no_grad():
        assert torch.allclose(model(t, m), model(other, m), atol=1e-6)


@pytest.mark.parametrize("data", khop.DATA)
def test_a_short_run_is_reproducible(data):
    exp = khop.KHopExperiment(N=4, k=2, data=data, steps=6, eval_every=3, n_test=16, batch=8, advance_at=0.01)
    a = khop.run(exp, progress=False, use_cache=False)
    b = khop.run(exp, progress=False, use_cache=False)
    assert a["acc"].shape == (3, 2)
    assert np.array_equal(a["acc"], b["acc"]) and np.allclose(a["loss"][1:], b["loss"][1:])
    if data == "curriculum":
        assert a["stage"].tolist()[0] == 1 and a["stage"].max() == 2
    assert np.isfinite(a["loss"][1:]).all()


def test_learned_at():
    r = {"step": np.array([0, 10, 20]), "acc": np.array([[0.1, 0.1], [0.95, 0.2], [1.0, 0.5]])}
    assert khop.learned_at(r).tolist() == [10, np.inf]
