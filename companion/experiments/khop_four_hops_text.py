"""The sentences of book/khop_four_hops whose words follow the runs (issue 54: other batches give other outcomes,
and a sentence typed beside a glued value goes stale with it): each section's text computed from its summary and
runs, and the outcome of each registered prediction read from its value (:func:`companion.claims.prediction_outcome`).
Apart from :mod:`companion.experiments.khop_four_hops` so that the modules whose runs are cached on their imports
do not import the claims registry."""

from __future__ import annotations

import math

import numpy as np

from companion import claims, config, report
from companion.experiments.khop_curves import learned_at
from companion.experiments.khop_four_hops import LR, by_interval, interval_ends, second_half_gain, solved_run
from companion.experiments.khop_members import EXPLORED, EXPLORED_EVERY, interval_of
from companion.experiments.khop_studies import WIDE, seed_list, seed_name, seed_phrase
from companion.statements import seeds_entry


def _seeds(text: str) -> list[int]:
    return sorted(seeds_entry(text))


def _lower(sentence: str) -> str:
    return sentence[:1].lower() + sentence[1:]


def seeds_note(seeds: str) -> str:
    """A parenthesis naming the seeds :func:`companion.experiments.khop_studies.seed_list` gives, empty for none.

    >>> seeds_note("1"), seeds_note("1, 4"), seeds_note("none")
    (' (seed 1)', ' (seeds 1, 4)', '')
    """
    return "" if seeds == "none" else f" (seed{'s' if ',' in seeds else ''} {seeds})"


def predictions_text(outcomes: dict[str, str], capital: bool = False) -> str:
    """How many of a study's registered predictions ({row: "holds"/"refuted"},
    :func:`companion.claims.prediction_outcome`) are refuted, as a clause.

    >>> predictions_text({"a": "refuted", "b": "holds", "c": "refuted"}, capital=True)
    'Two of the three predictions are refuted'
    >>> predictions_text({"a": "refuted", "b": "refuted"}), predictions_text({"a": "holds", "b": "holds", "c": "holds"})
    ('both predictions are refuted', 'all the predictions hold')
    """
    n, r = len(outcomes), sum(o == "refuted" for o in outcomes.values())
    every = "both" if n == 2 else f"all {report.count_word(n)}"
    if r == 0:
        text = f"{'both' if n == 2 else 'all the'} predictions hold"
    elif r == n:
        text = f"{every} predictions are refuted"
    else:
        text = f"{report.count_word(r)} of the {report.count_word(n)} predictions {'is' if r == 1 else 'are'} refuted"
    return text[:1].upper() + text[1:] if capital else text


def outcomes(observed: dict[str, float]) -> dict[str, str]:
    """{row: what its value says of the registered prediction} (:func:`companion.claims.prediction_outcome`)."""
    return {cid: claims.prediction_outcome(cid, value) for cid, value in observed.items()}


def seeds_texts(seeds: report.Summary, runs: dict[str, dict], solved: float = 0.95) -> report.Summary:
    """The seed study's sentences on seed 0 (its summary and runs): the previous section's run continued for
    twice the budget (``seeds_s0_text``), and the same seed advancing every 250 steps, the exploratory run
    (``seeds_alt_text``): reproduced where it learns every hop count, otherwise what it does instead, and what the
    pair says of the stall."""
    zero, alt = runs[seed_name(0)], runs[EXPLORED]
    zero_ok, alt_ok = solved_run(zero, solved), solved_run(alt, solved)
    zero_low = float(np.asarray(zero["acc"])[-1].min())
    zero_text = "Seed 0 is the previous section's depth-4 run continued: twice the budget " + (
        f"helps, and it learns four hops at step {learned_at(zero, 0.9)[-1]:.0f}."
        if zero_ok
        else f"does not help, and it ends at chance on four hops (lowest final accuracy {zero_low:.2f})."
    )
    stage, hop, low = seeds["seeds_alt_stagek_at"], seeds["seeds_alt_hopk_at"], seeds["seeds_alt_min"]
    moved = (
        f"moves to its last stage at step {stage:.0f}"
        if math.isfinite(stage)
        else "never reaches its last stage"
    )
    head = f"The same seed advancing every {EXPLORED_EVERY} steps {moved}"
    if alt_ok:
        text = f"{head} and learns four hops at step {hop:.0f}: the exploratory run, reproduced."
    else:
        text = (
            f"{head} and does not learn four hops within {seeds['seeds_steps']} steps (lowest final accuracy "
            f"{low:.2f}): the exploratory run{_made_otherwise()} is not reproduced."
        )
    if zero_ok != alt_ok:
        text += (
            " The two runs of seed 0 differ only in when the curriculum advances, so the stall belongs to one "
            "trajectory, not to the seed."
        )
    else:
        text += f" Seed 0 {'learns four hops' if zero_ok else 'stalls'} at both intervals here."
    return report.Summary(
        {
            "seeds_s0_text": (zero_text, "what seed 0 does with twice the budget"),
            "seeds_alt_text": (text, "what seed 0 advancing every 250 steps does"),
        }
    )


