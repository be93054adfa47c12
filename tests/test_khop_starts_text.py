"""book/khop_starts' sentences that follow the runs (issue 54's switch): on both samplers' recordings each verdict is
what the claim rows' predictions say of the values, and the sentences on the live probes follow their numbers."""

import pytest

from companion import config, statements
from companion.experiments import khop_starts, khop_starts_text, khop_studies

MOVES = {
    "mv": "khop_anystart_move",
    "dmv": "khop_doubling_move",
    "omv": "khop_onestart_move",
    "lmv": "khop_longstart_move",
}


def _studies(sampler):
    with config.using_sampler(sampler):
        anys = khop_studies.recorded_summary(
            khop_studies.recorded(khop_studies.ANYSTART.settings(), experiment="khop_anystart"), prefix=""
        )
        moves = {p: khop_studies.recorded({}, experiment=e).as_summary() for p, e in MOVES.items()}
    return anys, moves


@pytest.mark.parametrize("sampler", ["numpy", "counter"])
def test_the_studies_sentences_follow_their_recordings(sampler):
    """numpy: no seed learns four hops from any table (the prediction fails) and every crossed prediction fails the
    other way round; counter: two seeds learn them (it holds, p = 0.50) and two of the four crossed predictions
    fail, neither crossing alone making most seeds walk."""
    anys, moves = _studies(sampler)
    texts = khop_starts_text.anystart_texts(anys)
    solved = anys["anystart_solved_n"]
    assert texts["anystart_outcome"] == ("The prediction holds." if solved >= 1 else "The prediction fails.")
    assert texts["anystart_verdict"].endswith("no seed learns four hops") == (solved == 0)
    medians = {p: khop_starts.move_medians(m, p) for p, m in moves.items()}
    crossing = khop_starts_text.crossing_texts(
        moves["mv"], moves["dmv"], moves["omv"], moves["lmv"], medians, {"from any table": solved}
    )
    o, lm = moves["omv"], moves["lmv"]
    backwards = (
        o["omv_walk2_n"] >= 4 and o["omv_v2_n"] <= 3 and lm["lmv_walk2_n"] <= 3 and lm["lmv_v2_n"] >= 4
    )
    assert crossing["omv_verdict"].startswith("Every prediction") == backwards
    assert crossing["omv_note"].startswith("So the hypothesis was backwards.") == backwards
    for p in MOVES:
        assert f"{medians[p][f'{p}_v2_med']:.2f}" in crossing["omv_note"]
    assert ("as from table 1" in crossing["lmv_note"]) == (lm["lmv_v2_n"] == moves["dmv"]["dmv_v2_n"])
    assert ("none of the four studies" in crossing["omv_note"]) == (solved == 0)
    note = khop_starts_text.walkers_text(moves["mv"])
    walking = statements.seeds_entry(moves["mv"]["mv_walk2_seeds"])
    best = sorted(walking, key=lambda s: -moves["mv"][f"mv{s}_walk"])[:2]
    assert f"{min(best)} and {max(best)}" in note
    dmv = khop_starts_text.doubling_walk_text(moves["dmv"])
    assert (dmv == "no seed's hop 1 entry holds $v_2$") == (moves["dmv"]["dmv_walk2_n"] == 0)


def test_the_probes_sentences_follow_their_numbers():
    """The look inside and the run stopped at its move (live runs of seed 0, so given here as numbers): each step of
    the two-hop algorithm reads as not taken, taken in part or taken by its four-hop value against its two-hop one,
    and the verdicts count the refuted predictions."""
    numpy_like = {
        "a0_best_v2": 0.13, "a0_best_v3": 0.13, "a0_answers_v2": 0.13, "a0_chain_l1_e1_v2": 0.18,
        "a0_h2_chain_l1_e1_v2": 1.0, "a0_attention_l3_v1": 0.11, "a0_h2_attention_l3_v1": 0.97,
    }  # fmt: skip
    t = khop_starts_text.inside_texts(numpy_like)
    assert t["a0_verdict"] == "Two of the three predictions are refuted."
    assert t["a0_note"].startswith("Neither step") and t["a0_outcome"] == "are not made at all"
    t = khop_starts_text.inside_texts({**numpy_like, "a0_chain_l1_e1_v2": 0.65})
    assert (
        "the first step of the two-hop algorithm is taken in part" in t["a0_note"] and "0.65" in t["a0_note"]
    )
    assert t["a0_outcome"] == "are made only in part"
    move = {
        "m0_best_v2": 0.21, "m0_answers_v2": 0.22, "m0_chain_l1_e1_v2": 0.23, "m0_h2_chain_l1_e1_v2": 1.0,
        "m0_eattn_l1_e1_to2": 0.11, "m0_h2_eattn_l1_e1_to2": 0.84,
    }  # fmt: skip
    t = khop_starts_text.move_texts(move)
    assert t["m0_verdict"].startswith("Both predictions are refuted") and t["m0_outcome"] == "breaks"
    assert "does not hold $v_2$" in t["m0_note"] and "fails at the mere sight" in t["m0_note"]
    t = khop_starts_text.move_texts({**move, "m0_answers_v2": 0.38, "m0_chain_l1_e1_v2": 0.5})
    assert (
        t["m0_verdict"].startswith("One of the two predictions is refuted") and t["m0_outcome"] == "weakens"
    )
    assert "only in part (0.50 after block 1" in t["m0_note"]
