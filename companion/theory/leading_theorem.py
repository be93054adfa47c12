"""The leading-terms theorem chapter's computations (How transformers learn to associate tokens, Theorem 4.1 /
D.9, D.6, Lemmas D.2 and D.10-D.11), cached, and their summaries.

:func:`theorem_study`: full-batch gradient descent (float64) from zero and from the small Gaussian
initialisation of Theorem D.12; after every step, each weight's distance to its leading term, the leading
term's size and the theorem's bound. Sizes: :data:`SIZES` (``quick``: a 2-core CPU in about a minute;
``full``: |V| = 500, T = 64, 1024 windows, 60 steps). The text studies are :mod:`companion.theory.leading_study`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch

from companion import cache, config
from companion.data import wordcorpus as wc
from companion.models.attn_only import AttnOnly, AttnOnlyConfig
from companion.report import Summary
from companion.theory import leading_terms as lt

MODULES = ("companion.theory.leading_theorem",)


@dataclass(frozen=True)
class TheoremConfig:
    """Full-batch GD on the first ``n_seqs`` samples: ``steps`` steps at rate ``eta`` (default 1/T, the
    smallest Theorem D.12 allows), depths ``depths`` from zero and one layer from Gaussian init."""

    corpus: wc.CorpusConfig = wc.CorpusConfig("wikitext2", vocab_size=256, T=32)
    n_seqs: int = 256
    steps: int = 24
    eta: float | None = None
    depths: tuple[int, ...] = (1, 2)
    seed: int = 0

    def __post_init__(self):
        config.check_int("seed", self.seed, low=0)
        config.check_int("n_seqs", self.n_seqs, 1)
        config.check_int("steps", self.steps, 1)
        if self.eta is not None:
            config.check_float("eta", self.eta, 0.0, low_open=True)
        for L in self.depths:
            config.check_int("L", L, 1)

    @property
    def rate(self) -> float:
        return self.eta if self.eta is not None else 1.0 / self.corpus.T


SIZES = {
    "quick": TheoremConfig(),
    "full": TheoremConfig(
        wc.CorpusConfig("wikitext2", vocab_size=500, T=64), n_seqs=1024, steps=60, depths=(1, 2)
    ),
}


def configs(profile: str | None = None) -> TheoremConfig:
    """The profile's configuration."""
    return SIZES[config.get_profile(profile)]


# --- Theorem 4.1: distance to the leading terms along full-batch GD ---


def _deviations(model: AttnOnly, stats: lt.Stats, s: int, eta: float, leads: dict) -> dict:
    out = {}
    for name in lt.WEIGHTS:
        params = [model.W_O] if name == "W_O" else list({"V": model.Vv, "W": model.W, "P": model.P}[name])
        scale = lt.leading_scale(name, s, eta)
        for l, p in enumerate(params):
            key = name if name == "W_O" else f"{name}{l + 1}"
            target = scale * leads[name]
            out[key] = (float((p.detach() - target).norm()), float(target.norm()), lt.cosine(p, leads[name]))
    return out


def gd_run(
    seqs: np.ndarray,
    stats: lt.Stats,
    V: int,
    L: int,
    eta: float,
    steps: int,
    init: str = "zero",
    init_std: float = 0.0,
    seed: int = 0,
    device=None,
) -> dict:
    """Full-batch GD in float64 on ``device`` (default the CPU; the model is drawn on the CPU and moved); per
    step s (1..steps) and weight: (||w - lead||_F, ||lead||_F, cosine).

    Kept apart from the training engine (:func:`companion.train.fit`): the theorem is about full-batch gradient
    descent on a fixed set of sequences, and every step is measured (no batches are drawn)."""
    T = seqs.shape[1] - 1
    model = AttnOnly(
        AttnOnlyConfig(V=V, T=T, L=L, init=init, init_std=init_std),
        generator=torch.Generator().manual_seed(seed),
        dtype=torch.float64,
    ).to(device or "cpu")
    data = torch.as_tensor(seqs, device=device)
    leads = {name: stats.leading(name).to(device) for name in lt.WEIGHTS}
    B = stats.B.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=eta)
    rows, losses = [], []
    step1 = None
    for s in range(1, steps + 1):
        opt.zero_grad()
        loss = model.loss(data)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if s == 1:
            others = max(float(p.detach().abs().max()) for p in (model.W, model.Vv, model.P))
            step1 = (float((model.W_O.detach() - eta * B).abs().max()), others)
        rows.append(_deviations(model, stats, s, eta, leads))
    return {"dev": rows, "loss": losses, "step1": step1, "L": L, "init": init, "init_std": init_std}