def _made_otherwise() -> str:
    sampler = config.sampler()
    return (
        ""
        if sampler == "numpy"
        else f", made with the numpy generators' batches and rerun here with the {sampler} sampler's,"
    )


INTERVAL_ROWS = {
    "khop.k4_interval_solved100": "int_solved100",
    "khop.k4_interval_solved250": "int_solved250",
    "khop.k4_interval_slower_solves_more": "int_gap_n",
    "khop.k4_interval_none_lost": "int_only_fast_n",
    "khop.k4_interval_stalls_last": "int_unsolved_early_n",
}


def interval_texts(interval: report.Summary) -> report.Summary:
    """The interval study's sentences whose words follow its runs: how many of its five predictions are refuted
    (``int_predictions_text``), the seeds solved at one interval only (``int_only_text``), and whether every
    failure came on the last stage (``int_early_outcome``)."""
    said = outcomes({cid: interval[key] for cid, key in INTERVAL_ROWS.items()})
    slow = seed_phrase(
        interval["int_only_slow_seeds"],
        "learns four hops only every 250 steps",
        "learn four hops only every 250 steps",
    )
    fast = _lower(seed_phrase(interval["int_only_fast_seeds"], "does only every 100", "do only every 100"))
    return report.Summary(
        {
            "int_predictions_text": (
                predictions_text(said, capital=True),
                "how many predictions are refuted",
            ),
            "int_only_text": (f"{slow}, and {fast}.", "the seeds solved at one interval only"),
            "int_early_outcome": (
                said["khop.k4_interval_stalls_last"],
                "every failure on the last stage?",
            ),
        }
    )


