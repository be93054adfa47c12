"""The sentences of book/khop_starts whose words follow the runs (issue 54's switch: under the numpy generators no
seed learns four hops from any table and every prediction about the crossed studies' state at the move fails the
other way round; under the counter-based samplers two seeds learn four hops from any table, the first lookup at
table 1 survives four tables in part, and the crossings split the predictions). Each function returns
{glue name: Markdown} for :func:`companion.report.glue_markdown`, its verdicts read from the claim rows
(:func:`companion.claims.prediction_outcome`). Apart from :mod:`companion.experiments.khop_starts` so that the
modules whose runs are cached on their imports do not import the claims registry; for the same reason the recorded
variants whose rows the chapter judges on stopped runs (:data:`STUDIES`, :func:`stopped_over`) are read here, through
:mod:`companion.experiments.khop_four_hops`' variant summaries.
"""

from __future__ import annotations

from companion import claims, statements
from companion.config import check_choice
from companion.experiments.khop_four_hops import sign_test, variant_over
from companion.experiments.khop_four_hops_text import outcomes, predictions_text
from companion.experiments.khop_studies import ANYSTART, LONGSTART, ONESTART, VARIANT_SEEDS, seed_phrase
from companion.report import count_noun, count_word

SEEDS_N = len(VARIANT_SEEDS)
# the recorded variants whose rows the chapter judges on stopped runs, by the name of their summary in the chapter
# (companion.experiments.late_rows.KHOP_STARTS names their rows)
STUDIES = {"anys": ANYSTART, "ones": ONESTART, "longs": LONGSTART}
SIGN_LEVEL = 0.05  # a sign test's split below this p counts as more than chance in the text (the usual level)


def _most(n: int) -> bool:
    """Whether ``n`` of the studies' seeds are most of them."""
    return 2 * n > SEEDS_N


def step_taken(four: float, two: float) -> str:
    """How far a step of the two-hop algorithm (a probe or an attention, ``two`` on two-hop examples) survives on
    four-hop examples (``four``): ``"taken"`` (three quarters of its two-hop value or more), ``"in part"`` (a
    quarter or more) or ``"not"``.

    >>> step_taken(0.18, 1.0), step_taken(0.65, 1.0), step_taken(0.95, 1.0)
    ('not', 'in part', 'taken')
    """
    share = four / two if two > 0 else 0.0
    return "taken" if share >= 0.75 else "in part" if share >= 0.25 else "not"


def anystart_texts(anys) -> dict[str, str]:
    """What the study from any table (``anys``: its recorded summary, ``anystart_*``) says of its prediction that
    at least one seed learns four hops (``khop.k4_anystart_solved``): ``anystart_verdict`` (the overview's clause),
    ``anystart_outcome`` (the section's first sentence), ``anystart_note`` (its last) and
    ``anystart_solved_note`` (the clause of the chapter's summary of the two states)."""
    solved, gained, lost = (int(anys[f"anystart_{k}_n"]) for k in ("solved", "gained", "lost"))
    p = sign_test(anys, "anystart_", "lost", "gained")["anystart_sign_p"]
    if claims.prediction_outcome("khop.k4_anystart_solved", solved) == "refuted":
        return {
            "anystart_verdict": "Examples from every table do not help: no seed learns four hops",
            "anystart_outcome": "The prediction fails.",
            "anystart_note": "Seeing each hidden permutation alone is not what the stages 1, 2, 4 lacked.",
            "anystart_solved_note": "none of those seven learns four hops either",
        }
    if p < SIGN_LEVEL:
        verdict = f"Examples from every table help: {count_word(solved)} of the seeds learn four hops"
    else:
        verdict = (
            f"Examples from every table help little: {count_word(solved)} of the seeds learn four hops, a gain a "
            "sign test cannot tell from chance"
        )
    return {
        "anystart_verdict": verdict,
        "anystart_outcome": "The prediction holds.",
        "anystart_note": (
            f"Seeing each hidden permutation alone lets {count_noun(gained, 'seed')} learn four hops that did not "
            f"from table 1; whether it helps at all, {count_word(SEEDS_N)} seeds cannot tell (sign test p = {p:.2f})."
        ),
        "anystart_solved_note": f"only {count_word(solved)} of those {count_word(SEEDS_N)} learn four hops",
    }


