"""k-hop composition task (the talk, K1-K3): the data, its validation, the model, one short run."""

import dataclasses
import itertools
import math

import numpy as np
import pytest
import torch

from companion import config
from companion.experiments import (
    khop,
    khop_curves,
    khop_four_hops,
    khop_four_hops_text,
    khop_members,
    khop_onset,
    khop_probes,
    khop_stall,
    khop_stall_paths,
    khop_starts,
    khop_studies,
)
from companion.figures import (
    khop as khop_figures,
)
from companion.figures import (
    khop_four_hops as khop_four_hops_figures,
)
from companion.figures import (
    khop_stall as khop_stall_figures,
)


def _compose(task, tokens, hops):
    """The answer recomputed from the tokens alone, one example at a time (the definition)."""
    pi, N = task.hidden(), task.N
    v = tokens[0]
    for i in range(hops):
        table = tokens[1 + i * N : 1 + (i + 1) * N]
        v = table[pi[i][v]]
    return v


def test_answer_is_the_composition_of_the_tables_shown():
    task = khop.KHopTask(N=5, k=3, hidden_seed=2)
    hops = np.array([1, 2, 3] * 20)
    b = task.sample(np.random.default_rng(1), hops)
    assert b.tokens.shape == (60, 16)
    for t, h, a, m in zip(b.tokens, hops, b.answer, b.mask):
        assert _compose(task, t, h) == a
        assert m.sum() == 1 + h * task.N
        assert (t[~m] == task.pad).all() and (t[m] < task.N).all()
    for t in b.tokens:  # every table shown is a permutation
        for i in range(3):
            blk = t[1 + i * 5 : 1 + (i + 1) * 5]
            assert blk.max() == task.pad or sorted(blk) == list(range(5))


def test_hidden_permutations_are_fixed_by_their_seed():
    a, b = khop.KHopTask(N=6, k=2, hidden_seed=0), khop.KHopTask(N=6, k=2, hidden_seed=1)
    assert (a.hidden() == khop.KHopTask(N=6, k=2, hidden_seed=0).hidden()).all()
    assert not (a.hidden() == b.hidden()).all()
    assert sorted(a.hidden()[1]) == list(range(6))


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(k=0), r"k \(hops\)=0 is out of range"),
        (dict(N=1), r"N \(values\)=1 is out of range"),
        (dict(data="random"), "data"),
        (dict(weights=(0.5, 0.5)), r"2 entries: allowed one per hop count 1..4"),
        (dict(weights=(0.5, 0.5, 0.5, -0.5)), "not a distribution"),
        (dict(weights=(0.3, 0.3, 0.3, 0.3)), r"summing to 1 \(they sum to 1.2\)"),
        (dict(d=30, heads=4), "d=30 is not a multiple of heads=4"),
        (dict(advance_at=1.5), r"advance_at=1.5 is out of range"),
        (dict(hide_k_from=(4,)), r"\(hide_k_from\)=4 is out of range: allowed \[1, 3\]"),
        (dict(hide_k_from=(1, 1)), r"names a block twice: allowed distinct blocks in 1..3"),
        (dict(hide_k_from=1), r"is not a tuple: allowed a tuple of blocks in 1..3"),
    ],
)
def test_bad_settings_are_refused_before_any_work(kw, match):
    with pytest.raises(ValueError, match=match):
        khop.KHopExperiment(**kw)


def test_bad_hop_counts_are_refused():
    with pytest.raises(ValueError, match=r"allowed 1..3"):
        khop.KHopTask(N=4, k=3).sample(np.random.default_rng(0), [1, 4])


def test_depth_defaults_to_log2_k_plus_one():
    assert [khop.KHopExperiment(k=k).layers for k in (1, 2, 3, 4, 8)] == [1, 2, 3, 3, 4]
    assert khop.KHopExperiment(k=4, depth=2).layers == 2


def test_padding_does_not_leak_into_the_prediction():
    exp = khop.KHopExperiment(N=4, k=3)
    model = exp.model()
    b = exp.task().sample(np.random.default_rng(0), np.array([1, 2]))
    t, m = torch.as_tensor(b.tokens), torch.as_tensor(b.mask)
    other = t.clone()
    other[~m] = 0  # change what sits under the mask
    with torch.no_grad():
        assert torch.allclose(model(t, m), model(other, m), atol=1e-6)


@pytest.mark.parametrize("data", khop.DATA)
def test_a_short_run_is_reproducible(data):
    exp = khop.KHopExperiment(N=4, k=2, data=data, steps=6, eval_every=3, n_test=16, batch=8, advance_at=0.01)
    a = khop.run(exp, progress=False, use_cache=False)
    b = khop.run(exp, progress=False, use_cache=False)
    assert a["acc"].shape == (3, 2)
    assert np.array_equal(a["acc"], b["acc"]) and np.allclose(a["loss"][1:], b["loss"][1:])
    if data == "curriculum":
        assert a["stage"].tolist()[0] == 1 and a["stage"].max() == 2
    assert np.isfinite(a["loss"][1:]).all()


def test_learned_at():
    r = {"step": np.array([0, 10, 20]), "acc": np.array([[0.1, 0.1], [0.95, 0.2], [1.0, 0.5]])}
    assert khop_curves.learned_at(r).tolist() == [10, np.inf]


def test_training_hops_follow_the_data_kind():
    rng = np.random.default_rng(0)
    kw = dict(k=4, batch=400)
    assert (khop.training_hops(khop.KHopExperiment(data="direct", **kw), 2, rng) == 4).all()
    assert (khop.training_hops(khop.KHopExperiment(data="curriculum", **kw), 2, rng) == 2).all()
    cum = khop.training_hops(khop.KHopExperiment(data="cumulative", **kw), 3, rng)
    assert sorted(set(cum.tolist())) == [1, 2, 3]
    mix = khop.training_hops(khop.KHopExperiment(data="mixture", weights=(0.5, 0.5, 0, 0), **kw), 1, rng)
    assert sorted(set(mix.tolist())) == [1, 2] and 150 < (mix == 1).sum() < 250


@pytest.mark.parametrize("profile, k", [("quick", 2), ("full", 8)])
def test_members_share_task_model_and_budget(profile, k):
    m = khop_members.members(profile)
    assert list(m) == ["direct", "mixture", "curriculum", "cumulative", "mixture, 1 layer"]
    assert {e.k for e in m.values()} == {k} and len({(e.N, e.d, e.batch, e.seed) for e in m.values()}) == 1
    assert len({e.steps for name, e in m.items() if name != "mixture, 1 layer"}) == 1
    assert m["mixture, 1 layer"].steps == khop_members.SHALLOW_STEPS * m["mixture"].steps
    assert m["mixture"].layers == int(np.log2(k)) + 1 and m["mixture, 1 layer"].layers == 1
    assert all(e.profile == profile for e in m.values())


def _fake(acc, N=8, stage=None):
    acc = np.asarray(acc, dtype=float)
    stage = np.ones(len(acc), int) if stage is None else np.asarray(stage)
    return {"step": np.arange(len(acc)) * 10, "acc": acc, "stage": stage, "loss": np.ones(len(acc)), "N": N}


def test_summary_reads_the_runs():
    runs = {
        "direct": _fake([[0.1, 0.1], [0.2, 0.15], [0.3, 0.12]]),
        "mixture": _fake([[0.1, 0.1], [0.95, 0.2], [1.0, 0.97]]),
        "curriculum": _fake([[0.1, 0.1], [0.95, 0.1], [0.3, 0.99]]),
        "cumulative": _fake([[0.1, 0.1], [0.95, 0.1], [0.99, 0.98]]),
        "mixture, 1 layer": _fake([[0.1, 0.1], [0.9, 0.25], [0.9, 0.2]]),
    }
    s = khop_members.summary(runs)
    assert s["k"] == 2 and s["N"] == 8 and s["chance"] == 0.125 and s["steps"] == 20
    assert s["direct_best"] == 0.15 and s["shallow_best"] == 0.25 and s["shallow_half"] == 0.25
    assert s["depth_gap"] == pytest.approx(0.72) and s["shallow_steps"] == 20
    assert s["mixture_final"] == 0.97 and s["mixture_min"] == 0.97
    assert s["curriculum_final"] == 0.99 and s["curriculum_min"] == 0.3
    assert s["mix_hop1_at"] == 10 and s["mix_hopk_at"] == 20 and s["hop_gap"] == 10
    assert s["curriculum_hopk_at"] == 20
    assert (s["mixture_learned"], s["curriculum_learned"], s["cumulative_learned"]) == (2, 1, 2)
    rows = khop_members.learned_rows(runs, khop_members.members("quick"))
    assert rows[1] == ["mixture", "mixture", 2, "10, 20", "1.00, 0.97"]
    assert rows[0][3] == "-, -"
    c = khop_members.curves(runs)
    assert set(c) == {"step", "acc", "stage", "loss"} and set(c["acc"]) == set(runs)


@pytest.mark.parametrize("settings, depth", [(None, 3), (khop_studies.RECORDED_DEEPER, 4)])
def test_the_recorded_studies_read_back_as_they_were_summarised(settings, depth):
    rec = khop_studies.recorded(settings)
    runs, members = khop_studies.recorded_runs(rec)
    assert set(runs) == set(khop_members.members("quick")) and {e.k for e in members.values()} == {
        khop_studies.RECORDED_K
    }
    assert {name: e.layers for name, e in members.items()} == {
        **{name: depth for name in ("direct", "mixture", "curriculum", "cumulative")},
        "mixture, 1 layer": 1,
    }
    s = khop_studies.recorded_summary(rec)
    for key, value in rec.summary.items():
        assert s["rec_" + key] == pytest.approx(value, nan_ok=True), key
    assert s["rec_minutes"] > 0


def test_a_missing_recorded_study_names_its_command(monkeypatch):
    from companion import recorded

    monkeypatch.setattr(recorded, "runs", lambda *args, **kwargs: [])
    with pytest.raises(
        ValueError, match="python -m companion record khop --profile quick --set eval_every=100"
    ):
        khop_studies.recorded()


def test_recorded_overrides_keep_the_single_layer_budget_multiple():
    from companion import record

    m = record.build("khop", "quick", {"steps": 800, "eval_every": 100, "k": 4})
    assert {name: (e.steps, e.eval_every, e.k) for name, e in m.items()} == {
        **{name: (800, 100, 4) for name in ("direct", "mixture", "curriculum", "cumulative")},
        "mixture, 1 layer": (khop_members.SHALLOW_STEPS * 800, khop_members.SHALLOW_STEPS * 100, 4),
    }
    deep = record.build("khop", "quick", {"k": 4, "depth": 4})
    assert {name: e.layers for name, e in deep.items()} == {
        **{name: 4 for name in ("direct", "mixture", "curriculum", "cumulative")},
        "mixture, 1 layer": 1,
    }


def test_the_seed_study_keeps_its_explored_interval_and_reads_back():
    from companion import record

    m = record.build("khop_seeds", "quick", khop_studies.SEED_SETTINGS)
    assert {name: (e.seed, e.eval_every, e.layers, e.data) for name, e in m.items()} == {
        **{f"seed {s}": (s, 100, 4, "cumulative") for s in khop_studies.SEEDS},
        khop_members.EXPLORED: (0, khop_members.EXPLORED_EVERY, 4, "cumulative"),
    }
    rec = khop_studies.recorded(khop_studies.SEED_SETTINGS, experiment="khop_seeds")
    s = khop_studies.recorded_summary(rec, prefix="", minutes_key="seeds_minutes")
    for key, value in rec.summary.items():
        assert s[key] == pytest.approx(value, nan_ok=True), key
    assert len(khop_studies.seed_rows(*khop_studies.recorded_runs(rec))) == len(m)


def _seed_study(solved_stages):
    """A synthetic seed study: seed 0 stalls on its last stage (from the evaluation at step 0), the others and the
    explored run learn two hops with curriculum stages ``solved_stages``."""
    stalled = _fake([[0.1, 0.1], [0.95, 0.1], [0.99, 0.12]])
    stalled["stage"] = np.array([1, 2, 2])
    solved = _fake([[0.1, 0.1], [0.95, 0.1], [0.99, 0.98]])
    solved["stage"] = np.array(solved_stages)
    return {"seed 0": stalled, "seed 1": solved, "seed 2": solved, khop_members.EXPLORED: solved}


def test_seeds_summary_counts_the_solved_seeds():
    s = khop_four_hops.seeds_summary(_seed_study([1, 2, 2]))
    assert (
        s["seeds_solved"] == pytest.approx(2 / 3)
        and s["seeds_solved_n"] == 2
        and s["seeds_worst_min"] == 0.12
    )
    assert s["seeds_hopk_first"] == 20 and s["seeds_wait_last"] == 20 and s["seeds_alt_min"] == 0.98
    assert s["seeds_alt_stagek_at"] == 0  # stage 2 from the evaluation at step 0 (recorded at the next)


def _probe_run(seed=0, steps=30):
    exp = khop.KHopExperiment(
        N=4,
        k=3,
        data="mixture",
        depth=2,
        d=16,
        heads=2,
        steps=steps,
        eval_every=steps,
        n_test=16,
        batch=32,
        seed=seed,
    )
    return khop_probes.probe_run(exp, progress=False)


def test_the_recorded_forward_pass_is_the_forward_pass():
    r = _probe_run()
    exp = r["exp"]
    model = exp.model()
    model.load_state_dict(r["state"])
    b = exp.task().sample(np.random.default_rng(1), np.array([1, 2, 3, 3]))
    t, m = torch.as_tensor(b.tokens), torch.as_tensor(b.mask)
    rec = {}
    with torch.no_grad():
        logits = model(t, m, record=rec)
        assert torch.allclose(logits, model(t, m), atol=1e-5)  # explicit weights = the fused kernel
        assert torch.allclose(model.readout(model.ln(rec["streams"][-1][:, 0])), logits)
    streams, maps = rec["streams"], rec["attn"]
    assert len(streams) == exp.layers + 1 and len(maps) == exp.layers
    for a in maps:
        assert torch.allclose(a.sum(-1), torch.ones(()), atol=1e-6)
        assert (a[~m[:, None, None, :].expand_as(a)] == 0).all()  # nothing on the padding
    deep = khop.KHopExperiment(N=4, k=2, mlp=True).model()  # an MLP block records as well
    with torch.no_grad():
        assert torch.allclose(deep(t[:, :9], m[:, :9], record={}), deep(t[:, :9], m[:, :9]), atol=1e-5)


def test_each_hop_reads_the_entry_that_holds_its_value():
    task = khop.KHopTask(N=5, k=3, hidden_seed=2)
    b = task.sample(np.random.default_rng(0), np.full(64, 3))
    where = khop_probes.read_positions(task, b)
    # table j at pi_j(v_{j-1}) holds v_j
    assert np.array_equal(np.take_along_axis(b.tokens, where, 1), b.chain)
    assert ((where - 1) // task.N == np.arange(3)).all()  # hop j reads table j
    b2 = task.sample(np.random.default_rng(0), np.full(64, 2))  # 2-hop examples: the first two tables
    where2 = khop_probes.read_positions(task, b2)
    assert where2.shape == (64, 2) and np.array_equal(
        np.take_along_axis(b2.tokens, where2, 1), b2.chain[:, :2]
    )
    with pytest.raises(ValueError, match="one hop count: got hop counts \\[2, 3\\]"):
        khop_probes.read_positions(task, task.sample(np.random.default_rng(0), np.array([3, 2])))


def test_linear_probe_reads_a_linear_code_and_not_noise():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 4, (800,), generator=g)
    X = torch.randn(800, 8, generator=g) * 0.1 + torch.nn.functional.one_hot(y, 8).float()
    assert khop_probes.linear_probe(X[:600], y[:600], X[600:], y[600:], 4) == 1.0
    noise = torch.randn(800, 8, generator=g)
    assert khop_probes.linear_probe(noise[:600], y[:600], noise[600:], y[600:], 4) < 0.4  # chance 0.25


