"""A verdict read on a late mean must not depend on where the run stopped (companion.experiments.late_verdicts)."""

import re
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from companion import claims, train
from companion.criterion import Criterion
from companion.experiments import late_rows, late_verdicts, noisy_recall, summaries
from companion.experiments.noisy_recall import RecallExperiment
from companion.report import Summary, format_value

ROOT = Path(__file__).resolve().parents[1]
# 20 steps evaluated every 2: the late window (from step 16) holds the evaluations at 16, 18 and 20
TINY = dict(d=8, seq_len=8, batch=8, steps=20, eval_every=2, dense_until=1, n_test=8, rhos=(0.0, 1.0))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COMPANION_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        return noisy_recall.run(RecallExperiment.quick(**TINY), device="cpu", progress=False, use_cache=False)


def test_a_view_at_one_evaluation_reads_that_evaluation_alone(run):
    steps, values = run.series("clean_p_correct", rho=0.0)
    window = values[steps >= 16]
    assert run.late_count() == len(window) == 3
    assert run.late_mean("clean_p_correct", rho=0.0) == pytest.approx(window.mean())
    for i in range(3):
        view = run.at_late(i)
        assert view.late_mean("clean_p_correct", rho=0.0) == pytest.approx(window[i])
        assert view.late_drift("clean_p_correct", rho=0.0) == 0.0 and view.late_count() == 3
        assert view.metrics is run.metrics and view.series("clean_loss", rho=1.0)[1].shape == (len(steps),)
    for bad in (-1, 3, 1.0, "0"):
        with pytest.raises(ValueError, match=re.escape(f"i={bad!r}: allowed an integer in 0 .. 2")):
            run.at_late(bad)


def _registry(bar):
    """Two rows of ours on entries "a" and "b" of a summary: "a" above ``bar`` (asserted), "b" of the full scale."""
    return {
        "x.a": claims.Claim("x.a", "book/x", "ours", "a", "", {"quick": Criterion(above=bar)}, origin="ours"),
        "x.b": claims.Claim(
            "x.b", "book/x", "ours", "b", "", {"full": Criterion(above=bar)}, scale="full", origin="ours"
        ),
    }


def _late(run):
    p = run.late_mean("clean_p_correct", rho=0.0)
    return Summary({"a": (p, "late p(correct), F2 dropped"), "b": (p, "the same")})


def test_a_row_whose_bar_lies_inside_its_window_fails_and_one_outside_passes(run):
    window = run.at_late(0).late_window("clean_p_correct", rho=0.0)
    values = [run.at_late(i).late_window("clean_p_correct", rho=0.0)[0] for i in range(3)]
    assert window[0] == values[0]
    lo, hi = min(values), max(values)
    table = late_verdicts.require_late_verdicts(
        _late, run, {"x.a": "a", "x.b": "b"}, "quick", _registry(lo - 0.01)
    )
    assert f"| `x.a` | {format_value(np.mean(values), 4)} | {lo:.4g}, {hi:.4g} |" in table
    assert table.splitlines()[2].endswith("| 0 of 3 |")
    if hi > lo:  # a bar between the lowest and the highest evaluation turns some evaluation over
        bar = (lo + hi) / 2
        with pytest.raises(
            AssertionError, match=r"x\.a \(.* on the value read; another in [12] of 3 views\)$"
        ):
            late_verdicts.require_late_verdicts(_late, run, {"x.a": "a"}, "quick", _registry(bar))
        # a row of another scale is shown, never asserted: the same spread does not stop the chapter
        table = late_verdicts.require_late_verdicts(_late, run, {"x.b": "b"}, "quick", _registry(bar))
        assert re.search(r"\| [12] of 3 \|$", table)


def test_bad_rows_and_windows_are_named_before_any_judging(run):
    reg = _registry(0.5)
    with pytest.raises(ValueError, match=r"\['x\.c'\] are not rows of the registry"):
        late_verdicts.require_late_verdicts(_late, run, {"x.c": "a"}, "quick", reg)
    with pytest.raises(ValueError, match=r"\['c'\] are not entries of the summary \(entries: \['a', 'b'\]\)"):
        late_verdicts.require_late_verdicts(_late, run, {"x.a": "c"}, "quick", reg)


def test_a_view_is_one_run_at_one_evaluation_the_others_whole(run):
    longer = noisy_recall.run(
        RecallExperiment.quick(**{**TINY, "steps": 40}), device="cpu", progress=False, use_cache=False
    )
    assert longer.late_count() == 5  # steps 32 to 40
    seen = [
        (v["short"].late_at, v["long"].late_at) for v in late_verdicts.views({"short": run, "long": longer})
    ]
    assert seen == [(0, None), (1, None), (2, None), (None, 0), (None, 1), (None, 2), (None, 3), (None, 4)]
    diverged = replace(longer, diverged_at=7)
    assert [v["long"] is diverged for v in late_verdicts.views({"short": run, "long": diverged})] == [
        True
    ] * 3
    assert [v.late_at for v in late_verdicts.views(run)] == [0, 1, 2]


CHAPTERS = {
    "book/noisy_recall": late_rows.NOISY_RECALL,
    "book/finetune": late_rows.FINETUNE,
    "book/architectures": late_rows.ARCHITECTURES,
    "book/synthetic_ioi": late_rows.SYNTHETIC_IOI,
    "book/synthetic_ioi_sgd": late_rows.SYNTHETIC_IOI_SGD,
    "book/triggers": late_rows.TRIGGERS,
}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_rows_named_are_checks_of_the_chapter_on_those_entries(chapter):
    """Each row named is one the chapter checks on that entry of its summary, and the chapter requires them."""
    text = (ROOT / f"{chapter}.md").read_text()
    checked = set(re.findall(r'claims\.check\("([\w.]+)", summary\["(\w+)"\]', text))
    assert set(CHAPTERS[chapter].items()) <= checked
    assert {claims.CLAIMS[cid].chapter for cid in CHAPTERS[chapter]} == {chapter}
    name = next(k for k, v in vars(late_rows).items() if v is CHAPTERS[chapter])
    assert re.search(rf"require_late_verdicts\(.*late_rows\.{name}, PROFILE\)", text)


