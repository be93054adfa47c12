"""The talk, the bigram task with triggers (companion.experiments.induction)."""

import dataclasses
from functools import partial

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from companion import config
from companion.data.recall import RecallTask
from companion.experiments import (
    induction,
    induction_head_text,
    induction_random,
    induction_random_push,
    induction_random_seeds,
    three_steps,
    three_steps_data,
    three_steps_mechanism,
    three_steps_tables,
)
from companion.models import ModelConfig, Transformer
from companion.train import TrainConfig, train


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_triggers=65), r"n_triggers \(K\)=65 is out of range: allowed \[1, 64\]"),
        (dict(n_triggers=0), r"n_triggers \(K\)=0 is out of range"),
        (dict(trained=("W_QK^3",)), "trained matrix 'W_QK\\^3' is not in this model"),
        (dict(frozen_first=("W_V^1",)), "frozen_first matrix 'W_V\\^1' is not trained"),
        (
            dict(frozen_first=("W_V^2",), unfreeze_at=301),
            r"unfreeze_at=301 is out of range: allowed \[1, 300\]",
        ),
        (dict(early_cutoff=65), r"early_cutoff=65 is out of range: allowed \[2, 64\]"),
        (dict(loss_on="some"), "unknown loss_on"),
        (dict(optimizer="lbfgs"), "unknown optimizer"),
        (dict(trigger_draw="zipf"), "unknown trigger_draw 'zipf'"),
    ],
)
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        induction.InductionExperiment.quick(**kwargs)


def test_loss_on_all_marks_every_position():
    b = RecallTask(seq_len=16, alpha=0.0, loss_on="all").sample(np.random.default_rng(0), 3)
    assert b.loss_mask.all() and b.loss_mask.shape == (3, 16)


def test_constructed_head_recalls_and_probes_are_perfect():
    exp = induction.InductionExperiment.quick(n_test=128)
    row = induction.constructed_run(exp)
    assert row["acc"] > 0.85
    for p in induction.PROBES + ("probe_QK2_all",):
        assert row[p] == 1.0, p


def test_the_slides_own_convention_transposes_the_key_query_memories():
    """Read with the slide's x_k^T W_KQ x_q, the key-query formulas are written transposed (the value memory is
    not a key-query matrix and stays); the previous-position memory then scores a query against the next
    position, which the causal mask hides, and its probe fails."""
    exp = induction.InductionExperiment.quick(n_test=128)
    task = exp.task()
    ours, slides = (
        induction.construct(
            Transformer(exp.model_config(), seed=exp.seed), task.triggers, task.n, convention=c
        )
        for c in induction.CONVENTIONS
    )
    for name in ("W_QK^1", "W_QK^2"):
        assert torch.equal(slides.matrix(name), ours.matrix(name).T), name
    assert torch.equal(slides.matrix("W_V^2"), ours.matrix("W_V^2"))
    row = induction.constructed_run(exp, convention="key left")
    assert row["probe_QK1"] == 0.0 and row["acc"] < 0.5
    with pytest.raises(ValueError, match="convention"):
        induction.construct(ours, task.triggers, task.n, convention="left")


def test_construct_rejects_bad_input():
    m = Transformer(ModelConfig(65, d=8, max_len=8, ff=("none",)))
    with pytest.raises(ValueError, match="needs two layers"):
        induction.construct(m, (1,), 65)
    m2 = Transformer(ModelConfig(65, d=8, max_len=8, ff=("none", "none")))
    with pytest.raises(ValueError, match="scale=0.0 is out of range"):
        induction.construct(m2, (1,), 65, scale=0.0)


def test_probes_at_init_are_near_chance():
    exp = induction.InductionExperiment.quick()
    m = Transformer(exp.model_config())
    task = exp.task()
    p = induction.memory_probes(m, task.triggers, task.n, exp.early_cutoff)
    assert p["probe_OV2"] < 0.2 and p["probe_QK1"] < 0.2 and p["probe_QK2_all"] <= 0.4


def test_ff_bigram_kl_matches_direct_computation():
    task = RecallTask(seq_len=8, alpha=0.0, noise="existing")
    m = Transformer(ModelConfig(task.vocab_size, d=16, max_len=8, ff=("none", "linear")))
    P = task.stats.bigram
    keep = [k for k in range(task.n) if k not in task.triggers]
    with torch.no_grad():
        logq = torch.log_softmax(m.W_E[keep] @ m.layers[1].ff.W_F.T @ m.W_U.T, -1).double().numpy()
    p = P[keep]
    direct = np.where(p > 0, p * (np.log(np.where(p > 0, p, 1)) - logq), 0).sum(1).mean()
    assert induction.ff_bigram_kl(m, P, task.triggers) == pytest.approx(direct, rel=1e-5)
    assert induction.ff_bigram_kl(m, P, task.triggers, layer=2) == induction.ff_bigram_kl(m, P, task.triggers)
    assert induction.bigram_zero_share(task) > 0.3  # why Eq. (10)'s order (model first) is infinite


def test_unfreeze_releases_a_matrix_at_its_step():
    task = RecallTask(seq_len=8, alpha=0.0, noise="existing", loss_on="all")
    m = Transformer(ModelConfig(task.vocab_size, d=8, max_len=8, ff=("none", "none")))
    W = m.matrix("W_QK^2")
    W.requires_grad_(False)
    before = W.detach().clone()
    seen = []
    train(
        m,
        task,
        TrainConfig(steps=3, batch=2),
        np.random.default_rng(0),
        progress=False,
        unfreeze={2: [W]},
        evaluate=lambda s: seen.append(torch.equal(W.detach(), before)) or {},
        eval_at=range(3),
    )
    # unchanged before each of steps 0-2 (released at 2), moved after
    assert seen == [True, True, True, False]


def test_run_is_reproducible_and_freezes_what_it_says():
    exp = induction.InductionExperiment.quick(
        steps=4, eval_every=2, batch=4, n_test=8, frozen_first=("W_QK^1",), unfreeze_at=4
    )
    a = induction.run(exp, progress=False, use_cache=False)
    b = induction.run(exp, progress=False, use_cache=False)
    for k in a.metrics:
        np.testing.assert_array_equal(a.metrics[k], b.metrics[k])
    init = Transformer(exp.model_config(), seed=exp.seed).state_dict()
    assert torch.equal(a.state["layers.0.W_QK"], init["layers.0.W_QK"])  # frozen for all 4 steps
    assert torch.equal(a.state["layers.0.W_V"], init["layers.0.W_V"])  # never trained
    assert not torch.equal(a.state["layers.1.W_V"], init["layers.1.W_V"])
    assert a.at("acc", 3) == a.metrics["acc"][1] and a.first_step_reaching("acc", 2.0) == float("inf")
    with pytest.raises(ValueError, match="before the first evaluation"):
        a.at("acc", -1)


def test_quick_and_full_differ_only_in_size():
    q, f = induction.InductionExperiment.quick(), induction.InductionExperiment.full()
    diff = {x.name for x in dataclasses.fields(q) if getattr(q, x.name) != getattr(f, x.name)}
    assert diff == {"profile", "d", "seq_len", "batch", "steps", "unfreeze_at", "n_test", "early_cutoff"}


# --- the three gradient steps ---


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(d=200), r"d=200 is out of range: orthonormal embeddings need d >= 3 V \+ T = 230"),
        (dict(order=("W_V^2", "W_QK^2", "W_QK^2")), "must be an ordering of"),
        (dict(etas=()), "must be a non-empty list"),
        (dict(second_step_sizes=(1.0, -2.0)), "second_step_sizes=.* must all be > 0"),
        (dict(scales=(0.0,)), r"scales=\(0.0,\) must all be > 0"),
        (
            dict(scales=(20.0,), embeddings="gaussian"),
            "scales=.* need embeddings='orthonormal'.*not 'gaussian'",
        ),
        (dict(embeddings="sparse"), "unknown embeddings"),
        (dict(data="wiki"), "unknown data"),
        (dict(chunk=0), r"chunk=0 is out of range"),
        (dict(line_batch=100, chunk=512), r"line_batch=100 is out of range: allowed \[512, 8192\]"),
        (dict(n_triggers=65), r"n_triggers \(K\)=65 is out of range: allowed \[1, 64\]"),
    ],
)
def test_three_step_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        three_steps.ThreeStepExperiment.quick(**kwargs)


def test_final_recall_marks_only_repeated_final_triggers():
    task = RecallTask(seq_len=24, alpha=0.0, n_triggers=3, loss_on="final_recall")
    b = task.sample(np.random.default_rng(0), 200)
    assert not b.loss_mask[:, :-1].any()
    assert (b.loss_mask[:, -1] == (b.occurrence[:, -1] >= 2)).all() and 0 < b.loss_mask[:, -1].sum() < 200
    # the output of a repeated trigger is in the context
    for i in np.nonzero(b.loss_mask[:, -1])[0][:20]:
        assert b.targets[i, -1] in b.inputs[i]


def test_batch_loss_reads_only_the_marked_final_positions():
    from companion.train import batch_loss

    exp = three_steps.ThreeStepExperiment.quick(d=256, seq_len=16)
    m = Transformer(exp.model_config())
    b = exp.task().sample(np.random.default_rng(1), 64)
    rows = b.loss_mask[:, -1]
    logits = m(torch.as_tensor(b.inputs))[:, -1]
    direct = torch.nn.functional.cross_entropy(logits[rows], torch.as_tensor(b.targets[rows, -1]))
    assert torch.allclose(batch_loss(m, b, "cpu"), direct, atol=1e-5)
    assert torch.allclose(three_steps._population_loss(m, [b]), direct, atol=1e-5)


def test_orthonormal_embeddings_are_orthogonal_and_remap():
    exp = three_steps.ThreeStepExperiment.quick(d=256, seq_len=16)
    m = three_steps.orthonormal_embeddings(Transformer(exp.model_config()), 0)
    V, T, d = m.W_E.shape[0], m.P.shape[0], 256
    remap = m.W_E @ m.matrix("W_V^1").T
    X = torch.cat(
        [
            m.W_E / d**0.5,
            m.P / d**0.5,
            m.W_U / m.W_U.norm(dim=1, keepdim=True),
            remap / remap.norm(dim=1, keepdim=True),
        ]
    )
    assert torch.allclose(X @ X.T, torch.eye(3 * V + T), atol=1e-5)
    assert torch.allclose(m.P @ m.matrix("W_V^1").T, torch.zeros(T, d), atol=1e-4)


