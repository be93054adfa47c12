"""LASER truncation against Eckart-Young and restoration guarantees."""

import numpy as np
import pytest
import torch

from companion import truncation
from companion.models import ModelConfig, Transformer


@pytest.mark.parametrize("shape", [(40, 10), (10, 40), (16, 16)])
def test_eckart_young(shape):
    g = torch.Generator().manual_seed(0)
    W = torch.randn(*shape, generator=g, dtype=torch.float64)
    lr = truncation.LowRank(W)
    s = np.linalg.svd(W.numpy(), compute_uv=False)
    errors = []
    for rho in np.linspace(0, 1, 11):
        k = truncation.rank_for(rho, shape)
        A = lr.approx(rho)
        assert np.linalg.matrix_rank(A.numpy(), tol=1e-8) == k
        err = torch.linalg.matrix_norm(W - A).item()
        np.testing.assert_allclose(err, np.sqrt((s[k:] ** 2).sum()), atol=1e-8)
        errors.append(err)
    assert all(a >= b for a, b in zip(errors, errors[1:]))  # monotone in rho
    assert torch.equal(lr.approx(1.0), W) and torch.count_nonzero(lr.approx(0.0)) == 0


def test_rank_rule():
    assert truncation.rank_for(0.05, (1024, 256)) == 12  # floor(rho * min(d_in, d_out))
    assert truncation.rank_for(1.0, (3, 5)) == 3
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"rho=.* is out of range: allowed \[0.0, 1.0\]"):
            truncation.rank_for(bad, (4, 4))


def test_weights_restored_exactly_and_one_svd(monkeypatch):
    m = Transformer(ModelConfig(vocab_size=9, d=8, max_len=6))
    before = {k: v.clone() for k, v in m.state_dict().items()}
    calls = []
    real_svd = torch.linalg.svd
    monkeypatch.setattr(torch.linalg, "svd", lambda *a, **k: calls.append(1) or real_svd(*a, **k))
    tokens = torch.randint(0, 9, (4, 6))
    outs = []
    for _ in truncation.sweep(m, "F2.U_in", [0.0, 0.25, 0.5, 1.0]):
        outs.append(m(tokens, last_only=True))
    assert len(calls) == 1
    assert all(torch.equal(v, m.state_dict()[k]) for k, v in before.items())
    assert torch.allclose(outs[-1], m(tokens, last_only=True))
    with truncation.truncated(m, "W_V^1", 0.0):
        assert torch.count_nonzero(m.matrix("W_V^1")) == 0
    assert torch.equal(m.matrix("W_V^1"), before["layers.0.W_V"])
    with pytest.raises(RuntimeError):
        with truncation.truncated(m, "F1.U_out", 0.5):
            raise RuntimeError("boom")
    assert torch.equal(m.matrix("F1.U_out"), before["layers.0.ff.U_out"])


def test_rho_zero_removes_f2():
    """rho = 0 on U_in of a bias-free MLP is the same as dropping F2."""
    m = Transformer(ModelConfig(vocab_size=9, d=8, max_len=6, ff=("mlp", "mlp")))
    tokens = torch.randint(0, 9, (4, 6))
    with truncation.truncated(m, "F2.U_in", 0.0):
        truncated = m(tokens, last_only=True)
    dropped = Transformer(ModelConfig(vocab_size=9, d=8, max_len=6, ff=("mlp", "none")))
    state = {k: v for k, v in m.state_dict().items() if not k.startswith("layers.1.ff")}
    dropped.load_state_dict(state)
    assert torch.allclose(truncated, dropped(tokens, last_only=True), atol=1e-6)