def test_the_allocation_rows_are_the_chapters_checks_and_required_at_each_step_of_the_mean():
    """book/allocation's rows (late_rows.ALLOCATION) are its checks on those entries, judged on allocation.late_views
    with require=True; view_values refuses a row outside the registry or an entry the summary lacks."""
    text = (ROOT / "book/allocation.md").read_text()
    checked = set(re.findall(r'claims\.check\("([\w.]+)", summary\["(\w+)"\]', text))
    assert set(late_rows.ALLOCATION.items()) == checked
    assert "late_verdicts.view_values(allocation.summary, result, views, late_rows.ALLOCATION)" in text
    assert "late_verdicts.judged_views(late, PROFILE, allocation.LATE_LEAD, require=True)" in text
    make = lambda r: Summary({"a": (r, "")})  # noqa: E731
    reg = {"x.a": None}
    assert late_verdicts.view_values(make, 1.0, [0.5, 2.0], {"x.a": "a"}, reg) == {"x.a": (1.0, [0.5, 2.0])}
    with pytest.raises(ValueError, match=r"view_values: .*x\.b"):
        late_verdicts.view_values(make, 1.0, [0.5], {"x.b": "a"}, reg)
    with pytest.raises(ValueError, match=r"view_values: \['b'\] are not entries"):
        late_verdicts.view_values(make, 1.0, [0.5], {"x.a": "b"}, reg)


def test_the_noisy_recall_rows_left_out_do_not_read_the_late_window(run):
    """book/noisy_recall checks entries of recall_summary that are not named: none of them moves in a view at one
    evaluation of the late window, while some named one does (a late mean that moved with no row naming it fails)."""
    text = (ROOT / "book/noisy_recall.md").read_text()
    left_out = {e for _, e in re.findall(r'claims\.check\("([\w.]+)", summary\["(\w+)"\]', text)}
    left_out -= set(late_rows.NOISY_RECALL.values())
    whole = summaries.recall_summary(run)
    views = [summaries.recall_summary(run.at_late(i)) for i in range(run.late_count())]
    assert left_out and all(np.array_equal(v[e], whole[e], equal_nan=True) for v in views for e in left_out)
    assert any(v[e] != whole[e] for v in views for e in late_rows.NOISY_RECALL.values())


def test_same_verdicts_judges_given_values_and_names_bad_rows():
    reg = _registry(0.5)
    table = late_verdicts.require_same_verdicts({"x.a": (0.7, [0.6, 0.9])}, "quick", reg)
    assert table.splitlines()[2] == "| `x.a` | 0.7 | 0.6, 0.9 | holds at this scale only | 0 of 2 |"
    with pytest.raises(
        AssertionError, match=r"x\.a \(holds at this scale only on the value read; another in 1 of 3 views\)"
    ):
        late_verdicts.require_same_verdicts({"x.a": (0.7, [0.6, 0.4, 0.9])}, "quick", reg)
    with pytest.raises(ValueError, match=r"\['x\.a'\] have no view"):
        late_verdicts.require_same_verdicts({"x.a": (0.7, [])}, "quick", reg)
    with pytest.raises(ValueError, match=r"\['x\.c'\] are not rows of the registry"):
        late_verdicts.require_same_verdicts({"x.c": (0.7, [0.7])}, "quick", reg)


def test_the_recorded_fig3_seeds_are_judged_at_each_evaluation_of_their_late_window():
    """scale_study.late_excess: the seeds' p(correct | F2 dropped) at one evaluation of the late window, through
    scale_study.excess; its mean over the window is not the late means' excess, but each is judged the same way."""
    from types import SimpleNamespace

    from companion.experiments import scale_study
    from companion.train import late_mask

    by_choice = {name: scale_study.seed_runs(name) for name in scale_study.CHOICES}
    at = scale_study.late_excess(by_choice)
    for name, runs in by_choice.items():
        steps = next(iter(runs.values())).curves["step"]
        window = late_mask(steps)
        assert len(at[name]) == window.sum() >= 5
        last = [r.curves["p_correct_drop"][-1] for r in runs.values()]
        assert at[name][-1] == pytest.approx(scale_study.excess(last))
    fake = {
        "x": {
            0: SimpleNamespace(curves={"step": [0, 10], "p_correct_drop": [0.1, 0.2]}),
            1: SimpleNamespace(curves={"step": [0, 20], "p_correct_drop": [0.1, 0.2]}),
        }
    }
    with pytest.raises(ValueError, match="x choices: the seeds' curves are evaluated at different steps"):
        scale_study.late_excess(fake)


def test_the_larger_recording_rows_are_the_chapters_and_its_runs_have_views():
    """book/synthetic_ioi reads the larger recording's rows on late means of its curves: the rows named are the
    chapter's checks of those entries, and a recorded run has views as a live one does."""
    from companion import record
    from companion.experiments import catalog

    text = (ROOT / "book/synthetic_ioi.md").read_text()
    for cid, entry in late_rows.SYNTHETIC_IOI_LARGER.items():
        assert f'claims.check("{cid}", larger["big_{entry}"])' in text
    for cid, entry in late_rows.SYNTHETIC_IOI_STABILITY.items():
        assert f'claims.check("{cid}", stability["{entry}"])' in text
    assert "late_rows.SYNTHETIC_IOI_LARGER)" in text and "late_rows.SYNTHETIC_IOI_STABILITY)" in text
    big = record.latest("synthetic_ioi", "quick", catalog.IOI_LARGER)
    runs = summaries.ioi_recorded(big.curves)
    run = next(r for r in runs.values() if r.diverged_at is None)
    steps, values = run.series("clean_loss", rho=1.0)
    window = values[steps >= 0.8 * steps.max()]
    assert run.late_count() == len(window) >= 2
    assert [run.at_late(i).late_mean("clean_loss", rho=1.0) for i in range(len(window))] == pytest.approx(
        window
    )
    assert run.late_at is None and run.at_late(0).curves is run.curves
    views = late_verdicts.views(runs)
    assert len(views) == sum(r.late_count() for r in runs.values() if r.diverged_at is None)
    table, changed = late_verdicts.same_verdicts(
        late_verdicts.late_values(summaries.ioi_summary, runs, late_rows.SYNTHETIC_IOI_LARGER), "quick"
    )
    assert set(changed) <= set(late_rows.SYNTHETIC_IOI_LARGER) and len(table.splitlines()) == 6
    assert all(0 < k <= n == len(views) for k, n in changed.values())


def test_alpha_rows_read_each_run_and_each_recording_at_one_evaluation(run):
    """book/noisy_recall's rows over noise levels: views of this build's run, then of each recording's curves
    (late_verdicts.curve_views), the others as they are."""
    from companion import record
    from companion.train import late_mask

    rec = record.latest("recall", "quick", {"alpha": 0.2})
    at = late_verdicts.curve_views(rec, ["p_noise_full", "p_correct_drop"])
    window = late_mask(rec.curves["step"])
    assert len(at) == window.sum() >= 2
    assert [v["p_correct_drop"] for v in at] == pytest.approx(
        np.asarray(rec.curves["p_correct_drop"])[window]
    )
    assert np.mean([v["p_noise_full"] for v in at]) == pytest.approx(rec.summary["p_noise_full"], abs=1e-6)
    with pytest.raises(ValueError, match=r"keeps no curve \['p_loss'\]"):
        late_verdicts.curve_views(rec, ["p_loss"])
    rows = {"recall.alpha_noise": "alpha_noise_gap_max", "recall.alpha_drop_f2": "alpha_drop_min"}
    values = late_verdicts.alpha_values(run, {0.2: rec}, rows)
    live = summaries.recall_summary(run)
    whole = summaries.alpha_summary(live, run.exp.alpha, {0.2: rec.summary})
    last = summaries.alpha_summary(live, run.exp.alpha, {0.2: at[-1]})
    for cid, entry in rows.items():
        late, seen = values[cid]
        assert late == whole[entry] and len(seen) == run.late_count() + len(at)
        assert seen[-1] == pytest.approx(last[entry])
    with pytest.raises(ValueError, match=r"\['alpha80_drop'\] are not entries of alpha_summary"):
        late_verdicts.alpha_values(run, {0.2: rec}, {"recall.alpha08_full": "alpha80_drop"})


