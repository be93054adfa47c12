"""The numbers the trained-model chapters assert, each computed by one named call.

Every function takes finished runs (:func:`companion.experiments.noisy_recall.run`)
and returns a :class:`companion.report.Summary`: named values with what they
mean, shown to the reader, glued into the prose and asserted by the Check
cells. "Late" means the mean over the evaluations in the last 20% of a phase.

Divergence: a run that diverged (``run.diverged_at`` set) has no late
metrics; its entries are NaN and any minimum or mean over runs that includes
it is NaN (never silently dropped), except where a claim is *about* failing
to converge, where a diverged run counts as an infinite loss gap.
"""

from __future__ import annotations

import numpy as np
import torch

from companion import config, probes
from companion.config import check_int
from companion.criterion import Criterion
from companion.experiments.noisy_recall import RecallRun
from companion.report import Summary, markdown_table, strict_max, strict_min
from companion.train import LATE_FRACTION, late_mask

NOISY_EARLY_STEPS = 10  # "the first few steps" of Figs. 3 and 8


def attention_ratio(att_c: float, att_n: float) -> float:
    """The attention mass on [q, ybar] positions over that on [q, tau] positions, the latter floored at 1e-6 (a head
    that puts no mass on the noise gives a large finite ratio, not a division by zero).

    >>> attention_ratio(0.5, 0.25), round(attention_ratio(0.9, 0.0))
    (2.0, 900000)
    """
    return att_c / max(att_n, 1e-6)


def recall_summary(run: RecallRun) -> Summary:
    """Section 3, Figs. 3, 4, 7, 8: the core run's late probabilities, orderings and probes."""
    noise_step = run.first_step_above("noisy_p_noise", 0.5)
    icl_step = run.first_step_above("clean_p_correct", 0.5, rho=0.0)
    att_c, att_n = run.late_mean("attn_to_correct"), run.late_mean("attn_to_noise")
    model, n = run.model(), run.exp.task().n
    recall_map = probes.value_recall_map(model, layer=2)
    ff_map = probes.ff_logit_map(model, 2)  # (input i, output j) = <F2(W_E(i)), W_U(j)>
    p_full = run.late_mean("clean_p_correct", rho=1.0)
    p_drop = run.late_mean("clean_p_correct", rho=0.0)
    prev = run.late_mean("attn1_prev")
    return Summary(
        {
            "alpha": (run.exp.alpha, "training noise level"),
            "p_noise_full": (
                run.late_mean("clean_p_noise", rho=1.0),
                "late p(noise) of the full model, clean data",
            ),
            "p_correct_full": (p_full, "late p(correct) of the full model, clean data"),
            "p_correct_drop": (p_drop, "late p(correct) with F2 dropped (rho = 0), clean data"),
            "p_noise_drop": (
                run.late_mean("clean_p_noise", rho=0.0),
                "late p(noise) with F2 dropped, clean data",
            ),
            "drop_gain": (p_drop - p_full, "p(correct) with F2 dropped minus the full model's"),
            "spike": (
                float(run.series("noisy_p_noise")[1][:NOISY_EARLY_STEPS].max()),
                f"max p(noise) on noisy data over the first {NOISY_EARLY_STEPS} evaluated steps",
            ),
            "noise_step": (noise_step, "first step with p(noise) > 0.5 on noisy data"),
            "icl_step": (icl_step, "first step with p(correct) > 0.5, F2 dropped, clean data"),
            "icl_after_noise": (icl_step - noise_step, "icl_step - noise_step"),
            "margin_step": (run.first_step_above("margin_F2", 0.0), "first step with a positive F2 margin"),
            "att_c": (att_c, "late attention mass from T on [q, ybar] positions"),
            "att_n": (att_n, "late attention mass from T on [q, tau] positions"),
            "attn_ratio": (attention_ratio(att_c, att_n), "att_c / att_n"),
            "prev": (prev, "late first-layer attention mass on the previous token"),
            "prev_over_uniform": (
                prev / uniform_previous_mass(run.exp.seq_len),
                "prev over a position-blind head's mean mass on s = t - 1, (H_T - 1) / (T - 1)",
            ),
            "value_diag": (
                float((recall_map[:n, :n].argmax(1) == np.arange(n)).mean()),
                "fraction of tokens i with argmax_j <W_V^2 W_E(i), W_U(j)> = i",
            ),
            "ff_noise_column": (
                float((ff_map.argmax(1) == run.exp.task().noise_token).mean()),
                "fraction of input tokens i whose largest F2 logit <F2(W_E(i)), W_U(j)> is at j = tau",
            ),
        }
    )