def inside_texts(aprobe) -> dict[str, str]:
    """What the look inside the model from any table (``aprobe``, ``a0_*``) says of the two-hop algorithm's two steps
    on four-hop examples: the walk of hop 1's entry to hop 2's (``v_2`` at that entry after block 1) and position
    0's read of that entry (its attention in block 3), each against two-hop examples. ``a0_verdict`` (how many of
    the three predictions fail), ``a0_note`` (the steps) and ``a0_outcome`` (the lookups at table 1)."""
    verdict = predictions_text(
        outcomes(
            {
                "khop.k4_anystart_first_half_at_four": aprobe["a0_best_v2"],
                "khop.k4_anystart_no_third_at_four": aprobe["a0_best_v3"],
                "khop.k4_anystart_answers_v2": aprobe["a0_answers_v2"],
            }
        ),
        capital=True,
    )
    walk = step_taken(aprobe["a0_chain_l1_e1_v2"], aprobe["a0_h2_chain_l1_e1_v2"])
    read = step_taken(aprobe["a0_attention_l3_v1"], aprobe["a0_h2_attention_l3_v1"])
    if walk == read == "not":
        note = "Neither step of the two-hop algorithm is taken when four tables are shown."
        made = "are not made at all"
    else:
        words = {"taken": "is taken", "in part": "is taken in part", "not": "is not taken"}
        note = (
            f"When four tables are shown, the first step of the two-hop algorithm {words[walk]} (hop 1's entry holds "
            f"$v_2$ at {aprobe['a0_chain_l1_e1_v2']:.2f} after block 1, against "
            f"{aprobe['a0_h2_chain_l1_e1_v2']:.2f} on two hops), and the second {words[read]}."
        )
        made = "are made" if walk == read == "taken" else "are made only in part"
    return {"a0_verdict": f"{verdict}.", "a0_note": note, "a0_outcome": made}


def move_texts(mprobe) -> dict[str, str]:
    """What seed 0 stopped at its move (``mprobe``, ``m0_*``) says of the two predictions from the first guess
    (``m0_verdict``), of the walk at table 1 on four-hop examples before any of them was trained on (``m0_note``:
    hop 1's entry's ``v_2`` and its attention on hop 2's, against two hops) and of the first step of the two-hop
    algorithm (``m0_outcome``: "breaks" or "weakens")."""
    verdict = predictions_text(
        outcomes(
            {
                "khop.k4_anystart_move_v2_at_four": mprobe["m0_best_v2"],
                "khop.k4_anystart_move_answers_v2": mprobe["m0_answers_v2"],
            }
        ),
        capital=True,
    )
    walk = step_taken(mprobe["m0_chain_l1_e1_v2"], mprobe["m0_h2_chain_l1_e1_v2"])
    attention = (
        f"in block 1 its attention on hop 2's entry is {mprobe['m0_eattn_l1_e1_to2']:.2f}, against "
        f"{mprobe['m0_h2_eattn_l1_e1_to2']:.2f} on two hops"
    )
    if walk == "not":
        note = (
            f"But that entry does not hold $v_2$: {attention}. So the walk at table 1 fails at the mere sight of "
            "four tables (the second guess)."
        )
    else:
        held = "holds $v_2$ only in part" if walk == "in part" else "still holds $v_2$"
        note = (
            f"But that entry {held} ({mprobe['m0_chain_l1_e1_v2']:.2f} after block 1, against "
            f"{mprobe['m0_h2_chain_l1_e1_v2']:.2f} on two hops): {attention}. So the walk at table 1 weakens at the "
            "mere sight of four tables (the second guess)."
        )
    return {
        "m0_verdict": f"{verdict}, and neither guess holds alone.",
        "m0_note": note,
        "m0_outcome": "breaks" if walk == "not" else "weakens",
    }


