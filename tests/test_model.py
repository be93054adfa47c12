"""The forward pass against a literal, per-position implementation of Eq. (1)."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from companion.models import ModelConfig, Transformer


def literal_forward(m: Transformer, z: list[int]) -> np.ndarray:
    """Eq. (1) written one position and one sum at a time (float64 numpy)."""
    P = lambda t: m.P[t].double().numpy()  # noqa: E731
    WE = lambda i: m.W_E[i].double().numpy()  # noqa: E731
    c = 1 / math.sqrt(m.cfg.d) if m.cfg.attn_scale == "sqrt_d" else 1.0
    xs = [WE(zt) + P(t) for t, zt in enumerate(z)]
    for layer in m.layers:
        WQK, WV = layer.W_QK.detach().double().numpy(), layer.W_V.detach().double().numpy()

        def F(u):
            if layer.ff.kind == "mlp":
                Ui, Uo = layer.ff.U_in.detach().double().numpy(), layer.ff.U_out.detach().double().numpy()
                return Uo @ np.maximum(Ui @ u, 0)
            if layer.ff.kind == "linear":
                return layer.ff.W_F.detach().double().numpy() @ u
            return np.zeros_like(u)

        new = []
        for t in range(len(z)):
            scores = np.array([c * xs[t] @ WQK @ xs[s] for s in range(t + 1)])
            w = np.exp(scores - scores.max())
            w /= w.sum()
            h = sum(w[s] * (WV @ xs[s]) for s in range(t + 1))
            u = xs[t] + h
            new.append(u + F(u))
        xs = new
    WU = m.W_U.double().numpy()
    return np.stack([WU @ x for x in xs])


@pytest.mark.parametrize(
    "ff", [("mlp", "mlp"), ("linear", "mlp"), ("none", "linear"), ("mlp",), ("mlp", "none", "linear")]
)
@pytest.mark.parametrize("scale", ["sqrt_d", "none"])
def test_forward_matches_literal_equation(ff, scale):
    m = Transformer(ModelConfig(vocab_size=11, d=12, max_len=9, ff=ff, attn_scale=scale), seed=3)
    with torch.no_grad():  # give every learnable matrix some size
        for p in m.parameters():
            p.mul_(2.0)
    z = [3, 1, 4, 1, 5, 9, 2, 6, 5]
    expected = literal_forward(m, z)
    got = m(torch.tensor([z])).detach().double().numpy()[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    last = m(torch.tensor([z]), last_only=True).detach().double().numpy()[0]
    np.testing.assert_allclose(last, expected[-1], rtol=1e-4, atol=1e-4)
    some = m(torch.tensor([z]), positions=torch.tensor([[0, 4, 8, 4]])).detach().double().numpy()[0]
    np.testing.assert_allclose(some, expected[[0, 4, 8, 4]], rtol=1e-4, atol=1e-4)


def test_positions_bad_input():
    m = Transformer(ModelConfig(vocab_size=11, d=12, max_len=9))
    z = torch.zeros(2, 9, dtype=torch.long)
    with pytest.raises(ValueError, match=r"positions must lie in \[0, 8\]; got \[0, 9\]"):
        m(z, positions=torch.tensor([[0, 9], [1, 2]]))
    with pytest.raises(ValueError, match="either last_only or positions"):
        m(z, last_only=True, positions=torch.tensor([[0], [1]]))


@pytest.mark.parametrize("loss_on", ["triggers", "all", "final"])
def test_batch_loss_sparse_path_matches_the_dense_loss_and_gradients(loss_on):
    from companion.data.recall import RecallTask
    from companion.train import batch_loss

    task = RecallTask(seq_len=32, alpha=0.5, loss_on=loss_on)
    m = Transformer(ModelConfig(task.vocab_size, d=16, max_len=32), seed=1)
    b = task.sample(np.random.default_rng(0), 16)
    mask = torch.as_tensor(b.loss_mask)
    dense = torch.nn.functional.cross_entropy(
        m(torch.as_tensor(b.inputs))[mask], torch.as_tensor(b.targets)[mask], reduction="sum"
    )
    g_dense = torch.autograd.grad(dense, list(m.parameters()))
    loss = batch_loss(m, b, "cpu", reduction="sum")
    g = torch.autograd.grad(loss, list(m.parameters()))
    assert torch.allclose(loss, dense, rtol=1e-5)
    assert all(torch.allclose(a, c, rtol=1e-4, atol=1e-6) for a, c in zip(g, g_dense))


def test_frozen_embeddings_and_names():
    m = Transformer(ModelConfig(vocab_size=7, d=8, max_len=5, ff=("linear", "mlp")))
    learnable = {n for n, p in m.named_parameters()}
    assert not any(n.startswith(("W_E", "W_U", "P")) for n in learnable)
    assert m.matrix_names() == ["W_QK^1", "W_V^1", "F1.W_F", "W_QK^2", "W_V^2", "F2.U_in", "F2.U_out"]
    assert m.matrix("F2.U_in") is m.layers[1].ff.U_in
    with pytest.raises(ValueError, match="layer=3 is out of range"):
        m.matrix("W_V^3")
    with pytest.raises(ValueError, match="has no U_in"):
        m.matrix("F1.U_in")
    with pytest.raises(ValueError, match="unknown matrix name"):
        m.matrix("W_X^1")
    with pytest.raises(ValueError, match="value map is one matrix W_V"):
        m.matrix("W_O^1")


def test_value_out_is_the_public_codes_value_map_and_keeps_the_other_matrices():
    """``value_out``: every layer's value map is W_O W_V (Birth's public code), W_O drawn from a stream of its
    own, so the model's other matrices equal those of the model without it at the same seed."""
    cfg = ModelConfig(vocab_size=7, d=8, max_len=5, ff=("none", "none"))
    plain = Transformer(cfg, seed=4)
    m = Transformer(dataclasses.replace(cfg, value_out=True), seed=4)
    assert m.matrix_names() == ["W_QK^1", "W_V^1", "W_O^1", "W_QK^2", "W_V^2", "W_O^2"]
    for name, t in plain.state_dict().items():
        assert torch.equal(m.state_dict()[name], t)
    assert not torch.equal(m.matrix("W_O^1"), m.matrix("W_O^2"))
    assert torch.equal(m.layers[1].v(), m.matrix("W_O^2") @ m.matrix("W_V^2"))
    tokens = torch.randint(0, 7, (3, 5))
    with torch.no_grad():
        for mine, theirs in zip(plain.layers, m.layers):  # the plain model with W_V := W_O W_V: same logits
            mine.W_V.copy_(theirs.v())
        assert torch.allclose(plain(tokens), m(tokens), atol=1e-6)
    assert m.cfg.n_params()["attention"] == 2 * 3 * 8 * 8
    with pytest.raises(ValueError, match="already has its W_O"):
        ModelConfig(vocab_size=7, d=8, attn_rank=4, value_out=True)


