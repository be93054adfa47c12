"""The training engine (:func:`companion.train.fit`): each experiment trained through it gives bitwise the numbers
of its old loop (``tests/engine_reference.py``, the loops as they were) on this machine, over a few hundred steps,
same seed and data."""

import dataclasses

import engine_reference as ref
import numpy as np
import pytest
import torch

from companion import train as tr
from companion.data import sources
from companion.data.recall import RecallTask
from companion.experiments import fact_capacity as fc
from companion.models import ModelConfig, Transformer

# the old loops drew their batches from the numpy generators: the engine is compared with them under that sampler
pytestmark = pytest.mark.usefixtures("numpy_sampler")


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
        (dict(steps=2, accumulate=0), "accumulate=0"),
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


def test_fit_raise_reads_the_device_only_at_evaluations(monkeypatch):
    """nonfinite="raise" notes a bad loss on the device and raises before the next evaluation, naming the first
    bad step (not a later one); between evaluations no loss is read on the host."""
    w = torch.nn.Parameter(torch.ones(1))
    seen, reads = [], []
    original = torch.Tensor.__bool__

    def counted(self):
        reads.append(1)
        return original(self)

    def loss_at(step):
        return (w * (float("nan") if step >= 3 else 1.0)).sum()

    monkeypatch.setattr(torch.Tensor, "__bool__", counted)
    opt = torch.optim.SGD([w], lr=0.1)
    out = tr.fit(
        None, opt, 8, lambda s: (w * 1.0).sum(), evaluate=lambda s: None, eval_at={0, 4}, progress=False
    )
    assert len(reads) == 3 and len(out.losses) == 8  # one read per evaluation (0, 4, 8), none per step
    with pytest.raises(FloatingPointError, match=r"\[nan\] at step 3|nan at step 3"):
        tr.fit(None, opt, 8, loss_at, evaluate=seen.append, eval_at={0, 6}, progress=False)
    assert seen == [0]  # the evaluation of step 6 never saw the diverged model


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