def _top(summary, prefix: str, measure: str, seeds, n: int = 2) -> list[int]:
    """The ``n`` seeds of ``seeds`` with the highest ``<prefix><seed>_<measure>``, highest first."""
    return sorted(seeds, key=lambda s: -summary[f"{prefix}{s}_{measure}"])[:n]


def walkers_text(moves) -> str:
    """Which walking seeds of the study from any table at its move (``moves``, ``mv*``) keep the walk best on four
    hops (``v_2`` at hop 1's entry), and whether they are the seeds that answer four-hop examples with ``v_2``
    most often (``mv_note``)."""
    seeds = [s for s in VARIANT_SEEDS if f"mv{s}_step" in moves]
    walking = sorted(statements.seeds_entry(str(moves["mv_walk2_seeds"])))
    if len(walking) < 2:
        return "Too few seeds walk to tell whether the walk's survival goes with the answers."
    best = sorted(_top(moves, "mv", "walk", walking))
    answers = " and ".join(f"{moves[f'mv{s}_answers_v2']:.2f}" for s in best)
    pair = f"{best[0]} and {best[1]}"
    if set(best) == set(_top(moves, "mv", "answers_v2", seeds)):
        return f"The seeds where it survives best, {pair}, answer four-hop examples with $v_2$ most often ({answers})."
    most = sorted(_top(moves, "mv", "answers_v2", seeds))
    return (
        f"The seeds where it survives best, {pair}, answer four-hop examples with $v_2$ on {answers}; seeds "
        f"{most[0]} and {most[1]} do so most often."
    )


def doubling_walk_text(dmoves) -> str:
    """Whether hop 1's entry holds ``v_2`` on two hops in the runs from table 1 at their move (``dmoves``,
    ``dmv*``): the clause that says these models do two hops another way (``dmv_note``).

    >>> doubling_walk_text({"dmv_walk2_n": 0, "dmv_walk2_seeds": "none"})
    "no seed's hop 1 entry holds $v_2$"
    >>> doubling_walk_text({"dmv_walk2_n": 1, "dmv_walk2_seeds": "3"})
    "hop 1's entry holds $v_2$ in seed 3 only"
    """
    if int(dmoves["dmv_walk2_n"]) == 0:
        return "no seed's hop 1 entry holds $v_2$"
    seeds = str(dmoves["dmv_walk2_seeds"])
    return f"hop 1's entry holds $v_2$ in {seed_phrase(seeds, '').strip().lower()} only"


