"""Scan and Snap's theory checked on the model itself (``book/scan_snap_theory``): Lemma 1's gradient against
autograd, Lemmas 2 and 18 by Monte Carlo, Lemma 3's change of coordinates on the decoder, Lemma 4's attention
gradient, and the population dynamics of Sections 4-5 (Theorem 2's signs and Theorem 3's identity, Eq. (11),
measured along gradient descent on the T -> infinity loss of :mod:`companion.experiments.scan_snap`'s model)."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from companion import cache, config, report
from companion.config import check_float, check_int
from companion.data.seqclass import SeqClasses, synthetic
from companion.experiments.scan_snap import forward, forward_positions, mix, population_c, population_loss

MODULES = ("companion.theory.scan_snap_dynamics",)


def lemma1_gap(M: int = 12, T: int = 20, seed: int = 0) -> float:
    """Largest |autograd - Eq. (3)| over the entries of dJ/dY and dJ/dZ (float64), for random Y, Z and one
    random sequence, where J = log p(x_{T+1}) is the objective of Eq. (2) with the l2 normalisation:
    dJ/dY = LN(X^T b)(x_{T+1} - alpha)^T and dJ/dZ = x_T (x_{T+1} - alpha)^T Y^T P^perp / ||X^T b|| X^T diag(b) X."""
    check_int("M", M, low=2)
    check_int("T", T, low=2)
    g = torch.Generator().manual_seed(seed)
    Y = torch.randn(M, M, generator=g, dtype=torch.float64, requires_grad=True)
    Z = torch.randn(M, M, generator=g, dtype=torch.float64, requires_grad=True)
    tokens = torch.randint(0, M, (1, T), generator=g)
    nxt = int(torch.randint(0, M, (1,), generator=g))
    J = torch.log_softmax(forward_positions(Y, Z, tokens)[0], -1)[nxt]
    gY, gZ = torch.autograd.grad(J, (Y, Z))
    with torch.no_grad():
        X = F.one_hot(tokens[0, :-1], M).double()  # (T-1, M)
        b = torch.softmax(Z[tokens[0, -1]][tokens[0, :-1]], -1)
        v = X.T @ b
        alpha = torch.softmax(Y.T @ (v / v.norm()), -1)
        e = F.one_hot(torch.tensor(nxt), M).double() - alpha
        dY = torch.outer(v / v.norm(), e)
        P = torch.eye(M, dtype=torch.float64) - torch.outer(v, v) / (v @ v)
        row = e @ Y.T @ P / v.norm() @ X.T @ torch.diag(b) @ X
        dZ = torch.zeros(M, M, dtype=torch.float64)
        dZ[tokens[0, -1]] = row
    return float(max((gY - dY).abs().max(), (gZ - dZ).abs().max()))


def lemma4_gap(seed: int = 0) -> float:
    """Lemma 4's Eq. (94) on the model's T -> infinity objective J = sum_n log p(next token | class n)
    (:func:`population_loss`, float64) on Syn-Medium's layout with two last tokens (K = 4 classes, two per last
    token), at a random Y and Z: the largest |autograd's dJ/dZ - Eq. (94)| relative to the largest entry of
    dJ/dZ, with row m of Eq. (94) written as Eq. (96)'s sum over the classes n with last token m of
    diag(f_n)(I - f_n f_n^T) g_n, g_n = Y(e_n - alpha_n)."""
    classes = synthetic(2, 2)
    M, K = classes.vocab_size, classes.n_classes
    g = torch.Generator().manual_seed(seed)
    Y = torch.randn(M, M, generator=g, dtype=torch.float64)
    Z = torch.randn(M, M, generator=g, dtype=torch.float64, requires_grad=True)
    J = -population_loss(Y[None], Z[None], classes)[0] * K
    (dZ,) = torch.autograd.grad(J, Z)
    with torch.no_grad():
        c = population_c(Z[None], classes)[0]
        eq94 = torch.zeros(M, M, dtype=torch.float64)
        for n in range(K):
            f = c[n] / c[n].norm()
            e = F.one_hot(torch.tensor(int(classes.next_token[n])), M).double()
            g_n = Y @ (e - torch.softmax(Y.T @ f, -1))
            eq94[int(classes.last[n])] += f * (g_n - f * (f @ g_n))  # diag(f_n)(I - f_n f_n^T) g_n
    return float((dZ - eq94).abs().max() / dZ.abs().max())


def population_run(
    classes: SeqClasses, eta_y: float, eta_z: float, steps: int, z0: float = 0.0, seed: int = 0
) -> dict[str, np.ndarray]:
    """Gradient descent on the T -> infinity loss (:func:`population_loss`, every class once per step,
    float64, no momentum), Y(0) = 0 and Z(0) = 0 or, with ``z0`` > 0, uniform in [-z0, z0]. Returns the rows
    z_{psi(n)} of Z (steps + 1, K, M) and the loss (steps + 1,): the discretised dynamics of Sections 4-5.

    Kept apart from the training engine (:func:`companion.train.fit`): full-batch gradient descent on a
    population loss (no batches are drawn), the theory's dynamics rather than a training run."""
    check_float("eta_Y", eta_y, low=0, low_open=True)
    check_float("eta_Z", eta_z, low=0, low_open=True)
    check_int("steps", steps, low=1)
    check_float("z0", z0, low=0)
    M = classes.vocab_size
    g = torch.Generator().manual_seed(seed)
    Y = torch.zeros(1, M, M, dtype=torch.float64, requires_grad=True)
    Z = ((torch.rand(1, M, M, generator=g, dtype=torch.float64) * 2 - 1) * z0).requires_grad_(True)
    last = torch.as_tensor(classes.last)
    rows, losses = [], []
    for step in range(steps + 1):
        rows.append(Z.detach()[0, last].clone())
        loss = population_loss(Y, Z, classes).sum()
        losses.append(loss.item())
        if step == steps:
            break
        gY, gZ = torch.autograd.grad(loss, (Y, Z))
        with torch.no_grad():
            Y -= eta_y * gY
            Z -= eta_z * gZ
    return {"z": torch.stack(rows).numpy(), "loss": np.asarray(losses)}


