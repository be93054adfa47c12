"""Theory helpers against independent computations (autograd, closed forms)."""

import numpy as np
import pytest
import torch

from companion.theory import assoc_memory as am
from companion.theory import noise_logit as nl


def _loss_two_token(beta, alpha):
    """Population loss of the two-token model written from f(i, j) directly."""
    b1, b2 = beta
    f1 = torch.stack([b1 + b2, -b1 + b2, -2 * b2])  # input 1
    f2 = torch.stack([-b1 + b2, b1 + b2, -2 * b2])  # input 2
    t1 = torch.tensor([1 - alpha, 0.0, alpha], dtype=torch.float64)
    t2 = torch.tensor([0.0, 1 - alpha, alpha], dtype=torch.float64)
    return -0.5 * ((t1 * torch.log_softmax(f1, 0)).sum() + (t2 * torch.log_softmax(f2, 0)).sum())


@pytest.mark.parametrize("beta", [(0.0, 0.0), (0.7, -0.2), (2.0, 0.5), (-1.0, 1.3)])
@pytest.mark.parametrize("alpha", [0.1, 0.3])
def test_ode_is_gradient_flow(beta, alpha):
    """Eq. (43) is -grad in beta coordinates; the W-flow divides by |B_k|^2 = 4, 12."""
    b = torch.tensor(beta, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(_loss_two_token(b, alpha), b)
    a_, b_ = -2 * beta[0], -beta[0] - 3 * beta[1]
    for flow, scale in (("beta", (1.0, 1.0)), ("W", (1 / 4, 1 / 12))):
        d_beta = -grad.numpy() * np.array(scale)
        expected = np.array([-2 * d_beta[0], -d_beta[0] - 3 * d_beta[1]])
        np.testing.assert_allclose(am.rhs_ab(0.0, np.array([a_, b_]), alpha, flow), expected, atol=1e-12)


def test_gd_on_W_tracks_W_flow_and_limits():
    gd = am.train_two_token_W(alpha=0.3, lr=0.05, steps=4000, record_every=100)
    ode = am.solve_ab(0.3, gd["t"][-1], "W", n_points=2000)
    assert np.abs(np.interp(gd["t"], ode.t, ode.beta1) - gd["beta1"]).max() < 0.01
    sol = am.solve_ab(0.3, 1e8, "beta")
    assert abs(sol.b[-1] - np.log(0.3 / 0.7)) < 1e-4
    assert abs(sol.a[-1] + np.log(sol.t[-1]) - np.log(5 / (18 * 0.7))) < 1e-3


def test_fig18_shapes_and_pure_loss_at_init():
    r = am.fig18_runs(n=3, d=6, runs=4, steps=10, record_every=5)
    assert r["loss"].shape == (3, 4, 5) and list(r["step"]) == [0, 5, 10]
    assert np.all(np.isfinite(r["loss"]))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(alpha=1.0), r"alpha=1.0 is out of range"),
        (dict(alpha=0.3, flow="Adam"), "unknown flow 'Adam'"),
        (dict(alpha=0.3, t_max=-1.0), r"t_max=-1.0 is out of range"),
    ],
)
def test_solve_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        am.solve_ab(**kwargs)


def test_fig18_bad_input():
    with pytest.raises(ValueError, match=r"d=3 is out of range"):
        am.fig18_runs(n=3, d=3)
    with pytest.raises(ValueError, match=r"rank=9 is out of range"):
        am.fig18_runs(n=3, d=8, ranks=(1, 9))


def test_noise_logit_one_step_at_log_n_against_its_closed_form():
    """study's ``one_step``: from xi = 0, one step at eta = log N gives xi_1 = log N (alpha - 1 / (N + 1)), so
    xi_hat_1 = log N (alpha - 1 / (N + 1)) - xi*; below 0 on the grid, and above 0 at N = 5, alpha = 0.1, where
    log N (1 - alpha + 1 / (N + 1)) < log((1 - alpha) / alpha)."""
    res = nl.study(Ns=(5, 10, 1000), alphas=(0.1, 0.4), steps=10, probe_steps=10)
    for (N, a), v in res["one_step"].items():
        assert v == pytest.approx(np.log(N) * (a - 1 / (N + 1)) - nl.fixed_point(a, N), rel=1e-12)
    assert res["one_step"][(5, 0.1)] > 0 > max(v for (N, _), v in res["one_step"].items() if N >= 10)