def test_probe_summary_names_each_layer_and_hop():
    runs = {"seed 0": _probe_run(), khop_members.EXPLORED: _probe_run(steps=60)}
    s = khop_probes.probe_summary(runs)
    res = khop_probes.hop_probe(runs["seed 0"]["exp"], runs["seed 0"]["state"])
    assert res["probe"].shape == res["entry"].shape == (3, 3) and res["attention"].shape == (2, 3)
    assert s["p100_entry_l1_v2"] == res["entry"][1, 1] and s["p100_best_v2"] == res["probe"][:, 1].max()
    assert res["entry"][0, 2] == 1.0  # hop k's entry holds v_k as its token from the start
    assert s["p100_probe_l2_v3"] == res["probe"][2, 2] and s["p100_attention_l1_v2"] == pytest.approx(
        res["attention"][0, 1]
    )
    assert s["p100_best_vk"] == res["probe"][:, 2].max() and s["probe_chance"] == 0.25
    two = khop_probes.hop_probe(
        runs["seed 0"]["exp"], runs["seed 0"]["state"], hops=2
    )  # (k - 1)-hop examples
    assert (
        two["probe"].shape == two["entry"].shape == (3, 2) and s["p100_h2_probe_l1_v2"] == two["probe"][1, 1]
    )
    assert s["p100_h2_best_vk"] == two["probe"][:, 1].max() and "p100_h2_entry_l2_v2" in s
    with pytest.raises(ValueError, match="hops"):
        khop_probes.hop_probe(runs["seed 0"]["exp"], runs["seed 0"]["state"], hops=4)
    for j in (1, 2, 3):
        first = s[f"p250_first_v{j}"]
        col = [s[f"p250_probe_l{l}_v{j}"] for l in range(3)]
        assert first == next((l for l, v in enumerate(col) if v >= 0.9), np.inf)
    assert 0 <= s["p100_acc"] <= 1 and np.all((res["attention"] >= 0) & (res["attention"] <= 1))
    with pytest.raises(ValueError, match="carries no configuration"):
        khop_probes.probe_summary({"seed 0": {k: v for k, v in runs["seed 0"].items() if k != "exp"}})
    rows = khop_probes.probe_rows(s)
    assert (
        len(rows) == 2 * 3
        and rows[0][:2] == ["seed 0", 0]
        and rows[-1][2:] == [s[f"p250_probe_l2_v{j}"] for j in (1, 2, 3)]
    )
    att = khop_probes.probe_rows(s, "attention")
    assert [r[1] for r in att] == [1, 2, 1, 2] and len(att[0]) == len(
        khop_probes.probe_header(3, "attention")
    )
    assert khop_probes.probe_rows(s, "entry")[1][2:] == [s[f"p100_entry_l1_v{j}"] for j in (1, 2, 3)]
    assert khop_probes.probe_rows(s, hops=2)[1][2:] == [s[f"p100_h2_probe_l1_v{j}"] for j in (1, 2)]
    with pytest.raises(ValueError, match="hops"):
        khop_probes.probe_rows(s, hops=1)
    assert khop_probes.probe_header(3, "entry")[2] == "v_3 at hop 1's entry"
    with pytest.raises(ValueError, match="kind"):
        khop_probes.probe_rows(s, "x")

    fig = khop_stall_figures.hop_probe_panels(s)
    assert len(fig.axes) == 8 and sum(len(ax.images) for ax in fig.axes) == 4  # 4 maps, 4 colour bars
    assert fig.axes[0].get_ylabel() and fig.axes[0].images[0].get_array()[2, 1] == s["p100_probe_l2_v2"]
    m = khop_stall.probe_members("quick")
    assert list(m) == list(khop_probes.PROBED) and [e.eval_every for e in m.values()] == [
        50,
        khop_members.EXPLORED_EVERY,
    ]


def test_the_entries_walk_is_probed_and_tabled():
    runs = {"seed 1": _probe_run(seed=1), "seed 2": _probe_run(seed=2, steps=60)}
    s = khop_stall.seed_probe_summary(runs)
    res = khop_probes.hop_probe(runs["seed 1"]["exp"], runs["seed 1"]["state"])
    C, E = res["chain"], res["entry_attention"]
    assert C.shape == (3, 3, 3) and E.shape == (2, 3, 3)
    # entry: the answer's column
    assert np.isnan(C[:, 1, 0]).all() and np.array_equal(C[:, :, -1], res["entry"])
    assert (C[0, [0, 1, 2], [0, 1, 2]] == 1.0).all()  # each entry holds its own hop's value as its token
    assert s["s1_chain_l1_e1_v3"] == C[1, 0, 2] and s["s1_eattn_l2_e2_to3"] == pytest.approx(E[1, 1, 2])
    assert "s1_chain_l1_e2_v2" not in s and "s1_eattn_l1_e2_to1" not in s  # only the chain after the entry
    assert s["sprobe_k"] == 3 and "probe_k" not in s and s["s2_depth"] == 2  # the study's own shared names
    assert np.all((E >= 0) & (E <= 1)) and (E.sum(-1) <= 1 + 1e-6).all()  # shares of one query's attention
    with pytest.raises(ValueError, match="probed run"):
        khop_stall.seed_probe_summary({"seed 0": runs["seed 1"]})
    rows = khop_probes.walk_rows(s, study=khop_stall.SEED_PROBE)
    assert len(rows) == 2 * 2 * 3 and rows[0][:3] == ["seed 1", 1, 0]
    assert rows[3][3:] == ["", s["s1_chain_l0_e2_v3"]]  # entry 2 holds v_2: only v_3 is probed
    att = khop_probes.walk_rows(s, "eattn", study=khop_stall.SEED_PROBE, entries=(2,))
    assert [r[2] for r in att] == [1, 2, 1, 2] and att[1][3:] == ["", s["s1_eattn_l2_e2_to3"]]
    assert (
        len(att[0]) == len(khop_probes.walk_header(3, "eattn"))
        and khop_probes.walk_header(3)[3] == "v_2, probe accuracy"
    )
    assert khop_probes.walk_rows(s, hops=2, study=khop_stall.SEED_PROBE)[0][3:] == [s["s1_h2_chain_l0_e1_v2"]]
    with pytest.raises(ValueError, match="entry"):
        khop_probes.walk_rows(s, study=khop_stall.SEED_PROBE, entries=(3,))
    with pytest.raises(ValueError, match="kind"):
        khop_probes.walk_rows(s, "x", study=khop_stall.SEED_PROBE)
    assert khop_probes.probe_rows(s, study=khop_stall.SEED_PROBE)[0][0] == "seed 1"

    fig = khop_stall_figures.hop_probe_panels(s, khop_stall.SEED_PROBE)
    assert fig.axes[0].images[0].get_array()[1, 0] == s["s1_probe_l1_v1"]
    m = khop_stall.seed_probe_members("quick")
    assert list(m) == list(khop_stall.SEED_PROBED) and [e.seed for e in m.values()] == [1, 2]


def test_continued_training_starts_from_the_state_and_is_reproducible():
    r = _probe_run(steps=40)
    exp, before = r["exp"], {k: v.clone() for k, v in r["state"].items()}
    c = khop.continue_training(exp, r["state"], "cumulative", 1e-3, steps=20, eval_every=10, progress=False)
    assert list(c["step"]) == [0, 10, 20] and c["acc"].shape == (3, 3) and (c["stage"] == 3).all()
    assert c["seconds"] > 0
    assert np.allclose(c["acc"][0], r["acc"][-1])  # where the run ended, on its own test sets
    again = khop.continue_training(
        exp, r["state"], "cumulative", 1e-3, steps=20, eval_every=10, progress=False
    )
    assert np.array_equal(c["acc"], again["acc"])
    d = khop.continue_training(exp, r["state"], "direct", 1e-3, steps=20, eval_every=10, progress=False)
    assert not np.array_equal(c["acc"][1:], d["acc"][1:])  # other data, another path
    anywhere = khop.continue_training(
        dataclasses.replace(exp, starts="any"),
        r["state"],
        "cumulative",
        1e-3,
        steps=20,
        eval_every=10,
        progress=False,
    )
    assert np.array_equal(c["acc"][0], anywhere["acc"][0]) and not np.array_equal(
        c["acc"][1:], anywhere["acc"][1:]
    )
    assert all(torch.equal(v, r["state"][k]) for k, v in before.items())  # the run's state is left as it was
    for bad, match in (
        ({"data": "mixture"}, "unknown data 'mixture'"),
        ({"lr": 0.0}, "lr"),
        ({"steps": 0}, "steps"),
        ({"eval_every": 0}, "eval_every"),
    ):
        kw = {"data": "cumulative", "lr": 1e-3, **bad}
        with pytest.raises(ValueError, match=match):
            khop.continue_training(exp, r["state"], kw.pop("data"), kw.pop("lr"), progress=False, **kw)


def test_escape_summary_reads_the_continuations():
    acc = {
        "cumulative": [[1.0, 0.9, 0.1], [1.0, 1.0, 0.3]],
        "k hops only": [[1.0, 0.9, 0.1], [0.2, 0.4, 0.6]],
        "cumulative, lr x 3": [[1.0, 0.9, 0.1], [1.0, 0.95, 0.2]],
    }
    acc |= {n: [[0.5, 0.9, 0.1], [1.0, 0.9, 0.2]] for n in khop_stall.CONTINUATIONS if n not in acc}
    cont = {
        n: {"step": np.array([0, 5]), "acc": np.array(a), "stage": np.array([3, 3])} for n, a in acc.items()
    }
    s = khop_stall.escape_summary({"seed 0": {"continued": cont}})
    assert s["esc_start_h3"] == 0.1 and s["esc_cum_best_hk"] == 0.3 and s["esc_direct_best_hk"] == 0.6
    assert s["esc_direct_final_below"] == 0.2 and s["esc_cum_lr3_final_h2"] == 0.95 and s["esc_steps"] == 5
    assert s["esc_re2_start_below"] == 0.5 and s["esc_cum_start_below"] == 0.9  # just after each change
    solved = {**cont["cumulative"], "acc": np.array([[1.0, 1.0, 0.1], [1.0, 1.0, 0.95]])}
    assert s["esc_direct_hk_at"] == np.inf
    assert (
        khop_stall.escape_summary({"seed 0": {"continued": cont | {"cumulative": solved}}})["esc_cum_hk_at"]
        == 5
    )
    assert list(khop_stall.escape_curves({"seed 0": {"continued": cont}})["acc"]) == list(
        khop_stall.CONTINUATIONS
    )
    assert set(khop_stall.ESCAPE_TAGS) == set(khop_stall.CONTINUATIONS)
    rows = khop_stall.escape_rows(s)
    assert rows[1] == ["k hops only", 0.9, 0.6, 0.2, 0.4, 0.6] and len(rows[0]) == len(
        khop_stall.escape_header(3)
    )
    assert (
        len(rows) == len(khop_stall.CONTINUATIONS)
        and khop_stall.escape_header(3)[1] == "at its start, lowest over 1..2 hops"
    )
    assert [r[0] for r in khop_stall.escape_rows(s, khop_stall.HIDING)] == list(khop_stall.HIDING)
    assert len(khop_stall.escape_rows(s, khop_stall.CHANGES)) + len(khop_stall.HIDING) == len(
        khop_stall.CONTINUATIONS
    )
    with pytest.raises(ValueError, match="continuation"):
        khop_stall.escape_rows(s, ["x"])
    m = khop_stall.escape_members("quick")
    assert list(m) == ["seed 0"] and m["seed 0"].seed == 0 and m["seed 0"].data == "cumulative"


def test_the_last_table_hidden_from_blocks():
    r = _probe_run()
    exp = r["exp"]
    task, model = exp.task(), exp.model()
    model.load_state_dict(r["state"])
    assert task.last_table == slice(1 + 2 * task.N, task.seq_len)
    H = khop.table_hidden(task, [2], 2)
    assert H.shape == (2, task.seq_len) and not H[0].any() and H[1].sum() == task.N and H[1, -task.N :].all()
    with pytest.raises(ValueError, match="block"):
        khop.table_hidden(task, [3], 2)
    b = task.sample(np.random.default_rng(2), np.array([1, 2, 3, 3]))
    t, m = torch.as_tensor(b.tokens), torch.as_tensor(b.mask)
    with torch.no_grad():
        plain, none = model(t, m), model(t, m, hide=torch.zeros(2, task.seq_len, dtype=torch.bool))
        hidden = model(t, m, hide=khop.table_hidden(task, [1, 2], 2))
        two = task.sample(np.random.default_rng(2), np.array([1, 2, 2, 2]))  # the same draws, table 3 padded
        short = model(torch.as_tensor(two.tokens), torch.as_tensor(two.mask))
    assert torch.equal(plain, none)
    # 1- and 2-hop examples: table 3 is padding already
    assert torch.allclose(hidden[:2], plain[:2], atol=1e-5)
    # hidden everywhere: a 2-hop example in the model's eyes
    assert torch.allclose(hidden[2:], short[2:], atol=1e-5)


def test_table_interference_shows_the_last_table_to_one_block_at_a_time():
    r = _probe_run(steps=60)
    exp = r["exp"]
    res = khop_probes.table_interference(exp, r["state"], n=64)
    assert res["prev"].shape == res["answer"].shape == (6,) and res["attention"].shape == (2, 2)
    # with two blocks, one = all but one
    assert res["prev"][1] == res["prev"][4] and res["prev"][2] == res["prev"][3]
    assert ((res["prev"] >= 0) & (res["prev"] <= 1)).all() and (res["attention"] <= 1 + 1e-6).all()
    # its own stream
    assert np.array_equal(res["prev"], khop_probes.table_interference(exp, r["state"], n=64)["prev"])
    model = exp.model()
    model.load_state_dict(r["state"])
    b = exp.task().sample(
        np.random.default_rng(config.seed_streams(exp.seed, ["interference"])["interference"]), np.full(64, 3)
    )
    with torch.no_grad():
        pred = model(torch.as_tensor(b.tokens), torch.as_tensor(b.mask)).argmax(1).numpy()
    assert (
        res["answer"][-1] == (pred == b.answer).mean() and res["prev"][-1] == (pred == b.chain[:, 1]).mean()
    )
    with pytest.raises(ValueError, match="k \\(hops\\)"):
        one = khop.KHopExperiment(N=4, k=1, depth=1, d=16, heads=2)
        khop_probes.table_interference(one, one.model().state_dict())
    s, res = (
        khop_probes.probe_summary({"seed 0": r, khop_members.EXPLORED: r}),
        khop_probes.table_interference(exp, r["state"]),
    )
    assert s["p100_tk_all_answer"] == res["answer"][-1] and s["p100_tk_b1_prev"] == res["prev"][1]
    assert s["p100_tkattn_l2_e1"] == pytest.approx(res["attention"][1, 0])
    rows = khop_stall.interference_rows(s)
    assert [row[1] for row in rows[:6]] == [
        "no block",
        "block 1 only",
        "block 2 only",
        "every block but block 1",
        "every block but block 2",
        "every block (the model as it is)",
    ]
    assert len(rows) == 12 and rows[6][0] == khop_members.EXPLORED
    assert rows[1][2:] == [s["p100_tk_b1_prev"], s["p100_tk_b1_answer"]] and len(rows[0]) == 4
    assert khop_stall.interference_header(3)[2:] == ["answers v_2", "answers v_3"]