def theorem2_signs(classes: SeqClasses, z: np.ndarray) -> dict[str, float]:
    """From the rows z (steps + 1, K, M) of a run: the fraction of steps (from the second on; the first
    moves only Y) at which every distinct token's logit rose, and every common token's logit fell."""
    dz = np.diff(z, axis=0)[1:]
    up = np.ones(len(dz), dtype=bool)
    for n in range(classes.n_classes):
        up &= (dz[:, n, classes.distinct_tokens(n)] > 0).all(1)
    common = classes.common_tokens()
    down = np.ones(len(dz), dtype=bool)
    for n in range(classes.n_classes):
        down &= (dz[:, n, common] < 0).all(1)
    return {"distinct_up": float(up.mean()), "common_down": float(down.mean())}


CHI_FORMS = ("appendix", "printed")  # Eq. (11)'s chi_l: exp(2 (z_l(t) - z_l(0))), or as Sec. 5 prints it


def theorem3_deviation(classes: SeqClasses, z: np.ndarray, form: str = "appendix") -> float:
    """Largest relative deviation |r(t) - r(0) chi_l(t)| / |r(0) chi_l(t)| of Eq. (11) over the steps, the
    classes and the ordered pairs (l, l') of distinct tokens, with r_{l/l'|n} = (c_l / c_l')^2 - 1 and, for
    ``form`` "appendix" (the appendix's Eq. (11) and its proof), chi_l(t) = exp(2 (z_l(t) - z_l(0))), or for
    "printed" (Eq. (11) in Sec. 5 as printed), chi_l(t) = exp(2 (z_l(t) - z_{l'}(0))). From Z(0) = 0 the two
    are the same.

    >>> theorem3_deviation(synthetic(2, 1), np.zeros((2, 2, 25)), form="main")
    Traceback (most recent call last):
    ...
    ValueError: unknown form 'main': allowed values are 'appendix', 'printed'
    """
    config.check_choice("form", form, CHI_FORMS)
    worst = 0.0
    for n in range(classes.n_classes):
        d = classes.distinct_tokens(n)
        logc = np.log(classes.probs[n, d]) + z[:, n, d]  # (steps + 1, |D|): log of the unnormalised c
        r = np.exp(2 * (logc[:, :, None] - logc[:, None, :])) - 1  # r_{l/l'}(t)
        start = (
            z[:1, n, d][:, :, None] if form == "appendix" else z[:1, n, d][:, None, :]
        )  # z_l(0) or z_l'(0)
        pred = r[:1] * np.exp(2 * (z[:, n, d][:, :, None] - start))
        off = ~np.eye(len(d), dtype=bool)
        worst = max(worst, float((np.abs(r - pred)[:, off] / np.abs(pred[:, off])).max()))
    return worst


def theorem3_bounds(classes: SeqClasses, z: np.ndarray) -> dict[str, float]:
    """Theorem 3's Eq. (12) and its monotone dominant token along a run's rows z (steps + 1, K, M). For each class
    n, l0 is the dominant distinct token (largest P(l|n) exp(z_l(0))) and f_nl^2 = c_l^2 / sum c^2 with c_l =
    P(l|n) exp(z_l). B_n is measured from each other distinct token l's steps, B_n(t) = sum_{s < t} Delta z_l(s) /
    f_nl(s)^2 (Eq. 98: Delta z_l = eta_Z f_nl^2 xi_n, so eta_Z drops out), and q(t) = (z_l0(t) - z_l0(0)) /
    B_n(t), which Eq. (12) places in [f_nl0(0)^2, 1]. Returns ``violation``, the largest max(0, 1 - q /
    f_nl0(0)^2, q - 1) over the steps with B_n > 0, the tokens l and the classes; ``q_min_ratio`` and ``q_max``,
    the smallest q / f_nl0(0)^2 and the largest q; and ``rises``, the fraction of steps from the second (the
    first moves only Y) at which z_l0 and f_nl0 both rise, over the classes."""
    violation, q_min_ratio, q_max, rises = 0.0, math.inf, 0.0, []
    for n in range(classes.n_classes):
        support = np.flatnonzero(classes.probs[n] > 0)
        logc = np.log(classes.probs[n, support]) + z[:, n, support]  # (steps + 1, |support|)
        f2 = np.exp(2 * logc - np.logaddexp.reduce(2 * logc, axis=1, keepdims=True))
        d = [int(np.flatnonzero(support == l)[0]) for l in classes.distinct_tokens(n)]  # columns of f2
        l0 = d[int(np.argmax(logc[0, d]))]
        zn = z[:, n, support]
        gain = zn[:, l0] - zn[0, l0]
        for l in d:
            if l == l0:
                continue
            B = np.concatenate([[0.0], np.cumsum(np.diff(zn[:, l]) / f2[:-1, l])])
            q = gain[B > 0] / B[B > 0]
            ratio = q / f2[0, l0]
            violation = max(violation, float(max(0.0, 1 - ratio.min(), q.max() - 1)))
            q_min_ratio, q_max = min(q_min_ratio, float(ratio.min())), max(q_max, float(q.max()))
        rises.append((np.diff(zn[:, l0])[1:] > 0) & (np.diff(f2[:, l0])[1:] > 0))
    return {
        "violation": violation,
        "q_min_ratio": q_min_ratio,
        "q_max": q_max,
        "rises": float(np.concatenate(rises).mean()),
    }


