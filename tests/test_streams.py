"""Training streams under both samplers (issue 54): the numpy one is the generator every recording trained on,
bitwise; the counter one gives each step's batch of (seed, stream, step); the sampler keys the run cache."""

import numpy as np
import pytest
import torch

from companion import cache, config, train
from companion.data import batch_digest, counter, sampler_version
from companion.data.recall import RecallTask
from companion.data.seqclass import CountTask, synthetic
from companion.data.streams import EpochOrders, TrainingStream
from companion.experiments import allocation, fact_capacity, induction, khop, noisy_recall
from companion.models import ModelConfig, Transformer

TINY = dict(d=8, seq_len=8, batch=8, steps=4, eval_every=2, dense_until=1, n_test=8, rhos=(0.0, 1.0))


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("COMPANION_SAMPLER", raising=False)


def test_the_numpy_stream_is_the_runs_generator_in_order():
    task = RecallTask(seq_len=8)
    stream = TrainingStream(5, "train-data", sampler="numpy")
    rng = np.random.default_rng(config.seed_streams(5, ["train-data"])["train-data"])
    for step in range(3):
        assert batch_digest(stream.batch(task, 4, step)) == batch_digest(task.sample(rng, 4))
    with pytest.raises(
        ValueError, match="step=5: the numpy sampler.s draws come one after another, the next is 3"
    ):
        stream.batch(task, 4, 5)


def test_the_counter_stream_gives_each_steps_draw_in_any_order():
    task = RecallTask(seq_len=8, alpha=0.3)
    stream = TrainingStream(5, "train-data", sampler="counter", block=3)
    key = config.stream_key("train-data")
    for step in (7, 2, 3, 8, 0):
        expect = counter.select(task.draw([5], [step], 4, stream=key), (0, 0))
        assert torch.equal(stream.batch(task, 4, step).tokens, expect.tokens)
    clean = task.with_alpha(0.0)  # another task at the same step: its own draw, not the cached block's
    assert torch.equal(stream.batch(clean, 4, 8).tokens, clean.draw([5], [8], 4, stream=key).tokens[0, 0])


def test_the_sampler_setting_is_checked_and_keys_the_cache(monkeypatch):
    exp = noisy_recall.RecallExperiment.quick(**TINY)
    assert config.sampler() == config.DEFAULT_SAMPLER  # without $COMPANION_SAMPLER
    keys = {}
    for name, version in (("numpy", 1), ("counter", 2)):
        monkeypatch.setenv("COMPANION_SAMPLER", name)
        assert config.sampler() == name and sampler_version() == version
        keys[name] = cache.key(exp, noisy_recall.MODULES)
    assert keys["numpy"] != keys["counter"]
    monkeypatch.setenv("COMPANION_SAMPLER", "philox")
    with pytest.raises(ValueError, match="sampler"):
        config.sampler()
    with pytest.raises(ValueError, match="seed"):
        TrainingStream(-1, "train-data")


def test_using_sampler_sets_the_sampler_within_its_block_only(monkeypatch):
    """A recording's first batch is recomputed with the sampler that drew it, whatever the environment says."""
    monkeypatch.setenv("COMPANION_SAMPLER", "counter")
    with config.using_sampler("numpy"):
        assert config.sampler() == "numpy" and TrainingStream(0, "train-data").sampler == "numpy"
        with config.using_sampler("counter"):
            assert config.sampler_version() == 2
        assert config.sampler("counter") == "counter" and config.sampler() == "numpy"
    assert config.sampler() == "counter"
    with pytest.raises(ValueError, match="philox"):
        with config.using_sampler("philox"):
            raise AssertionError("the block runs")
    assert config.sampler() == "counter"
    with pytest.raises(ValueError, match=r"sampler version 3: allowed \[1, 2\]"):
        config.sampler_of_version(3)


