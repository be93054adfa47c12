"""Eq. (12) of the talk's factual-recall paper (Theorem, informal; F2): an attention-only one-layer model that
stores every fact by construction, written into the model of a :class:`companion.experiments.fact_capacity.CapacityExperiment`,
and the width it needs as the numbers of relations and answers grow (``book/fact_capacity``)."""

from __future__ import annotations

import numpy as np
import torch

from companion import report
from companion.config import check_choice
from companion.experiments.fact_capacity import CapacityExperiment
from companion.models.one_layer import OneLayerTF

READOUTS = ("embedding", "dual")


def construct(exp: CapacityExperiment, beta: float = 8.0, readout: str = "dual") -> OneLayerTF:
    """Write the construction of Eq. (12) into the model of ``exp`` (its own random embeddings), MLP off.

    The S + R subject and relation tokens are split into groups of at most d_h, one group per head (so
    H d_h >= S + R is needed). Head h attends to its group: W_K^h W_Q^h gives score beta phi(z)^T phi(z')
    for z' in the group, with the query EOS; its value keeps the group's coordinates phi(z')^T x and its
    output writes, for each z' of the group, the sum of the unembeddings of the answers A_z' that z'
    belongs to: W_O^T W_V ~ sum_z sum_{a in A_z} phi(a) phi(z)^T P_h (A_s: the R answers of subject s,
    A_r: the D answers of relation r). The logit of a is then about 1{a in A_s} + 1{a in A_r}: 2 for the
    fact, at most 1 for any other answer, up to the interference of random embeddings, O(sqrt((R + D)/d)).

    ``readout="embedding"`` reads token z' with phi(z') itself, the literal formula; ``"dual"`` with the
    dual vector of phi(z') in the span of the vocabulary's embeddings (the projection P_h made exact: for
    d >= vocabulary size, key and value see exactly 1{z_t = z'}), leaving only the unembeddings' interference.

    Raises:
        ValueError: H d_h < S + R (the construction needs a head slot per subject and relation), or an
            unknown readout.
    """
    check_choice("readout", readout, READOUTS)
    if exp.H * exp.d_h < exp.S + exp.R:
        raise ValueError(
            f"H d_h = {exp.H * exp.d_h} < S + R = {exp.S + exp.R}: the construction needs H d_h >= "
            f"S + R (allowed: H >= {-(-(exp.S + exp.R) // exp.d_h)} at d_h = {exp.d_h})"
        )
    task = exp.task()
    model = exp.model()
    E, U = model.E, model.U
    by_rel, by_subj = (torch.as_tensor(m, dtype=E.dtype) for m in task.answer_sets())
    # (S + R, |A|): the answers each subject / relation token points to
    members = torch.cat([by_subj, by_rel])
    eos = E[task.eos]
    read = torch.linalg.pinv(E).T if readout == "dual" else E  # (vocab, d): read[z] . E[z'] ~ 1{z = z'}
    with torch.no_grad():
        for p in (model.Q, model.K, model.V, model.O, model.W1, model.b1, model.W2):
            p.zero_()
        for i in range(exp.S + exp.R):  # token i (subjects first, then relations: their vocabulary ids)
            h, j = divmod(i, exp.d_h)
            model.K[h, :, j] = read[i]
            model.V[h, :, j] = read[i]
            model.Q[h, :, j] = eos / eos.dot(eos) * beta * exp.d_h**0.5
            model.O[h * exp.d_h + j] = members[i] @ U  # sum of the answers' unembeddings
    return model


@torch.no_grad()
def construction_accuracy(
    exp: CapacityExperiment, n: int = 4096, beta: float = 8.0, readout: str = "dual", seed: int = 0
) -> float:
    """Accuracy of :func:`construct` on ``n`` fresh sequences of the task."""
    model = construct(exp, beta, readout)
    b = exp.task().sample(np.random.default_rng(seed), n)
    pred = model(torch.as_tensor(b.tokens)).argmax(1).numpy()
    return float((pred == b.answer).mean())


CONSTRUCTION_SETTINGS = ((16, 4, 4), (32, 8, 8), (32, 16, 16), (32, 32, 8))  # (S, R, D); the last is Fig. 4's
CONSTRUCTION_DS = (64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072)


def construction_study(
    settings=CONSTRUCTION_SETTINGS,
    ds=CONSTRUCTION_DS,
    level: float = 0.99,
    readout: str = "embedding",
    n: int = 2048,
) -> dict:
    """For each (S, R, D): the construction's accuracy at growing d (H = ceil((S + R)/8) heads of d_h = 8),
    up to the first d where it reaches ``level``; ``d_star`` that d (inf if none on the grid)."""
    out = {}
    for S, R, D in settings:
        H = -(-(S + R) // 8)
        curve = []
        for d in ds:
            exp = CapacityExperiment(S=S, R=R, D=D, d=d, H=H, d_h=8, m=1)
            curve.append((d, construction_accuracy(exp, n=n, readout=readout)))
            if curve[-1][1] >= level:
                break
        d_star = curve[-1][0] if curve[-1][1] >= level else float("inf")
        out[S, R, D] = {"curve": curve, "d_star": d_star, "H": H, "params": 4 * H * 8 * d_star}
    return out


def construction_summary(res: dict) -> report.Summary:
    """The construction in numbers: does it store every fact, and how the width it needs grows with R + D."""
    keys = list(res)
    paper = keys[-1]
    width = np.array([k[1] + k[2] for k in keys], dtype=float)
    d_star = np.array([res[k]["d_star"] for k in keys], dtype=float)
    per_fact = [res[k]["params"] / (k[0] * k[1]) for k in keys]
    return report.Summary(
        {
            "c_paper_acc": (
                max(a for _, a in res[paper]["curve"]),
                f"S, R, D = {paper}: the construction's best accuracy over the widths tried",
            ),
            "c_paper_d": (res[paper]["d_star"], "the width d at which it first reaches 0.99"),
            "c_slope": (
                report.loglog_slope(width, d_star) if np.isfinite(d_star).all() else float("nan"),
                "log-log slope of that width against R + D, over the settings",
            ),
            "c_params_min": (
                min(per_fact),
                "attention parameters 4 H d_h d at that width per fact (S R): smallest",
            ),
            "c_params_max": (max(per_fact), "the same, largest"),
        }
    )


def construction_rows(res: dict) -> list[list]:
    """(S, R, D, R + D, heads, d reaching 0.99, accuracy there, attention parameters, per fact)."""
    return [
        [S, R, D, R + D, r["H"], r["d_star"], r["curve"][-1][1], r["params"], r["params"] / (S * R)]
        for (S, R, D), r in res.items()
    ]


CONSTRUCTION_HEADER = [
    "S",
    "R",
    "D",
    "R + D",
    "heads H",
    "d reaching 0.99",
    "accuracy",
    "attention params",
    "per fact",
]