DYNAMICS = {
    "steps": 1000,
    "eta_y": 1.0,
    "nu": (1, 10, 100),
    "z0": (0.0, 0.5),
    "num_common": (1, 10),
    "lemma1_seeds": 5,
    "nu_limit": 1000,  # Eq. (12) again, closer to the two-timescale limit (runs of their own)
}


def dynamics_study(use_cache: bool = True) -> dict:
    """Lemmas 1 and 4 on random inputs, Lemmas 2 and 18 by Monte Carlo (:func:`lemma2_study`), and the population dynamics (:func:`population_run`) on Syn-Small with one
    or ten common tokens, eta_Y = 1 and eta_Y / eta_Z = nu, from Z(0) = 0 and from a random Z(0); Theorem 2's
    signs, Theorem 3's identity and its bounds (:func:`theorem3_bounds`) measured along each run.
    ``runs[(num_common, nu, z0)]``; ``limit[(num_common, z0)]``: the signs and bounds at nu = ``nu_limit``."""
    d = DYNAMICS

    def compute():
        runs = {}
        for nc in d["num_common"]:
            sc = synthetic(2, 1, num_common=nc)
            for nu in d["nu"]:
                for z0 in d["z0"]:
                    r = population_run(sc, d["eta_y"], d["eta_y"] / nu, d["steps"], z0=z0)
                    runs[(nc, nu, z0)] = {
                        **theorem2_signs(sc, r["z"]),
                        "deviation": theorem3_deviation(sc, r["z"]),
                        "deviation_printed": theorem3_deviation(sc, r["z"], form="printed"),
                        "eq12": theorem3_bounds(sc, r["z"]),
                        "loss": r["loss"],
                        "z": r["z"][:, 0],
                    }
        limit = {}
        for nc in d["num_common"]:
            sc = synthetic(2, 1, num_common=nc)
            for z0 in d["z0"]:
                r = population_run(sc, d["eta_y"], d["eta_y"] / d["nu_limit"], d["steps"], z0=z0)
                limit[(nc, z0)] = {**theorem2_signs(sc, r["z"]), "eq12": theorem3_bounds(sc, r["z"])}
        return {
            "runs": runs,
            "limit": limit,
            "lemma1": [lemma1_gap(seed=s) for s in range(d["lemma1_seeds"])],
            "lemma4": [lemma4_gap(seed=s) for s in range(d["lemma1_seeds"])],
            "lemma2": lemma2_study(),
        }

    return cache.load_or_compute("scan_snap_dynamics", d, compute, MODULES, use_cache=use_cache)


