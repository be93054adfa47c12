"""The attention chapter's computation (Section 3.2, Theorem 2, App. B.3 Eq. (24), App. F), cached, and its summary.

:func:`study` computes one population W_QK step in Appendix B.3's setting
over N and over T, and trains the simplified model of Eq. (2) from zero for
several N (cached); :func:`summary` gives the named values the chapter
asserts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from companion import cache, config
from companion.config import check_int, check_sizes
from companion.report import Summary, loglog_slope, markdown_table, mean_se
from companion.theory import one_step as ost

ALPHA = 0.4
T_BASE, N_BY_T = 64, 20
DYN = dict(T=64, batch=128, lr=2.0)
MODULES = ("companion.theory.one_step", "companion.theory.attention_study")
POPULATION_CHUNK = 5000  # contexts per draw of W_V's population step
PARTS = ("we_diag", "prev_diag", "noise_row", "q_noise")  # Eq. (26)'s entries (see eq26_part)


@dataclass(frozen=True)
class AttentionStudy(config.Profiled):
    """The sizes of the chapter's computation: the one-step W_QK projections at ``Ns`` (T = 64) and at ``Ts``
    (N = 20) from ``m`` contexts (m 64 / T, at least 10,000, at T), App. F's phases at ``Ns``, and Eq. (2)
    trained from zero at ``dyn_Ns`` for ``dyn_steps`` steps (T = 64, batch 128, lr 2). The seeds are fixed by
    the study (0 over N, 1 over T, 2 for the phases; the training its own). Everything is computed with numpy
    and torch on the CPU, whatever the run's device.

    Quick: N up to 80, 50,000 contexts, T up to 1024, 800 steps (enough for the matching head of every N to
    form: N = 40 forms near step 450 at lr 2). Full: N up to 160, 32 times the contexts (Theorem 2's first-line gap
    and the gaps of Eq. (26)'s entries are of order N^-4, so the contexts must grow with N to resolve them),
    T up to 4096, 2000 steps.

    >>> AttentionStudy.full().m
    1600000
    >>> AttentionStudy(m=0)
    Traceback (most recent call last):
    ...
    ValueError: m=0 is out of range: allowed [2, inf)
    """

    profile: str = "quick"
    Ns: tuple = (10, 20, 40, 80)
    m: int = 50_000
    Ts: tuple = (64, 256, 1024)
    dyn_Ns: tuple = (10, 20, 40)
    dyn_steps: int = 800

    @classmethod
    def full(cls, **overrides) -> "AttentionStudy":
        base = dict(profile="full", Ns=(10, 20, 40, 80, 160), m=1_600_000, Ts=(64, 256, 1024, 4096))
        return cls(**{**base, "dyn_Ns": (10, 20, 40, 80), "dyn_steps": 2000, **overrides})

    def __post_init__(self):
        config.get_profile(self.profile)
        for name, low in (("Ns", 3), ("Ts", 2), ("dyn_Ns", 3)):
            check_sizes(name, getattr(self, name), low)
        if self.Ts[0] != T_BASE:
            raise ValueError(f"Ts={self.Ts!r} must start at T = {T_BASE}, the T of the projections over N")
        check_int("m", self.m, low=2)
        check_int("dyn_steps", self.dyn_steps, low=1)


def qk_projection(N: int, T: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """B.3's setting: W_F with p(tau) = alpha/2, W_V one population step from zero, then -grad W_QK.

    Returns (mean, standard error) of W_E(q)^T(-grad W_QK)W_E(k) for every key token k.
    """
    task = ost.simplified_task(N, T, ALPHA)
    rng = np.random.default_rng([seed, N, T])
    W_F = ost.noise_ff(N, ALPHA / 2)
    W_V = ost.population_value_gradient(task, W_F, m, rng, chunk=POPULATION_CHUNK)
    return ost.qk_gradient(task, W_V, W_F, m, rng, chunk=max(200, 2000 * 64 // T))


def eq26_value(N: int, eta_t1: float = 1.0, eta_t2: float = 1.0, q_noise: bool = True) -> np.ndarray:
    """W_V (2V x 2V, one-hot coordinates, q = 0, tau = N) with the structure of Eq. (26) after phases 1-2.

    W_U(N+1)^T W_V W_E(k) = eta t1 / N for every k; W_U(j)^T W_V W_E(j) = (eta t1 + eta t2) / N^2 and
    W_U(j)^T W_V W~_E(j) = eta t2 / N^2 for j <= N; W_U(q)^T W_V W_E(N+1) = eta t1 / N^2 (left out with
    ``q_noise=False``, as the proof of Theorem 2 does); all else 0.
    """
    V = N + 1
    W = np.zeros((2 * V, 2 * V))
    j = np.arange(N)
    W[N, :V] = eta_t1 / N
    W[j, j] = (eta_t1 + eta_t2) / N**2
    W[j, V + j] = eta_t2 / N**2
    if q_noise:
        W[0, N] = eta_t1 / N**2
    return W


def phase_projections(N: int, T: int, m: int, seed: int) -> dict:
    """Appendix F's phases 2 and 3 at W_F = the learned noise association (p(tau) = alpha exactly).

    ``v``: -grad W_V at W_V = 0 (Eq. (25)), averaged over ordinary tokens j, k != q: the diagonal on W_E(k)
    and on W~_E(k), and the off-diagonal mean on W_E(k). Then one population step of W_QK with W_V as in
    Eq. (26) without its (q, N+1) entry, as the proof uses it (:func:`eq26_value`): ``other_gap`` =
    xi_{q->j} - xi_{k->l} (means over ordinary j, k != q, l), as (value, standard error), both over the
    sampled sequences' own gaps (each sequence gives both terms, so their errors are not added). The first
    line's gap xi_{q->j} - xi_{q->N+1} is :func:`gap_parts`'.
    """
    task = ost.simplified_task(N, T, ALPHA)
    rng = np.random.default_rng([seed, N, T])
    W_F = ost.noise_ff(N, ALPHA)
    G = ost.population_value_gradient(task, W_F, m, rng)
    V, o = N + 1, np.arange(1, N)
    D, P = G[np.ix_(o, o)], G[np.ix_(o, V + o)]
    n = len(o)
    S = ost.qk_gradient_samples(
        task, eq26_value(N, q_noise=False), W_F, m, rng, chunk=max(200, 2000 * 64 // T)
    )
    return {
        "v_diag": float(np.diag(D).mean()),
        "v_prev": float(np.diag(P).mean()),
        "v_off": float((D.sum() - np.trace(D)) / (n * (n - 1))),
        "other_gap": mean_se(S[:, V] - S[:, V + o].mean(1)),
    }


def eq26_part(N: int, part: str) -> np.ndarray:
    """One entry of Eq. (26) alone at unit size, in :func:`eq26_value`'s coordinates: ``we_diag``
    (W_U(j)^T W_V W_E(j) = 1 / N^2, j <= N), ``prev_diag`` (W_U(j)^T W_V W~_E(j) = 1 / N^2), ``noise_row``
    (W_U(N+1)^T W_V W_E(k) = 1 / N, every k) or ``q_noise`` (W_U(q)^T W_V W_E(N+1) = 1 / N^2).

    >>> bool(np.allclose(eq26_part(5, "we_diag") * 2 + eq26_part(5, "prev_diag") + eq26_part(5, "noise_row")
    ...                  + eq26_part(5, "q_noise"), eq26_value(5)))
    True
    """
    if part not in PARTS:
        raise ValueError(f"part={part!r} is not one of Eq. (26)'s entries: allowed {', '.join(PARTS)}")
    V, j = N + 1, np.arange(N)
    W = np.zeros((2 * V, 2 * V))
    if part == "we_diag":
        W[j, j] = 1.0 / N**2
    elif part == "prev_diag":
        W[j, V + j] = 1.0 / N**2
    elif part == "noise_row":
        W[N, :V] = 1.0 / N
    else:
        W[0, N] = 1.0 / N**2
    return W


def gap_parts(N: int, T: int, m: int, seed: int, splits: int = 8) -> dict[str, np.ndarray]:
    """Theorem 2's first-line gap xi_{q->j} - xi_{q->N+1} (mean over ordinary j) after one population W_QK step
    from each of Eq. (26)'s entries alone at unit size (:func:`eq26_part`), and from Eq. (26) itself
    (eta t1 = eta t2 = 1) without and with its (q, N+1) entry (``eq26``, ``eq26_kept``), all on the same
    contexts (common random numbers): for each, its values on ``splits`` independent parts of m / splits
    contexts. At W_QK = 0 the step is linear in W_V but for the softmax's response to W_V, so that Eq. (26)'s
    gap is t1 (we_diag + noise_row [+ q_noise]) + t2 (we_diag + prev_diag) in these units.
    """
    check_int("splits", splits, low=2)
    check_int("m", m, low=2 * splits)
    task = ost.simplified_task(N, T, ALPHA)
    W_F = ost.noise_ff(N, ALPHA)
    o = np.arange(1, N)
    values = {
        **{part: eq26_part(N, part) for part in PARTS},
        "eq26": eq26_value(N, q_noise=False),
        "eq26_kept": eq26_value(N),
    }
    gaps = {name: [] for name in values}
    for k in range(splits):
        for name, W_V in values.items():
            rng = np.random.default_rng([seed, N, T, k])  # the same contexts for every W_V
            Q, _ = ost.qk_gradient(task, W_V, W_F, m // splits, rng, chunk=max(200, 2000 * 64 // T))
            gaps[name].append(Q[o].mean() - Q[N])
    return {name: np.array(v) for name, v in gaps.items()}


def study(profile: str | None = None, use_cache: bool = True) -> dict:
    """:func:`run` of the profile's :class:`AttentionStudy`."""
    return run(AttentionStudy.for_profile(profile), use_cache=use_cache)


def run(exp: AttentionStudy, *, device=None, progress: bool = True, use_cache: bool = True) -> dict:
    """Compute (or load) the study: ``by_N[N]`` (T = 64), ``by_T[T]`` (N = 20): projections; ``dyn[N]``:
    training records; ``phases[N]``: :func:`phase_projections` (T = 64); ``parts[N]``: :func:`gap_parts`
    (T = 64); ``sizes``, ``seconds`` and
    ``device`` (the CPU, whatever ``device`` says: the study is numpy Monte Carlo)."""

    def compute():
        start = time.perf_counter()
        out = {
            "by_N": {N: qk_projection(N, T_BASE, exp.m, 0) for N in exp.Ns},
            "by_T": {T: qk_projection(N_BY_T, T, max(10_000, exp.m * T_BASE // T), 1) for T in exp.Ts},
            "dyn": {
                N: ost.train_simplified(
                    N, DYN["T"], ALPHA, steps=exp.dyn_steps, batch=DYN["batch"], lr=DYN["lr"]
                )
                for N in exp.dyn_Ns
            },
            "phases": {N: phase_projections(N, T_BASE, exp.m, 2) for N in exp.Ns},
            "parts": {N: gap_parts(N, T_BASE, exp.m, 3) for N in exp.Ns},
            "sizes": exp.sizes(),
        }
        return {**out, "seconds": time.perf_counter() - start, "device": config.device_name("cpu")}

    return cache.load_or_compute("attention", exp, compute, MODULES, use_cache=use_cache)


def first_batch(exp: AttentionStudy):
    """The first contexts the study draws: those of W_V's population step at the smallest N (T = 64)."""
    N = exp.Ns[0]
    rng = np.random.default_rng([0, N, T_BASE])
    return ost.simplified_task(N, T_BASE, ALPHA).sample(rng, min(POPULATION_CHUNK, exp.m))


def half_time(y: np.ndarray) -> int:
    """First record at which |y| reaches half its final |value|."""
    y = np.abs(np.asarray(y))
    return int(np.argmax(y >= 0.5 * y[-1]))


def others_by_T(res: dict) -> dict[int, tuple[float, float]]:
    """{T: (mean over ordinary keys k != q of the projection, its standard error)} at N = 20."""
    out = {}
    for T, (mean, se) in res["by_T"].items():
        k = slice(1, N_BY_T)
        out[T] = (float(mean[k].mean()), float(np.sqrt((se[k] ** 2).sum()) / (N_BY_T - 1)))
    return out


def summary(res: dict) -> Summary:
    Ns = np.array(sorted(res["by_N"]))
    noise_proj = np.array([res["by_N"][N][0][N] for N in Ns])
    others = others_by_T(res)
    T_large = max(others)
    dyn = res["dyn"]
    dNs = np.array(sorted(dyn))
    ff_half = {N: half_time(dyn[N]["ff_noise"]) for N in dNs}
    qk_half = {N: half_time(dyn[N]["qk_trigger"]) for N in dNs}
    return Summary(
        {
            "noise_proj_max": (
                float(noise_proj.max()),
                "largest (least negative) noise-key projection over N (T = 64)",
            ),
            "noise_slope": (
                loglog_slope(Ns, np.abs(noise_proj)),
                "log-log slope in N of |noise-key projection|",
            ),
            "others_small": (others[T_BASE][0], f"mean ordinary-key projection, N = {N_BY_T}, T = {T_BASE}"),
            "others_small_z": (others[T_BASE][0] / others[T_BASE][1], "the same over its standard error"),
            "others_large": (others[T_large][0], f"mean ordinary-key projection, N = {N_BY_T}, largest T"),
            "others_large_z": (others[T_large][0] / others[T_large][1], "the same over its standard error"),
            "T_large": (T_large, "largest T"),
            "ff_half": (max(ff_half.values()), "largest W_F half-time over N (steps)"),
            "qk_half": (min(qk_half.values()), "smallest W_QK (keys after q) half-time over N (steps)"),
            "phase_ratio": (
                min(qk_half[N] / max(ff_half[N], 1) for N in dNs),
                "smallest ratio of the W_QK half-time to the W_F half-time over N",
            ),
            "f_slope": (
                loglog_slope(dNs, [dyn[N]["ff_noise"][1] for N in dNs]),
                "log-log slope in N of the first W_F noise update",
            ),
            "v_slope": (
                loglog_slope(dNs, [dyn[N]["v_noise"][1] for N in dNs]),
                "log-log slope in N of the first W_V noise-row update",
            ),
            "qk_noise_min": (
                min(float(dyn[N]["qk_noise"][-1]) for N in dNs),
                "smallest final xi_{q->j} - xi_{q->tau} over N (correct over noise keys)",
            ),
            "qk_trigger_min": (
                min(float(dyn[N]["qk_trigger"][-1]) for N in dNs),
                "smallest final trigger-key margin over N (keys after q over others)",
            ),
            **phase_entries(res["phases"]),
            **parts_entries(res["parts"]),
            "formed": (
                sum(float(dyn[N]["qk_trigger"][-1]) > 1.0 for N in dNs),
                "runs (of all N) whose trigger-key margin exceeds 1 at the end",
            ),
        }
    )


def phase_entries(phases: dict) -> dict:
    """Summary entries of Eq. (25) and of Theorem 2's rates (see :func:`phase_projections`)."""
    Ns = np.array(sorted(phases))
    big = phases[Ns[-1]]

    def over(key, i=0):
        return np.array(
            [phases[N][key][i] if isinstance(phases[N][key], tuple) else phases[N][key] for N in Ns]
        )

    other_z = over("other_gap") / over("other_gap", 1)
    return {
        "v25_slope": (
            loglog_slope(Ns, over("v_diag")),
            "log-log slope in N of W_U(j)^T(-grad W_V)W_E(j), phase 2",
        ),
        "v25_coef": (big["v_diag"] * Ns[-1] ** 2, "that diagonal times N^2, largest N (Eq. (25) prints 1)"),
        "v25_coef_rederived": (big["v_diag"] * Ns[-1] ** 2 / (1 - ALPHA) ** 2, "the same over (1 - alpha)^2"),
        "v25_off_slope": (loglog_slope(Ns, np.abs(over("v_off"))), "log-log slope in N of |off-diagonal|"),
        "t2_other_slope": (
            loglog_slope(Ns, over("other_gap")),
            "log-log slope in N of xi_{q->j} - xi_{k->l}, k != q, after one W_QK step (Eq. (26))",
        ),
        "t2_other_z": (float(other_z.min()), "that gap over its standard error, smallest over N"),
    }


def part_gap(parts: dict, N: int, *names: str) -> tuple[float, float]:
    """The first-line gap at N of the sum of :func:`gap_parts`' entries ``names``, in units of N^-4 (the gap's
    order): mean and standard error over parts."""
    return mean_se(sum(parts[N][name] for name in names) * float(N) ** 4)


def parts_entries(parts: dict) -> dict:
    """Summary entries of Theorem 2's first-line gap by entry of Eq. (26) (see :func:`gap_parts`), in units of
    N^-4, the gap's order."""
    Ns = np.array(sorted(parts))

    def gap(N, *names):
        return part_gap(parts, N, *names)

    we = np.array([gap(N, "we_diag") for N in Ns])
    net = np.array([gap(N, "we_diag", "prev_diag") for N in Ns])
    entry = np.array([gap(N, "q_noise") for N in Ns])
    eq26 = np.array([gap(N, "eq26") for N in Ns])
    kept = np.array([gap(N, "eq26_kept") for N in Ns])
    linear = [
        abs(eq26[i, 0] - gap(N, "we_diag", "we_diag", "prev_diag", "noise_row")[0]) for i, N in enumerate(Ns)
    ]
    worst = int(np.argmax(np.abs(net[:, 0])))
    return {
        "t2_noise_z": (
            float((eq26[:, 0] / eq26[:, 1]).min()),
            "xi_{q->j} - xi_{q->N+1} after one W_QK step from Eq. (26) without its (q, N+1) entry, as the proof "
            "uses it (eta t1 = eta t2 = 1), over its standard error, smallest over N",
        ),
        "t2_noise_z_max": (float((eq26[:, 0] / eq26[:, 1]).max()), "the same, largest over N"),
        "t2_gap_we": (
            float(we[:, 0].min()),
            "first-line gap per unit W_E diagonal of W_V (x N^4), smallest over N",
        ),
        "t2_gap_noise_row": (
            float(max(abs(gap(N, "noise_row")[0]) for N in Ns)),
            "|the same per unit noise row| (x N^4), largest over N",
        ),
        "t2_phase2_net": (
            float(net[worst, 0]),
            "the same per unit of phase 2 (W_E plus W~_E diagonals, x N^4), largest in size over N",
        ),
        "t2_phase2_net_z": (
            float(max(net[:, 0] / net[:, 1], key=abs)),
            "the same over its standard error, largest in size over N",
        ),
        "t2_entry_over_gap": (
            float((entry[:, 0] / we[:, 0]).max()),
            "the (q, N+1) entry's gap over the W_E diagonal's, per unit of t1: the entry's effect over the gap "
            "without it; largest over N (below -1: the entry outweighs the gap)",
        ),
        "t2_entry_gap": (float(entry[:, 0].max()), "the (q, N+1) entry's gap (x N^4), largest over N"),
        "t2_entry_slope": (
            loglog_slope(Ns, np.abs(entry[:, 0]) / Ns.astype(float) ** 4),
            "log-log slope in N of |that gap| (the first line's order is N^-4)",
        ),
        "t2_kept_z_max": (
            float((kept[:, 0] / kept[:, 1]).max()),
            "Eq. (26) with its (q, N+1) entry (t2 = t1): the gap over its standard error, largest over N",
        ),
        "t2_linear_dev": (
            float(max(linear)),
            "|Eq. (26)'s gap - the sum of its entries' gaps| (x N^4), largest over N",
        ),
    }


def parts_table(parts: dict) -> str:
    """A markdown table of :func:`gap_parts`: for each N, each gap (x N^4) as mean ± standard error over parts."""
    names = list(next(iter(parts.values())))
    rows = []
    for N in sorted(parts):
        cells = (part_gap(parts, N, name) for name in names)
        rows.append([f"{N}", *(f"{m:+.3f} ± {se:.3f}" for m, se in cells)])
    return markdown_table(["N", *names], rows)
