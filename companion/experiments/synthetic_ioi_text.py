"""The sentences book/synthetic_ioi writes about its recording at the paper's width (Figs. 19 and 20 at d = 256),
computed from the runs so that they stay true when the batches change (issue 54's switch: under the numpy
generators one SGD run diverges and the Adam L = 5 run blows up; under the counter-based samplers every SGD run
diverges and every Adam run learns and then loses it). The verdict on each registered prediction is the row's
(:func:`companion.claims.prediction_outcome`); the numbers are those of :mod:`companion.experiments.summaries`.

A module apart from :mod:`companion.experiments.summaries` because it reads the claims registry: the runs' cache
keys cover the modules they import, and must not change when a claim row does.
"""

from __future__ import annotations

import math

from companion import claims
from companion.experiments import summaries
from companion.report import count_noun, count_word

LOST = 1.0  # nats of late clean loss above the lowest: a run that "loses what it learned" (the bar of
# ioi.larger_adam_shallow_unstable)
SGD_DEPTHS, ADAM_DEPTHS = (3, 5, 7), (3, 4)  # Fig. 19's depths; the depths of Fig. 20's rho claim
DEEP, SHALLOW = 5, 3  # Fig. 20's "L = 5 fails to converge", against L = 3


def _lost(stab, opt: str, L: int) -> bool:
    """Whether run (opt, L) diverged or ended more than :data:`LOST` above its lowest clean loss."""
    return not math.isnan(stab[f"{opt}{L}_diverged_at"]) or stab[f"{opt}{L}_rise"] > LOST


def _depths(Ls) -> str:
    """'$L = 3$', '$L = 3$ and $L = 5$', '$L = 3$, $L = 5$ and $L = 7$'."""
    named = [f"$L = {L}$" for L in Ls]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def _curve(stab, opt: str, L: int) -> str:
    """'lowest clean loss 1.67 at step 700, late 4.82' of run (opt, L)."""
    return (
        f"lowest clean loss {stab[f'{opt}{L}_best']:.2f} at step {stab[f'{opt}{L}_best_step']:.0f}, "
        f"late {stab[f'{opt}{L}_late']:.2f}"
    )