def dynamics_summary(res: dict):
    runs, d = res["runs"], DYNAMICS
    # Theorem 3's hypothesis: every common logit falls at every step from the second
    eq12 = [r["eq12"] for k, r in runs.items() if k[1] == max(d["nu"]) and r["common_down"] == 1]
    eq12_limit = [r["eq12"] for r in res["limit"].values() if r["common_down"] == 1]

    def dev(nc, z0):
        return [runs[(nc, nu, z0)]["deviation"] for nu in d["nu"]]

    return report.Summary(
        {
            "lemma1_gap": (
                max(res["lemma1"]),
                f"Lemma 1: largest |autograd - Eq. (3)| over {len(res['lemma1'])} random draws",
            ),
            "lemma4_gap": (
                max(res["lemma4"]),
                f"Lemma 4: largest |autograd - Eq. (94)| / max |dJ/dZ| over {len(res['lemma4'])} random draws",
            ),
            "lemma2_violation": (
                max(res["lemma2"]["violation"].values()),
                f"Lemma 18: largest fraction of sequences beyond Hoeffding's bound at delta = "
                f"{res['lemma2']['delta']:g}, over tokens and T",
            ),
            "lemma2_slope": (
                res["lemma2"]["slope"],
                "Lemma 2: log-log slope of mean max|X^T b - c_n| against T - 1",
            ),
            "lemma2_gap_first": (
                res["lemma2"]["gap"][res["lemma2"]["T"][0]],
                f"Lemma 2: mean max|X^T b - c_n| at T = {res['lemma2']['T'][0]}",
            ),
            "lemma2_gap_last": (
                res["lemma2"]["gap"][res["lemma2"]["T"][-1]],
                f"Lemma 2: the same at T = {res['lemma2']['T'][-1]}",
            ),
            "distinct_up": (
                min(r["distinct_up"] for r in runs.values()),
                "Theorem 2(a): smallest fraction of steps with every distinct logit rising, over all runs",
            ),
            "single_common_down": (
                min(runs[k]["common_down"] for k in runs if k[0] == 1),
                "Theorem 2(b): smallest fraction of steps with the single common logit falling",
            ),
            "ten_common_down_zero": (
                min(runs[k]["common_down"] for k in runs if k[0] == 10 and k[2] == 0),
                "Corollary 2: ten common tokens from Z(0) = 0, fraction of steps all ten fall",
            ),
            "ten_common_down_random": (
                max(runs[k]["common_down"] for k in runs if k[0] == 10 and k[2] > 0),
                "ten common tokens from a random Z(0): largest fraction of steps all ten fall",
            ),
            "dev_nu1": (
                runs[(1, 1, 0.0)]["deviation"],
                "Eq. (11): largest relative deviation, one common token, nu = 1",
            ),
            "dev_nu10": (runs[(1, 10, 0.0)]["deviation"], "the same at nu = eta_Y / eta_Z = 10"),
            "dev_nu100": (runs[(1, 100, 0.0)]["deviation"], "the same at nu = 100"),
            "dev_nu100_max": (
                max(runs[k]["deviation"] for k in runs if k[1] == 100),
                "Eq. (11) at nu = 100: largest deviation over the four runs (1 or 10 common, both Z(0))",
            ),
            "dev_printed_random": (
                max(runs[k]["deviation_printed"] for k in runs if k[1] == 100 and k[2] > 0),
                "Eq. (11) as printed in Sec. 5 (chi_l with z_l'(0)), from a random Z(0), nu = 100: largest "
                "relative deviation over the two runs (1 or 10 common tokens)",
            ),
            "dev_appendix_random": (
                max(runs[k]["deviation"] for k in runs if k[1] == 100 and k[2] > 0),
                "the appendix's Eq. (11) (chi_l with z_l(0)) on the same two runs",
            ),
            "dev_printed_zero_gap": (
                max(abs(r["deviation_printed"] - r["deviation"]) for k, r in runs.items() if k[2] == 0),
                "from Z(0) = 0: largest |printed - appendix| deviation over the runs (the two forms agree)",
            ),
            "dev_shrink": (
                min(dev(nc, z0)[0] / dev(nc, z0)[-1] for nc in d["num_common"] for z0 in d["z0"]),
                "smallest ratio deviation(nu = 1) / deviation(nu = 100) over the four (common, Z(0)) cases",
            ),
            "eq12_cases": (
                len(eq12),
                f"Eq. (12): runs at nu = {max(d['nu'])} that meet Theorem 3's hypothesis",
            ),
            "eq12_violation": (
                max(r["violation"] for r in eq12),
                "Eq. (12): largest relative violation of f_nl0(0)^2 <= q <= 1 over those runs",
            ),
            "eq12_q_min": (min(r["q_min_ratio"] for r in eq12), "Eq. (12): smallest q / f_nl0(0)^2"),
            "eq12_q_max": (max(r["q_max"] for r in eq12), "Eq. (12): largest q (upper bound 1)"),
            "eq12_rises": (
                min(r["rises"] for r in eq12),
                "Theorem 3: smallest fraction of steps at which z_l0 and f_nl0 both rise",
            ),
            "eq12_limit_cases": (len(eq12_limit), f"runs at nu = {d['nu_limit']} that meet the hypothesis"),
            "eq12_limit": (
                max(r["violation"] for r in eq12_limit),
                f"Eq. (12) at nu = {d['nu_limit']}: largest relative violation",
            ),
            "loss_end": (
                max(r["loss"][-1] for r in runs.values()),
                f"largest population loss after {d['steps']} steps",
            ),
        }
    )


def lemma2_study(T_values=(17, 65, 257, 1025), n_seq: int = 4000, delta: float = 0.05, seed: int = 0) -> dict:
    """Lemmas 2 and 18 by Monte Carlo on Syn-Small's first class with a random attention row z (uniform in
    [-1, 1]): for each T, ``n_seq`` sequences of T - 1 contextual tokens; ``violation[T]``: the largest, over
    the tokens, fraction of sequences whose frequency q_l is further from P(l|n) than Hoeffding's
    sqrt(ln(2 / delta) / (2 (T - 1))) (Eq. 134 says at most delta); ``gap[T]``: the mean over sequences of
    max_l |X^T b - c_n|_l (Eq. 6 says it tends to 0)."""
    check_float("delta", delta, low=0, high=1, low_open=True, high_open=True)
    check_int("n_seq", n_seq, low=1)
    sc = synthetic(2, 1)
    rng = np.random.default_rng(config.seed_streams(seed, ["lemma2"])["lemma2"])
    z = torch.as_tensor(rng.uniform(-1, 1, sc.vocab_size))
    P = sc.probs[0]
    c = mix(z, torch.as_tensor(P)).numpy()
    out = {"T": list(T_values), "violation": {}, "gap": {}, "delta": delta}
    for T in T_values:
        check_int("T", T, low=2)
        counts = rng.multinomial(T - 1, P, size=n_seq)
        bound = math.sqrt(math.log(2 / delta) / (2 * (T - 1)))
        out["violation"][T] = float((np.abs(counts / (T - 1) - P) > bound).mean(0).max())
        xb = mix(z.expand(n_seq, -1), torch.as_tensor(counts, dtype=torch.float64)).numpy()
        out["gap"][T] = float(np.abs(xb - c).max(1).mean())
    out["slope"] = float(
        np.polyfit(np.log([T - 1 for T in T_values]), np.log([out["gap"][T] for T in T_values]), 1)[0]
    )
    return out


