"""The k-hop studies' summary keys: one scheme, written down in one place (issue 52 item 6).

The k-hop recordings store about six thousand summary entries, and the k-hop chapters glue and check them by
key. A key is a sequence of fragments joined by ``_``, read left to right:

    <study or run> <qualifier>... <statistic>

- The first fragment names the study, or one run of it (:data:`TAGS`): ``il250`` is the study whose runs advance
  every 250 steps on a 20,000-step budget, ``hh0`` is seed 0 of the study that hides table k from blocks 1 and 2.
  The keys of the talk's own recording (``khop``) start with the kind of training data instead
  (``mixture_final``).
- The fragments after it (:data:`WORDS`) narrow the run (``s6``: seed 6; ``d1``: last-stage data stream 1;
  ``a100``: 100 steps after the move to the last stage; ``h2``: the two-hop examples) or name the statistic
  (``hk_at``: the first step at which the k-hop accuracy reaches the level; ``tk_b1_prev``: the share of k-hop
  answers that are v_(k-1) when only block 1 is shown the last table). A run tag of another study may follow as a
  qualifier (``rl_rs100_d1``: the longer reseed study's run ``rs100_d1``).

:func:`explain` reads a key in words; :func:`fragments` splits it, fragment by fragment, and raises on a fragment
outside the scheme. ``tests/test_khop_keys.py`` checks that every entry of every committed k-hop recording and
every key a k-hop chapter glues or checks is read completely, so a new key either follows the scheme or extends
it here. Each recording also stores every entry's meaning in full (``Recorded.data["meaning"]``); the scheme is
the short form, for reading chapter sources and ``data/claims.toml``.

>>> explain("il250_s6_hk_at")
'seeds advancing every 250 steps, on a 20,000-step budget (khop_interval_long250) | seed 6 | the k-hop accuracy | the first step at which it reaches the level (a stage: the step it starts)'
>>> explain("hh0_chain_l1_e2_v3")
"seed 0 with table k hidden from blocks 1 and 2 (khop_hidden12) | probe accuracy at a hop's entry | block 1 (0: the embeddings) | hop 2's entry | v_3"
>>> explain("hh0_tk_bz_prev")
Traceback (most recent call last):
...
ValueError: 'hh0_tk_bz_prev': fragment 'bz' (position 2) is not in the k-hop key scheme (companion.experiments.khop_keys.TAGS and WORDS)
"""

from __future__ import annotations

import re