def test_continuations_that_change_the_model():
    r = _probe_run(steps=40)
    exp = r["exp"]
    kw = {"steps": 10, "eval_every": 10, "progress": False}
    extra = khop.continue_training(exp, r["state"], "cumulative", 1e-3, extra=True, **kw)
    assert np.allclose(extra["acc"][0], r["acc"][-1])  # the new top block starts silent: the model as it was
    re1 = khop.continue_training(exp, r["state"], "cumulative", 1e-3, reinit=1, **kw)
    assert np.array_equal(
        re1["acc"], khop.continue_training(exp, r["state"], "cumulative", 1e-3, reinit=1, **kw)["acc"]
    )  # one seed, one fresh block
    hid = khop.continue_training(exp, r["state"], "cumulative", 1e-3, hide=(1,), **kw)
    model = exp.model()
    model.load_state_dict(r["state"])
    tests = khop._test_sets(exp, "cpu")
    assert hid["acc"][0].tolist() == khop.hop_accuracy(model, tests, khop.table_hidden(exp.task(), [1], 2))
    last = khop.continue_training(exp, r["state"], "cumulative", 1e-3, reinit=-1, **kw)
    assert np.array_equal(
        last["acc"], khop.continue_training(exp, r["state"], "cumulative", 1e-3, reinit=2, **kw)["acc"]
    )  # -1: the last block
    for bad, match in (({"reinit": 3}, "reinit"), ({"hide": (3,)}, "block"), ({"reinit": -2}, "reinit")):
        with pytest.raises(ValueError, match=match):
            khop.continue_training(exp, r["state"], "cumulative", 1e-3, **kw, **bad)
    assert khop.continue_training(exp, r["state"], "cumulative", 1e-3, extra=True, hide=(3,), **kw)[
        "acc"
    ].shape == (2, 3)  # the extra block counts


def test_hop_panels_one_panel_per_run_and_one_legend_above():

    acc = np.array([[0.1, 0.1], [0.9, 0.2], [1.0, 0.95]])
    names = ["cumulative", "table k hidden from block 1, k hops only, twice as long"]
    curves = {
        "step": {n: [0, 5, 10] for n in names},
        "acc": {n: acc for n in names},
        "stage": {n: [1, 2, 2] for n in names},
    }
    fig = khop_figures.hop_panels(curves, 0.125)
    panels = [ax for ax in fig.axes if ax.get_xlabel() == "training step"]
    assert len(panels) == 2 and all(ax.get_legend() is None for ax in panels)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["1 hop", "2 hops"]
    label = [t.get_text() for t in panels[1].texts][0]
    assert label.replace("\n", " ") == names[1] and "\n" in label  # wrapped inside its panel
    assert np.array_equal(panels[0].lines[0].get_ydata(), acc[:, 0])


def test_a_block_that_never_sees_table_k_is_the_plain_model_with_it_hidden():
    exp = khop.KHopExperiment(N=4, k=3, depth=2, d=16, heads=2)
    hid = dataclasses.replace(exp, hide_k_from=(1,))
    plain, model = exp.model(), hid.model()
    assert plain.state_dict().keys() == model.state_dict().keys()  # nothing new to save: old states load
    model.load_state_dict(plain.state_dict())
    b = exp.task().sample(np.random.default_rng(3), np.array([1, 2, 3, 3]))
    t, m = torch.as_tensor(b.tokens), torch.as_tensor(b.mask)
    one = khop.table_hidden(exp.task(), [1], 2)
    with torch.no_grad():
        assert torch.equal(model(t, m), plain(t, m, hide=one))
        assert torch.equal(
            model(t, m, hide=khop.table_hidden(exp.task(), [2], 2)),
            plain(t, m, hide=khop.table_hidden(exp.task(), [1, 2], 2)),
        )  # hide adds to it
        assert not torch.allclose(model(t, m)[2:], plain(t, m)[2:])  # 3-hop examples: block 1 sees less


@pytest.mark.parametrize("study", [khop_stall.HIDDEN, khop_stall.HIDDEN12], ids=["block 1", "blocks 1 and 2"])
def test_table_k_hidden_from_the_start_changes_nothing_before_the_last_stage(study):
    kw = dict(
        N=4,
        k=2,
        data="cumulative",
        d=16,
        heads=2,
        steps=60,  # every seed moves to its last stage by step 45 under both samplers
        eval_every=5,
        n_test=64,
        batch=16,
        advance_at=0.3,
    )
    seeds = {**{khop_studies.seed_name(s): s for s in khop_studies.SEEDS}, khop_members.EXPLORED: 0}
    plain = {
        name: khop.run(khop.KHopExperiment(**kw, seed=s), progress=False, use_cache=False)
        for name, s in seeds.items()
    }
    hid = {
        name: khop_probes.probe_run(
            khop.KHopExperiment(**kw, seed=s, hide_k_from=study.blocks), progress=False
        )
        for name, s in seeds.items()
    }
    assert all(
        np.isfinite(khop_curves.last_stage_at(r)) and khop_curves.last_stage_at(r) > 0 for r in plain.values()
    )
    p = study.prefix
    vs = khop_stall.hidden_vs_plain(hid, plain, study=study)
    assert vs[f"{p}_gap"] == 0 and vs[f"{p}_s1_gap"] == 0
    assert any(not np.array_equal(hid[n]["acc"], plain[n]["acc"]) for n in plain)  # it acts on the last stage
    swapped = {**plain, "seed 0": plain["seed 1"], "seed 1": plain["seed 0"]}
    assert khop_stall.hidden_vs_plain(hid, swapped, study=study)[f"{p}_s0_gap"] > 0
    with pytest.raises(ValueError, match="not among the runs"):
        khop_stall.hidden_vs_plain(hid, {"seed 0": plain["seed 0"]}, study=study)
    with pytest.raises(ValueError, match="different steps"):
        khop_stall.hidden_vs_plain(
            hid, {**plain, "seed 2": {**plain["seed 2"], "step": plain["seed 2"]["step"] * 2}}, study=study
        )
    s = khop_stall.hidden_study_summary(hid, study=study)
    for n in plain:
        x, h = khop_stall.HIDDEN_TAGS[n], study.probe.tags[n]
        assert s[f"{p}_{x}_stagek_at"] == khop_curves.last_stage_at(plain[n])
        assert s[f"{p}_{x}_best_hk"] == hid[n]["acc"][:, -1].max()
        assert vs[f"{p}_{x}_plain_wait"] == khop_curves.last_stage_wait(plain[n])
        change = vs[f"{p}_{x}_wait_change"]
        assert change == s[f"{p}_{x}_wait"] - vs[f"{p}_{x}_plain_wait"] or np.isnan(change)
        # a blind block never sees table k: shown to it only = to none, to all but it = to all
        for b in study.blocks:
            assert s[f"{h}_tk_b{b}_prev"] == s[f"{h}_tk_none_prev"]
            assert s[f"{h}_tk_not{b}_answer"] == s[f"{h}_tk_all_answer"]
    assert s[f"{p}_learned_n"] == sum(np.isfinite(s[f"{p}_s{x}_hk_at"]) for x in khop_studies.SEEDS)
    curves = khop_stall.hidden_summary(hid, study=study)
    assert f"{study.probe.tags['seed 0']}_acc" not in curves
    assert all(s[key] == v or np.isnan(v) for key, v in curves.items())


def test_the_hidden_studies_name_their_entries_apart():
    assert sorted(khop_stall.HIDDEN_PROBE.tags.values()) == ["h0", "h1", "h2", "h250"]
    assert sorted(khop_stall.HIDDEN12.probe.tags.values()) == ["hh0", "hh1", "hh2", "hh250"]
    assert khop_stall.HIDDEN.where == "block 1" and khop_stall.HIDDEN12.where == "blocks 1 and 2"
    assert (
        khop_stall.HIDDEN.prefix != khop_stall.HIDDEN12.prefix
        and khop_stall.HIDDEN.probe.shared != khop_stall.HIDDEN12.probe.shared
    )


def test_hidden_summary_reads_when_each_seed_learns():
    s = khop_stall.hidden_summary(_seed_study([1, 1, 2]))
    assert s["hid_e250_best_hk"] == 0.98 and s["hid_learned_n"] == 2
    assert s["hid_s0_hk_at"] == np.inf and s["hid_s0_wait"] == np.inf
    assert s["hid_s1_hk_at"] == 20 and s["hid_s1_stagek_at"] == 10 and s["hid_s1_wait"] == 10
    assert s["hid_s0_best_hk"] == 0.12 and s["hid_s2_final_min"] == 0.98


@pytest.mark.parametrize("study, blocks", [(khop_stall.HIDDEN, (1,)), (khop_stall.HIDDEN12, (1, 2))])
def test_the_hidden_study_is_the_seed_study_with_table_k_hidden(study, blocks):
    seeds, hid = khop_studies.seed_members("quick"), khop_stall.hidden_members("quick", study)
    assert list(hid) == list(seeds) == list(khop_stall.HIDDEN_TAGS)
    for name, e in hid.items():
        assert e.hide_k_from == blocks and dataclasses.replace(e, hide_k_from=()) == seeds[name]


def test_the_long_study_is_seed_0s_two_runs_with_blocks_1_and_2_blind():
    long = khop_stall.hidden_members("quick", khop_stall.HIDDEN12_LONG)
    assert list(long) == ["seed 0", khop_members.EXPLORED] and all(
        e.hide_k_from == (1, 2) for e in long.values()
    )
    runs = _seed_study([1, 1, 2])
    s = khop_stall.hidden_summary({n: runs[n] for n in long}, study=khop_stall.HIDDEN12_LONG)
    assert (
        s["hid12l_s0_best_hk"] == 0.12 and s["hid12l_e250_best_hk"] == 0.98 and "hid12l_s1_best_hk" not in s
    )
    assert s["hid12l_learned_n"] == 0  # the explored run is not counted among the seeds
    with pytest.raises(KeyError):
        khop_stall.hidden_summary(
            {"seed 0": runs["seed 0"]}, study=khop_stall.HIDDEN12_LONG
        )  # a study's run missing
    with pytest.raises(ValueError, match="has no probes"):
        khop_stall.hidden_study_summary(runs, study=khop_stall.HIDDEN12_LONG)


def test_prefix_gap_compares_the_shorter_runs_evaluations():
    runs = _seed_study([1, 1, 2])
    short = {
        n: {k: (v[:2] if k in ("acc", "stage", "step") else v) for k, v in r.items()} for n, r in runs.items()
    }
    assert khop_studies.prefix_gap(runs, short, "x")["x_prefix_gap"] == 0
    other = {**short, "seed 1": {**short["seed 1"], "acc": short["seed 1"]["acc"] + 0.25}}
    assert khop_studies.prefix_gap(runs, other, "x")["x_prefix_gap"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="not among the shorter runs"):
        khop_studies.prefix_gap(runs, {"seed 0": short["seed 0"]}, "x")
    with pytest.raises(ValueError, match="different steps"):
        khop_studies.prefix_gap(
            runs, {**short, "seed 2": {**short["seed 2"], "step": short["seed 2"]["step"] + 1}}, "x"
        )


def test_hiding_rows_compare_runs_over_the_same_steps():
    long, short = _seed_study([1, 1, 2]), _seed_study([1, 2, 2])
    short = {
        n: {k: (v[:2] if k in ("acc", "stage", "step") else v) for k, v in r.items()}
        for n, r in short.items()
    }
    studies = {"a": long, "b": short}
    rows = khop_stall.hiding_rows(studies, steps=10)  # evaluations at steps 0 and 10
    assert [r[0] for r in rows] == list(long) and rows[1][1:] == [0.1, 0.1]
    assert khop_stall.hiding_rows(studies, steps=20)[1][1:] == [0.98, 0.1]  # the shorter runs end at step 10
    assert khop_stall.hiding_rows({"a": long, "b": {"seed 0": short["seed 0"]}}, steps=20) == [
        ["seed 0", 0.12, 0.1]
    ]
    assert khop_stall.hiding_header(studies, 2) == ["run", "best 2-hop accuracy, a", "best 2-hop accuracy, b"]
    with pytest.raises(ValueError, match="steps=0 is out of range"):
        khop_stall.hiding_rows(studies, steps=0)
    with pytest.raises(ValueError, match="has none of the runs"):
        khop_stall.hiding_rows({"a": long, "b": {"other": short["seed 0"]}}, steps=10)


def test_stage_entry_run_stops_where_the_run_moves_to_its_last_stage():
    kw = dict(
        N=4,
        k=2,
        data="cumulative",
        d=16,
        heads=2,
        steps=60,  # both seeds move to their last stage by step 45 under both samplers
        eval_every=5,
        n_test=64,
        batch=16,
        advance_at=0.3,
    )
    runs = {
        name: khop_stall_paths.stage_entry_run(khop.KHopExperiment(**kw, seed=s), progress=False)
        for name, s in (("seed 0", 0), (khop_members.EXPLORED, 1))
    }
    for r in runs.values():
        assert r["exp"].steps == khop_curves.last_stage_at(r["full"]) > 0 and r["step"][-1] == r["exp"].steps
        assert (r["stage"] < 2).all() and r["full"]["stage"][-1] == 2  # no step on the last stage yet
    s = khop_stall_paths.stage_entry_summary(runs)
    assert s["nprobe_prefix_gap"] == 0 and s["n100_at"] == runs["seed 0"]["exp"].steps
    assert s["nprobe_tk_b1_gap"] == abs(s["n100_tk_b1_prev"] - s["n250_tk_b1_prev"])
    assert list(khop_stall_paths.stage_entry_members("quick")) == ["seed 0", khop_members.EXPLORED]
    with pytest.raises(ValueError, match="its last stage starts at step"):
        khop_stall_paths.stage_entry_run(khop.KHopExperiment(**{**kw, "data": "mixture"}), progress=False)


def test_last_stage_data_changes_only_the_last_stages_batches():
    kw = dict(
        N=4,
        k=2,
        data="cumulative",
        d=16,
        heads=2,
        steps=60,
        eval_every=5,
        n_test=64,
        batch=16,
        advance_at=0.3,
    )
    own, other = (
        khop.run(khop.KHopExperiment(**kw, last_stage_data=r), progress=False, use_cache=False)
        for r in (0, 1)
    )
    at = khop_curves.last_stage_at(own)
    assert 0 < at < kw["steps"] and khop_curves.last_stage_at(other) == at
    before = own["step"] <= at  # the evaluation at which it moves is the last before other batches
    assert np.array_equal(own["acc"][before], other["acc"][before])
    assert any(not torch.equal(own["state"][key], other["state"][key]) for key in own["state"])
    assert khop_stall.gap_before_last_stage("x", other, own) == 0
    # two runs of one seed draw the same last-stage batches from the same stream, whatever their evaluations
    a, b = (khop.KHopExperiment(**{**kw, "eval_every": e}, last_stage_data=2) for e in (5, 7))
    assert np.array_equal(
        khop._batches(a, 2).rng.integers(0, 10**6, 8), khop._batches(b, 2).rng.integers(0, 10**6, 8)
    )
    assert not np.array_equal(
        khop._batches(a, 2).rng.integers(0, 10**6, 8), khop._batches(a, 1).rng.integers(0, 10**6, 8)
    )
    with pytest.raises(ValueError, match="last_stage_data \\(stream\\)=-1 is out of range"):
        khop.KHopExperiment(**kw, last_stage_data=-1)
    with pytest.raises(ValueError, match="last_stage_data=1 with data='mixture'"):
        khop.KHopExperiment(**{**kw, "data": "mixture"}, last_stage_data=1)


