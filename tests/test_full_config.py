"""The paper-scale code path runs: every experiment's ``full`` configuration, one step and one evaluation on
the CPU, so that a crash, a shape error or a memory blow-up at paper scale shows here and not on a user's GPU.

Slow (half a minute to three minutes per configuration on 2 cores); CI runs it. Configurations that differ
only in the learning rate, the number of steps or the depth share one entry, and configurations that differ
only in how they train (optimiser, rates, schedule) share one evaluation. Test sets and populations are
smaller than the paper's where a test says so (the code is the same at every size).
"""

import dataclasses
import math

import numpy as np
import pytest
import torch

from companion.data.recall import BigramTask
from companion.experiments import catalog, noisy_recall
from companion.models import Transformer
from companion.train import TrainConfig, batch_loss, train

pytestmark = pytest.mark.slow
FULL = catalog.experiments("full")
# Synthetic IOI at the shallowest depth of each optimiser: deeper models repeat the same layer code (one
# evaluation of L = 7 takes six minutes on 2 cores; its memory grows linearly in L).
IOI_DEPTHS = {opt: min(L for (o, L) in catalog.ioi("full") if o == opt) for opt in ("sgd", "adam")}
SMOKE = [name for name in FULL if not name.startswith("synthetic_ioi/")] + [
    f"synthetic_ioi/{opt} L={L}" for opt, L in IOI_DEPTHS.items()
]
# The evaluation of a recall-family configuration reads this many test sequences of the paper's length, not the
# full profile's 2048: the same code at every size, and the training step's batch (512, with its gradients) already
# sets the memory of a forward pass at paper scale; the whole test sets ran on a GPU in the recorded full runs
# (data/recorded/*-full.json). 128 as for the induction and k-hop probes below (512 took two thirds of these tests'
# time: about 50 s for synthetic IOI at L = 3 on one core).
SMOKE_TEST_SEQUENCES = 128
# The induction and k-hop evaluations (probes and one test set per hop count) read this many sequences: their
# training step (batch 512 of 256 tokens; batch 256 of 129 tokens) already sets the memory of a forward pass.
SMOKE_PROBE_SEQUENCES = 128
# Fields that change only the training, not the model or the test sets: configurations equal in every other
# field share one evaluation (the first evaluates, the others run their training step only).
TRAINING_ONLY = {
    "lr",
    "momentum",
    "weight_decay",
    "optimizer",
    "steps",
    "eval_every",
    "dense_until",
    "pretrain_steps",
    "schedule",
}


def _evaluation_key(exp) -> tuple:
    return tuple(
        (f.name, getattr(exp, f.name)) for f in dataclasses.fields(exp) if f.name not in TRAINING_ONLY
    )


EVALUATES = {}
for _name in SMOKE:
    EVALUATES.setdefault(_evaluation_key(FULL[_name]), _name)


@pytest.mark.parametrize("name", SMOKE)
def test_full_recall_configuration_runs(name):
    exp = dataclasses.replace(FULL[name], n_test=min(FULL[name].n_test, SMOKE_TEST_SEQUENCES))
    cpu = torch.device("cpu")
    model = Transformer(exp.model_config(), seed=exp.seed)
    task = exp.task(alpha=0.0) if exp.schedule == "finetune" else exp.task()
    logs = train(model, task, exp.train_config(1), np.random.default_rng(0), progress=False)
    assert math.isfinite(logs[-1]["loss"])
    if EVALUATES[_evaluation_key(FULL[name])] != name:
        return  # the same model and test sets are evaluated under another name
    evaluate = noisy_recall.Evaluator(exp, model, cpu)
    model.eval()
    row = evaluate(1)
    assert np.isfinite(row["clean_full_loss"]) and np.isfinite(row["noisy_loss"])
    if exp.truncate:
        assert row["clean_p_correct"].shape == (len(exp.rhos),)


def test_full_allocation_configuration_runs():
    exp = catalog.allocation_experiment("full")
    task = BigramTask(exp.seq_len)
    test_batch = task.sample(np.random.default_rng(1), exp.n_test)
    budget = max(exp.budgets)
    for f in (min(exp.mlp_fracs), max(exp.mlp_fracs)):  # the widest MLP and the widest attention
        model = Transformer(exp.model_config(budget, f), seed=exp.seed)
        tcfg = TrainConfig(steps=1, batch=exp.batch, lr=exp.lrs[0], momentum=exp.momentum)
        logs = train(model, task, tcfg, np.random.default_rng(0), progress=False)
        with torch.no_grad():
            assert math.isfinite(logs[-1]["loss"]) and math.isfinite(
                batch_loss(model.eval(), test_batch, torch.device("cpu")).item()
            )