def test_noise_logit_fixed_point_is_probability_alpha():
    for a, N in [(0.2, 10), (0.4, 1000)]:
        xi = nl.fixed_point(a, N)
        assert abs(np.exp(xi) / (N + np.exp(xi)) - a) < 1e-12
    with pytest.raises(ValueError, match=r"N=0 is out of range"):
        nl.fixed_point(0.3, 0)
    with pytest.raises(ValueError, match=r"eta=-1.0 is out of range"):
        nl.iterate(0.3, 10, -1.0, 5)


def test_one_step_count_formula_equals_autograd():
    from companion.theory import one_step as ost

    task = ost.simplified_task(9, 12, 0.3)
    batch = task.sample(np.random.default_rng(3), 40)
    auto, counts = ost.autograd_first_gradients(task, batch), ost.first_gradients(task, batch)
    for k in auto:
        np.testing.assert_allclose(auto[k], counts[k], atol=1e-13)
    assert not auto["W_QK"].any()


def test_one_step_margins_scale():
    from companion.theory import one_step as ost

    r = ost.one_step_margins(30, 32, 0.4, [100, 1000], repeats=2, n_test=8, m_ref=20_000)
    assert r["ff"].shape == (2, 2, 8)
    assert abs(r["ff_ref"].mean() / 0.4 - 1) < 0.1  # eta_f alpha
    assert 1.5 < (r["attn_ref"] / r["target_attn"]).mean() < 2.2  # 2 alpha_hat / N with Eq. (2) inputs
    with pytest.raises(ValueError, match="unknown inputs"):
        ost.one_step_margins(30, 32, 0.4, [10], repeats=1, inputs="rope")


def test_table3_rederived_row9():
    from companion.theory import one_step as ost

    a, N = 0.4, 100
    assert ost.table3_paper(a, N)["[N]\\{q}, j"] < 0 < ost.table3_rederived(a, N)["[N]\\{q}, j"]


class _Replay:
    """A task whose every draw is the same batch (a Monte Carlo estimate then equals autograd on that batch)."""

    def __init__(self, task, batch):
        self.vocab_size, self.seq_len, self.triggers = task.vocab_size, task.seq_len, task.triggers
        self.alpha, self.noise_token, self.batch = task.alpha, task.noise_token, batch

    def sample(self, rng, n):
        return self.batch


def test_qk_gradient_formula_equals_autograd():
    from companion.theory import one_step as ost

    N, T, a = 7, 9, 0.4
    task = ost.simplified_task(N, T, a)
    batch = task.sample(np.random.default_rng(5), 25)
    W_F = ost.noise_ff(N, a / 2)
    W_V = np.random.default_rng(1).normal(size=(2 * (N + 1), 2 * (N + 1))) * 0.3
    model = ost.SimplifiedModel(N)
    with torch.no_grad():
        model.W_V.copy_(torch.tensor(W_V))
        model.W_F.copy_(torch.tensor(W_F))
    loss = torch.nn.functional.cross_entropy(
        model(torch.as_tensor(batch.inputs)), torch.as_tensor(batch.targets[:, -1])
    )
    loss.backward()

    mine, _ = ost.qk_gradient(
        _Replay(task, batch), W_V, W_F, 25, np.random.default_rng(0), chunk=25, rao_blackwell=False
    )
    np.testing.assert_allclose(mine, -model.W_QK.grad.numpy()[0], atol=1e-14)