def test_reseed_study_members_and_summary():
    members = khop_stall_paths.reseed_members("quick")
    assert list(members) == [
        khop_stall_paths.reseed_name(n, r)
        for n in ("seed 0", khop_members.EXPLORED)
        for r in khop_stall_paths.RESEED_STREAMS
    ]
    assert {e.last_stage_data for e in members.values()} == set(khop_stall_paths.RESEED_STREAMS)
    plain = khop_studies.seed_members("quick")
    for name, e in members.items():
        base = name.split(khop_members.RESEED_SUFFIX)[0]
        assert dataclasses.replace(e, last_stage_data=0) == plain[base]
    from companion import record

    built = record.build("khop_reseed", "quick", {"k": 4, "steps": 80, "eval_every": 20})
    assert {e.eval_every for n, e in built.items() if n.startswith(khop_members.EXPLORED)} == {
        khop_members.EXPLORED_EVERY
    }
    assert {e.eval_every for n, e in built.items() if not n.startswith(khop_members.EXPLORED)} == {20}

    kw = dict(
        N=4,
        k=2,
        data="cumulative",
        d=16,
        heads=2,
        steps=40,
        eval_every=5,
        n_test=64,
        batch=16,
        advance_at=0.3,
    )
    every = {"seed 0": 5, khop_members.EXPLORED: 10}
    runs = {
        khop_stall_paths.reseed_name(n, r): khop_probes.probe_run(
            khop.KHopExperiment(**{**kw, "eval_every": e}, last_stage_data=r), progress=False
        )
        for n, e in every.items()
        for r in (1, 2)
    }
    s = khop_stall_paths.reseed_summary(runs, level=0.5)
    assert s["reseed_n"] == 2 and s["reseed_k"] == 2
    for tag in khop_stall_paths.RESEED_TAGS.values():
        ok = [np.isfinite(s[f"{tag}_d{r}_hk_at"]) for r in (1, 2)]
        assert s[f"{tag}_learned_n"] == sum(ok)
        for r in (1, 2):
            assert (s[f"{tag}_d{r}_best_hk"] >= 0.5) == np.isfinite(s[f"{tag}_d{r}_hk_at"])
    keys = [f"{t}_d{r}" for t in ("rs100", "rs250") for r in (1, 2)]
    stalled = [s[f"{t}_tk_b1_prev"] for t in keys if not np.isfinite(s[f"{t}_hk_at"])]
    learnt = [s[f"{t}_tk_b1_prev"] for t in keys if np.isfinite(s[f"{t}_hk_at"])]
    for key, values, pick in (
        ("reseed_stalled_b1_max", stalled, max),
        ("reseed_learned_b1_min", learnt, min),
    ):
        assert s[key] == pick(values) if values else np.isnan(s[key])
    split = sum(np.isfinite(s[f"rs100_d{r}_hk_at"]) != np.isfinite(s[f"rs250_d{r}_hk_at"]) for r in (1, 2))
    assert s["reseed_split_n"] == split
    rows = khop_stall_paths.reseed_rows(s)
    assert (
        len(rows) == 4
        and len(rows[0]) == len(khop_stall_paths.reseed_header(2))
        and rows[1][:2] == [1, khop_members.EXPLORED]
    )
    own = {
        n: khop.run(khop.KHopExperiment(**{**kw, "eval_every": e}), progress=False) for n, e in every.items()
    }
    vs = khop_stall_paths.reseed_vs_plain(runs, own)
    assert (
        vs["reseed_gap"] == 0
        and vs["rs250_own_hk_at"] == khop_curves.learned_at(own[khop_members.EXPLORED])[-1]
    )
    assert s["rs100_d2_stagek_at"] == khop_curves.last_stage_at(own["seed 0"]) > 0
    with pytest.raises(ValueError, match="not among the runs with their own data"):
        khop_stall_paths.reseed_vs_plain(runs, {"seed 0": own["seed 0"]})
    with pytest.raises(ValueError, match="has no run with last-stage data \\[2\\]"):
        khop_stall_paths.reseed_summary(
            {k: v for k, v in runs.items() if k != khop_stall_paths.reseed_name(khop_members.EXPLORED, 2)}
        )
    with pytest.raises(ValueError, match="unknown run with last-stage data 'seed 0'"):
        khop_stall_paths.reseed_summary({"seed 0": runs[khop_stall_paths.reseed_name("seed 0", 1)]})


def test_reseed_panels_one_panel_per_run_of_seed_0():

    step, stage = np.arange(0, 50, 10), np.array([1, 1, 2, 2, 2])
    acc = np.linspace(0, 1, 10).reshape(5, 2)
    curves = {
        key: {
            khop_stall_paths.reseed_name(n, r): v for n in ("seed 0", khop_members.EXPLORED) for r in (1, 2)
        }
        for key, v in (("step", step), ("acc", acc), ("stage", stage))
    }
    plain = {key: {"seed 0": v} for key, v in (("step", step), ("acc", acc), ("stage", stage))}
    fig = khop_stall_figures.reseed_panels(curves, plain, 0.25, upto=30)
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == ["seed 0", khop_members.EXPLORED]
    # streams, own data, move, chance
    assert len(axes[0].lines) == 2 + 1 + 2 and len(axes[1].lines) == 2 + 1 + 1
    assert axes[1].lines[2].get_xdata()[0] == 10  # the move, read off the streams' curves
    both = {key: {**v, "seed 0": plain[key]["seed 0"]} for key, v in curves.items()}
    other, own = khop_stall_paths.split_streams(both)
    assert set(other) == set(own) == set(curves) and set(other["acc"]) == set(curves["acc"])
    assert set(own["step"]) == {"seed 0"} and own["acc"]["seed 0"] is acc
    assert axes[0].lines[0].get_xdata().max() == 30


def _reseed_short_summary(b1: dict) -> dict:
    """A stand-in for a recorded reseed summary: the v_(k-1) shares with table k shown to block 1 only."""
    out = {"reseed_n": 4, "reseed_k": 4}
    for tag, shares in b1.items():
        out |= {f"{tag}_d{r}_tk_b1_prev": v for r, v in enumerate(shares, 1)}
    return out


def test_reseed_paths_count_the_runs_whose_block_1_breaks():
    short = _reseed_short_summary({"rs100": [0.13, 0.13, 0.89, 0.27], "rs250": [0.89, 0.97, 1.0, 0.98]})
    p = khop_stall_paths.reseed_paths(short)
    assert (p["rs100_b1_breaks_n"], p["rs250_b1_breaks_n"], p["reseed_path_split_n"]) == (3, 0, 3)
    assert khop_stall_paths.reseed_paths(short, level=0.9)["rs250_b1_breaks_n"] == 1  # 0.89
    with pytest.raises(ValueError, match="level=0 is out of range"):
        khop_stall_paths.reseed_paths(short, level=0)


def test_reseed_long_study_and_its_runs_by_path():
    assert list(khop_stall_paths.reseed_long_members("quick")) == list(khop_stall_paths.RESEED_LONG)
    assert khop_stall_paths.RESEED_LONG[-1] == khop_stall_paths.reseed_name(khop_members.EXPLORED, 1)
    short = _reseed_short_summary({"rs100": [0.13, 0.13, 0.89, 0.27], "rs250": [0.89, 0.97, 1.0, 0.98]})
    best = {"rs100_d1": 0.2, "rs100_d2": 0.15, "rs100_d3": 0.99, "rs100_d4": 0.3, "rs250_d1": 0.95}
    long = {f"rl_{t}_best_hk": v for t, v in best.items()}
    s = khop_stall_paths.reseed_by_path(long, short)
    assert (s["rl_broken_n"], s["rl_unbroken_n"]) == (3, 2)
    assert s["rl_broken_best_max"] == 0.3 and s["rl_unbroken_best_min"] == 0.95
    with pytest.raises(ValueError, match="missing from the longer or the shorter study"):
        khop_stall_paths.reseed_by_path({k: v for k, v in long.items() if "rs250" not in k}, short)
    kw = dict(
        N=4,
        k=2,
        data="cumulative",
        d=16,
        heads=2,
        steps=30,
        eval_every=5,
        n_test=64,
        batch=16,
        advance_at=0.3,
    )
    runs = {
        name: khop_probes.probe_run(khop.KHopExperiment(**kw, last_stage_data=1), progress=False)
        for name in khop_stall_paths.RESEED_LONG[:2]
    }
    ls = khop_stall_paths.reseed_long_summary(runs, level=0.5)
    assert ls["rl_steps"] == 30 and ls["rl_learned_n"] == sum(
        np.isfinite(ls[f"rl_rs100_d{r}_hk_at"]) for r in (1, 2)
    )
    assert ls["rl_rs100_d1_best_hk"] == ls["rl_rs100_d2_best_hk"]  # the same configuration twice
    rows = khop_stall_paths.reseed_rows(ls, names=khop_stall_paths.RESEED_LONG[:2], prefix="rl_")
    assert [r[:2] for r in rows] == [[1, "seed 0"], [2, "seed 0"]] and rows[0][3] == ls["rl_rs100_d1_best_hk"]
    with pytest.raises(ValueError, match="unknown run of the longer study"):
        khop_stall_paths.reseed_long_summary(
            {khop_stall_paths.reseed_name(khop_members.EXPLORED, 2): runs[khop_stall_paths.RESEED_LONG[0]]}
        )


def test_last_stage_delay_moves_later_and_nothing_else():
    kw = dict(
        N=4,
        k=3,
        data="cumulative",
        d=16,
        heads=2,
        steps=160,  # the move: step 70 (numpy sampler), 120 (counter)
        eval_every=5,
        n_test=64,
        batch=16,
        advance_at=0.3,
    )
    own, late, odd = (
        khop.run(khop.KHopExperiment(**kw, last_stage_delay=d), progress=False, use_cache=False)
        for d in (0, 10, 7)
    )
    at = khop_curves.last_stage_at(own)
    assert 0 < at < kw["steps"] - 10
    assert (
        khop_curves.last_stage_at(late) == at + 10 and khop_curves.last_stage_at(odd) == at + 10
    )  # at an evaluation
    assert np.array_equal(late["acc"], odd["acc"]) and np.array_equal(late["stage"], odd["stage"])
    before = own["step"] <= at
    assert np.array_equal(own["acc"][before], late["acc"][before])
    assert np.array_equal(own["stage"][before], late["stage"][before])  # the move to stage 2 is not delayed
    assert set(late["stage"][(late["step"] > at) & (late["step"] <= at + 10)]) == {2}
    assert not np.array_equal(own["acc"], late["acc"])
    # with other last-stage data, the stream starts at the delayed move: before it, the delayed run's own
    other = khop.run(
        khop.KHopExperiment(**kw, last_stage_delay=10, last_stage_data=1), progress=False, use_cache=False
    )
    upto = late["step"] <= at + 10
    assert np.array_equal(other["acc"][upto], late["acc"][upto]) and not np.array_equal(
        other["acc"], late["acc"]
    )
    with pytest.raises(ValueError, match="last_stage_delay \\(steps\\)=-5 is out of range"):
        khop.KHopExperiment(**kw, last_stage_delay=-5)
    with pytest.raises(ValueError, match="last_stage_delay=10 with data='direct'"):
        khop.KHopExperiment(**{**kw, "data": "direct"}, last_stage_delay=10)


def test_doubling_stages_skip_three_hops_and_match_every_count_until_then():
    assert khop.hop_levels("every", 4) == (1, 2, 3, 4) and khop.hop_levels("doubling", 8) == (1, 2, 4, 8)
    assert khop.hop_levels("doubling", 1) == (1,) and khop.hop_levels("doubling", 2) == (1, 2)
    kw = dict(
        N=4,
        k=4,
        data="cumulative",
        d=16,
        heads=2,
        depth=2,
        steps=200,
        eval_every=5,
        n_test=64,
        batch=16,
        advance_at=0.3,
        lr=1e-2,
    )
    every, dbl = (
        khop.run(khop.KHopExperiment(**kw, levels=v), progress=False, use_cache=False)
        for v in ("every", "doubling")
    )
    assert set(dbl["stage"]) <= {1, 2, 4} and 4 in set(dbl["stage"]) and 3 in set(every["stage"])
    # every trains on 3 where doubling does on 4
    split = int(np.flatnonzero(every["stage"] != dbl["stage"])[0])
    assert (every["stage"][split], dbl["stage"][split]) == (3, 4)
    assert np.array_equal(every["acc"][:split], dbl["acc"][:split])  # the same run until the move
    assert not np.array_equal(every["acc"], dbl["acc"])
    e = khop.KHopExperiment(**kw, levels="doubling")
    rng = np.random.default_rng(0)
    assert set(khop.training_hops(e, 2, rng)) == {1, 2} and set(khop.training_hops(e, 4, rng)) == {1, 2, 4}
    # every hop count: the draws of the cumulative curriculum before stages could be chosen
    e = khop.KHopExperiment(**kw)
    assert np.array_equal(
        khop.training_hops(e, 3, np.random.default_rng(1)), np.random.default_rng(1).integers(1, 4, 16)
    )
    with pytest.raises(ValueError, match="levels='doubling' with k=3: allowed k a power of two"):
        khop.KHopExperiment(**{**kw, "k": 3}, levels="doubling")
    with pytest.raises(ValueError, match="levels='doubling' with data='mixture'"):
        khop.KHopExperiment(**{**kw, "data": "mixture"}, levels="doubling")
    with pytest.raises(ValueError, match="levels"):
        khop.KHopExperiment(**kw, levels="halving")