def long_texts(
    summary: report.Summary, runs: dict[str, dict], pool: dict[str, dict], prefix: str
) -> report.Summary:
    """The sentences of a longer interval study (``prefix`` ``"ilong_"`` or ``"il250_"``: its summary, its runs and
    :func:`interval_pool`'s, at the shorter budget) whose words follow the runs: why the runs were followed up
    (``<p>doubt_text``: every 250 steps, the reason of each), what they did (``<p>text``) and, every 100 steps, the
    recorded runs the rule does not follow (``<p>unfollowed_text``, "" for none)."""
    p = prefix
    every = interval_of(next(iter(runs)))[1]
    followed, flat = _seeds(summary[f"{p}followed"]), _seeds(summary[f"{p}flat"])
    by_seed = {interval_of(n)[0]: r for n, r in runs.items()}
    short = by_interval(pool)[every]
    solved = [s for s in followed if solved_run(by_seed[s], 0.95)]
    stalled = [s for s in followed if s not in solved]
    steps, short_steps = summary[f"{p}steps"], int(np.asarray(next(iter(short.values()))["step"])[-1])
    rows = {
        "ilong_": ("khop.k4_interval_long_some_learn", "khop.k4_interval_long_flat_stay"),
        "il250_": ("khop.k4_interval_long250_rising_learns", "khop.k4_interval_long250_flat_stays"),
    }[p]
    said = outcomes(dict(zip(rows, (summary[f"{p}solved_n"], summary[f"{p}flat_solved_n"]))))
    first, second = said.values()
    learned = ", ".join(f"seed {s} at step {summary[f'{p}s{s}_hk_at']:.0f}" for s in solved)
    out = {}
    if p == "ilong_":
        text = (
            f"{report.count_word(len(solved), capital=True) if solved else 'None'} of the "
            f"{report.count_word(len(followed))} runs it follows up (seeds {seed_list(followed)}, unsolved at "
            f"{short_steps} steps) {'learns' if len(solved) <= 1 else 'learn'} "
            f"four hops in {steps} steps{': ' + learned if solved else ''}. We had predicted that at least one would "
            f"(registered while seed 4's fourth hop was rising, under the numpy generators' batches): {first}. And that "
            f"those flat at chance at {short_steps} steps (seeds {seed_list(flat)}) stay unsolved: {second}"
            + (
                f", {seed_phrase(seed_list(s for s in flat if s in solved), 'learns', 'learn').lower()} all the same"
                if second == "refuted"
                else ""
            )
            + "."
        )
        extra = sorted(set(by_seed) - set(followed))
        out[f"{p}unfollowed_text"] = (
            f"The recording also holds seed{'s' if len(extra) > 1 else ''} {seed_list(extra)}, solved within "
            f"{short_steps} steps and not followed up: the step-size study's base runs at 15000 steps."
            if extra
            else "",
            "the recorded runs the rule does not follow up",
        )
    else:
        parts = [f"{predictions_text(said, capital=True)}."]
        parts += [
            f"Seed {s} learns four hops at step {summary[f'{p}s{s}_hk_at']:.0f} and ends at "
            f"{summary[f'{p}s{s}_final']:.2f}: a late learner."
            for s in solved
        ]
        parts += [
            f"Seed {s} {'stays flat at chance' if s in flat else 'does not learn four hops'} "
            f"({summary[f'{p}s{s}_final']:.2f} at the end)."
            for s in stalled
        ]
        parts.append(
            f"So the shorter budget undercounts the runs advancing every {every} steps by "
            f"{report.count_word(len(solved))} seed{'s' if len(solved) > 1 else ''}."
            if solved
            else f"So the shorter budget did not undercount the runs advancing every {every} steps."
        )
        text = " ".join(parts)
        ends = interval_ends(pool, 0.95)[every]  # the rule's own reasons for following each run up
        reasons = []
        for s in followed:
            r, there = short[s], ends["on_last"][s]
            why = []
            if -math.inf < there < ends["slowest"]:
                why.append(
                    f"moved to its last stage at step {short_steps - there:.0f}, {there:.0f} steps before the end"
                )
            if s not in flat:
                why.append(
                    f"ended at {np.asarray(r['acc'])[-1, -1]:.3f} on four hops, above twice chance ({2 / r['N']:.3f})"
                )
            reasons.append(f"seed {s} {' and '.join(why)}")
        out[f"{p}doubt_text"] = (
            f"The slowest solved run (at either interval) needed {ends['slowest']:.0f} steps on its "
            "last stage; " + "; ".join(reasons) + ".",
            "why each followed run's budget was in doubt",
        )
    if stalled:
        gain = max(second_half_gain(by_seed[s]) for s in stalled)
        text += (
            f" Over the second half of the budget no run that stays unsolved rises on four hops by more than {gain:.2f}"
            + (": these runs are stalls, not late learners." if not solved else ".")
        )
    out[f"{p}text"] = (text, "what the followed runs did with twice the budget")
    return report.Summary(out)


VARIANTS = {"wide": WIDE, "lr": LR}  # the studies that vary one setting of the base runs, by tag