def theorem_study(
    cfg: TheoremConfig | None = None,
    profile: str | None = None,
    use_cache: bool = True,
    *,
    device=None,
) -> dict:
    """GD runs at each depth from zero, and one layer from N(0, (v/|V|)^2) with v = eta^2 / T^2 (D.12, xi = 0),
    on ``device`` (default :func:`companion.config.get_device`'s; ``"device"`` in the result names it)."""
    cfg = cfg or SIZES[config.get_profile(profile)]

    def compute():
        dev = config.get_device(device)
        corpus = wc.load(cfg.corpus)
        seqs = corpus.tokens[: cfg.n_seqs]
        stats = lt.statistics(seqs, corpus.V)
        eta, T, V = cfg.rate, cfg.corpus.T, corpus.V
        runs = {f"L={L}, zero": gd_run(seqs, stats, V, L, eta, cfg.steps, device=dev) for L in cfg.depths}
        v = eta**2 / T**2
        runs["L=1, Gaussian"] = gd_run(
            seqs, stats, V, 1, eta, cfg.steps, "gaussian", v / V, cfg.seed, device=dev
        )
        return {
            "device": config.device_name(dev),
            "runs": runs,
            "eta": eta,
            "T": T,
            "V": V,
            "n_seqs": len(seqs),
            "corpus": asdict(cfg.corpus),
            "norms": {k: float(stats.leading(k).norm()) for k in lt.WEIGHTS},
        }

    return cache.load_or_compute("leading_theorem", asdict(cfg), compute, MODULES, use_cache=use_cache)


def theorem_table(res: dict, run: str) -> dict:
    """Arrays over s for one run: ``rel[weight]`` (deviation / leading size), ``ratio[weight]``
    (deviation / bound), ``bound_rel[weight]`` (bound / leading size), and ``s``."""
    r = res["runs"][run]
    eta, T = res["eta"], res["T"]
    theorem = "D.6 (one layer)" if r["L"] == 1 else "4.1 / D.9 (L layers)"
    s = np.arange(1, len(r["dev"]) + 1)
    out = {"s": s, "rel": {}, "ratio": {}, "bound_rel": {}, "cos": {}}
    for key in r["dev"][0]:
        base = lt.weight_kind(key)
        dev = np.array([row[key][0] for row in r["dev"]])
        size = np.array([row[key][1] for row in r["dev"]])
        bnd = np.array([lt.bound(base, int(k), eta, T, theorem) for k in s])
        with np.errstate(divide="ignore", invalid="ignore"):
            out["rel"][key] = np.where(size > 0, dev / size, np.nan)
            out["ratio"][key] = dev / bnd
            out["bound_rel"][key] = np.where(size > 0, bnd / size, np.inf)
        out["cos"][key] = np.array([row[key][2] for row in r["dev"]])
    return out


def binding_ratio(table: dict, steps: int) -> tuple[float, int]:
    """Over the first ``steps`` steps of a :func:`theorem_table`, the largest deviation / bound among the cells
    (weight, step) whose bound is at most the leading term's own size (elsewhere the bound allows anything), and
    how many such cells there are (0.0 and 0 if none).

    >>> t = {"ratio": {"W_O": np.array([0.2, 0.5]), "V1": np.array([3.0, 0.9])},
    ...      "bound_rel": {"W_O": np.array([0.7, 1.4]), "V1": np.array([np.inf, 50.0])}}
    >>> binding_ratio(t, 2)
    (0.2, 1)
    """
    worst, cells = 0.0, 0
    for key, v in table["ratio"].items():
        binds = table["bound_rel"][key][:steps] <= 1
        cells += int(binds.sum())
        if binds.any():
            worst = max(worst, float(np.max(v[:steps][binds])))
    return worst, cells