def test_examples_that_start_at_another_table_compose_those_tables_only():
    task = khop.KHopTask(N=5, k=4, hidden_seed=3)
    hops, starts = np.array([1, 2, 1, 4, 3, 2]), np.array([3, 2, 4, 1, 2, 3])
    b = task.sample(np.random.default_rng(0), hops, starts)
    pi, N = task.hidden(), task.N
    for j in range(len(hops)):
        tables = b.tokens[j, 1:].reshape(task.k, N)
        v = b.tokens[j, 0]
        for i in range(starts[j] - 1, starts[j] - 1 + hops[j]):
            v = tables[i, pi[i][v]]
        assert b.answer[j] == v
        shown = [i + 1 for i in range(task.k) if b.mask[j, 1 + i * N : 1 + (i + 1) * N].all()]
        assert shown == list(range(starts[j], starts[j] + hops[j])) and b.mask[j, 0]
        assert (b.tokens[j, 1:][~b.mask[j, 1:]] == task.pad).all() and not b.mask[j, 1:][
            b.tokens[j, 1:] == N
        ].any()
    # starting at table 1 is the old sample: the same draws, the same batch
    a, c = (
        task.sample(np.random.default_rng(1), hops),
        task.sample(np.random.default_rng(1), hops, np.ones(6, int)),
    )
    assert all(np.array_equal(getattr(a, f), getattr(c, f)) for f in ("tokens", "mask", "chain", "answer"))
    with pytest.raises(
        ValueError, match=r"starts \[2\] for hop counts \[4\]: allowed .* 1..k - k' \+ 1 \(k = 4\)"
    ):
        task.sample(np.random.default_rng(0), [4], [2])
    with pytest.raises(ValueError, match="starts"):
        task.sample(np.random.default_rng(0), [1], [0])
    kw = dict(
        N=4, k=4, data="cumulative", d=16, heads=2, depth=2, steps=30, eval_every=10, n_test=64, batch=16
    )
    e = khop.KHopExperiment(**kw, starts="any")
    rng = np.random.default_rng(0)
    drawn = khop.training_starts(e, np.full(4000, 2), rng)
    assert set(drawn) == {1, 2, 3} and khop.training_starts(e, np.full(50, 4), rng).tolist() == [1] * 50
    # table 1, nothing drawn
    assert khop.training_starts(khop.KHopExperiment(**kw), np.full(5, 2), rng) is None
    # "one": the draws of "any", kept for one-hop examples only; the generator ends where "any" leaves it
    hops = np.random.default_rng(1).choice([1, 2, 4], 500)
    r_any, r_one = np.random.default_rng(2), np.random.default_rng(2)
    got_any, got_one = (
        khop.training_starts(dataclasses.replace(e, starts=v), hops, r)
        for v, r in (("any", r_any), ("one", r_one))
    )
    assert np.array_equal(got_one[hops == 1], got_any[hops == 1]) and set(got_one[hops == 1]) == {1, 2, 3, 4}
    assert (got_one[hops > 1] == 1).all() and (got_any[hops == 2] > 1).any()
    assert r_any.random() == r_one.random()
    # "longer": table 1 for one-hop examples, drawn for the others only (a one-hop batch draws nothing: "first")
    r_long, r_first = np.random.default_rng(2), np.random.default_rng(2)
    got = khop.training_starts(dataclasses.replace(e, starts="longer"), hops, r_long)
    assert (got[hops == 1] == 1).all() and set(got[hops == 2]) == {1, 2, 3} and (got[hops == 4] == 1).all()
    assert (
        khop.training_starts(dataclasses.replace(e, starts="longer"), np.ones(9, int), r_first).tolist()
        == [1] * 9
    )
    assert r_first.random() == np.random.default_rng(2).random()
    first, anyw, one = (
        khop.run(khop.KHopExperiment(**kw, starts=v), progress=False, use_cache=False)
        for v in ("first", "any", "one")
    )
    assert np.array_equal(first["acc"][0], anyw["acc"][0]) and not np.array_equal(first["acc"], anyw["acc"])
    # on the first stage (one hop) "one" is "any", batch for batch; with longer examples it is neither
    assert (one["stage"] == 1).all() and np.array_equal(one["acc"], anyw["acc"])
    assert all(torch.equal(one["state"][n], anyw["state"][n]) for n in one["state"])
    # "first" there
    longer = khop.run(khop.KHopExperiment(**kw, starts="longer"), progress=False, use_cache=False)
    assert all(torch.equal(longer["state"][n], first["state"][n]) for n in first["state"])
    mixed = {
        v: khop.run(
            khop.KHopExperiment(**{**kw, "data": "mixture"}, starts=v), progress=False, use_cache=False
        )["state"]
        for v in ("first", "any", "one", "longer")
    }
    assert all(
        not torch.equal(mixed[a]["embed.weight"], mixed[b]["embed.weight"])
        for a, b in itertools.combinations(mixed, 2)
    )
    with pytest.raises(ValueError, match="starts"):
        khop.KHopExperiment(**kw, starts="last")


def test_a_variant_over_another_compares_with_that_variants_recorded_runs():
    v = khop_studies.ANYSTART
    assert v.settings() == {**khop_studies.DOUBLING.settings(), "starts": "any"} and v.trained(4) == (1, 2, 4)
    m = khop_studies.variant_members("quick", v)
    assert all((e.levels, e.starts, e.seed) == ("doubling", "any", s) for s, e in enumerate(m.values()))
    assert (
        dataclasses.replace(m["seed 2"], starts="first")
        == khop_studies.variant_members("quick", khop_studies.DOUBLING)["seed 2"]
    )
    base = v.base_runs(4000)  # the recorded runs with stages 1, 2, 4 from table 1, cut
    assert sorted(base) == list(range(7)) and {int(r["step"][-1]) for r in base.values()} == {4000}
    with pytest.raises(ValueError, match=r"steps=12000: allowed at most 10000 \(the recorded khop_doubling"):
        v.base_runs(12000)
    solved = _fake(
        [[0.1] * 4, [0.95, 0.1, 0.1, 0.1], [0.99, 0.95, 0.1, 0.1], [0.99, 0.99, 0.2, 0.97]],
        stage=[1, 2, 4, 4],
    )
    flat = _fake(
        [[0.1] * 4, [0.95, 0.1, 0.1, 0.1], [0.99, 0.95, 0.1, 0.1], [0.99, 0.99, 0.2, 0.12]],
        stage=[1, 2, 4, 4],
    )
    s = khop_four_hops.variant_summary({"seed 0": solved, "seed 1": flat}, {0: flat, 1: solved}, variant=v)
    # both populations count the hop counts 1, 2 and 4 (three is trained on by neither)
    assert (s["anystart_solved_n"], s["anystart_doubling_solved_n"]) == (1, 1)
    assert (s["anystart_gained_seeds"], s["anystart_lost_seeds"], s["anystart_unsolved_early_n"]) == (
        "0",
        "1",
        0,
    )
    assert "anystart_split_gap" not in s.entries()  # different data from the first step: nothing to pair


def test_onestart_and_longstart_split_anystart_by_hop_count():
    v = khop_studies.ONESTART
    assert v.settings() == {**khop_studies.ANYSTART.settings(), "starts": "one"} and v.trained(4) == (1, 2, 4)
    assert (
        v.over is khop_studies.DOUBLING
        and v.base_runs(3000).keys() == khop_studies.ANYSTART.base_runs(3000).keys()
    )
    one, any_ = (
        khop_studies.variant_members("quick", v),
        khop_studies.variant_members("quick", khop_studies.ANYSTART),
    )
    assert all(dataclasses.replace(e, starts="any") == any_[n] for n, e in one.items())
    longer, dbl = (
        khop_studies.variant_members("quick", khop_studies.LONGSTART),
        khop_studies.variant_members("quick", khop_studies.DOUBLING),
    )
    assert all(dataclasses.replace(e, starts="first") == dbl[n] for n, e in longer.items())
    assert khop_studies.LONGSTART.settings() == {**khop_studies.ANYSTART.settings(), "starts": "longer"}


def test_move_medians_read_the_per_seed_entries_of_a_move_summary():
    from companion import report

    entries = {}
    for s, (v2, ans, walk, w2) in enumerate(
        [(0.2, 0.1, 0.3, 1.0), (0.9, 0.8, 0.95, 0.97), (0.5, 0.4, 0.1, 0.2)]
    ):
        entries |= {
            f"x{s}_step": (400, ""),
            f"x{s}_v2": (v2, ""),
            f"x{s}_answers_v2": (ans, ""),
            f"x{s}_walk": (walk, ""),
            f"x{s}_h2_walk": (w2, ""),
        }
    entries |= {"x_walk2_n": (2, ""), "x_walk_kept_n": (1, "")}
    m = khop_starts.move_medians(report.Summary(entries), "x")
    assert (m["x_v2_med"], m["x_v2_lo"], m["x_v2_hi"]) == (0.5, 0.2, 0.9)
    assert (m["x_answers_v2_med"], m["x_walk_med"], m["x_h2_walk_med"], m["x_h2_walk_lo"]) == (
        0.4,
        0.3,
        0.97,
        0.2,
    )
    rows = khop_starts.move_compare_rows({"a study": (report.Summary(entries), "x")})
    assert rows == [["a study", 2, 1, "0.50 (0.20-0.90)", "0.40 (0.10-0.80)"]]
    assert len(rows[0]) == len(khop_starts.MOVE_COMPARE_HEADER)
    with pytest.raises(ValueError, match="prefix 'y': no seed's entries"):
        khop_starts.move_medians(report.Summary(entries), "y")


def test_stage_gap_compares_two_studies_until_either_trains_past_a_stage():
    a = _fake(
        [[0.1] * 4, [0.95, 0.1, 0.1, 0.1], [0.99, 0.5, 0.1, 0.1], [0.99, 0.9, 0.1, 0.1]], stage=[1, 1, 2, 2]
    )
    b = _fake(
        [[0.1] * 4, [0.95, 0.1, 0.1, 0.1], [0.99, 0.3, 0.1, 0.1], [0.99, 0.95, 0.1, 0.1]], stage=[1, 1, 2, 2]
    )
    s = khop_starts.stage_gap({0: a, 3: b}, {0: b, 3: b}, 1, "x")
    assert s["x_stage_gap"] == 0 and s["x_stage_med"] == 10  # they part after the evaluation at step 10
    c = _fake(
        [[0.1] * 4, [0.9, 0.1, 0.1, 0.1], [0.99, 0.3, 0.1, 0.1], [0.99, 0.95, 0.1, 0.1]], stage=[1, 1, 2, 2]
    )
    assert khop_starts.stage_gap({0: a}, {0: c}, 1, "x")["x_stage_gap"] == pytest.approx(0.05)
    # moving at different evaluations is a difference (of stage), whatever the accuracies
    assert khop_starts.stage_gap({0: a}, {0: _fake(a["acc"], stage=[1, 1, 1, 2])}, 1, "x")["x_stage_gap"] == 1
    with pytest.raises(ValueError, match=r"seed 3 is not among the other study's seeds: allowed \[0\]"):
        khop_starts.stage_gap({3: a}, {0: b}, 1, "x")
    with pytest.raises(ValueError, match="stage"):
        khop_starts.stage_gap({0: a}, {0: b}, 0, "x")


def test_doubling_variant_counts_the_trained_hops_and_where_the_runs_part():
    every = _fake(
        [
            [0.1] * 4,
            [0.95, 0.1, 0.1, 0.1],
            [0.99, 0.95, 0.1, 0.1],
            [0.99, 0.99, 0.95, 0.1],
            [0.99, 0.99, 0.99, 0.12],
        ],
        stage=[1, 2, 2, 3, 3],
    )
    dbl = _fake(
        [
            [0.1] * 4,
            [0.95, 0.1, 0.1, 0.1],
            [0.99, 0.95, 0.1, 0.1],
            [0.99, 0.97, 0.4, 0.5],
            [0.99, 0.99, 0.3, 0.98],
        ],
        stage=[1, 2, 2, 4, 4],
    )
    flat = _fake(
        [
            [0.1] * 4,
            [0.95, 0.1, 0.1, 0.1],
            [0.99, 0.95, 0.1, 0.1],
            [0.99, 0.97, 0.2, 0.12],
            [0.99, 0.99, 0.3, 0.13],
        ],
        stage=[1, 2, 2, 4, 4],
    )
    s = khop_four_hops.variant_summary(
        {"seed 0": dbl, "seed 1": flat}, {0: every, 1: every}, variant=khop_studies.DOUBLING
    )
    # seed 0 is solved: three hops are never trained on, so they do not count
    assert (s["doubling_solved_n"], s["doubling_every_solved_n"], s["doubling_gained_seeds"]) == (1, 0, "0")
    assert s["doubling_split_gap"] == 0 and s["doubling_split_med"] == 20  # both part at the third evaluation
    # seed 0 learned four hops (at 0.9) after the split, seed 1 did not
    assert s["doubling_split_next_n"] == 1
    assert s["doubling_split_base_next_max"] == 10  # the base runs learned three hops one evaluation after it
    assert (s["doubling_split_base_next_n"], s["doubling_next_pairs_n"], s["doubling_next_lost_n"]) == (
        2,
        2,
        1,
    )
    assert s["doubling_next_lost_seeds"] == "1" and s["doubling_next_gained_n"] == 0
    assert s["doubling_untrained_min"] == s["doubling_untrained_max"] == 0.3
    assert s["doubling_unsolved_early_n"] == 0  # seed 1 learned hops 1 and 2 (three is not among its stages)
    off = _fake(
        np.asarray(dbl["acc"]) + np.array([[0.0] * 4, [0.01, 0, 0, 0]] + [[0.0] * 4] * 3), stage=dbl["stage"]
    )
    assert khop_four_hops.variant_summary({"seed 0": off}, {0: every}, variant=khop_studies.DOUBLING)[
        "doubling_split_gap"
    ] == pytest.approx(0.01)
    assert khop_studies.DOUBLING.trained(4) == (1, 2, 4) and khop_four_hops.LR.trained(4) == (1, 2, 3, 4)


def test_delay_study_members_summary_and_the_repeat():
    members = khop_stall_paths.delay_members("quick")
    assert list(members) == [
        khop_stall_paths.delay_name(d, r) for d, rs in khop_stall_paths.DELAY_GRID.items() for r in rs
    ]
    plain = khop_studies.seed_members("quick")[khop_stall_paths.DELAYED]
    for name, e in members.items():
        assert (e.last_stage_delay, e.last_stage_data) == khop_stall_paths._delay_parts(name)
        assert dataclasses.replace(e, last_stage_delay=0, last_stage_data=0) == plain
    assert khop_stall_paths.delay_name(100, 0) == "seed 0, last stage 100 steps later"
    from companion import record

    built = record.build("khop_delay", "quick", {"k": 4, "steps": 80, "eval_every": 20})
    assert {e.eval_every for e in built.values()} == {20} and {e.k for e in built.values()} == {4}
    with pytest.raises(ValueError, match="unknown run moved to its last stage later 'seed 0'"):
        khop_stall_paths._delay_parts("seed 0")

    kw = dict(
        N=4,
        k=2,
        data="cumulative",
        d=16,
        heads=2,
        steps=40,
        eval_every=5,
        n_test=64,
        batch=16,
        advance_at=0.3,
    )
    names = [khop_stall_paths.delay_name(100, r) for r in (0, 1)] + [
        khop_stall_paths.delay_name(*khop_stall_paths.DELAY_REPEATS)
    ]
    runs = {
        n: khop_probes.probe_run(
            khop.KHopExperiment(**kw, last_stage_delay=d, last_stage_data=r), progress=False
        )
        for n, (d, r) in zip(names, [(5, 0), (5, 1), (10, 0)])
    }
    s = khop_stall_paths.delay_summary(runs, level=0.5)
    assert (s["dl100_n"], s["dl200_n"], s["delay_k"], s["delay_steps"]) == (2, 1, 2, 40)
    assert s["dl100_learned_n"] == sum(np.isfinite(s[f"dl100_d{r}_hk_at"]) for r in (0, 1))
    assert s["dl100_breaks_n"] == sum(s[f"dl100_d{r}_tk_b1_prev"] < 0.5 for r in (0, 1))
    escapes = sum(
        s[f"{t}_tk_b1_prev"] < 0.5 and s[f"{t}_best_hk"] >= 0.5 for t in ("dl100_d0", "dl100_d1", "dl200_d0")
    )
    assert s["delay_path_escapes_n"] == escapes
    assert s["dl100_d0_stagek_at"] == s["dl100_d1_stagek_at"] == s["dl200_d0_stagek_at"] - 5
    assert khop_stall_paths.delay_summary(runs, level=0.5, path=1.0)["dl200_breaks_n"] == (
        s["dl200_d0_tk_b1_prev"] < 1.0
    )
    with pytest.raises(ValueError, match="path=0 is out of range"):
        khop_stall_paths.delay_summary(runs, path=0)
    rows = khop_stall_paths.delay_rows(s)
    assert [r[:2] for r in rows] == [[100, "own"], [100, 1], [200, "own"]] and len(rows[0]) == len(
        khop_stall_paths.delay_header(2)
    )
    assert (
        rows[1][2:]
        == khop_stall_paths.reseed_rows(
            {**{k.replace("dl100", "rs100"): v for k, v in s.items()}, "reseed_k": 2, "reseed_n": 1},
            names=[khop_stall_paths.reseed_name("seed 0", 1)],
        )[0][2:]
    )

    own = khop.run(khop.KHopExperiment(**kw), progress=False)
    same = {key: runs[names[-1]][key][::2] for key in ("step", "acc", "stage")}  # evaluated every 10 steps
    vs = khop_stall_paths.delay_vs_plain(runs, {khop_stall_paths.DELAYED: own, khop_members.EXPLORED: same})
    assert vs["delay_gap"] == 0 and vs["delay_repeat_gap"] == 0 and vs["delay_repeat_n"] == len(same["step"])
    assert vs["delay_repeat_first"] == math.inf
    assert vs["delay_moves_rs100"] == ", ".join(f"{m:.0f}" for m in khop_stall_paths.stage_moves(own))
    vs = khop_stall_paths.delay_vs_plain(
        runs, {khop_stall_paths.DELAYED: own, khop_members.EXPLORED: own}
    )  # not the same run
    a, b = runs[names[-1]], own
    differ = [
        t
        for i, t in enumerate(b["step"])
        if not np.array_equal(a["acc"][i], b["acc"][i]) or a["stage"][i] != b["stage"][i]
    ]
    assert vs["delay_repeat_gap"] > 0 and vs["delay_repeat_first"] == differ[0]
    assert khop_stall_paths.stage_moves(own) == [khop_curves.last_stage_at(own)]  # k = 2: one move
    longer = khop.run(dataclasses.replace(khop.KHopExperiment(**kw), steps=60), progress=False)
    c = khop_stall_paths.repeat_curves(runs, {khop_stall_paths.DELAYED: own, khop_members.EXPLORED: longer})
    assert list(c["acc"]) == [khop_stall_paths.DELAYED, names[-1], khop_members.EXPLORED]
    assert c["step"][khop_members.EXPLORED][-1] == 40 and np.array_equal(
        c["acc"][khop_members.EXPLORED], longer["acc"][:9]
    )
    with pytest.raises(ValueError, match="missing: allowed the delay study's runs"):
        khop_stall_paths.repeat_curves(runs, {khop_stall_paths.DELAYED: own})
    with pytest.raises(ValueError, match="not among the runs with their own data"):
        khop_stall_paths.delay_vs_plain(runs, {khop_stall_paths.DELAYED: own})
    with pytest.raises(ValueError, match="is missing: allowed runs of delay_members that include it"):
        khop_stall_paths.delay_vs_plain(
            {n: r for n, r in runs.items() if n != names[-1]},
            {khop_stall_paths.DELAYED: own, khop_members.EXPLORED: own},
        )


