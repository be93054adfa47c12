"""The counter-based samplers (issue 54): exact integer hashing, identity across blocks and packs, and the same
statistics as the numpy generators, which stay the specification."""

import dataclasses
import random

import numpy as np
import pytest
import torch

from companion.data import counter
from companion.data.facts import FactTask
from companion.data.ioi import IOITask
from companion.data.khop import KHopTask
from companion.data.recall import BigramTask, RecallTask
from companion.data.seqclass import synthetic

M32 = (1 << 32) - 1


def lowbias32(x: int) -> int:
    """A literal transcription of the lowbias32 hash on Python integers."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    return x ^ (x >> 16)


def test_mix32_is_lowbias32_on_every_kind_of_input():
    rng = random.Random(0)
    xs = [0, 1, 2, 0xFFFF, 0x10000, M32 - 1, M32] + [rng.getrandbits(32) for _ in range(20_000)]
    assert counter.mix32(torch.tensor(xs)).tolist() == [lowbias32(x) for x in xs]
    cs = [0, 1, 0xFFFF, 0x10000, M32, 0x7FEB352D, 0x846CA68B]
    for c in cs:
        assert counter._mul32(torch.tensor(xs), c).tolist() == [(x * c) & M32 for x in xs]


def test_keys_separate_every_argument_and_refuse_bad_ones():
    base = counter.keys([5], 0, [3], 1)
    assert torch.equal(base, counter.keys([5], 0, [3], 1))
    others = [
        counter.keys([6], 0, [3], 1),
        counter.keys([5 + (1 << 32)], 0, [3], 1),  # the seed's high word counts
        counter.keys([5], 1, [3], 1),
        counter.keys([5], 0, [4], 1),
        counter.keys([5], 0, [3], 2),
    ]
    assert all(not torch.equal(base, o) for o in others)
    ks = counter.keys(torch.arange(50), 0, torch.arange(2000), 1).reshape(-1, 2)
    assert len({tuple(k) for k in ks.tolist()}) == 100_000  # no two (seed, step) keys alike
    for bad in [
        dict(seeds=[-1]),
        dict(steps=[1 << 32]),
        dict(steps=[-2]),
        dict(stream=-1),
        dict(purpose=M32 + 1),
    ]:
        args = {"seeds": [0], "stream": 0, "steps": [0], "purpose": 1, **bad}
        with pytest.raises(ValueError, match=next(iter(bad)).rstrip("s")):
            counter.keys(**args)
    with pytest.raises(ValueError, match="integers"):
        counter.keys([0.5], 0, [0], 1)


def test_bits_are_uniform_and_independent_of_neighbours():
    b = counter.bits(counter.keys(torch.arange(4), 0, torch.arange(8), 1), 4096).reshape(-1)
    n = b.numel()
    assert 0 <= int(b.min()) and int(b.max()) <= M32
    top = torch.bincount(b >> 28, minlength=16).double()  # the 16 top-nibble cells, each n/16 expected
    assert float(((top - n / 16) ** 2 / (n / 16)).sum()) < 60  # chi-square, 15 degrees of freedom
    u = b.double() / 2**32
    assert abs(float(u.mean()) - 0.5) < 5 * (1 / 12 / n) ** 0.5
    assert abs(float(torch.corrcoef(torch.stack([u[:-1], u[1:]]))[0, 1])) < 5 / n**0.5


def test_thresholds_tables_and_draws_without_replacement():
    assert counter.threshold(0.0) == 0 and counter.threshold(1.0) == 1 << 32
    with pytest.raises(ValueError, match="probability"):
        counter.threshold(1.5)
    b = torch.tensor([0, 1 << 31, M32])
    assert counter.uniform_int(b, 10).tolist() == [0, 5, 9]
    cdf = counter.int_cdf(np.array([[0.5, 0.0, 0.5], [0.0, 0.0, 1.0]]))
    assert cdf.tolist() == [[1 << 31, 1 << 31, 1 << 32], [0, 0, 1 << 32]]
    flat = counter.flat_cdf(np.array([[0.5, 0.0, 0.5], [0.0, 0.0, 1.0]]))
    draws = torch.tensor([0, (1 << 31) - 1, 1 << 31, M32])
    assert counter.choose(flat, 3, torch.zeros(4, dtype=torch.int64), draws).tolist() == [0, 0, 2, 2]
    assert counter.choose(flat, 3, torch.ones(4, dtype=torch.int64), draws).tolist() == [2, 2, 2, 2]
    w = torch.as_tensor(counter.integer_weights(np.array([0.6, 0.3, 0.1])))
    picks = counter.draw_distinct(w, counter.bits(counter.keys([0], 0, [0], 9), 200_000 * 2).reshape(-1, 2))
    assert bool((picks[:, 0] != picks[:, 1]).all())
    first = torch.bincount(picks[:, 0], minlength=3).double() / len(picks)
    assert torch.allclose(first, torch.tensor([0.6, 0.3, 0.1], dtype=torch.float64), atol=0.005)
    # second draw given the first: proportional to the weights left, P(second = 1 | first = 0) = 0.3 / 0.4
    given0 = picks[picks[:, 0] == 0, 1]
    assert abs(float((given0 == 1).double().mean()) - 0.75) < 0.005
    with pytest.raises(ValueError, match="positive"):
        counter.integer_weights(np.array([0.5, 0.0]))


TASKS = {
    "paper": dict(seq_len=32, alpha=0.5),
    "public": dict(seq_len=32, alpha=0.3, noise="existing", loss_on="triggers", final_trigger=False),
    "random triggers": dict(seq_len=24, alpha=0.2, n_triggers=3, trigger_draw="unigram", loss_on="all"),
    "three steps": dict(seq_len=16, alpha=0.0, n_triggers=2, trigger_draw="unigram", loss_on="final_recall"),
}


def _same(a, b) -> bool:
    fields = ("tokens", "ybar", "final_ybar", "occurrence", "loss_mask", "triggers", "forced")
    return all(
        (getattr(a, f) is None and getattr(b, f) is None) or torch.equal(getattr(a, f), getattr(b, f))
        for f in fields
    )


@pytest.mark.parametrize("name", TASKS)
def test_a_batch_is_a_function_of_seed_stream_and_step(name):
    task = RecallTask(**TASKS[name])
    pack = task.draw([3, 5, 8], range(4), 6, stream=2)
    assert pack.tokens.shape == (3, 4, 6, task.seq_len + 1)
    alone = counter.select(task.draw([5], [2], 6, stream=2), (0, 0))
    assert _same(counter.select(pack, (1, 2)), alone)  # another pack size and another block of steps
    assert _same(
        counter.select(task.draw([3, 5, 8], range(4), 6, stream=2), (2, 3)), counter.select(pack, (2, 3))
    )  # twice
    assert not torch.equal(task.draw([5], [2], 6, stream=1).tokens, alone.tokens[None, None])
    bigram = BigramTask(seq_len=16)
    assert torch.equal(
        counter.select(bigram.draw([1, 4], [7, 9], 5), (1, 0)).tokens, bigram.draw([4], [7], 5).tokens[0, 0]
    )


def _stats(b, task) -> dict:
    """Frequencies that define the task, from a numpy batch or a counter batch flattened to (n, T + 1)."""
    z = np.asarray(b.tokens).reshape(-1, task.seq_len + 1)
    occ = np.asarray(b.occurrence).reshape(-1, task.seq_len)
    targets, inputs = z[:, 1:], z[:, :-1]
    forced = np.zeros_like(occ, dtype=bool) if b.forced is None else np.asarray(b.forced).reshape(occ.shape)
    after = (occ > 0) & ~forced
    chain = (occ == 0) & ~forced & (inputs != task.noise_token)
    pairs = np.zeros((task.vocab_size, task.vocab_size))
    np.add.at(pairs, (inputs[chain], targets[chain]), 1)
    trig = np.asarray(b.triggers).reshape(len(z), -1)
    ybar = np.asarray(b.ybar).reshape(trig.shape)
    slot = (inputs[:, -1][:, None] == trig).argmax(1)  # which trigger z_T is (forced: drawn uniformly)
    if task.final_trigger:  # final_ybar is the output of the trigger z_T
        assert (np.asarray(b.final_ybar).reshape(-1) == ybar[np.arange(len(z)), slot]).all()
    return {
        "final_slot": np.bincount(slot, minlength=trig.shape[1]) / len(z),
        "first": np.bincount(z[:, 0], minlength=task.vocab_size) / len(z),
        "pairs": pairs,
        "noise_after_trigger": float((targets[after] == task.noise_token).mean()),
        "trigger_share": float((occ > 0).mean()),
        "loss_share": float(np.asarray(b.loss_mask).mean()),
        "final_is_trigger": bool((inputs[:, -1][:, None] == trig).any(1).all()),
        "first_trigger": np.bincount(trig[:, 0], minlength=task.vocab_size) / len(z),
        "ybar": np.bincount(np.asarray(b.ybar).reshape(-1), minlength=task.n) / np.asarray(b.ybar).size,
    }


@pytest.mark.parametrize("name", TASKS)
def test_the_counter_sampler_has_the_numpy_generators_statistics(name):
    task = RecallTask(**TASKS[name])
    n_seq = 20_000
    ref = _stats(task.sample(np.random.default_rng(0), n_seq), task)
    new = _stats(task.draw([0], range(20), n_seq // 20), task)
    assert new["final_is_trigger"] == ref["final_is_trigger"] == task.final_trigger
    # five standard errors of the difference of two frequencies, counting sequences (positions within one are
    # not independent, so this is conservative)
    for key in ("noise_after_trigger", "trigger_share", "loss_share"):
        p = ref[key]
        assert abs(new[key] - p) < 5 * np.sqrt(2 * p * (1 - p) / n_seq) + 1e-12, (key, new[key], p)
    for key in ("first", "first_trigger", "final_slot"):
        assert np.abs(new[key] - ref[key]).max() < 5 * np.sqrt(2 * 0.25 / n_seq), key
    assert np.abs(new["ybar"] - 1 / task.n).max() < 5 * np.sqrt(1 / task.n / n_seq)
    # the bigram chain: each row's transition frequencies against pi_b, where a row has enough draws
    counts = new["pairs"][: task.n, : task.n]
    rows = counts.sum(1) > 2000
    freq = counts[rows] / counts[rows].sum(1, keepdims=True)
    truth = task.stats.bigram[rows]
    assert np.abs(freq - truth).max() < 5 * np.sqrt(0.25 / counts[rows].sum(1).min())
    assert (new["pairs"][: task.n, : task.n][task.stats.bigram == 0] == 0).all()  # no impossible transition


def test_the_counter_bigram_task_follows_pi_b():
    task = BigramTask(seq_len=32)
    b = task.draw([0], range(10), 1000)
    z = b.tokens.reshape(-1, 33).numpy()
    counts = np.zeros((task.vocab_size, task.vocab_size))
    np.add.at(counts, (z[:, :-1].ravel(), z[:, 1:].ravel()), 1)
    rows = counts.sum(1) > 2000
    freq = counts[rows] / counts[rows].sum(1, keepdims=True)
    assert np.abs(freq - task.stats.bigram[rows]).max() < 5 * np.sqrt(0.25 / counts[rows].sum(1).min())
    assert (counts[task.stats.bigram == 0] == 0).all()
    first = np.bincount(z[:, 0], minlength=task.vocab_size) / len(z)
    assert np.abs(first - task.stats.unigram).max() < 5 * np.sqrt(0.25 / len(z))
    assert bool(b.loss_mask.all()) and b.ybar.shape[-1] == 0


def test_draw_refuses_bad_input():
    task = RecallTask(seq_len=8)
    with pytest.raises(ValueError, match="batch"):
        task.draw([0], [0], 0)
    with pytest.raises(ValueError, match="seeds"):
        task.draw([-3], [0], 2)
    with pytest.raises(ValueError, match="stream"):
        task.draw([0], [0], 2, stream=-1)
    with pytest.raises(ValueError, match="integers"):
        FactTask().draw([1.5], [0], 2)
    with pytest.raises(ValueError, match="a seed and a step at least, got 1 and 0"):
        FactTask().draw([1], [], 2)
    with pytest.raises(ValueError, match="hop counts"):
        KHopTask(N=4, k=2).draw([0], [0], [1, 3])
    with pytest.raises(ValueError, match="starts"):
        KHopTask(N=4, k=2).draw([0], [0], [2], starts=[2])


def _fields(b) -> dict:
    """The batch's arrays by name (a field a task does not fill, None, left out)."""
    return {f.name: getattr(b, f.name) for f in dataclasses.fields(b) if getattr(b, f.name) is not None}


