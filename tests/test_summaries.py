"""The named package calls behind every asserted number: summaries of runs and studies."""

import math
from dataclasses import replace

import numpy as np
import pytest

from companion.experiments import allocation, noisy_recall, summaries
from companion.experiments.noisy_recall import RecallExperiment, RecallRun
from companion.theory import assoc_study, attention_study, noise_logit, one_step_study

TINY = dict(
    d=8, seq_len=8, batch=8, steps=4, eval_every=2, dense_until=1, n_test=8, rhos=(0.0, 0.01, 0.5, 1.0)
)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path))


@pytest.fixture(scope="module")
def tiny_run():
    return noisy_recall.run(RecallExperiment.quick(**TINY), device="cpu", progress=False, use_cache=False)


def test_recall_summary_matches_the_run(tiny_run):
    s = summaries.recall_summary(tiny_run)
    assert s["p_correct_drop"] == tiny_run.late_mean("clean_p_correct", rho=0.0)
    assert s["drop_gain"] == pytest.approx(s["p_correct_drop"] - s["p_correct_full"])
    # inf - inf
    assert s["icl_after_noise"] == s["icl_step"] - s["noise_step"] or math.isnan(s["icl_after_noise"])
    assert 0 <= s["value_diag"] <= 1 and set(s.meaning) == set(s)


def test_finetune_and_triggers_summaries():
    run = noisy_recall.run(
        RecallExperiment.quick(**TINY, schedule="finetune", pretrain_steps=3),
        device="cpu",
        progress=False,
        use_cache=False,
    )
    s = summaries.finetune_summary(run)
    assert s["pre_ratio"] == pytest.approx(s["pre_n"] / s["pre_c"])
    # the late mean's window: the last fifth of fine-tuning's evaluated steps (4 steps: from 3.2, the step 4 alone)
    steps, p_drop = run.series("clean_p_correct", rho=0.0)
    assert run.late_start("clean_p_correct", rho=0.0) == pytest.approx(0.8 * steps.max())
    assert s["p_correct_drop"] == pytest.approx(p_drop[steps >= 0.8 * steps.max()].mean()) == p_drop[-1]
    from companion.figures import noisy_recall as figures

    fig = figures.recovery_figure(run, 0.75)
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "p(correct), F2 dropped",
        "late mean's window",
        "bar",
    ]
    assert ax.get_xlabel() == "fine-tuning step"
    five = noisy_recall.run(
        RecallExperiment.quick(**TINY, triggers=(1, 39)), device="cpu", progress=False, use_cache=False
    )
    M, info = summaries.matching_summary(five)
    assert M.shape[0] == M.shape[1] and len(info["argmax_ok"]) == 2
    t = summaries.triggers_summary(five, five)
    assert t["ratio_one"] == t["ratio_five"] == info["ratio"]


