"""The associative-memory chapter's computations (the talk, slides 6-7), cached, and its summary."""

from __future__ import annotations

import numpy as np

from companion import cache, config
from companion.report import Summary, loglog_slope, markdown_table
from companion.theory import memories as mem

MODULES = ("companion.theory.memories_study",)
SIZES = {
    "quick": dict(ds=(32, 64, 128, 256), fractions=11, queries=1024, seeds=(0,), step_ds=(32, 64, 128, 256)),
    "full": dict(
        ds=(32, 64, 128, 256, 512),
        fractions=21,
        queries=4096,
        seeds=(0, 1, 2),
        step_ds=(32, 64, 128, 256, 512),
    ),
}
Q_RANGE = (1 / 128, 1 / 4)  # M / d^2 from 1/128 to 1/4
STEP_RATIOS = (0.25, 0.5, 1, 2, 4, 16)  # N / d for the one-step grid
MAX_N = 4096
ALPHA_RANGE = (0.5, 1.5)  # per-pair weights, uniform
ETA = 1.0


def capacity_points(d: int, fractions: int) -> np.ndarray:
    """Memory sizes M = d^2 q for q on a log grid over :data:`Q_RANGE` (at least 2 pairs)."""
    q = np.geomspace(*Q_RANGE, fractions)
    return np.unique(np.maximum(2, np.round(d * d * q).astype(int)))


def capacity_run(d: int, M: int, weighted: bool, queries: int, seed: int) -> dict:
    """A memory of M pairs z -> y (a random bijection), accuracy over (at most) ``queries`` random queries;
    with per-pair weights also the correct scores and weights of the queried pairs."""
    rng = np.random.default_rng([seed, d, M, int(weighted)])
    E, U = mem.embeddings(d, M, rng), mem.embeddings(d, M, rng)
    f = rng.permutation(M)
    alpha = rng.uniform(*ALPHA_RANGE, size=M) if weighted else None
    W = mem.memory(U, E, np.arange(M), f, alpha)
    z = rng.choice(M, size=min(M, queries), replace=False)
    S = mem.scores(W, U, E, z)
    out = {"acc": float((S.argmax(0) == f[z]).mean()), "pred": mem.predicted_accuracy(M, d, M)}
    if weighted:
        out |= {"alpha": alpha[z], "score": S[f[z], np.arange(len(z))], "hit": S.argmax(0) == f[z]}
    return out


def step_run(d: int, N: int, seed: int) -> dict:
    """One population gradient step from zero on z uniform over [N], y = f*(z) (N outputs): accuracy of
    argmax_k u_k^T W_1 e_z and the mean correct-minus-wrong score gap in units of eta / N."""
    rng = np.random.default_rng([seed, d, N, 7])
    E, U = mem.embeddings(d, N, rng), mem.embeddings(d, N, rng)
    f = rng.permutation(N)
    W1 = mem.one_step(U, E, f, ETA)
    return {"acc": mem.recall_accuracy(W1, U, E, np.arange(N), f), "gap": mem.mean_gap(W1, U, E, f) * N / ETA}


def lemma_checks(seed: int = 0) -> dict:
    """The lemma against autograd at a random W and a random joint distribution; the slide's one-step
    closed form against an autograd step from zero (z uniform, y = f*(z))."""
    rng = np.random.default_rng(seed)
    d, n_in, n_out = 24, 30, 20
    E, U = mem.embeddings(d, n_in, rng), mem.embeddings(d, n_out, rng)
    p = rng.dirichlet(np.ones(n_in * n_out)).reshape(n_in, n_out)
    W = rng.standard_normal((d, d))
    g_lemma, g_auto = mem.lemma_gradient(W, U, E, p), mem.autograd_gradient(W, U, E, p)
    N = 40
    E, U = mem.embeddings(d, N, rng), mem.embeddings(d, N, rng)
    f = rng.permutation(N)
    p = np.zeros((N, N))
    p[np.arange(N), f] = 1.0 / N
    step = -ETA * mem.autograd_gradient(np.zeros((d, d)), U, E, p)
    closed = mem.one_step(U, E, f, ETA)
    return {
        "lemma": float(np.abs(g_lemma - g_auto).max() / np.abs(g_auto).max()),
        "one_step": float(np.abs(step - closed).max() / np.abs(closed).max()),
    }


def study(profile: str | None = None, use_cache: bool = True) -> dict:
    """The capacity grid (with and without weights), the one-step grid and the lemma checks (cached)."""
    sizes = SIZES[config.get_profile(profile)]

    def compute():
        cap = {
            (d, int(M), w): [capacity_run(d, int(M), w, sizes["queries"], s) for s in sizes["seeds"]]
            for d in sizes["ds"]
            for M in capacity_points(d, sizes["fractions"])
            for w in (False, True)
        }
        steps = {
            (d, N): step_run(d, N, 0)
            for d in sizes["step_ds"]
            for N in sorted({max(2, int(r * d)) for r in STEP_RATIOS})
            if N <= MAX_N
        }
        return {"capacity": cap, "steps": steps, "lemma": lemma_checks(), "sizes": sizes}

    settings = {
        "sizes": sizes,
        "q": Q_RANGE,
        "step_ratios": STEP_RATIOS,
        "max_n": MAX_N,
        "alpha": ALPHA_RANGE,
        "eta": ETA,
    }
    return cache.load_or_compute("memories", settings, compute, MODULES, use_cache=use_cache)