@pytest.mark.parametrize("schedule", ["noisy", "finetune"])
def test_a_recall_run_trains_on_the_counter_batches(schedule, monkeypatch):
    """The run's first batch is the counter draw of step 0 (pre-training's, when it pre-trains), a second run
    repeats the first, and the numpy run trains on other batches."""
    exp = noisy_recall.RecallExperiment.quick(**TINY, schedule=schedule, pretrain_steps=2)
    monkeypatch.setenv("COMPANION_SAMPLER", "numpy")
    before = noisy_recall.run(exp, progress=False)
    monkeypatch.setenv("COMPANION_SAMPLER", "counter")
    task = exp.task().with_alpha(0.0) if schedule == "finetune" else exp.task()
    first = noisy_recall.first_batch(exp)
    assert torch.equal(
        first.tokens, task.draw([0], [0], 8, stream=config.stream_key("train-data")).tokens[0, 0]
    )
    a = noisy_recall.run(exp, progress=False, use_cache=False)
    b = noisy_recall.run(exp, progress=False, use_cache=False)
    assert np.array_equal(a.metrics["train_loss"], b.metrics["train_loss"])
    assert not np.array_equal(a.metrics["train_loss"], before.metrics["train_loss"])
    assert len(a.metrics["train_loss"]) == exp.steps + (2 if schedule == "finetune" else 0)


def test_an_induction_run_trains_on_the_counter_batches(monkeypatch):
    exp = induction.InductionExperiment.quick(d=16, seq_len=16, batch=8, steps=3, eval_every=1, n_test=8)
    monkeypatch.setenv("COMPANION_SAMPLER", "counter")
    first = induction.first_batch(exp)
    assert torch.equal(
        first.tokens, exp.task().draw([exp.seed], [0], 8, stream=config.stream_key("train-data")).tokens[0, 0]
    )
    assert np.isfinite(induction.run(exp, progress=False, use_cache=False).metrics["acc"]).all()


def test_train_takes_a_generator_as_before():
    task = RecallTask(seq_len=8)
    model = Transformer(ModelConfig(vocab_size=task.vocab_size, d=8, max_len=8), seed=0)
    logs = train.train(
        model, task, train.TrainConfig(steps=2, batch=4), np.random.default_rng(0), progress=False
    )
    assert len(logs) == 2


def test_the_count_task_streams_both_samplers():
    """Scan and Snap's runs draw count vectors: the numpy stream gives sample_counts of the run's generator, the
    counter stream draw_counts at the step."""
    sc = synthetic(num_last=2, num_next_per_last=1)
    task = CountTask(sc, 16)
    numpy_stream = TrainingStream(2, "data", sampler="numpy")
    rng = np.random.default_rng(config.seed_streams(2, ["data"])["data"])
    for step in range(2):
        got, (cls, counts) = numpy_stream.batch(task, 5, step), sc.sample_counts(rng, 5, 16)
        assert (got.cls == cls).all() and (got.counts == counts).all()
    got = TrainingStream(2, "data", sampler="counter").batch(task, 5, 3)
    cls, counts = sc.draw_counts([2], [3], 5, 16, stream=config.stream_key("data"))
    assert torch.equal(got.cls, cls[0, 0]) and torch.equal(got.counts, counts[0, 0])


def test_the_other_families_first_batches_follow_the_sampler(monkeypatch):
    """allocation and fact_capacity draw through training streams too: under the counter sampler their first
    batch is the counter draw of (seed, "train-data", 0)."""
    key = config.stream_key("train-data")
    alloc = allocation.AllocationExperiment.quick()
    cap = fact_capacity.CapacityExperiment.quick()
    monkeypatch.setenv("COMPANION_SAMPLER", "numpy")
    before = batch_digest(allocation.first_batch(alloc)), batch_digest(fact_capacity.first_batch(cap))
    monkeypatch.setenv("COMPANION_SAMPLER", "counter")
    a = allocation.first_batch(alloc)
    assert torch.equal(
        a.tokens,
        allocation.BigramTask(alloc.seq_len).draw([alloc.seed], [0], alloc.batch, stream=key).tokens[0, 0],
    )
    c = fact_capacity.first_batch(cap)
    assert torch.equal(c.tokens, cap.task().draw([cap.seed], [0], cap.batch, stream=key).tokens[0, 0])
    assert (batch_digest(a), batch_digest(c)) != before


def test_epoch_orders_under_both_samplers():
    """The text study's shuffles: under numpy, torch.randperm from a generator seeded with the seed, one epoch
    after another (what every recording used); under counter, counter.orders of (seed, stream, epoch)."""
    legacy = torch.Generator().manual_seed(4)
    orders = EpochOrders(4, "train-order", 9, sampler="numpy")
    for epoch in range(3):
        assert torch.equal(orders.order(epoch), torch.randperm(9, generator=legacy))
    with pytest.raises(ValueError, match="epoch=5: the numpy sampler.s draws come one after another"):
        orders.order(5)
    counted = EpochOrders(4, "train-order", 9, sampler="counter")
    expect = counter.orders([4], [7], 9, stream=config.stream_key("train-order"))[0, 0]
    assert torch.equal(counted.order(7), expect) and torch.equal(counted.order(7), expect)
    with pytest.raises(ValueError, match="n"):
        EpochOrders(4, "train-order", 0)