def test_ioi_summary_counts_divergence():
    exp = noisy_recall.ioi_experiment(
        2, "sgd", "quick", d=8, seq_len=12, batch=8, steps=3, eval_every=1, n_test=8
    )
    tiny_run = noisy_recall.run(exp, device="cpu", progress=False, use_cache=False)
    runs = {(opt, L): tiny_run for opt, Ls in (("sgd", (3,)), ("adam", (3, 4, 5))) for L in Ls}
    s = summaries.ioi_summary(runs)
    assert math.isfinite(s["adam_deep"]) and s["n_diverged"] == 0
    diverged = noisy_recall.RecallRun(tiny_run.exp, tiny_run.metrics, tiny_run.state, diverged_at=3)
    s = summaries.ioi_summary({**runs, ("adam", 5): diverged, ("sgd", 5): diverged})
    assert s["adam_deep"] == math.inf  # "fails to converge" holds
    assert math.isnan(s["sgd_gain"]) and s["n_diverged"] == 2  # never dropped silently
    assert (
        s["sgd_n"] == 2 and s["sgd_improved_n"] <= 1 and s["sgd_counts_n"] <= 1
    )  # the diverged depth meets no bar
    everything = summaries.ioi_summary({k: diverged for k in runs} | {("sgd", 5): diverged})
    assert (everything["sgd_improved_n"], everything["sgd_counts_n"], everything["sgd_n"]) == (0, 0, 2)
    assert math.isnan(everything["sgd_gain_finished"])  # no depth finished: the minimum has nothing to take
    assert "| sgd | 5 | yes |" in summaries.ioi_markdown({("sgd", 5): diverged})
    # each chapter's part (Fig. 19: SGD, Fig. 20: Adam) gives ioi_summary's entries on its own runs, and the counts
    # over the runs (diverged, the counting gap's range) over its optimiser's runs alone
    mixed = {**runs, ("adam", 5): diverged, ("sgd", 5): diverged}
    whole, sgd, adam = (
        f(mixed) for f in (summaries.ioi_summary, summaries.ioi_sgd_summary, summaries.ioi_adam_summary)
    )
    assert list(whole) == list(summaries.IOI_ORDER)
    for part, opt in ((sgd, "sgd"), (adam, "adam")):
        own = [k for k in part if k not in ("n_diverged", "min_counting", "max_counting")]
        assert own and all(k.startswith(opt) for k in own)
        assert all(part[k] == whole[k] or (math.isnan(part[k]) and math.isnan(whole[k])) for k in own)
        assert part["n_diverged"] == 1
    assert set(sgd) | set(adam) == set(whole)


def test_architectures_summary(tiny_run):
    runs = {k: tiny_run for k in ("MLP, MLP", "MLP, linear", "linear, MLP", "none, none")}
    s = summaries.architectures_summary(runs, {"candidate": "drop F2", "matrix": "F2", "rho": 0.0})
    assert s["best_mm_is_f2"] == 1.0 and s["ml_drop1_raise"] == pytest.approx(
        s["ml_drop1_loss"] - s["ml_full_loss"]
    )
    assert "| MLP, MLP | drop F2 |" in summaries.variant_markdown(summaries.variant_table(runs))


def test_validated_rho_chooses_on_held_out_data(tiny_run):
    """validated_rho against a transcription: the final model with its matrix truncated by truncation.truncated,
    the cross-entropy of the correct token at the last position of the validation batch (which chooses rho) and of
    the test batch (which measures the gain); the validation batch is not the test batch; bad runs are refused."""
    import torch
    import torch.nn.functional as F

    from companion import truncation

    exp, model = tiny_run.exp, tiny_run.model()
    val, test = exp.validation_batch(), exp.test_batches()[0]
    assert val.inputs.shape == test.inputs.shape and not np.array_equal(val.inputs, test.inputs)

    def loss(batch, rho):
        with torch.no_grad(), truncation.truncated(model, exp.truncate, rho):
            logits = model(torch.as_tensor(batch.inputs), last_only=True)
            return F.cross_entropy(logits.float(), torch.as_tensor(batch.final_ybar)).item()

    inner = [r for r in exp.rhos if 0 < r < 1]
    best = min(inner, key=lambda r: loss(val, r))
    out = summaries.validated_rho(tiny_run)
    assert out["rho"] == best
    assert out["gain"] == pytest.approx(loss(test, 1.0) - loss(test, best), abs=1e-5)
    with pytest.raises(ValueError, match="truncate"):
        summaries.validated_rho(
            noisy_recall.RecallRun(replace(exp, truncate=""), tiny_run.metrics, tiny_run.state)
        )
    with pytest.raises(ValueError, match="rhos"):
        summaries.validated_rho(
            noisy_recall.RecallRun(replace(exp, rhos=(0.0, 1.0)), tiny_run.metrics, tiny_run.state)
        )