def test_three_steps_small_run_learns_ov_and_reverse_order_has_no_gradient():
    """The slide's order is forced in the idealised setting (ih.three_steps_order was this check as a claim row):
    with W_V^2 = 0 and orthonormal embeddings neither key-query matrix has a gradient."""
    small = dict(d=230, seq_len=32, batch=2048, chunk=1024, line_batch=1024, n_test=64)
    fwd = three_steps.three_steps(
        three_steps.ThreeStepExperiment.quick(**small), progress=False, use_cache=False
    )
    rows = fwd["rows"]
    assert [r["matrix"] for r in rows] == ["init", "W_V^2", "W_QK^2", "W_QK^1"]
    assert rows[0]["probe_OV2"] == 0.0 and rows[1]["probe_OV2"] > 0.5 and rows[1]["loss"] < rows[0]["loss"]
    rev = three_steps.three_steps(
        three_steps.ThreeStepExperiment.quick(order=induction.STEP_ORDER[::-1], **small),
        progress=False,
        use_cache=False,
    )["rows"]
    assert (
        rev[1]["eta"] == rev[2]["eta"] == 0.0
        and max(r["grad_norm"] for r in rev[1:3]) < three_steps.ZERO_GRADIENT
    )
    assert rev[3]["probe_OV2"] == rows[1]["probe_OV2"]  # the same first real step, on the same population
    # the reason, and its limit: with Gaussian embeddings the remapped tokens are not orthogonal to W_U, so layer 1's
    # direct path gives W_QK^1 a gradient while W_V^2 = 0 (W_QK^2 still has none: layer 2 adds nothing)
    gauss = three_steps.three_steps(
        three_steps.ThreeStepExperiment.quick(
            order=induction.STEP_ORDER[::-1], embeddings="gaussian", **{**small, "batch": 1024}
        ),
        progress=False,
        use_cache=False,
    )["rows"]
    assert [r["matrix"] for r in gauss[1:3]] == ["W_QK^1", "W_QK^2"]
    assert gauss[1]["grad_norm"] > 1e3 * three_steps.ZERO_GRADIENT and gauss[1]["eta"] > 0
    assert gauss[2]["grad_norm"] < three_steps.ZERO_GRADIENT


def test_second_step_sweep_keeps_the_size_with_the_lowest_final_loss():
    small = dict(
        d=230,
        seq_len=32,
        batch=1024,
        chunk=1024,
        line_batch=1024,
        n_test=32,
        etas=(1.0, 8.0),
        second_step_sizes=(1.0, 16.0),
    )
    r = three_steps.three_steps(
        three_steps.ThreeStepExperiment.quick(**small), progress=False, use_cache=False
    )
    best = min(r["sweep"], key=lambda s: s["third"]["loss"])
    assert r["rows"][2]["eta"] == best["second_size"] and r["rows"][3] == best["third"]


# --- the learned memories rescaled, their blocks, and the step-2 probe rows ---


def _orthonormal_model(seq_len=16):
    exp = three_steps.ThreeStepExperiment.quick(d=256, seq_len=seq_len)
    return exp, exp.task(), three_steps.orthonormal_embeddings(Transformer(exp.model_config()), 0)


def test_shakespeare_iid_data_keeps_frequencies_and_triggers_and_drops_the_bigram():
    text = three_steps.ThreeStepExperiment.quick(embeddings="gaussian", data="shakespeare").task()
    iid = three_steps.ThreeStepExperiment.quick(embeddings="gaussian", data="shakespeare_iid").task()
    assert iid.triggers == text.triggers
    assert np.allclose(iid.stats.unigram, text.stats.unigram)
    assert np.allclose(iid.stats.bigram, iid.stats.unigram[None, :]) and not np.allclose(
        text.stats.bigram, iid.stats.bigram
    )