def crossing_texts(moves, dmoves, omoves, lmoves, medians: dict, solved: dict[str, int]) -> dict[str, str]:
    """What the two crossed studies at their move say of the hypothesis that where two-hop examples start sets how
    two hops are done: ``omv_verdict`` (the four predictions), ``lmv_note`` (the runs with longer examples from any
    table against those from table 1), ``omv_note`` (the conclusion), ``omv_outcome`` (the overview's clause).
    ``moves``, ``dmoves``, ``omoves``, ``lmoves``: the move summaries from any table, table 1, one hop from any
    table, longer from any table (``mv``, ``dmv``, ``omv``, ``lmv``); ``medians``: {prefix: its
    :func:`companion.experiments.khop_starts.move_medians`}; ``solved``: {study label: seeds that learn four hops}.
    """
    verdicts = outcomes(
        {
            "khop.k4_onestart_move_walkers": omoves["omv_walk2_n"],
            "khop.k4_onestart_move_v2": omoves["omv_v2_n"],
            "khop.k4_longstart_move_walkers": lmoves["lmv_walk2_n"],
            "khop.k4_longstart_move_v2": lmoves["lmv_v2_n"],
        }
    )
    if all(v == "refuted" for v in verdicts.values()):
        verdict = "Every prediction about the state at the move fails, the other way round."
    else:
        verdict = f"About the state at the move, {predictions_text(verdicts)}."
    lv2, dv2 = int(lmoves["lmv_v2_n"]), int(dmoves["dmv_v2_n"])
    walks = int(lmoves["lmv_walk2_n"])
    lmv_note = (
        f"{count_noun(walks, 'seed')} {'walks' if walks == 1 else 'walk'}, and position 0 holds $v_2$ "
        f"in {lv2} of {int(lmoves['lmv_n'])}"
        + (", as from table 1" if lv2 == dv2 else f", against {dv2} from table 1")
    )

    held = sum(v == "holds" for v in verdicts.values())
    hypothesis = {0: "So the hypothesis was backwards.", len(verdicts): "So the hypothesis holds."}.get(
        held, "So the hypothesis holds only in part."
    )
    w = {
        p: int(s[f"{p}_walk2_n"])
        for p, s in (("dmv", dmoves), ("mv", moves), ("omv", omoves), ("lmv", lmoves))
    }
    med = {p: medians[p][f"{p}_v2_med"] for p in w}
    counts = f"{w['omv']} and {w['lmv']} of {count_word(SEEDS_N)}, against {w['dmv']} from table 1"
    if _most(w["omv"]) and not _most(w["lmv"]):
        walk = (
            "What brings the walk at the entries, and its break, is the one-hop examples from every table: with "
            f"them alone most seeds walk, with longer examples from any table alone few do ({counts})."
        )
        overview = "it is the one-hop examples from every table that break the two-hop algorithm, not the two-hop ones"
    elif _most(w["lmv"]) and not _most(w["omv"]):
        walk = (
            "What brings the walk at the entries, and its break, is the longer examples from every table: with them "
            f"alone most seeds walk, with one-hop examples from any table alone few do ({counts})."
        )
        overview = "it is the two-hop examples from every table that break the two-hop algorithm, not the one-hop ones"
    elif not _most(w["omv"]) and not _most(w["lmv"]):
        walk = (
            f"Neither difference alone makes most seeds walk at the entries ({counts}); both together do "
            f"({w['mv']} from any table)."
            if _most(w["mv"])
            else f"No study makes most seeds walk at the entries ({counts}; {w['mv']} from any table)."
        )
        overview = "neither difference alone breaks the two-hop algorithm as both together do"
    else:
        walk = f"Either difference alone makes most seeds walk at the entries ({counts})."
        overview = "either difference alone breaks the two-hop algorithm"
    order = sorted(med, key=med.get)
    names = {
        "dmv": "from table 1",
        "lmv": "with longer examples from any table",
        "omv": "with one hop from any table",
        "mv": "with both, from any table",
    }
    value = (
        "On four-hop examples, position 0 holds $v_2$ (median over the seeds) at "
        + ", ".join(f"{med[p]:.2f} {names[p]}" for p in ("dmv", "lmv", "omv"))
        + f" and {med['mv']:.2f} {names['mv']}"
        + (": the break is deepest with both." if order[0] == "mv" else ".")
    )
    learned = {k: v for k, v in solved.items() if v}
    if not learned:
        budget = (
            "And none of the four studies learns four hops within its budget, whichever state it enters the last "
            "stage in: at our sizes, the state at the move does not decide it."
        )
    else:
        which = "; ".join(
            f"{k} ({count_word(v)} of the {count_word(SEEDS_N)} seeds)" for k, v in learned.items()
        )
        budget = (
            f"Four hops are learned within the budget only {which}. {count_word(SEEDS_N, capital=True)} seeds a "
            "study cannot tell whether the state at the move decides it."
        )
    return {
        "omv_verdict": verdict,
        "lmv_note": lmv_note,
        "omv_note": f"{hypothesis} {walk} {value} Why the examples' starts move the state this way was not probed. {budget}",
        "omv_outcome": overview,
    }


def stopped_over(study: str):
    """:func:`companion.experiments.khop_four_hops.variant_over` of a study of :data:`STUDIES`: (summary, runs) for
    :func:`companion.experiments.late_verdicts.stopped_studies`.

    Raises:
        ValueError: a study not in :data:`STUDIES`; its recording, or its base runs', missing.
    """
    check_choice("study", study, tuple(STUDIES))
    return variant_over(STUDIES[study])