def theorem_summary(res: dict) -> Summary:
    eta, T = res["eta"], res["T"]
    zero_runs = [k for k in res["runs"] if k.endswith("zero")]
    L_max = max(res["runs"][k]["L"] for k in zero_runs)
    s_cover = {
        k: max(1, int(lt.max_steps(eta, T, res["runs"][k]["L"])["4.1 / D.9 (L layers)"])) for k in res["runs"]
    }
    worst_ratio, worst_ratio_all, worst_rel = 0.0, 0.0, 0.0
    binding, binding_n = 0.0, 0  # where the bound is no larger than the leading term: where it says something
    for k in res["runs"]:
        gaussian = res["runs"][k]["init"] == "gaussian"
        tab = theorem_table(res, k)
        n = min(s_cover[k], len(tab["s"]))
        worst_ratio = max(worst_ratio, max(float(np.max(v[:n])) for v in tab["ratio"].values()))
        worst, cells = binding_ratio(tab, n)
        binding, binding_n = max(binding, worst), binding_n + cells
        worst_ratio_all = max(worst_ratio_all, max(float(np.max(v)) for v in tab["ratio"].values()))
        n3 = min(max(3, n), len(tab["s"]))  # s = 3: the first step where all four leading terms are non-zero
        if not gaussian:
            worst_rel = max(worst_rel, max(float(v[n3 - 1]) for v in tab["rel"].values()))
    deep = theorem_table(res, f"L={L_max}, zero")
    last = len(deep["s"])

    def first_over(rel, level=0.1):
        over = np.nonzero(np.nan_to_num(rel, nan=0.0) > level)[0]
        return int(deep["s"][over[0]]) if len(over) else last + 1

    step10 = min(first_over(v) for v in deep["rel"].values())
    r0 = res["runs"][zero_runs[0]]
    one = res["runs"].get("L=1, zero")
    V = res["V"]
    lemmas = {}
    # Lemmas D.4 (s = 2) and D.5 (s = 3), one layer, their own constants
    if one is not None and len(one["dev"]) >= 3:
        d2, d3 = one["dev"][1], one["dev"][2]
        lemmas = {
            "lemma_d4_ratio": (
                max(d2["W_O"][0] / (eta**2 / math.sqrt(V)), d2["V1"][0] / (2 * eta**3 / math.sqrt(V))),
                "Lemma D.4 (s = 2): largest distance / bound (eta^2/sqrt|V| for W_O, 2 eta^3/sqrt|V| for V)",
            ),
            "lemma_d5_ratio": (
                max(
                    d3["W_O"][0] / (3 * eta**2),
                    d3["V1"][0] / (2 * eta**3),
                    d3["W1"][0] / (2 * eta**5 * T),
                    d3["P1"][0] / (2 * eta**5 * T),
                ),
                "Lemma D.5 (s = 3): largest distance / bound (3 eta^2, 2 eta^3, 2 eta^5 T, 2 eta^5 T)",
            ),
        }
    return Summary(
        {
            "eta": (eta, "learning rate (1/T)"),
            "s_covered": (
                s_cover[f"L={L_max}, zero"],
                f"steps Theorem 4.1 covers at L = {L_max}: eta^-1 min(5/(8 sqrt T), 1/(12 L))",
            ),
            "conditions_met": (
                "yes"
                if lt.max_steps(eta, T, L_max)["4.1 / D.9 conditions met"] and res["V"] >= 500
                else "no",
                "the theorem's other conditions (|V| >= 500, T >= 60, L <= sqrt(T)/4) hold here",
            ),
            "step1_dev": (r0["step1"][0], "max |W_O - eta B-bar| after one step"),
            "step1_others": (r0["step1"][1], "max |entry| of W, V, P after one step"),
            **lemmas,
            "worst_ratio": (
                worst_ratio,
                "largest deviation / bound within the covered steps (all runs, weights, layers)",
            ),
            "worst_ratio_all": (worst_ratio_all, f"the same over all {last} steps run"),
            "binding_ratio": (
                binding if binding_n else math.nan,
                "largest deviation / bound within the covered steps where the bound is at most the leading "
                "term's own size (NaN if there is no such step)",
            ),
            "binding_n": (
                binding_n,
                "(run, weight, step) cells within the covered steps where the bound binds",
            ),
            "worst_rel": (
                worst_rel,
                "largest relative deviation at s = max(3, last covered step) (zero-init runs, weights, layers)",
            ),
            "gauss_rel_W_3": (
                float(theorem_table(res, "L=1, Gaussian")["rel"]["W1"][2]),
                "Gaussian init (D.12's largest): relative deviation of W from its leading term at s = 3",
            ),
            "gauss_rel_W_end": (
                float(theorem_table(res, "L=1, Gaussian")["rel"]["W1"][-1]),
                f"the same after {last} steps",
            ),
            "gauss_predicted_3": (
                1.0 / (2 * eta**2 * T**2 * res["norms"]["W"]),
                "prediction v / (2 eta^4 ||Q-bar||) = 1 / (2 eta^2 T^2 ||Q-bar||) (init norm over leading-term norm)",
            ),
            "bound_rel_W_O_3": (
                float(deep["bound_rel"]["W_O"][2]),
                "W_O's bound / size of its leading term at s = 3",
            ),
            "bound_rel_V_3": (
                float(deep["bound_rel"]["V1"][2]),
                "V's bound / size of its leading term at s = 3",
            ),
            "bound_rel_W_3": (
                float(deep["bound_rel"]["W1"][2]),
                "W's bound / size of its leading term at s = 3",
            ),
            "bound_rel_W_end": (
                float(deep["bound_rel"]["W1"][-1]),
                f"W's bound / size of its leading term at s = {last}",
            ),
            "step_10pct": (
                step10,
                f"first step where a weight of the L = {L_max} run is 10% away from its leading term ({last + 1}: none within {last})",
            ),
            "steps_run": (last, "gradient steps run"),
            "norm_Q": (res["norms"]["W"], "||Q-bar||_F"),
            "rel_max_end": (
                max(float(v[-1]) for v in deep["rel"].values()),
                f"largest relative deviation over the L = {L_max} run's weights after {last} steps",
            ),
        }
    )


