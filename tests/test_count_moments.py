"""The exact moments of companion.theory.count_moments against simulation of the task itself."""

import itertools

import numpy as np
import pytest

from companion.report import mean_se
from companion.theory import count_moments as cm
from companion.theory import one_step as ost

N, T, ALPHA, M = 12, 40, 0.4, 200_000


@pytest.fixture(scope="module")
def sample():
    task = ost.simplified_task(N, T, ALPHA)
    b = task.sample(np.random.default_rng(7), M)
    return task, b


def _z(mc: np.ndarray, exact: float) -> float:
    mean, se = mean_se(mc)
    return abs(mean - exact) / se


def test_count_moments_match_simulation(sample):
    task, b = sample
    q, tau = task.triggers[0], task.noise_token
    z = b.inputs[:, : T - 1]  # Appendix E: z_T = q is not counted
    for lemma, (yb, k) in cm.LEMMA_E.items():
        pick = b.final_ybar == q if yb == "q" else b.final_ybar != q
        ybar = b.final_ybar[pick]
        tok = {
            "q": np.full(len(ybar), q),
            "tau": np.full(len(ybar), tau),
            "ybar": ybar,
            "k": np.where(ybar == 1, 2, 1),
        }[k]  # an ordinary token that is neither q nor ybar
        c = (z[pick] == tok[:, None]).sum(1).astype(float)
        m1, m2 = cm.count_moments(N, T, ALPHA, yb, k)
        assert _z(c, m1) < 4, (lemma, c.mean(), m1)
        assert _z(c**2, m2) < 4, (lemma, (c**2).mean(), m2)


def test_table3_exact_matches_simulation(sample):
    task, b = sample
    q, tau, j, k = task.triggers[0], task.noise_token, 1, 2
    tokens = {"tau": tau, "q": q, "o": j}
    counts = {t: (b.inputs[:, : T - 1] == t).sum(1) / T for t in (q, tau, j, k)}
    y = b.targets[:, -1]
    exact = cm.table3_exact(N, T, ALPHA)
    for label, jc, kc in cm.TABLE3_CASES:
        jt = tokens[jc]
        kt = {"tau": tau, "q": q, "o": j if jc != "o" else k, "j": j, "o2": k}[kc]
        gamma = (1 / (N + 1) - (y == jt)) * counts[kt]
        mu, s2 = exact[label]
        assert _z(gamma, mu) < 4, (label, gamma.mean(), mu)
        assert _z(gamma**2, s2 + mu**2) < 4, (label, (gamma**2).mean(), s2 + mu**2)


def test_means_agree_with_the_rederived_table():
    exact = cm.table3_exact(4000, 4000, ALPHA)
    fixed = {**ost.table3_rederived(ALPHA, 4000), **ost.lemma_d1_paper(ALPHA, 4000)}
    for label, (mu, _) in exact.items():
        assert abs(mu / fixed[label] - 1) < 0.01, label


def _brute_max(n: int, t: int, ybar: int, k: int) -> int:
    """Max count of token k in z_1..z_{t-1} over all sequences of positive probability (full chain)."""
    task = ost.simplified_task(n, t, ALPHA)
    q, tau = task.triggers[0], task.noise_token

    def allowed(a, b):
        if a == q:
            return b in (ybar, tau)
        return b != tau

    best = 0
    for seq in itertools.product(range(n + 1), repeat=t - 1):
        if seq[0] == tau or not all(allowed(a, c) for a, c in zip(seq, seq[1:])):
            continue
        best = max(best, seq.count(k))
    return best


@pytest.mark.parametrize(
    "ybar,k",
    [
        ("q", "q"),
        ("q", "tau"),
        ("q", "k"),
        ("other", "q"),
        ("other", "tau"),
        ("other", "ybar"),
        ("other", "k"),
    ],
)
def test_max_count_matches_enumeration(ybar, k):
    n, t = 4, 7
    yb = 0 if ybar == "q" else 1
    tok = {"q": 0, "tau": n, "ybar": yb, "k": 2}[k]
    assert cm.max_count(n, t, ALPHA, ybar, k) == _brute_max(n, t, yb, tok)


def test_include_last_adds_the_forced_trigger():
    m1, m2 = cm.count_moments(20, 30, ALPHA, "other", "q")
    l1, l2 = cm.count_moments(20, 30, ALPHA, "other", "q", include_last=True)
    assert l1 == pytest.approx(m1 + 1) and l2 == pytest.approx(m2 + 2 * m1 + 1)
    assert cm.count_moments(20, 30, ALPHA, "other", "tau", include_last=True) == cm.count_moments(
        20, 30, ALPHA, "other", "tau"
    )


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(N=3), "N"),
        (dict(T=2), "T"),
        (dict(alpha=1.0), "alpha"),
        (dict(alpha=0.0), "alpha"),
        (dict(ybar="x"), "ybar"),
        (dict(k="z"), "k"),
    ],
)
def test_bad_input(kwargs, match):
    args = dict(N=10, T=20, alpha=0.3, ybar="q", k="q") | kwargs
    with pytest.raises(ValueError, match=match):
        cm.count_moments(**args)
