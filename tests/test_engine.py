"""The training engine (:func:`companion.train.fit`): each experiment trained through it gives bitwise the numbers
of its old loop (``tests/engine_reference.py``, the loops as they were) on this machine, over a few hundred steps,
same seed and data."""

import dataclasses

import engine_reference as ref
import numpy as np
import pytest
import torch

from companion import train as tr
from companion.data.recall import RecallTask
from companion.experiments import fact_capacity as fc
from companion.models import ModelConfig, Transformer


def same(a, b, path="result"):
    """Assert ``a`` and ``b`` equal bitwise (arrays, tensors, floats, nested dicts and lists)."""
    if isinstance(a, dict):
        assert sorted(a) == sorted(b), f"{path}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: lengths {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), f"{path}: tensors differ"
    elif isinstance(a, np.ndarray):
        assert a.dtype == np.asarray(b).dtype and np.array_equal(a, b, equal_nan=True), (
            f"{path}: arrays differ"
        )
    else:
        assert type(a) is type(b) and (a == b or (a != a and b != b)), f"{path}: {a!r} != {b!r}"


def without(res: dict, *keys) -> dict:
    return {k: v for k, v in res.items() if k not in keys}


def test_fit_validates_before_work():
    w = torch.nn.Parameter(torch.ones(1))
    opt = torch.optim.SGD([w], lr=0.1)
    for kwargs, message in (
        (dict(steps=-1), "steps=-1"),
        (dict(steps=2, nonfinite="skip"), "nonfinite 'skip'"),
        (dict(steps=2, clip=0.0), "clip=0.0"),
    ):
        steps = kwargs.pop("steps")
        with pytest.raises(ValueError, match=message):
            tr.fit(None, opt, steps, lambda s: (w**2).sum(), progress=False, **kwargs)
    assert w.item() == 1.0


def test_fit_nonfinite_rules():
    """raise: FloatingPointError; stop: training ends before the bad update; continue: the first bad step."""
    w = torch.nn.Parameter(torch.ones(1))

    def loss_at(step):
        return (w * (float("nan") if step == 3 else 1.0)).sum()

    with pytest.raises(FloatingPointError, match="at step 3"):
        tr.fit(None, torch.optim.SGD([w], lr=0.1), 6, loss_at, progress=False)
    w.data.fill_(1.0)
    out = tr.fit(None, torch.optim.SGD([w], lr=0.1), 6, loss_at, nonfinite="stop", progress=False)
    assert (out.diverged, out.stopped, len(out.losses)) == (3, 3, 3) and torch.isfinite(w).all()
    w.data.fill_(1.0)
    out = tr.fit(None, torch.optim.SGD([w], lr=0.1), 6, loss_at, nonfinite="continue", progress=False)
    assert (out.diverged, out.stopped, len(out.losses)) == (3.0, 6, 6)


def test_fit_replica_losses_are_summed_not_averaged():
    """A loss per replica: the gradient of each replica's parameters is its own loss's, whatever the count."""
    w = torch.nn.Parameter(torch.tensor([1.0, 2.0, 3.0]))
    out = tr.fit(None, torch.optim.SGD([w], lr=0.5), 1, lambda s: w**2 / 2, progress=False)
    assert out.losses.shape == (1, 3)
    assert w.tolist() == [0.5, 1.0, 1.5]


def test_train_matches_its_old_loop():
    task = RecallTask(seq_len=16, alpha=0.5)
    cfg = tr.TrainConfig(steps=300, batch=16, lr=0.05)
    runs = []
    for loop in (ref.train, tr.train):
        model = Transformer(ModelConfig(task.vocab_size, d=16, max_len=16), seed=0)
        frozen = model.matrix("W_QK^2")
        frozen.requires_grad_(False)
        logs = loop(
            model,
            task,
            cfg,
            np.random.default_rng(3),
            evaluate=lambda s, m=model: {"norm": float(m.matrix("W_V^2").detach().norm())},
            eval_at=range(0, 300, 50),
            progress=False,
            unfreeze={120: [frozen]},
        )
        runs.append((logs, model.state_dict()))
    same(runs[0], runs[1])