def test_delay_by_move_counts_the_same_streams_of_every_state():
    reseeds = _reseed_short_summary({"rs100": [0.13, 0.13, 0.89, 0.27], "rs250": [0.89, 0.97, 1.0, 0.98]})
    reseeds |= {
        f"{t}_d{r}_{key}": v
        for t in ("rs100", "rs250")
        for r in range(1, 5)
        for key, v in (
            ("stagek_at", 2800.0 if t == "rs100" else 3000.0),
            ("hk_at", math.inf if t == "rs100" or r == 1 else 6750.0),
        )
    }
    delays = {
        f"dl{d}_d{r}_{key}": v
        for d in (100, 400)
        for r in range(1, 5)
        for key, v in (
            ("stagek_at", 2800.0 + d),
            ("hk_at", 7000.0 if r > d // 100 else math.inf),
            ("tk_b1_prev", 0.2 if r <= d // 200 else 0.95),
        )
    }
    s = khop_stall_paths.delay_by_move(delays, reseeds)
    keys = ("0", "100", "400", "e250")  # delays, then seed 0 advancing every 250 steps (another run)
    assert [s[f"dmove{d}_at"] for d in keys] == [2800, 2900, 3200, 3000]
    assert [s[f"dmove{d}_breaks_n"] for d in keys] == [3, 0, 2, 0]
    assert [s[f"dmove{d}_learned_n"] for d in keys] == [0, 3, 0, 3]
    rows = khop_stall_paths.delay_move_rows(s)
    assert [r[0] for r in rows] == [f"seed 0, last stage {d} steps later" for d in (0, 100, 400)] + [
        khop_members.EXPLORED
    ]
    assert rows[2][1:] == [3200, "2 of 4", "0 of 4"]
    assert len(rows[0]) == len(khop_stall_paths.DELAY_MOVE_HEADER)
    with pytest.raises(ValueError, match="missing: allowed summaries with every stream"):
        khop_stall_paths.delay_by_move({k: v for k, v in delays.items() if "dl400_d4" not in k}, reseeds)


def test_kept_states_are_the_states_of_shorter_runs_and_the_onset_summary(monkeypatch):
    kw = dict(
        N=4,
        k=3,
        data="cumulative",
        d=16,
        heads=2,
        steps=160,  # the move: step 70 (numpy sampler), 120 (counter)
        eval_every=5,
        n_test=64,
        batch=16,
        advance_at=0.3,
    )
    exp = khop.KHopExperiment(**kw)
    r = khop.train_run(exp, False, keep=(0, 3, 10))
    plain = khop.run(exp, progress=False, use_cache=False)
    assert np.array_equal(r["acc"], plain["acc"]) and "kept" not in plain  # keeping changes nothing
    at = int(khop_curves.last_stage_at(r))
    assert sorted(r["kept"]) == [0, 3, 10]
    for a, state in r["kept"].items():
        short = khop.run(dataclasses.replace(exp, steps=at + a), progress=False, use_cache=False)["state"]
        assert all(torch.equal(state[key], short[key]) for key in short)
    assert any(not torch.equal(r["kept"][3][key], r["kept"][10][key]) for key in r["state"])
    last = khop.train_run(exp, False, keep=(kw["steps"] - at,))["kept"][kw["steps"] - at]  # the run's own end
    assert all(torch.equal(last[key], plain["state"][key]) for key in last)

    members = khop_onset.onset_members("quick")
    assert list(members) == list(khop_onset.ONSET_RUNS)
    every = khop_studies.seed_members("quick") | khop_stall_paths.reseed_members("quick")
    assert all(members[n] == every[n] for n in members)
    monkeypatch.setattr(khop_onset, "ONSET_AFTER", (0, 3, 10))
    runs = {"seed 0": {**r, "exp": exp}, khop_members.EXPLORED: {**r, "exp": exp}}
    s = khop_onset.onset_summary(runs)
    for a in (0, 3, 10):
        res = khop_probes.table_interference(exp, r["kept"][a])
        assert (
            s[f"on100_a{a}_tk_b1_prev"] == res["prev"][1]
            and s[f"on250_a{a}_tk_all_answer"] == res["answer"][-1]
        )
    breaks = [a for a in (0, 3, 10) if s[f"on100_a{a}_tk_b1_prev"] < 0.5]
    assert s["on100_onset"] == (breaks[0] if breaks else math.inf)
    assert khop_onset.onset_summary(runs, path=1.0)["on100_onset"] == next(
        (a for a in (0, 3, 10) if s[f"on100_a{a}_tk_b1_prev"] < 1.0), math.inf
    )
    assert s["on100_stagek_at"] == at and s["onset_k"] == 3
    assert s["on100_end_tk_b1_prev"] == khop_probes.table_interference(exp, r["state"])["prev"][1]
    on_path = s["on100_end_tk_b1_prev"] < 0.5  # both runs are the same run here
    assert (s["onset_path_n"], s["onset_spared_n"]) == ((2, 0) if on_path else (0, 2))
    lowest = min(s[f"on100_a{a}_tk_b1_prev"] for a in (0, 3, 10))
    assert s["onset_path_latest"] == s["on100_onset"] if on_path else math.isnan(s["onset_path_latest"])
    assert math.isnan(s["onset_spared_min"]) if on_path else s["onset_spared_min"] == lowest

    fig = khop_stall_figures.onset_lines(s)
    assert len(fig.axes[0].lines) == len(fig.axes[1].lines) == 2  # the two runs given
    assert list(fig.axes[0].lines[0].get_ydata()) == [s[f"on100_a{a}_tk_b1_prev"] for a in (0, 3, 10)]
    rows = khop_onset.onset_rows(s)
    assert (
        len(rows) == 6
        and len(rows[0]) == 2 + 3
        and rows[0][2:] == [s[f"on100_a{a}_tk_b1_prev"] for a in (0, 3, 10)]
    )
    entry = {
        f"{t}{key[8:]}": v for t in ("n100", "n250") for key, v in s.items() if key.startswith("on100_a0_tk")
    }
    g = khop_onset.onset_vs_entry(s, entry)
    assert g["onset_entry_gap"] == 0 and g["onset_entry_n"] == 2 * sum(k.startswith("on100_a0_tk") for k in s)
    entry["n250_tk_b1_prev"] += 0.25
    assert khop_onset.onset_vs_entry(s, entry)["onset_entry_gap"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="missing from the onset or the stage-entry summary"):
        khop_onset.onset_vs_entry({k: v for k, v in s.items() if not k.startswith("on250")}, entry)
    with pytest.raises(ValueError, match="unknown run read along its last stage 'seed 1'"):
        khop_onset.onset_summary({"seed 1": runs["seed 0"]})
    monkeypatch.setattr(khop_onset, "ONSET_AFTER", (0, 3, 10, 1000))
    with pytest.raises(ValueError, match="has no state after \\[1000\\] steps on its last stage"):
        khop_onset.onset_summary(runs)


def test_the_interval_study_keeps_each_members_interval():
    from companion import record

    m = record.build("khop_interval", "quick", khop_studies.INTERVAL_SETTINGS)
    assert {name: (e.seed, e.eval_every, e.steps, e.layers, e.data) for name, e in m.items()} == {
        khop_four_hops.interval_name(s, every): (s, every, 10000, 4, "cumulative")
        for every, seeds in khop_four_hops.INTERVAL_SEEDS.items()
        for s in seeds
    }
    assert khop_members.member_overrides("seed 3, every 250", {"steps": 10, "eval_every": 100}) == {
        "steps": 10
    }
    assert khop_members.member_overrides("seed 3", {"steps": 10, "eval_every": 100}) == {
        "steps": 10,
        "eval_every": 100,
    }
    assert (
        khop_four_hops.interval_name(0, khop_members.EXPLORED_EVERY) == khop_members.EXPLORED
    )  # the seed study's run joins the pool
    # every seed of the pool is run at both intervals, once
    pooled = (
        set(m) | {khop_four_hops.interval_name(s, 100) for s in khop_studies.SEEDS} | {khop_members.EXPLORED}
    )
    assert len(pooled) == len(m) + len(khop_studies.SEEDS) + 1
    assert pooled == {khop_four_hops.interval_name(s, e) for s in range(7) for e in khop_four_hops.INTERVALS}


def test_interval_summary_pools_and_counts_the_seeds():
    solved = _fake([[0.1, 0.1], [0.95, 0.1], [0.99, 0.98]], stage=[1, 2, 2])
    # learns after the cut
    stalled = _fake([[0.1, 0.1], [0.95, 0.1], [0.99, 0.12], [0.99, 0.99]], stage=[1, 2, 2, 2])
    early = _fake([[0.1, 0.1], [0.3, 0.1], [0.5, 0.12]], stage=[1, 1, 1])
    earlier = {
        "seed 0": stalled,
        "seed 1": _fake([[0.1, 0.1], [0.95, 0.1], [0.99, 0.98], [1, 1]], stage=[1, 2, 2, 2]),
        khop_members.EXPLORED: _fake([[0.1, 0.1], [0.9, 0.1], [0.99, 0.99], [1, 1]], stage=[1, 2, 2, 2]),
    }
    runs = {"seed 1, every 250": solved, "seed 3, every 100": early, "seed 3, every 250": solved}
    pool = khop_four_hops.interval_pool(runs, earlier)
    assert {name: int(r["step"][-1]) for name, r in pool.items()} == {
        "seed 0, every 100": 20,
        "seed 1, every 100": 20,
        khop_members.EXPLORED: 20,
        **{n: 20 for n in runs},
    }
    s = khop_four_hops.interval_summary(runs, earlier)
    assert (s["int_n100"], s["int_solved100_n"], s["int_n250"], s["int_solved250_n"]) == (3, 1, 3, 3)
    assert s["int_solved100"] == pytest.approx(1 / 3) and s["int_pairs_n"] == 3
    assert (s["int_only_slow_n"], s["int_only_fast_n"], s["int_gap_n"]) == (2, 0, 2)
    assert (s["int_only_slow_seeds"], s["int_only_fast_seeds"], s["int_solved100_seeds"]) == (
        "0, 3",
        "none",
        "1",
    )
    assert (s["int_unsolved_n"], s["int_unsolved_early_n"]) == (2, 1)
    # seed 3 every 100 never moves to the last stage: no time there
    assert (s["int_wait_max"], s["int_unsolved_time_min"], s["int_unsolved_last_max"]) == (20, 0, 0.12)
    assert s["int_unsolved_flat_n"] == 2
    assert s["int_move100_med"] == 0 and s["int_wait250_med"] == 20 and s["int_steps"] == 20
    rows = khop_four_hops.interval_rows(pool)
    assert [r[0] for r in rows] == [0, 1, 3] and all(
        len(r) == len(khop_four_hops.INTERVAL_HEADER) for r in rows
    )
    assert rows[2][1] == "-, -" and rows[0][6].endswith("0.99")
    assert khop_four_hops.interval_rows({"seed 3, every 100": early})[0][4:] == ["(not run)"] * 3
    with pytest.raises(ValueError, match="steps=30 is beyond"):
        khop_studies.truncated(solved, 30)
    import matplotlib.pyplot as plt

    fig = khop_four_hops_figures.interval_lines(pool, 0.125)
    # every 100: three curves, dots at the moves of the two that move (seed 3 never does), chance
    assert len(fig.axes) == 2 and [len(ax.lines) for ax in fig.axes] == [3 + 2 + 1, 3 + 3 + 1]
    plt.close(fig)


def test_the_long_interval_runs_are_the_unsolved_seeds_for_twice_the_budget():
    from companion import record

    m = record.build("khop_interval_long", "quick", khop_studies.INTERVAL_LONG_SETTINGS)
    short = record.build("khop_interval", "quick", khop_studies.INTERVAL_SETTINGS)
    assert list(m) == [khop_four_hops.interval_name(s, 100) for s in (3, 4, 5, 6)]
    for name, e in m.items():
        assert e.steps == 20000 and dataclasses.replace(e, steps=short[name].steps) == short[name]
    solved = _fake([[0.1, 0.1], [0.95, 0.1], [0.99, 0.98]])
    stalled = _fake([[0.1, 0.1], [0.95, 0.1], [0.99, 0.12]])
    runs = {"seed 3, every 100": solved, "seed 4, every 100": stalled, "seed 5, every 100": solved}
    s = khop_four_hops.interval_long_summary(runs, followed={"seeds": (3, 4), "flat": (3,)})
    assert (s["ilong_n"], s["ilong_followed"], s["ilong_solved_n"], s["ilong_flat_solved_n"]) == (
        3,
        "3, 4",
        1,
        1,
    )
    assert s["ilong_steps"] == 20 and s["ilong_flat"] == "3"
    assert s["ilong_s3_hk_at"] == 20 and math.isinf(s["ilong_s4_hk_at"]) and s["ilong_s4_final"] == 0.12
    assert s["ilong_gain_max"] == pytest.approx(0.98 - 0.1)  # the middle evaluation is step 10
    with pytest.raises(ValueError, match="seeds 6 are followed up but not among the runs"):
        khop_four_hops.interval_long_summary(runs, followed={"seeds": (3, 6), "flat": ()})

    # every 250: the runs the rule picks from the interval study's (an unsolved run not flat at chance: seed 6;
    # one that moved late: seed 3; one flat, long on its last stage: seed 4; one solved, seed 2, the slowest wait)
    def run(final, moved):
        stage = [1] + [1 if t < moved else 2 for t in (100, 200, 300)]
        return {"acc": [[0.1, 0.1]] * 3 + [[1.0, final]], "stage": stage, "step": [0, 100, 200, 300], "N": 8}

    pool = {
        "seed 2, every 250": {**run(1.0, 100), "acc": [[0.1, 0.1], [1, 0.1], [1, 0.1], [1.0, 1.0]]},
        "seed 3, every 250": run(0.1, 300),
        "seed 4, every 250": run(0.1, 100),
        "seed 6, every 250": run(0.5, 100),
    }
    assert khop_four_hops.followed_up(250, pool) == {"seeds": (3, 6), "flat": (3,)}
    m250 = record.experiment("khop_interval_long250").members
    assert {n: (e.seed, e.eval_every) for n, e in m250(pool=pool).items()} == {
        "seed 3, every 250": (3, 250),
        "seed 6, every 250": (6, 250),
    }
    with pytest.raises(ValueError, match="no unsolved run of the interval study has its budget in doubt"):
        m250(pool={n: pool[n] for n in ("seed 2, every 250", "seed 4, every 250")})
    with pytest.raises(ValueError, match="allowed 'quick'"):
        m250("full")
    s = record.experiment("khop_interval_long250").summary(
        {"seed 3, every 250": stalled, "seed 6, every 250": solved}, followed={"seeds": (3, 6), "flat": (3,)}
    )
    assert (s["il250_n"], s["il250_solved_n"], s["il250_flat_solved_n"], s["il250_s6_final"]) == (
        2,
        1,
        0,
        0.98,
    )


def _study_texts(sampler: str) -> dict:
    """book/khop_four_hops's sentences that follow the runs, from the recordings a build under ``sampler`` reads."""

    def summary(settings, experiment):
        rec = khop_studies.recorded(settings, experiment=experiment, sampler=sampler)
        return rec, khop_studies.recorded_runs(rec)[0], khop_studies.recorded_summary(rec, prefix="")

    _, seed_runs, seeds = summary(khop_studies.SEED_SETTINGS, "khop_seeds")
    _, int_runs, interval = summary(khop_studies.INTERVAL_SETTINGS, "khop_interval")
    pool = khop_four_hops.interval_pool(int_runs, seed_runs)
    _, long_runs, ilong = summary(khop_studies.INTERVAL_LONG_SETTINGS, "khop_interval_long")
    _, l250_runs, il250 = summary(khop_studies.INTERVAL_LONG_SETTINGS, "khop_interval_long250")
    _, wide_runs, wide = summary(khop_studies.WIDE.settings(), "khop_wide")
    return {
        **khop_four_hops_text.seeds_texts(seeds, seed_runs),
        **khop_four_hops_text.interval_texts(interval),
        **khop_four_hops_text.long_texts(ilong, long_runs, pool, "ilong_"),
        **khop_four_hops_text.long_texts(il250, l250_runs, pool, "il250_"),
        **khop_four_hops_text.variant_texts(wide, khop_studies.seeded(wide_runs), "wide"),
    }


def test_the_four_hop_chapters_sentences_follow_the_runs_of_either_sampler():
    """The sentences book/khop_four_hops glues (issue 54's switch): under the numpy generators they say what the
    chapter said of those runs before the words followed them; under counter what its runs do instead (the
    exploratory run not reproduced, seed 3 flat at 10000 steps and learning all the same, seed 5 every 250
    followed up and not learning, no seed solved at d = 64)."""
    with config.using_sampler("numpy"):
        numpy = _study_texts("numpy")
    assert numpy["seeds_alt_text"].startswith(
        "The same seed advancing every 250 steps moves to its last stage at step 3000 and learns four hops at step "
        "6250: the exploratory run, reproduced. The two runs of seed 0 differ only"
    )
    assert numpy["seeds_s0_text"].endswith(
        "does not help, and it ends at chance on four hops (lowest final accuracy 0.13)."
    )
    assert numpy["int_predictions_text"] == "Four of the five predictions are refuted"
    assert numpy["int_only_text"] == (
        "Seed 0 learns four hops only every 250 steps, and seed 1 does only every 100."
    )
    assert numpy["int_early_outcome"] == "holds"
    assert numpy["ilong_text"].startswith(
        "None of the four runs it follows up (seeds 3, 4, 5, 6, unsolved at 10000"
    )
    assert "stay unsolved: holds." in numpy["ilong_text"] and numpy["ilong_unfollowed_text"] == ""
    assert numpy["il250_text"].startswith("Both predictions hold. Seed 6 learns four hops at step 13000")
    assert "seed 3 moved to its last stage at step 5000" in numpy["il250_doubt_text"]
    assert numpy["wide_early_text"].startswith("The one failure before the last stage (seed 6)")
    with config.using_sampler("counter"):
        counter = _study_texts("counter")
    assert (
        "never reaches its last stage" in counter["seeds_alt_text"]
        and "not reproduced" in counter["seeds_alt_text"]
    )
    assert counter["seeds_s0_text"].endswith("twice the budget helps, and it learns four hops at step 11700.")
    assert (
        counter["int_only_text"]
        == "No seed learns four hops only every 250 steps, and seed 4 does only every 100."
    )
    assert counter["int_early_outcome"] == "refuted"
    assert "seed 3 learns all the same" in counter["ilong_text"]
    assert counter["ilong_unfollowed_text"].startswith(
        "The recording also holds seed 4, solved within 10000 steps"
    )
    assert "Seed 5 does not learn four hops" in counter["il250_text"] and "  " not in counter["il250_text"]
    assert counter["il250_doubt_text"] == (
        "The slowest solved run (at either interval) needed 6400 steps on its last stage; seed 5 ended at 0.251 on "
        "four hops, above twice chance (0.250)."
    )
    assert counter["wide_solved_note"] == "" and counter["wide_only_text"].startswith("Seeds 1, 4 are lost")


def test_the_variant_studies_are_the_interval_seeds_with_one_setting_changed():
    from companion import record

    narrow = record.build("khop_interval", "quick", khop_studies.INTERVAL_SETTINGS)
    for variant, name, changed in (
        (khop_studies.WIDE, "khop_wide", {"d": 64}),
        (khop_four_hops.LR, "khop_lr", {"lr": 1e-3}),
        (khop_studies.DOUBLING, "khop_doubling", {"levels": "doubling"}),
    ):
        m = record.build(name, "quick", variant.settings())
        assert variant.settings()[variant.field] == changed[variant.field]
        assert list(m) == [khop_studies.seed_name(s) for s in range(7)]
        for s, e in enumerate(m.values()):
            assert (e.heads, e.seed, e.steps, e.eval_every, e.k, e.depth) == (4, s, variant.steps, 100, 4, 4)
            assert getattr(e, variant.field) == changed[variant.field]
            if s >= 3:  # the same run as the interval study's but for the changed setting and the budget
                base = dataclasses.replace(narrow[khop_four_hops.interval_name(s, 100)], steps=variant.steps)
                assert dataclasses.replace(e, **{variant.field: getattr(base, variant.field)}) == base
    assert (
        khop_studies.WIDE.steps == khop_studies.DOUBLING.steps == 10000 and khop_four_hops.LR.steps == 15000
    )
    assert khop_studies.variant_members("full", variant=khop_studies.DOUBLING)["seed 0"].stages == (
        1,
        2,
        4,
        8,
    )
    assert khop_studies.variant_members("full")["seed 0"].d == 2 * khop_members.SIZES["full"]["d"]
    assert khop_studies.variant_members("full", variant=khop_four_hops.LR)["seed 0"].lr == pytest.approx(1e-3)


def test_a_variant_study_refuses_a_recording_it_cannot_compare_before_any_run(tmp_path, monkeypatch):
    import dataclasses as dc

    from companion import record

    def no_run(exp, device=None):
        raise AssertionError("record ran before its precheck")

    real = record._registry()
    monkeypatch.setattr(
        record, "_registry", lambda: {**real, "khop_doubling": dc.replace(real["khop_doubling"], run=no_run)}
    )
    settings = khop_studies.DOUBLING.settings()
    with pytest.raises(ValueError, match="khop_doubling with profile 'full': allowed 'quick'"):
        record.record("khop_doubling", "full", settings, out_dir=tmp_path)
    with pytest.raises(ValueError, match=r"run 'seed 0' with \{'k': 2\}: allowed the runs of settings"):
        record.record("khop_doubling", "quick", {**settings, "k": 2}, out_dir=tmp_path)
    with pytest.raises(ValueError, match=r"run 'seed 0' with \{'levels': 'every'\}"):
        record.record("khop_doubling", "quick", {**settings, "levels": "every"}, out_dir=tmp_path)
    with pytest.raises(ValueError, match="steps=17000, every=100: allowed at most 16000 steps"):
        record.record("khop_doubling", "quick", {**settings, "steps": 17000}, out_dir=tmp_path)
    # the study itself
    khop_studies.DOUBLING.check_recording("quick", record.build("khop_doubling", "quick", settings))
    khop_four_hops.LR.check_recording("quick", record.build("khop_lr", "quick", khop_four_hops.LR.settings()))
    any_settings = khop_studies.ANYSTART.settings()

    def anystart(**changed):
        khop_studies.ANYSTART.check_recording(
            "quick", record.build("khop_anystart", "quick", {**any_settings, **changed})
        )

    anystart()  # the study itself
    with pytest.raises(ValueError, match=r"run 'seed 0' with \{'starts': 'first'\}"):
        anystart(starts="first")
    with pytest.raises(ValueError, match="allowed at most 10000 "):
        anystart(steps=15000)
    assert not list(tmp_path.iterdir())


def test_base_runs_cut_the_shortest_recording_that_is_long_enough():
    """Seeds 0-2 come from the seed study (16000 steps), seeds 3-6 from the interval study (10000) or its longer
    runs (20000); cutting a longer run gives the shorter one (the exact-cut rows check the same)."""
    short, long = khop_studies.base_runs(10000), khop_studies.base_runs(15000)
    assert sorted(short) == sorted(long) == list(range(7))
    assert {int(r["step"][-1]) for r in [*short.values(), *long.values()]} == {10000, 15000}
    for s in range(7):
        cut = khop_studies.truncated(long[s], 10000)
        assert np.array_equal(cut["acc"], short[s]["acc"]) and np.array_equal(cut["stage"], short[s]["stage"])
    assert len(khop_studies.base_runs(10000, every=250)) == 7
    with pytest.raises(
        ValueError, match=r"steps=17000, every=100: allowed at most 16000 steps \(the longest"
    ):
        khop_studies.base_runs(17000)


def test_variant_summary_compares_the_settings_seed_by_seed():
    solved = _fake([[0.1, 0.1], [0.95, 0.1], [0.99, 0.98]], stage=[1, 2, 2])
    stalled = _fake([[0.1, 0.1], [0.95, 0.1], [0.99, 0.12]], stage=[1, 2, 2])
    early = _fake([[0.1, 0.1], [0.3, 0.1], [0.5, 0.3]], stage=[1, 1, 1])
    wide = {"seed 0": solved, "seed 1": early, "seed 2": solved}
    narrow = {0: stalled, 1: solved, 2: solved, 3: stalled}
    s = khop_four_hops.variant_summary(wide, narrow)
    assert (s["wide_n"], s["wide_solved_n"], s["wide_solved_seeds"], s["wide_narrow_solved_n"]) == (
        3,
        2,
        "0, 2",
        2,
    )
    assert s["wide_solved"] == pytest.approx(2 / 3) and s["wide_narrow_n"] == 4 and s["wide_pairs_n"] == 3
    assert (s["wide_gained_n"], s["wide_gained_seeds"], s["wide_lost_n"], s["wide_lost_seeds"]) == (
        1,
        "0",
        1,
        "1",
    )
    assert s["wide_gap_n"] == 0  # over seeds 0-2: two solved at each width
    assert (s["wide_unsolved_n"], s["wide_unsolved_early_n"], s["wide_unsolved_time_min"]) == (1, 1, 0)
    assert s["wide_unsolved_last_max"] == 0.3 and s["wide_unsolved_flat_n"] == 0
    with pytest.raises(ValueError, match=r"budgets \[20, 30\]"):
        khop_four_hops.variant_summary(wide, {0: _fake([[0.1, 0.1]] * 4, stage=[1] * 4)})
    s = khop_four_hops.variant_summary(
        wide, narrow, variant=khop_four_hops.LR
    )  # the same numbers under the variant's own names
    assert (s["lr_solved_n"], s["lr_base_solved_n"], s["lr_gained_seeds"], s["lr_lost_seeds"]) == (
        2,
        2,
        "0",
        "1",
    )
    assert "a third of the step size" in s.meaning["lr_solved_n"]
    t = khop_four_hops.sign_test(
        s, "lr_", "lost", "gained"
    )  # one seed each way of three: no evidence either way
    assert (t["lr_sign_p"], t["lr_sign_p_best"]) == (1.0, 0.25) and "lr_lost_n = 1" in t.meaning["lr_sign_p"]
    rows = khop_studies.paired_rows([khop_studies.seeded(wide), narrow])
    assert [r[0] for r in rows] == [0, 1, 2, 3] and rows[3][1:4] == ["(not run)"] * 3
    # seed 1 never moves; seed 0 at its first evaluation
    assert rows[1][1:3] == ["-, -", "-"] and rows[0][2] == "0"
    assert all(len(r) == len(khop_studies.paired_header(["wide", "narrow"])) for r in rows)
    import matplotlib.pyplot as plt

    fig = khop_figures.seed_lines({"d = 64": khop_studies.seeded(wide), "d = 32": narrow}, 0.125)
    # wide: three curves, dots at the two moves (seed 1 never moves), chance; narrow: four curves, four dots, chance
    assert [len(ax.lines) for ax in fig.axes] == [3 + 2 + 1, 4 + 4 + 1]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [f"seed {s}" for s in range(4)]
    plt.close(fig)


def test_sign_test_needs_six_of_seven_seeds_one_way():
    def p(a, b, n=7):
        return khop_four_hops.sign_test({"x_a_n": a, "x_b_n": b, "x_pairs_n": n}, "x_", "a", "b")

    assert p(0, 6)["x_sign_p"] == pytest.approx(2 / 64) and p(0, 5)["x_sign_p"] == pytest.approx(2 / 32)
    assert p(1, 6)["x_sign_p"] == pytest.approx(2 * 8 / 128) and p(6, 1)["x_sign_p"] == p(1, 6)["x_sign_p"]
    assert p(0, 0)["x_sign_p"] == 1.0 and p(0, 0)["x_sign_p_best"] == pytest.approx(2 / 128)


def test_start_accuracy_tests_every_start_and_hop_count_that_fits():
    e = khop.KHopExperiment(
        N=4,
        k=4,
        data="cumulative",
        d=16,
        heads=2,
        depth=2,
        steps=20,
        eval_every=10,
        n_test=64,
        batch=16,
        levels="doubling",
        starts="any",
    )
    r = khop.run(e, progress=False, use_cache=False)
    acc = khop_starts.start_accuracy(e, r["state"], n=256)
    fits = np.array([[s + h <= 4 for s in range(4)] for h in range(1, 5)])
    assert np.array_equal(np.isfinite(acc), fits) and ((acc[fits] >= 0) & (acc[fits] <= 1)).all()
    # the cells from table 1 are the test sets' kind of example: the same model, other draws, about the same
    assert np.abs(acc[:, 0] - r["acc"][-1]).max() < 0.2
    assert np.array_equal(
        acc, khop_starts.start_accuracy(e, r["state"], n=256), equal_nan=True
    )  # its own stream
    with pytest.raises(ValueError, match="n"):
        khop_starts.start_accuracy(e, r["state"], n=0)
    fake = np.array(
        [
            [1.0, 0.95, 0.97, 0.99],
            [0.98, 0.96, 0.92, np.nan],
            [0.1, 0.2, np.nan, np.nan],
            [0.13, np.nan, np.nan, np.nan],
        ]
    )
    s = khop_starts.start_summary(fake, dataclasses.replace(e, N=8, seed=3))
    assert (s["start_h1_min"], s["start_h2_min"], s["start_k"], s["start_untrained_max"]) == (
        0.95,
        0.92,
        0.13,
        0.2,
    )
    assert "start_h4_min" not in s.entries()
    assert (s["start_chance"], s["start_seed"], s["start_steps"]) == (0.125, 3, 20)
    assert np.isnan(
        khop_starts.start_summary(fake, dataclasses.replace(e, levels="every"))["start_untrained_max"]
    )
    header, rows = khop_starts.start_rows(fake)
    assert header[1] == "from table 1" and rows[2] == [3, "0.10", "0.20", "", ""] and len(rows) == 4
    m = khop_studies.ANYSTART.member(3, 500)
    assert (m.seed, m.steps, m.starts, m.levels, m.k, m.depth) == (3, 500, "any", "doubling", 4, 4)
    from companion import record

    assert (
        dataclasses.replace(m, steps=10000)
        == record.build("khop_anystart", "quick", khop_studies.ANYSTART.settings())["seed 3"]
    )  # the recorded run's configuration


def test_a_probe_study_probes_its_own_hop_counts_and_the_answers_sources():
    r = _probe_run(steps=40)
    res = khop_probes.hop_probe(r["exp"], r["state"])
    rng = np.random.default_rng(khop.config.seed_streams(0, ["hop-probe"])["hop-probe"])
    task, model = r["exp"].task(), r["exp"].model()
    model.load_state_dict(r["state"])
    task.sample(rng, np.full(4096, 3))  # the probe's training examples come first, then its test examples
    bt = task.sample(rng, np.full(2048, 3))
    with torch.no_grad():
        pred = model(torch.as_tensor(bt.tokens), torch.as_tensor(bt.mask)).argmax(1).numpy()
    x, chain = bt.tokens[:, 0], bt.chain
    assert res["answers"].shape == (4,) and res["answers"][0] == (pred == x).mean()
    assert res["answers"][3] == res["acc"] and res["answers"][1] == (pred == chain[:, 0]).mean()
    study = khop_probes.ProbeStudy({"seed 0": "q"}, "qprobe", hops=(3, 1))
    assert (
        study.probed(3) == (3, 1)
        and khop_probes.PROBE.probed(3) == (3, 2)
        and khop_probes.PROBE.probed(1) == (1,)
    )
    assert (study.prefix("q", 3, 3), study.prefix("q", 1, 3), khop_probes.PROBE.prefix("p", 2, 3)) == (
        "q",
        "q_h1",
        "p_h2",
    )
    with pytest.raises(ValueError, match="hops probed"):
        khop_probes.ProbeStudy({"seed 0": "q"}, "qprobe", hops=(4,)).probed(3)
    s = khop_probes.probe_summary({"seed 0": r}, study=study)
    assert s["q_answers_v3"] == res["acc"] and s["q_answers_v0"] == res["answers"][0]
    assert "q_h1_probe_l2_v1" in s and "q_h2_probe_l2_v1" not in s and s["q_h1_answers_v1"] == s["q_h1_acc"]
    assert khop_probes.probe_rows(s, hops=1, study=study)[0][2:] == [s["q_h1_probe_l0_v1"]]
    with pytest.raises(ValueError, match="hops"):
        khop_probes.probe_rows(s, hops=2, study=study)
    assert list(khop_starts.ANYSTART_PROBE.tags) == [
        khop_starts.START_PROBED
    ] and khop_starts.ANYSTART_PROBE.probed(4) == (4, 2)
    header, rows = khop_starts.answers_rows(s, study)
    assert header[:3] == ["run", "hops", "answers x"] and len(header) == 6
    assert rows[0] == ["seed 0", 3, *(s[f"q_answers_v{j}"] for j in range(4))]
    assert rows[1] == ["seed 0", 1, s["q_h1_answers_v0"], s["q_h1_answers_v1"], "", ""]


def test_a_run_stopped_at_its_move_has_trained_no_last_stage_step():
    """A curriculum run whose budget ends at the evaluation where it moves to k hops is the longer run's state there
    (the anystart probe at the move reads it): it ends at the move's evaluation and trained on no k-hop batch."""
    e = khop.KHopExperiment(
        N=4,
        k=4,
        data="cumulative",
        d=16,
        heads=2,
        depth=2,
        steps=300,
        eval_every=20,
        n_test=64,
        batch=16,
        levels="doubling",
        starts="any",
        advance_at=0.3,
    )
    long = khop.train_run(e, progress=False, keep=(0,))
    move = int(khop_curves.last_stage_at(long))
    assert 0 < move < e.steps
    short = khop.run(dataclasses.replace(e, steps=move), progress=False, use_cache=False)
    # its last evaluation, on the stage before the move
    assert short["step"][-1] == move and short["stage"][-1] == 2
    assert all(torch.equal(short["state"][k], long["kept"][0][k]) for k in short["state"])
    assert list(khop_starts.ANYSTART_MOVE_PROBE.tags) == [
        khop_starts.MOVE_PROBED
    ] and khop_starts.ANYSTART_MOVE_PROBE.probed(4) == (4, 2)


def test_every_anystart_seed_is_probed_at_its_move():
    m = khop_starts.move_members("quick")
    rec = khop_studies.seeded(
        khop_studies.recorded_runs(
            khop_studies.recorded(khop_studies.ANYSTART.settings(), experiment="khop_anystart")
        )[0]
    )
    assert list(m) == [khop_studies.seed_name(s) for s in khop_studies.VARIANT_SEEDS]
    for s in khop_studies.VARIANT_SEEDS:  # each stopped at its recorded move: the recorded run's first steps
        assert m[khop_studies.seed_name(s)] == khop_studies.ANYSTART.member(
            s, int(khop_curves.last_stage_at(rec[s]))
        )
    # the chapter's probe at the move is seed 0's: at step 600 in the numpy generators' recording, 700 in the
    # counter sampler's
    assert m["seed 0"].steps == {"numpy": 600, "counter": 700}[config.sampler()]
    d = khop_starts.move_members(
        "quick", khop_studies.DOUBLING
    )  # the stages 1, 2, 4 from table 1, from their own recording
    drec = khop_studies.seeded(
        khop_studies.recorded_runs(
            khop_studies.recorded(khop_studies.DOUBLING.settings(), experiment="khop_doubling")
        )[0]
    )
    assert all(
        d[khop_studies.seed_name(s)]
        == khop_studies.DOUBLING.member(s, int(khop_curves.last_stage_at(drec[s])))
        for s in khop_studies.VARIANT_SEEDS
    )
    assert {e.starts for e in d.values()} == {"first"} and {e.levels for e in d.values()} == {"doubling"}
    for v in (
        khop_studies.ONESTART,
        khop_studies.LONGSTART,
    ):  # the crossed studies, each from its own recording
        got = khop_starts.move_members("quick", v)
        vrec = khop_studies.seeded(
            khop_studies.recorded_runs(khop_studies.recorded(v.settings(), experiment=f"khop_{v.tag}"))[0]
        )
        assert all(
            got[khop_studies.seed_name(s)] == v.member(s, int(khop_curves.last_stage_at(vrec[s])))
            for s in khop_studies.VARIANT_SEEDS
        )
        assert {e.starts for e in got.values()} == {v.to}
    with pytest.raises(ValueError, match="allowed 'quick'"):
        khop_starts.move_members("full")
    runs = {
        khop_studies.seed_name(s): khop_probes.probe_run(
            khop.KHopExperiment(
                N=4,
                k=4,
                data="mixture",
                depth=2,
                d=16,
                heads=2,
                steps=40,
                eval_every=40,
                n_test=16,
                batch=32,
                seed=s,
            ),
            progress=False,
        )
        for s in (0, 1)
    }
    s = khop_starts.move_summary(runs)
    res = {h: khop_probes.hop_probe(runs["seed 1"]["exp"], runs["seed 1"]["state"], hops=h) for h in (4, 2)}
    assert s["mv1_v2"] == res[4]["probe"][:, 1].max() and s["mv1_h2_walk"] == np.nanmax(
        res[2]["chain"][:, 0, 1]
    )
    assert s["mv1_read"] == res[4]["attention"][:, 0].max() and s["mv1_h2_answers_v2"] == res[2]["answers"][2]
    assert (
        s["mv1_h2_acc"] == res[2]["acc"] and s["mv0_step"] == 40 and s["mv_n"] == 2 and s["mv_chance"] == 0.25
    )
    for level in (0.0, 1.01):  # every seed walks, or none does: the counts follow the per-seed values
        t = khop_starts.move_summary(runs, level=level)
        assert t["mv_walk2_n"] == (2 if level == 0 else 0) and t["mv_v2_n"] == t["mv_walk2_n"]
        assert t["mv_walk_kept_n"] == t["mv_walk2_n"] and (level == 0) != np.isnan(t["mv_walk_max"])
    assert s["mv_v2_max"] == max(s["mv0_v2"], s["mv1_v2"])
    assert s["mv_h2_acc_min"] == min(s["mv0_h2_acc"], s["mv1_h2_acc"])
    assert khop_starts.move_summary(runs, level=0.0)["mv_walk2_seeds"] == "0, 1"
    other = khop_starts.move_summary(runs, prefix="dmv")  # a second study on the same page
    assert other["dmv1_v2"] == s["mv1_v2"] and other["dmv_walk2_n"] == s["mv_walk2_n"] and "mv_n" not in other
    assert khop_starts.move_rows(other, prefix="dmv") == khop_starts.move_rows(s)
    rows = khop_starts.move_rows(s)
    assert len(rows) == 2 and len(rows[0]) == len(khop_starts.MOVE_HEADER)
    assert rows[1] == [
        "seed 1",
        40,
        s["mv1_h2_acc"],
        s["mv1_h2_walk"],
        s["mv1_h2_read"],
        s["mv1_walk"],
        s["mv1_read"],
        s["mv1_v2"],
        s["mv1_answers_v2"],
    ]
    with pytest.raises(ValueError, match="k \\(hops\\)"):
        khop_starts.move_summary(
            {
                "seed 0": khop_probes.probe_run(
                    khop.KHopExperiment(N=4, k=2, d=16, heads=2, steps=5, eval_every=5, n_test=16, batch=8),
                    progress=False,
                )
            }
        )


def test_probe_run_and_move_is_the_run_and_the_run_stopped_at_its_move(tmp_path, monkeypatch):
    """One training gives both: the whole run, and the curves and state of a run of exactly the move's steps."""
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path))
    exp = khop.KHopExperiment(
        N=4,
        k=3,
        data="cumulative",
        d=16,
        heads=2,
        steps=160,  # the move: step 70 (numpy sampler), 120 (counter)
        eval_every=5,
        n_test=64,
        batch=16,
        advance_at=0.3,
    )
    whole, moved = khop_starts.probe_run_and_move(exp, progress=False)
    plain = khop_probes.probe_run(exp, progress=False)
    at = int(khop_curves.last_stage_at(plain))
    short = khop_probes.probe_run(dataclasses.replace(exp, steps=at), progress=False)
    assert whole["exp"] == exp and moved["exp"] == short["exp"] and 0 < at < exp.steps
    for a, b in ((whole, plain), (moved, short)):
        for key in ("step", "acc", "stage", "loss"):
            assert np.array_equal(a[key], b[key], equal_nan=key == "loss"), key
        assert all(torch.equal(a["state"][key], b["state"][key]) for key in b["state"])
    with pytest.raises(ValueError, match="moves to its last stage at 0"):
        khop_starts.probe_run_and_move(dataclasses.replace(exp, data="direct"), progress=False)