# --- Lemma 5 and Remark 1: the decoder Y with Z fixed (Appendix B.3) ---------------------------------------------


def zeta(n: int, M: int) -> np.ndarray:
    """zeta_n = M / (M - 1) (e_n - 1 / M) in R^M (Appendix B.1).

    >>> zeta(0, 4).round(3).tolist()
    [1.0, -0.333, -0.333, -0.333]
    """
    check_int("M", M, low=2)
    check_int("n", n, low=0, high=M - 1)
    return M / (M - 1) * (np.eye(M)[n] - 1 / M)


def decoder_run(classes: SeqClasses, eta_y: float, steps: int, Z: torch.Tensor | None = None) -> dict:
    """Gradient descent on the decoder Y alone (Y(0) = 0, float64), the attention logits Z (M, M) held fixed
    (zero by default), on the T -> infinity loss summed over the classes: each class is seen once per step
    with learning rate eta_Y, as in Lemma 5 and Remark 1. Returns ``w`` (steps + 1, K, M), the rows w_n =
    Y^T f_n of W = F^T Y with f_n = c_n / ||c_n||, and ``overlap`` (K, K), the matrix of f_n^T f_n'.

    Kept apart from the training engine (:func:`companion.train.fit`): full-batch gradient descent on a
    population loss, the dynamics that the lemma describes, not a training run."""
    check_float("eta_Y", eta_y, low=0, low_open=True)
    check_int("steps", steps, low=1)
    M, K = classes.vocab_size, classes.n_classes
    Z = torch.zeros(M, M, dtype=torch.float64) if Z is None else torch.as_tensor(Z, dtype=torch.float64)
    if Z.shape != (M, M):
        raise ValueError(f"Z must have shape (M, M) = ({M}, {M}), got {tuple(Z.shape)}")
    Z = Z[None]
    c = population_c(Z, classes)[0]
    f = c / c.norm(dim=-1, keepdim=True)  # (K, M)
    Y = torch.zeros(1, M, M, dtype=torch.float64, requires_grad=True)
    w = []
    for step in range(steps + 1):
        w.append((f @ Y.detach()[0]).numpy())
        if step == steps:
            break
        (g,) = torch.autograd.grad(population_loss(Y, Z, classes).sum() * K, Y)  # the sum over the classes
        with torch.no_grad():
            Y -= eta_y * g
    return {"w": np.stack(w), "overlap": (f @ f.T).numpy()}