def test_train_stops_at_divergence_like_its_old_loop():
    task = RecallTask(seq_len=16, alpha=0.5)
    cfg = tr.TrainConfig(steps=60, batch=16, lr=10.0, momentum=0.99, weight_decay=0.0)
    runs = []
    for loop in (ref.train, tr.train):
        model = Transformer(ModelConfig(task.vocab_size, d=16, max_len=16), seed=0)
        with torch.no_grad():
            model.matrix("W_V^2").mul_(1e3)  # diverges at step 2
        logs = loop(model, task, cfg, np.random.default_rng(3), progress=False, stop_on_nonfinite=True)
        runs.append((logs, model.state_dict()))
    assert runs[0][0][-1].get("diverged")
    same(runs[0], runs[1])


@pytest.mark.parametrize("stop_at", [0.99, 0.05])
def test_fact_capacity_matches_its_old_loop(stop_at):
    exp = fc.CapacityExperiment(
        H=2, m=8, d=16, steps=300, eval_every=40, n_test=64, batch=32, stop_at=stop_at
    )
    old = ref.fact_capacity_train(exp, progress=False)
    new = fc._train(exp, progress=False)
    same(without(old, "seconds"), without(new, "seconds"))
    assert new["stopped"] == (100 if stop_at == 0.5 else 300)


def test_fact_capacity_divergence_matches_its_old_loop():
    exp = dataclasses.replace(
        fc.CapacityExperiment(H=2, m=8, d=16, steps=100, eval_every=10, n_test=64, batch=32), lr=1e30
    )
    old, new = ref.fact_capacity_train(exp, progress=False), fc._train(exp, progress=False)
    same(without(old, "seconds"), without(new, "seconds"))
    assert new["diverged"] == new["stopped"] < 100


@pytest.mark.parametrize("attention", ["linear", "softmax"])
def test_factual_matches_its_old_loop(attention):
    from companion.experiments.factual import FactExperiment, FactTask, _train

    task = FactTask(n_subjects=8, n_relations=4, answers_per_relation=4, n_noise=8, seq_len=8)
    exp = FactExperiment(task=task, attention=attention, steps=200, eval_every=50, batch=32, n_test=256)
    same(
        without(ref.factual_train(exp, progress=False), "seconds"),
        without(_train(exp, progress=False), "seconds"),
    )


def test_khop_curriculum_matches_its_old_loop():
    """A curriculum that advances, waits ``last_stage_delay``, moves to the last stage on fresh data and keeps
    states after the move (one at the final step)."""
    from companion.experiments import khop

    exp = khop.KHopExperiment(
        N=4, k=4, d=16, data="curriculum", advance_at=0.2, last_stage_delay=20, last_stage_data=1,
        steps=240, eval_every=20, n_test=64, batch=32, lr=1e-2,
    )  # fmt: skip
    old = ref.khop_train(exp, progress=False, keep=(0, 40, 180))
    new = khop._train(exp, progress=False, keep=(0, 40, 180))
    same(without(old, "seconds"), without(new, "seconds"))
    assert new["stage"].tolist() == [1, 2, 3, 3] + [4] * 9  # moved at the evaluation of step 60
    assert sorted(new["kept"]) == [0, 40, 180]  # 180: the final step


@pytest.mark.parametrize("changes", [dict(), dict(reinit=-1, extra=True, hide=(2,))])
def test_khop_continuation_matches_its_old_loop(changes):
    from companion.experiments import khop

    exp = khop.KHopExperiment(N=4, k=2, d=16, data="direct", steps=40, eval_every=10, n_test=64, batch=32)
    state = khop._train(exp, progress=False)["state"]
    kw = dict(steps=60, eval_every=20, progress=False, **changes)
    old = ref.khop_continue_training(exp, state, "cumulative", 1e-2, **kw)
    new = khop.continue_training(exp, state, "cumulative", 1e-2, **kw)
    same(without(old, "seconds"), without(new, "seconds"))


