"""Scan and Snap: sequence classes, the Y/Z model, its batched training and the theory's closed forms."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from companion.data.seqclass import SeqClasses, synthetic
from companion.experiments import scan_snap as ss
from companion.theory import scan_snap as th
from companion.theory import scan_snap_dynamics as ssd

# --- sequence classes -----------------------------------------------------------------------------------


def test_synthetic_layout_matches_the_public_code():
    small = synthetic(2, 1)
    assert small.vocab_size == 34 and small.n_classes == 2
    assert small.last.tolist() == [30, 31] and small.next_token.tolist() == [32, 33]
    np.testing.assert_allclose(small.probs[0, :10], 1 / 15.5)
    np.testing.assert_allclose(small.probs[0, 10:20], np.linspace(0.1, 1, 10) / 15.5)
    assert small.distinct_tokens(1).tolist() == list(range(20, 30))
    medium = synthetic(10, 2)
    assert medium.n_classes == 20 and medium.vocab_size == 10 + 200 + 10 + 20
    assert (medium.last[::2] == medium.last[1::2]).all()  # two classes per last token


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"probs": [[0.5, 0.6, 0.0]]}, "sums to"),
        ({"probs": [[1.2, -0.2, 0.0]]}, "out of range"),
        ({"last": [0, 3]}, "last=3 is out of range"),
        ({"distinct": ((0,), (0,))}, "distinct for two classes"),
        ({"distinct": ((1,), ())}, "declared distinct for class 0 but class 1 uses it"),
    ],
)
def test_bad_classes_are_refused(kwargs, match):
    base = {
        "probs": [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]],
        "last": [0, 0],
        "next_token": [1, 2],
        "vocab_size": 3,
    }
    if "probs" in kwargs and len(kwargs["probs"]) == 1:
        base.update(last=[0], next_token=[1])
    with pytest.raises(ValueError, match=match):
        SeqClasses(**{**base, **kwargs})


def test_more_classes_than_tokens_is_refused():
    with pytest.raises(ValueError, match=r"K=3 is out of range: allowed \[1, M\] = \[1, 2\]"):
        SeqClasses(np.full((3, 2), 0.5), [0, 0, 0], [0, 1, 1], 2)


def test_counts_and_sequences_have_the_same_distribution():
    sc = synthetic(2, 1)
    rng = np.random.default_rng(0)
    tokens, labels = sc.sample(rng, 4000, 33)
    cls, counts = sc.sample_counts(np.random.default_rng(1), 4000, 33)
    assert (tokens[:, -1] == sc.last[labels - sc.next_token[0]]).all()
    for n in range(2):
        seq_freq = np.bincount(tokens[labels == sc.next_token[n], :-1].ravel(), minlength=34) / (
            32 * (labels == sc.next_token[n]).sum()
        )
        cnt_freq = counts[cls == n].sum(0) / counts[cls == n].sum()
        np.testing.assert_allclose(seq_freq, sc.probs[n], atol=0.004)
        np.testing.assert_allclose(cnt_freq, sc.probs[n], atol=0.004)


# --- the model ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("normalize, residual", [(True, False), (False, False), (True, True)])
def test_counts_forward_equals_attention_over_positions(normalize, residual):
    sc = synthetic(3, 2)
    g = torch.Generator().manual_seed(0)
    M = sc.vocab_size
    Y, Z = (
        torch.randn(M, M, generator=g, dtype=torch.float64),
        torch.randn(M, M, generator=g, dtype=torch.float64),
    )
    tokens, _ = sc.sample(np.random.default_rng(0), 16, 40)
    counts = np.stack([np.bincount(t[:-1], minlength=M) for t in tokens])
    t = torch.as_tensor(tokens)
    a = ss.forward(
        Y[None],
        Z[None],
        t[None, :, -1],
        torch.as_tensor(counts, dtype=torch.float64)[None],
        normalize,
        residual,
    )[0]
    b = ss.forward_positions(Y, Z, t, normalize, residual)
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_population_attention_is_eq5():
    sc = synthetic(2, 1)
    Z = torch.randn(1, 34, 34, dtype=torch.float64)
    c = ss.population_c(Z, sc)[0]
    for n in range(2):
        w = sc.probs[n] * np.exp(Z[0, sc.last[n]].numpy())
        np.testing.assert_allclose(c[n].numpy(), w / w.sum(), rtol=1e-12)
    assert abs(ss.distinct_entropy(ss.population_c(torch.zeros(1, 34, 34), sc), sc)[0, 0] - 2.151) < 1e-3


def test_lemma1_matches_autograd():
    assert ssd.lemma1_gap(M=9, T=15, seed=3) < 1e-12


# --- training ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_stacked_optimiser_matches_torch(kind):
    g = torch.Generator().manual_seed(0)
    target = torch.randn(2, 5, 5, generator=g)
    p = torch.zeros(2, 5, 5, requires_grad=True)
    refs = [torch.zeros(5, 5, requires_grad=True) for _ in range(2)]
    lrs = [0.1, 0.3]
    mine = ss._Optim(kind, [p], [torch.tensor(lrs)[:, None, None]], 0.9)
    theirs = [
        torch.optim.SGD([r], lr=lr, momentum=0.9) if kind == "sgd" else torch.optim.Adam([r], lr=lr)
        for r, lr in zip(refs, lrs)
    ]
    for _ in range(5):
        ((p - target) ** 3).abs().sum().backward()
        mine.step()
        for r, o, tg in zip(refs, theirs, target):
            o.zero_grad()
            ((r - tg) ** 3).abs().sum().backward()
            o.step()
    for i in range(2):
        torch.testing.assert_close(p.detach()[i], refs[i].detach(), rtol=1e-5, atol=1e-6)


def test_replicas_train_as_if_alone_and_runs_repeat():
    base = ss.SynExperiment(steps=12, seeds=(3,), lr_z=(0.5, 2.0), record_every=4)
    both = ss.run(base, progress=False, use_cache=False)
    alone = ss.run(replace(base, lr_z=(2.0,)), progress=False, use_cache=False)
    np.testing.assert_allclose(both["loss"][1], alone["loss"][0], rtol=1e-4)
    again = ss.run(base, progress=False, use_cache=False)
    np.testing.assert_array_equal(both["loss"], again["loss"])
    assert both["c_step"].tolist() == [0, 4, 8, 12] and both["c"].shape == (4, 2, 2, 34)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"lr_z": (-1.0,)}, r"lr_z \(eta_Z\)=-1.0 is out of range"),
        ({"lr_ratio": (0.0,)}, r"eta_Y / eta_Z\)=0.0 is out of range"),
        ({"optimizer": "rmsprop"}, "unknown optimizer"),
        ({"classes": {"num_last": 0}}, "num_last=0 is out of range"),
        ({"seeds": ()}, "non-empty tuple"),
    ],
)
def test_bad_experiment_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ss.SynExperiment(**kwargs)


def test_theorem_measures_on_constructed_trajectories():
    sc = synthetic(2, 1, num_common=1)
    z = np.zeros((5, 2, sc.vocab_size))
    assert ssd.theorem3_deviation(sc, z) == 0.0  # nothing moves: r(t) = r(0), chi = 1
    for n in range(2):
        z[:, n, sc.distinct_tokens(n)] = np.arange(5)[:, None] * 0.1
        z[:, n, sc.common_tokens()] = -np.arange(5)[:, None] * 0.1
    assert ssd.theorem2_signs(sc, z) == {"distinct_up": 1.0, "common_down": 1.0}
    # equal growth of all distinct logits keeps every ratio, so r(t) = r(0) while chi_l(t) > 1: a deviation
    assert ssd.theorem3_deviation(sc, z) > 0.1
    # from Z(0) = 0 the printed chi_l (z_l'(0)) is the appendix's (z_l(0)); from another start it is off at t = 0
    assert ssd.theorem3_deviation(sc, z, form="printed") == ssd.theorem3_deviation(sc, z)
    z0 = np.zeros((1, 2, sc.vocab_size))
    z0[0, 0, sc.distinct_tokens(0)[0]] = 0.5  # one distinct logit starts higher: r(0) changes, nothing moves
    assert ssd.theorem3_deviation(sc, z0) == 0.0
    assert ssd.theorem3_deviation(sc, z0, form="printed") == pytest.approx(np.exp(2 * 0.5) - 1)


def test_population_run_lowers_the_loss():
    r = ssd.population_run(synthetic(2, 1, num_common=1), 1.0, 0.1, 50)
    assert r["loss"][-1] < r["loss"][0] and r["z"].shape == (51, 2, 25)


# --- theory -------------------------------------------------------------------------------------------------


def test_h_closed_form_ode_and_lemma7():
    t = np.linspace(0, 5000, 101)
    h = th.h_closed(t, 200, 0.7)
    np.testing.assert_allclose(np.exp(200 * h) + 199 * 200 * h, 200 * 0.7 * t + 1, rtol=1e-12)
    np.testing.assert_allclose(th.h_ode(t, 200, 0.7), h, rtol=1e-8, atol=1e-14)
    gap = th.h_discrete(5000, 200, 0.7)[::50] - h
    assert gap.min() >= -1e-15 and gap.max() <= 2 * 0.7 / 200


def test_B_forms_and_the_constant_offset():
    t = np.concatenate([[0.0], np.geomspace(1, 1e5, 50)])
    ode = th.phase_ode(t, 5, 100, 0.5, 0.2, rho0=0.8)
    closed = th.B_closed(t, 5, 100, 0.5, 0.2, rho0=0.8)
    np.testing.assert_allclose(ode["B"], closed, atol=1e-8)
    np.testing.assert_allclose(
        th.B_eq127(t, 5, 100, 0.5, 0.2, rho0=0.8) - closed, np.log(0.8**4 / 5) / 4, atol=1e-12
    )
    assert closed[0] == 0.0 and (np.diff(ode["z"]) <= 0).all()


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: th.B_closed(np.array([1.0]), K=20, M=10, eta_y=1.0, eta_z=1.0), r"K=20 is out of range"),
        (lambda: th.phase_ode(np.array([1.0]), 2, 10, -0.5, 1.0), r"eta_Y=-0.5 is out of range"),
        (lambda: th.h_closed(np.array([1.0]), 1, 0.5), r"M=1 is out of range"),
    ],
)
def test_theory_refuses_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_lemma2_monte_carlo_is_seeded_and_bad_delta_refused():
    a = ssd.lemma2_study(T_values=(9, 129), n_seq=300, seed=1)
    assert a == ssd.lemma2_study(T_values=(9, 129), n_seq=300, seed=1)
    assert a["gap"][129] < a["gap"][9] and max(a["violation"].values()) <= 0.05
    with pytest.raises(ValueError, match=r"delta=1.5 is out of range"):
        ssd.lemma2_study(delta=1.5)


def test_late_movement_is_the_last_quarter_over_the_fastest_interval():
    """Eight intervals moving 1, 4, 2, 1, 1, 1, 0.5, 0.5 (total variation): the last quarter's mean 0.5 over the
    largest 4; total_variation gives the same on torch tensors (the text chapter's maps) as on numpy arrays; an
    attention that never moves, and a movement series with its first, undefined entry, are refused."""
    steps = np.cumsum([0, 1, 4, 2, 1, 1, 1, 0.5, 0.5]) / 10  # mass moved from token 0 to token 1
    c = np.zeros((len(steps), 1, 1, 2))
    c[:, 0, 0, 0], c[:, 0, 0, 1] = 1 - steps, steps
    moved = ss.attention_movement(c)
    assert moved == pytest.approx(np.array([1, 4, 2, 1, 1, 1, 0.5, 0.5]) / 10)
    assert ss.late_movement(moved) == pytest.approx(0.5 / 4)
    assert ss.total_variation(torch.tensor(c[2]), torch.tensor(c[1])) == pytest.approx(moved[1])
    with pytest.raises(ValueError, match="never moved"):
        ss.late_movement(ss.attention_movement(np.ones((5, 1, 1, 2)) / 2))
    with pytest.raises(ValueError, match="finite"):
        ss.late_movement([float("nan"), 0.3])


def test_only_the_rows_of_the_last_tokens_of_z_move():
    """Sec. 3.2: with x_T one-hot, Z is updated per row: only row m = x_T of each sample gets a gradient (here
    from the literal softmax over positions, and from the counts form the experiments train), every other row
    none. Two last tokens of three classes' worth of vocabulary: most rows must stay still."""
    sc = synthetic(2, 1)
    tokens, labels = sc.sample(np.random.default_rng(0), 16, 12)
    M = sc.vocab_size
    g = torch.Generator().manual_seed(0)
    Y, Z = (torch.randn(M, M, generator=g).requires_grad_(True) for _ in range(2))
    loss = torch.nn.functional.cross_entropy(
        ss.forward_positions(Y, Z, torch.as_tensor(tokens)), torch.as_tensor(labels)
    )
    loss.backward()
    moved = set(np.nonzero(Z.grad.abs().sum(1).numpy() > 0)[0].tolist())
    assert moved == set(np.unique(tokens[:, -1]).tolist()) and len(moved) < M
    counts = torch.zeros(1, len(tokens), M).scatter_add_(
        2, torch.as_tensor(tokens[None, :, :-1]), torch.ones(1, len(tokens), 11)
    )
    Zr = Z.detach()[None].clone().requires_grad_(True)
    logits = ss.forward(Y.detach()[None], Zr, torch.as_tensor(tokens[None, :, -1]), counts)
    torch.nn.functional.cross_entropy(logits[0], torch.as_tensor(labels)).backward()
    assert set(np.nonzero(Zr.grad[0].abs().sum(1).numpy() > 0)[0].tolist()) == moved


def test_decoder_run_follows_remark1s_original_dynamics():
    """The model's decoder trained alone (Z fixed) moves the rows w_n = Y^T f_n as Eq. (40) says: every class
    n once per step, w_j += eta_Y (f_j^T f_n)(e_n - softmax(w_n)), transcribed here in W's coordinates."""
    sc = synthetic(2, 1)
    M, eta = sc.vocab_size, 0.7
    Z = torch.as_tensor(np.random.default_rng(3).uniform(-1, 1, (M, M)))
    run = ssd.decoder_run(sc, eta, 5, Z)
    G = run["overlap"]
    w = np.zeros((2, M))
    for s in range(6):
        np.testing.assert_allclose(run["w"][s], w, atol=1e-12)
        alpha = np.exp(w - w.max(1, keepdims=True))
        alpha /= alpha.sum(1, keepdims=True)
        e = np.eye(M)[sc.next_token] - alpha  # (K, M): e_n - alpha_n
        w = w + eta * G @ e
    assert np.allclose(np.diag(G), 1.0) and 0 < G[0, 1] < 1


def test_lemma3_run_transcribes_eqs_8_26_and_the_plain_dynamics():
    """lemma3_run's three decoders, each against its own transcription in W's coordinates (numpy, float64): the
    plain dynamics w_j += eta_Y sum_n (F^T F)_jn (e_tau(n) - softmax(w_n)); Eq. (8)'s rows alone; and Eq. (26)'s
    direction f_n - F E' e_n, which F^T maps to e_n (Eqs. 27-30). With overlapping contexts the plain rows
    depart from Eq. (8); bad input is refused."""
    sc = synthetic(2, 2, common_weight=0.5)
    M, K, eta = sc.vocab_size, sc.n_classes, 0.8
    Z = torch.as_tensor(np.random.default_rng(4).uniform(-1, 1, (M, M)))
    run = ssd.lemma3_run(sc, Z, eta, 6)
    c = ss.population_c(Z[None], sc)[0].numpy()
    Fm = (c / np.linalg.norm(c, axis=1, keepdims=True)).T
    np.testing.assert_allclose(run["E"], Fm.T @ Fm - np.eye(K), atol=1e-14)
    E_prime = np.eye(K) - np.linalg.inv(np.eye(K) + run["E"])
    np.testing.assert_allclose(Fm.T @ (Fm - Fm @ E_prime), np.eye(K), atol=1e-12)

    def softmax(w):
        a = np.exp(w - w.max(1, keepdims=True))
        return a / a.sum(1, keepdims=True)

    target = np.eye(M)[sc.next_token]
    plain, rows = np.zeros((K, M)), np.zeros((K, M))
    for s in range(7):
        np.testing.assert_allclose(run["plain"][s], plain, atol=1e-12)
        np.testing.assert_allclose(run["eq8"][s], rows, atol=1e-12)
        np.testing.assert_allclose(run["modified"][s], rows, atol=1e-12)
        plain = plain + eta * (Fm.T @ Fm) @ (target - softmax(plain))
        rows = rows + eta * (target - softmax(rows))
    assert np.abs(run["plain"][-1] - run["eq8"][-1]).max() > 0.01
    with pytest.raises(ValueError, match="eta_Y"):
        ssd.lemma3_run(sc, Z, 0.0, 6)
    with pytest.raises(ValueError, match="steps"):
        ssd.lemma3_run(sc, Z, eta, 0)


def _eq98_rows(sc, steps: int, scale_token: int | None = None) -> np.ndarray:
    """Rows z (steps + 1, K, M) that follow Eq. (98) exactly: each distinct token steps by eta_Z f_nl^2 xi_n with one
    xi_n per class, the common tokens fall, and the first step moves nothing (as the model's, which moves only Y);
    ``scale_token``'s steps are made 10% larger."""
    z = np.zeros((steps + 1, sc.n_classes, sc.vocab_size))
    for s in range(1, steps):
        for n in range(sc.n_classes):
            c2 = (sc.probs[n] * np.exp(z[s, n])) ** 2
            step = 0.05 * c2 / c2.sum()
            if scale_token is not None:
                step[scale_token] *= 1.1
            z[s + 1, n] = z[s, n]
            d = sc.distinct_tokens(n)
            z[s + 1, n, d] += step[d]
            z[s + 1, n, sc.common_tokens()] -= 0.01
    return z


def test_theorem3_bounds_on_rows_that_follow_eq98():
    """theorem3_bounds on rows built to obey Eq. (98): q stays in [f_nl0(0)^2, 1] (violation 0 up to rounding) and the dominant
    token rises at every step; with one distinct token's steps 10% larger, its B_n is 1.1 times as large, and q
    starts at f_nl0(0)^2 / 1.1: a violation of 1 - 1 / 1.1."""
    sc = synthetic(2, 1, num_common=1)
    r = ssd.theorem3_bounds(sc, _eq98_rows(sc, 60))
    assert r["violation"] < 1e-12 and r["rises"] == 1 and r["q_min_ratio"] > 1 - 1e-12 and r["q_max"] < 1
    low = int(sc.distinct_tokens(0)[0])  # the least likely distinct token of class 0
    r = ssd.theorem3_bounds(sc, _eq98_rows(sc, 60, scale_token=low))
    assert r["violation"] == pytest.approx(1 - 1 / 1.1, rel=1e-9)


def test_lemma3_study_checks_theorem5_and_corollary1_on_the_modified_run(monkeypatch):
    """Theorem 5 and Corollary 1 on lemma3_run's modified decoder, transcribed here in numpy: Y lies in the span of
    the f_n, Y = F (F^T F)^-1 W (without the inverse, F W, it is off by E's size: the check can fail), and the
    model's residual e_tau(n) - alpha_n is (M - 1) zeta_tau(n) / (M - 1 + exp(M h(s))) (against
    e_tau(n) - softmax(w_n) at w_n = (M - 1) h(s) zeta_tau(n), written out)."""
    monkeypatch.setattr(ssd, "LEMMA3", dict(ssd.LEMMA3, steps=12))
    res = ssd.lemma3_study()
    assert all(r["thm5_gap"] < 1e-12 and r["cor1_gap"] < 1e-12 for r in res.values())
    sc = synthetic(2, 2, common_weight=1.0)
    M, eta = sc.vocab_size, 0.8
    Z = torch.as_tensor(np.random.default_rng(4).uniform(-1, 1, (M, M)))
    run = ssd.lemma3_run(sc, Z, eta, 12)
    Fm, W = run["F"], run["eq8"][-1]
    Y = run["Y"][-1]
    assert np.abs(Y - Fm @ np.linalg.solve(Fm.T @ Fm, W)).max() < 1e-12 * np.abs(Y).max()
    assert np.abs(Y - Fm @ W).max() > 0.1 * np.abs(Y).max()
    h = th.h_discrete(12, M, eta)
    for n, t in enumerate(sc.next_token):
        w = (M - 1) * h[-1] * ssd.zeta(int(t), M)
        a = np.exp(w - w.max())
        np.testing.assert_allclose(run["residual"][-1, n], np.eye(M)[t] - a / a.sum(), atol=1e-12)


def test_cor1_epochs_against_the_softmax_written_out():
    """cor1_epochs against its definition: Lemma 5's rows w_n = (M - 1) h(s) zeta_n with h from th.h_discrete, the
    first s at which ||e_n - softmax(w_n)|| <= epsilon, the softmax computed in full; the study's numbers are
    within their rows' bars; bad epsilon is refused."""
    M, eta, eps = 20, 0.7, (0.5, 0.2, 0.05)
    S = th.cor1_epochs(M, eta, eps)
    h = th.h_discrete(400, M, eta)
    for e in eps:
        norms = []
        for hs in h:
            w = (M - 1) * hs * ssd.zeta(0, M)
            a = np.exp(w - w.max())
            norms.append(np.linalg.norm(np.eye(M)[0] - a / a.sum()))
        assert S[e] == int(np.argmax(np.array(norms) <= e))
    res = th.cor1_study()
    assert res["bound"] < 1 and res["leading"] < 0.05 and res["log_min"] < res["log_max"]
    with pytest.raises(ValueError, match="epsilon"):
        th.cor1_epochs(M, eta, (0.0,))
    with pytest.raises(ValueError, match="epsilon"):
        th.cor1_epochs(M, eta, (1.0,))


def test_equal_overlap_classes_have_one_overlap_and_bad_decoder_input_is_refused():
    cl = ssd.equal_overlap_classes(6, 0.5)
    G = ssd.decoder_run(cl, 1.0, 1)["overlap"]
    off = G[~np.eye(6, dtype=bool)]
    assert np.allclose(off, off[0]) and 0 < off[0] < 1
    with pytest.raises(ValueError, match=r"Z must have shape \(M, M\) = \(6, 6\)"):
        ssd.decoder_run(cl, 1.0, 1, torch.zeros(5, 5))
    with pytest.raises(ValueError, match="beta"):
        ssd.equal_overlap_classes(6, 1.5)
    with pytest.raises(ValueError, match="steps"):
        ssd.decoder_run(cl, 1.0, 0)


def test_matrix_lemmas_on_a_two_by_two_correlation():
    """For E = [[0, e], [e, 0]] everything is in closed form: lambda = +-e, (I + E)^-1 = [[1, -e], [-e, 1]] / (1 -
    e^2), so Lemma 14's E' has the diagonal -e^2 / (1 - e^2) and B.1's (I + E)^-1 - I the opposite."""
    e = 0.3
    E = np.array([[[0.0, e], [e, 0.0]]])
    r = ssd.matrix_lemmas(E)
    assert r["l13"] == pytest.approx(1.0) and r["l14"] < 1e-12
    assert r["l16"] == pytest.approx(-(e**2) / (1 - e**2)) and r["b1_diag"] == pytest.approx(
        e**2 / (1 - e**2)
    )
    # Lemma 15: |lambda'| = e / (1 - e) at lambda = -e, the bound itself; Lemma 17: max |E' - E| is the diagonal's
    # e^2 / (1 - e^2) (the off-diagonal's is e^3 / (1 - e^2)), against e^2 / (1 - e): 1 / (1 + e) of it
    assert r["l15"] == pytest.approx(1.0) and r["l17"] == pytest.approx(1 / (1 + e))
    with pytest.raises(ValueError, match="lambda_1"):
        ssd.matrix_lemmas(np.array([[[0.0, 1.5], [1.5, 0.0]]]))
    Es = ssd.correlation_matrices(4, 40, 0.1, 3)
    assert (
        Es.shape == (3, 4, 4) and np.allclose(np.diagonal(Es, axis1=1, axis2=2), 0) and (Es >= -1e-12).all()
    )


@pytest.mark.parametrize("M", [4, 100, 10**6])
def test_lemma8_omegas_are_the_two_zeros_and_eq50_holds(M):
    """lemma8_omegas against Lemma 8's definitions: both h = 1 / M^(2 - omega_0) and h = (1 + omega_1) ln M / M
    are zeros of exp(M h) - (M - 1) M h (relative to (M - 1) M h), the function is negative between them and
    positive outside, and omega_0 solves Eq. (50)'s fixed point literally; M < 4 has no zero and is refused."""
    import math

    w0, w1 = th.lemma8_omegas(M)
    lo, hi = M ** -(2 - w0), (1 + w1) * math.log(M) / M

    def g(h):
        return math.exp(M * h) - (M - 1) * M * h

    for h in (lo, hi):
        assert abs(g(h)) <= 1e-9 * (M - 1) * M * h
    assert g(math.sqrt(lo * hi)) < 0 and g(lo / 2) > 0 and g(2 * hi) > 0
    assert w0 == pytest.approx((math.log(M / (M - 1)) + M ** -(1 - w0)) / math.log(M), rel=1e-9)
    with pytest.raises(ValueError, match="M"):
        th.lemma8_omegas(3)


def test_lemma9_study_reads_both_stages_as_the_ode_gives_them(monkeypatch):
    """lemma9_study on one (M, eta_Y, K), against h integrated by the adaptive solver (th.h_ode, not the closed
    form): the same extreme ratios; and the first stage's inequality fails at t = 0 (h = 0), which is why the row
    starts at t = K."""
    import math

    M, eta, K = 100, 0.5, 10
    monkeypatch.setattr(
        th, "LEMMA9", dict(th.LEMMA9, M=(M,), eta_y=(eta,), K=(K,), n_late=50, late_span=10.0)
    )
    res = th.lemma9_study()
    t = np.arange(K, math.floor(K * math.log(M) / eta) + 1, dtype=np.float64)
    h = th.h_ode(t / K, M, eta)
    assert res["stage1"] == pytest.approx(
        (np.exp(M * h) / np.minimum(M - 1, (M - 1) * M * h)).max(), rel=1e-6
    )
    t2 = 2 * (1 + th.lemma8_omegas(M)[1]) * K * math.log(M) / eta
    t = np.geomspace(t2, 10 * t2, 50)
    h = th.h_ode(t / K, M, eta)
    assert res["stage2"] == pytest.approx(
        (np.exp(M * h) / np.maximum(M - 1, (M - 1) * M * h)).min(), rel=1e-6
    )
    assert res["stage1"] <= 1 <= res["stage2"]
    h0 = th.h_closed(np.array([0.0]), M, eta)[0]
    assert h0 == 0 and math.exp(M * h0) > (M - 1) * M * h0


def test_lemma10_study_against_a_simulation_and_the_threshold(monkeypatch):
    """lemma10_study's exact binomial tail against a Monte Carlo of N_n (one (N, K, delta)), and its count of
    failures of Eq. (58)'s second inequality against the closed threshold N ln(2/delta) <= (2 + sqrt 2)^2."""
    import math

    N, K, delta = 100, 2, 0.5
    monkeypatch.setattr(th, "LEMMA10", dict(th.LEMMA10, N=(N,), K=(K,), delta=(delta,)))
    res = th.lemma10_study()
    counts = np.random.default_rng(0).binomial(N, 1 / K, size=400_000)
    b = math.sqrt(N / 2 * math.log(2 / delta)) + 1
    mc = (np.abs(counts - math.ceil(N / K)) > b).mean() / delta
    assert res["tail"] == pytest.approx(mc, abs=0.01) and res["tail"] < 1
    deltas = np.arange(1, 20) * 0.05
    closed = sum(N_ * math.log(2 / d) <= res["threshold"] for N_ in range(1, 21) for d in deltas)
    assert res["fails"] == closed > 0 and res["points"] == 380


def test_lemma11_study_against_the_adaptive_ode(monkeypatch):
    """lemma11_study on one (M, eta_Y, N) against h integrated by th.h_ode (not the closed form): the same
    ratios of Eqs. (63) and (65); an N with Delta >= N_bar is refused."""
    import math

    M, eta, N = 100, 0.5, 10**4
    monkeypatch.setattr(th, "LEMMA11", dict(th.LEMMA11, N=(N,), M=(M,), eta_y=(eta,)))
    res = th.lemma11_study()
    n_bar, delta = math.ceil(N / 10), math.ceil(math.sqrt(N * math.log(10)))
    lo, mid, hi = th.h_ode(np.array([n_bar - delta, n_bar, n_bar + delta], dtype=float), M, eta)
    bound = mid * delta / (n_bar - delta)
    assert res["h"] == pytest.approx(max(mid - lo, hi - mid) / bound, rel=1e-6)
    g_mid, g_hi = 1 / (M - 1 + math.exp(M * mid)), 1 / (M - 1 + math.exp(M * hi))
    assert res["g"] == pytest.approx((g_mid - g_hi) / (g_mid * eta * delta / 3), rel=1e-6)
    assert res["n_late"] == 1 and res["late"] == pytest.approx(
        (g_mid - g_hi) / g_mid * n_bar / delta, rel=1e-6
    )
    monkeypatch.setattr(th, "LEMMA11", dict(th.LEMMA11, N=(100,)))
    with pytest.raises(ValueError, match="N=100"):
        th.lemma11_study()


def test_lemma4_gap_is_rounding_and_the_projection_matters():
    """Eq. (94) matches autograd to rounding at two random (Y, Z); without the projection I - f_n f_n^T (the
    step from Eq. 94 to Eq. 96 that removes g_n's part along f_n) the same rows miss by far more."""
    assert ssd.lemma4_gap(0) < 1e-12 and ssd.lemma4_gap(1) < 1e-12
    sc = synthetic(2, 2)
    M = sc.vocab_size
    g = torch.Generator().manual_seed(0)
    Y = torch.randn(M, M, generator=g, dtype=torch.float64)
    Z = torch.randn(M, M, generator=g, dtype=torch.float64, requires_grad=True)
    (dZ,) = torch.autograd.grad(-ss.population_loss(Y[None], Z[None], sc)[0] * sc.n_classes, Z)
    c = ss.population_c(Z.detach()[None], sc)[0]
    plain = torch.zeros(M, M, dtype=torch.float64)
    for n in range(sc.n_classes):
        f = c[n] / c[n].norm()
        alpha = torch.softmax(Y.T @ f, -1)
        plain[int(sc.last[n])] += f * (Y @ (torch.eye(M, dtype=torch.float64)[int(sc.next_token[n])] - alpha))
    assert float((dZ - plain).abs().max() / dZ.abs().max()) > 1e-3
