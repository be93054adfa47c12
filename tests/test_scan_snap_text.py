"""Seed 003 on WikiText-2: the data pipeline, the tutorial model and one short run (the stand-in split)."""

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