def test_the_alpha_rows_named_are_the_chapters_checks_of_those_entries():
    text = (ROOT / "book/noisy_recall.md").read_text()
    for cid, entry in late_rows.NOISY_RECALL_ALPHA.items():
        assert f'claims.check("{cid}", other["{entry}"])' in text
    assert "late_verdicts.alpha_values(run, alpha_runs, late_rows.NOISY_RECALL_ALPHA)" in text


def test_recorded_values_read_a_recordings_curves_at_each_evaluation_and_agree_with_its_late_means():
    """book/paper_scale: the paper-configuration recordings' rows at each evaluation of their late windows, from their
    curves (late_verdicts.recorded_values); each entry computed on the curves' late means gives the recorded value."""
    import copy
    import dataclasses

    from companion import record
    from companion.train import late_mask

    rec = record.latest("recall", "full")
    values, left_out = late_verdicts.recorded_values(rec, late_rows.NOISY_RECALL)
    assert left_out == ["recall.prev_token_head", "recall.prev_token_sharp"]
    window = late_mask(rec.curves["step"])
    drop = np.asarray(rec.curves["p_correct_drop"])[window]
    full = np.asarray(rec.curves["p_correct_full"])[window]
    late, seen = values["recall.drop_f2_gain"]
    assert late == rec.claims["recall.drop_f2_gain"] and seen == pytest.approx(drop - full)
    assert values["recall.attn_avoids_noise"][0] == rec.claims["recall.attn_avoids_noise"]
    ft = record.latest("finetune", "full")
    ft_values, ft_left = late_verdicts.recorded_values(ft, late_rows.FINETUNE)
    assert ft_left == [] and all(ft_values[cid][0] == v for cid, v in ft.claims.items() if cid in ft_values)
    assert ft_values["finetune.noise_fraction"][1] == pytest.approx(
        np.asarray(ft.curves["noisy_p_noise"])[late_mask(ft.curves["step"])]
    )
    table, changed = late_verdicts.same_verdicts(values | ft_values, "full")
    assert set(changed) <= set(values) | set(ft_values) and len(table.splitlines()) == 2 + 7
    # a summary the curves do not give is named, as are rows and entries the recording lacks
    other = dataclasses.replace(rec, data=copy.deepcopy(rec.data))
    other.data["summary"]["drop_gain"] += 0.01
    with pytest.raises(ValueError, match="drop_gain is .* its curves' late means give"):
        late_verdicts.recorded_values(other, {"recall.drop_f2_gain": "drop_gain"})
    with pytest.raises(ValueError, match=r"\['ft_c'\] are not entries of recall-full.json's summary"):
        late_verdicts.recorded_values(rec, {"recall.drop_f2_gain": "ft_c"})
    with pytest.raises(ValueError, match=r"\['x.nope'\] are not rows of the registry"):
        late_verdicts.recorded_values(rec, {"x.nope": "drop_gain"})


def test_the_paper_scale_chapter_reads_the_recordings_rows_at_each_evaluation():
    text = (ROOT / "book/paper_scale.md").read_text()
    assert (
        "paper_recs = {r.experiment: r for r in paper_runs if r.experiment in late_rows.RECORDED_ROWS}"
        in text
    )
    assert "late_verdicts.recorded_values(rec, late_rows.RECORDED_ROWS[name])" in text


def test_a_view_of_pretraining_reads_its_window_and_leaves_fine_tuning_whole():
    """book/finetune's rows on the end of pre-training (FINETUNE_PRETRAIN) read its last evaluation; a view of
    phase 0 reads pre-training's late window at one evaluation, fine-tuning's windows whole, and the chapter
    requires those rows with phase=0."""
    text = (ROOT / "book/finetune.md").read_text()
    for cid, entry in late_rows.FINETUNE_PRETRAIN.items():
        assert f'claims.check("{cid}", summary["{entry}"])' in text
    assert re.search(r"FINETUNE_PRETRAIN, PROFILE, phase=0\)", text)
    exp = RecallExperiment.quick(**{**TINY, "schedule": "finetune", "pretrain_steps": 10})
    ft = noisy_recall.run(exp, device="cpu", progress=False, use_cache=False)
    steps, correct = ft.series("attn_per_pos_correct", phase=0)
    noise = ft.series("attn_per_pos_noise", phase=0)[1]
    window = steps >= 8  # the last fifth of 10 pre-training steps, evaluated every 2
    whole = summaries.finetune_summary(ft)
    assert whole["pre_ratio"] == noise[-1] / correct[-1]
    views = late_verdicts.views(ft, phase=0)
    assert len(views) == ft.late_count(phase=0) == window.sum() == 2
    for view, c, n in zip(views, correct[window], noise[window]):
        s = summaries.finetune_summary(view)
        assert s["pre_ratio"] == pytest.approx(n / c) and s["noise_late"] == whole["noise_late"]
    values = late_verdicts.late_values(summaries.finetune_summary, ft, late_rows.FINETUNE_PRETRAIN, phase=0)
    assert values["finetune.pretrain_even"] == (
        whole["pre_ratio"],
        pytest.approx(list(noise[window] / correct[window])),
    )


