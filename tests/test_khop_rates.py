"""The k-hop rates study (the slide's K1 and K2 as steps against k): its members, and the summary read off runs
written by hand, censoring included."""

import math

import numpy as np
import pytest

from companion.experiments import khop_rates as kr


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_members_vary_only_k_data_and_seed(profile):
    members = kr.rate_members(profile)
    assert len(members) == len(kr.RATE_KS[profile]) * len(kr.RATE_DATA) * len(kr.RATE_SEEDS)
    assert {e.k for e in members.values()} == set(kr.RATE_KS[profile])
    assert {e.layers for e in members.values()} == {kr.rate_depth(profile)}  # the same model at every k
    shared = {(e.N, e.d, e.heads, e.batch, e.steps, e.eval_every, e.lr) for e in members.values()}
    assert len(shared) == 1
    for name, e in members.items():
        assert kr._parse(name) == (e.k, e.data, e.seed)


def test_a_name_of_another_study_is_refused():
    with pytest.raises(ValueError, match="k=<k>, <data>, seed <s>"):
        kr._parse("k=2, cumulative, seed 0")


def _run(k: int, learned: float | None, every: int = 100, budget: int = 1000) -> dict:
    """A run at k hops whose accuracy at k hops jumps to 1 at step ``learned`` (None: never)."""
    steps = np.arange(0, budget + 1, every)
    acc = np.full((len(steps), k), 0.95)
    acc[:, -1] = 0.1 if learned is None else np.where(steps >= learned, 1.0, 0.1)
    return {"step": steps, "acc": acc, "stage": np.ones(len(steps)), "loss": np.zeros(len(steps)), "N": 8}


def test_summary_takes_the_slower_seed_and_counts_the_censored():
    learned = {
        (2, "direct"): (300, 500),
        (4, "direct"): (None, 900),
        (2, "mixture"): (100, 200),
        (4, "mixture"): (300, 400),
        (2, "curriculum"): (None, None),
        (4, "curriculum"): (600, 700),
    }
    runs = {
        kr.rate_name(k, data, seed): _run(k, at)
        for (k, data), ats in learned.items()
        for seed, at in enumerate(ats)
    }
    s = kr.rate_summary(runs)
    assert (s["rate_budget"], s["rate_seeds"], s["rate_k_min"], s["rate_k_max"]) == (1000, 2, 2, 4)
    assert s["rate_mixture_k2"] == 200 and s["rate_mixture_k4"] == 400 and s["rate_mixture_growth"] == 2.0
    assert s["rate_direct_k4"] == math.inf and s["rate_direct_k4_n"] == 1
    assert s["rate_direct_growth"] == math.inf and s["rate_direct_growth_low"] == 1000 / 500
    assert math.isnan(s["rate_curriculum_growth"]) and s["rate_curriculum_k2_n"] == 0


def test_a_run_cut_short_is_censored_at_its_own_last_step():
    """A run stopped early (late_verdicts' views cut one run) keeps the budget of the others and, never reaching
    the level, bounds the factor by its own last step, not by the budget it did not train."""
    runs = {kr.rate_name(k, "mixture", s): _run(k, 100 * k * (s + 1)) for k in (2, 4) for s in (0, 1)}
    runs |= {n.replace("mixture", d): r for n, r in runs.items() for d in ("direct", "curriculum")}
    slow = kr.rate_name(4, "direct", 1)
    runs[slow] = {key: v[:8] if key != "N" else v for key, v in _run(4, None).items()}  # steps 0..700
    s = kr.rate_summary(runs)
    assert s["rate_budget"] == 1000 and s["rate_direct_k4_n"] == 1 and s["rate_direct_growth"] == math.inf
    assert s["rate_direct_growth_low"] == 700 / 400 and s["rate_mixture_growth_low"] == 800 / 400
    at = kr.steps_to_level(runs, censored=True)
    assert list(at[(4, "direct")]) == [400.0, 700.0] and list(kr.steps_to_level(runs)[(4, "direct")]) == [
        400,
        math.inf,
    ]


def test_rate_lines_marks_the_censored_runs_at_the_budget():
    import matplotlib

    matplotlib.use("Agg")
    from companion.figures import khop as khop_figures

    at = {
        (2, "direct"): np.array([np.inf, np.inf]),
        (4, "direct"): np.array([np.inf, np.inf]),
        (2, "mixture"): np.array([300.0, 500.0]),
        (4, "mixture"): np.array([900.0, np.inf]),
    }
    fig = khop_figures.rate_lines(at, 1000, 0.9)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and [t.get_text() for t in ax.get_xticklabels()] == ["2", "4"]
    censored = [line for line in ax.lines if line.get_marker() == "^"]
    assert len(censored) == 5 and all(line.get_ydata()[0] == 1000 for line in censored)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[:2] == ["direct", "mixture"] and any(lab.startswith("O(k)") for lab in labels)


@pytest.mark.parametrize("sampler", ["numpy", "counter"])
def test_the_chapters_sentences_follow_the_recorded_rates_of_either_sampler(sampler):
    """book/khop's sentences on the rates study (issue 54's switch): under numpy the mixture reaches three hops by
    step 3000 and direct training no k; under counter the mixture reaches no k = 3 within the budget in every seed,
    and direct training reaches k = 2 in one seed."""
    from companion import config, record
    from companion.experiments import khop_studies

    with config.using_sampler(sampler):
        rec = record.latest("khop_rates", "quick")
        runs = khop_studies.recorded_runs(rec)[0]
        texts = kr.rate_texts(kr.rate_summary(runs), runs)
    if sampler == "numpy":
        assert (
            texts["rate_mixture_steps_text"] == "600 steps at two hops, 3000 at three, more than 6000 at four"
        )
        assert (
            texts["rate_direct_reach_text"]
            == "no seed reaches the level at $k = 2$, $k = 3$ and $k = 4$ within the budget"
        )
        assert texts["rate_mixture_factor_text"].startswith("a factor of at least 10 from $k = 2$ to $k = 4$")
    else:
        assert texts["rate_mixture_steps_text"].startswith("600 steps at two hops, more than 6000 at three")
        assert texts["rate_direct_reach_text"].startswith(
            "at $k = 2$ one of the two seeds reaches the level (by step 2300)"
        )
