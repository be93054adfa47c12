"""The k-hop recordings agree where the training code promises they must.

One seed and a constant step size make a run cut at a step the same run as one recorded for fewer steps, and two
runs of one seed the same until the step where their configurations part (table 4 hidden, other last-stage data,
a delayed move, other stages). These were claim rows of the k-hop chapters (``expected = 0, tol = 0``); they
check our pipeline and the recordings, not a claim of a source or a study's result, so they are tests (issue 52).
Each reads the committed recordings the chapters read, through the same package calls, and needs no training:
book/khop_stall's studies as that chapter reads them under the sampler in force (``khop_stall.study_sampler``).
The promise holds between runs trained with the same arithmetic only (``recorded.same_rounding``: the thread count
and packing decide a run's rounding), so each pair compared here is first checked to be trained alike.
"""

import pytest

from companion import recorded
from companion.experiments import (
    khop_four_hops,
    khop_members,
    khop_onset,
    khop_probes,
    khop_stall,
    khop_stall_paths,
    khop_starts,
    khop_studies,
)

STALL = khop_stall.study_sampler()[0]  # the sampler whose recordings book/khop_stall reads


def _rec(experiment: str, settings: dict, sampler: str | None = None):
    return khop_studies.recorded(settings, experiment=experiment, sampler=sampler)


def _runs(experiment: str, settings: dict, sampler: str | None = None) -> dict[str, dict]:
    return khop_studies.recorded_runs(_rec(experiment, settings, sampler))[0]


@pytest.fixture(scope="module")
def seed_runs():
    return _runs("khop_seeds", khop_studies.SEED_SETTINGS)


@pytest.fixture(scope="module")
def stall_seed_runs():
    """The seed study as book/khop_stall reads it."""
    return _runs("khop_seeds", khop_studies.SEED_SETTINGS, STALL)


def interval_runs_now() -> dict[str, dict]:
    return khop_four_hops.interval_pool(_runs("khop_interval", khop_studies.INTERVAL_SETTINGS))


@pytest.fixture(scope="module")
def interval_runs():
    return interval_runs_now()


def test_a_run_cut_at_a_step_is_the_shorter_recording():
    """Seed 0's two runs of the seed study (16000 steps), cut at 8000, against the same runs recorded for 8000
    (book/khop_four_hops, "Seven seeds at two evaluation intervals"): the probes as book/khop_stall reads them,
    against the seed study made under the same sampler, trained alike (``cut_recordings`` refuses otherwise)."""
    short, long = khop_four_hops.cut_recordings()
    short_runs, long_runs = khop_studies.recorded_runs(short)[0], khop_studies.recorded_runs(long)[0]
    assert (
        khop_studies.prefix_gap({n: long_runs[n] for n in short_runs}, short_runs, "int")["int_prefix_gap"]
        == 0
    )


@pytest.mark.parametrize("experiment", ["khop_interval_long", "khop_interval_long250"])
def test_twice_the_budget_repeats_the_interval_study(experiment, interval_runs):
    """The interval study's failed runs recorded for 20000 steps repeat their 10000-step recordings."""
    recorded.same_rounding(
        _rec(experiment, khop_studies.INTERVAL_LONG_SETTINGS),
        _rec("khop_interval", khop_studies.INTERVAL_SETTINGS),
    )
    runs = _runs(experiment, khop_studies.INTERVAL_LONG_SETTINGS)
    assert (
        runs and khop_studies.prefix_gap(runs, {n: interval_runs[n] for n in runs}, "x")["x_prefix_gap"] == 0
    )


@pytest.mark.parametrize(
    ("longer", "shorter"),
    [("khop_hidden12_long", "khop_hidden12"), ("khop_reseed_long", "khop_reseed")],
)
def test_longer_studies_of_the_stall_repeat_their_first_budget(longer, shorter):
    """Table 4 hidden from blocks 1 and 2, and other last-stage data: the runs recorded for 16000 steps repeat
    the same runs recorded for 8000 (book/khop_stall)."""
    recorded.same_rounding(
        _rec(longer, khop_studies.SEED_SETTINGS, STALL), _rec(shorter, khop_probes.PROBE_SETTINGS, STALL)
    )
    runs = _runs(longer, khop_studies.SEED_SETTINGS, STALL)
    shorter_runs = _runs(shorter, khop_probes.PROBE_SETTINGS, STALL)
    assert khop_studies.prefix_gap(runs, shorter_runs, "x")["x_prefix_gap"] == 0


@pytest.mark.parametrize(
    ("experiment", "study", "entry"),
    [("khop_hidden", khop_stall.HIDDEN, "hid_gap"), ("khop_hidden12", khop_stall.HIDDEN12, "hid12_gap")],
)
def test_hiding_table_4_changes_nothing_before_it_is_shown(experiment, study, entry, stall_seed_runs):
    """Table 4 hidden from the first step: the same runs as the seed study's until the move to four hops."""
    runs = _runs(experiment, khop_probes.PROBE_SETTINGS, STALL)
    assert khop_stall.hidden_vs_plain(runs, stall_seed_runs, study=study)[entry] == 0


def test_other_last_stage_data_changes_nothing_before_the_last_stage(stall_seed_runs):
    runs = _runs("khop_reseed", khop_probes.PROBE_SETTINGS, STALL)
    assert khop_stall_paths.reseed_vs_plain(runs, stall_seed_runs)["reseed_gap"] == 0