def test_stopped_views_cut_one_run_at_each_late_evaluation_the_others_as_they_ended():
    """late_verdicts.stopped_views: a run (a dict of per-evaluation values) cut after each evaluation of its late
    window, as if it had stopped there; stopped_values judges the rows of a summary made on each view."""
    steps = np.arange(0, 101, 10)  # late window: steps 80, 90, 100
    a = {"step": steps, "acc": np.linspace(0, 1, 11), "N": 8}
    b = {"step": np.arange(0, 51, 10), "acc": np.linspace(1, 0, 6), "N": 8}  # late window: step 40, 50
    seen = late_verdicts.stopped_views({"a": a, "b": b}, ("step", "acc"))
    assert [(v["a"]["step"][-1], v["b"]["step"][-1]) for v in seen] == [
        (80, 50),
        (90, 50),
        (100, 50),
        (100, 40),
        (100, 50),
    ]
    assert seen[0]["b"] is b and seen[0]["a"]["N"] == 8 and len(seen[0]["a"]["acc"]) == 9
    cuts = [("a", 80), ("a", 90), ("a", 100), ("b", 40), ("b", 50)]  # stopped_cuts names the views, in order
    assert late_verdicts.stopped_cuts({"a": a, "b": b}, ("step", "acc")) == cuts

    def make(runs):
        return Summary(
            {"final_a": (float(runs["a"]["acc"][-1]), ""), "best_b": (float(max(runs["b"]["acc"])), "")}
        )

    reg = _registry(0.85)  # x.a asserted above 0.85 at quick
    rows = {"x.a": "final_a", "x.b": "best_b"}
    values = late_verdicts.stopped_values(make, {"a": a, "b": b}, rows, ("step", "acc"), reg)
    assert values["x.a"] == (1.0, pytest.approx([0.8, 0.9, 1.0, 1.0, 1.0]))
    assert values["x.b"] == (1.0, [1.0] * 5)  # b's best is its first evaluation, in every view
    table, changed = late_verdicts.same_verdicts(values, "quick", reg)
    assert changed == {"x.a": (1, 5)}  # had a stopped at step 80: 0.8, under the bar
    with pytest.raises(AssertionError, match=r"x\.a .*another in 1 of 5 views"):
        late_verdicts.require_same_verdicts(values, "quick", reg)
    with pytest.raises(ValueError, match="keys \\['acc'\\] must include 'step'"):
        late_verdicts.stopped_views({"a": a}, ("acc",))
    with pytest.raises(ValueError, match="run 'a' has \\['acc'\\] of another length than its 11 evaluations"):
        late_verdicts.stopped_views({"a": {**a, "acc": a["acc"][:5]}}, ("step", "acc"))
    with pytest.raises(ValueError, match="run 'a' has no 'step'"):
        late_verdicts.stopped_views({"a": {"acc": a["acc"]}}, ("step", "acc"))
    # a key the run does not hold is not cut (a continuation's curves keep no loss); those it holds are
    held = late_verdicts.stopped_views({"a": a}, ("step", "acc", "loss"))
    assert [len(v["a"]["acc"]) for v in held] == [9, 10, 11] and all("loss" not in v["a"] for v in held)
    with pytest.raises(ValueError, match="stopped_values: \\['nope'\\] are not entries of the summary"):
        late_verdicts.stopped_values(make, {"a": a, "b": b}, {"x.a": "nope"}, ("step", "acc"), reg)


def test_stopped_studies_judge_each_studys_rows_and_turned_text_says_which_runs_turn_a_row():
    """stopped_studies judges several studies' rows, each on its own runs, and gives each row the views' cuts;
    turned_text names the runs and steps that give a row another category."""
    steps = np.arange(0, 101, 10)  # late window: steps 80, 90, 100
    a = {"step": steps, "acc": np.linspace(0, 1, 11)}
    b = {"step": np.arange(0, 51, 10), "acc": np.linspace(1, 0, 6)}  # late window: steps 40, 50
    keys = ("step", "acc")

    def final(runs):
        return Summary({"final": (float(min(r["acc"][-1] for r in runs.values())), "")})

    studies = {"one": {"x.a": "final"}, "two": {"x.b": "final"}}
    over = {"one": (final, {"a": a}), "two": (final, {"b": {**b, "acc": np.ones(6)}})}
    reg = _registry(0.85)
    values, cuts = late_verdicts.stopped_studies(over.get, studies, keys, reg)
    assert late_verdicts.judged_studies(over.get, studies, keys, "quick", reg) == late_verdicts.judged_views(
        values, "quick", late_verdicts.STOPPED_LEAD, cuts, registry=reg
    )
    assert values["x.a"] == (1.0, pytest.approx([0.8, 0.9, 1.0]))  # study one: a alone
    assert cuts["x.a"] == [("a", 80), ("a", 90), ("a", 100)] and cuts["x.b"] == [("b", 40), ("b", 50)]
    assert late_verdicts.same_verdicts(values, "quick", reg)[1] == {
        "x.a": (1, 3)
    }  # study two: b alone, 1.0 throughout
    assert late_verdicts.turned_text(values, cuts, "quick", reg) == (
        'Turned by: `x.a` by "a" stopped at step 80.'
    )
    values["x.a"] = (1.0, [0.5, 0.6, 1.0])
    assert late_verdicts.turned_text(values, cuts, "quick", reg) == (
        'Turned by: `x.a` by "a" stopped at 2 of its 3 late evaluations (steps 80 to 90).'
    )
    assert late_verdicts.turned_text({"x.a": (1.0, [1.0] * 3)}, cuts, "quick", reg) == ""
    with pytest.raises(ValueError, match=r"turned_text: \['x.a'\] have not one cut per view"):
        late_verdicts.turned_text({"x.a": (1.0, [1.0] * 2)}, cuts, "quick", reg)
    with pytest.raises(ValueError, match=r"stopped_studies: \['x.a'\] are rows of two studies"):
        late_verdicts.stopped_studies(over.get, {"one": {"x.a": "final"}, "two": {"x.a": "final"}}, keys, reg)
    with pytest.raises(ValueError, match=r"stopped_studies: \['x.zz'\] are not rows of the registry"):
        late_verdicts.stopped_studies(over.get, {"one": {"x.zz": "final"}}, keys, reg)


def test_judged_views_gives_the_table_and_one_sentence_of_what_the_views_turn():
    """judged_views is same_verdicts' table with changed_text after its lead and, given the cuts, turned_text; with
    require it stops where an asserted row turns, and it refuses what same_verdicts and turned_text refuse."""
    reg = _registry(0.85)
    values = {"x.a": (1.0, [0.8, 0.9, 1.0]), "x.b": (1.0, [0.5, 1.0])}
    cuts = {"x.a": [("a", 80), ("a", 90), ("a", 100)], "x.b": [("b", 40), ("b", 50)]}
    table, changed = late_verdicts.same_verdicts(values, "quick", reg)
    lead = late_verdicts.STOPPED_LEAD
    assert late_verdicts.judged_views(values, "quick", lead, registry=reg) == (
        table,
        late_verdicts.changed_text(changed, lead),
    )
    assert late_verdicts.judged_views(values, "quick", lead, cuts, registry=reg) == (
        table,
        f"{late_verdicts.changed_text(changed, lead)} {late_verdicts.turned_text(values, cuts, 'quick', reg)}",
    )
    assert late_verdicts.judged_views(values, "quick", lead, cuts, registry=reg)[1].endswith(
        'their verdicts depend on when the runs stopped. Turned by: `x.a` by "a" stopped at step 80; `x.b` by "b" '
        "stopped at step 40."
    )
    kept = {"x.a": (1.0, [0.9, 1.0])}
    assert late_verdicts.judged_views(kept, "quick", cuts={"x.a": cuts["x.a"][1:]}, registry=reg)[1] == (
        "At one evaluation alone, every row keeps its category."
    )
    with pytest.raises(
        AssertionError, match=r"x\.a \(holds at this scale only on the value read; another in 1 of 3"
    ):
        late_verdicts.judged_views(values, "quick", lead, require=True, registry=reg)
    late_verdicts.judged_views({"x.b": values["x.b"]}, "quick", require=True, registry=reg)  # x.b: full only
    with pytest.raises(ValueError, match=r"judged_views: \['x.a'\] have not one cut per view"):
        late_verdicts.judged_views(values, "quick", lead, {**cuts, "x.a": cuts["x.a"][:2]}, registry=reg)
    with pytest.raises(ValueError, match=r"judged_views: \['x.a'\] have no view"):
        late_verdicts.judged_views({"x.a": (1.0, [])}, "quick", registry=reg)
    with pytest.raises(ValueError, match=r"judged_views: \['x.zz'\] are not rows of the registry"):
        late_verdicts.judged_views({"x.zz": (1.0, [1.0])}, "quick", registry=reg)