@pytest.mark.parametrize("stop_at", [0.99, 0.5])
def test_fact_capacity_matches_its_old_loop(stop_at):
    """300 steps; at stop_at 0.5 the run stops early (test accuracy 0.56 at step 100)."""
    exp = fc.CapacityExperiment(
        S=8, R=4, D=4, H=2, m=8, d=16, steps=300, eval_every=20, n_test=64, batch=32, stop_at=stop_at
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
        without(_train(exp, progress=False), "seconds", "device"),
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
    new = khop.train_run(exp, progress=False, keep=(0, 40, 180))
    same(without(old, "seconds"), without(new, "seconds"))
    assert new["stage"].tolist() == [1, 2, 3, 3] + [4] * 9  # moved at the evaluation of step 60
    assert sorted(new["kept"]) == [0, 40, 180]  # 180: the final step


@pytest.mark.parametrize("changes", [dict(), dict(reinit=-1, extra=True, hide=(2,))])
def test_khop_continuation_matches_its_old_loop(changes):
    from companion.experiments import khop

    exp = khop.KHopExperiment(N=4, k=2, d=16, data="direct", steps=40, eval_every=10, n_test=64, batch=32)
    state = khop.train_run(exp, progress=False)["state"]
    kw = dict(steps=60, eval_every=20, progress=False, **changes)
    old = ref.khop_continue_training(exp, state, "cumulative", 1e-2, **kw)
    new = khop.continue_training(exp, state, "cumulative", 1e-2, **kw)
    same(without(old, "seconds"), without(new, "seconds"))


def tiny_text(epochs: int):
    """((train, heldout, statistics, V), configuration) of a tiny leading-terms text run: V = 12, T = 6, batches
    of 8 of 64 random sequences, checkpoints every 5 steps."""
    from companion.theory import leading_study as ls
    from companion.theory import leading_terms as lt

    V, T = 12, 6
    rng = np.random.default_rng(0)
    train, heldout = rng.integers(0, V, (64, T + 1)), rng.integers(0, V, (16, T + 1))
    cfg = ls.TextConfig(L=2, n_train=64, n_heldout=16, batch=8, epochs=epochs, every=5, seed=1)
    return (train, heldout, lt.statistics(train, V), V), cfg


def test_fit_accumulate_gives_the_whole_batch_step():
    """A step's gradient in 4 pieces (each piece's mean weighted by its share of the batch): the same weights and
    losses as the whole batch at once, float64, SGD with momentum, to rounding."""
    torch.manual_seed(0)
    x, y = torch.randn(5, 16, 3, dtype=torch.float64), torch.randn(5, 16, dtype=torch.float64)

    def trained(pieces: int):
        w = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
        opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
        n = 16 // pieces

        def loss_at(s, piece=0):
            xs, ys = x[s, piece * n : (piece + 1) * n], y[s, piece * n : (piece + 1) * n]
            return ((xs @ w - ys) ** 2).mean() * (n / 16)

        out = tr.fit(None, opt, 5, loss_at, progress=False, accumulate=pieces)
        return w.detach(), out.losses

    (w1, l1), (w4, l4) = trained(1), trained(4)
    torch.testing.assert_close(w4, w1, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(l4, l1, rtol=1e-12)
    assert not torch.equal(w1, torch.ones(3, dtype=torch.float64))


def test_leading_terms_sgd_in_pieces_is_the_same_run():
    """``micro_batch``: each step's gradient in pieces of 2 of the batch of 8: the same cosines, losses and removals
    as the whole batch, to float32 rounding (the model's dtype: pieces sum the gradient in another order); a
    micro_batch that does not divide the batch is refused."""
    from companion.theory import leading_study as ls

    data, cfg = tiny_text(epochs=2)
    whole = ls.sgd_run(*data, cfg, 0.5, progress=False)
    pieces = ls.sgd_run(*data, dataclasses.replace(cfg, micro_batch=2), 0.5, progress=False)
    assert pieces["log"]["step"] == whole["log"]["step"]
    np.testing.assert_allclose(pieces["log"]["train_loss"], whole["log"]["train_loss"], rtol=1e-6)
    np.testing.assert_allclose(
        pieces["epoch_end"]["heldout_loss"], whole["epoch_end"]["heldout_loss"], rtol=1e-6
    )
    for a, b in zip(pieces["log"]["cos"], whole["log"]["cos"]):
        np.testing.assert_allclose(list(a.values()), list(b.values()), rtol=1e-5, atol=1e-6)
    assert pieces["removal"] == pytest.approx(whole["removal"], rel=1e-6)
    assert whole["log"]["train_loss"][-1] < whole["log"]["train_loss"][1]  # it trained
    for bad, message in ((3, "does not divide batch = 8"), (16, "micro_batch=16"), (0, "micro_batch=0")):
        with pytest.raises(ValueError, match=message):
            dataclasses.replace(cfg, micro_batch=bad)
    assert ls.configs("full")["bpe"].micro_batch == 256 and ls.configs("quick")["bpe"].micro_batch is None


@pytest.mark.skipif(
    not sources.available("wikitext2_valid", "wikitext2_test"),
    reason="WikiText-2 valid/test not in COMPANION_DATA_DIR",
)
def test_scan_snap_text_matches_its_old_loop():
    """Dropout on (its draws come from torch's global generator, seeded by the model) and clipping."""
    from companion.experiments import scan_snap_text as st

    exp = st.TextExperiment(vocab_size=100, d=8, d_hid=8, steps=60, eval_every=25, n_eval=4, dropout=0.2)
    same(
        without(ref.scan_snap_text_train(exp, False), "seconds"),
        without(st._train(exp, False), "seconds", "device"),
    )


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_scan_snap_replicas_match_their_old_loop(optimizer):
    from companion.experiments import scan_snap as ss

    exp = ss.SynExperiment(steps=40, seeds=(3, 4), lr_z=(0.5, 2.0), record_every=10, optimizer=optimizer)
    same(
        without(ref.scan_snap_train(exp, False), "seconds"),
        without(ss._train(exp, False), "seconds", "device"),
    )


def test_one_step_simulation_matches_its_old_loop():
    from companion.theory import one_step as ost

    kw = dict(N=6, T=8, alpha=0.4, steps=120, batch=16, lr=0.5, seed=2, record_every=7)
    same(ref.one_step_train_simplified(**kw), ost.train_simplified(**kw))


def test_leading_terms_sgd_matches_its_old_loop():
    """Epochs of shuffled minibatches, measured every 5 steps and at each epoch's end (every 8 steps)."""
    from companion.theory import leading_study as ls

    data, cfg = tiny_text(epochs=3)
    old = ref.sgd_run(*data, cfg, 0.5, progress=False)
    new = ls.sgd_run(*data, cfg, 0.5, progress=False)
    same(without(old, "seconds"), without(new, "seconds"))
    assert new["log"]["step"] == [0, 5, 8, 10, 15, 16, 20, 24] and new["epoch_end"]["epoch"] == [0, 1, 2, 3]


@pytest.mark.skipif(
    not sources.available("wikitext2_valid", "wikitext2_test"),
    reason="WikiText-2 valid/test not in COMPANION_DATA_DIR",
)
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


# --- replicas: several runs of one shape trained as one computation ---------------------------------------


@pytest.mark.parametrize(
    "kind, torch_opt",
    [
        ("sgd", lambda p, lr, wd: torch.optim.SGD([p], lr=lr, momentum=0.9, weight_decay=wd)),
        ("adam", lambda p, lr, wd: torch.optim.Adam([p], lr=lr, weight_decay=wd)),
        ("adamw", lambda p, lr, wd: torch.optim.AdamW([p], lr=lr, weight_decay=wd)),
    ],
)
def test_replica_optimizer_is_torchs_per_replica(kind, torch_opt):
    """float64, 40 steps of a least-squares fit per replica (own data, learning rate, weight decay): each replica
    of the pack follows torch's optimiser run alone, to 1e-12."""
    gen = torch.Generator().manual_seed(0)
    R, n, d = 3, 16, 5
    X, y = (
        torch.randn(R, n, d, generator=gen, dtype=torch.float64),
        torch.randn(R, n, generator=gen, dtype=torch.float64),
    )
    w0 = torch.randn(R, d, generator=gen, dtype=torch.float64)
    lrs, wds = [0.01, 0.05, 0.1], [0.0, 1e-2, 1e-1]
    w = torch.nn.Parameter(w0.clone())
    reps = tr.Replicas([w], kind, lr=lrs, weight_decay=wds, momentum=0.9)
    tr.fit(None, reps, 40, lambda s: ((torch.einsum("rnd,rd->rn", X, w) - y) ** 2).mean(1), progress=False)
    for r in range(R):
        alone = torch.nn.Parameter(w0[r].clone())
        opt = torch_opt(alone, lrs[r], wds[r])
        tr.fit(None, opt, 40, lambda s: ((X[r] @ alone - y[r]) ** 2).mean(), progress=False)
        torch.testing.assert_close(w[r], alone.detach(), rtol=1e-12, atol=1e-12)
    assert not torch.equal(w.detach(), w0)


def test_replicas_freeze_and_note_divergence_on_the_device():
    w = torch.nn.Parameter(torch.ones(3, 2))
    reps = tr.Replicas([w], "adam", lr=[0.1, 0.1, 0.1])
    bad = torch.tensor([1.0, float("nan"), 1.0])
    reps.freeze([2])
    for step in range(3):
        loss = (w**2).sum(1) * (bad if step == 1 else 1.0)
        reps.watch(step, loss)
        reps.zero_grad()
        loss.sum().backward()
        reps.step()
    assert reps.frozen.tolist() == [False, True, True] and reps.diverged.tolist() == [
        float("inf"),
        1.0,
        float("inf"),
    ]
    assert w[0, 0] < 1 and w[2].tolist() == [1.0, 1.0] and torch.isfinite(w).all()
    assert w[1, 0] < 1  # moved at step 0, then frozen at its non-finite loss


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(lr=[]), "replicas=0"),
        (dict(lr=[0.1, 0.1], weight_decay=[0.0, 0.1, 0.2]), "weight_decay has 3 values for 2 replicas"),
        (dict(lr=[0.1, -1.0]), "lr=-1.0"),
        (dict(lr=[0.1, 0.1], kind="rmsprop"), "optimizer 'rmsprop'"),
        (dict(lr=[0.1, 0.1, 0.1]), "no replica dimension of size 3"),
    ],
)
def test_replicas_refuse_bad_settings(kwargs, match):
    kind = kwargs.pop("kind", "sgd")
    with pytest.raises(ValueError, match=match):
        tr.Replicas([torch.zeros(2, 4, requires_grad=True)], kind, **kwargs)


