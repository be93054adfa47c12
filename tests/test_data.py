"""The task generator against its specification (main paper, Section 3)."""

import dataclasses
import os

import numpy as np
import pytest

from companion import config
from companion.data import sources
from companion.data.recall import RecallTask
from companion.data.shakespeare import derive_counts, load_char_stats


def test_counts_match_the_original_text():
    """The committed counts are exactly those of the verified original file."""
    try:
        path = sources.fetch("tinyshakespeare", download=False)
    except sources.DataFileError:
        if os.environ.get("CI"):
            raise
        pytest.skip("tiny Shakespeare not available locally (set COMPANION_DATA_DIR)")
    counts = derive_counts(path.read_text(encoding="utf-8"))
    stats = load_char_stats()
    assert counts["vocab"] == stats.itos and len(stats.itos) == 65
    uni = np.asarray(counts["unigram"], float)
    np.testing.assert_allclose(stats.unigram, uni / uni.sum())


def test_missing_and_corrupt_files_give_clear_messages(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPANION_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(sources.DataFileError, match="looked in: .*tinyshakespeare/input.txt"):
        sources.fetch("tinyshakespeare", download=False)
    bad = tmp_path / "tinyshakespeare" / "input.txt"
    bad.parent.mkdir()
    bad.write_text("not shakespeare")
    with pytest.raises(sources.DataFileError, match="corrupt: sha256"):
        sources.fetch("tinyshakespeare", download=False)
    with pytest.raises(ValueError, match="unknown data source"):
        sources.fetch("nope")
    with pytest.raises(sources.DataFileError, match="missing"):
        load_char_stats(tmp_path / "absent.json")


def test_a_missing_file_is_downloaded_checked_and_cached(tmp_path, monkeypatch):
    """The path of a reader without the data folder, which no other test takes: each source this machine holds,
    served from a file:// URL in place of its canonical one with the bytes that URL serves (the GPT-2 merges
    without the header the loader adds), is downloaded into the cache, checked, and found there next time; a
    download that differs is refused and nothing is kept."""
    held = {n: sources.fetch(n, download=False).read_bytes() for n in sources.SOURCES if sources.available(n)}
    assert {"tinyshakespeare", "gsm8k_test", "gpt2_merges"} <= set(held)
    monkeypatch.setenv("COMPANION_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path / "cache"))
    downloads = tmp_path / "cache" / "downloads"
    for name, data in held.items():
        src = sources.SOURCES[name]
        upstream = tmp_path / "served" / src.relpath
        upstream.parent.mkdir(parents=True, exist_ok=True)
        upstream.write_bytes(data.removeprefix(src.prefix))
        monkeypatch.setitem(sources.SOURCES, name, dataclasses.replace(src, url=upstream.as_uri()))
        with pytest.raises(sources.DataFileError, match="downloading is disabled"):
            sources.fetch(name, download=False)
        path = sources.fetch(name)
        assert path == downloads / src.relpath and path.read_bytes() == data
        upstream.unlink()
        assert sources.fetch(name) == path  # from the cache: the URL serves nothing now
    src = sources.SOURCES["tinyshakespeare"]
    (downloads / src.relpath).unlink()
    wrong = tmp_path / "served" / "wrong.txt"
    wrong.write_text("not shakespeare")
    monkeypatch.setitem(sources.SOURCES, "tinyshakespeare", dataclasses.replace(src, url=wrong.as_uri()))
    with pytest.raises(sources.DataFileError, match="does not match: sha256"):
        sources.fetch("tinyshakespeare")
    assert not (downloads / src.relpath).exists()


def test_sequence_structure():
    task = RecallTask(seq_len=32, alpha=0.3)
    b = task.sample(np.random.default_rng(1), 200)
    q, tau = task.triggers[0], task.noise_token
    assert q == 1 and tau == 65 and task.vocab_size == 66  # space; new token N+1
    assert (b.inputs[:, -1] == q).all()  # z_T = q
    assert b.inputs.max() <= tau and b.inputs.min() >= 0
    assert ((b.targets[:, -1] == b.final_ybar) | (b.targets[:, -1] == tau)).all()
    # after q: ybar or tau, nothing else (except z_T, which is set to q)
    pairs = np.ones(b.tokens[:, 1:].shape, bool)
    pairs[:, -2] = False  # the transition into z_T
    hit = (b.tokens[:, :-1] == q) & pairs
    after = b.tokens[:, 1:][hit]
    ybar_rep = np.broadcast_to(b.ybar[:, :1], b.tokens[:, 1:].shape)[hit]
    assert ((after == tau) | (after == ybar_rep)).all()
    assert b.loss_mask[:, -1].all() and b.loss_mask.sum() == 200  # paper: final position only


def test_statistics_match_the_specification():
    """Empirical noise rate, ybar distribution and bigram transitions vs the model."""
    alpha = 0.4
    task = RecallTask(seq_len=128, alpha=alpha)
    b = task.sample(np.random.default_rng(2), 2000)
    z, q, tau, n = b.tokens, task.triggers[0], task.noise_token, task.n
    after_q = z[:, 1:][z[:, :-1] == q]
    k = len(after_q)
    assert abs((after_q == tau).mean() - alpha) < 4 * np.sqrt(alpha * (1 - alpha) / k)
    counts = np.bincount(b.ybar[:, 0], minlength=n)
    chi2 = ((counts - 2000 / n) ** 2 / (2000 / n)).sum()
    assert chi2 < n + 6 * np.sqrt(2 * n)  # uniform ybar
    # transitions from an ordinary, non-trigger character follow pi_b
    cur, nxt = z[:, :-2].ravel(), z[:, 1:-1].ravel()
    e = task.stats.itos.index("e")
    emp = np.bincount(nxt[cur == e], minlength=task.vocab_size)[:n]
    expected = task.stats.bigram[e] * emp.sum()
    keep = expected > 5
    chi2 = ((emp[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    assert chi2 < keep.sum() + 6 * np.sqrt(2 * keep.sum())
    # after tau (a new token) the chain restarts from the unigram distribution
    after_tau = z[:, 1:-1][z[:, :-2] == tau]
    assert abs((after_tau == q).mean() - task.stats.unigram[q]) < 0.02


def test_public_code_options_and_several_triggers():
    task = RecallTask(seq_len=64, alpha=0.5, n_triggers=3, noise="existing", loss_on="triggers")
    assert task.noise_token == task.stats.itos.index("!") and task.vocab_size == 65
    assert len(task.triggers) == 3
    b = task.sample(np.random.default_rng(3), 50)
    assert np.isin(b.inputs[:, -1], task.triggers).all()
    np.testing.assert_array_equal(b.loss_mask, b.recall_positions)  # the public code's loss positions ...
    # ... never the forced transition
    assert (b.occurrence[:, -2] >= 2).any() and not b.loss_mask[:, -2].any()
    public = dataclasses.replace(task, final_trigger=False).sample(np.random.default_rng(3), 50)
    np.testing.assert_array_equal(public.loss_mask, public.occurrence >= 2)  # without one, every occurrence
    for i in range(50):  # each trigger is followed by its own ybar or the noise
        for k, qk in enumerate(task.triggers):
            nxt = np.delete(b.tokens[i, 1:], -2)[np.delete(b.tokens[i, :-1], -2) == qk]
            assert np.isin(nxt, [b.ybar[i, k], task.noise_token]).all()


def test_same_seed_same_data():
    task = RecallTask(seq_len=16)
    a = task.sample(np.random.default_rng(7), 8).tokens
    b = task.sample(np.random.default_rng(7), 8).tokens
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(alpha=1.0), r"alpha=1.0 is out of range: allowed \[0.0, 1.0\)"),
        (dict(alpha=-0.1), "alpha"),
        (dict(seq_len=3), r"seq_len \(T\)=3 is out of range"),
        (dict(triggers=(70,)), r"trigger=70 is out of range: allowed \[0, 64\]"),
        (dict(triggers=(1, 1)), "duplicates"),
        (dict(noise="weird"), "unknown noise kind 'weird'"),
        (dict(loss_on="every"), "unknown loss_on"),
        (dict(noise="existing", triggers=(2,)), "is the noise token"),
        (dict(trigger_draw="random"), "unknown trigger_draw 'random'"),
        (
            dict(trigger_draw="unigram", n_triggers=66),
            r"n_triggers \(K, drawn per sequence\)=66 is out of range: allowed \[1, 65\]",
        ),
        (dict(trigger_draw="unigram", triggers=(1, 3), n_triggers=3), r"allowed \[1, 2\]"),
        (dict(trigger_draw="unigram", triggers=(1, 1)), "duplicates"),
        (dict(trigger_draw="unigram", noise="existing", triggers=(1, 2)), "is the noise token"),
    ],
)
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RecallTask(**kwargs)


def test_profile_validation(monkeypatch):
    monkeypatch.setenv("COMPANION_PROFILE", "huge")
    with pytest.raises(ValueError, match="unknown profile 'huge': allowed profiles are quick, full"):
        config.get_profile()


def test_random_triggers_change_per_sequence_and_keep_their_outputs():
    task = RecallTask(
        seq_len=64, alpha=0.0, n_triggers=3, noise="existing", loss_on="all", trigger_draw="unigram"
    )
    assert task.triggers == tuple(range(task.n))  # the pool: every ordinary token (no noise is ever drawn)
    assert (
        task.fixed_triggers == ()
        and RecallTask(n_triggers=2).fixed_triggers == RecallTask(n_triggers=2).triggers
    )
    T, b = task.seq_len, task.sample(np.random.default_rng(0), 200)
    assert b.triggers.shape == (200, 3) and all(len(set(r)) == 3 for r in b.triggers)
    assert len({tuple(r) for r in b.triggers}) > 100  # drawn afresh for each sequence
    space = task.triggers[int(np.argmax(task.stats.unigram))]
    assert (b.triggers == space).any(1).mean() > 0.3  # drawn from pi_u: the space is in most rows
    for i in range(200):
        z = b.tokens[i]
        assert z[T - 1] in b.triggers[i]  # the final input is one of the sequence's triggers
        for k, q in enumerate(b.triggers[i]):
            t = np.flatnonzero(z[:T] == q)
            t = t[t != T - 2]  # the transition into z_T is forced to the final trigger
            assert (z[t + 1] == b.ybar[i, k]).all()
        repeated = b.inputs[i][b.occurrence[i] >= 2]
        assert np.isin(repeated, b.triggers[i]).all()
    noisy = RecallTask(alpha=0.5, noise="existing", trigger_draw="unigram")
    assert noisy.noise_token not in noisy.triggers and len(noisy.triggers) == noisy.n - 1
    fixed = RecallTask(seq_len=16, n_triggers=2).sample(np.random.default_rng(0), 3)
    assert (fixed.triggers == np.array(RecallTask(n_triggers=2).triggers)).all()


def _trigger_outputs(b) -> np.ndarray:
    """(batch, T): the output of the trigger each input position holds, -1 where it holds none."""
    output = np.full(b.inputs.shape, -1)
    for k in range(b.triggers.shape[1]):
        output = np.where(b.inputs == b.triggers[:, k : k + 1], b.ybar[:, k : k + 1], output)
    return output


def test_recall_and_bigram_positions_leave_out_the_forced_transition():
    """The final input is forced to be a trigger, so the target of the position before it is that trigger:
    not the output of a trigger there, nor a bigram draw. The recall and bigram positions leave it out."""
    task = RecallTask(
        seq_len=64, alpha=0.0, n_triggers=3, noise="existing", loss_on="all", trigger_draw="unigram"
    )
    T, b = task.seq_len, task.sample(np.random.default_rng(0), 400)
    assert b.forced.sum() == 400 and b.forced[:, T - 2].all()
    output = _trigger_outputs(b)
    wrong = (b.occurrence >= 2) & (b.targets != output)
    assert wrong.any() and (np.nonzero(wrong)[1] == T - 2).all()  # it happens, and only there
    assert (b.targets[b.recall_positions] == output[b.recall_positions]).all()
    assert b.recall_positions.sum() == ((b.occurrence >= 2) & ~b.forced).sum()
    big = task.stats.bigram
    assert (big[b.inputs[b.bigram_positions], b.targets[b.bigram_positions]] > 0).all()
    assert (big[b.inputs[:, T - 2], b.targets[:, T - 2]] == 0).any()  # the forced transition need not be one
    assert b.bigram_positions.sum() == ((b.occurrence == 0) & ~b.forced).sum()


def test_without_a_final_trigger_every_trigger_is_followed_by_its_output():
    """final_trigger=False (the Birth public code): the last input follows the chain, nothing is forced."""
    task = RecallTask(
        seq_len=64,
        alpha=0.0,
        n_triggers=3,
        noise="existing",
        loss_on="all",
        trigger_draw="unigram",
        final_trigger=False,
    )
    T, b = task.seq_len, task.sample(np.random.default_rng(0), 400)
    assert b.forced is None
    output = _trigger_outputs(b)
    held = output >= 0
    assert (b.targets[held] == output[held]).all()  # T - 2 included
    assert not np.isin(b.inputs[:, -1], b.triggers).all()  # the last input is not always a trigger
    assert (b.recall_positions == (b.occurrence >= 2)).all()
    big = task.stats.bigram
    assert (big[b.inputs[b.bigram_positions], b.targets[b.bigram_positions]] > 0).all()
    same = RecallTask(
        seq_len=64, alpha=0.0, n_triggers=3, noise="existing", loss_on="all", trigger_draw="unigram"
    )
    forced = same.sample(np.random.default_rng(0), 400)  # the same draws: only the forced transition differs
    assert (forced.tokens[:, : T - 1] == b.tokens[:, : T - 1]).all()
    for loss_on in ("final", "final_recall"):
        with pytest.raises(
            ValueError,
            match=f"loss_on='{loss_on}' predicts after the final trigger: it needs final_trigger=True",
        ):
            RecallTask(loss_on=loss_on, final_trigger=False)
    with pytest.raises(ValueError, match="final_trigger must be True or False, got 1"):
        RecallTask(final_trigger=1)