def test_full_leading_terms_configurations_run():
    """The leading-terms paper at the paper's sizes: the theorem study (|V| = 500, T = 64, both depths) for
    three steps on a few sequences (the fewest its summary reads), and the text study (|V| = 3000, T = 200,
    three layers; the stand-in offline) for two SGD steps of two sequences, with its statistics, cosines and
    removals. Table 2's BPE configuration (|V| = 10,000) runs the same code; its |V|^3 statistics take minutes
    on a CPU and are left out."""
    from dataclasses import replace

    from companion.theory import leading_study as ls
    from companion.theory import leading_theorem as lth

    full = ls.configs("full")
    res = lth.theorem_study(replace(lth.configs("full"), n_seqs=8, steps=3), use_cache=False)
    assert all(math.isfinite(r["loss"][-1]) for r in res["runs"].values())
    # the sizes meet the theorem's other conditions, as the chapter's Notes say (quick's do not: "no")
    assert lth.theorem_summary(res)["conditions_met"] == "yes"
    for key in ("text",):
        cfg = replace(full[key], n_train=4, n_heldout=2, batch=2, epochs=1, every=1)
        out = ls.text_study(cfg, use_cache=False, progress=False)
        run = out["runs"][min(out["runs"])]
        assert out["corpus"]["vocab_size"] == full[key].corpus.vocab_size and out["corpus"]["T"] == 200
        assert math.isfinite(run["removal"]["W_O"]) and len(run["log"]["cos"]) == 3


def _induction_full(which: str):
    from companion.experiments import induction

    return {
        "three memories": lambda: induction.seeds("full")[0],
        "two-layer MLP": lambda: induction.ff_experiment("full"),
        "final linear feed-forward": lambda: induction.layer_experiments("full")[2],
        "random triggers": lambda: induction.random_trigger_experiment("full"),
    }[which]()


def _induction_run_small(exp):
    """One step and two evaluations of ``exp`` on SMOKE_PROBE_SEQUENCES test sequences, probes included."""
    from dataclasses import replace

    from companion.experiments import induction

    small = replace(exp, steps=1, eval_every=1, n_test=SMOKE_PROBE_SEQUENCES)
    r = induction.run(small, progress=False, use_cache=False)
    assert len(r.metrics["step"]) == 2 and np.isfinite(r.metrics["loss_head"]).all()
    assert all(np.isfinite(v).all() for v in r.metrics.values())
    return r


@pytest.mark.parametrize("which", ["three memories", "two-layer MLP", "final linear feed-forward"])
def test_full_induction_configurations_run(which):
    """The talk, the bigram task with triggers at the public code's Fig. 3 size (d = T = 256, batch 512): the
    three memories, the two-layer MLP model (the one-layer model runs the same code) and the
    final-linear-feed-forward model with fixed triggers, one step and two evaluations each on
    SMOKE_PROBE_SEQUENCES test sequences, probes included (one test each, so that test processes share them)."""
    _induction_run_small(_induction_full(which))


def test_full_random_trigger_configuration_runs():
    """The same with random triggers; the run is then read by head_or_bigram on 512 sequences (two chunks), and
    by pair_gradient and the discount edits on 256 sequences."""
    from companion.experiments import induction, induction_random, induction_random_push

    r = _induction_run_small(_induction_full("random triggers"))
    hb = induction_random.head_or_bigram(r, n_seq=4 * SMOKE_PROBE_SEQUENCES)
    assert sum(b["n"] for b in hb["bins"]) == hb["positions"] > 10000
    assert all(np.isfinite(hb[f"{k}_in_matched"]) for k in induction_random.MECHANISM)
    pg = induction_random_push.pair_gradient(r, n_seq=256)
    assert all(np.isfinite(pg[k]["net"]) for k in induction_random_push.KEY_KINDS)
    edits = induction_random.discount_edits(r, n_seq=256)
    assert set(edits) == set(induction.DISCOUNT_EDITS) and all(
        np.isfinite(e["acc_in"]) for e in edits.values()
    )