K4_STUDIES = {  # chapter: (its rows in late_rows, the module of its STUDIES and stopped_over)
    "book/khop_four_hops": ("KHOP_FOUR_HOPS", "khop_four_hops"),
    "book/khop_starts": ("KHOP_STARTS", "khop_starts_text"),
}


@pytest.mark.parametrize("chapter", K4_STUDIES)
def test_the_k4_rows_are_the_chapters_checks_read_as_the_chapter_reads_them(chapter):
    """Each study's rows are the chapter's checks on that study's summary; stopped_over's runs and summary give the
    chapter's values (the pools and base runs rebuilt as the summaries read them), each of those runs is cut in some
    view, and the chapter reports the views."""
    import importlib

    from companion.experiments import khop_members, khop_studies

    rows_name, module_name = K4_STUDIES[chapter]
    module = importlib.import_module(f"companion.experiments.{module_name}")
    studies = getattr(late_rows, rows_name)
    text = (ROOT / f"{chapter}.md").read_text()
    assert set(studies) == set(module.STUDIES)
    values, cuts = late_verdicts.stopped_studies(module.stopped_over, studies, khop_members.EVALUATED)
    for study, rows in studies.items():
        prefix = "deep_" if study == "deep" else ""
        rec = khop_studies.study_recorded(module.STUDIES[study])
        summary = khop_studies.recorded_summary(rec, prefix=prefix)
        _, runs = module.stopped_over(study)
        for cid, entry in rows.items():
            assert re.search(rf'claims\.check\("{re.escape(cid)}", \w+\["{prefix}{entry}"\]\)', text), cid
            assert claims.CLAIMS[cid].chapter == chapter
            assert values[cid][0] == pytest.approx(summary[f"{prefix}{entry}"], nan_ok=True), cid
            assert {name for name, _ in cuts[cid]} == set(runs)
    assert f"late_verdicts.judged_studies({module_name}.stopped_over, late_rows.{rows_name}," in text
    with pytest.raises(ValueError, match="unknown study 'nope': allowed values are"):
        module.stopped_over("nope")


def test_the_stall_rows_read_on_curves_are_the_chapters_checks_and_a_turned_row_says_so():
    """Each study's rows in KHOP_STALL are book/khop_stall's checks on that entry; stopped_over's summary of the curves
    alone gives the value the recording stored (with its probes); every run is cut in some view; a row that some
    view turns has a history that says so (the chapter says the scorecard does)."""
    from functools import partial

    from companion.experiments import khop_members, khop_stall, khop_stall_paths, khop_studies

    sampler, _ = khop_stall.study_sampler()
    text = (ROOT / "book/khop_stall.md").read_text()
    assert set(late_rows.KHOP_STALL) == set(khop_stall_paths.STOPPED) | set(khop_stall_paths.APART)
    over = partial(khop_stall_paths.stopped_over, sampler=sampler)
    values, cuts = late_verdicts.stopped_studies(over, late_rows.KHOP_STALL, khop_members.EVALUATED)

    def recorded(study):
        return khop_studies.study_recorded(study, sampler)

    # the chapter's waits: the hiding study's runs against the seed study's, both as recorded
    waits = khop_stall.hidden_vs_plain(
        *(
            khop_studies.recorded_runs(recorded(khop_stall_paths.WAITS_RECORDINGS[k]))[0]
            for k in ("hidden", "plain")
        )
    )
    for study, rows in late_rows.KHOP_STALL.items():
        if study == "hidden_waits":
            stored = waits
        elif study == "escape":
            stored = recorded(khop_stall_paths.ESCAPE_RECORDING).as_summary()
        else:
            stored = recorded(khop_stall_paths.STOPPED[study][0]).as_summary()
        _, runs = over(study)
        for cid, entry in rows.items():
            assert re.search(rf'claims\.check\("{re.escape(cid)}", \w+\["{entry}"\], note=kept\)', text), cid
            assert values[cid][0] == stored[entry], cid
            assert {name for name, _ in cuts[cid]} == set(runs)
    changed = late_verdicts.same_verdicts(values, "quick")[1]
    assert all("late_verdicts.stopped_studies" in (claims.CLAIMS[cid].history or "") for cid in changed), (
        changed
    )
    assert "late_rows.KHOP_STALL, khop_members.EVALUATED," in text
    with pytest.raises(ValueError, match="unknown study 'nope': allowed values are"):
        khop_stall_paths.stopped_over("nope")
    # every continuation is cut, and the waits' pool holds the plain runs of the hiding study's names only
    assert set(over("escape")[1]) == set(khop_stall.CONTINUATIONS)
    plain = {n for n in over("hidden_waits")[1] if n.startswith(khop_stall_paths.PLAIN_PREFIX)}
    assert plain == {khop_stall_paths.PLAIN_PREFIX + n for n in khop_stall.HIDDEN.names}


def test_the_continuations_read_apart_refuse_a_recording_without_one(monkeypatch):
    """continuations_over names the continuations a recording lacks."""
    from types import SimpleNamespace

    from companion.experiments import khop_stall, khop_stall_paths

    names = list(khop_stall.CONTINUATIONS)[1:]
    curves = {key: {n: [0] for n in names} for key in ("step", "acc", "stage")}
    monkeypatch.setattr(khop_stall_paths, "study_recorded", lambda *a, **k: SimpleNamespace(curves=curves))
    with pytest.raises(ValueError, match="the escape recording has no continuation \\['cumulative'\\]"):
        khop_stall_paths.continuations_over()


