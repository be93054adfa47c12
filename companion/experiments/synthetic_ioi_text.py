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
from dataclasses import dataclass

from companion import claims
from companion.experiments import summaries
from companion.report import and_list, count_noun, count_word

LOST = 1.0  # nats of late clean loss above the lowest: a run that "loses what it learned" (the bar of
# ioi.larger_adam_shallow_unstable)
SGD_DEPTHS, ADAM_DEPTHS = (3, 5, 7), (3, 4)  # Fig. 19's depths; the depths of Fig. 20's rho claim
DEEP, SHALLOW = 5, 3  # Fig. 20's "L = 5 fails to converge", against L = 3


def _lost(stab, opt: str, L: int) -> bool:
    """Whether run (opt, L) diverged or ended more than :data:`LOST` above its lowest clean loss."""
    return not math.isnan(stab[f"{opt}{L}_diverged_at"]) or stab[f"{opt}{L}_rise"] > LOST


def _depths(Ls) -> str:
    """'$L = 3$', '$L = 3$ and $L = 5$', '$L = 3$, $L = 5$ and $L = 7$'."""
    return and_list([f"$L = {L}$" for L in Ls])


def _curve(stab, opt: str, L: int) -> str:
    """'lowest clean loss 1.67 at step 700, late 4.82' of run (opt, L)."""
    return (
        f"lowest clean loss {stab[f'{opt}{L}_best']:.2f} at step {stab[f'{opt}{L}_best_step']:.0f}, "
        f"late {stab[f'{opt}{L}_late']:.2f}"
    )


@dataclass(frozen=True)
class Larger:
    """What book/synthetic_ioi's account of its larger recording reads, computed once from ``runs`` ({(optimiser,
    L): run}, as :func:`summaries.ioi_recorded` reads them): the summary, the stability and peak-gain entries, the
    table and the runs that lose what they learned (:data:`LOST`)."""

    runs: dict
    summ: dict
    stab: dict
    peaks: dict
    table: dict
    unstable: list

    @classmethod
    def of(cls, runs: dict[tuple[str, int], summaries.RecallRun]) -> Larger:
        """What the account reads of ``runs``.

        Raises:
            ValueError: ``runs`` lacks a depth the claims name (SGD L = 3, 5, 7; Adam L = 3, 4, 5).
        """
        need = [("sgd", L) for L in SGD_DEPTHS] + [("adam", L) for L in (*ADAM_DEPTHS, DEEP)]
        missing = [k for k in need if k not in runs]
        if missing:
            raise ValueError(
                f"runs lack {missing}: the recording must hold SGD L = 3, 5, 7 and Adam L = 3, 4, 5"
            )
        stab = summaries.ioi_stability(runs)
        return cls(
            runs,
            summaries.ioi_summary(runs, deep=DEEP, shallow=SHALLOW),
            stab,
            summaries.ioi_peak_gains(runs),
            summaries.ioi_table(runs),
            [k for k in runs if _lost(stab, *k)],
        )

    def spread(self) -> str:
        """'in every run', 'in five of the eight runs'."""
        if len(self.unstable) == len(self.runs):
            return "in every run"
        return f"in {count_word(len(self.unstable))} of the {count_word(len(self.runs))} runs"


def _predicted(claim_id: str) -> str:
    """'predicted above 0.5': the row's prediction (:func:`companion.claims.prediction`)."""
    return f"predicted {claims.prediction(claim_id).words()}"


def overview_text(lg: Larger, quick_adam_gain: float) -> str:
    """The overview's clause (``quick_adam_gain``: the quick size's smallest gain of rho = 0.01 with Adam)."""
    return (
        f"training is unstable {lg.spread()}, and the late gain of $\\rho = 0.01$ with Adam is "
        f"{lg.summ['adam_gain']:.3f} at the worse of $L = 3, 4$ (at least {quick_adam_gain:.2f} at the quick size)"
    )