def recall_curves(run: RecallRun) -> dict[str, np.ndarray]:
    """The Fig. 3 curves of a run at its evaluated steps (what a recorded run keeps; never weights)."""
    step, p_drop = run.series("clean_p_correct", rho=0.0)
    m = run.metrics
    at_eval = np.isin(m["train_step"], step)
    return {
        "step": step,
        "p_correct_drop": p_drop,
        "p_correct_full": run.series("clean_p_correct", rho=1.0)[1],
        "p_noise_full": run.series("clean_p_noise", rho=1.0)[1],
        "noisy_p_noise": run.series("noisy_p_noise")[1],
        "attn_to_correct": run.series("attn_to_correct")[1],
        "attn_to_noise": run.series("attn_to_noise")[1],
        "train_step": m["train_step"][at_eval],
        "train_loss": m["train_loss"][at_eval],
    }


# A late mean is read where its curve has settled: across the window, the later half's mean within 0.05 of the earlier
# half's (:meth:`RecallRun.late_drift`). book/finetune's check of our code; at 400 fine-tuning steps seed 0 drifted
# 0.094 on one machine, and at 800 steps seeds 0-2 drift less than 0.01.
LATE_SETTLED = Criterion(above=-0.05, below=0.05)


def finetune_summary(run: RecallRun) -> Summary:
    """Appendix B.1, Figs. 4 (right) and 8 (right): pre-train on alpha = 0, then fine-tune."""
    # at the end of pre-training: its last evaluation (in a view of pre-training's late window, the view's)
    pre_c = float(run.late_window("attn_per_pos_correct", phase=0)[-1])
    pre_n = float(run.late_window("attn_per_pos_noise", phase=0)[-1])
    ft_c, ft_n = run.late_mean("attn_to_correct"), run.late_mean("attn_to_noise")
    return Summary(
        {
            "alpha": (run.exp.alpha, "fine-tuning noise level"),
            "pre_c": (pre_c, "per-position attention on [q, ybar] at the end of pre-training"),
            "pre_n": (pre_n, "per-position attention on [q, tau] at the end of pre-training"),
            "pre_ratio": (pre_n / pre_c, "pre_n / pre_c (near 1: no preference)"),
            "pre_n_over_uniform": (pre_n * run.exp.seq_len, "pre_n in units of the uniform 1 / T"),
            "uniform": (1.0 / run.exp.seq_len, "uniform attention per position, 1 / T"),
            "pre_c_over_uniform": (pre_c * run.exp.seq_len, "pre_c in units of the uniform 1 / T"),
            "ft_c": (ft_c, "late attention mass on [q, ybar] after fine-tuning"),
            "ft_n": (ft_n, "late attention mass on [q, tau] after fine-tuning"),
            "ft_ratio": (attention_ratio(ft_c, ft_n), "ft_c / ft_n"),
            "spike": (
                float(run.series("noisy_p_noise")[1][:NOISY_EARLY_STEPS].max()),
                f"max p(noise) on noisy data over the first {NOISY_EARLY_STEPS} fine-tuning steps",
            ),
            "noise_late": (run.late_mean("noisy_p_noise"), "late p(noise) on noisy data"),
            "p_correct_drop": (
                run.late_mean("clean_p_correct", rho=0.0),
                "late p(correct), F2 dropped, clean data",
            ),
            "p_correct_drop_drift": (
                run.late_drift("clean_p_correct", rho=0.0),
                "how far p(correct), F2 dropped, still moves across the late window (later half less earlier)",
            ),
        }
    )


def uniform_previous_mass(seq_len: int) -> float:
    """The mean mass on s = t - 1 of a position-blind causal head (query t attends to its t keys evenly),
    averaged over t = 2..T as :func:`companion.probes.previous_token_attention` averages: (H_T - 1) / (T - 1),
    with H_T the T-th harmonic number. The scale against which "attends to the previous token" is judged.

    >>> a = np.tril(np.ones((5, 5))) / np.arange(1, 6)[:, None]  # a uniform causal map, T = 5
    >>> bool(np.isclose(probes.previous_token_by_position(a, 1)[0], uniform_previous_mass(5)))
    True
    >>> round(uniform_previous_mass(256), 4)
    0.0201
    """
    check_int("seq_len", seq_len, low=2)
    return float((1.0 / np.arange(2, seq_len + 1)).sum() / (seq_len - 1))


# Fig. 3 at other noise levels: quick recordings (python -m companion record recall --set alpha=...)
OTHER_ALPHAS = (0.2, 0.8)