def test_rescale_memories_gives_the_hand_written_scores_and_keeps_directions():
    _, task, m = _orthonormal_model()
    induction.construct(m, task.triggers, task.n, scale=20.0)
    scores = three_steps.stored_scores(m, task.triggers, task.n)
    assert scores == pytest.approx({"W_QK^1": 20.0, "W_QK^2": 20.0, "W_V^2": 10.0}, rel=1e-4)
    hand = {n: m.matrix(n).detach().clone() for n in induction.STEP_ORDER}
    with torch.no_grad():
        for factor, n in zip((3.0, 0.1, 7.0), induction.STEP_ORDER):
            m.matrix(n).mul_(factor)
    three_steps.rescale_memories(m, task.triggers, task.n, 5.0, names=("W_QK^2",))
    assert three_steps.stored_scores(m, task.triggers, task.n)["W_QK^2"] == pytest.approx(5.0, rel=1e-4)
    three_steps.rescale_memories(m, task.triggers, task.n, 20.0)
    for n in induction.STEP_ORDER:
        assert torch.allclose(m.matrix(n), hand[n], rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize(
    "scale, names, match",
    [
        (0.0, induction.STEP_ORDER, r"scale=0.0 is out of range"),
        (1.0, ("W_V^1",), "unknown memory 'W_V\\^1'"),
        (
            1.0,
            induction.STEP_ORDER,
            r"cannot rescale memories whose stored pairs score <= 0 on average: \{'W_QK\^1'",
        ),
    ],
)
def test_rescale_memories_bad_input(scale, names, match):
    _, task, m = _orthonormal_model()
    induction.construct(m, task.triggers, task.n)
    with torch.no_grad():
        m.matrix("W_QK^1").zero_()
    with pytest.raises(ValueError, match=match):
        three_steps.rescale_memories(m, task.triggers, task.n, scale, names)


def test_hand_written_memories_live_in_their_own_blocks_and_projection_removes_the_rest():
    _, task, m = _orthonormal_model()
    induction.construct(m, task.triggers, task.n)
    shares = three_steps.block_shares(m, task.n)
    for name, (left, right) in three_steps.OWN_BLOCK.items():
        assert shares[name][f"{left} x {right}"] == pytest.approx(1.0, abs=1e-4)
        assert torch.allclose(three_steps.own_block(m, name, task.n), m.matrix(name), atol=1e-5)
    memory = m.matrix("W_QK^2").detach().clone()
    with torch.no_grad():
        m.matrix("W_QK^2").add_(m.P.T @ m.P)  # a position-to-position association on top
    assert three_steps.block_shares(m, task.n)["W_QK^2"]["P x P"] > 0.5
    assert torch.allclose(three_steps.own_block(m, "W_QK^2", task.n), memory, atol=1e-4)


def test_qk2_rows_agree_with_the_probe():
    _, task, m = _orthonormal_model()
    induction.construct(m, task.triggers, task.n)
    rows = three_steps.qk2_rows(m, task.triggers, task.n)
    assert rows == {"qk2_rank": [1] * len(task.triggers), "qk2_winner": list(task.triggers)}
    with torch.no_grad():
        m.matrix("W_QK^2").copy_(torch.randn(256, 256, generator=torch.Generator().manual_seed(0)))
    rows = three_steps.qk2_rows(m, task.triggers, task.n)
    probe = induction.memory_probes(m, task.triggers, task.n, 8)["probe_QK2_all"]
    assert np.mean(np.array(rows["qk2_rank"]) == 1) == pytest.approx(probe)
    assert all(r >= 1 for r in rows["qk2_rank"])
    with torch.no_grad():
        m.matrix("W_QK^2").zero_()
    # ties count against
    assert three_steps.qk2_rows(m, task.triggers, task.n)["qk2_rank"] == [task.n] * len(task.triggers)


def test_three_steps_compares_scales_and_reports_blocks_and_rows():
    small = dict(d=230, seq_len=32, batch=512, chunk=512, line_batch=512, n_test=64, etas=(1.0, 4.0))
    r = three_steps.three_steps(
        three_steps.ThreeStepExperiment.quick(scales=(2.0, 40.0), **small), progress=False, use_cache=False
    )
    assert [s["scale"] for s in r["scales"]] == [2.0, 40.0]
    assert all(set(s) == {"scale", *three_steps.MIXES} for s in r["scales"])
    values = np.array([[s[m] for m in three_steps.MIXES] for s in r["scales"]])
    assert ((values >= 0) & (values <= 1) | np.isnan(values)).all(), values
    # NaN only where a learned memory scores <= 0
    assert not np.isnan([s["constructed"] for s in r["scales"]]).any()
    assert set(r["blocks"]) == set(induction.STEP_ORDER)
    total = {n: sum(v.values()) for n, v in r["blocks"].items()}
    assert all(0.9 < t <= 1.0 + 1e-4 for t in total.values())
    step2 = r["rows"][2]
    assert step2["matrix"] == "W_QK^2"
    assert np.mean(np.array(step2["qk2_rank"]) == 1) == pytest.approx(step2["probe_QK2_all"])
    assert "qk2_rank" not in r["rows"][1] and "qk2_rank" not in r["rows"][3]
    step3 = r["rows"][3]
    assert step3["matrix"] == "W_QK^1" and len(step3["qk1_winner"]) == 31
    misses = three_steps.qk1_misses(r)
    assert 1 - len(misses) / 31 == pytest.approx(step3["probe_QK1"])
    assert all(s != t - 1 and 0 <= s <= 30 for t, s in misses)
    gauss = three_steps.three_steps(
        three_steps.ThreeStepExperiment.quick(embeddings="gaussian", **small), progress=False, use_cache=False
    )
    assert gauss["scales"] == [] and gauss["blocks"] == {}  # no comparison asked; blocks undefined


def test_three_step_tables():
    res = {
        "scales": [{"scale": 1.0, **{m: 0.5 for m in three_steps.MIXES}}],
        "blocks": {
            n: {f"{a} x {b}": 0.1 for a in (("U",) if n == "W_V^2" else "EPR") for b in "EPR"}
            for n in induction.STEP_ORDER
        },
    }
    assert (
        three_steps_tables.scale_table(res).splitlines()[0]
        == "| scale | " + " | ".join(m.replace("W_V^2", "W_OV^2") for m in three_steps.MIXES) + " |"
    )
    table = three_steps_tables.block_table(res)
    assert len(table.splitlines()) == 2 + 7 and "| W_QK^2 | E | 0.1 | 0.1 | **0.1** |" in table
    runs = {
        "a": three_steps.ThreeStepExperiment.quick(embeddings="gaussian", data="shakespeare"),
        "b": three_steps.ThreeStepExperiment.quick(embeddings="gaussian", data="shakespeare_iid"),
    }
    step2 = {"matrix": "W_QK^2", "qk2_rank": [1, 3, 1, 1, 1], "qk2_winner": [1, 0, 2, 3, 4]}
    rows = {"rows": [{"matrix": "init"}, step2]}
    text = three_steps_data.qk2_rank_table({"a": rows, "b": rows}, runs)
    assert "| ' ' |" in text and "3 ('\\n' wins)" in text
    runs["b"] = three_steps.ThreeStepExperiment.quick()
    with pytest.raises(ValueError, match="do not share their triggers"):
        three_steps_data.qk2_rank_table({"a": rows, "b": rows}, runs)


def test_the_two_three_step_chapters_split_the_runs_and_read_their_own():
    """book/three_steps and book/three_steps_data: each run belongs to one chapter, each summary reads its
    chapter's runs by name (a hand-made result per run, whose values say where they come from) and refuses a
    dict without them."""
    runs = three_steps.three_step_runs("quick")
    assert sorted(three_steps.SLIDE_RUNS + three_steps.DATA_RUNS) == sorted(runs)
    assert len(set(three_steps.SLIDE_RUNS + three_steps.DATA_RUNS)) == len(runs)
    assert set(three_steps_data.GAUSSIAN_RUNS) <= set(runs)

    def run(i: int) -> dict:  # step k of run i holds i + k / 10 in every probe and as its size
        rows = [
            {"matrix": m, "eta": i + k / 10, **{p: i + k / 10 for p in three_steps.STEP_PROBE.values()}}
            for k, m in enumerate(("init", *induction.STEP_ORDER))
        ]
        rows[-1]["qk1_winner"] = [0, 1, 2]  # every row t recalls its key t - 1
        return {"rows": rows, "seconds": 1.0}

    results = {n: run(i) for i, n in enumerate(three_steps.DATA_RUNS)}
    summary = three_steps_data.data_summary(results)
    assert (summary["text_ov"], summary["text_qk2"], summary["text_qk1"]) == (0.1, 0.2, 0.3)
    assert (summary["text_ortho_qk2"], summary["text_ortho_qk1"], summary["text_ortho_step2_size"]) == (
        1.2,
        1.3,
        1.2,
    )
    assert summary["iid_qk2"] == 2.2
    assert (summary["text_ortho_qk1_big"], summary["text_ortho_step2_size_big"]) == (3.3, 3.2)
    assert summary["text_ortho_row1_recalled"] == 1.0 and summary["seconds"] == 4.0
    results[three_steps.DATA_RUNS[1]]["rows"][-1]["qk1_winner"] = [1, 1, 2]  # row 1 picks itself
    assert three_steps_data.data_summary(results)["text_ortho_row1_recalled"] == 0.0
    with pytest.raises(
        ValueError, match=r"data_summary needs the results of the runs .*missing \['slide order, Gaussian"
    ):
        three_steps_data.data_summary({})
    with pytest.raises(ValueError, match=r"three_step_summary needs .*missing \['slide order, orthonormal'"):
        three_steps_tables.three_step_summary(results)


# --- what step 2 writes ---


def test_construct_writes_only_the_named_memories():
    _, task, m = _orthonormal_model()
    before = {n: m.matrix(n).detach().clone() for n in ("W_QK^2", "W_V^2")}
    induction.construct(m, task.triggers, task.n, names=("W_QK^1",))
    assert all(torch.equal(m.matrix(n), W) for n, W in before.items())
    assert three_steps.stored_scores(m, task.triggers, task.n)["W_QK^1"] == pytest.approx(20.0, rel=1e-4)
    with pytest.raises(ValueError, match="unknown memory 'W_V\\^1'"):
        induction.construct(m, task.triggers, task.n, names=("W_V^1",))


def test_step2_gradient_is_what_step_2_writes_and_its_parts_add_up():
    small = dict(
        d=230, seq_len=32, batch=1024, chunk=512, line_batch=512, n_test=64, etas=(1.0, 4.0), scales=(5.0,)
    )
    exp = three_steps.ThreeStepExperiment.quick(**small)
    uni = three_steps_mechanism.step2_gradient(exp, use_cache=False)
    learned = three_steps.three_steps(exp, progress=False, use_cache=False)["blocks"]["W_QK^2"]
    assert uni["shares"] == pytest.approx(learned, abs=1e-6)  # the learned W_QK^2 is the gradient, scaled
    assert sum(p["share"] for p in uni["parts"].values()) == pytest.approx(1.0)
    assert all(p["share"] >= -1e-6 for p in uni["parts"].values())
    assert uni["parts"]["stored pairs"]["mean / stored"] == pytest.approx(1.0) and uni["stored"] > 0
    assert set(uni["accuracy"]) == {5.0} and 0 <= uni["accuracy"][5.0] <= 1
    prev = three_steps_mechanism.step2_gradient(exp, "previous token", use_cache=False)
    # the previous token, passed undiluted, strengthens the stored pairs
    assert prev["stored"] > uni["stored"]
    s = three_steps_mechanism.step2_summary([uni, prev])
    assert s["step2_stored_ratio"] == pytest.approx(prev["stored"] / uni["stored"])
    assert s["step2_best_prev"] == prev["accuracy"][5.0]
    table = three_steps_mechanism.step2_table([uni, prev])
    assert (
        len(table.splitlines()) == 2 + len(three_steps.STEP2_PARTS)
        and "uniform first layer" in table.splitlines()[0]
    )


@pytest.mark.parametrize(
    "overrides, first, match",
    [
        ({}, "previous", "unknown first_layer 'previous'"),
        ({"embeddings": "gaussian"}, "uniform", "needs embeddings='orthonormal'"),
        ({"order": induction.STEP_ORDER[::-1]}, "uniform", "the slide's order"),
    ],
)
def test_step2_gradient_bad_input(overrides, first, match):
    with pytest.raises(ValueError, match=match):
        three_steps_mechanism.step2_gradient(three_steps.ThreeStepExperiment.quick(**overrides), first)


def test_step2_summary_needs_both_first_layers():
    with pytest.raises(ValueError, match="missing \\['previous token'\\]"):
        three_steps_mechanism.step2_summary([{"first_layer": "uniform"}])


# --- the step-2 probe, part by part ---


def test_step2_outer_is_the_population_gradient():
    small = dict(d=64, seq_len=16, batch=512, chunk=256, line_batch=256, n_test=64, etas=(1.0, 4.0))
    model, task, population = three_steps.after_first_step(
        three_steps.ThreeStepExperiment.quick(embeddings="gaussian", data="shakespeare_iid", **small)
    )
    kept = []
    Q, K = three_steps_data.step2_outer(model, population, keep=kept)
    assert set(Q) == set(K) == set(three_steps_data.STREAM_PARTS) and len(kept) == len(population)
    G = sum(Q[a].T @ K[b] for a in Q for b in K) / len(Q["token"])
    auto = -three_steps.population_gradient(model, "W_QK^2", population)
    assert auto.norm() > 0 and (G - auto).norm() / auto.norm() < 1e-5
    n_loss = sum(int(b.loss_mask[:, -1].sum()) for b in population)
    assert Q["token"].shape == (n_loss, 64)
    # the token means: every sequence's weights sum to zero, so their count-weighted mean is zero too; with
    # the rows' own token vectors, the whole row is K's token part summed per trigger
    query = (Q["token"][:, None, :] == model.W_E[list(task.triggers)][None]).all(-1)
    tw = three_steps_data.step2_token_weights(model, population, query)
    assert tw["m"].shape == tw["counts"].shape == (3, model.W_U.shape[0])
    assert int(tw["counts"].sum()) == n_loss * 16 and abs(float((tw["m"] * tw["counts"]).sum())) < 1e-3
    assert -1 <= tw["cos_min"] <= tw["cos"] <= 1 and tw["pi"].sum().item() == pytest.approx(1.0, abs=1e-4)
    assert tw["counts"][1].sum() >= 2 * n_loss  # the query's token: at the query and at an earlier occurrence
    again = three_steps_data.step2_token_weights(
        model, population, query, gains=kept
    )  # what step2_outer kept: the same
    assert (
        all(torch.equal(tw[k], again[k]) for k in ("m", "counts", "alpha", "pi"))
        and tw["cos"] == again["cos"]
    )
    with pytest.raises(ValueError, match="exactly one trigger per sequence"):
        three_steps_data.step2_token_weights(model, population, query[:, :1])
    with torch.no_grad():
        model.matrix("W_QK^2").add_(1e-3)
    with pytest.raises(ValueError, match="needs W_QK\\^2 = 0"):
        three_steps_data.step2_outer(model, population)


def test_step2_outer_bad_input():
    exp = three_steps.ThreeStepExperiment.quick(
        embeddings="gaussian", d=64, seq_len=16, batch=256, chunk=256, line_batch=256
    )
    model, task, population, _ = three_steps.step_setup(exp)
    dense = dataclasses.replace(task, loss_on="all")
    with pytest.raises(ValueError, match="the last position only"):
        three_steps_data.step2_outer(model, [dense.sample(np.random.default_rng(0), 8)])
    one = Transformer(ModelConfig(vocab_size=task.vocab_size, d=64, max_len=16, ff=("none",)))
    with pytest.raises(ValueError, match="two attention-only layers"):
        three_steps_data.step2_outer(one, population)
    with pytest.raises(ValueError, match="the slide's order"):
        three_steps_data.step2_probe_parts(
            three_steps.ThreeStepExperiment.quick(order=induction.STEP_ORDER[::-1])
        )


def test_the_mechanism_computations_are_cached(tmp_path, monkeypatch):
    """The chapter's population computations are computed once (the book's build reads what its test run
    computed); ``use_cache=False`` computes again."""
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path))
    small = dict(d=64, embeddings="gaussian", seq_len=16, batch=256, chunk=256, line_batch=256, n_test=16)
    exp = three_steps.ThreeStepExperiment.quick(etas=(1.0,), **small)
    first = three_steps_data.step2_probe_parts(exp)

    def recomputed(*args):
        raise AssertionError("recomputed")

    monkeypatch.setattr(three_steps_data, "_step2_probe_parts", recomputed)
    assert three_steps_data.step2_probe_parts(exp)["probe"] == first["probe"]
    with pytest.raises(AssertionError, match="recomputed"):
        three_steps_data.step2_probe_parts(exp, use_cache=False)
    with pytest.raises(AssertionError, match="recomputed"):  # another configuration is not the cached one
        three_steps_data.step2_probe_parts(dataclasses.replace(exp, seed=1))