@pytest.mark.parametrize("sampler", ["numpy", "counter"])
def test_the_fact_capacity_rows_are_the_chapters_checks_read_on_its_recorded_grid(sampler, monkeypatch):
    """FACT_CAPACITY's rows are book/fact_capacity's checks on those entries; grid_stopped's summary of the whole
    curves is the recorded one (each run's best is its curve's largest accuracy), every run is cut in some view, the
    chapter reports them with judged_study (judged_studies of the one study), and a run never evaluated is refused."""
    from types import SimpleNamespace

    from companion import recorded as recorded_files
    from companion.experiments import fact_capacity

    text = (ROOT / "book/fact_capacity.md").read_text()
    for cid, entry in late_rows.FACT_CAPACITY.items():
        assert re.search(rf'claims\.check\("{re.escape(cid)}", summary\["{entry}"\]\)', text), cid
        assert claims.CLAIMS[cid].chapter == "book/fact_capacity"
    assert "late_verdicts.judged_study(*fact_capacity.grid_stopped(rec), late_rows.FACT_CAPACITY," in text
    rec = recorded_files.latest("fact_capacity", "quick", sampler=sampler)
    make, runs = fact_capacity.grid_stopped(rec)
    assert make(runs).entries() == {k: v for k, v in rec.as_summary().entries().items() if k != "minutes"}
    values, cuts = late_verdicts.stopped_studies(
        lambda _: (make, runs), {"grid": late_rows.FACT_CAPACITY}, ("step", "acc")
    )
    assert all({name for name, _ in cuts[cid]} == set(runs) for cid in late_rows.FACT_CAPACITY)
    assert late_verdicts.judged_study(make, runs, late_rows.FACT_CAPACITY, ("step", "acc"), "quick") == (
        late_verdicts.judged_views(values, "quick", late_verdicts.STOPPED_LEAD, cuts)
    )
    first = next(iter(rec.curves["best"]))
    bare = {**rec.curves, "acc": {**rec.curves["acc"], first: []}}
    with pytest.raises(ValueError, match=rf"runs \['{re.escape(first)}'\] of .* have no evaluation"):
        fact_capacity.grid_stopped(SimpleNamespace(curves=bare, path=rec.path))


def test_the_curve_counts_of_the_stall_studies_are_their_summaries_counts():
    """reseed_learned, reseed_long_learned and delay_learned give the counts reseed_summary, reseed_long_summary
    and delay_summary store (read back from their recordings), and refuse a run of another study or a study with a
    stream missing."""
    from companion.experiments import khop_stall, khop_stall_paths, khop_studies

    sampler, _ = khop_stall.study_sampler()
    for study in ("reseed", "reseed_long", "delay"):
        make, runs = khop_stall_paths.stopped_over(study, sampler)
        stored = khop_studies.study_recorded(khop_stall_paths.STOPPED[study][0], sampler).as_summary()
        counts = make(runs)
        assert counts and all(counts[e] == stored[e] for e in counts), study
        if study == "reseed":
            with pytest.raises(ValueError, match="has no run with last-stage data \\[4\\]"):
                make({n: r for n, r in runs.items() if not n.endswith("data 4") or "every" in n})
    with pytest.raises(ValueError, match="run of the longer study"):
        khop_stall_paths.reseed_long_learned({"seed 1": {}})
    with pytest.raises(ValueError, match="run moved to its last stage later"):
        khop_stall_paths.delay_learned({"seed 1": {}})


def test_the_stopped_runs_of_a_pooled_study_include_the_runs_it_pools_with():
    from companion.experiments import khop_four_hops, khop_studies

    own = khop_studies.recorded_runs(khop_studies.study_recorded(khop_four_hops.STUDIES["interval"]))[0]
    assert set(khop_four_hops.stopped_over("interval")[1]) > set(
        own
    )  # the seed study's runs, cut at its budget
    _, runs = khop_four_hops.stopped_over("wide")
    base = [n for n in runs if n.startswith(khop_four_hops.BASE_PREFIX)]
    assert base and len(base) == len(runs) - len(base)  # one base run per seed


def test_a_variant_summary_takes_runs_cut_before_its_budget_and_refuses_one_past_it():
    from companion.experiments import khop_four_hops

    make, runs = khop_four_hops.stopped_over("lrs")
    name = next(n for n in runs if not n.startswith(khop_four_hops.BASE_PREFIX))
    cut = {**runs, name: {**runs[name], **{k: runs[name][k][:-1] for k in ("step", "acc", "stage", "loss")}}}
    assert make(cut)["lr_n"] == make(runs)["lr_n"]
    own = {n: r for n, r in cut.items() if not n.startswith(khop_four_hops.BASE_PREFIX)}
    base = {int(n.rsplit(" ", 1)[1]): r for n, r in runs.items() if n.startswith(khop_four_hops.BASE_PREFIX)}
    with pytest.raises(ValueError, match="budgets .*allowed lr and base runs of the same number of steps"):
        khop_four_hops.variant_summary(own, base=base, variant=khop_four_hops.LR)
    with pytest.raises(ValueError, match="allowed runs of at most budget=100 steps"):
        khop_four_hops.variant_summary(own, base=base, variant=khop_four_hops.LR, budget=100)


def test_stopped_entries_make_each_view_once_for_rows_and_other_entries():
    """stopped_entries measures each view once, whatever entries are read of it; row_values picks the rows, equal to
    stopped_values'; a summary of the whole runs passed as ``whole`` is read instead of made again."""
    steps = np.arange(0, 101, 10)
    a = {"step": steps, "acc": np.linspace(0, 1, 11)}
    made = []

    def make(runs):
        made.append(runs)
        acc = float(runs["a"]["acc"][-1])
        return Summary({"final": (acc, ""), "twice": (2 * acc, ""), "other": (-acc, "")})

    reg = _registry(0.85)
    entries = late_verdicts.stopped_entries(make, {"a": a}, ("final", "twice"), ("step", "acc"))
    assert len(made) == 4  # the whole run and its three views
    assert entries["twice"] == (2.0, pytest.approx([1.6, 1.8, 2.0])) and set(entries) == {"final", "twice"}
    rows = {"x.a": "final"}
    assert late_verdicts.row_values(entries, rows, reg) == late_verdicts.stopped_values(
        make, {"a": a}, rows, ("step", "acc"), reg
    )
    made.clear()
    given = Summary({"final": (0.5, ""), "twice": (7.0, "")})
    entries = late_verdicts.stopped_entries(make, {"a": a}, ("final", "twice"), ("step", "acc"), whole=given)
    assert len(made) == 3 and entries["final"] == (0.5, pytest.approx([0.8, 0.9, 1.0]))
    assert (
        late_verdicts.stopped_values(make, {"a": a}, rows, ("step", "acc"), reg, whole=given)["x.a"][0] == 0.5
    )
    with pytest.raises(ValueError, match=r"stopped_entries: \['nope'\] are not entries of the summary"):
        late_verdicts.stopped_entries(make, {"a": a}, ("nope",), ("step", "acc"), whole=given)
    with pytest.raises(ValueError, match=r"row_values: entries \['other'\] were not measured"):
        late_verdicts.row_values(entries, {"x.a": "other"}, reg)
    with pytest.raises(ValueError, match=r"row_values: \['x.zz'\] are not rows of the registry"):
        late_verdicts.row_values(entries, {"x.zz": "final"}, reg)