def alpha_summary(live: Summary, alpha: float, recorded: dict) -> Summary:
    """Fig. 3's two numbers at several noise levels: this build's run (trained on ``alpha``, its summary
    ``live``) and recorded runs ``recorded`` ({alpha: a recorded file's summary}). Per alpha (named in
    hundredths: ``alpha20`` for 0.2), the late noise probability of the full model on clean data minus alpha
    (``alpha<a>_noise_gap``) and p(correct) with F2 dropped (``alpha<a>_drop``); over all of them, the largest
    |gap| and the smallest p(correct | F2 dropped).

    >>> s = alpha_summary({"p_noise_full": 0.48, "p_correct_drop": 0.8}, 0.5, {0.2: {"p_noise_full": 0.25, "p_correct_drop": 0.9}})
    >>> sorted(s), round(s["alpha_noise_gap_max"], 2), s["alpha_drop_min"]
    (['alpha20_drop', 'alpha20_noise_gap', 'alpha50_drop', 'alpha50_noise_gap', 'alpha_drop_min', 'alpha_noise_gap_max'], 0.05, 0.8)
    """
    rows = {alpha: live, **recorded}
    out = {}
    for a, s in sorted(rows.items()):
        tag = f"alpha{round(100 * a):02d}"
        out[f"{tag}_noise_gap"] = (
            s["p_noise_full"] - a,
            f"alpha = {a:g}: late p(noise) on clean data minus alpha",
        )
        out[f"{tag}_drop"] = (s["p_correct_drop"], f"alpha = {a:g}: late p(correct) with F2 dropped")
    out["alpha_noise_gap_max"] = (
        max(abs(s["p_noise_full"] - a) for a, s in rows.items()),
        f"largest |p(noise) - alpha| over alpha in {sorted(rows)}",
    )
    out["alpha_drop_min"] = (
        min(s["p_correct_drop"] for s in rows.values()),
        f"smallest p(correct | F2 dropped) over alpha in {sorted(rows)}",
    )
    return Summary(out)


def previous_token_profile(attn: np.ndarray, parts: int = 4) -> Summary:
    """The first-layer previous-token mass of an attention map (T, T) by group of query positions
    (``prev_part1`` earliest ... ``prev_part<parts>``; :func:`companion.probes.previous_token_by_position`)."""
    groups = probes.previous_token_by_position(attn, parts)
    return Summary(
        {
            f"prev_part{i + 1}": (
                float(v),
                f"mean mass on s = t - 1 over query group {i + 1} of {parts} (earliest first)",
            )
            for i, v in enumerate(groups)
        }
    )


@torch.no_grad()
def key_structure(run: RecallRun) -> Summary:
    """Appendix B.2's key-query matrices, read off a trained model. Scores are x_q^T W_QK x_k (the query on the
    left, as B.2's own attention sigma(x_t^T W_QK x_{1:t}) and this package's model write them).

    ``qk1_prev_minus_next``: W_QK^1 on the positional embeddings, the mean over t of p_t^T W p_{t-1} (query t,
    key t - 1) minus p_{t-1}^T W p_t (query t - 1, key t); B.2's W_QK^1 = sum_t p_{t-1} p_t^T, read in its own
    orientation, makes it negative. ``qk1_cos_printed`` / ``qk1_cos_transposed``: the cosine of W_QK^1 with B.2's
    sum_t p_{t-1} p_t^T and with its transpose. For W_QK^2 and the trigger q: ``qk2_match``, the query W_E(q)
    on a key holding the remapped trigger W_V^1 W_E(q); ``qk2_match_printed``, the same pairing the other way
    round (B.2's (W_V^1 W_E(q)) W_E(q)^T in its own orientation); ``qk2_noise``, the query W_E(q) on a key
    holding the noise token W_E(N + 1), minus its mean on keys holding a token W_E(z), z <= N (B.2's -c, c > 0).
    """
    model, task = run.model(), run.exp.task()
    T, n = run.exp.seq_len, task.n
    P, E = model.P[:T].double(), model.W_E.double()
    W1, W2 = model.matrix("W_QK^1").double(), model.matrix("W_QK^2").double()
    V1 = model.layers[0].v().double()
    q, e_q, e_n = task.triggers[0], E[task.triggers[0]], E[task.noise_token]

    printed = P[:-1].T @ P[1:]  # sum_t p_{t-1} p_t^T
    with_q = e_q @ W2  # the trigger's query against any key
    return Summary(
        {
            "qk1_prev_minus_next": (
                float(((P[1:] @ W1) * P[:-1]).sum(1).mean() - ((P[:-1] @ W1) * P[1:]).sum(1).mean()),
                "W_QK^1: mean score of query t on key t - 1 minus that of query t - 1 on key t (positions)",
            ),
            "qk1_cos_printed": (
                probes.cosine(W1, printed),
                "cosine of W_QK^1 with B.2's sum_t p_{t-1} p_t^T",
            ),
            "qk1_cos_transposed": (probes.cosine(W1, printed.T), "cosine of W_QK^1 with sum_t p_t p_{t-1}^T"),
            "qk2_match": (
                float(with_q @ (V1 @ e_q) - (with_q @ E[:n].T).mean()),
                f"W_QK^2: trigger query (q = {q}) on a key holding W_V^1 W_E(q), over its mean on token keys",
            ),
            "qk2_match_printed": (
                float((V1 @ e_q) @ W2 @ e_q - ((E[:n] @ W2) @ e_q).mean()),
                "the same pairing the other way round: query W_V^1 W_E(q), key W_E(q), over query W_E(z) on it",
            ),
            "qk2_noise": (
                float(with_q @ e_n - (with_q @ E[:n].T).mean()),
                "W_QK^2: trigger query on a key holding the noise token, minus its mean on token keys (-c)",
            ),
        }
    )