def test_step2_probe_parts_add_up_to_the_runs_probe():
    small = dict(seq_len=32, batch=1024, chunk=512, line_batch=512, n_test=64, etas=(1.0, 4.0))
    ortho = three_steps.ThreeStepExperiment.quick(d=230, data="shakespeare", **small)
    parts = three_steps_data.step2_probe_parts(ortho, use_cache=False)
    assert (
        parts["probe"]
        == three_steps.three_steps(ortho, progress=False, use_cache=False)["rows"][2]["probe_QK2_all"]
    )
    # orthonormal embeddings: the keys' tokens and positions are orthogonal to every remapped key
    first = parts["key"]["first layer"]["spread"]
    assert first > 0 and parts["key"]["token"]["spread"] < 1e-4 * first
    assert parts["key"]["position"]["spread"] < 1e-4 * first
    assert parts["key"]["first layer"]["probe"] == parts["probe"]
    gauss = three_steps_data.step2_probe_parts(
        three_steps.ThreeStepExperiment.quick(d=64, embeddings="gaussian", **small), use_cache=False
    )
    assert gauss["key"]["token"]["spread"] > 0 and set(gauss["without key"]) == set(
        three_steps_data.STREAM_PARTS
    )
    results = dict(zip(three_steps_data.GAUSSIAN_RUNS, (gauss, parts, gauss)))
    s = three_steps_data.step2_probe_summary(results)
    assert s["step2_parts_token_iid"] == pytest.approx(
        gauss["key"]["token"]["spread"] / gauss["key"]["first layer"]["spread"]
    )
    assert s["step2_parts_first_layer_min"] == min(r["key"]["first layer"]["probe"] for r in results.values())
    assert (
        s["step2_parts_coherence_ratio"] == pytest.approx(1.0) and 0 < s["step2_parts_shared_iid"] <= 1 + 1e-6
    )
    table = three_steps_data.step2_probe_table(results)
    assert len(table.splitlines()) == 2 + 1 + 2 * len(three_steps_data.STREAM_PARTS)
    with pytest.raises(ValueError, match="missing"):
        three_steps_data.step2_probe_summary({three_steps_data.GAUSSIAN_RUNS[0]: gauss})


def test_key_coherence_tells_a_random_walk_from_a_shared_vector():
    g = torch.Generator().manual_seed(0)
    query = torch.zeros(4000, 5, dtype=torch.bool)
    query[torch.arange(4000), torch.arange(4000) % 5] = True
    walk = three_steps_data.key_coherence(torch.randn(4000, 32, generator=g), query)
    assert 0.7 < walk["coherence"] < 1.3 and walk["shared"] < 0.5  # independent, mean zero
    common = torch.randn(32, generator=g)
    alike = three_steps_data.key_coherence(common + 0.1 * torch.randn(4000, 32, generator=g), query)
    assert alike["coherence"] > 700 and alike["shared"] > 0.99  # 800 sequences per trigger, all alike
    assert walk["sequences"] == alike["sequences"] == 800
    with pytest.raises(ValueError, match="exactly one trigger per sequence"):
        three_steps_data.key_coherence(torch.randn(4, 3), torch.ones(4, 2, dtype=torch.bool))


def test_head_and_bigram_paths_add_up_to_the_logits():
    exp = induction.random_trigger_experiment("quick")
    model = Transformer(exp.model_config(), seed=0)
    b = exp.task().sample(np.random.default_rng(0), 4)
    logits, head, rest = induction_random.head_and_bigram_paths(model, torch.as_tensor(b.inputs))
    torch.testing.assert_close(head + rest, logits, rtol=1e-4, atol=1e-4)


def test_head_or_bigram_groups_every_repeated_trigger_by_rank():
    exp = dataclasses.replace(
        induction.random_trigger_experiment("quick"), steps=2, eval_every=1, batch=4, n_test=8
    )
    assert exp.task().trigger_draw == "unigram"
    hb = induction_random.head_or_bigram(
        induction.run(exp, progress=False, use_cache=False), n_seq=120, chunk=32
    )
    assert sum(b["n"] for b in hb["bins"]) == hb["positions"] > 0
    rng = np.random.default_rng(config.seed_streams(exp.seed, ["head-or-bigram"])["head-or-bigram"])
    batches = [exp.task().sample(rng, 32) for _ in range(3)] + [exp.task().sample(rng, 24)]
    # the forced position left out
    assert hb["positions"] == sum(int(b.recall_positions.sum()) for b in batches)
    first = hb["bins"][0]  # o is the bigram's likeliest successor: predicting o is predicting the top
    assert first["ranks"] == (1, 1) and first["n"] > 0 and first["acc"] == first["top1"]
    assert all(0 <= b[k] <= 1 for b in hb["bins"] if b["n"] for k in induction_random.COLUMNS)
    rows = induction_random.head_or_bigram_rows(hb)
    assert [r[0] for r in rows][:2] == ["1", f"2 to {induction.BIGRAM_TOP}"] and len(rows[0]) == len(
        induction_random.HEAD_OR_BIGRAM_HEADER
    )
    assert rows[-1][0] == "never follows the trigger" and rows[-2][0] == "21 and above"
    assert (
        0 <= hb["strata_matched"] <= exp.task().n * len(induction_random.OCCURRENCE_BINS)
        and 0 <= hb["matched_share"] <= 1
    )
    with pytest.raises(ValueError, match=r"head_or_bigram needs ff=\('none', 'linear'\)"):
        induction_random.head_or_bigram(induction.InductionRun(induction.InductionExperiment.quick(), {}))
    with pytest.raises(ValueError, match=r"n_seq=0 is out of range"):
        induction_random.head_or_bigram(induction.InductionRun(exp, {}), n_seq=0)


def _tiny_random_run():
    exp = dataclasses.replace(
        induction.random_trigger_experiment("quick"), steps=3, eval_every=1, batch=4, n_test=16
    )
    return induction.run(exp, progress=False, use_cache=False)


def test_a_run_keeps_the_weights_of_its_late_window_and_a_cut_there_holds_them():
    """The weights kept at an evaluation of the late window are those of the same run stopped there (bitwise: the
    batches are keyed by step), a cut there holds them, a cut before the window none, and the measurements are
    those of a run that keeps nothing."""
    exp = dataclasses.replace(
        induction.random_trigger_experiment("quick"), steps=10, eval_every=1, batch=4, n_test=16
    )
    r = induction.run(exp, progress=False, use_cache=False)
    assert r.steps.tolist() == list(range(11)) and sorted(r.late_states) == [8, 9]  # from 0.8 x 10; 10: state
    shorter = induction.run(dataclasses.replace(exp, steps=8), progress=False, use_cache=False)
    assert all(torch.equal(shorter.state[k], v) for k, v in r.late_states[8].items())
    assert not all(torch.equal(r.late_states[9][k], v) for k, v in r.state.items())
    assert all(np.array_equal(shorter.metrics[k], v[:9]) for k, v in r.metrics.items())
    cut = r.stopped_after(8)
    assert cut.state is r.late_states[8] and cut.late_states == {} and cut.steps[-1] == 8
    assert r.stopped_after(10).state is r.state
    torch.testing.assert_close(cut.model().W_E, shorter.model().W_E, rtol=0, atol=0)
    with pytest.raises(
        ValueError, match=r"holds no weights \(a run cut by stopped_after before its late window\)"
    ):
        r.stopped_after(7).model()


def test_the_rows_on_the_trained_model_are_measured_again_on_a_cut_run():
    """trained_summary gives the entries of random_summary that the rows on the trained model read, bitwise, with
    only the edits they need; on a run cut in its late window it reads the weights kept there, as late_pushes does;
    head_or_bigram_values leaves out the entries of the edits not measured; a bad edit is refused."""
    from companion.experiments import late_rows, late_verdicts

    exp = dataclasses.replace(
        induction.random_trigger_experiment("quick"), steps=5, eval_every=1, batch=4, n_test=16
    )
    rnd = induction.run(exp, progress=False, use_cache=False)
    ffr = induction.run(
        dataclasses.replace(
            induction_random.ff_experiment("quick"), steps=2, eval_every=1, batch=4, n_test=16
        ),
        progress=False,
        use_cache=False,
    )
    n = 40
    edits = induction_random.discount_edits(rnd, n)
    res = {
        "ff": ffr,
        "random": rnd,
        "discount_edits": edits,
        "head_or_bigram": edits["trained"],
        "pair_gradient": induction_random_push.pair_gradient(rnd, n),
        "pair_scores": induction_random.pair_score_models(rnd, ffr),
    }
    whole = induction_random.random_summary(res)
    rows = induction_random.trained_summary({"random": rnd}, n)
    assert set(late_rows.INDUCTION_RANDOM.values()) <= set(rows) <= set(whole)
    assert all(np.array_equal(rows[e], whole[e], equal_nan=True) for e in rows)
    at_4 = induction_random.trained_summary({"random": rnd.stopped_after(4)}, n)
    again = induction_random.trained_summary(
        {"random": dataclasses.replace(rnd, state=rnd.late_states[4])}, n
    )
    assert all(np.array_equal(at_4[e], again[e], equal_nan=True) for e in rows)
    assert any(not np.array_equal(at_4[e], rows[e], equal_nan=True) for e in rows)
    assert set(rows) == set(induction_random.TRAINED_ENTRIES)
    stopped = late_verdicts.stopped_entries(
        partial(induction_random.trained_summary, n_seq=n),
        {"random": rnd},
        induction_random.TRAINED_ENTRIES,
        whole=whole,
    )
    pushes = induction_random_push.late_pushes(rnd, stopped)
    pg4 = induction_random_push.pair_gradient(rnd.stopped_after(4), n)
    assert list(pushes) == [4, 5] and pushes[4]["push_likely_trigger"] == pg4["likely"]["trigger"]
    assert pushes[4]["push_likely_nontrigger"] == pg4["likely"]["non-trigger"]
    assert pushes[4]["push_other_balance"] == pg4["other"]["balance"]
    assert pushes[5] == {e: whole[e] for e in induction_random_push.PUSH_ENTRIES}  # the run as it ended
    with pytest.raises(ValueError, match=r"late_pushes: entries \['push_balance_gap'\] were not measured"):
        induction_random_push.late_pushes(rnd, {e: v for e, v in stopped.items() if e != "push_balance_gap"})
    with pytest.raises(ValueError, match=r"late_pushes: views per entry .*late window has 2 evaluations"):
        induction_random_push.late_pushes(rnd, {e: (v, w[:1]) for e, (v, w) in stopped.items()})
    table = induction_random_push.late_push_rows(pushes)
    assert [r[0] for r in table] == [4, 5] and len(table[0]) == len(induction_random_push.LATE_PUSH_HEADER)
    assert table[1][5] == pytest.approx(pushes[5]["push_likely_balance"] - pushes[5]["push_other_balance"])
    lp = induction_random_push.late_push_summary(pushes)
    assert lp["late_push_n"] == 2 and lp["late_push_from"] == 4
    assert lp["late_push_gap_min"] == min(r[5] for r in table)
    assert lp["late_push_gap_positive"] == sum(r[5] > 0 for r in table)
    assert lp["late_push_other_max"] == max(r[4] for r in table)
    part = induction_random.head_or_bigram_values(
        {k: edits[k] for k in induction_random.ROW_EDITS},
        res["pair_gradient"],
        res["pair_scores"][induction_random.PAIR_MODELS[0]],
    )
    assert "ratio_both_removed" in part and "ratio_QK1_removed" not in part
    assert "discount_doubled_growth" in part and "discount_pairwise_share" not in part
    with pytest.raises(ValueError, match=r"unknown edit 'halved': allowed values are 'trained'"):
        induction_random.discount_edits(rnd, n, keys=("trained", "halved"))