def test_the_khop_rows_named_are_the_chapters_checks_and_required_on_stopped_runs():
    from companion.experiments import khop_members

    text = (ROOT / "book/khop.md").read_text()
    for cid, entry in late_rows.KHOP.items():
        assert f'claims.check("{cid}", summary["{entry}"])' in text
        assert claims.CLAIMS[cid].chapter == "book/khop"
    assert (
        "late_verdicts.stopped_values(khop_members.summary, runs, late_rows.KHOP, khop_members.EVALUATED)"
        in text
    )
    assert REQUIRED_STOPPED in text
    for cid, entry in late_rows.KHOP_RATES.items():  # the rates study's rows, reported on its recording
        assert f'claims.check("{cid}", rates["{entry}"])' in text
        assert claims.CLAIMS[cid].chapter == "book/khop"
    assert set(re.findall(r'claims\.check\("(khop\.rate_\w+)"', text)) == set(late_rows.KHOP_RATES)
    assert '{"rates": late_rows.KHOP_RATES}, khop_members.EVALUATED,' in text
    assert set(khop_members.EVALUATED) == set(
        khop_members.curves({"r": {k: [] for k in khop_members.EVALUATED}})
    )


def _tiny_study(module, tmp_path_factory, **tiny):
    """An induction chapter's study (``module``: induction_head or induction_layers) on tiny runs, ``tiny`` overriding
    each run's settings, trained afresh in a cache of its own."""
    from companion.experiments import induction

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COMPANION_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        runs = {
            n: induction.run(replace(e, **tiny), device="cpu", progress=False, use_cache=False)
            for n, e in module.study_members("quick").items()
        }
    return module.study_from_runs(runs)


@pytest.fixture(scope="module")
def induction_res(tmp_path_factory):
    """book/induction_head's study on tiny runs: 20 steps evaluated every 2 (late window: steps 16, 18, 20), the
    staged runs released at step 4."""
    from companion.experiments import induction_head

    return _tiny_study(
        induction_head, tmp_path_factory, steps=20, eval_every=2, batch=4, n_test=8, unfreeze_at=4
    )


def test_induction_head_views_cut_its_runs_and_remake_the_chapters_summary(induction_res):
    """The chapter's runs by name (study_runs undoes study_from_runs); summary_of_runs remakes the summary on runs of
    those names; each view cuts one run after one late evaluation. The rows left out of INDUCTION_HEAD (the memories
    written in, the staged runs at their release step) keep their values in every view, while a named one moves."""
    from companion.experiments import induction_head

    res = induction_res
    runs = induction_head.study_runs(res)
    assert list(runs) == list(induction_head.study_members("quick"))
    make = induction_head.summary_of_runs(res)
    with np.errstate(
        invalid="ignore"
    ):  # at 20 steps no probe reaches 0.9: differences of first steps inf - inf
        whole = induction_head.summary(res)
        again = make(runs)
        seen = late_verdicts.stopped_views(runs)
        at_each = [make(v) for v in seen]

    def same(a, b):
        return np.array_equal(a, b, equal_nan=True)

    assert list(again) == list(whole) and all(same(again[e], whole[e]) for e in whole)
    assert len(seen) == 3 * len(runs)
    assert [v["joint"].steps[-1] for v in seen[:3]] == [16, 18, 20] and seen[0]["seed 1"] is runs["seed 1"]
    text = (ROOT / "book/induction_head.md").read_text()
    checked = dict(re.findall(r'claims\.check\("([\w.]+)", summary\["(\w+)"\]', text))
    left_out = {e for cid, e in checked.items() if cid not in late_rows.INDUCTION_HEAD}
    assert left_out and all(same(s[e], whole[e]) for s in at_each for e in left_out)
    assert any(not same(s[e], whole[e]) for s in at_each for e in late_rows.INDUCTION_HEAD.values())


# how a chapter requires its rows on stopped runs (and shows their table)
REQUIRED_STOPPED = "late_verdicts.judged_views(stopped, PROFILE, late_verdicts.STOPPED_LEAD, require=True)"


def test_the_induction_random_rows_named_are_the_chapters_checks_on_the_trained_model_and_required():
    """Each row of INDUCTION_RANDOM is one book/induction_random checks on that entry of its summary (the
    single-seed rows: every other row reads the seed recording), and the chapter requires them on the run's weights at
    each evaluation of its late window."""
    from companion.experiments import induction_random

    text = (ROOT / "book/induction_random.md").read_text()
    checked = dict(re.findall(r'claims\.check\("([\w.]+)", summary\["(\w+)"\]', text))
    assert checked == late_rows.INDUCTION_RANDOM
    assert {claims.CLAIMS[cid].chapter for cid in checked} == {"book/induction_random"}
    call = (
        'late_verdicts.stopped_entries(induction_random.trained_summary, {"random": res["random"]},\n'
        "                                           induction_random.TRAINED_ENTRIES, whole=summary)\n"
        "stopped = late_verdicts.row_values(stopped_at, late_rows.INDUCTION_RANDOM)"
    )
    assert call in text and REQUIRED_STOPPED in text
    assert set(late_rows.INDUCTION_RANDOM.values()) <= set(induction_random.TRAINED_ENTRIES)


@pytest.mark.parametrize(
    "chapter, rows_name", [("induction_head", "INDUCTION_HEAD"), ("induction_layers", "INDUCTION_LAYERS")]
)
def test_the_induction_rows_named_are_the_chapters_checks_and_required_on_stopped_runs(chapter, rows_name):
    """Each row the chapter's table of late_rows names is one the chapter checks on that entry, and the chapter
    requires them on its stopped runs; the two chapters share no row."""
    rows = getattr(late_rows, rows_name)
    text = (ROOT / f"book/{chapter}.md").read_text()
    for cid, entry in rows.items():
        assert f'claims.check("{cid}", summary["{entry}"])' in text
        assert claims.CLAIMS[cid].chapter == f"book/{chapter}"
    pad = " " * len("stopped = late_verdicts.stopped_values(")
    call = (
        f"late_verdicts.stopped_values({chapter}.summary_of_runs(res), {chapter}.study_runs(res),\n"
        f"{pad}late_rows.{rows_name})"
    )
    assert call in text and REQUIRED_STOPPED in text
    assert not set(late_rows.INDUCTION_LAYERS) & set(late_rows.INDUCTION_HEAD)


