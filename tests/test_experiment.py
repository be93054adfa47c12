"""The core experiment: reproducibility, caching, and validation before work."""

import numpy as np
import pytest

from companion import claims
from companion.experiments import noisy_recall
from companion.experiments.noisy_recall import RecallExperiment

TINY = dict(d=8, seq_len=8, batch=8, steps=4, eval_every=2, dense_until=1, n_test=8, rhos=(0.0, 0.5, 1.0))


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path))


@pytest.mark.parametrize("schedule", ["noisy", "finetune"])
def test_same_seed_identical_metrics(schedule):
    exp = RecallExperiment.quick(**TINY, schedule=schedule, pretrain_steps=3)
    a = noisy_recall.run(exp, device="cpu", progress=False, use_cache=False)
    b = noisy_recall.run(exp, device="cpu", progress=False, use_cache=False)
    assert a.metrics.keys() == b.metrics.keys()
    for k in a.metrics:
        np.testing.assert_array_equal(a.metrics[k], b.metrics[k], err_msg=k)
    c = noisy_recall.run(
        RecallExperiment.quick(**TINY, schedule=schedule, pretrain_steps=3, seed=1),
        device="cpu",
        progress=False,
        use_cache=False,
    )
    assert not np.array_equal(a.metrics["train_loss"], c.metrics["train_loss"])
    assert a.metrics["clean_p_correct"].shape == (len(a.metrics["eval_step"]), 3)


def test_cache_roundtrip(tmp_path):
    exp = RecallExperiment.quick(**TINY)
    a = noisy_recall.run(exp, device="cpu", progress=False)
    files = list((tmp_path / "runs").glob("noisy_recall-*.pt"))
    assert len(files) == 1 and not list((tmp_path / "runs").glob(".part-*"))
    b = noisy_recall.run(exp, device="cpu", progress=False)
    np.testing.assert_array_equal(a.metrics["train_loss"], b.metrics["train_loss"])
    assert a.model().state_dict().keys() == b.model().state_dict().keys()
    assert exp.key() != RecallExperiment.quick(**{**TINY, "alpha": 0.3}).key()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(alpha=1.2), r"alpha=1.2 is out of range: allowed \[0.0, 1.0\)"),
        (dict(rhos=(0.5, 1.5)), r"rho=1.5 is out of range: allowed \[0.0, 1.0\]"),
        (dict(seq_len=2), r"seq_len \(T\)=2 is out of range"),
        (dict(d=0), r"d=0 is out of range"),
        (dict(batch=0), r"batch=0 is out of range"),
        (dict(ff=("mlp", "rnn")), "unknown feed-forward kind 'rnn'"),
        (dict(triggers=(99,)), r"trigger=99 is out of range"),
        (dict(profile="medium"), "unknown profile 'medium'"),
        (dict(schedule="finetune", pretrain_steps=0), r"pretrain_steps=0 is out of range"),
        (dict(truncate="F3.U_in"), r"layer=3 is out of range"),
        (dict(ff=("mlp", "linear"), truncate="F2.U_in"), "has no U_in"),
        (dict(lr=-1.0), r"lr=-1.0 is out of range"),
        (
            dict(final_trigger=False),
            r"loss_on='final' predicts after the final trigger: it needs final_trigger=True",
        ),
        (
            dict(final_trigger=False, loss_on="triggers", task_kind="ioi"),
            "synthetic IOI ends with its trigger",
        ),
        (dict(final_trigger="no", loss_on="triggers"), "final_trigger must be True or False, got 'no'"),
    ],
)
def test_bad_input_fails_before_work(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RecallExperiment.quick(**kwargs)


def test_claims_record_and_fail(tmp_path):
    r = claims.check("recall.full_noise", 0.52, quiet=True)  # criterion 0.5 ± 0.1 from data/claims.toml
    assert r["passed"] and (tmp_path / "claims" / "quick" / "recall.full_noise.json").is_file()
    with pytest.raises(AssertionError, match="does not hold"):
        claims.check("recall.full_noise", 0.9, quiet=True)
    rows = {row["claim"]: row for row in claims.results()}
    assert rows["recall.full_noise"]["category"] == claims.FAIL
    assert rows["recall.drop_f2_correct"]["category"] == claims.NOT_CHECKED
    assert rows["recall.drop_f2_correct"]["detail"] == "chapter not run"
    with pytest.raises(KeyError, match="claims.toml"):
        claims.check("no.such.claim", 1.0)


@pytest.mark.parametrize(
    "overrides",
    [
        dict(),
        dict(ff=("mlp", "linear"), truncate="F2.W_F"),
        dict(ff=("linear", "mlp", "mlp"), truncate="F3.U_in"),
    ],
)
def test_evaluator_shares_passes_exactly(overrides):
    """The evaluator reuses one forward pass per test set; the values equal separate forward passes."""
    import torch

    from companion import probes, truncation
    from companion.models import Transformer

    exp = RecallExperiment.quick(
        d=16, seq_len=12, batch=8, steps=1, n_test=32, rhos=(0.0, 0.5, 1.0), **overrides
    )
    model = Transformer(exp.model_config(), seed=3).eval()
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        # a non-trivial model: F1 and F_L both matter (seeded: the same every run)
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen))
    ev = noisy_recall.Evaluator(exp, model, torch.device("cpu"))
    row = ev(0)
    L = len(model.layers)
    with torch.no_grad():
        full = probes.final_position_metrics(model(ev.clean_tokens, last_only=True), ev.clean_correct, ev.tau)
        for l in (1, L):
            with truncation.dropped(model, l):
                drop = probes.final_position_metrics(
                    model(ev.clean_tokens, last_only=True), ev.clean_correct, ev.tau
                )
            assert drop == {
                k[len(f"clean_dropF{l}_") :]: v for k, v in row.items() if k.startswith(f"clean_dropF{l}_")
            }
        attn = probes.recall_attention(model, ev.noisy_tokens, ev.triggers, ev.tau)
    assert full == {k[len("clean_full_") :]: v for k, v in row.items() if k.startswith("clean_full_")}
    assert row["attn_to_correct"] == attn["to_correct"] and row["attn_to_noise"] == attn["to_noise"]
    assert row["clean_p_correct"][-1] == pytest.approx(full["p_correct"], abs=1e-5)  # rho = 1 (via an SVD)
    assert row["clean_dropF1_loss"] != pytest.approx(full["loss"], abs=1e-4)  # F1 does matter here


def test_public_code_sequences_train_without_a_final_trigger_and_test_with_one():
    """final_trigger=False: the training sequences are the public code's (nothing forced, every repeated
    trigger occurrence in the loss); the test sequences end with a trigger, where Fig. 3 measures."""
    exp = RecallExperiment.quick(**TINY, loss_on="triggers", noise="existing", final_trigger=False)
    train = exp.task().sample(np.random.default_rng(0), 64)
    assert train.forced is None and (train.loss_mask == (train.occurrence >= 2)).all()
    clean, noisy = exp.test_batches()
    q = exp.task().triggers[0]
    assert (clean.inputs[:, -1] == q).all() and (noisy.inputs[:, -1] == q).all()
    same = RecallExperiment.quick(**TINY, loss_on="triggers", noise="existing")
    np.testing.assert_array_equal(clean.tokens, same.test_batches()[0].tokens)  # the same test sequences
    assert exp.key() != same.key()