def matching_summary(run: RecallRun) -> tuple[np.ndarray, dict]:
    """Appendix B.4 (Fig. 9): the matching logits of a run, the trigger contrast and argmax test.

    Returns the matrix ``M[i, j] = <W_V^1 W_E(i), W_QK^2 W_E(j)>`` and a dict with
    ``ratio`` (smallest trigger entry (q, q) over the largest entry off the
    trigger diagonal) and ``argmax_ok`` (per trigger: (q, q) is the largest of
    its row and of its column).
    """
    M = probes.matching_logits(run.model(), layer=2)
    ratio, argmax_ok = probes.trigger_contrast(M, run.exp.task().triggers)
    return M, {"ratio": ratio, "argmax_ok": argmax_ok}


def triggers_summary(one: RecallRun, five: RecallRun) -> Summary:
    """Appendix B.4: one trigger and five triggers, on the trained models: the trigger contrast of their matching
    logits at the last evaluation (after the last update; in a view of :meth:`RecallRun.at_late`, the view's
    evaluation), as the evaluations measured it (``match_ratio``, ``match_argmax_ok``: :func:`matching_summary`
    on the final weights gives the same)."""

    def last(run, key):
        return float(run.late_window(key)[-1])

    n = len(one.exp.task().triggers) + len(five.exp.task().triggers)
    return Summary(
        {
            "ratio_one": (last(one, "match_ratio"), "one trigger: (q, q) entry over the largest other entry"),
            "ratio_five": (
                last(five, "match_ratio"),
                "five triggers: smallest (q, q) over the largest entry off them",
            ),
            "argmax_frac": (
                (last(one, "match_argmax_ok") + last(five, "match_argmax_ok")) / n,
                "fraction of triggers whose (q, q) is the largest of its row and column",
            ),
        }
    )


def triggers_of(runs: dict[str, RecallRun]) -> Summary:
    """:func:`triggers_summary` of book/triggers' runs by name ("one trigger", "five triggers":
    :func:`companion.experiments.catalog.triggers`): the chapter's summary, its recordings' and its views'."""
    return triggers_summary(runs["one trigger"], runs["five triggers"])


ARCH_VARIANTS = {"full model": "clean_full", "drop F1": "clean_dropF1", "drop F2": "clean_dropF2"}
ARCH_METRICS = {
    "accuracy": "pred_correct",
    "p(correct)": "p_correct",
    "p(noise)": "p_noise",
    "predicts noise": "pred_noise",
    "loss": "loss",
}


def variant_table(runs: dict[str, RecallRun]) -> dict:
    """{architecture: {variant: {metric: late clean-test value}}} for the variants each run measured."""
    return {
        name: {
            v: {m: run.late_mean(f"{key}_{mkey}") for m, mkey in ARCH_METRICS.items()}
            for v, key in ARCH_VARIANTS.items()
            if f"{key}_loss" in run.metrics
        }
        for name, run in runs.items()
    }


def variant_markdown(table: dict) -> str:
    """The late clean-test metrics of :func:`variant_table` as a Markdown table."""
    rows = [[name, v, *vals.values()] for name, variants in table.items() for v, vals in variants.items()]
    return markdown_table(["architecture", "variant", *ARCH_METRICS], rows, digits=3)


def late_over_rho(run: RecallRun, key: str) -> tuple[np.ndarray, np.ndarray]:
    """(rho grid, late mean of a swept metric at each rho)."""
    rhos = np.asarray(run.exp.rhos)
    return rhos, np.array([run.late_mean(key, rho=r) for r in rhos])


def validated_rho(run: RecallRun) -> dict[str, float]:
    """Fig. 13's choice made on held-out data: on the run's final model, the rho in (0, 1) of its grid on its
    truncated matrix with the lowest clean loss on :meth:`~RecallExperiment.validation_batch`, and ``gain``, the
    clean test loss at rho = 1 minus that at the chosen rho (> 0: truncation helps on data that did not choose it).
    """
    exp = run.exp
    if not exp.truncate:
        raise ValueError(f"the run truncates no matrix (truncate={exp.truncate!r}); allowed: a matrix name")
    rhos = np.asarray(exp.rhos)
    inner = (rhos > 0) & (rhos < 1)
    if not inner.any() or not (rhos == 1).any():
        raise ValueError(f"rhos={exp.rhos}: allowed grids hold 1 and some rho in (0, 1)")
    model, tau = run.model(), exp.task().noise_token

    def losses(batch):
        return probes.rho_sweep(
            model,
            torch.as_tensor(batch.inputs),
            torch.as_tensor(batch.final_ybar),
            tau,
            exp.truncate,
            exp.rhos,
            None if batch.distractor is None else torch.as_tensor(batch.distractor),
        )["loss"]

    val, test = losses(exp.validation_batch()), losses(exp.test_batches()[0])
    j = np.flatnonzero(inner)[np.argmin(val[inner])]
    return {"rho": float(rhos[j]), "gain": float(test[rhos == 1][0] - test[j])}