VARIANT_ROWS = {
    "wide": {
        "khop.k4_wide_solved": ("wide_solved", "most seeds"),
        "khop.k4_wide_gains": ("wide_gap_n", "more than at d = 32"),
        "khop.k4_wide_none_lost": ("wide_lost_n", "none lost"),
        "khop.k4_wide_stalls_last": ("wide_unsolved_early_n", "failures on the last stage only"),
    },
    "lr": {
        "khop.k4_lr_solved": ("lr_solved", "most seeds"),
        "khop.k4_lr_gains": ("lr_gap_n", "more than at the profile's step size"),
        "khop.k4_lr_none_lost": ("lr_lost_n", "none lost"),
        "khop.k4_lr_stalls_last": ("lr_unsolved_early_n", "failures on the last stage only"),
    },
}


def variant_texts(summary: report.Summary, runs: dict[int, dict], tag: str) -> report.Summary:
    """The sentences of a seven-seed variant study (``tag``: ``"wide"``, ``"lr"``; its summary and its runs by seed)
    whose words follow the runs: how many of its four predictions are refuted (``<tag>_predictions_text``), each
    with its outcome (``<tag>_verdicts_text``), the solved seeds of both populations as parentheses
    (``<tag>_solved_note``, ``<tag>_base_solved_note``), the seeds lost and gained (``<tag>_only_text``), and the
    runs that fail before their last stage (``<tag>_early_text``)."""
    rows = VARIANT_ROWS[tag]
    said = outcomes({cid: summary[key] for cid, (key, _) in rows.items()})
    base = VARIANTS[tag].base
    verdicts = "; ".join(f'"{label}" {said[cid]}' for cid, (_, label) in rows.items())
    moves = (
        f"{seed_phrase(summary[f'{tag}_lost_seeds'], 'is lost', 'are lost')}, "
        f"{_lower(seed_phrase(summary[f'{tag}_gained_seeds'], 'is gained', 'are gained'))}"
    )
    return report.Summary(
        {
            f"{tag}_predictions_text": (predictions_text(said), "how many predictions are refuted"),
            f"{tag}_verdicts_text": (verdicts, "each prediction and its outcome"),
            f"{tag}_solved_note": (seeds_note(summary[f"{tag}_solved_seeds"]), "the solved seeds"),
            f"{tag}_base_solved_note": (
                seeds_note(summary[f"{tag}_{base}_solved_seeds"]),
                "the base's solved seeds",
            ),
            f"{tag}_only_text": (moves, "the seeds lost and gained"),
            f"{tag}_early_text": (early_text(runs), "the runs that fail before their last stage"),
            f"{tag}_pace_text": (
                pace_text(summary, tag),
                "which stages the variant's solved runs take longer on",
            ),
        }
    )


PACE = {"wide": "in the wider model", "lr": "at the smaller step"}


def pace_text(summary: report.Summary, tag: str) -> str:
    """Which stages a variant's solved runs take longer on than the base's (medians: the move to the last stage,
    the wait there before the k-th hop), as a sentence.

    >>> s = {"lr_move_med": 3000, "lr_base_move_med": 1400, "lr_wait_med": 5900, "lr_base_wait_med": 6400}
    >>> pace_text(s, "lr")
    'The stages before the last are slower at the smaller step; the last is not.'
    """
    base = VARIANTS[tag].base
    before = summary[f"{tag}_move_med"] > summary[f"{tag}_{base}_move_med"]
    last = summary[f"{tag}_wait_med"] > summary[f"{tag}_{base}_wait_med"]
    where = PACE[tag]
    return {
        (True, True): f"Every stage is slower {where}.",
        (True, False): f"The stages before the last are slower {where}; the last is not.",
        (False, True): f"Only the last stage is slower {where}.",
        (False, False): f"No stage is slower {where}.",
    }[before, last]


