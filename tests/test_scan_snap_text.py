"""Scan and Snap on WikiText-2: the data pipeline, the tutorial model and one short run (the stand-in
split)."""

import numpy as np
import pytest
import torch

from companion.data import sources
from companion.experiments import scan_snap_text as st


def test_model_attention_is_causal_and_normalised():
    m = st.TextModel(vocab_size=30, d=8, d_hid=8, n_layers=3, dropout=0.0, seed=1)
    logits, attn = m(torch.randint(0, 30, (2, 9)))
    assert logits.shape == (2, 9, 30)
    assert torch.all(attn.triu(diagonal=1) == 0) and torch.allclose(attn.sum(-1), torch.ones(2, 9))
    assert abs(st.attention_entropy(torch.full((1, 4), 0.25)) - np.log(4)) < 1e-6


def test_batchify_is_the_tutorial_layout():
    b = st.batchify(np.arange(23), 4)
    assert b.tolist() == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14], [15, 16, 17, 18, 19]]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"lr": 0.0}, r"lr=0.0 is out of range"),
        ({"dropout": 1.0}, r"dropout=1.0 is out of range"),
        ({"split": "test"}, "unknown split"),
        ({"vocab_size": 1}, r"vocab_size=1 is out of range"),
    ],
)
def test_bad_experiment_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        st.TextExperiment(**kwargs)


def test_line_counted_source_is_checked(tmp_path, monkeypatch):
    (tmp_path / "wikitext-2").mkdir()
    (tmp_path / "wikitext-2" / "train.txt").write_text("one line\n")
    monkeypatch.setenv("COMPANION_DATA_DIR", str(tmp_path))
    with pytest.raises(sources.DataFileError, match="1 lines, expected 36718"):
        sources.fetch("wikitext2_train", download=False)


@pytest.mark.skipif(
    not sources.available("wikitext2_valid", "wikitext2_test"),
    reason="WikiText-2 valid/test not in COMPANION_DATA_DIR",
)
def test_short_run_on_the_stand_in_split_repeats():
    c = st.corpus("valid", vocab_size=100)
    assert (
        c["splits"] == ("wikitext2_valid", "wikitext2_test")
        and len(c["itos"]) == 100
        and c["itos"][0] == "<unk>"
    )
    exp = st.TextExperiment(vocab_size=100, d=8, d_hid=8, steps=4, eval_every=2, n_eval=4)
    a = st.run(exp, progress=False, use_cache=False)
    b = st.run(exp, progress=False, use_cache=False)
    assert a["step"].tolist() == [0, 2, 4] and a["maps"].shape == (3, 35, 35) and np.isnan(a["moved"][0])
    np.testing.assert_array_equal(a["train_loss"], b["train_loss"])
    assert abs(a["loss"][0] - np.log(100)) < 0.5  # near a uniform guess at initialisation


def test_study_members_name_every_run_and_come_back_as_the_study():
    """The recordable's members are :func:`experiments`'s runs by name, and :func:`study_from_runs` puts runs of
    those names back where :func:`study` has them; runs on the validation split are a stand-in."""
    members = st.study_members("quick", "valid")
    exps = st.experiments("quick", "valid")
    assert len(members) == len(exps["fig7"]) + len(exps["fig10"])
    runs = {k: {"splits": ("wikitext2_valid", "wikitext2_test"), "exp": e} for k, e in members.items()}
    res = st.study_from_runs(runs)
    assert res["split"] == "valid" and {k: r["exp"] for k, r in res["fig7"].items()} == exps["fig7"]
    assert {k: r["exp"] for k, r in res["fig10"].items()} == exps["fig10"]
    assert "stand-in" in st.stand_in(members) and st.stand_in(st.study_members("full", "train")) == ""
    again = st.study_runs(res)
    assert list(again) == list(members) and all(again[k] is runs[k] for k in runs)


def test_the_summary_of_runs_cut_at_their_last_evaluation_is_the_summary(tmp_path, monkeypatch):
    """summary_of_runs reads the study's runs (study_runs) as summary reads the study; each run holds one value of
    each EVALUATED key per evaluation, so late_verdicts cuts them all, and a cut run moves the rows it reads."""
    from companion.experiments import late_rows, late_verdicts

    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path))
    tiny = dict(vocab_size=100, d=8, d_hid=8, steps=10, eval_every=2, n_eval=4)
    members = {
        k: e.__class__(**{**e.__dict__, **tiny}) for k, e in st.study_members("quick", "valid").items()
    }
    runs = {k: st.run(e, progress=False) for k, e in members.items()}
    res = st.study_from_runs(runs)
    whole, again = st.summary(res), st.summary_of_runs(res)(st.study_runs(res))
    same = [
        again[e] == whole[e] or (np.isnan(again[e]) and np.isnan(whole[e])) for e in whole if e != "split"
    ]
    assert list(again) == list(whole) and all(same) and again["split"] == whole["split"] == "valid"
    assert all(len(r[k]) == len(r["step"]) for r in runs.values() for k in st.EVALUATED)
    seen = late_verdicts.stopped_views(runs, st.EVALUATED)
    assert len(seen) == 2 * len(runs)  # evaluations at steps 8 and 10 form the late window of 0, 2, ..., 10
    at_each = [st.summary_of_runs(res)(v) for v in seen]
    assert any(s[e] != whole[e] for s in at_each for e in late_rows.SCAN_SNAP_TEXT.values())


@pytest.mark.skipif(
    not sources.available("wikitext2_valid", "wikitext2_test"),
    reason="WikiText-2 valid/test not in COMPANION_DATA_DIR",
)
def test_first_batch_is_the_first_window_training_reads(monkeypatch):
    """A spy on the model: the first batch it sees in training mode is :func:`first_batch`'s."""
    exp = st.TextExperiment(vocab_size=100, d=8, d_hid=8, steps=2, eval_every=2, n_eval=4)
    seen = []
    original = st.TextModel.forward

    def spy(self, tokens):
        if self.training:
            seen.append(tokens.clone())
        return original(self, tokens)

    monkeypatch.setattr(st.TextModel, "forward", spy)
    st.run(exp, progress=False, use_cache=False)
    first = st.first_batch(exp)
    assert (
        len(seen) == 2
        and np.array_equal(seen[0].numpy(), first["x"])
        and first["y"].shape == first["x"].shape
    )
    assert np.array_equal(first["y"][:, :-1], first["x"][:, 1:])