def deep_text(lg: Larger) -> str:
    """The L = 5 claim, opening the account, and which of the other predictions hold."""
    stab, deep = lg.stab, lg.summ["adam_deep"]
    deep_run = (
        f"The $L = {DEEP}$ Adam model learns until about step {stab[f'adam{DEEP}_best_step']:.0f} (clean loss "
        f"{stab[f'adam{DEEP}_best']:.2f}) and then "
        + ("loses it" if _lost(stab, "adam", DEEP) else "keeps it")
    )
    cid = "ioi.larger_adam_deep_fails"
    deep_holds = claims.prediction_outcome(cid, deep) == "holds"
    if deep_holds:
        gap = "diverging" if math.isinf(deep) else f"ending {deep:.1f} nats above $L = {SHALLOW}$"
        text = f"The paper's L = {DEEP} claim does. {deep_run}, {gap} (`{cid}`)."
    else:
        text = (
            f"The paper's L = {DEEP} claim does not, as registered. {deep_run}, but ends only {deep:.1f} nats above "
            f"$L = {SHALLOW}$ (`{cid}`, {_predicted(cid)})."
        )
    rest = {
        "ioi.larger_adam_rho": lg.summ["adam_gain"],
        "ioi.larger_sgd_drop_last": lg.summ["sgd_improved_n"],
        "ioi.larger_counting": lg.summ["sgd_counts_n"],
    }
    held = [c for c, v in rest.items() if claims.prediction_outcome(c, v) == "holds"]
    others = [k for k in lg.unstable if k != ("adam", DEEP)]
    alone = f"{'But the' if deep_holds else 'The'} failure is {'not ' if others else ''}$L = {DEEP}$'s alone"
    if not held:
        return f"{text} {alone}, and the rest of the registered predictions are refuted:"
    names = ", ".join(f"`{c}`" for c in held)
    return f"{text} {alone}; of the rest of the registered predictions, only {names} {'holds' if len(held) == 1 else 'hold'}:"


def adam_text(lg: Larger) -> str:
    """What each of the rho claim's Adam depths does along training."""
    adam, lost_before = [], False
    for L in ADAM_DEPTHS:
        tag = "; `ioi.larger_adam_shallow_unstable`" if L == SHALLOW else ""
        if not _lost(lg.stab, "adam", L):
            adam.append(
                f"$L = {L}$ ends near its lowest (late minus lowest {lg.stab[f'adam{L}_rise']:.2f}{tag})."
            )
        elif lost_before:
            adam.append(f"$L = {L}$ does too ({_curve(lg.stab, 'adam', L)}{tag}).")
        else:
            adam.append(
                f"$L = {L}$ with Adam also loses what it had learned ({_curve(lg.stab, 'adam', L)}{tag})."
            )
        lost_before = lost_before or _lost(lg.stab, "adam", L)
    return " ".join(adam)


def rho_text(lg: Larger) -> str:
    """The rho = 0.01 claim with Adam, late and along training."""
    gains = {L: lg.table["adam", L]["acc rho=0.01"] - lg.table["adam", L]["acc full"] for L in ADAM_DEPTHS}
    worse = min(gains, key=lambda L: gains[L] if not math.isnan(gains[L]) else -math.inf)
    cid, gain = "ioi.larger_adam_rho", lg.summ["adam_gain"]
    only = "" if claims.prediction_outcome(cid, gain) == "holds" else "only "
    text = (
        f"$\\rho = 0.01$ on the last MLP's input raises the late accuracy by {only}{gain:.3f} at the worse of "
        f"$L = 3, 4$ ($L = {worse}$; `{cid}`, {_predicted(cid)}). Along training it raises it by as much as "
        f"{lg.peaks[f'adam{worse}_peak_gain']:.2f} there (step {lg.peaks[f'adam{worse}_peak_step']:.0f}; "
        "{ref}`the Adam runs <fig-ioi-adam-larger>`), as in the paper."
    )
    if _lost(lg.stab, "adam", worse):
        text += f" The late gain is smaller because by then the $L = {worse}$ model has lost what it learned."
    return text


def _none_of(n: int) -> str:
    """'none', 'one', 'two' of the SGD depths."""
    return count_word(n) if n else "none"