def truncation_searches(runs: dict[str, RecallRun], device=None) -> dict[str, list[dict]]:
    """Fig. 13: for each run's final model, :func:`companion.truncation.search` over the full model, every
    feed-forward layer dropped and every learnable matrix at every rho of the run's grid, ranked by the clean
    test loss (rows: candidate, loss, accuracy, p(noise)); on ``device`` (default
    :func:`companion.config.get_device`'s)."""
    from companion import truncation

    device = config.get_device(device)
    out = {}
    for name, run in runs.items():
        clean, _ = run.exp.test_batches()
        tau = run.exp.task().noise_token
        tokens, correct = (torch.as_tensor(a, device=device) for a in (clean.inputs, clean.final_ybar))

        def evaluate(model):
            with torch.no_grad():
                m = probes.final_position_metrics(model(tokens, last_only=True), correct, tau)
            return {"loss": m["loss"], "accuracy": m["pred_correct"], "p(noise)": m["p_noise"]}

        out[name] = truncation.search(run.model().to(device), evaluate, run.exp.rhos)
    return out


def architectures_summary(runs: dict[str, RecallRun], best_mm: dict) -> Summary:
    """Appendix B.5, Figs. 10-13: the four architectures; ``best_mm`` is the search's best for MLP, MLP.

    ``runs`` maps "MLP, MLP", "MLP, linear", "linear, MLP", "none, none" to runs.
    """
    t = variant_table(runs)
    mm, ml, lm = t["MLP, MLP"], t["MLP, linear"], t["linear, MLP"]
    rhos, nn_loss = late_over_rho(runs["none, none"], "clean_loss")
    _, nn_acc = late_over_rho(runs["none, none"], "clean_pred_correct")
    inner = (rhos > 0) & (rhos < 1)
    validated = validated_rho(runs["none, none"])
    return Summary(
        {
            "mm_drop2_acc": (mm["drop F2"]["accuracy"], "MLP, MLP: accuracy with F2 dropped"),
            "mm_drop1_noise": (
                mm["drop F1"]["predicts noise"] - mm["full model"]["predicts noise"],
                "MLP, MLP: fraction predicting noise with F1 dropped, minus the full model's",
            ),
            "ml_drop2_gain": (
                ml["drop F2"]["accuracy"] - ml["full model"]["accuracy"],
                "MLP, linear: accuracy gain from dropping F2",
            ),
            "ml_drop1_best": (
                min(ml["full model"]["loss"], ml["drop F2"]["loss"]) - ml["drop F1"]["loss"],
                "MLP, linear: min(loss full, loss drop F2) - loss drop F1 (> 0: drop F1 best)",
            ),
            "ml_drop1_raise": (
                ml["drop F1"]["loss"] - ml["full model"]["loss"],
                "MLP, linear: loss with F1 dropped minus the full model's",
            ),
            "ml_full_acc": (ml["full model"]["accuracy"], "MLP, linear: accuracy of the full model"),
            "ml_drop2_acc": (ml["drop F2"]["accuracy"], "MLP, linear: accuracy with F2 dropped"),
            "ml_drop1_acc": (ml["drop F1"]["accuracy"], "MLP, linear: accuracy with F1 dropped"),
            "ml_full_loss": (ml["full model"]["loss"], "MLP, linear: loss of the full model"),
            "ml_drop1_loss": (ml["drop F1"]["loss"], "MLP, linear: loss with F1 dropped"),
            "lm_drop2_gain": (
                lm["drop F2"]["accuracy"] - lm["full model"]["accuracy"],
                "linear, MLP: accuracy gain from dropping F2",
            ),
            "lm_drop1_noise": (
                lm["drop F1"]["predicts noise"] - lm["full model"]["predicts noise"],
                "linear, MLP: fraction predicting noise with F1 dropped, minus the full model's",
            ),
            "nn_full_acc": (float(nn_acc[rhos == 1][0]), "no FF: accuracy of the full model"),
            "nn_small": (
                float(nn_acc[rhos == 0.01][0] / max(nn_acc[rhos == 1][0], 1e-9)),
                "no FF: accuracy with rho = 0.01 on W_V^1 over the full model's",
            ),
            "best_rho": (
                float(rhos[inner][np.argmin(nn_loss[inner])]),
                "no FF: rho in (0, 1) of the lowest loss",
            ),
            "nn_gain": (
                float(nn_loss[rhos == 1][0] - nn_loss[inner].min()),
                "no FF: full loss minus the lowest loss over rho in (0, 1)",
            ),
            "val_best_rho": (
                validated["rho"],
                "no FF, final model: rho in (0, 1) of the lowest loss on a validation batch",
            ),
            "val_nn_gain": (
                validated["gain"],
                "no FF, final model: test loss at rho = 1 minus at the validation's rho",
            ),
            "best_mm": (best_mm["candidate"], "MLP, MLP: best truncation by clean loss"),
            "best_mm_is_f2": (
                float(best_mm["matrix"] in ("F2", "F2.U_in", "F2.U_out") and best_mm["rho"] <= 0.05),
                "1 if that best candidate removes F2 (drop, or rho <= 0.05 on a matrix of F2)",
            ),
        }
    )