def test_qk_gradient_samples_are_each_sequences_gradient_and_give_the_gap_its_own_error():
    """one_step.qk_gradient_samples: row i is -grad W_QK (row q) of sequence i's loss alone (autograd, one
    sequence at a time), and qk_gradient is their mean. Theorem 2's second-line gap in
    attention_study.phase_projections takes its standard error over the sequences' own gaps: at most the sum
    of its two terms' errors (the earlier, conservative bound), and here below it (the terms move together)."""
    from companion.theory import attention_study as ats
    from companion.theory import one_step as ost

    N, T, a, n = 6, 8, 0.4, 5
    task = ost.simplified_task(N, T, a)
    batch = task.sample(np.random.default_rng(2), n)
    W_F = ost.noise_ff(N, a / 2)
    W_V = np.random.default_rng(1).normal(size=(2 * (N + 1), 2 * (N + 1))) * 0.3
    S = ost.qk_gradient_samples(
        _Replay(task, batch), W_V, W_F, n, np.random.default_rng(0), chunk=n, rao_blackwell=False
    )
    assert S.shape == (n, 2 * (N + 1))
    for i in range(n):
        model = ost.SimplifiedModel(N)
        with torch.no_grad():
            model.W_V.copy_(torch.tensor(W_V))
            model.W_F.copy_(torch.tensor(W_F))
        one = torch.as_tensor(batch.inputs[i : i + 1])
        loss = torch.nn.functional.cross_entropy(model(one), torch.as_tensor(batch.targets[i : i + 1, -1]))
        loss.backward()
        np.testing.assert_allclose(S[i], -model.W_QK.grad.numpy()[0], atol=1e-14)
    mean, se = ost.qk_gradient(
        _Replay(task, batch), W_V, W_F, n, np.random.default_rng(0), chunk=n, rao_blackwell=False
    )
    np.testing.assert_array_equal(mean, S.mean(0))
    assert se.shape == mean.shape and (se > 0).any()

    N, T, m = 8, 64, 600
    gap, gap_se = ats.phase_projections(N, T, m, seed=0)["other_gap"]
    task = ost.simplified_task(N, T, ats.ALPHA)
    rng = np.random.default_rng([0, N, T])
    W_F = ost.noise_ff(N, ats.ALPHA)
    ost.population_value_gradient(task, W_F, m, rng)  # the same draws as phase_projections, in order
    Q, q_se = ost.qk_gradient(task, ats.eq26_value(N, q_noise=False), W_F, m, rng, chunk=2000)
    V, o = N + 1, np.arange(1, N)
    assert gap == pytest.approx(Q[V] - Q[V + o].mean(), rel=1e-12)
    assert 0 < gap_se < q_se[V] + q_se[V + o].mean()


def test_population_value_gradient_equals_autograd_on_expected_targets():
    """Eq. (25)'s Monte Carlo (one_step.population_value_gradient, -grad W_V at W_QK = W_V = 0, exact over y) is
    autograd's gradient of the cross-entropy against E[e_y | context] on the same contexts (the loss is linear in
    the target); and E[e_y | context] averages to the one-hot targets' mean over a large batch (y is drawn
    independently of the context)."""
    from companion.theory import one_step as ost

    N, T, a = 7, 9, 0.4
    task = ost.simplified_task(N, T, a)
    batch = task.sample(np.random.default_rng(3), 40)
    W_F = ost.noise_ff(N, a / 2)
    model = ost.SimplifiedModel(N)
    with torch.no_grad():
        model.W_F.copy_(torch.tensor(W_F))
    target = torch.tensor(ost.expected_target(task, batch))
    torch.nn.functional.cross_entropy(model(torch.as_tensor(batch.inputs)), target).backward()

    mine = ost.population_value_gradient(_Replay(task, batch), W_F, 40, np.random.default_rng(0), chunk=40)
    np.testing.assert_allclose(mine, -model.W_V.grad.numpy(), atol=1e-14)
    assert np.abs(mine).max() > 1e-3  # the control: the gradient is not zero
    big = task.sample(np.random.default_rng(4), 20_000)
    onehot = np.eye(task.vocab_size)[big.targets[:, -1]].mean(0)
    np.testing.assert_allclose(ost.expected_target(task, big).mean(0), onehot, atol=0.015)


def test_noise_ff_sets_the_noise_probability():
    from companion.theory import one_step as ost

    N, p = 11, 0.3
    task = ost.simplified_task(N, 8, 0.4)
    batch = task.sample(np.random.default_rng(0), 5)
    model = ost.SimplifiedModel(N)
    with torch.no_grad():
        model.W_F.copy_(torch.tensor(ost.noise_ff(N, p)))
    probs = torch.softmax(model(torch.as_tensor(batch.inputs)), -1)[:, N]
    np.testing.assert_allclose(probs.detach().numpy(), p, atol=1e-12)