def test_the_scan_snap_text_rows_are_the_chapters_checks_and_required_on_stopped_runs():
    """book/scan_snap_text's rows (late_rows.SCAN_SNAP_TEXT) are every check of the chapter, on those entries, and the
    chapter requires them on its runs cut at each evaluation of their late window."""
    text = (ROOT / "book/scan_snap_text.md").read_text()
    checked = set(re.findall(r'claims\.check\("([\w.]+)", summary\["(\w+)"\]', text))
    assert set(late_rows.SCAN_SNAP_TEXT.items()) == checked
    pad = " " * len("stopped = late_verdicts.stopped_values(")
    call = (
        "late_verdicts.stopped_values(st.summary_of_runs(res), st.study_runs(res), late_rows.SCAN_SNAP_TEXT,\n"
        f"{pad}st.EVALUATED)"
    )
    assert call in text and REQUIRED_STOPPED in text


def test_the_release_step_of_the_staged_runs_lies_before_their_late_window():
    """At either size, the release step of book/induction_head's staged runs lies before their late window (its rows
    at the release step are left out of INDUCTION_HEAD: no cut reaches them)."""
    from companion.experiments import induction_head

    for e in [
        *induction_head.study_members("quick").values(),
        *induction_head.study_members("full").values(),
    ]:
        if e.frozen_first:
            steps = np.arange(0, e.steps + 1, e.eval_every)
            assert e.unfreeze_at < steps[train.late_mask(steps)][0]


@pytest.fixture(scope="module")
def layers_res(tmp_path_factory):
    """book/induction_layers's study on tiny runs: 20 steps evaluated every 2 (late window: steps 16, 18, 20)."""
    from companion.experiments import induction_layers

    return _tiny_study(induction_layers, tmp_path_factory, steps=20, eval_every=2, batch=4, n_test=8)


def test_induction_layers_views_cut_its_runs_and_remake_the_chapters_summary(layers_res):
    """The chapter's runs by name (study_runs undoes study_from_runs); summary_of_runs remakes the summary on runs of
    those names; each view cuts one run after one late evaluation, and a named row moves."""
    from companion.experiments import induction_layers

    res = layers_res
    runs = induction_layers.study_runs(res)
    assert list(runs) == list(induction_layers.study_members("quick")) == ["1 layer", "2 layers", "final W_F"]
    make = induction_layers.summary_of_runs(res)
    whole, again = induction_layers.summary(res), make(runs)
    assert list(again) == list(whole) and all(again[e] == whole[e] for e in whole)
    seen = late_verdicts.stopped_views(runs)
    assert len(seen) == 3 * len(runs) and [v["2 layers"].steps[-1] for v in seen[3:6]] == [16, 18, 20]
    at_each = [make(v) for v in seen]
    assert any(s[e] != whole[e] for s in at_each for e in late_rows.INDUCTION_LAYERS.values())


RECALL_TINY = {"d": 8, "seq_len": 12, "batch": 4, "steps": 5, "n_test": 8, "eval_every": 1, "dense_until": 0}
RECORDED_TINY = {
    "recall": RECALL_TINY,
    "finetune": {**RECALL_TINY, "pretrain_steps": 5},
    "triggers": RECALL_TINY,
    "architectures": RECALL_TINY,
    "synthetic_ioi": RECALL_TINY,
    "induction_head": {"steps": 10, "eval_every": 2, "batch": 4, "n_test": 8, "unfreeze_at": 4},
    "induction_layers": {"steps": 10, "eval_every": 2, "batch": 4, "n_test": 8},
    "khop": {"steps": 10, "eval_every": 2, "batch": 4, "n_test": 8},
    "induction_random_seeds": {"steps": 10, "eval_every": 2, "batch": 4, "n_test": 8},
    "scan_snap_text": {"vocab_size": 100, "d": 8, "d_hid": 8, "steps": 10, "eval_every": 2, "n_eval": 4},
    "allocation": {
        "d": 8,
        "seq_len": 8,
        "batch": 4,
        "steps": 4,
        "last": 2,
        "budgets": [256],
        "mlp_fracs": [0.3, 0.7],
        "lrs": [0.1, 0.3],
        "n_test": 8,
    },
}


@pytest.mark.parametrize("name", late_rows.RECORDED_ROWS)
def test_a_recording_keeps_the_views_of_its_chapters_rows_and_they_are_read_back(name, tmp_path, monkeypatch):
    """A recording of a family whose chapter judges rows at each evaluation of the late window keeps the views of
    those rows (RECORDED_ROWS), made on the values it stores (record._check_views); recorded_values reads them back
    before any curve. Every recordable with views is one of RECORDED_ROWS."""
    from companion import record
    from companion.experiments import induction_random_seeds

    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path / "cache"))
    # the seed study measures each seed on 2048 sequences per edit: 64 here
    monkeypatch.setattr(
        induction_random_seeds, "seed_measures", partial(induction_random_seeds.seed_measures, n_seq=64)
    )
    rows = late_rows.RECORDED_ROWS[name]
    with np.errstate(invalid="ignore"):  # tiny runs: first steps never reached, inf - inf
        rec = record.load(record.record(name, "quick", RECORDED_TINY[name], device="cpu", out_dir=tmp_path))
    assert list(rec.views) == list(rows) and all(len(v) > 0 for v in rec.views.values())
    assert any(np.isfinite(v).any() for v in rec.views.values())
    values, left_out = late_verdicts.recorded_values(rec, rows)
    assert left_out == [] and list(values) == list(rows)
    for cid, (value, at_each) in values.items():
        np.testing.assert_array_equal([value, *at_each], [rec.claims[cid], *rec.views[cid]])


def test_only_the_recorded_rows_experiments_make_views():
    """The recordables outside RECORDED_ROWS keep no views (the default, which reads no run)."""
    from companion import record

    others = [n for n in record._registry() if n not in late_rows.RECORDED_ROWS]
    assert others and all(record.experiment(n).views({}) == {} for n in others)
    assert set(late_rows.RECORDED_ROWS) <= set(record._registry())


def test_the_evaluations_measure_the_trigger_contrast_as_the_final_weights_give_it(run):
    """triggers_summary reads the trigger contrast at the last evaluation (after the last update): it is what
    matching_summary computes on the final weights, so book/triggers' values are those of the trained model, and a
    view at an earlier evaluation reads that evaluation's."""
    steps, ratio = run.series("match_ratio")
    _, final = summaries.matching_summary(run)
    assert steps[-1] == run.exp.steps and ratio[-1] == final["ratio"]
    assert run.series("match_argmax_ok")[1][-1] == sum(final["argmax_ok"])
    s = summaries.triggers_summary(run, run)
    assert s["ratio_one"] == final["ratio"] and s["argmax_frac"] == np.mean(final["argmax_ok"])
    window = ratio[train.late_mask(steps)]
    assert [summaries.triggers_summary(v, run)["ratio_one"] for v in late_verdicts.views(run)] == list(window)