OTHER_TASKS = {
    "ioi": lambda seeds, steps, stream: IOITask(seq_len=16, alpha=0.3).draw(seeds, steps, 5, stream=stream),
    "facts": lambda seeds, steps, stream: FactTask(seq_len=10).draw(seeds, steps, 5, stream=stream),
    "khop": lambda seeds, steps, stream: KHopTask(N=5, k=3).draw(
        seeds, steps, [1, 3, 2, 1, 2], stream=stream
    ),
}


@pytest.mark.parametrize("name", OTHER_TASKS)
def test_every_task_draws_a_batch_as_a_function_of_seed_stream_and_step(name):
    draw = OTHER_TASKS[name]
    pack, alone = _fields(draw([3, 5, 8], range(4), 2)), _fields(draw([5], [2], 2))
    assert pack.keys() == alone.keys()
    for key, value in pack.items():
        assert value.shape[:2] == (3, 4), key
        assert torch.equal(value[1, 2], alone[key][0, 0]), key
        assert torch.equal(value, _fields(draw([3, 5, 8], range(4), 2))[key]), key
    assert not torch.equal(pack["tokens"][1, 2], _fields(draw([5], [2], 3))["tokens"][0, 0])  # another stream


def test_counter_ioi_has_the_numpy_generators_statistics():
    task = IOITask(seq_len=16, alpha=0.3)
    n_seq, T, q = 20_000, 16, task.trigger
    new = task.draw([0], range(10), n_seq // 10)
    ref = task.sample(np.random.default_rng(0), n_seq)
    z_new, z_ref = new.tokens.reshape(-1, T + 1).numpy(), ref.tokens
    for z, b in ((z_new, new), (z_ref, ref)):
        assert ((z[:, :T] == q).sum(1) == 4).all() and (z[:, T - 1] == q).all()
        ybar, yd = np.asarray(b.final_ybar).reshape(-1), np.asarray(b.distractor).reshape(-1)
        assert (ybar != yd).all() and (ybar != q).all() and (yd != q).all()
        pos = np.nonzero(z[:, : T - 1] == q)[1].reshape(-1, 3)
        assert (np.diff(pos, axis=1) >= 2).all()

    def freq(z, b) -> dict:
        """Each statistic's frequencies and the number of draws they count."""
        pos = np.nonzero(z[:, : T - 1] == q)[1].reshape(-1, 3)
        follows = z[np.arange(len(z))[:, None], pos + 1]
        ybar = np.asarray(b.final_ybar).reshape(-1)
        fill = np.ones_like(z, dtype=bool)
        fill[np.arange(len(z))[:, None], np.concatenate([pos, pos + 1], axis=1)] = False
        fill[:, T - 1 :] = False
        n = len(z)
        return {
            "first place": (np.bincount(pos[:, 0], minlength=T) / n, n),
            "last place": (np.bincount(pos[:, 2], minlength=T) / n, n),
            "which": (np.bincount((follows == ybar[:, None]).argmax(1), minlength=3) / n, n),
            "noise": (np.array([(z[:, T] == task.noise_token).mean()]), n),
            "fill": (np.bincount(z[fill], minlength=task.vocab_size) / fill.sum(), fill.sum()),
            "ybar": (np.bincount(ybar, minlength=task.vocab_size) / n, n),
            "distractor - ybar": (
                np.bincount(
                    (np.asarray(b.distractor).reshape(-1) - ybar) % task.vocab_size, minlength=task.vocab_size
                )
                / n,
                n,
            ),
        }

    a, b = freq(z_new, new), freq(z_ref, ref)
    for key, (f, n) in a.items():  # five standard errors of a difference of two frequencies
        p = min(b[key][0].max(), 0.5)
        assert np.abs(f - b[key][0]).max() < 5 * np.sqrt(2 * p * (1 - p) / n), key


def test_counter_facts_have_the_numpy_generators_statistics():
    task = FactTask(seq_len=10)
    n_seq = 20_000
    new, ref = task.draw([0], range(4), n_seq // 4), task.sample(np.random.default_rng(0), n_seq)
    tol = 5 * np.sqrt(2 * 0.25 / n_seq)
    stats = []
    for b in (new, ref):
        tokens = np.asarray(b.tokens).reshape(-1, 10)
        s, r = np.asarray(b.subject).reshape(-1), np.asarray(b.relation).reshape(-1)
        assert (np.asarray(b.answer).reshape(-1) == task.fact_table()[s, r]).all() and (
            tokens[:, -1] == task.eos
        ).all()
        ps, pr = (tokens == s[:, None]).argmax(1), (tokens == task.n_subjects + r[:, None]).argmax(1)
        assert (ps != pr).all() and (ps < 9).all() and (pr < 9).all()
        stats.append(
            [np.bincount(x, minlength=task.vocab_size) / len(x) for x in (s, r, ps, pr)]
            + [np.bincount(tokens.ravel(), minlength=task.vocab_size) / tokens.size]
        )
    for a, b in zip(*stats):
        assert np.abs(a - b).max() < tol


def test_counter_khop_tables_are_uniform_permutations_and_compose_as_the_numpy_ones():
    task = KHopTask(N=5, k=3)
    hops, starts = [1, 2, 3, 1, 2], [3, 1, 1, 1, 2]
    b = task.draw([0], range(4000), hops, starts)
    ref = task.sample(np.random.default_rng(0), hops, starts)
    assert torch.equal(b.mask[0, 0], torch.as_tensor(ref.mask))  # the layout is the numpy one
    tokens = b.tokens.reshape(-1, task.seq_len).numpy()
    sigma = tokens[:, 1:].reshape(-1, task.k, task.N)
    perms = sigma[np.tile(np.asarray(starts) == 1, 4000), 0]  # table 1 of the examples that show it
    assert (np.sort(perms, axis=1) == np.arange(task.N)).all()
    freq = np.stack([np.bincount(perms[:, a], minlength=task.N) for a in range(task.N)]) / len(perms)
    assert np.abs(freq - 1 / task.N).max() < 5 * np.sqrt(0.2 * 0.8 / len(perms))
    x = tokens[:, 0]
    assert np.abs(np.bincount(x, minlength=task.N) / len(x) - 1 / task.N).max() < 5 * np.sqrt(0.16 / len(x))
    # the answer is the composition of the tables shown, recomputed from the tokens
    pi, h, s = task.hidden(), np.tile(hops, 4000), np.tile(starts, 4000)
    v = x.copy()
    for i in range(task.k):
        use = (s <= i + 1) & (i + 1 < s + h)
        v = np.where(use, sigma[np.arange(len(v)), i, pi[i][v]], v)
    assert (v == b.answer.reshape(-1).numpy()).all()


def test_counter_sequence_classes_follow_their_probabilities():
    sc = synthetic(num_last=2, num_next_per_last=2)
    T, n_seq = 12, 40_000
    tokens, labels = sc.draw([0], range(8), n_seq // 8, T)
    tokens, labels = tokens.reshape(-1, T).numpy(), labels.reshape(-1).numpy()
    cls = np.searchsorted(sc.next_token, labels)
    assert (tokens[:, -1] == sc.last[cls]).all()
    freq = np.bincount(cls, minlength=sc.n_classes) / n_seq
    assert np.abs(freq - 1 / sc.n_classes).max() < 5 * np.sqrt(0.25 / n_seq)
    for n in range(sc.n_classes):  # the contextual tokens of class n against P(. | n)
        ctx = tokens[cls == n, :-1].ravel()
        f = np.bincount(ctx, minlength=sc.vocab_size) / len(ctx)
        assert np.abs(f - sc.probs[n]).max() < 5 * np.sqrt(0.25 / len(ctx)), n
        assert (f[sc.probs[n] == 0] == 0).all()
    same_cls, counts = sc.draw_counts([0], range(8), n_seq // 8, T)
    assert torch.equal(same_cls.reshape(-1), torch.as_tensor(cls))
    expect = np.stack([np.bincount(row, minlength=sc.vocab_size) for row in tokens[:, :-1]])
    assert (counts.reshape(-1, sc.vocab_size).numpy() == expect).all()
    pack = sc.draw([4, 9], range(3), 6, T)
    assert torch.equal(pack[0][1, 2], sc.draw([9], [2], 6, T)[0][0, 0])


def test_epoch_orders_are_uniform_permutations_of_seed_stream_and_epoch():
    o = counter.orders([0, 1], range(5000), 7).reshape(-1, 7)
    assert (np.sort(o.numpy(), axis=1) == np.arange(7)).all()
    first = np.bincount(o[:, 0].numpy(), minlength=7) / len(o)
    assert np.abs(first - 1 / 7).max() < 5 * np.sqrt(1 / 7 * 6 / 7 / len(o))
    assert torch.equal(
        counter.orders([1], [42], 7, stream=3)[0, 0], counter.orders([0, 1], [41, 42], 7, stream=3)[1, 1]
    )
    assert not torch.equal(counter.orders([1], [42], 7)[0, 0], counter.orders([1], [42], 7, stream=3)[0, 0])
    with pytest.raises(ValueError, match="examples"):
        counter.orders([0], [0], 0)


def test_no_two_kinds_of_draw_of_one_owner_share_a_purpose():
    """The draws of one owner share a run's (seed, stream, step): a purpose given to two kinds of draw would give
    them the same bits. Each owner's purposes are distinct numbers in [1, 2^32); an unknown owner or kind is
    refused before any draw."""
    for owner, kinds in counter.PURPOSES.items():
        numbers = list(kinds.values())
        assert len(set(numbers)) == len(numbers), owner
        assert all(isinstance(n, int) and 1 <= n <= counter.M32 for n in numbers), owner
    with pytest.raises(ValueError, match="unknown owner 'recal'"):
        counter.Draws("recal", [0], [0], 0, 4)
    with pytest.raises(ValueError, match="unknown recall draw 'noise'"):
        counter.Draws("recall", [0], [0], 0, 4).bits("noise", 1)
