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