def curves(res: dict, weighted: bool = False) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per d: memory sizes M, mean accuracy over seeds, predicted accuracy."""
    out = {}
    for d in res["sizes"]["ds"]:
        keys = sorted(k for k in res["capacity"] if k[0] == d and k[2] == weighted)
        M = np.array([k[1] for k in keys])
        acc = np.array([np.mean([r["acc"] for r in res["capacity"][k]]) for k in keys])
        pred = np.array([res["capacity"][k][0]["pred"] for k in keys])
        out[d] = (M, acc, pred)
    return out


def crossing(M: np.ndarray, acc: np.ndarray, level: float) -> float:
    """The memory size at which the accuracy first falls below ``level`` (log-linear interpolation).

    >>> round(crossing(np.array([10, 100, 1000]), np.array([1.0, 0.95, 0.5]), 0.9), 1)
    129.2
    """
    below = np.nonzero(acc < level)[0]
    if len(below) == 0:
        return float("inf")
    i = below[0]
    if i == 0:
        return float(M[0])
    t = (acc[i - 1] - level) / (acc[i - 1] - acc[i])
    return float(np.exp(np.log(M[i - 1]) + t * (np.log(M[i]) - np.log(M[i - 1]))))


def summary(res: dict) -> Summary:
    cur = curves(res)
    ds = np.array(sorted(cur))
    m90 = np.array([crossing(cur[d][0], cur[d][1], 0.9) for d in ds])
    p90 = np.array([crossing(cur[d][0], cur[d][2], 0.9) for d in ds])
    big = int(max(ds))
    weighted = [r for k, runs in sorted(res["capacity"].items()) if k[0] == big and k[2] for r in runs]
    at_d = [r for r in weighted if 0.5 < r["acc"] < 1.0] or weighted
    smallest = weighted[0]  # the smallest weighted memory at the largest d: cross terms are smallest
    slope = float(np.polyfit(smallest["alpha"], smallest["score"], 1)[0])
    fail_alpha = np.concatenate([r["alpha"][~r["hit"]] for r in at_d])
    hit_alpha = np.concatenate([r["alpha"][r["hit"]] for r in at_d])
    steps = res["steps"]
    near = [v["acc"] for (d, N), v in steps.items() if N <= d and d >= 128]
    perfect = {
        d: max((N for (dd, N), v in steps.items() if dd == d and v["acc"] >= 0.99), default=0)
        for d in sorted({k[0] for k in steps})
    }
    gap_key = (max(perfect), max(2, max(perfect) // 4))
    return Summary(
        {
            "lemma_err": (
                res["lemma"]["lemma"],
                "max |lemma gradient - autograd| / max |autograd|, random W and p",
            ),
            "one_step_err": (res["lemma"]["one_step"], "max |W_1 closed form - autograd step| / max |W_1|"),
            "score_slope": (
                slope,
                f"d = {big}, smallest memory: slope of u_y^T W e_z against the pair's weight alpha",
            ),
            "m90_over_d2": (
                float(np.median(m90 / ds**2)),
                "median over d of M_90 / d^2 (M_90: memory size where accuracy falls below 0.9)",
            ),
            "m90_exponent": (
                loglog_slope(ds, m90),
                f"log-log slope of M_90 against d, d in {tuple(int(d) for d in ds)}",
            ),
            "pred_exponent": (loglog_slope(ds, p90), "the same for the Gaussian prediction"),
            "pred_gap": (float(np.max(np.abs(np.log(m90 / p90)))), "max |log(M_90 / predicted M_90)| over d"),
            "alpha_failed": (
                float(fail_alpha.mean()) if len(fail_alpha) else float("nan"),
                f"weighted memories at d = {big} with 0.5 < accuracy < 1: mean weight of the pairs not recalled",
            ),
            "alpha_recalled": (float(hit_alpha.mean()), "... and of the pairs recalled"),
            "step_near_perfect_min": (
                min(near),
                "one step: lowest accuracy over the grid points with N <= d and d >= 128",
            ),
            "step_perfect_largest_N": (
                perfect[max(perfect)],
                f"one step: largest N with accuracy >= 0.99 at d = {max(perfect)}",
            ),
            "step_gap": (
                steps[gap_key]["gap"],
                f"one step, d = {gap_key[0]}, N = {gap_key[1]}: mean correct-minus-wrong score gap in units of eta/N",
            ),
            "step_acc_small_d": (
                steps[(min(perfect), min(perfect))]["acc"],
                f"one step, d = N = {min(perfect)}: accuracy",
            ),
            "step_acc_largest": (
                steps[max(k for k in steps if k[0] == max(perfect))]["acc"],
                f"one step, d = {max(perfect)}, N = {max(k[1] for k in steps if k[0] == max(perfect))}: accuracy",
            ),
        }
    )


def step_table(res: dict) -> str:
    """The one-step accuracy grid as Markdown: rows d, columns N / d."""
    ds = sorted({d for d, _ in res["steps"]})
    rows = []
    for d in ds:
        row = [d]
        for r in STEP_RATIOS:
            N = max(2, int(r * d))
            row.append(res["steps"][(d, N)]["acc"] if (d, N) in res["steps"] else "—")
        rows.append(row)
    return markdown_table(["d"] + [f"N = {r:g} d" for r in STEP_RATIOS], rows)