# The first fragment: a study (its recordable in parentheses) or one run of it. ``{0}`` is the number in the tag.
TAGS: dict[str, str] = {
    # the talk's slide and the k = 4 studies of book/khop_four_hops
    r"deep": "the talk's five runs at k = 4 with one block more than log2 k + 1 (khop, depth 4)",
    r"rec": "the talk's five runs at k = 4, recorded (khop)",
    r"rate": "steps to learn the k-th hop against k (khop_rates)",
    r"seeds": "seeds of the stages at one evaluation interval (khop_seeds)",
    r"int": "advancing every 100 against every 250 steps (khop_interval)",
    r"ilong": "the interval study's seeds advancing every 100 steps, on a 20,000-step budget (khop_interval_long)",
    r"il(\d+)": "seeds advancing every {0} steps, on a 20,000-step budget (khop_interval_long250)",
    r"wide": "a wider model against the narrow one (khop_wide)",
    r"lr": "a third of the step size against the profile's (khop_lr)",
    r"doubling": "stages 1, 2, 4 against 1, 2, 3, 4 (khop_doubling)",
    # book/khop_starts: where the stages start
    r"anystart": "stages 1, 2, 4 starting at any table (khop_anystart)",
    r"onestart": "stages 1, 2, 4, one hop from any table (khop_onestart)",
    r"longstart": "stages 1, 2, 4, one hop from table 1, longer from any table (khop_longstart)",
    r"start": "the any-start run probed at its end (book/khop_starts)",
    r"move": "the any-start runs probed at their move to the last stage (khop_anystart_move)",
    r"dmove": "the doubling runs probed at their move to the last stage (khop_doubling_move)",
    r"mv": "the any-start runs at their move: all seeds (khop_anystart_move)",
    r"mv(\d+)": "seed {0} of the any-start runs at its move (khop_anystart_move)",
    r"dmv": "the doubling runs at their move: all seeds (khop_doubling_move)",
    r"dmv(\d+)": "seed {0} of the doubling runs at its move (khop_doubling_move)",
    r"omv": "the one-hop-start runs at their move: all seeds (khop_onestart_move)",
    r"omv(\d+)": "seed {0} of the one-hop-start runs at its move (khop_onestart_move)",
    r"lmv": "the longer-start runs at their move: all seeds (khop_longstart_move)",
    r"lmv(\d+)": "seed {0} of the longer-start runs at its move (khop_longstart_move)",
    r"aprobe": "the probe of the any-start run (book/khop_starts)",
    r"a(\d+)": "seed {0} of the any-start runs, probed at its end (book/khop_starts)",
    r"m(\d+)": "seed {0} of the any-start runs, probed at its move (book/khop_starts)",
    r"mprobe": "the probe of the any-start run at its move (book/khop_starts)",
    # book/khop_stall: the stall and its causes
    r"probe": "the probes of seed 0, stalled and solved (khop_probe)",
    r"p(\d+)": "seed 0 advancing every {0} steps, probed (khop_probe)",
    r"sprobe": "the probes of other seeds (khop_probe_seeds)",
    r"s(\d+)": "seed {0}, probed (khop_probe_seeds)",
    r"esc": "continuations of the stalled run (khop_escape)",
    r"hid": "table k hidden from block 1 (khop_hidden)",
    r"hprobe": "the probes of the runs with table k hidden from block 1 (khop_hidden)",
    r"h(\d\d\d+)": "seed 0 advancing every {0} steps with table k hidden from block 1 (khop_hidden)",
    r"h(\d+)": "seed {0} with table k hidden from block 1 (khop_hidden)",
    r"hid(\d)(\d)": "table k hidden from blocks {0} and {1} (khop_hidden12)",
    r"hid(\d)(\d)l": "table k hidden from blocks {0} and {1}, twice the budget (khop_hidden12_long)",
    r"hhprobe": "the probes of the runs with table k hidden from blocks 1 and 2 (khop_hidden12)",
    r"hh(\d\d\d+)": "seed 0 advancing every {0} steps with table k hidden from blocks 1 and 2 (khop_hidden12)",
    r"hh(\d+)": "seed {0} with table k hidden from blocks 1 and 2 (khop_hidden12)",
    r"entry": "the runs probed when they enter their last stage (khop_stage_entry)",
    r"nprobe": "the probes at the entry to the last stage (khop_stage_entry)",
    r"n(\d+)": "seed 0 advancing every {0} steps, probed at its entry to the last stage (khop_stage_entry)",
    r"reseed": "other streams of last-stage data (khop_reseed)",
    r"rs(\d+)": "seed 0 advancing every {0} steps, on other streams of last-stage data (khop_reseed)",
    r"rl": "the reseed study on twice the budget (khop_reseed_long)",
    r"rlong": "the reseed study on twice the budget (khop_reseed_long)",
    r"delay": "the move to the last stage delayed (khop_delay)",
    r"dl(\d+)": "seed 0 with its last stage {0} steps later (khop_delay)",
    r"dmove(\d+)": "the delayed move of seed {0}'s doubling run (book/khop_stall)",
    r"dmovee(\d+)": "the delayed move of seed 0's doubling run advancing every {0} steps (book/khop_stall)",
    r"onset": "when the stall starts on the last stage (khop_onset)",
    r"on(\d+)": "seed 0 advancing every {0} steps, read along its last stage (khop_onset)",
}