def early_text(runs: dict[int, dict], level: float = 0.9) -> str:
    """A sentence on the runs ({seed: run}) that never learn one of hops 1..k-1 (at ``level``): the hop count each
    stops at and its final accuracy there, a stall one stage before the last.

    >>> run = lambda acc: {"acc": np.array([[0.1, 0.1, 0.1], acc]), "step": np.array([0, 100]), "N": 8}
    >>> early_text({0: run([1.0, 0.5, 0.1]), 1: run([1.0, 1.0, 0.1])})
    'The one failure before the last stage (seed 0) is a stall one stage earlier: its two-hop accuracy ends at 0.50, so it never moves on.'
    >>> early_text({1: run([1.0, 1.0, 0.1])})
    'No run fails before its last stage.'
    """
    stops = {}
    for s, r in sorted(runs.items()):
        never = np.flatnonzero(np.isinf(learned_at(r, level)[:-1]))
        if len(never):
            h = int(never[0])
            stops[s] = (h + 1, float(np.asarray(r["acc"])[-1, h]))
    if not stops:
        return "No run fails before its last stage."
    if len(stops) == 1:
        ((s, (h, a)),) = stops.items()
        return (
            f"The one failure before the last stage (seed {s}) is a stall one stage earlier: its "
            f"{report.count_word(h)}-hop accuracy ends at {a:.2f}, so it never moves on."
        )
    each = ", ".join(f"seed {s} at {report.count_word(h)} hops ({a:.2f})" for s, (h, a) in stops.items())
    return (
        f"The {report.count_word(len(stops))} failures before the last stage are stalls one stage earlier, each "
        f"on the hop count it never learns: {each}."
    )


DOUBLING_ROWS = {
    "khop.k4_doubling_solved": "doubling_solved",
    "khop.k4_doubling_gains": "doubling_gap_n",
    "khop.k4_doubling_lost": "doubling_lost_n",
}


def doubling_texts(dbl: report.Summary) -> report.Summary:
    """The stage study's sentences whose words follow its runs: its opening verdict (``doubling_verdict_text``),
    what became of the seeds solved with every hop count (``doubling_lost_note``), the base runs' next stage
    after the split (``doubling_base_next_text``), the flat failures (``doubling_flat_text``) and whether the split
    of the seeds is the most uneven seven allow (``doubling_split_note``)."""
    said = outcomes({cid: dbl[key] for cid, key in DOUBLING_ROWS.items()})
    n, parted = dbl["doubling_n"], dbl["doubling_split_n"]
    past = dbl["doubling_split_next_n"]
    head = (
        "no run gets past two hops"
        if past == 0
        else f"{report.count_word(past)} of the {n} runs get past two hops"
    )
    sharp = (
        ", the first far more sharply than predicted"
        if dbl["doubling_solved"] == 0 and said["khop.k4_doubling_solved"] == "holds"
        else ""
    )
    every, lost = _seeds(dbl["doubling_every_solved_seeds"]), _seeds(dbl["doubling_lost_seeds"])
    if not every:
        lost_note = "none to lose"
    else:
        fate = (
            {1: "lost here", 2: "both lost here"}.get(len(every), "all lost here")
            if lost == every
            else f"{seed_list(lost)} of them lost here"
        )
        lost_note = f"seed{'s' if len(every) > 1 else ''} {seed_list(every)}, {fate}"
    took, learned = dbl["doubling_split_base_next_max"], dbl["doubling_split_base_next_n"]
    base_next = (
        f"every run with a stage for every hop count learned three hops within {took:.0f} steps"
        if learned == parted and math.isfinite(took)
        else f"{report.count_word(learned)} of the {parted} runs with a stage for every hop count learned three hops "
        "within the budget"
    )
    flat, unsolved = dbl["doubling_unsolved_flat_n"], dbl["doubling_unsolved_n"]
    lost_n, gained_n = dbl["doubling_next_lost_n"], dbl["doubling_next_gained_n"]
    return report.Summary(
        {
            "doubling_verdict_text": (f"{head}; {predictions_text(said)}{sharp}", "the study's verdict"),
            "doubling_lost_note": (lost_note, "the seeds solved with every hop count, lost here or not"),
            "doubling_base_next_text": (base_next, "the base runs after the split"),
            "doubling_flat_text": (
                f"{'All' if flat == unsolved else f'{flat} of the'} {unsolved}",
                "how many failed runs end below twice chance, of how many",
            ),
            "doubling_split_note": (
                f", the most uneven split {report.count_word(n)} seeds allow"
                if lost_n + gained_n == n and min(lost_n, gained_n) == 0
                else "",
                "whether every seed fell one way",
            ),
        }
    )