def test_the_stall_studies_runs_short_of_their_last_stage():
    """Every run of the committed stall studies reached four hops under the numpy generators; the probe study
    made again under the counter sampler (one thread) has both of seed 0's runs short of it, which the chapter's
    premise row then counts. A study that is not about the last stage is refused."""
    from companion import record

    def rec(name, folder=record.RECORDED_DIR):
        (path,) = folder.glob(f"{name}-quick*.json")
        return record.load(path)

    numpy = khop_stall.last_stage_premise([rec(n) for n in khop_stall.ON_LAST_STAGE])
    assert numpy == {"short": {n: [] for n in khop_stall.ON_LAST_STAGE}, "short_n": 0}
    counter = khop_stall.last_stage_premise([rec("khop_probe", record.RECORDED_DIR / "counter")])
    assert counter == {"short": {"khop_probe": ["seed 0", "seed 0, every 250"]}, "short_n": 2}
    with pytest.raises(ValueError, match="'khop_stage_entry': allowed the studies on the last stage"):
        khop_stall.last_stage_premise([rec("khop_stage_entry")])


def test_the_split_gap_is_read_over_the_seeds_whose_base_runs_were_trained_alike(monkeypatch):
    """khop_four_hops.split_rounding: seed 0's base run rounds as the study and repeats it until the two part;
    seed 1's rounds otherwise and differs before, which the entries and the sentence give apart."""
    from pathlib import Path

    from companion.experiments import khop_four_hops
    from companion.recorded import Recorded

    def run(acc1, stages):
        return {"step": [100, 200, 300], "acc": [[1.0, acc1], [1.0, 0.2], [1.0, 0.3]], "stage": stages}

    study = Recorded(Path("s.json"), {"device": "CPU AMD EPYC, 2 threads", "packs": {"x": {"replicas": 7}}})
    alike = Recorded(Path("a.json"), {"device": "CPU AMD EPYC, 2 threads", "packs": {"x": {"replicas": 10}}})
    other = Recorded(Path("o.json"), {"device": "CPU AMD EPYC, 1 threads", "packs": {"x": {"replicas": 4}}})
    runs = {"seed 0": run(0.1, [1, 2, 3]), "seed 1": run(0.1, [1, 2, 3])}
    base = {0: run(0.1, [1, 2, 2]), 1: run(0.15, [1, 2, 2])}
    monkeypatch.setattr(khop_four_hops, "recorded_runs", lambda rec: (runs, {}))
    variant = type(
        "V",
        (),
        {
            "tag": "v",
            "steps": 300,
            "base_pairs": lambda self, n: {0: (base[0], alike), 1: (base[1], other)},
        },
    )()
    got = khop_four_hops.split_rounding(study, variant)
    assert (got["v_split_alike_gap"], got["v_split_alike_n"], got["v_split_rounding"]) == (
        0.0,
        1,
        "packed, 2 threads",
    )
    assert (got["v_split_other_seeds"], got["v_split_other_rounding"]) == ("1", "packed, 1 thread")
    assert got["v_split_other_gap"] == pytest.approx(0.05)
    assert got["v_split_other_text"] == (
        "The earlier run of seed 1 was trained otherwise (packed, 1 thread) and differs from this before the two "
        "part by up to 0.0500: rounding alone."
    )
