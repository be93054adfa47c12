"""book/synthetic_ioi's account of its recording at the paper's width (issue 54's switch): its sentences follow
the runs of either sampler, and the peak gains they cite are read off the curves."""

import math

import pytest

from companion import config, record
from companion.experiments import catalog, summaries, synthetic_ioi_text


def _recorded(sampler):
    with config.using_sampler(sampler):
        big = record.latest("synthetic_ioi", "quick", catalog.IOI_LARGER)
    return summaries.ioi_recorded(big.curves)


@pytest.mark.parametrize("sampler", ["numpy", "counter"])
def test_the_larger_account_follows_the_recording(sampler):
    """numpy: one SGD run diverges, Adam L = 5 blows up (97.6 nats above L = 3), rho's late gain 0.029; counter:
    every SGD run diverges, every Adam run loses what it learned, L = 5 ends 0.3 nats above L = 3, rho's 0.071."""
    runs = _recorded(sampler)
    summ, stab = summaries.ioi_summary(runs), summaries.ioi_stability(runs)
    texts = synthetic_ioi_text.larger_texts(runs, 0.24)
    assert set(texts) == {"overview", "deep", "adam", "rho", "sgd", "counting", "unstable"}
    assert texts["deep"].startswith("The paper's L = 5 claim does.") == (summ["adam_deep"] > 0.5)
    assert ("only " in texts["rho"]) == (summ["adam_gain"] <= 0.05)
    assert f"{summ['adam_gain']:.3f}" in texts["rho"] and f"{summ['adam_gain']:.3f}" in texts["overview"]
    sgd_diverged = [L for L in (3, 5, 7) if runs["sgd", L].diverged_at is not None]
    assert texts["sgd"].startswith("With SGD, every run diverged") == (len(sgd_diverged) == 3)
    for L in sgd_diverged:
        assert f"$L = {L}$ at step {int(runs['sgd', L].diverged_at)}" in texts["sgd"]
    assert texts["counting"].startswith("Counting cannot be read") == (len(sgd_diverged) == 3)
    lost = [
        k for k in runs if not math.isnan(stab[f"{k[0]}{k[1]}_diverged_at"]) or stab[f"{k[0]}{k[1]}_rise"] > 1
    ]
    assert ("in every run" in texts["unstable"]) == (len(lost) == len(runs))
    assert ("$L = 4$ ends near its lowest" in texts["adam"]) == (("adam", 4) not in lost)


def test_the_larger_account_needs_the_claims_depths():
    runs = _recorded("numpy")
    del runs["adam", 4]
    with pytest.raises(ValueError, match=r"runs lack \[\('adam', 4\)\]"):
        synthetic_ioi_text.larger_texts(runs, 0.24)


def test_peak_gains_read_the_treatment_along_training():
    """SGD's treatment is the last MLP dropped, Adam's rho = 0.01; a diverged run's missing evaluations are left
    out, and a run with no evaluation where both accuracies are finite has no peak."""
    steps = [0, 100, 200]
    curves = {
        "step": {"sgd L=3": steps, "adam L=3": steps, "sgd L=7": [0]},
        "diverged_at": {"sgd L=3": None, "adam L=3": None, "sgd L=7": 5},
        "clean_pred_correct@1.0": {
            "sgd L=3": [0.0, 0.1, 0.2],
            "adam L=3": [0.0, 0.1, 0.2],
            "sgd L=7": ["nan"],
        },
        "clean_pred_correct@0.0": {
            "sgd L=3": [0.0, 0.5, "nan"],
            "adam L=3": [0.9, 0.9, 0.9],
            "sgd L=7": [0.1],
        },
        "clean_pred_correct@0.01": {
            "sgd L=3": [0.9, 0.9, 0.9],
            "adam L=3": [0.0, 0.2, 0.6],
            "sgd L=7": [0.1],
        },
    }
    p = summaries.ioi_peak_gains(summaries.ioi_recorded(curves))
    assert (p["sgd3_peak_gain"], p["sgd3_peak_step"]) == (pytest.approx(0.4), 100.0)
    assert (p["adam3_peak_gain"], p["adam3_peak_step"]) == (pytest.approx(0.4), 200.0)
    assert math.isnan(p["sgd7_peak_gain"]) and math.isnan(p["sgd7_peak_step"])