def test_train_simplified_records():
    from companion.theory import one_step as ost

    r = ost.train_simplified(6, 8, 0.4, steps=3, batch=4, lr=0.5)
    assert list(r["step"]) == [0, 1, 2, 3] and r["ff_noise"][0] == 0 and r["ff_noise"][-1] > 0


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(Ns=(20,)), r"Ns=\(20,\) must be an increasing tuple"),
        (dict(Ns=(50, 20)), r"Ns=\(50, 20\)"),
        (dict(Ns=(2, 20)), r"Ns=2 is out of range"),
        (dict(ms=(10, 30, 100)), r"at least two sizes >= 100"),
        (dict(repeats=1), r"repeats=1 is out of range"),
        (dict(table_m=0), r"table_m=0"),
        (dict(profile="huge"), "huge"),
    ],
)
def test_one_step_study_refuses_bad_sizes(kwargs, match):
    from companion.theory import one_step_study as oss

    with pytest.raises(ValueError, match=match):
        oss.OneStepStudy(**kwargs)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(Ts=(256, 1024)), r"must start at T = 64"),
        (dict(dyn_Ns=(10,)), r"dyn_Ns=\(10,\)"),
        (dict(m=1), r"m=1 is out of range"),
        (dict(dyn_steps=0), r"dyn_steps=0"),
    ],
)
def test_attention_study_refuses_bad_sizes(kwargs, match):
    from companion.theory import attention_study as ats

    with pytest.raises(ValueError, match=match):
        ats.AttentionStudy(**kwargs)


def test_the_first_line_gap_adds_up_over_the_entries_of_eq26():
    """gap_parts: on the same contexts, Eq. (26)'s first-line gap is the sum of its entries' gaps (2 W_E diagonal
    + W~_E diagonal + noise row at eta t1 = eta t2 = 1) part by part, up to the softmax's response, and keeping the
    (q, N+1) entry adds that entry's gap; at N = 10 the entry's gap is negative beyond doubt, the W_E diagonal's
    positive. parts_entries reads the ratio and the slope from them; bad arguments are refused."""
    from companion.theory import attention_study as ats

    N = 10
    g = ats.gap_parts(N, 64, 16_000, 0, splits=4)
    linear = 2 * g["we_diag"] + g["prev_diag"] + g["noise_row"]
    scale = np.abs(g["eq26"]).mean()
    for dev, bound in ((g["eq26"] - linear, 0.15), (g["eq26_kept"] - g["eq26"] - g["q_noise"], 0.08)):
        assert np.abs(dev).max() < bound * scale  # linear but for the softmax's response (0.10 and 0.05 here)
        assert dev.std() < 0.05 * g["eq26"].std()  # the same in every part: the same contexts (0.007 here)
    se = g["q_noise"].std(ddof=1) / 2
    assert g["q_noise"].mean() < -5 * se and g["we_diag"].min() > 0
    s = ats.parts_entries({N: g, 2 * N: g})
    assert s["t2_entry_over_gap"][0] == pytest.approx(g["q_noise"].mean() / g["we_diag"].mean())
    assert s["t2_entry_slope"][0] == pytest.approx(0.0, abs=1e-9)  # the same gaps at both N
    eq26 = g["eq26"] * N**4
    assert s["t2_noise_z"][0] == pytest.approx(eq26.mean() / (eq26.std(ddof=1) / 2))  # 4 parts: SE = SD / 2
    assert ats.parts_table({N: g}).splitlines()[0] == "| N | " + " | ".join(g) + " |"
    with pytest.raises(ValueError, match="splits=1"):
        ats.gap_parts(N, 64, 1000, 0, splits=1)
    with pytest.raises(ValueError, match="part='diag'"):
        ats.eq26_part(N, "diag")


def test_lemma_h2_closed_form_and_its_refusals():
    """Lemma H.2's closed form against hand sums, a gap that a changed term would show, and a = 1 refused."""
    assert am.lemma_h2_sum(0.5, 3) == pytest.approx(0.5 + 2 * 0.25 + 3 * 0.125)
    assert am.lemma_h2_sum(-2.0, 2) == pytest.approx(-2 + 2 * 4)
    assert am.lemma_h2_gap() < 1e-12
    # the second term alone is not the sum: the first one matters
    assert abs(2.0**4 * 3 / (2.0 - 1) - am.lemma_h2_sum(2.0, 3)) > 1
    with pytest.raises(ValueError, match="a != 1"):
        am.lemma_h2_sum(1.0, 3)
    with pytest.raises(ValueError, match="T"):
        am.lemma_h2_sum(2.0, 0)