def test_key_measures_match_a_position_by_position_count():
    r = _tiny_random_run()
    model, b = r.model(), r.exp.task().sample(np.random.default_rng(1), 3)
    x, rec = torch.as_tensor(b.inputs), {}
    model(x, record=rec)
    T = x.shape[1]
    prev = torch.cat([torch.full_like(x[:, :1], -1), x[:, :-1]], 1)
    keys = (prev[:, None, :] == x[:, :, None]) & torch.ones(T, T, dtype=torch.bool).tril()
    assert torch.equal(keys, induction_random_push.after_earlier(x))
    y = torch.as_tensor(b.targets)
    m = induction_random._key_measures(model, x, rec, keys, y)
    W2, c, x1 = model.layers[1].qk(), model.scale, rec["u1"]
    i, t = [int(v) for v in keys.any(-1).nonzero()[-1]]  # a position with at least one such key
    s = keys[i, t].nonzero()[:, 0]
    score = x1[i, t] @ W2 @ x1[i, : t + 1].T * c
    q = model.W_E[x[i, t]] @ W2 * c
    h1 = x1[i] - model.W_E[x[i]] - model.P[:T]
    torch.testing.assert_close(m["key_score"][i, t], score[s].mean())
    torch.testing.assert_close(m["pair_score"][i, t], (q @ model.W_E[x[i, s]].T).mean())
    torch.testing.assert_close(m["match_score"][i, t], (q @ h1[s].T).mean())
    torch.testing.assert_close(m["prev_attention"][i, t], rec["attn1"][i, s, s - 1].mean())
    others = torch.ones(t + 1, dtype=torch.bool)
    others[s] = False
    torch.testing.assert_close(m["rest_score"][i, t], torch.logsumexp(score[others], 0))
    # the attention on the keys is the softmax share their logits win against the others'
    torch.testing.assert_close(
        m["attention"][i, t], torch.sigmoid(torch.logsumexp(score[s], 0) - m["rest_score"][i, t])
    )
    # the rest of the attention, by what the other keys hold, counted key by key
    a2, share = (
        rec["attn2"][i, t],
        {"attention_query_token": 0.0, "attention_target_elsewhere": 0.0, "attention_rest": 0.0},
    )
    for k in range(t + 1):
        if not keys[i, t, k]:
            kind = (
                "attention_query_token"
                if x[i, k] == x[i, t]
                else "attention_target_elsewhere"
                if x[i, k] == y[i, t]
                else "attention_rest"
            )
            share[kind] += float(a2[k])
    for kind, v in share.items():
        assert float(m[kind][i, t]) == pytest.approx(v, abs=1e-6)
    parts = (
        m["attention"] + m["attention_query_token"] + m["attention_target_elsewhere"] + m["attention_rest"]
    )
    torch.testing.assert_close(parts, torch.ones_like(parts))


def test_pair_scores_read_the_token_token_logits():
    r = _tiny_random_run()
    model, task = r.model(trained=False), r.exp.task()
    N = task.stats.bigram.shape[0]
    # orthonormal embeddings, then one pair (q, its likeliest successor) raised in W_QK^2
    with torch.no_grad():
        model.W_E[:N] = torch.linalg.qr(
            torch.randn(model.W_E.shape[1], N, generator=torch.Generator().manual_seed(0))
        )[0].T
        base = induction.pair_scores(model, task)
        q = task.triggers[0]
        y = int(np.argmax(task.stats.bigram[q]))
        model.layers[1].W_QK += 50.0 * torch.outer(model.W_E[q], model.W_E[y])
    ps = induction.pair_scores(model, task)
    ranks, big = induction.successor_ranks(task), torch.as_tensor(task.stats.bigram)
    assert (
        torch.equal(ranks == induction.NEVER, big == 0)
        and (ranks.gather(1, big.argmax(1)[:, None]) == 1).all()
    )
    n_likely = int(induction.likely_pairs(task)[[t for t in task.triggers if t < N]].sum())
    shift = ps["W_QK^2"][induction.PAIR_KINDS[0]] - base["W_QK^2"][induction.PAIR_KINDS[0]]
    # one pair of n_likely moved by 50 c
    assert shift == pytest.approx(50.0 * model.scale / n_likely, rel=1e-4)
    assert ps["W_QK^1"] == base["W_QK^1"]
    rows = induction_random.pair_score_rows(induction_random.pair_score_models(r, r))
    assert len(rows) == 2 * len(induction_random.PAIR_MODELS) and len(rows[0]) == 3 + len(
        induction.PAIR_KINDS
    )


def test_pair_gradient_is_the_derivative_of_the_training_loss():
    r = _tiny_random_run()
    pg = induction_random_push.pair_gradient(r, n_seq=6, chunk=4)
    # the same sequences, the same masks: a central difference of the summed loss along each shift, in float64 (in
    # float32 the summed loss, some hundreds of nats, moves by a few ulps over the difference's step)
    model, task = r.model().double(), r.exp.task()
    rng = np.random.default_rng(config.seed_streams(r.exp.seed, ["pair-gradient"])["pair-gradient"])
    batches = [task.sample(rng, n) for n in (4, 2)]
    likely = induction.likely_pairs(task)

    def loss(kind: str, eps: float) -> float:
        total = 0.0
        for b in batches:
            masks, _ = induction_random_push.pair_masks(likely, b)
            x = torch.as_tensor(b.inputs)
            with torch.no_grad():
                logits = model(x, score_bias=eps * masks[kind].double())
            total += float(
                F.cross_entropy(logits.flatten(0, 1), torch.as_tensor(b.targets).flatten(), reduction="sum")
            )
        return total / 6

    for kind in induction_random_push.KEY_KINDS:
        fd = (loss(kind, 1e-2) - loss(kind, -1e-2)) / 2e-2
        assert pg[kind]["net"] == pytest.approx(fd, rel=0.05, abs=1e-4)
        assert pg[kind]["net"] == pytest.approx(pg[kind]["trigger"] + pg[kind]["non-trigger"])
    with pytest.raises(ValueError, match=r"pair_gradient needs two layers"):
        induction_random_push.pair_gradient(
            induction.InductionRun(induction.layer_experiments("quick")[1], {})
        )
    with pytest.raises(ValueError, match=r"chunk=0 is out of range"):
        induction_random_push.pair_gradient(r, chunk=0)


def test_score_bias_shifts_the_attention_logits():
    model = Transformer(induction.random_trigger_experiment("quick").model_config(), seed=0)
    x = model.embed(torch.randint(0, 60, (2, 8)))
    with torch.no_grad():
        torch.testing.assert_close(model.attend(1, x, score_bias=torch.zeros(8, 8)), model.attend(1, x))
        rec, bias = {}, torch.zeros(8, 8)
        bias[:, 0] = -1e9  # no query may look at the first key, except the first query (its only key)
        model.attend(1, x, record=rec, score_bias=bias)
    assert rec["attn2"][:, 1:, 0].abs().max() < 1e-6
    tokens = torch.randint(0, 60, (2, 8))  # the forward pass adds it in the last layer only
    with torch.no_grad():
        torch.testing.assert_close(model(tokens, score_bias=torch.zeros(8, 8)), model(tokens))
        rec = {}
        model(tokens, record=rec, score_bias=bias)
    assert rec["attn2"][:, 1:, 0].abs().max() < 1e-6 and rec["attn1"][:, 1:, 0].min() > 0


def test_score_bias_per_layer():
    model = Transformer(induction.random_trigger_experiment("quick").model_config(), seed=0)
    tokens = torch.randint(0, 60, (2, 8))
    bias = torch.zeros(8, 8)
    bias[:, 0] = -1e9
    with torch.no_grad():
        torch.testing.assert_close(model(tokens, score_bias={1: bias}), model(tokens, score_bias=bias))
        rec = {}
        model(tokens, record=rec, score_bias={0: bias})
    assert rec["attn1"][:, 1:, 0].abs().max() < 1e-6 and rec["attn2"][:, 1:, 0].min() > 0
    with pytest.raises(ValueError, match=r"score_bias layer 2 is not run: choose layers in \[0, 1\]"):
        model(tokens, score_bias={2: bias})