def larger_texts(runs: dict[tuple[str, int], summaries.RecallRun], quick_adam_gain: float) -> dict[str, str]:
    """book/synthetic_ioi's account of its larger recording (``runs``: {(optimiser, L): run}, as
    :func:`summaries.ioi_recorded` reads them; ``quick_adam_gain``: the quick size's smallest gain of rho = 0.01
    with Adam, for the overview). Keys: ``overview`` (the overview's clause), ``deep`` (the L = 5 claim, opening
    the account), ``adam``, ``rho``, ``sgd`` and ``counting`` (its list), ``unstable`` (its conclusion).

    Raises:
        ValueError: ``runs`` lacks a depth the claims name (SGD L = 3, 5, 7; Adam L = 3, 4, 5).
    """
    need = [("sgd", L) for L in SGD_DEPTHS] + [("adam", L) for L in (*ADAM_DEPTHS, DEEP)]
    missing = [k for k in need if k not in runs]
    if missing:
        raise ValueError(f"runs lack {missing}: the recording must hold SGD L = 3, 5, 7 and Adam L = 3, 4, 5")
    summ = summaries.ioi_summary(runs, deep=DEEP, shallow=SHALLOW)
    stab, peaks, table = (
        summaries.ioi_stability(runs),
        summaries.ioi_peak_gains(runs),
        summaries.ioi_table(runs),
    )
    unstable = [k for k in runs if _lost(stab, *k)]
    out = {}

    spread = (
        "in every run"
        if len(unstable) == len(runs)
        else f"in {count_word(len(unstable))} of the {count_word(len(runs))} runs"
    )
    out["overview"] = (
        f"training is unstable {spread}, and the late gain of $\\rho = 0.01$ with Adam is {summ['adam_gain']:.3f} at "
        f"the worse of $L = 3, 4$ (at least {quick_adam_gain:.2f} at the quick size)"
    )

    deep = summ["adam_deep"]
    deep_run = (
        f"The $L = {DEEP}$ Adam model learns until about step {stab[f'adam{DEEP}_best_step']:.0f} (clean loss "
        f"{stab[f'adam{DEEP}_best']:.2f}) and then "
        + ("loses it" if _lost(stab, "adam", DEEP) else "keeps it")
    )
    if claims.prediction_outcome("ioi.larger_adam_deep_fails", deep) == "holds":
        gap = "diverging" if math.isinf(deep) else f"ending {deep:.1f} nats above $L = {SHALLOW}$"
        out["deep"] = f"The paper's L = {DEEP} claim does. {deep_run}, {gap} (`ioi.larger_adam_deep_fails`)."
    else:
        out["deep"] = (
            f"The paper's L = {DEEP} claim does not, as registered. {deep_run}, but ends only {deep:.1f} nats above "
            f"$L = {SHALLOW}$ (`ioi.larger_adam_deep_fails`, predicted above 0.5)."
        )
    rest = {
        "ioi.larger_adam_rho": summ["adam_gain"],
        "ioi.larger_sgd_drop_last": summ["sgd_improved_n"],
        "ioi.larger_counting": summ["sgd_counts_n"],
    }
    held = [cid for cid, v in rest.items() if claims.prediction_outcome(cid, v) == "holds"]
    others = [k for k in unstable if k != ("adam", DEEP)]
    but = "But the" if claims.prediction_outcome("ioi.larger_adam_deep_fails", deep) == "holds" else "The"
    alone = f"{but} failure is {'not ' if others else ''}$L = {DEEP}$'s alone"
    if not held:
        out["deep"] += f" {alone}, and the rest of the registered predictions are refuted:"
    else:
        names = ", ".join(f"`{cid}`" for cid in held)
        verb = "holds" if len(held) == 1 else "hold"
        out["deep"] += f" {alone}; of the rest of the registered predictions, only {names} {verb}:"

    adam, lost_before = [], False
    for L in ADAM_DEPTHS:
        tag = "; `ioi.larger_adam_shallow_unstable`" if L == SHALLOW else ""
        if not _lost(stab, "adam", L):
            adam.append(
                f"$L = {L}$ ends near its lowest (late minus lowest {stab[f'adam{L}_rise']:.2f}{tag})."
            )
        elif lost_before:
            adam.append(f"$L = {L}$ does too ({_curve(stab, 'adam', L)}{tag}).")
        else:
            adam.append(
                f"$L = {L}$ with Adam also loses what it had learned ({_curve(stab, 'adam', L)}{tag})."
            )
        lost_before = lost_before or _lost(stab, "adam", L)
    out["adam"] = " ".join(adam)

    gains = {L: table["adam", L]["acc rho=0.01"] - table["adam", L]["acc full"] for L in ADAM_DEPTHS}
    worse = min(gains, key=lambda L: gains[L] if not math.isnan(gains[L]) else -math.inf)
    only = "" if claims.prediction_outcome("ioi.larger_adam_rho", summ["adam_gain"]) == "holds" else "only "
    out["rho"] = (
        f"$\\rho = 0.01$ on the last MLP's input raises the late accuracy by {only}{summ['adam_gain']:.3f} at the "
        f"worse of $L = 3, 4$ ($L = {worse}$; `ioi.larger_adam_rho`, predicted above 0.05). Along training it "
        f"raises it by as much as {peaks[f'adam{worse}_peak_gain']:.2f} there (step "
        f"{peaks[f'adam{worse}_peak_step']:.0f}; {{ref}}`the Adam runs <fig-ioi-adam-larger>`), as in the paper."
    )
    if _lost(stab, "adam", worse):
        out["rho"] += (
            f" The late gain is smaller because by then the $L = {worse}$ model has lost what it learned."
        )

    diverged = [L for L in SGD_DEPTHS if runs["sgd", L].diverged_at is not None]
    finished = [L for L in SGD_DEPTHS if L not in diverged]
    at = ", ".join(f"$L = {L}$ at step {int(runs['sgd', L].diverged_at)}" for L in diverged)
    if not finished:
        before = " and ".join(
            f"{peaks[f'sgd{L}_peak_gain']:.2f} ($L = {L}$)"
            for L in diverged
            if peaks[f"sgd{L}_peak_step"] > 0
            and peaks[f"sgd{L}_peak_gain"] > 0  # step 0: nothing learned yet
        )
        out["sgd"] = (
            f"With SGD, every run diverged ({at}; `ioi.larger_sgd_diverges`), so no late gain can be read and "
            f"no depth gains more than 0.05 (`ioi.larger_sgd_drop_last`, predicted at every depth)."
        )
        if before:
            out["sgd"] += (
                f" Before they diverged, dropping the last MLP raised the accuracy by as much as {before}."
            )
        out["counting"] = (
            "Counting cannot be read either: no SGD depth finished, so none counts (`ioi.larger_counting`, "
            "predicted above 0.5 at every depth)."
        )
    else:
        sgd_gains = {L: table["sgd", L]["acc drop"] - table["sgd", L]["acc full"] for L in finished}
        low = min(sgd_gains, key=sgd_gains.get)
        if diverged:
            out["sgd"] = (
                f"With SGD, {count_noun(len(diverged), 'run')} diverged ({at}; `ioi.larger_sgd_diverges`), so the "
                f"smallest gain over the depths is NaN. Over the depths that finished it is "
                f"{summ['sgd_gain_finished']:.3f}, at $L = {low}$"
            )
        else:
            out["sgd"] = (
                f"With SGD, the smallest gain over the depths is {summ['sgd_gain_finished']:.3f}, at $L = {low}$"
            )
        if _lost(stab, "sgd", low):
            out["sgd"] += f", whose model learned and then collapsed ({_curve(stab, 'sgd', low)})"
        out["sgd"] += "."
        stable = [L for L in finished if L != low and not _lost(stab, "sgd", L) and sgd_gains[L] > 0]
        if stable:
            counts = [
                L
                for L in stable
                if table["sgd", L]["p(correct) drop"] > table["sgd", L]["p(distractor) drop"]
            ]
            out["sgd"] += (
                f" At {_depths(stable)}, which trained stably, dropping the last MLP does help"
                + (", and the model partly counts" if counts else "")
                + (f" at {_depths(counts)}" if counts and counts != stable else "")
                + (" (the table above)." if counts else ".")
            )
        improved = int(summ["sgd_improved_n"])
        out["sgd"] += (
            f" So {count_word(improved) if improved else 'none'} of the {count_word(len(SGD_DEPTHS))} depths "
            f"{'gains' if improved <= 1 else 'gain'} more than 0.05 (`ioi.larger_sgd_drop_last`, predicted at every "
            "depth)."
        )
        counted = int(summ["sgd_counts_n"])
        out["counting"] = (
            f"Counting over the depths that finished: {summ['sgd_counting_finished']:.3f}; "
            f"{count_word(counted) if counted else 'none'} of the {count_word(len(SGD_DEPTHS))} depths "
            f"{'is' if counted <= 1 else 'are'} above 0.5 (`ioi.larger_counting`, predicted at every depth)."
        )

    out["unstable"] = f"training is unstable {spread}" + (
        f"; L = {DEEP}'s failure with Adam is one case of it" if ("adam", DEEP) in unstable else ""
    )
    return out