def test_allocation_summary():
    rows = [
        {
            "budget": b,
            "mlp_frac": f,
            "mlp_params": int(100 * f),
            "attn_params": int(100 * (1 - f)),
            "lr": lr,
            "train_loss": 3.0 - f + lr,
            "test_loss": 3.0,
            "best": lr == 0.1,
            "mlp_width": 1,
            "attn_rank": 1,
        }
        for b in (10, 20)
        for f in (0.25, 0.5, 0.75)
        for lr in (0.1, 0.3)
    ]
    result = {"rows": rows, "entropy": 2.0, "exp": {"lrs": [0.1, 0.3]}}
    s = allocation.summary(result)
    assert s["worst_rho"] == pytest.approx(-1.0) and s["min_gap"] == pytest.approx(0.5)
    assert s["edge"] == 6 and s["n_best"] == 6 and s["n_monotone"] == 2 and s["n_budgets"] == 2
    for r in (
        rows
    ):  # budget 20's middle share above its smallest: that budget's loss no longer falls at every step
        if r["budget"] == 20 and r["mlp_frac"] == 0.5:
            r["train_loss"] = 3.0
    s = allocation.summary(result)
    assert s["n_monotone"] == 1 and s["worst_rho"] == pytest.approx(-0.5)
    for r in rows:
        if r["budget"] == 20 and r["mlp_frac"] == 0.5:
            r["train_loss"] = 3.0 - 0.5 + r["lr"]
    assert allocation.markdown(result).count("\n") == 2 + 5
    for r in rows:  # every lr of one configuration diverged: the summary says so and its numbers are NaN
        if r["budget"] == 10 and r["mlp_frac"] == 0.25:
            r.update(train_loss=None, test_loss=None, best=False)
    s = allocation.summary(result)
    assert s["n_diverged"] == 1 and math.isnan(s["worst_rho"]) and math.isnan(s["min_gap"])


def test_one_step_resolution_and_gradients():
    r = {
        "m": np.array([10, 100, 400]),
        "attn": np.array([[[1.5], [1.2], [1.1]]]),
        "attn_ref": np.array([1.0]),
    }
    assert one_step_study.attn_relative_deviation(r).tolist() == pytest.approx([0.5, 0.2, 0.1])
    assert one_step_study.resolve_constant(r) == pytest.approx(2.0)  # 0.2 sqrt(100) = 0.1 sqrt(400)
    assert one_step_study.m_resolve(r, level=0.05) == pytest.approx(1600)
    gap, qk_zero = one_step_study.gradient_check()
    assert gap < 1e-12 and qk_zero


def test_attention_helpers():
    assert attention_study.half_time(np.array([0.0, 0.1, 0.6, 1.0])) == 2
    res = {"by_T": {64: (np.arange(25.0), np.ones(25))}}
    mean, se = attention_study.others_by_T(res)[64]
    assert mean == pytest.approx(np.arange(1, 20).mean()) and se == pytest.approx(np.sqrt(19) / 19)


def test_noise_logit_summary_small_grid():
    s = noise_logit.summary(noise_logit.study(Ns=(10, 100), alphas=(0.2, 0.4), steps=2000, probe_steps=100))
    assert s["decreasing"] and s["fp_dev"] < 1e-8 and s["max_below"] < 1e-9 < s["min_above"]


def test_assoc_iqr():
    run = {"loss": np.stack([np.linspace(0, 1, 5)[:, None] * np.ones((5, 3))] * 4)}  # (steps, runs, ranks)
    assert assoc_study.mean_iqr(run) == pytest.approx(0.5)


