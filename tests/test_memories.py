"""The talk, associative memories: the lemma against autograd, the one-step closed form, the Gaussian
estimate against simulation, and the study's bookkeeping."""

import numpy as np
import pytest

from companion.theory import memories as mem
from companion.theory import memories_study as ms


def test_lemma_and_one_step_match_autograd():
    checks = ms.lemma_checks(seed=3)
    assert checks["lemma"] < 1e-12 and checks["one_step"] < 1e-12


def test_orthonormal_embeddings_give_the_slides_scores_exactly():
    """With exactly orthonormal embeddings u_y^T W e_z = alpha_zy and W_1's scores are (eta/N)(1{.} - 1/N)."""
    N = 8
    E = U = np.eye(N)
    f = np.roll(np.arange(N), 1)
    alpha = np.linspace(0.5, 1.5, N)
    W = mem.memory(U, E, np.arange(N), f, alpha)
    assert np.allclose(mem.scores(W, U, E, np.arange(N))[f, np.arange(N)], alpha)
    W1 = mem.one_step(U, E, f, eta=2.0)
    S = mem.scores(W1, U, E, np.arange(N))
    expected = 2.0 / N * ((np.arange(N)[:, None] == f[None, :]) - 1.0 / N)
    assert np.allclose(S, expected)
    assert np.isclose(mem.mean_gap(W1, U, E, f) * N / 2.0, 1.0)


def test_gaussian_estimate_is_close_to_simulation():
    rng = np.random.default_rng(1)
    d, M = 64, 256
    accs = []
    for _ in range(3):
        E, U = mem.embeddings(d, M, rng), mem.embeddings(d, M, rng)
        f = rng.permutation(M)
        accs.append(mem.recall_accuracy(mem.memory(U, E, np.arange(M), f), U, E, np.arange(M), f))
    assert abs(np.mean(accs) - mem.predicted_accuracy(M, d, M)) < 0.1
    assert mem.predicted_accuracy(16, 256, 16) > 0.999 and mem.predicted_accuracy(20000, 64, 20000) < 0.01


def test_crossing_and_bad_input():
    assert ms.crossing(np.array([1, 2]), np.array([1.0, 0.95]), 0.9) == float("inf")
    assert ms.crossing(np.array([4, 8]), np.array([0.5, 0.1]), 0.9) == 4.0
    with pytest.raises(ValueError, match="d=0"):
        mem.embeddings(0, 3, np.random.default_rng(0))
