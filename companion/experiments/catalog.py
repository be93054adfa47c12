"""Every trained-model experiment of the book, by chapter, at a profile (what the chapters run).

The chapters build their configurations here, so that a test can run each
one's ``full`` configuration for a step on the CPU (``tests/test_full_config.py``)
and catch a crash, a shape error or a memory blow-up at paper scale before a
user's GPU does.

>>> sorted(experiments("quick"))[:3]
['architectures/MLP, linear', 'architectures/linear, MLP', 'architectures/none, none']
>>> architectures("full")["MLP, linear"].truncate
'F2.W_F'
"""

from __future__ import annotations

from companion import config
from companion.experiments import allocation
from companion.experiments.noisy_recall import IOI_LAYERS, RecallExperiment, ioi_experiment

# Fig. 11 and Appendix B.5: name -> (F1, F2 kinds, the matrix swept over rho)
ARCHS = {
    "MLP, MLP": (("mlp", "mlp"), "F2.U_in"),
    "MLP, linear": (("mlp", "linear"), "F2.W_F"),
    "linear, MLP": (("linear", "mlp"), "F2.U_in"),
    "none, none": (("none", "none"), "W_V^1"),
}
FIVE_TRIGGERS = (1, 39, 43, 53, 58)  # Appendix B.4: the characters ' ', 'a', 'e', 'o', 't'
# App. B.1's schedule. Quick fine-tuning runs 800 steps (400 until 2026-12-05): p(correct) with F2 dropped recovers
# only once the model escapes the noise collapse, as late as step 150 in seed 0, and at 400 steps its late mean still
# read the end of that rise (0.736 on one machine, 0.819 on another); by 800 the curve is flat over the last fifth at
# seeds 0-2 (the history of finetune.drop_f2_correct in data/claims.toml).
FINETUNE_STEPS = {"quick": dict(pretrain_steps=600, steps=800), "full": dict(pretrain_steps=2000, steps=2000)}


def recall(profile: str | None = None) -> RecallExperiment:
    """Section 3, Fig. 3: the core run."""
    return RecallExperiment.for_profile(profile)


def finetune(profile: str | None = None) -> RecallExperiment:
    """Appendix B.1: pre-train on alpha = 0, then fine-tune on alpha = 0.5."""
    return RecallExperiment.for_profile(
        profile, schedule="finetune", **FINETUNE_STEPS[config.get_profile(profile)]
    )


def triggers(profile: str | None = None) -> dict[str, RecallExperiment]:
    """Appendix B.4: one trigger and five triggers."""
    return {
        "one trigger": recall(profile),
        "five triggers": RecallExperiment.for_profile(profile, triggers=FIVE_TRIGGERS),
    }


def architectures(profile: str | None = None) -> dict[str, RecallExperiment]:
    """Appendix B.5, Figs. 10-13: the feed-forward kinds of :data:`ARCHS`."""
    return {name: RecallExperiment.for_profile(profile, ff=ff, truncate=m) for name, (ff, m) in ARCHS.items()}


# Recorded runs of the full-scale-only claims at larger sizes than the quick profile (``--set`` settings of the
# quick profile, as `python -m companion record NAME --profile quick --set ...` takes them): the largest each
# chapter's runs reach in about an hour or less on a 2-core CPU.
ARCH_LARGER = {"batch": 256, "eval_every": 50, "n_test": 512, "seq_len": 64, "steps": 1000}  # Figs. 11, 13
# Fig. 20: the paper's width and steps, quick T, twice the quick batch (the quick batch was 128 when it was recorded)
IOI_LARGER = {"batch": 128, "d": 256, "eval_every": 100, "steps": 2000}


def ioi(
    profile: str | None = None, optimizers: tuple[str, ...] = ("sgd", "adam")
) -> dict[tuple[str, int], RecallExperiment]:
    """Appendix J, Figs. 19-20: synthetic IOI with L layers, with the ``optimizers`` given (SGD: Fig. 19,
    book/synthetic_ioi_sgd; Adam: Fig. 20, book/synthetic_ioi).

    Raises:
        ValueError: an optimiser other than "sgd" and "adam", or none.
    """
    if not optimizers:
        raise ValueError("optimizers=() names none: allowed a tuple of 'sgd' and 'adam'")
    for opt in optimizers:
        config.check_choice("optimizer", opt, ("sgd", "adam"))
    depths = IOI_LAYERS[config.get_profile(profile)]
    return {
        (opt, L): ioi_experiment(L, opt, profile)
        for opt in ("sgd", "adam")
        if opt in optimizers
        for L in depths[opt]
    }


def experiments(profile: str | None = None) -> dict[str, RecallExperiment]:
    """Every recall-family configuration, named ``chapter/variant`` (duplicates across chapters kept once)."""
    out = {"noisy_recall": recall(profile), "finetune": finetune(profile)}
    out.update({f"triggers/{k}": v for k, v in triggers(profile).items() if k != "one trigger"})
    out.update({f"architectures/{k}": v for k, v in architectures(profile).items() if k != "MLP, MLP"})
    out.update({f"synthetic_ioi/{opt} L={L}": v for (opt, L), v in ioi(profile).items()})
    return out


def allocation_experiment(profile: str | None = None) -> allocation.AllocationExperiment:
    """Fig. 6: parameter allocation between MLPs and attention."""
    return allocation.AllocationExperiment.for_profile(profile)