def test_full_three_step_configuration_runs():
    """The talk, the three gradient steps at the full size (d = 512, T = 64) on a population of 2048 sequences
    (not 65536), with one step size per step."""
    from dataclasses import replace

    from companion.experiments import three_steps

    exp = three_steps.three_step_runs("full")["slide order, orthonormal"]
    assert (exp.d, exp.seq_len, exp.batch) == (512, 64, 65536)
    small = replace(
        exp, batch=2048, chunk=1024, line_batch=1024, n_test=256, etas=(4.0,), second_step_sizes=(4.0,)
    )
    rows = three_steps.three_steps(small, progress=False, use_cache=False)["rows"]
    assert [r["matrix"] for r in rows] == ["init", "W_V^2", "W_QK^2", "W_QK^1"]
    assert all(np.isfinite(r["loss"]) for r in rows)


def test_full_factual_configurations_run():
    """The talk, factual recall: every ``full`` run (the paper's own size) for two steps on its full test
    set."""
    from dataclasses import replace

    from companion.experiments import factual as fr

    for exp in fr.experiments("full").values():
        r = fr.run(replace(exp, steps=2, eval_every=1), progress=False, use_cache=False)
        assert r["step"].tolist() == [0, 1, 2] and np.isfinite(r["loss"]).all()


def test_full_fact_capacity_configurations_run():
    """The talk, Fig. 4 (right): the largest model of the paper's grid (H = 32, m = 128) for two steps with
    its test set, and the grid's size."""
    from dataclasses import replace

    from companion.experiments import fact_capacity as fc

    grid = fc.grid("full")
    assert len(grid) == 169
    r = fc.run(replace(grid["H=32, m=128"], steps=2, eval_every=1), progress=False, use_cache=False)
    assert r["step"].tolist() == [0, 1, 2] and 0.0 <= r["best"] <= 1.0 and r["diverged"] == float("inf")


def test_full_khop_configurations_run():
    """The talk, K1-K3: the ``full`` runs (k = 8, N = 16, d = 128; they differ only in their data and depth)
    are valid, and the curriculum (4 layers) runs two steps with a test set at every hop count
    (SMOKE_PROBE_SEQUENCES sequences of 129 tokens each, not the full profile's 2048)."""
    from dataclasses import replace

    from companion.experiments import khop, khop_members

    members = khop_members.members("full")
    assert {e.k for e in members.values()} == {8} and members["mixture"].layers == 4
    small = replace(members["curriculum"], steps=2, eval_every=2, n_test=SMOKE_PROBE_SEQUENCES)
    r = khop.run(small, progress=False, use_cache=False)
    assert r["acc"].shape == (2, 8) and np.isfinite(r["loss"][1:]).all() and r["stage"].tolist() == [1, 1]


def test_full_scan_snap_configurations_run():
    """Scan and Snap: Fig. 6's largest sweep (K = 20, ten seeds, 16 rate pairs) for two steps, and the
    WikiText model at the notebook's size (d = 200, the whole vocabulary of the training text; the stand-in
    split offline) for two iterations and its evaluations, one and three layers."""
    from dataclasses import replace

    from companion.experiments import scan_snap as ss
    from companion.experiments import scan_snap_text as st

    r = ss.run(replace(ss.medium_experiments("full")[20], steps=2), progress=False, use_cache=False)
    assert r["loss"].shape == (160, 2) and np.isfinite(r["entropy"]).all()
    for exp in st.experiments("full")["fig7"].values():
        r = st.run(replace(exp, steps=2, eval_every=2), progress=False, use_cache=False)
        assert r["step"].tolist() == [0, 2] and np.isfinite(r["loss"]).all() and r["vocab"] > 10000


def test_full_fact_scaling_configuration_runs():
    """The talk, Fig. 4 (left): the sweep's largest trial (d = 181, S = R = 512) for two steps with its test
    set."""
    from dataclasses import replace

    from companion.experiments import fact_capacity as fc

    exp = fc.ScalingExperiment.full()
    point = replace(exp.point(exp.ds[-1], exp.max_size, exp.lrs[0]), steps=2, eval_every=1)
    r = fc.run(point, progress=False, use_cache=False)
    assert r["step"].tolist() == [0, 1, 2] and 0.0 <= r["best"] <= 1.0