def test_fact_capacity_pack_is_its_runs_alone(monkeypatch):
    """float64 on the CPU: four runs of different H, m, learning rate, seed and stopping rule (one stops early,
    one diverges at step 1) trained as one pack give each run's evaluations, stop and divergence exactly, and its
    trained parameters to 1e-9."""
    torch.set_default_dtype(torch.float64)
    try:
        kw = dict(S=8, R=4, D=4, d=16, steps=200, eval_every=20, n_test=64, batch=32)
        exps = [
            fc.CapacityExperiment(H=1, m=4, lr=1e-2, seed=0, **kw),
            fc.CapacityExperiment(H=2, m=8, lr=1e-2, seed=0, stop_at=0.5, **kw),
            fc.CapacityExperiment(H=2, m=2, lr=3e-2, seed=1, **kw),
            fc.CapacityExperiment(H=1, m=8, lr=1e100, seed=1, **kw),
        ]
        packed = fc._train_pack(exps, progress=False, states=True)
        built = []
        original = fc.CapacityExperiment.model
        monkeypatch.setattr(
            fc.CapacityExperiment, "model", lambda self: built.append(original(self)) or built[-1]
        )
        for e, p in zip(exps, packed):
            alone = fc._train(e, progress=False)
            same(without(alone, "seconds"), without(p, "seconds", "pack", "state"))
            for name, value in p["state"].items():
                torch.testing.assert_close(value, getattr(built[-1], name).detach(), rtol=1e-9, atol=1e-9)
        assert [p["stopped"] for p in packed] == [200, 100, 200, 1] and packed[3]["diverged"] == 1
        assert packed[0]["pack"] == {"replicas": 4, "H": 2, "m": 8}
    finally:
        torch.set_default_dtype(torch.float32)