def equal_overlap_classes(M: int, beta: float) -> SeqClasses:
    """K = M sequence classes whose normalised contexts f_n have one overlap f_n^T f_n' = rho for every pair
    (Remark 1's case): class n predicts token n from P(l | n) = (1 - beta) [l = n] + beta / M (last token 0).

    >>> equal_overlap_classes(3, 0.0).probs.tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    check_int("M", M, low=2)
    check_float("beta", beta, low=0, high=1)
    probs = (1 - beta) * np.eye(M) + beta / M
    return SeqClasses(probs, np.zeros(M, dtype=np.int64), np.arange(M), M)


def _gap_from(w: np.ndarray, h: np.ndarray, zeta_n: np.ndarray, M: int) -> float:
    """Largest |w(s) - (M - 1) h(s) zeta_n| over the steps and tokens, relative to the largest |w|."""
    return float(np.abs(w - (M - 1) * h[:, None] * zeta_n).max() / np.abs(w).max())


DECODER = {"M": 30, "steps": 1000, "eta_y": 1.0, "beta": 0.9, "seed": 0}


def decoder_study() -> dict:
    """Lemma 5 and Remark 1 on the model (:func:`decoder_run`, :data:`DECODER`): one class over M tokens (a
    random context distribution and a random fixed Z, uniform in [-1, 1]); the K = M classes of
    :func:`equal_overlap_classes`; and Syn-Small (K = 2 classes, M = 34 tokens: not every token is a next
    token). Each with h*(s) of Eq. (33) at eta_Y and at (1 - rho) eta_Y."""
    from companion.theory.scan_snap import h_discrete

    d = DECODER
    M, steps, eta = d["M"], d["steps"], d["eta_y"]
    rng = np.random.default_rng(config.seed_streams(d["seed"], ["lemma5"])["lemma5"])
    probs = np.zeros((1, M))
    probs[0, : M - 2] = rng.dirichlet(np.ones(M - 2))
    one = SeqClasses(probs, [M - 2], [M - 1], M)
    Z = torch.as_tensor(rng.uniform(-1, 1, (M, M)))
    lemma5 = decoder_run(one, eta, steps, Z)["w"][:, 0]
    eq = decoder_run(equal_overlap_classes(M, d["beta"]), eta, steps)
    rho = float(eq["overlap"][0, 1])
    syn = synthetic(2, 1)
    small = decoder_run(syn, eta, steps)
    return {
        "lemma5_gap": _gap_from(lemma5, h_discrete(steps, M, eta), zeta(M - 1, M), M),
        "rho": rho,
        "w_end": float(eq["w"][-1, 0, 0]),
        "effective_gap": _gap_from(eq["w"][:, 0], h_discrete(steps, M, (1 - rho) * eta), zeta(0, M), M),
        "eq43_end": float((1 - rho) * (M - 1) * h_discrete(steps, M, eta)[-1] * zeta(0, M)[0]),
        "syn_rho": float(small["overlap"][0, 1]),
        "syn_off_zeta": max(
            float(np.linalg.norm(w - (w @ z) / (z @ z) * z) / np.linalg.norm(w))
            for w, z in ((small["w"][-1, n], zeta(int(syn.next_token[n]), syn.vocab_size)) for n in range(2))
        ),
    }


def decoder_summary(res: dict) -> report.Summary:
    """The numbers of :func:`decoder_study` that ``book/scan_snap_theory`` reads."""
    d = DECODER
    return report.Summary(
        {
            "lemma5_gap": (
                res["lemma5_gap"],
                f"Lemma 5 on the model: largest |w_n(s) - (M - 1) h*(s) zeta_n| / max |w_n|, one class, a random "
                f"fixed Z, M = {d['M']}, {d['steps']} steps",
            ),
            "remark1_rho": (res["rho"], f"Remark 1: the overlap f_n^T f_n' of the K = M = {d['M']} classes"),
            "remark1_gap": (
                res["effective_gap"],
                "Remark 1 on the model: largest |w_n(s) - (M - 1) h*(s; (1 - rho) eta_Y) zeta_n| / max |w_n| "
                "(the effective learning rate)",
            ),
            "eq43_ratio": (
                res["eq43_end"] / res["w_end"],
                f"Eq. (43) as printed, (1 - rho)(M - 1) h*(s; eta_Y), over the run's w_nn after {d['steps']} steps",
            ),
            "eq43_limit": (1 - res["rho"], "the ratio's limit for long training, 1 - rho"),
            "syn_rho": (res["syn_rho"], "Syn-Small (K = 2, M = 34): the overlap f_1^T f_2"),
            "syn_off_zeta": (
                res["syn_off_zeta"],
                "Syn-Small, Z = 0: largest ||w_n - its projection on zeta_n|| / ||w_n|| after the run",
            ),
        }
    )


# --- Lemma 3: W = F^T Y under the modified gradient of Eq. (26) (Appendix B.2) -------------------------------

LEMMA3 = {
    "num_last": 2,
    "num_next_per_last": 2,
    "common_weights": (1.0, 0.1),
    "steps": 500,
    "eta_y": 1.0,
    "seed": 0,
}


def lemma3_run(classes: SeqClasses, Z: torch.Tensor, eta_y: float, steps: int) -> dict:
    """Lemma 3 on the model's decoder (Z held fixed, Y(0) = 0, every class once per step, float64), three ways:
    ``modified``, Eq. (26)'s update Y += eta_Y sum_n (f_n - F E' e_n)(e_tau(n) - alpha_n)^T with
    E' = I - (I + E)^{-1} and alpha_n the model's output (:func:`forward`); ``plain``, the model's own gradient
    descent on the T -> infinity loss (autograd); ``eq8``, Eq. (8)'s rows alone, w_n += eta_Y (e_tau(n) -
    softmax(w_n)). Returns each one's W = F^T Y along the steps (steps + 1, K, M), ``E`` = F^T F - I and ``F``
    (M, K), with f_n = c_n / ||c_n|| of Eq. (5); and, of the modified dynamics, ``Y`` (steps + 1, M, M) and
    ``residual`` (steps + 1, K, M), the rows e_tau(n) - alpha_n (Theorem 5 and Corollary 1)."""
    check_float("eta_Y", eta_y, low=0, low_open=True)
    check_int("steps", steps, low=1)
    M, K = classes.vocab_size, classes.n_classes
    Z = torch.as_tensor(Z, dtype=torch.float64)[None]
    c = population_c(Z, classes)[0]
    Fm = (c / c.norm(dim=-1, keepdim=True)).T  # (M, K): the columns f_n
    E = Fm.T @ Fm - torch.eye(K, dtype=torch.float64)
    E_prime = torch.eye(K, dtype=torch.float64) - torch.linalg.inv(torch.eye(K, dtype=torch.float64) + E)
    P = torch.as_tensor(classes.probs, dtype=torch.float64)[None]
    last = torch.as_tensor(classes.last)[None]
    target = F.one_hot(torch.as_tensor(classes.next_token), M).double()  # (K, M): the rows e_tau(n)
    Y_mod = torch.zeros(1, M, M, dtype=torch.float64)
    Y_plain = torch.zeros(1, M, M, dtype=torch.float64, requires_grad=True)
    W = torch.zeros(K, M, dtype=torch.float64)
    out = {"modified": [], "plain": [], "eq8": [], "Y": [], "residual": []}
    for step in range(steps + 1):
        with torch.no_grad():
            alpha = torch.softmax(forward(Y_mod, Z, last, P)[0], -1)  # (K, M): the model's output per class
        out["modified"].append((Fm.T @ Y_mod[0]).numpy())
        out["plain"].append((Fm.T @ Y_plain.detach()[0]).numpy())
        out["eq8"].append(W.numpy().copy())
        out["Y"].append(Y_mod[0].numpy().copy())
        out["residual"].append((target - alpha).numpy())
        if step == steps:
            break
        with torch.no_grad():
            Y_mod += eta_y * (Fm - Fm @ E_prime) @ (target - alpha)
            W += eta_y * (target - torch.softmax(W, -1))
        (g,) = torch.autograd.grad(population_loss(Y_plain, Z, classes).sum() * K, Y_plain)
        with torch.no_grad():
            Y_plain -= eta_y * g
    return {key: np.stack(v) for key, v in out.items()} | {"E": E.numpy(), "F": Fm.numpy()}


def lemma3_study() -> dict:
    """Lemma 3 (:func:`lemma3_run`, :data:`LEMMA3`) on Syn-Medium's layout with two last tokens (K = 4 classes;
    the contexts share the common tokens, so E is not zero) at each common weight of :data:`LEMMA3` (weight 1:
    Syn-Medium's, |lambda_1(E)| far above 1/K; weight 0.1: below it, as Assumption 2 asks), with one random Z
    (uniform in [-1, 1]). For each weight: the largest |F^T Y - W| of the modified and the plain dynamics against
    Eq. (8), relative to max |W|; E's largest |eigenvalue| and largest absolute row sum. Of the modified
    dynamics, with every class once per step (N_n = N_bar, Theta = 0): ``thm5_gap``, the largest |Y - F (I - E')
    W| relative to max |Y| (Theorem 5, Eq. 70, W from Eq. 8), and ``cor1_gap``, the largest |e_tau(n) - alpha_n -
    (M - 1) g(h(s)) zeta_tau(n)| relative to max |e_tau(n) - alpha_n| (Corollary 1, Eq. 71; g is
    :func:`~companion.theory.scan_snap.speed_factor`, h Lemma 5's recursion)."""
    from companion.theory.scan_snap import h_discrete, speed_factor

    d = LEMMA3
    rng = np.random.default_rng(config.seed_streams(d["seed"], ["lemma3"])["lemma3"])
    out = {}
    for weight in d["common_weights"]:
        classes = synthetic(d["num_last"], d["num_next_per_last"], common_weight=weight)
        Z = torch.as_tensor(rng.uniform(-1, 1, (classes.vocab_size, classes.vocab_size)))
        r = lemma3_run(classes, Z, d["eta_y"], d["steps"])
        scale = np.abs(r["eq8"]).max()
        M, K = classes.vocab_size, classes.n_classes
        solution = r["F"] @ np.linalg.inv(np.eye(K) + r["E"]) @ r["eq8"]  # F (I - E') W, I - E' = (I + E)^-1
        speed = (M - 1) * speed_factor(h_discrete(d["steps"], M, d["eta_y"]), M)  # (steps + 1,)
        zetas = np.stack([zeta(int(t), M) for t in classes.next_token])  # (K, M): the rows zeta_tau(n)
        out[weight] = {
            "thm5_gap": float(np.abs(r["Y"] - solution).max() / np.abs(r["Y"]).max()),
            "cor1_gap": float(
                np.abs(r["residual"] - speed[:, None, None] * zetas).max() / np.abs(r["residual"]).max()
            ),
            "modified_gap": float(np.abs(r["modified"] - r["eq8"]).max() / scale),
            "plain_gap": float(np.abs(r["plain"] - r["eq8"]).max() / scale),
            "lambda_1": float(np.abs(np.linalg.eigvalsh(r["E"])).max()),
            "row_sum": float(np.abs(r["E"]).sum(1).max()),
            "K": classes.n_classes,
            "M": classes.vocab_size,
        }
    return out


def lemma3_summary(res: dict) -> report.Summary:
    """The numbers of :func:`lemma3_study` that ``book/scan_snap_theory`` reads (``strong``: the first common weight
    of :data:`LEMMA3`, ``weak``: the second)."""
    (ws, strong), (ww, weak) = ((w, res[w]) for w in LEMMA3["common_weights"])
    return report.Summary(
        {
            "lemma3_K": (strong["K"], "Lemma 3: classes (Syn-Medium's layout with two last tokens)"),
            "lemma3_M": (strong["M"], "Lemma 3: tokens"),
            "lemma3_gap": (
                max(strong["modified_gap"], weak["modified_gap"]),
                "Eq. (26)'s modified gradient: largest |F^T Y - W| / max |W| against Eq. (8), both weights",
            ),
            "thm5_gap": (
                max(strong["thm5_gap"], weak["thm5_gap"]),
                "Theorem 5: largest |Y - F (I - E') W| / max |Y| under Eq. (26), both weights",
            ),
            "cor1_gap": (
                max(strong["cor1_gap"], weak["cor1_gap"]),
                "Corollary 1: largest |e - alpha_n - (M - 1) g(h) zeta| / max |e - alpha_n| under Eq. (26), both weights",
            ),
            "lemma3_strong_lambda": (strong["lambda_1"], f"common weight {ws:g}: largest |eigenvalue| of E"),
            "lemma3_weak_lambda": (weak["lambda_1"], f"common weight {ww:g}: largest |eigenvalue| of E"),
            "lemma3_strong_plain": (
                strong["plain_gap"],
                f"common weight {ws:g}, the model's own gradient: largest |F^T Y - W| / max |W| against Eq. (8)",
            ),
            "lemma3_weak_plain": (
                weak["plain_gap"],
                f"common weight {ww:g}, the model's own gradient: largest |F^T Y - W| / max |W| against Eq. (8)",
            ),
            "lemma3_weak_row_sum": (weak["row_sum"], f"common weight {ww:g}: largest absolute row sum of E"),
            "lemma3_weak_ratio": (
                weak["plain_gap"] / weak["row_sum"],
                f"common weight {ww:g}: the plain dynamics' departure over E's largest absolute row sum",
            ),
        }
    )


# --- Lemmas 13-17: the correlation matrix E of the contexts (Appendix B.5) ------------------------------------


def correlation_matrices(K: int, M: int, overlap: float, draws: int, seed: int = 0) -> np.ndarray:
    """``draws`` matrices E = F^T F - I (K x K) of K unit contexts f_n in R^M with non-negative entries, as
    Assumption 2 has them (E has a zero diagonal and non-negative entries): each f_n puts weight 1 - overlap
    on tokens of its own, spread at random, and ``overlap`` on tokens all classes share, then is normalised."""
    check_int("K", K, low=2)
    check_int("M", M, low=2 * K)
    check_float("overlap", overlap, low=0, high=1, high_open=True)
    check_int("draws", draws, low=1)
    rng = np.random.default_rng(config.seed_streams(seed, ["lemmas13-17"])["lemmas13-17"])
    own = (M - K) // K  # tokens of one class; the last K tokens are shared
    out = []
    for _ in range(draws):
        F = np.zeros((M, K))
        for n in range(K):
            F[n * own : (n + 1) * own, n] = (1 - overlap) * rng.dirichlet(np.ones(own))
            F[M - K :, n] = overlap * rng.dirichlet(np.ones(K))
        F /= np.linalg.norm(F, axis=0)
        out.append(F.T @ F - np.eye(K))
    return np.stack(out)


def matrix_lemmas(E: np.ndarray) -> dict[str, float]:
    """Lemmas 13-17 on correlation matrices E (draws, K, K) whose eigenvalues lie in (-1, 1), with E' = I - (I +
    E)^{-1} as Lemma 14 has it (Appendix B.1 writes E' := (I + E)^{-1} - I, the opposite sign). Each entry is
    the worst draw: ``l13``, max |E_ij| / |lambda_1| (<= 1); ``l14``, max |(I + E)^{-1} - (I - U^T D' U)| with
    lambda'_i = lambda_i / (1 + lambda_i) (0); ``l15``, max_i |lambda_i(E')| / (|lambda_1| / (1 - |lambda_1|))
    (<= 1); ``l16``, the largest diagonal entry of E' (<= 0); ``l17``, max |E' - E| / (|lambda_1|^2 / (1 -
    |lambda_1|)) (<= 1); ``b1_diag``, the smallest diagonal entry of B.1's (I + E)^{-1} - I (Lemma 16 asks
    <= 0 of it); ``lambda_1``, the largest |lambda_1| over the draws."""
    out = {k: -np.inf for k in ("l13", "l14", "l15", "l16", "l17", "lambda_1")}
    out["b1_diag"] = np.inf
    I = np.eye(E.shape[1])
    for e in E:
        lam, U = np.linalg.eigh(e)  # e = U diag(lam) U^T
        l1 = np.abs(lam).max()
        if l1 >= 1:
            raise ValueError(f"|lambda_1|={l1:.3g} is out of range: the lemmas need [0, 1)")
        inv = np.linalg.inv(I + e)
        Ep = I - inv
        values = {
            "l13": np.abs(e).max() / l1,
            "l14": np.abs(inv - (I - U @ np.diag(lam / (1 + lam)) @ U.T)).max(),
            "l15": np.abs(np.linalg.eigvalsh(Ep)).max() / (l1 / (1 - l1)),
            "l16": np.diag(Ep).max(),
            "l17": np.abs(Ep - e).max() / (l1**2 / (1 - l1)),
            "lambda_1": l1,
        }
        out = {k: max(out[k], float(v)) for k, v in values.items()} | {
            "b1_diag": min(out["b1_diag"], float(np.diag(inv - I).min()))
        }
    return out


LEMMAS_E = {"K": 8, "M": 200, "overlaps": (0.05, 0.2), "draws": 100, "seed": 0}


def matrix_lemmas_summary() -> report.Summary:
    """Lemmas 13-17 (:func:`matrix_lemmas`) over :data:`LEMMAS_E`'s draws of :func:`correlation_matrices`."""
    d = LEMMAS_E
    res = [
        matrix_lemmas(correlation_matrices(d["K"], d["M"], o, d["draws"], d["seed"])) for o in d["overlaps"]
    ]
    worst = {k: (min if k == "b1_diag" else max)(r[k] for r in res) for k in res[0]}
    n = f"{d['draws']} draws each of overlap {d['overlaps']}, K = {d['K']}, M = {d['M']}"
    return report.Summary(
        {
            "lemmas_bound_ratio": (
                max(worst["l13"], worst["l15"], worst["l17"]),
                f"Lemmas 13, 15, 17: largest share of the bound used ({n})",
            ),
            "lemma14_gap": (worst["l14"], "Lemma 14: max |(I + E)^-1 - (I - U^T D' U)|"),
            "lemma16_diag": (worst["l16"], "Lemma 16: largest diagonal entry of E' = I - (I + E)^-1"),
            "b1_diag": (worst["b1_diag"], "smallest diagonal entry of B.1's E' := (I + E)^-1 - I"),
            "lambda_1_max": (worst["lambda_1"], "largest |lambda_1| over the draws"),
        }
    )