@pytest.mark.parametrize(
    "kw",
    [
        dict(data="mixture", weights=(0.1, 0.2, 0.3, 0.4), starts="any"),
        dict(data="cumulative", levels="doubling", starts="one"),
        dict(data="mixture", starts="longer"),
        dict(data="curriculum", starts="any"),
    ],
)
def test_khop_training_batches_have_the_numpy_generators_hop_counts_and_starts(kw):
    """k-hop training data under the counter sampler: the hop counts and start tables have the distributions of
    training_hops and training_starts (numpy), stage 4 of a curriculum."""
    exp = khop.KHopExperiment(**kw, batch=4000)
    data = khop.HopTraining(exp, exp.task(), 4)
    new = data.draw([0], range(5), exp.batch, stream=7)
    ref = [data.sample(np.random.default_rng(s), exp.batch) for s in range(5)]
    n = 5 * exp.batch

    def freq(hops, tokens):  # (hop count, first table shown) frequencies
        first = 1 + (np.asarray(tokens)[:, 1:].reshape(len(hops), exp.k, exp.N)[:, :, 0] == exp.N).argmin(1)
        return np.bincount((np.asarray(hops) - 1) * exp.k + first - 1, minlength=exp.k * exp.k) / len(hops)

    a = freq(new.hops.reshape(-1), new.tokens.reshape(n, -1))
    b = freq(np.concatenate([r.hops for r in ref]), np.concatenate([r.tokens for r in ref]))
    assert np.abs(a - b).max() < 5 * np.sqrt(2 * 0.25 / n)
    assert (new.answer.reshape(-1).numpy() < exp.N).all()


def test_a_khop_run_trains_on_the_counter_batches(monkeypatch):
    exp = khop.KHopExperiment(
        data="curriculum",
        N=4,
        k=2,
        d=8,
        heads=2,
        batch=16,
        steps=6,
        eval_every=2,
        n_test=16,
        last_stage_data=1,
        advance_at=0.01,
    )
    monkeypatch.setenv("COMPANION_SAMPLER", "counter")
    first = khop.first_batch(exp)
    expect = khop.HopTraining(exp, exp.task(), 1).draw(
        [exp.seed], [0], exp.batch, stream=config.stream_key("train-data")
    )
    assert torch.equal(first.tokens, expect.tokens[0, 0])
    a, b = (khop.run(exp, progress=False, use_cache=False) for _ in range(2))
    assert np.array_equal(a["loss"], b["loss"], equal_nan=True) and a["stage"][-1] == 2


def test_the_book_seed_is_the_default_seed_of_every_run_configuration(monkeypatch):
    """COMPANION_SEED (issue 54's seed sweep): every trained family's configuration takes it as its default seed
    (so it keys the cache and draws other batches); a seed given keeps; a bad value is refused."""
    from companion.experiments import (
        allocation,
        fact_capacity,
        factual,
        induction,
        khop,
        scan_snap_text,
        three_steps,
    )

    families = [
        noisy_recall.RecallExperiment.quick,
        induction.InductionExperiment.quick,
        fact_capacity.CapacityExperiment.quick,
        fact_capacity.ScalingExperiment.quick,
        three_steps.ThreeStepExperiment.quick,
        allocation.AllocationExperiment.quick,
        khop.KHopExperiment.quick,
        scan_snap_text.TextExperiment.quick,
        factual.FactExperiment,
    ]
    exp = noisy_recall.RecallExperiment.quick(**TINY)
    assert config.book_seed() == 0 and all(make().seed == 0 for make in families)
    monkeypatch.setenv("COMPANION_SEED", "2")
    assert all(make().seed == 2 for make in families)
    assert noisy_recall.RecallExperiment.quick(**TINY, seed=5).seed == 5
    moved = noisy_recall.RecallExperiment.quick(**TINY)
    assert cache.key(moved, noisy_recall.MODULES) != cache.key(exp, noisy_recall.MODULES)
    assert not np.array_equal(noisy_recall.first_batch(moved).inputs, noisy_recall.first_batch(exp).inputs)
    for bad in ("-1", "one"):
        monkeypatch.setenv("COMPANION_SEED", bad)
        with pytest.raises(ValueError, match="COMPANION_SEED"):
            config.book_seed()