# The fragments after the first. ``{0}`` is the number in the fragment. A fragment that means something else
# right after the first one (``e250``: every 250 steps; ``e2`` after a block: hop 2's entry) is listed in
# :data:`AFTER_TAG` too, which is read first there.
WORDS: dict[str, str] = {
    # runs and examples
    r"N": "N, the values per table",
    r"s(\d+)": "seed {0}",
    r"d(\d+)": "last-stage data stream {0} (0: the run's own)",
    r"a(\d+)": "{0} steps after its move to the last stage",
    r"end": "at the end of training",
    r"h(\d+)": "at {0} hops (the {0}-hop examples)",
    r"n(\d+)": "the runs advancing every {0} steps",
    r"k(\d+)": "k = {0}",
    r"lr(\d+)": "the step size times {0}",
    r"re(\d+)": "block {0} re-initialised",
    r"relast": "the last block re-initialised",
    r"hide(\d+)": "table k hidden from block {0}",
    r"extra": "one block more",
    r"long": "twice as long",
    r"cum": "cumulative",
    r"plain": "the run without hiding",
    r"own": "its own data stream",
    r"alt": "seed 0 advancing every 250 steps",
    r"base": "the profile's step size",
    r"narrow": "the narrow model",
    r"every": "stages 1, 2, 3, 4",
    r"doubling": "stages 1, 2, 4 from table 1",
    r"next": "the hop count after the last stage",
    r"short": "the runs that ended before their last stage (khop_curves.short_of_last_stage)",
    # the talk's kinds of training data
    r"direct": "direct (k hops only)",
    r"mixture": "mixture of 1..k hops",
    r"mix": "mixture of 1..k hops",
    r"cumulative": "cumulative stages",
    r"curriculum": "curriculum",
    r"shallow": "mixture with one block",
    r"depth": "blocks (depth_gap: log2 k + 1 blocks against one)",
    # what a probe reads (khop_probes)
    r"acc": "accuracy on the probe's test examples",
    r"answers": "share of the model's answers",
    r"probe": "probe accuracy at position 0",
    r"entry": "probe accuracy of the answer at a hop's entry",
    r"chain": "probe accuracy at a hop's entry",
    r"attention": "position 0's attention on a hop's entry (largest head)",
    r"eattn": "a hop's entry's attention on another hop's entry (largest head)",
    r"tkattn": "a hop's entry's attention on the last table in total (largest head)",
    r"tk": "share of k-hop answers with the last table shown to some blocks only",
    r"l(\d+)": "block {0} (0: the embeddings)",
    r"e(\d+)": "hop {0}'s entry",
    r"to(\d+)": "on hop {0}'s entry",
    r"v(\d+)": "v_{0}",
    r"vk": "v_k, the answer",
    r"b(\d+)": "the last table shown to block {0} only",
    r"not(\d+)": "the last table shown to every block but block {0}",
    r"none": "the last table shown to no block",
    r"all": "the last table shown to every block (the model as it is)",
    r"prev": "answers that are v_(k-1)",
    r"answer": "answers that are v_k",
    r"read": "position 0's attention on hop 1's entry, largest over the blocks",
    r"walk": "v_2 at hop 1's entry",
    r"walk(\d+)": "hop 1's entry holds v_2 on {0} hops",
    r"kept": "still on four hops",
    r"hi": "highest",
    r"lo": "lowest",
    # statistics
    r"n": "number of runs",
    r"seeds": "the seeds",
    r"seed": "the seed",
    r"k": "hops",
    r"steps": "training steps",
    r"step": "the training step",
    r"chance": "chance accuracy, 1 / N",
    r"level": "accuracy that counts as learned",
    r"budget": "training steps of every run (the censoring point)",
    r"minutes": "training time in minutes",
    r"at": "the first step at which it reaches the level (a stage: the step it starts)",
    r"at(\d\d)": "the first step at which it reaches 0.{0}",
    r"stopped": "stopped after one evaluation of the last fifth of its training (late_verdicts.stopped_values)",
    r"starts": "the studies of where the training examples start (anystart, onestart, longstart)",
    r"hk": "the k-hop accuracy",
    r"hopk": "hop k learned",
    r"hop": "hop",
    r"hop(\d+)": "hop {0} learned",
    r"stagek": "the move to the last stage",
    r"stage": "the stages",
    r"best": "best accuracy over the evaluations",
    r"final": "final accuracy",
    r"first": "first",
    r"last": "last",
    r"min": "lowest",
    r"max": "largest",
    r"med": "median",
    r"below": "the hop counts below k",
    r"learned": "learned (at the level)",
    r"solved": "solved (lowest final accuracy above 0.95)",
    r"solved(\d+)": "solved, advancing every {0} steps",
    r"unsolved": "unsolved",
    r"untrained": "at a hop count never trained on",
    r"flat": "flat at chance (final below twice chance)",
    r"early": "never learned one of hops 1..k-1",
    r"time": "steps trained on the last stage",
    r"move": "the move to the last stage",
    r"move(\d+)": "the move to the last stage, advancing every {0} steps",
    r"moves": "the moves to the last stage",
    r"wait": "steps on the last stage before the k-th hop is learned",
    r"wait(\d+)": "steps on the last stage before the k-th hop, advancing every {0} steps",
    r"gained": "solved here and not in the comparison",
    r"lost": "solved in the comparison and not here",
    r"pairs": "seeds run both ways",
    r"only": "solved one way only",
    r"fast": "advancing every 100 steps",
    r"slow": "advancing every 250 steps",
    r"gap": "difference",
    r"change": "the change against the run without hiding",
    r"sign": "exact two-sided sign test",
    r"p": "p-value",
    r"split": "where two runs of one seed part",
    r"alike": "over the runs whose counterparts were trained with the same arithmetic (threads, packing)",
    r"other": "over the runs whose counterparts were trained otherwise",
    r"rounding": "how the runs were trained (what decides their rounding)",
    r"text": "the sentence the chapter prints",
    r"note": "a parenthesis the chapter prints",
    r"predictions": "how many of the study's registered predictions are refuted",
    r"verdicts": "each registered prediction with its outcome",
    r"outcome": "what the value says of the registered prediction (holds, refuted)",
    r"pace": "which stages the runs take longer on",
    r"unfollowed": "the recorded runs a follow-up rule does not pick",
    r"reach": "the k at which the runs reach the level, and those at which they do not",
    r"factor": "the factor from the smallest k to the largest",
    r"verdict": "what the study found, against its predictions",
    r"doubt": "why a run's budget was in doubt",
    r"prefix": "a longer recording against a shorter one (0: the same to the last digit)",
    r"gain": "the rise over the second half of the budget",
    r"growth": "steps at the largest k over those at the smallest",
    r"low": "a censored run counted at the budget",
    r"half": "over the first half of training",
    r"worst": "the worst seed",
    r"start": "where the continuations start",
    r"repeat": "the run repeated",
    r"onset": "first step on the last stage at which block 1 breaks",
    r"after": "the steps after the move at which runs are read",
    r"path": "on the stall's path (block 1, shown table k alone, leaves fewer than half the answers at v_(k-1))",
    r"breaks": "on the stall's path",
    r"broken": "on the stall's path",
    r"unbroken": "off the stall's path",
    r"escapes": "best k-hop accuracy reaching 0.5",
    r"spared": "off the stall's path at the end",
    r"latest": "the latest",
    r"stalled": "the runs that never learn the k-th hop",
}