IOI_COLUMNS = [
    ("acc full", "pred_correct", 1.0),
    ("acc drop", "pred_correct", 0.0),
    ("acc rho=0.01", "pred_correct", 0.01),
    ("loss full", "loss", 1.0),
    ("loss drop", "loss", 0.0),
    ("loss rho=0.01", "loss", 0.01),
    ("p(correct) drop", "p_correct", 0.0),
    ("p(distractor) drop", "p_distractor", 0.0),
    ("p(noise) full", "p_noise", 1.0),
]


def ioi_key(name: str) -> tuple[str, int]:
    """A recorded synthetic-IOI member's name as the chapter's run key.

    >>> ioi_key("adam L=5")
    ('adam', 5)
    """
    opt, depth = name.split()
    return opt, int(depth.removeprefix("L="))


def ioi_curves(runs: dict[str, RecallRun]) -> dict:
    """What a recorded synthetic-IOI file keeps of each run (``{"adam L=5": run, ...}``): the evaluated steps,
    the step it diverged at (None: it did not), and each clean metric of :data:`IOI_COLUMNS` at its rho along
    training, under ``"<metric>@<rho>"``; :func:`ioi_recorded` reads them back."""
    out = {
        "step": {n: r.series("clean_loss", rho=1.0)[0] for n, r in runs.items()},
        "diverged_at": {n: r.diverged_at for n, r in runs.items()},
    }
    for _, key, rho in IOI_COLUMNS:
        out[f"clean_{key}@{rho}"] = {n: r.series(f"clean_{key}", rho=rho)[1] for n, r in runs.items()}
    return out