# --- Lemma D.2: the softmax Jacobian ---


def lemma_summary(sizes=(2, 5, 16, 64), draws: int = 4000, seed: int = 0) -> Summary:
    """Operator norm of the softmax Jacobian at the uniform distribution, at two equal probabilities
    (the rest ~0), and the largest over random logits of many scales, against Lemma D.2's 1/sqrt(i)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for i in sizes:
        scales = torch.logspace(-1, 1.5, draws, dtype=torch.float64)[:, None]
        z = torch.randn(draws, i, generator=g, dtype=torch.float64) * scales
        two = torch.full((i,), -60.0, dtype=torch.float64)
        two[:2] = 0.0
        tried = torch.cat([lt.softmax_jacobian_norm(z), lt.softmax_jacobian_norm(two)[None]])
        out[f"uniform_x_i_{i}"] = (
            float(lt.softmax_jacobian_norm(torch.zeros(i))) * i,
            f"i = {i}: norm at the uniform distribution, times i",
        )
        out[f"max_x_sqrt_i_{i}"] = (
            float(tried.max()) * math.sqrt(i),
            f"i = {i}: largest norm tried, times sqrt(i) (Lemma D.2: <= 1)",
        )
    out["max_norm"] = (
        max(out[f"max_x_sqrt_i_{i}"][0] / math.sqrt(i) for i in sizes),
        "largest norm tried, any i",
    )
    return Summary(out)


def init_norms_summary(sizes=(100, 500), draws: int = 50, v: float = 1.0, seed: int = 0) -> Summary:
    """Lemmas D.10-D.11: |V| x |V| matrices of i.i.d. N(0, v^2 / |V|^2) entries (xi = 0); the largest
    operator norm over draws against 3 v / sqrt|V|, the largest Frobenius norm against 2 v."""
    g = torch.Generator().manual_seed(seed)
    op, fro = [], []
    for V in sizes:
        M = torch.randn(draws, V, V, generator=g, dtype=torch.float64) * (v / V)
        op.append(float(torch.linalg.matrix_norm(M, ord=2).max()) / (3 * v / math.sqrt(V)))
        fro.append(float(torch.linalg.matrix_norm(M).max()) / (2 * v))
    return Summary(
        {
            "init_op_ratio": (
                max(op),
                f"largest operator norm over {draws} draws / (3 v / sqrt|V|), |V| in {sizes} (D.10: <= 1)",
            ),
            "init_fro_ratio": (max(fro), "largest Frobenius norm / (2 v) (D.11: <= 1)"),
        }
    )