def test_discount_edit_moves_only_the_likely_pairs_token_token_logits():
    r = _tiny_random_run()
    model, task = r.model(), r.exp.task()
    N, V = task.stats.bigram.shape[0], task.vocab_size
    base = induction.pair_scores(model, task)
    pool = [q for q in task.triggers if q < N]
    likely = torch.zeros(V, V, dtype=torch.bool)
    likely[torch.as_tensor(pool)[:, None], torch.arange(N)] = induction.likely_pairs(task)[pool]
    for name, layer in induction.QK_LAYERS.items():
        other = next(n for n in induction.QK_LAYERS if n != name)
        for strength, left in ((1.0, 0.0), (-1.0, 2.0), (0.5, 0.5)):
            edit = induction.discount_edit(model, task, {name: strength})
            assert set(edit) == {layer}
            where = likely if name == "W_QK^2" else likely.T  # [query token, key token]
            assert (edit[layer][~where] == 0).all() and torch.allclose(
                edit[layer][where], torch.tensor(-strength * base[name]["likely_minus_other"])
            )
            ps = induction.pair_scores(model, task, edit)
            assert ps[name]["likely_minus_other"] == pytest.approx(
                left * base[name]["likely_minus_other"], abs=1e-5
            )
            assert ps[other] == base[other]
        # pair by pair: every likely pair of q scores the mean of q's other successors
        M = induction.token_token_logits(
            model, induction.discount_edit(model, task, {name: 1.0}, how="pair")
        )[name]
        M = M if name == "W_QK^2" else M.T  # [q, y]
        big = torch.as_tensor(task.stats.bigram)
        unedited = induction.token_token_logits(model)[name]
        unedited = unedited if name == "W_QK^2" else unedited.T
        for q in pool:
            lik, oth = induction.likely_pairs(task)[q], (big[q] > 0) & ~induction.likely_pairs(task)[q]
            want = M[q, :N][oth].mean().expand(int(lik.sum())) if oth.any() else unedited[q, :N][lik]
            torch.testing.assert_close(M[q, :N][lik], want)
        # both cases are checked
        assert any(not ((big[q] > 0) & ~induction.likely_pairs(task)[q]).any() for q in pool)
    # in the forward pass: the edited logits are the unedited ones plus the table at (z_t, z_s)
    b = task.sample(np.random.default_rng(2), 2)
    x = torch.as_tensor(b.inputs)
    edit = induction.discount_edit(model, task, {"W_QK^1": -3.0, "W_QK^2": 2.0})
    bias = {l: t[x[:, :, None], x[:, None, :]] for l, t in edit.items()}
    rec0, rec1 = {}, {}
    with torch.no_grad():
        model(x, record=rec0)
        model(x, record=rec1, score_bias={0: bias[0]})
        T = x.shape[1]
        s1 = (model.embed(x) @ model.layers[0].qk()) @ model.embed(x).transpose(1, 2) * model.scale + bias[0]
        torch.testing.assert_close(
            rec1["attn1"],
            torch.softmax(s1.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")), -1),
        )
    keys, y = induction_random_push.after_earlier(x), torch.as_tensor(b.targets)
    m0 = induction_random._key_measures(model, x, rec0, keys, y)
    m1 = induction_random._key_measures(model, x, rec0, keys, y, bias[1])
    has = keys.any(-1)
    shift = (bias[1] * keys).sum(-1)[has] / keys.sum(-1)[has]
    torch.testing.assert_close(m1["key_score"][has], m0["key_score"][has] + shift)
    torch.testing.assert_close(m1["pair_score"][has], m0["pair_score"][has] + shift)
    torch.testing.assert_close(m1["match_score"], m0["match_score"])
    same = induction_random.head_or_bigram(r, n_seq=8, chunk=4, edit={l: torch.zeros(V, V) for l in (0, 1)})
    assert same == induction_random.head_or_bigram(r, n_seq=8, chunk=4)
    with pytest.raises(ValueError, match="unknown how 'x'"):
        induction.discount_edit(model, task, {"W_QK^1": 1.0}, how="x")
    with pytest.raises(ValueError, match="unknown layer 'W_V\\^2'"):
        induction.discount_edit(model, task, {"W_V^2": 1.0})
    with pytest.raises(ValueError, match=r"strength of W_QK\^1=nan is out of range"):
        induction.discount_edit(model, task, {"W_QK^1": float("nan")})
    with pytest.raises(ValueError, match=r"edit must map layers 0 and 1 to \(65, 65\) tables; got layer 2"):
        induction_random.head_or_bigram(r, n_seq=8, edit={2: torch.zeros(V, V)})
    rows = induction_random.discount_edit_rows(induction_random.discount_edits(r, n_seq=8, chunk=4))
    assert [row[0] for row in rows] == [n for n, *_ in induction.DISCOUNT_EDITS.values()]
    assert all(len(row) == len(induction_random.DISCOUNT_EDIT_HEADER) for row in rows)


def test_evaluator_leaves_out_the_position_before_a_forced_final_trigger():
    exp = three_steps.three_step_runs("quick")[
        "slide order, orthonormal"
    ]  # its loss is at the final trigger: kept
    ev = induction.Evaluator(exp, Transformer(exp.model_config(), seed=0), "cpu")
    T = exp.seq_len
    assert exp.task().final_trigger and ev.head.any()
    # its target is the forced final trigger
    assert not ev.head[:, T - 2].any() and not ev.other[:, T - 2].any()
    # the Birth runs: no forced final trigger, as the public code
    birth = induction.random_trigger_experiment("quick")
    assert not birth.task().final_trigger
    ev = induction.Evaluator(birth, Transformer(birth.model_config(), seed=0), "cpu")
    assert ev.head[:, T - 2].any()


def test_random_curves_along_training_count_the_test_positions():
    """The random-trigger run logs the head-or-bigram top-1 shares on its test batch (checked against a position-by-position
    count at the end) and the pair discounts of pair_scores; a fixed-trigger run logs neither."""
    r = _tiny_random_run()
    assert all(
        len(r.metrics[k]) == len(r.metrics["step"]) == 4 for k in induction_random_seeds.RANDOM_CURVES
    )  # steps 0 to 3
    exp, task = r.exp, r.exp.task()
    ev = induction.Evaluator(exp, r.model(), "cpu")  # the same test batch (stream "test-data" of the seed)
    pred = r.model()(ev.tokens).argmax(-1)
    big, ranks = task.stats.bigram, induction.successor_ranks(task)
    x, edited = ev.tokens, {}
    # both discounts removed, as a mean, pair by pair
    for end, how in (("_removed", "mean"), ("_pairwise", "pair")):
        edit = induction.discount_edit(r.model(), task, {"W_QK^1": 1.0, "W_QK^2": 1.0}, how)
        bias = {l: torch.gather(t[x], 2, x[:, None, :].expand(-1, x.shape[1], -1)) for l, t in edit.items()}
        edited[end] = r.model()(x, score_bias=bias).argmax(-1)
    hits = {f"{side}{end}": [] for side in ("in", "off") for end in ("", *edited)}
    for i, t in ev.head.nonzero().tolist():
        q, o = int(ev.tokens[i, t]), int(ev.targets[i, t])
        side = (
            "in"
            if 2 <= ranks[q, o] <= induction.BIGRAM_TOP
            else "off"
            if ranks[q, o] > induction.BIGRAM_TOP
            else None
        )
        if side:
            hits[side].append(int(pred[i, t]) == int(big[q].argmax()))
            for end, p in edited.items():
                hits[f"{side}{end}"].append(int(p[i, t]) == int(big[q].argmax()))
    # edits change
    assert hits["in"] and hits["off"] and not any(torch.equal(p, pred) for p in edited.values())
    assert not torch.equal(edited["_removed"], edited["_pairwise"])  # predictions, and differently
    row = ev(0)
    for side in hits:
        assert row[f"random_top1_{side}"] == pytest.approx(np.mean(hits[side]))
    scores = induction.pair_scores(r.model(), task)
    assert row["random_pair_QK1"] == scores["W_QK^1"]["likely_minus_other"]
    assert row["random_pair_QK2"] == scores["W_QK^2"]["likely_minus_other"]
    fixed = dataclasses.replace(induction.ff_experiment("quick"), steps=1, eval_every=1, batch=4, n_test=8)
    assert not any(
        k.startswith("random_")
        for k in induction.Evaluator(fixed, Transformer(fixed.model_config()), "cpu")(0)
    )


def test_the_seed_studys_views_measure_only_the_cut_run(monkeypatch):
    """stopped_summary(runs)(view) is random_seeds_summary(view), bitwise, for the whole runs and for a view with one
    run cut in its late window, measuring each whole run once and then only the cut run of each view."""
    from functools import partial

    calls = []
    measure = partial(induction_random_seeds.seed_measures, n_seq=256)
    monkeypatch.setattr(
        induction_random_seeds, "seed_measures", lambda r: calls.append(r.steps[-1]) or measure(r)
    )
    exp = dataclasses.replace(
        induction.random_trigger_experiment("quick"), steps=5, eval_every=1, batch=4, n_test=16
    )
    runs = {
        f"seed {s}": induction.run(dataclasses.replace(exp, seed=s), progress=False, use_cache=False)
        for s in (0, 1)
    }
    make = induction_random_seeds.stopped_summary(runs)
    assert calls == [5, 5]
    view = {**runs, "seed 1": runs["seed 1"].stopped_after(4)}
    for v in (runs, view):
        a, b = make(v), induction_random_seeds.random_seeds_summary(v)
        assert list(a) == list(b) and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)
    assert calls == [5, 5, 5, 5, 4, 5, 4]  # the whole runs; one view: the cut run, then both runs again (b)
    assert make(view)["random_seeds_balance_gap_s1"] != make(runs)["random_seeds_balance_gap_s1"]