class CurveRun:
    """A recorded run read back from :func:`ioi_curves`: the part of a run that :func:`ioi_table`,
    :func:`ioi_summary` and :func:`companion.figures.synthetic_ioi.depth_panels` read (``series`` of the recorded clean
    metrics, ``late_mean`` (and its window, ``late_start``, ``late_window``) by the same rule as a live run,
    ``diverged_at``; ``at_late``, a view at one evaluation of the late window, as a live run's)."""

    late_mean, late_start, late_window = RecallRun.late_mean, RecallRun.late_start, RecallRun.late_window
    at_late = RecallRun.at_late
    late_at, late_phase = None, 1  # the whole late window (no view of one evaluation)

    def __init__(self, curves: dict, name: str):
        if name not in curves["step"]:
            raise ValueError(f"no recorded run {name!r}: allowed {sorted(curves['step'])}")
        self.curves, self.name = curves, name
        self.diverged_at = curves["diverged_at"][name]

    def late_count(self, phase: int = 1, frac: float = LATE_FRACTION) -> int:
        """How many evaluations the late window holds (:meth:`RecallRun.late_count`)."""
        return int(late_mask(self.curves["step"][self.name], frac).sum())

    def series(self, key: str, rho: float | None = None, phase: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """(evaluated steps, values) of clean metric ``key`` at ``rho``, as recorded."""
        column = f"{key}@{rho}"
        if column not in self.curves:
            raise ValueError(
                f"{column!r} is not recorded: allowed {sorted(c for c in self.curves if '@' in c)}"
            )
        return (
            np.asarray(self.curves["step"][self.name]),
            np.asarray(self.curves[column][self.name], dtype=float),
        )  # "nan" strings back to floats


def ioi_recorded(curves: dict) -> dict[tuple[str, int], CurveRun]:
    """A recorded synthetic-IOI file's runs ({(optimiser, L): run}), read back from its curves."""
    return {ioi_key(name): CurveRun(curves, name) for name in curves["step"]}


def ioi_table(runs: dict[tuple[str, int], RecallRun]) -> dict:
    """{(optimiser, L): {column: late clean value}}, NaN for a diverged run."""
    return {
        k: {
            name: float("nan") if run.diverged_at is not None else run.late_mean(f"clean_{key}", rho=rho)
            for name, key, rho in IOI_COLUMNS
        }
        for k, run in runs.items()
    }


def ioi_markdown(runs: dict[tuple[str, int], RecallRun]) -> str:
    t = ioi_table(runs)
    rows = [
        [opt, L, "yes" if runs[opt, L].diverged_at is not None else "no", *t[opt, L].values()] for opt, L in t
    ]
    return markdown_table(["optimiser", "L", "diverged", *(c[0] for c in IOI_COLUMNS)], rows, digits=3)


IOI_GAIN_BAR, IOI_COUNT_BAR = (
    0.05,
    0.5,
)  # the full profile's bars of Figs. 19-20's claims (ioi.sgd_drop_last, ...)


def ioi_summary(runs: dict[tuple[str, int], RecallRun], deep: int = 5, shallow: int = 3) -> Summary:
    """Appendix J, Figs. 19-20: :func:`ioi_sgd_summary` and :func:`ioi_adam_summary` of the runs of each optimiser,
    and over all runs the number diverged and the range of the counting gap. A diverged run makes the gains NaN (they
    fail), and the Adam "fails to converge" gap infinite (it holds)."""
    t = ioi_table(runs)
    entries = {**_ioi_sgd(t, runs), **_ioi_adam(t, runs, deep, shallow), **_ioi_all(t, runs)}
    return Summary({k: entries[k] for k in IOI_ORDER})


# ioi_summary's entries, in the order it has always given them (recorded files store them so)
IOI_ORDER = (
    "sgd_gain",
    "adam_gain",
    "adam_deep",
    "n_diverged",
    "min_counting",
    "max_counting",
    "sgd_counting",
    "sgd_gain_finished",
    "sgd_counting_finished",
    "sgd_improved_n",
    "sgd_counts_n",
    "sgd_n",
)


def ioi_sgd_summary(runs: dict[tuple[str, int], RecallRun]) -> Summary:
    """Fig. 19 (book/synthetic_ioi_sgd): :func:`ioi_summary`'s SGD entries, and the number diverged and the range of
    the counting gap over the SGD runs of ``runs``. ``sgd_improved_n`` and ``sgd_counts_n`` count the SGD depths that
    meet the claims' bars (:data:`IOI_GAIN_BAR`, :data:`IOI_COUNT_BAR`), a diverged depth meeting neither: a number
    even where every depth diverged, where the smallest over the depths that finished has none to take."""
    sgd = {k: r for k, r in runs.items() if k[0] == "sgd"}
    t = ioi_table(sgd)
    return Summary({**_ioi_sgd(t, sgd), **_ioi_all(t, sgd)})


def ioi_adam_summary(runs: dict[tuple[str, int], RecallRun], deep: int = 5, shallow: int = 3) -> Summary:
    """Fig. 20 (book/synthetic_ioi): :func:`ioi_summary`'s Adam entries, and the number diverged and the range of the
    counting gap over the Adam runs of ``runs``."""
    adam = {k: r for k, r in runs.items() if k[0] == "adam"}
    t = ioi_table(adam)
    return Summary({**_ioi_adam(t, adam, deep, shallow), **_ioi_all(t, adam)})


def _ioi_all(t: dict, runs: dict) -> dict:
    """Over ``runs`` (of :func:`ioi_table` ``t``): runs diverged, the smallest and largest counting gap."""
    counting = [s["p(correct) drop"] - s["p(distractor) drop"] for s in t.values()]
    return {
        "n_diverged": (sum(r.diverged_at is not None for r in runs.values()), "runs that diverged"),
        "min_counting": (strict_min(counting), "smallest p(correct) - p(distractor), last MLP dropped"),
        "max_counting": (strict_max(counting), "largest p(correct) - p(distractor), last MLP dropped"),
    }


def _ioi_adam(t: dict, runs: dict, deep: int, shallow: int) -> dict:
    """The Adam entries: the smallest gain from rho = 0.01 at L = 3, 4, and the late loss gap of ``deep`` over
    ``shallow`` (inf if ``deep`` diverged)."""
    adam = [t["adam", L]["acc rho=0.01"] - t["adam", L]["acc full"] for L in (3, 4)]
    if runs["adam", deep].diverged_at is not None:
        deep_gap = float("inf")
    else:
        deep_gap = t["adam", deep]["loss full"] - t["adam", shallow]["loss full"]
    return {
        "adam_gain": (strict_min(adam), "Adam: smallest accuracy gain from rho = 0.01, L = 3, 4"),
        "adam_deep": (
            deep_gap,
            f"Adam: late loss of L = {deep} minus L = {shallow} (inf if L = {deep} diverged)",
        ),
    }


def _ioi_sgd(t: dict, runs: dict) -> dict:
    """The SGD entries: gains from dropping the last MLP and counting gaps, smallest over the depths (and over those
    that finished), and the depths meeting the bars."""
    sgd_gains = {k: s["acc drop"] - s["acc full"] for k, s in t.items() if k[0] == "sgd"}  # {(opt, L): gain}
    sgd_counts = {k: s["p(correct) drop"] - s["p(distractor) drop"] for k, s in t.items() if k[0] == "sgd"}
    sgd = list(sgd_gains.values())
    sgd_counting = list(sgd_counts.values())
    sgd_fin = [v for k, v in sgd_gains.items() if runs[k].diverged_at is None]
    sgd_counting_fin = [v for k, v in sgd_counts.items() if runs[k].diverged_at is None]
    return {
        "sgd_gain": (strict_min(sgd), "SGD: smallest accuracy gain from dropping the last MLP over L"),
        "sgd_counting": (
            strict_min(sgd_counting),
            "SGD: smallest p(correct) - p(distractor), last MLP dropped",
        ),
        "sgd_gain_finished": (
            min(sgd_fin, default=float("nan")),
            "SGD: smallest accuracy gain from dropping the last MLP over the depths that did not "
            "diverge (nan: none finished)",
        ),
        "sgd_counting_finished": (
            min(sgd_counting_fin, default=float("nan")),
            "SGD: smallest p(correct) - p(distractor), last MLP dropped, over the depths that "
            "did not diverge (nan: none finished)",
        ),
        "sgd_improved_n": (
            sum(bool(v > IOI_GAIN_BAR) for v in sgd),
            f"SGD: depths whose accuracy gain from dropping the last MLP exceeds {IOI_GAIN_BAR} (a diverged "
            "depth does not)",
        ),
        "sgd_counts_n": (
            sum(bool(v > IOI_COUNT_BAR) for v in sgd_counting),
            f"SGD: depths whose p(correct) - p(distractor), last MLP dropped, exceeds {IOI_COUNT_BAR} (a "
            "diverged depth does not)",
        ),
        "sgd_n": (len(sgd), "SGD: depths run"),
    }


def ioi_stability(runs: dict[tuple[str, int], RecallRun]) -> Summary:
    """Whether each run kept what it learned: its best clean test loss along training (full model), the step of
    that evaluation, its late clean loss and the rise from best to late (``<opt><L>_best``, ``_best_step``,
    ``_late``, ``_rise``; late and rise NaN for a run that diverged, whose metrics stop there), and the step at
    which it diverged (``<opt><L>_diverged_at``, NaN if it did not). A run that
    converges ends near its best (rise near 0); one that learns and then loses it does not."""
    out = {}
    for (opt, L), run in runs.items():
        steps, loss = run.series("clean_loss", rho=1.0)
        late = float("nan") if run.diverged_at is not None else run.late_mean("clean_loss", rho=1.0)
        at = int(np.nanargmin(loss))
        out |= {
            f"{opt}{L}_diverged_at": (
                float("nan") if run.diverged_at is None else float(run.diverged_at),
                f"{opt}, L = {L}: step at which training diverged (nan: it did not)",
            ),
            f"{opt}{L}_best": (float(loss[at]), f"{opt}, L = {L}: lowest clean test loss along training"),
            f"{opt}{L}_best_step": (float(steps[at]), f"{opt}, L = {L}: step of that evaluation"),
            f"{opt}{L}_late": (late, f"{opt}, L = {L}: late clean test loss (nan: diverged)"),
            f"{opt}{L}_rise": (late - float(loss[at]), f"{opt}, L = {L}: late minus lowest clean test loss"),
        }
    return Summary(out)


IOI_TREATMENT = {
    "sgd": 0.0,
    "adam": 0.01,
}  # the rho each optimiser's claim truncates the last MLP to (Figs. 19, 20)


def ioi_peak_gains(runs: dict[tuple[str, int], RecallRun]) -> Summary:
    """Along training, the largest clean test accuracy gain of each run's treatment (:data:`IOI_TREATMENT`: the last
    MLP dropped with SGD, its input at rho = 0.01 with Adam) over the full model, and the step of that evaluation
    (``<opt><L>_peak_gain``, ``_peak_step``; evaluations a diverged run never reached are left out). Set beside
    the late gain of :func:`ioi_summary`, it tells a treatment that helps while the model learns from one that
    never does (NaN where no evaluation has both accuracies finite)."""
    out = {}
    for (opt, L), run in runs.items():
        steps, full = run.series("clean_pred_correct", rho=1.0)
        gain = run.series("clean_pred_correct", rho=IOI_TREATMENT[opt])[1] - full
        finite = np.isfinite(gain)
        at = int(np.argmax(np.where(finite, gain, -np.inf))) if finite.any() else None
        out |= {
            f"{opt}{L}_peak_gain": (
                float("nan") if at is None else float(gain[at]),
                f"{opt}, L = {L}: largest accuracy gain of rho = {IOI_TREATMENT[opt]} along training",
            ),
            f"{opt}{L}_peak_step": (
                float("nan") if at is None else float(steps[at]),
                f"{opt}, L = {L}: step of that evaluation",
            ),
        }
    return Summary(out)


def ioi_stability_markdown(runs: dict[tuple[str, int], RecallRun]) -> str:
    """:func:`ioi_stability` as a table, one row per run."""
    s = ioi_stability(runs)
    rows = [
        [
            opt,
            L,
            "-" if r.diverged_at is None else r.diverged_at,
            s[f"{opt}{L}_best"],
            int(s[f"{opt}{L}_best_step"]),
            s[f"{opt}{L}_late"],
            s[f"{opt}{L}_rise"],
        ]
        for (opt, L), r in runs.items()
    ]
    return markdown_table(
        [
            "optimiser",
            "L",
            "diverged at step",
            "lowest clean loss",
            "at step",
            "late clean loss",
            "late minus lowest",
        ],
        rows,
        digits=3,
    )