# Read first right after the study: a run of the study, not a statistic.
AFTER_TAG: dict[str, str] = {
    r"e(\d+)": "seed 0 advancing every {0} steps",
}


def _match(fragment: str, table: dict[str, str]) -> str | None:
    """The meaning of ``fragment`` under the first pattern of ``table`` it matches (None: none)."""
    for pattern, meaning in table.items():
        m = re.fullmatch(pattern, fragment)
        if m:
            return meaning.format(*m.groups())
    return None


def fragments(key: str) -> list[tuple[str, str]]:
    """``key`` split into its fragments, each with its meaning under the scheme (see the module's docstring).

    Raises:
        ValueError: an empty key or fragment, or a fragment the scheme does not define.
    """
    parts = key.split("_")
    if not key or not all(parts):
        raise ValueError(f"{key!r} is not a k-hop summary key: fragments must be non-empty, joined by '_'")
    out = []
    for i, part in enumerate(parts):
        meaning = None
        if i == 0:  # a study or a run; else a word (the talk's recording: ``mixture_final``)
            meaning = _match(part, TAGS) or _match(part, WORDS)
        elif i == 1 and _match(parts[0], TAGS) is not None:
            meaning = _match(part, AFTER_TAG)
        if meaning is None:  # a statistic or qualifier; else a run of another study (rl_rs100_...)
            meaning = _match(part, WORDS) or _match(part, TAGS)
        if meaning is None:
            raise ValueError(
                f"{key!r}: fragment {part!r} (position {i}) is not in the k-hop key scheme "
                "(companion.experiments.khop_keys.TAGS and WORDS)"
            )
        out.append((part, meaning))
    return out


def tag(fragment: str) -> str | None:
    """What ``fragment`` names as a key's first fragment, a study or one of its runs (:data:`TAGS`), with its
    recordable in parentheses; None if it is not a tag (a key of the talk's own recording starts with a word).

    >>> tag("rs250")
    'seed 0 advancing every 250 steps, on other streams of last-stage data (khop_reseed)'
    """
    return _match(fragment, TAGS)


def explain(key: str) -> str:
    """``key`` in words, fragment by fragment (:func:`fragments`), joined by `` | ``."""
    return " | ".join(meaning for _, meaning in fragments(key))