def test_random_seed_study_summarises_each_seed_and_the_extremes():
    runs = {"seed 0": _tiny_random_run()}
    exp1 = dataclasses.replace(runs["seed 0"].exp, seed=1)
    runs["seed 1"] = induction.run(exp1, progress=False, use_cache=False)
    s = induction_random_seeds.random_seeds_summary(runs)
    per = [
        {
            **induction_random.head_or_bigram_values(
                induction_random.discount_edits(r),
                induction_random_push.pair_gradient(r),
                induction.pair_scores(r.model(), r.exp.task()),
            ),
            **induction_random_seeds.random_training_values(r),
        }
        for r in runs.values()
    ]
    for seed, v in enumerate(per):
        assert all(
            np.array_equal(s[f"random_seeds_{m}_s{seed}"], v[m], equal_nan=True)
            for m in induction_random.RANDOM_MEASURES
        )
    ratios = [v["top1_ratio"] for v in per]
    assert s["random_seeds_top1_ratio_min"] == min(ratios) and s["random_seeds_top1_ratio_max"] == max(ratios)
    assert s["random_seeds_above_2"] == sum(x > 2 for x in ratios) and s["random_seeds_n"] == 2
    assert s["random_seeds_pair_discount_max"] == max(v["pair_discount_weaker"] for v in per)
    assert s["random_seeds_balance_gap_min"] == min(v["balance_gap"] for v in per)
    assert s["random_seeds_rest_share_min"] == pytest.approx(
        min(v["attention_rest_gap"] / -v["attention_gap"] for v in per)
    )
    v = per[0]  # the intervention's shares, from the ratios of the edited models on the same positions
    assert v["discount_removed_share"] == pytest.approx(
        (v["top1_ratio"] - v["ratio_both_removed"]) / (v["top1_ratio"] - 1)
    )
    assert v["discount_doubled_growth"] == pytest.approx(
        (v["ratio_both_doubled"] - v["top1_ratio"]) / (v["top1_ratio"] - 1)
    )
    assert s["random_seeds_discount_removed_share_min"] == min(v["discount_removed_share"] for v in per)
    assert s["random_seeds_discount_doubled_growth_min"] == min(v["discount_doubled_growth"] for v in per)
    assert s["random_seeds_qk1_stronger"] == sum(v["ratio_QK1_removed"] < v["ratio_QK2_removed"] for v in per)
    assert s["random_seeds_pairwise_more"] == sum(
        v["discount_pairwise_share"] > v["discount_removed_share"] for v in per
    )
    early = [v["removed_share_early"] for v in per]  # along training: each seed's own windows
    # numpy's min: an undefined share (nan, a ratio of 1 in the tiny run) makes the minimum undefined too
    assert np.array_equal(s["random_seeds_early_removed_share_min"], np.min(early), equal_nan=True)
    assert s["random_seeds_early_removed_share_argmin"] == int(np.argmin(early))
    assert s["random_seeds_early_removed_share_above"] == sum(x > 0.25 for x in early)
    one = induction_random_seeds.random_along_training(
        induction_random_seeds.random_seed_curves({"seed 1": runs["seed 1"]})
    )
    for m in induction_random.TRAINING_MEASURES:
        assert np.array_equal(per[1][f"{m}_late"], one[f"random_training_{m}_late"], equal_nan=True)
    pairwise = [v["pairwise_share_early"] for v in per]
    assert np.array_equal(s["random_seeds_early_pairwise_share_min"], np.min(pairwise), equal_nan=True)
    assert s["random_seeds_early_pairwise_share_above"] == sum(x > 0.25 for x in pairwise)
    assert s["random_seeds_early_pairwise_more"] == sum(a > b for a, b in zip(pairwise, early))
    weakest = [v["pair_QK2_early"] for v in per]
    assert s["random_seeds_early_pair_QK2_max"] == max(weakest) and s[
        "random_seeds_early_pair_QK2_argmax"
    ] == int(np.argmax(weakest))
    over = induction_random_seeds.random_seed_overview(s)
    assert (
        "random_seeds_n" in over and not any(k.endswith(("_s0", "_s1")) for k in over) and len(over) < len(s)
    )
    for table in induction_random_seeds.RANDOM_TABLES:
        rows = induction_random_seeds.random_seed_rows(s, table)
        assert [r[0] for r in rows] == [0, 1] and len(rows[0]) == len(
            induction_random_seeds.random_seed_header(table)
        )
    assert set(induction_random.RANDOM_MEASURES) == {
        m for cols in induction_random_seeds.RANDOM_TABLES.values() for m in cols
    }
    assert induction_random_seeds.random_seed_rows(s, "attention")[1][1] == per[1]["attention_gap"]
    with pytest.raises(ValueError, match="unknown table 'x'"):
        induction_random_seeds.random_seed_rows(s, "x")
    curves = induction_random_seeds.random_seed_curves(runs)
    assert (
        set(curves) == {"step", *induction_random_seeds.RANDOM_CURVES}
        and curves["acc"]["seed 1"] == runs["seed 1"].metrics["acc"].tolist()
    )
    members = induction_random_seeds.random_seed_members("quick")
    assert [e.seed for e in members.values()] == list(induction_random_seeds.RANDOM_SEEDS)
    assert {dataclasses.replace(e, seed=0) for e in members.values()} == {
        induction.random_trigger_experiment("quick")
    }


def test_random_along_training_averages_each_window_then_the_seeds():
    steps = [0, 25, 50, 75, 100]
    curves = {"step": {"a": steps, "b": steps}}
    for i, k in enumerate(induction_random_seeds.RANDOM_CURVES):
        curves[k] = {"a": [i, 1.0, 2.0, 3.0, 5.0], "b": [i, 3.0, 4.0, 5.0, 7.0]}
    s = induction_random_seeds.random_along_training(curves, early=(0.2, 0.6), late=(0.7, 1.0))
    assert (
        s["random_training_early_from"],
        s["random_training_early_to"],
        s["random_training_late_from"],
        s["random_training_late_to"],
    ) == (
        25,
        50,
        75,
        100,
    )
    assert s["random_training_acc_early"] == np.mean([1.5, 3.5]) and s[
        "random_training_pair_QK2_late"
    ] == np.mean([4.0, 6.0])
    # the edit's share of the ratio's excess: seed a R = 2 -> 1.5 (half of it), seed b R = 3 -> 1.5 (three quarters)
    # pair by pair: seed a R = 2 -> 1.2 (0.8 of it), seed b R = 3 -> 1 (all of it)
    for k, (a, b) in {
        "random_top1_in": (0.2, 0.3),
        "random_top1_off": (0.1, 0.1),
        "random_top1_in_removed": (0.15, 0.15),
        "random_top1_off_removed": (0.1, 0.1),
        "random_top1_in_pairwise": (0.12, 0.2),
        "random_top1_off_pairwise": (0.1, 0.2),
    }.items():
        curves[k] = {"a": [a] * 5, "b": [b] * 5}
    s = induction_random_seeds.random_along_training(curves, early=(0.2, 0.6), late=(0.7, 1.0))
    assert s["random_training_removed_share_early"] == pytest.approx(0.625) and s[
        "random_training_removed_share_min_late"
    ] == pytest.approx(0.5)
    assert s["random_training_ratio_early"] == pytest.approx(2.5) and s[
        "random_training_ratio_removed_late"
    ] == pytest.approx(1.5)
    assert s["random_training_pairwise_share_early"] == pytest.approx(0.9) and s[
        "random_training_pairwise_share_min_late"
    ] == pytest.approx(0.8)
    assert s["random_training_ratio_pairwise_late"] == pytest.approx(1.1)
    with pytest.raises(ValueError, match=r"late=\(0.5, 1.2\) is not a window of training"):
        induction_random_seeds.random_along_training(curves, late=(0.5, 1.2))
    with pytest.raises(ValueError, match=r"early=\(0.1, 0.2\) holds no evaluation of 'a'"):
        induction_random_seeds.random_along_training(curves, early=(0.1, 0.2))


def test_step3_row_paths_add_up_to_the_gradient_and_decide_the_probe_row():
    small = dict(d=230, seq_len=32, batch=1024, chunk=512, line_batch=512, n_test=64, etas=(1.0, 4.0))
    exp = three_steps.ThreeStepExperiment.quick(data="shakespeare", **small)
    paths = three_steps_data.step3_row_paths(exp, row=1, factors=(1.0, 2.0), use_cache=False)
    model, task, population, line = three_steps.step_setup(exp)  # the same model, by hand
    three_steps.gradient_step(model, "W_V^2", population, line, exp.etas)
    assert three_steps.gradient_step(model, "W_QK^2", population, line, exp.etas)[1] == paths["step2_size"]
    G = -three_steps.population_gradient(model, "W_QK^1", population)
    p = model.P / model.P.norm(dim=1, keepdim=True)
    total = paths["key"][0] + paths["value"][0]
    # entry (1, 0) of the P x P block: c |p|^2 = sqrt(d) times the mean logit gradient
    assert (p[1] @ G @ p[0]).item() == pytest.approx(230**0.5 * total, rel=1e-4)
    assert (p[1] @ G @ p[1]).item() == pytest.approx(-(230**0.5) * total, rel=1e-4)  # the row sums to zero
    missed = dict(three_steps.qk1_misses(three_steps.three_steps(exp, progress=False, use_cache=False)))
    assert (1 in missed) == (total < 0)  # row 1's probe: exactly the sign of the entry
    assert 0 < paths["trigger_share"] < 1 and len(paths["key"]) == len(paths["value"]) == 2
    assert 0 < paths["ov_remapped"] < 1  # step 1 stores remapped tokens too, more weakly than the tokens
    s = three_steps_data.step3_row_summary(paths)
    assert (
        s["step3_row_total"] == pytest.approx(total)
        and s["step3_row_value_over_key"] == -paths["value"][0] / paths["key"][0]
    )
    with pytest.raises(ValueError, match="factors 1 and 2"):
        three_steps_data.step3_row_summary({**paths, "factors": [1.0, 3.0]})


@pytest.mark.parametrize(
    "overrides, kwargs, match",
    [
        ({}, dict(row=0), r"row=0 is out of range"),
        ({}, dict(row=31), r"row=31 is out of range"),
        ({}, dict(factors=()), r"factors=\(\) must be a non-empty list"),
        (dict(second_step_sizes=(1.0, 4.0)), {}, "a line-searched step 2"),
        (dict(loss_on="final"), {}, "loss_on='final_recall'"),
    ],
)
def test_step3_row_paths_bad_input(overrides, kwargs, match):
    exp = three_steps.ThreeStepExperiment.quick(**{"data": "shakespeare", **overrides})
    with pytest.raises(ValueError, match=match):
        three_steps_data.step3_row_paths(exp, **kwargs)


def test_public_value_maps_train_W_O2_against_frozen_random_value_matrices():
    """``value_map="W_O W_V"`` (the public code's ``ihead_basic_model.py``): W_O^2 is the trained output memory;
    W_V^1, W_O^1 and W_V^2 stay at their random initialisation; the probes read W_O^2 W_V^2."""
    exp = induction.InductionExperiment.quick(
        value_map="W_O W_V", trained=induction.PUBLIC_THREE, steps=3, eval_every=1, n_test=8, batch=4
    )
    r = induction.run(exp, progress=False, use_cache=False)
    before, after = r.model(trained=False), r.model()
    for name in ("W_V^1", "W_O^1", "W_V^2"):
        assert torch.equal(before.matrix(name), after.matrix(name)), name
    for name in induction.PUBLIC_THREE:
        assert not torch.equal(before.matrix(name), after.matrix(name)), name
    assert np.isfinite(r.metrics["probe_OV2"]).all()
    with pytest.raises(ValueError, match="'W_O\\^2' is not in this model"):
        induction.InductionExperiment.quick(trained=induction.PUBLIC_THREE)
    with pytest.raises(ValueError, match="value_map"):
        induction.InductionExperiment.quick(value_map="W_V W_O")
    with pytest.raises(ValueError, match="value_out=False"):
        induction.construct(after, exp.task().triggers, 65)