def sgd_texts(lg: Larger) -> dict[str, str]:
    """The SGD claims' list: ``sgd`` (dropping the last MLP) and ``counting``."""
    runs, stab, peaks, table, summ = lg.runs, lg.stab, lg.peaks, lg.table, lg.summ
    gain_bar, count_bar = summaries.IOI_GAIN_BAR, summaries.IOI_COUNT_BAR
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
        sgd = (
            f"With SGD, every run diverged ({at}; `ioi.larger_sgd_diverges`), so no late gain can be read and "
            f"no depth gains more than {gain_bar:g} (`ioi.larger_sgd_drop_last`, predicted at every depth)."
        )
        if before:
            sgd += f" Before they diverged, dropping the last MLP raised the accuracy by as much as {before}."
        counting = (
            "Counting cannot be read either: no SGD depth finished, so none counts (`ioi.larger_counting`, "
            f"predicted above {count_bar:g} at every depth)."
        )
        return {"sgd": sgd, "counting": counting}
    sgd_gains = {L: table["sgd", L]["acc drop"] - table["sgd", L]["acc full"] for L in finished}
    low = min(sgd_gains, key=sgd_gains.get)
    if diverged:
        sgd = (
            f"With SGD, {count_noun(len(diverged), 'run')} diverged ({at}; `ioi.larger_sgd_diverges`), so the "
            f"smallest gain over the depths is NaN. Over the depths that finished it is "
            f"{summ['sgd_gain_finished']:.3f}, at $L = {low}$"
        )
    else:
        sgd = (
            f"With SGD, the smallest gain over the depths is {summ['sgd_gain_finished']:.3f}, at $L = {low}$"
        )
    if _lost(stab, "sgd", low):
        sgd += f", whose model learned and then collapsed ({_curve(stab, 'sgd', low)})"
    sgd += "."
    stable = [L for L in finished if L != low and not _lost(stab, "sgd", L) and sgd_gains[L] > 0]
    if stable:
        counts = [
            L for L in stable if table["sgd", L]["p(correct) drop"] > table["sgd", L]["p(distractor) drop"]
        ]
        sgd += (
            f" At {_depths(stable)}, which trained stably, dropping the last MLP does help"
            + (", and the model partly counts" if counts else "")
            + (f" at {_depths(counts)}" if counts and counts != stable else "")
            + (" (the table above)." if counts else ".")
        )
    improved, counted = int(summ["sgd_improved_n"]), int(summ["sgd_counts_n"])
    sgd += (
        f" So {_none_of(improved)} of the {count_word(len(SGD_DEPTHS))} depths "
        f"{'gains' if improved <= 1 else 'gain'} more than {gain_bar:g} (`ioi.larger_sgd_drop_last`, predicted at "
        "every depth)."
    )
    counting = (
        f"Counting over the depths that finished: {summ['sgd_counting_finished']:.3f}; {_none_of(counted)} of the "
        f"{count_word(len(SGD_DEPTHS))} depths {'is' if counted <= 1 else 'are'} above {count_bar:g} "
        "(`ioi.larger_counting`, predicted at every depth)."
    )
    return {"sgd": sgd, "counting": counting}


def larger_texts(runs: dict[tuple[str, int], summaries.RecallRun], quick_adam_gain: float) -> dict[str, str]:
    """book/synthetic_ioi's account of its larger recording (``runs``: {(optimiser, L): run}, as
    :func:`summaries.ioi_recorded` reads them; ``quick_adam_gain``: the quick size's smallest gain of rho = 0.01
    with Adam, for the overview), one function a paragraph. Keys: ``overview`` (the overview's clause), ``deep``
    (the L = 5 claim, opening the account), ``adam``, ``rho``, ``sgd`` and ``counting`` (its list), ``unstable``
    (its conclusion).

    Raises:
        ValueError: ``runs`` lacks a depth the claims name (SGD L = 3, 5, 7; Adam L = 3, 4, 5).
    """
    lg = Larger.of(runs)
    unstable = f"training is unstable {lg.spread()}" + (
        f"; L = {DEEP}'s failure with Adam is one case of it" if ("adam", DEEP) in lg.unstable else ""
    )
    return {
        "overview": overview_text(lg, quick_adam_gain),
        "deep": deep_text(lg),
        "adam": adam_text(lg),
        "rho": rho_text(lg),
        **sgd_texts(lg),
        "unstable": unstable,
    }