def test_fact_scaling_packs_the_rates_of_a_size_and_keeps_the_trials(monkeypatch):
    """float64: a sweep whose sizes are tried at two learning rates trains each size's rates as one pack and
    finds the trials of the same sweep with every run trained alone."""
    torch.set_default_dtype(torch.float64)
    try:
        exp = fc.ScalingExperiment(
            ds=(4, 8), steps=24, min_size=2, max_size=7, H=1, lrs=(5e-2, 1e-3), level=0.1
        )
        packs = []
        pack = fc._train_pack
        monkeypatch.setattr(
            fc, "_train_pack", lambda exps, *a, **k: packs.append(len(exps)) or pack(exps, *a, **k)
        )
        packed = fc.scaling(exp, progress=False, use_cache=False)
        monkeypatch.setattr(
            fc, "run_many", lambda exps, **k: {n: fc._train(e, progress=False) for n, e in exps.items()}
        )
        alone = fc.scaling(exp, progress=False, use_cache=False)
        assert packs and set(packs) == {2}
        assert [w["trials"] for w in packed["widths"]] == [w["trials"] for w in alone["widths"]]
        rates = [[t[1] for t in w["trials"]] for w in packed["widths"]]
        assert rates == [
            [5e-2, 5e-2, 1e-3],
            [5e-2, 5e-2],
        ]  # a stored size ends its trials; a failed one goes on
    finally:
        torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("kind", ["sgd", "adam", "adamw"])
def test_fact_capacity_padding_stays_zero(kind):
    """A missing head or MLP unit is exactly zero after training, under each optimiser with weight decay."""
    small, large = (
        fc.OneLayerTF(20, 4, d=8, H=1, d_h=2, m=3),
        fc.OneLayerTF(20, 4, d=8, H=3, d_h=2, m=5, seed=1),
    )
    pack = fc.PackedOneLayerTF([small, large])
    reps = tr.Replicas(list(pack.parameters()), kind, lr=[0.05, 0.05], weight_decay=1e-2, momentum=0.9)
    tokens, answers = torch.randint(0, 20, (2, 16, 7)), torch.randint(0, 4, (2, 16))

    def loss(step):
        logits = pack(tokens).flatten(0, 1)
        return (
            torch.nn.functional.cross_entropy(logits, answers.flatten(), reduction="none").view(2, -1).mean(1)
        )

    tr.fit(None, reps, 20, loss, progress=False)
    pads = [
        pack.Q[0, 1:],
        pack.K[0, 1:],
        pack.V[0, 1:],
        pack.O[0, 2:],
        pack.W1[0, :, 3:],
        pack.b1[0, 3:],
        pack.W2[0, 3:],
    ]
    assert all(bool((p == 0).all()) for p in pads)
    assert not torch.equal(pack.Q[0, 0], small.Q[0])  # the real head moved