def test_same_seed_same_init():
    a = Transformer(ModelConfig(vocab_size=7, d=8, max_len=5), seed=1).state_dict()
    b = Transformer(ModelConfig(vocab_size=7, d=8, max_len=5), seed=1).state_dict()
    c = Transformer(ModelConfig(vocab_size=7, d=8, max_len=5), seed=2).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["W_E"], c["W_E"])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(d=0), r"d=0 is out of range"),
        (dict(ff=("mlp", "conv")), "unknown feed-forward kind 'conv'"),
        (dict(ff=()), "L >= 1"),
        (dict(attn_scale="half"), "unknown attn_scale"),
    ],
)
def test_bad_model_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(vocab_size=5, **kwargs)


def test_matching_logits_against_explicit_products():
    from companion import probes

    m = Transformer(ModelConfig(vocab_size=6, d=5, max_len=4), seed=2)
    M = probes.matching_logits(m, layer=2)
    with torch.no_grad():
        for i in range(6):
            for j in range(6):
                key = m.layers[0].W_V @ m.W_E[i]
                expected = (m.W_E[j] @ m.layers[1].W_QK @ key).item()
                assert abs(M[i, j] - expected) < 1e-5


def test_dropping_a_feed_forward_layer_is_restored():
    from companion import truncation

    m = Transformer(ModelConfig(vocab_size=6, d=5, max_len=4, ff=("linear", "mlp")), seed=2)
    tokens = torch.randint(0, 6, (3, 4))
    before = m(tokens)
    with truncation.dropped(m, 1):
        assert not torch.allclose(m(tokens), before)
        assert torch.count_nonzero(m.matrix("F1.W_F")) == 0
    assert torch.equal(m(tokens), before)
    with pytest.raises(ValueError, match="layer=3 is out of range"):
        with truncation.dropped(m, 3):
            pass