def test_order_summary_counts_seeds_and_tests_the_sign():
    """The learning-order study's summary: per parameterisation, the seeds in which each probe passes 0.9 first,
    ties (the same evaluation, or neither passing) left out of the one-sided sign test."""
    from companion.experiments import induction_head as ih

    steps = np.arange(0, 50, 5)

    def fake(label, seed, t_qk2, t_ov2, t_qk1):
        exp = induction.InductionExperiment.quick(seed=seed, eval_every=5)
        curve = lambda t: (steps >= t).astype(float)  # noqa: E731
        metrics = {"step": steps, "probe_OV2": curve(t_ov2), "probe_QK2": curve(t_qk2)}
        metrics.update(probe_QK2_all=curve(t_qk2), probe_QK1_early=curve(t_qk1), probe_QK1=curve(t_qk1))
        return f"{label} seed {seed}", induction.InductionRun(exp, metrics, seconds=60.0)

    runs = dict(
        [fake("ours", s, 10, 20, 30) for s in range(8)]  # W_QK^2 first in 8 seeds
        + [fake("ours", 8, 20, 20, 30), fake("ours", 9, 99, 99, 99)]  # a tie; neither passes (inf - inf)
        + [fake("public", s, 20, 10, 15) for s in range(3)]  # W_OV^2 first; W_QK^1 before W_QK^2
        + [fake("public", 3, 20, 10, 30)]  # the slide's order
    )
    s = ih.order_summary(runs)
    assert (s["order_ours_qk2_first"], s["order_ours_ov2_first"], s["order_ours_ties"]) == (8, 0, 2)
    assert s["order_ours_sign_p"] == pytest.approx(0.5**8)
    assert s["order_ours_sign_p_ov2"] == 1.0
    assert s["order_ours_gap_s0"] == -10 and s["order_ours_qk1_last_min"] == 10
    assert (s["order_public_qk2_first"], s["order_public_ov2_first"]) == (0, 4)
    assert s["order_public_sign_p_ov2"] == pytest.approx(0.5**4)
    assert s["order_public_qk1_last_min"] == -5
    assert (s["order_ours_qk1_not_last"], s["order_public_qk1_not_last"]) == (0, 3)
    assert (s["order_ours_slide_order"], s["order_public_slide_order"]) == (0, 1)
    assert s["order_minutes"] == pytest.approx(14.0)
    assert len(ih.order_rows(s)) == 2


def test_a_step_with_its_gradient_given_is_the_step_that_computes_it():
    """The sweep over step 2's sizes computes step 2's gradient once (every size starts from the same state):
    a step given that gradient is the same step, bitwise, with one size or a line search."""
    exp = three_steps.ThreeStepExperiment.quick(
        d=230, seq_len=16, batch=256, chunk=128, line_batch=128, n_test=16
    )
    model, _, population = three_steps.after_first_step(exp)
    line = population[:1]
    start = {n: model.matrix(n).detach().clone() for n in induction.STEP_ORDER}
    grad = three_steps.population_gradient(model, "W_QK^2", population)
    for etas in ((4.0,), exp.etas):
        results = []
        for given in (None, grad):
            with torch.no_grad():
                for n, W in start.items():
                    model.matrix(n).copy_(W)
            step = three_steps.gradient_step(model, "W_QK^2", population, line, etas, given)
            results.append((step, model.matrix("W_QK^2").detach().clone()))
        assert results[0][0] == results[1][0] and torch.equal(results[0][1], results[1][1])


def test_the_line_searchs_losses_are_the_population_losses_up_to_rounding():
    """_line_losses (each layer linear in its W_QK and W_V; the second layer at the final position only) gives the
    population loss at every size within a relative 1e-5 (LINE_TIE, where near-ties are compared again, is ten times
    that), and _line_search picks the size the whole model does, for each matrix it takes; others are refused."""
    exp = three_steps.ThreeStepExperiment.quick(
        d=230, seq_len=16, batch=256, chunk=128, line_batch=256, n_test=16
    )
    model, _, population = three_steps.after_first_step(exp)
    line = population[:2]
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for n in induction.STEP_ORDER:  # every memory non-zero, so that each part of the forward counts
            model.matrix(n).add_(0.05 * torch.randn(model.matrix(n).shape, generator=gen))
    for name in ("W_QK^1", "W_V^1", "W_QK^2", "W_V^2"):
        W = model.matrix(name)
        W0 = W.detach().clone()
        direction = torch.randn(W.shape, generator=gen)
        direction /= direction.norm()
        fast = three_steps._line_losses(model, name, line, W0, direction, exp.etas)
        exact = []
        with torch.no_grad():
            for e in exp.etas:
                W.copy_(W0 - e * direction)
                exact.append(three_steps._population_loss(model, line).item())
            W.copy_(W0)
        assert fast == pytest.approx(exact, rel=1e-5), name
        assert len(set(np.round(exact, 3))) > 3, name  # the sizes do change the loss
        with (
            torch.no_grad()
        ):  # near-ties (W_QK^2's two smallest sizes here) ranked as the whole model ranks them
            chosen = three_steps._line_search(model, name, line, W0, direction, exp.etas)
            W.copy_(W0)
        assert chosen == exp.etas[int(np.argmin(exact))], name
    assert 1e-5 < three_steps.LINE_TIE
    with pytest.raises(ValueError, match="'W_O\\^1' needs two attention-only layers"):
        three_steps._line_losses(model, "W_O^1", line, W0, direction, exp.etas)


def test_near_ties_of_the_line_search_are_ranked_on_the_whole_model(monkeypatch):
    """_line_search takes the sizes _line_losses ranks within LINE_TIE of its lowest to the whole model, and only
    those; one size alone is taken as it is."""
    exp = three_steps.ThreeStepExperiment.quick(
        d=230, seq_len=16, batch=256, chunk=128, line_batch=128, n_test=16
    )
    model, _, population = three_steps.after_first_step(exp)
    line, name = population[:1], "W_QK^2"
    W0 = model.matrix(name).detach().clone()
    direction = torch.ones_like(W0) / W0.numel() ** 0.5
    etas = (1.0, 2.0, 4.0, 8.0)
    whole = []
    with torch.no_grad():
        for e in etas:
            model.matrix(name).copy_(W0 - e * direction)
            whole.append(three_steps._population_loss(model, line).item())
    calls = []
    real = three_steps._population_loss
    monkeypatch.setattr(three_steps, "_population_loss", lambda m, b: calls.append(1) or real(m, b))
    for tied in ((1, 2), (0, 3), (2,)):
        fake = [5.0] * len(etas)
        for i in tied:
            fake[i] = 1.0 + 1e-6 * i
        monkeypatch.setattr(three_steps, "_line_losses", lambda *a, fake=fake: fake)
        calls.clear()
        with torch.no_grad():
            eta = three_steps._line_search(model, name, line, W0, direction, etas)
        assert len(calls) == (len(tied) if len(tied) > 1 else 0)
        assert eta == etas[min(tied, key=lambda i: whole[i])]


def test_the_line_searched_steps_are_the_steps_taken_one_after_another(tmp_path, monkeypatch):
    """line_searched_steps (cached, each step continuing from the cached ones before it) gives the states, sizes
    and gradient norms of gradient_step called in turn; a second call reads the cache; n outside [1, 3] and an
    order that does not start with W_V^2 (for after_first_step) are refused."""
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path))
    exp = three_steps.ThreeStepExperiment.quick(
        d=230, seq_len=16, batch=256, chunk=128, line_batch=128, n_test=16, etas=(1.0, 4.0, 16.0)
    )
    steps = three_steps.line_searched_steps(exp, 3)
    model, _, population, line = three_steps.step_setup(exp)
    for done, name in zip(steps, exp.order):
        assert three_steps.gradient_step(model, name, population, line, exp.etas) == (
            done["grad_norm"],
            done["eta"],
        )
        for n in induction.STEP_ORDER:
            assert torch.equal(model.matrix(n).detach(), done["state"][n]), (name, n)
    assert steps[-1]["eta"] > 0
    again = three_steps.line_searched_steps(exp, 2)
    assert [s["eta"] for s in again] == [s["eta"] for s in steps[:2]]
    with pytest.raises(ValueError, match=r"n \(steps\)=4 is out of range"):
        three_steps.line_searched_steps(exp, 4)
    with pytest.raises(ValueError, match="needs an order that starts with W_V\\^2"):
        three_steps.after_first_step(dataclasses.replace(exp, order=induction.STEP_ORDER[::-1]))


@pytest.mark.parametrize("sampler", ["numpy", "counter"])
def test_the_seed_studys_token_token_sentence_follows_its_recording(sampler):
    """book/induction_random's sentence on the keys' token-token part over seeds (issue 54's switch): it says the
    part is not lower in every seed only where a seed's difference is positive."""
    from companion import config, record
    from companion.experiments import induction_random_seeds

    with config.using_sampler(sampler):
        summary = record.latest("induction_random_seeds", "quick").as_summary()
    gap = summary["random_seeds_pair_score_gap_max"]
    text = induction_random_seeds.score_gap_text(summary)
    assert text.startswith(
        "Their token-token part is not lower" if gap > 0 else "Their token-token part is lower"
    )
    assert f"{gap:.4f}" in text if 0 < gap < 0.005 else f"{gap:.2f}" in text


@pytest.mark.parametrize("sampler", ["numpy", "counter"])
def test_the_order_studys_sentences_follow_its_recording(sampler):
    """book/induction_head's verdicts on the order over ten seeds (issue 54's switch): each says what the sign test
    says of its prediction (numpy: the public code's refuted at p = 0.055; counter: it holds at p = 0.020), and the
    closing clause counts the seeds in the slide's order."""
    from companion import claims, config, record, report

    with config.using_sampler(sampler):
        order = record.latest("induction_order", "quick").as_summary()
    for label, cid in induction_head_text.ORDER_CLAIMS.items():
        p = order[f"order_{label}_sign_p"]
        text = induction_head_text.order_verdict_text(order, label)
        assert claims.CLAIMS[cid].criterion("quick").below == 0.05
        assert ("refutes" in text or "fails" in text) == (p >= 0.05), (label, p, text)
    most = max(order["order_ours_slide_order"], order["order_public_slide_order"])
    clause = induction_head_text.slide_order_text(order)
    assert (most == 0) == (clause == "neither gives the slide's order at this size")
    assert most == 0 or report.count_noun(most, "seed") in clause
    with pytest.raises(ValueError, match="label='theirs'"):
        induction_head_text.order_verdict_text(order, "theirs")


def test_a_run_stopped_after_an_evaluation_keeps_the_evaluations_up_to_it_and_no_weights():
    exp = induction.InductionExperiment.quick(steps=4, eval_every=2, batch=4, n_test=8)
    a = induction.run(exp, progress=False, use_cache=False)
    assert list(a.steps) == [0, 2, 4]
    cut = a.stopped_after(1)
    assert list(cut.steps) == [0, 2] and cut.state == {} and a.state
    assert all(np.array_equal(cut.metrics[k], a.metrics[k][:2]) for k in a.metrics)
    assert cut.final("acc") == a.metrics["acc"][1] and cut.exp is exp
    assert cut.model(trained=False) is not None
    with pytest.raises(ValueError, match="holds no weights"):
        cut.model()
    for i in (-1, 3):
        with pytest.raises(ValueError, match=rf"i={i} is out of range \(allowed: 0 to 2"):
            a.stopped_after(i)