def test_previous_token_by_position_reads_the_subdiagonal_in_order():
    """A sharp previous-token head has mass 1 everywhere; one that fades late shows it in its last group;
    a map that is not square, or too many groups, is refused by name."""
    import numpy as np
    import pytest

    from companion import probes

    T = 9
    sharp = np.eye(T, k=-1)
    sharp[0, 0] = 1.0
    assert probes.previous_token_by_position(sharp, 4).tolist() == [1.0, 1.0, 1.0, 1.0]
    fading = sharp.copy()
    fading[7, 6], fading[7, 7] = 0.25, 0.75
    fading[8, 7], fading[8, 8] = 0.25, 0.75
    assert probes.previous_token_by_position(fading, 4).tolist() == [1.0, 1.0, 1.0, 0.25]
    with pytest.raises(ValueError, match=r"shape \(3, 4\)"):
        probes.previous_token_by_position(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="parts"):
        probes.previous_token_by_position(sharp, 9)


def test_key_structure_reads_the_orientation_of_written_matrices(tiny_run):
    """Written into the model with the query on the left, sum_t p_t p_{t-1}^T scores the previous position above
    the next one and has cosine 1 with the transpose of App. B.2's formula; B.2's formula as printed does the
    opposite. A W_QK^2 written as W_E(q) (W_V^1 W_E(q) - W_E(N+1))^T matches the remapped trigger and scores
    the noise token below the other tokens, and the printed orientation's pairing does not see the match."""
    import dataclasses

    import torch

    model, task = tiny_run.model(), tiny_run.exp.task()
    P, E = model.P[: tiny_run.exp.seq_len], model.W_E
    e_q, e_n = E[task.triggers[0]], E[task.noise_token]
    prev = P[1:].T @ P[:-1]  # sum_t p_t p_{t-1}^T
    with torch.no_grad():
        v1 = model.layers[0].v() @ e_q
        w2 = torch.outer(e_q, 10 * v1 / v1.norm() ** 2 - 10 * e_n / e_n.norm() ** 2)

    def read(w1):
        state = {**tiny_run.state, "layers.0.W_QK": w1, "layers.1.W_QK": w2}
        return summaries.key_structure(dataclasses.replace(tiny_run, state=state))

    ours, printed = read(prev), read(prev.T)
    assert ours["qk1_prev_minus_next"] > 0 and ours["qk1_cos_transposed"] == pytest.approx(1.0)
    assert printed["qk1_prev_minus_next"] == pytest.approx(-ours["qk1_prev_minus_next"])
    assert printed["qk1_cos_printed"] == pytest.approx(1.0)
    assert (
        ours["qk2_match"] > 5
        and ours["qk2_noise"] < -5
        and abs(ours["qk2_match_printed"]) < ours["qk2_match"]
    )


def test_the_late_drift_tells_a_settled_curve_from_a_slope():
    """book/finetune's check of our code (summaries.LATE_SETTLED): the later half of the late window against the
    earlier half. Seed 0's curve at 400 fine-tuning steps on the machine of 2026-12-05 (0.65 to 0.787 over steps
    325-400) drifts 0.094 and fails; a flat window passes; an odd window leaves its middle evaluation out."""

    class Curve:
        late_mean, late_start, late_drift = RecallRun.late_mean, RecallRun.late_start, RecallRun.late_drift
        late_window, late_at = RecallRun.late_window, None

        def __init__(self, steps, values):
            self.steps, self.values = np.asarray(steps, float), np.asarray(values, float)

        def series(self, key, rho=None, phase=1):
            return self.steps, self.values

    rising = Curve([0, 100, 200, 300, 325, 350, 375, 400], [0.8, 0.07, 0.6, 0.7, 0.65, 0.729, 0.78, 0.787])
    assert rising.late_start("x") == 320
    assert rising.late_drift("x") == pytest.approx((0.78 + 0.787) / 2 - (0.65 + 0.729) / 2)
    assert not summaries.LATE_SETTLED.holds(rising.late_drift("x"))
    odd = Curve([0, 80, 90, 100], [0.0, 0.5, 9.0, 0.6])  # window from 80: 0.5, (9.0 left out), 0.6
    assert odd.late_drift("x") == pytest.approx(0.1)
    assert summaries.LATE_SETTLED.holds(Curve([0, 100], [0.1, 0.8]).late_drift("x"))  # one evaluation: 0