def _have_wikitext() -> bool:
    from companion.data import sources

    try:
        sources.fetch("wikitext2_valid", download=False)
        sources.fetch("wikitext2_test", download=False)
        return True
    except sources.DataFileError:
        return False


@pytest.mark.skipif(not _have_wikitext(), reason="WikiText-2 valid/test not in COMPANION_DATA_DIR")
def test_scan_snap_text_matches_its_old_loop():
    """Dropout on (its draws come from torch's global generator, seeded by the model) and clipping."""
    from companion.experiments import scan_snap_text as st

    exp = st.TextExperiment(vocab_size=100, d=8, d_hid=8, steps=60, eval_every=25, n_eval=4, dropout=0.2)
    same(without(ref.scan_snap_text_train(exp, False), "seconds"), without(st._train(exp, False), "seconds"))


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_scan_snap_replicas_match_their_old_loop(optimizer):
    from companion.experiments import scan_snap as ss

    exp = ss.SynExperiment(steps=40, seeds=(3, 4), lr_z=(0.5, 2.0), record_every=10, optimizer=optimizer)
    same(without(ref.scan_snap_train(exp, False), "seconds"), without(ss._train(exp, False), "seconds"))


def test_one_step_simulation_matches_its_old_loop():
    from companion.theory import one_step as ost

    kw = dict(N=6, T=8, alpha=0.4, steps=120, batch=16, lr=0.5, seed=2, record_every=7)
    same(ref.one_step_train_simplified(**kw), ost.train_simplified(**kw))


def test_leading_terms_sgd_matches_its_old_loop():
    """Epochs of shuffled minibatches, measured every 5 steps and at each epoch's end (every 8 steps)."""
    from companion.theory import leading_study as ls
    from companion.theory import leading_terms as lt

    V, T = 12, 6
    rng = np.random.default_rng(0)
    train, heldout = rng.integers(0, V, (64, T + 1)), rng.integers(0, V, (16, T + 1))
    stats = lt.statistics(train, V)
    cfg = ls.TextConfig(L=2, n_train=64, n_heldout=16, batch=8, epochs=3, every=5, seed=1)
    old = ref.sgd_run(train, heldout, stats, V, cfg, 0.5, progress=False)
    new = ls.sgd_run(train, heldout, stats, V, cfg, 0.5, progress=False)
    same(without(old, "seconds"), without(new, "seconds"))
    assert new["log"]["step"] == [0, 5, 8, 10, 15, 16, 20, 24] and new["epoch_end"]["epoch"] == [0, 1, 2, 3]


@pytest.mark.skipif(not _have_wikitext(), reason="WikiText-2 valid/test not in COMPANION_DATA_DIR")
def test_llm_standin_matches_its_old_loop(tmp_path, monkeypatch):
    """The losses and every saved checkpoint's weights, for a tiny GPT-NeoX stand-in."""
    pytest.importorskip("transformers")
    from safetensors.torch import load_file

    from companion.llm import standin

    spec = standin.StandIn(
        n_layer=1, d=16, n_head=2, ctx=16, max_positions=32, batch=4, steps=30, checkpoints=(0, 7, 30)
    )
    folders = []
    for name, build in (("old", ref.standin_build), ("new", standin.build)):
        monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path / name))
        folders.append(build(spec, progress=False))
    old, new = (standin.info(f) for f in folders)
    same(without(old, "seconds"), without(new, "seconds"))
    for step in spec.checkpoints:
        weights = [load_file(f / f"step{step}" / "model.safetensors") for f in folders]
        same(weights[0], weights[1])