def test_allocation_pack_is_its_runs_alone():
    """float64: the learning rates of each configuration trained as one pack give each run's training and test
    losses to 1e-9 relative, and the same divergences (lr 9 diverges), as the old loop of one run at a time."""
    from companion.experiments import allocation as al

    exp = al.AllocationExperiment(
        d=16,
        seq_len=8,
        batch=8,
        steps=30,
        budgets=(1024,),
        mlp_fracs=(0.3, 0.7),
        lrs=(0.03, 0.3, 9.0),
        last=5,
        n_test=16,
    )
    torch.set_default_dtype(torch.float64)
    try:
        old = ref.allocation_train_all(exp, "cpu", progress=False)
        new = al._train_all(exp, "cpu", progress=False)
    finally:
        torch.set_default_dtype(torch.float32)
    assert [r["train_loss"] is None for r in old["rows"]] == [False, False, True] * 2
    for a, b in zip(old["rows"], new["rows"]):
        for k, v in a.items():
            if k in ("train_loss", "test_loss") and v is not None:
                assert b[k] == pytest.approx(v, rel=1e-9), k
            else:
                assert b[k] == v, k
    assert without(old, "rows", "seconds", "device") == without(new, "rows", "seconds", "device", "pack")
    assert new["pack"]["replicas"] == 3


def test_khop_pack_is_its_runs_alone():
    """float64 on the CPU: five k-hop runs of one shape but their own seed, data, learning rate, evaluation
    interval and curriculum (one moves to the last stage after a delay and onto fresh data; one diverges) trained
    as one pack give each run's evaluation steps, stages and accuracies exactly, its losses and trained weights to
    1e-9 (the pack computes attention explicitly, the run alone with the fused kernel)."""
    from companion.experiments import khop

    kw = dict(N=4, k=2, d=16, heads=2, batch=32, steps=60, n_test=64)
    exps = [
        khop.KHopExperiment(
            data="curriculum", advance_at=0.2, last_stage_delay=20, last_stage_data=1, eval_every=10, **kw
        ),
        khop.KHopExperiment(data="mixture", seed=1, lr=1e-2, eval_every=20, **kw),
        khop.KHopExperiment(data="cumulative", starts="any", eval_every=10, **kw),
        khop.KHopExperiment(data="direct", seed=2, lr=1e100, eval_every=30, **kw),
        khop.KHopExperiment(data="mixture", weights=(0.9, 0.1), seed=3, eval_every=10, **kw),
    ]
    torch.set_default_dtype(torch.float64)
    try:
        packed = khop._train_pack(exps, progress=False)
        alone = [khop.train_run(e, progress=False) for e in exps]
    finally:
        torch.set_default_dtype(torch.float32)
    assert list(alone[0]["stage"]) == [1, 1, 1, 2, 2, 2, 2]  # the bar met at step 0, the move 20 steps later
    assert not np.isfinite(alone[3]["loss"][1:]).any() and np.isfinite(alone[1]["loss"][1:]).all()
    for a, p in zip(alone, packed):
        for key in ("step", "stage", "acc"):
            same(a[key], p[key], key)
        np.testing.assert_allclose(p["loss"], a["loss"], rtol=1e-9, equal_nan=True)
        assert sorted(p["state"]) == sorted(a["state"])
        for name, value in a["state"].items():
            torch.testing.assert_close(p["state"][name], value, rtol=1e-9, atol=1e-9, equal_nan=True)
    assert packed[0]["pack"]["replicas"] == 5


def test_khop_runs_of_other_shapes_do_not_share_a_pack():
    from companion.experiments import khop

    a, b = khop.KHopExperiment(d=16, steps=4), khop.KHopExperiment(d=32, steps=4)
    with pytest.raises(ValueError, match="cannot share a pack"):
        khop._train_pack([a, b], progress=False)
    with pytest.raises(ValueError, match="max_replicas=0"):
        khop.run_many({"a": a}, max_replicas=0)


def test_a_khop_run_packed_alone_rounds_as_a_replica_of_a_larger_pack(tmp_path, monkeypatch):
    """``pack_one``: a run alone in its group trained as a pack of one gives, in float32, exactly what the same
    run gives as a replica of a pack of two (the pack computes each replica on its own), not the run alone's
    rounding; without it the run trains alone."""
    from companion.experiments import khop

    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path))
    kw = dict(N=4, k=2, d=16, heads=2, batch=32, steps=40, n_test=64, eval_every=10, data="cumulative")
    a, b = khop.KHopExperiment(**kw), khop.KHopExperiment(seed=1, **kw)
    one = khop.run_many({"a": a}, progress=False, use_cache=False, pack_one=True)["a"]
    two = khop.run_many({"a": a, "b": b}, progress=False, use_cache=False)["a"]
    alone = khop.run_many({"a": a}, progress=False, use_cache=False)["a"]
    assert one["pack"]["replicas"] == 1 and "pack" not in alone
    for key in ("step", "stage", "acc", "loss"):
        np.testing.assert_array_equal(one[key], two[key], err_msg=key)