def test_a_delayed_move_changes_nothing_before_it(stall_seed_runs):
    runs = _runs("khop_delay", khop_probes.PROBE_SETTINGS, STALL)
    assert khop_stall_paths.delay_vs_plain(runs, stall_seed_runs)["delay_gap"] == 0


def test_runs_read_along_their_last_stage_repeat_the_plain_runs(stall_seed_runs):
    """Keeping states to read them does not change the training: the onset study's runs against the same runs
    recorded without keeping states."""
    onset = _runs("khop_onset", khop_probes.PROBE_SETTINGS, STALL)
    reseed = _runs("khop_reseed", khop_probes.PROBE_SETTINGS, STALL)
    plain = {n: r for n, r in (stall_seed_runs | reseed).items() if n in onset}
    assert khop_studies.prefix_gap(plain, onset, "x")["x_prefix_gap"] == 0


def test_a_state_kept_at_the_move_is_the_run_trained_to_it():
    """The stage-entry study trains each run up to its move to the last stage; it is the longer run's prefix,
    and the state the onset study keeps at the move reads as that run does (``onset_entry_gap``)."""
    entry = khop_studies.recorded(khop_probes.PROBE_SETTINGS, "khop_stage_entry", STALL).as_summary()
    onset = khop_studies.recorded(khop_probes.PROBE_SETTINGS, "khop_onset", STALL).as_summary()
    assert entry["nprobe_prefix_gap"] == 0
    assert khop_onset.onset_vs_entry(onset, entry)["onset_entry_gap"] == 0


def test_other_stages_change_nothing_before_the_runs_part():
    """Stages 1, 2, 4 against stages 1, 2, 3, 4 (recorded with the doubling study), over the seeds whose runs
    with stages 1, 2, 3, 4 were trained alike (under the counter sampler seeds 3 to 6: the seed study's runs of
    seeds 0 to 2 trained on one thread, which parts them by rounding alone); one-hop or longer examples
    from any table against their parent studies, until the move to two hops (book/khop_starts)."""
    split = khop_four_hops.split_rounding(
        _rec("khop_doubling", khop_studies.DOUBLING.settings()), khop_studies.DOUBLING
    )
    assert split["doubling_split_alike_n"] >= 4 and split["doubling_split_alike_gap"] == 0
    parents = {
        name: khop_studies.seeded(_runs(f"khop_{name}", variant.settings()))
        for name, variant in {"doubling": khop_studies.DOUBLING, "anystart": khop_studies.ANYSTART}.items()
    }
    for name, variant, parent in (
        ("onestart", khop_studies.ONESTART, "anystart"),
        ("longstart", khop_studies.LONGSTART, "doubling"),
    ):
        runs = khop_studies.seeded(_runs(f"khop_{name}", variant.settings()))
        assert khop_starts.stage_gap(runs, parents[parent], 1, name)[f"{name}_stage_gap"] == 0


@pytest.mark.parametrize(
    "experiment",
    ["khop_hidden", "khop_hidden12", "khop_reseed", "khop_delay", "khop_onset", "khop_stage_entry"],
)
def test_the_stall_studies_set_against_the_seed_study_were_trained_as_it_was(experiment):
    """The studies above compared with the seed study to the last digit (book/khop_stall) round as it does."""
    recorded.same_rounding(
        _rec(experiment, khop_probes.PROBE_SETTINGS, STALL),
        _rec("khop_seeds", khop_studies.SEED_SETTINGS, STALL),
    )


@pytest.mark.parametrize("every, experiment", [(100, "khop_interval_long"), (250, "khop_interval_long250")])
def test_the_longer_interval_studies_hold_the_runs_their_rule_follows_up(every, experiment, interval_runs):
    """Under the build in force, the longer studies hold the interval study's runs that their registered rule
    follows up (``khop_four_hops.followed_up``): every 100 steps each unsolved run (the recording holds all four of
    the study's own runs: the step-size variant's base at 15000 steps), every 250 the unsolved runs whose budget is
    in doubt, those only. A build under other batches picks other runs, and the studies are recorded again."""
    chosen = khop_four_hops.followed_up(every, interval_runs)["seeds"]
    held = {
        seed
        for seed, _ in map(
            khop_members.interval_of, _rec(experiment, khop_studies.INTERVAL_LONG_SETTINGS).curves["step"]
        )
    }
    assert chosen and (set(chosen) <= held if every == 100 else set(chosen) == held)


def test_the_rule_picks_the_runs_the_longer_studies_were_registered_with():
    """Under the numpy generators, whose runs the studies were registered after (2026-11-25), the rule gives the
    runs named then: seeds 3-6 every 100 steps (3 and 6 flat at chance), seeds 3 and 6 every 250 (3 flat)."""
    pool = khop_four_hops.interval_pool(
        _runs("khop_interval", khop_studies.INTERVAL_SETTINGS, "numpy"),
        _runs("khop_seeds", khop_studies.SEED_SETTINGS, "numpy"),
    )
    assert khop_four_hops.followed_up(100, pool) == {"seeds": (3, 4, 5, 6), "flat": (3, 6)}
    assert khop_four_hops.followed_up(250, pool) == {"seeds": (3, 6), "flat": (3,)}
