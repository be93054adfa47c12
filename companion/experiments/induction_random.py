"""The chapter ``book/induction_random``: random triggers, induction head or feed-forward layer (Birth, Section 4.2; the
slides' pasted text). What the random-trigger model does at repeated triggers (head or bigram, the pair scores, the
discount edits; the pair gradient is :mod:`companion.experiments.induction_random_push`'s), over seeds (recorded:
``python -m companion record induction_random_seeds``), and the numbers the chapter checks. The runs and the measures
also taken along training are :mod:`companion.experiments.induction`'s."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from companion import config, report
from companion.config import check_choice, check_int
from companion.experiments.induction import (
    BIGRAM_TOP,
    DISCOUNT_EDITS,
    NEVER,
    PAIR_KINDS,
    InductionRun,
    discount_edit,
    edit_bias,
    ff_experiment,
    pair_scores,
    random_sides,
    random_trigger_experiment,
    run,
    successor_ranks,
)
from companion.experiments.induction_random_push import (
    KEY_KINDS,
    PUSH_ENTRIES,
    QUERY_PARTS,
    after_earlier,
    pair_gradient,
    push_entry,
    push_name,
)
from companion.models import Transformer

COLUMNS = ("acc", "top1", "head_acc", "bigram_top1", "attention")  # head_or_bigram's measures per position


# head_or_bigram's measures of the second layer's attention on the keys that hold o, per position
MECHANISM = {
    "attention": "second layer's attention on the keys that hold o",
    "key_score": "second layer's mean logit of those keys",
    "pair_score": "its token-token part, c w_E(q)^T W_QK^2 w_E(o)",
    "match_score": "its part from the query's token and the keys' first-layer output h^1",
    "prev_attention": "first layer's attention of those keys on their previous token q",
    "rest_score": "log-sum-exp of the second layer's logits of the other keys",
    "attention_query_token": "second layer's attention on the keys holding q itself (its own position included)",
    "attention_target_elsewhere": "its attention on the keys holding o elsewhere (not after q)",
    "attention_rest": "its attention on all other keys",
}


OCCURRENCE_BINS = (2, 3, 5, 9)  # which occurrence of q (2nd; 3rd-4th; 5th-8th; 9th on): how much evidence


RANK_BINS = ((1, 1), (2, BIGRAM_TOP), (BIGRAM_TOP + 1, 10), (11, 20), (21, NEVER - 1), (NEVER, NEVER))


HEAD_OR_BIGRAM_HEADER = (
    "rank of o among the trigger's bigram successors",
    "positions",
    "accuracy (argmax = o)",
    "argmax = the bigram's top successor",
    "head path alone: argmax = o",
    "bigram path alone: argmax = the bigram's top successor",
    "second layer's attention on the positions after earlier q",
)


@torch.no_grad()
def head_and_bigram_paths(
    model: Transformer, tokens: torch.Tensor, rec: dict | None = None, score_bias: dict | None = None
) -> tuple[torch.Tensor, ...]:
    """Logits (batch, T, V) of a two-layer model with a final linear W_F, and their two exact parts:
    the head path W_U (h^2 + W_F h^2) and the bigram path W_U (x^1 + W_F x^1), which add up to the logits.
    ``rec``, if a dict, receives what ``Transformer.forward`` records (the attention maps among them);
    ``score_bias`` is passed to it (attention-logit shifts per layer)."""
    rec = {} if rec is None else rec
    logits = model(tokens, record=rec, score_bias=score_bias)
    x1 = model.feed_forward(0, rec["u1"])  # the stream leaving layer 1
    h2 = rec["u2"] - x1  # the second attention layer's output
    W_F = model.layers[1].ff.W_F
    return logits, model.unembed(h2 + h2 @ W_F.T), model.unembed(x1 + x1 @ W_F.T)


@torch.no_grad()
def head_or_bigram(r: InductionRun, n_seq: int = 2048, chunk: int = 256, edit: dict | None = None) -> dict:
    """What the model predicts at the second and later occurrences of a trigger q (target: its output o),
    by the rank of o among the global bigram's successors of q (:func:`companion.experiments.induction.successor_ranks`; :data:`companion.experiments.induction.NEVER` when
    o never follows q).

    The model must have two layers and a linear final feed-forward layer W_F, so that the logits split
    exactly into a *bigram path* W_U (x^1 + W_F x^1) (everything but the second attention layer) and a
    *head path* W_U (h^2 + W_F h^2) (the second layer's output, read directly and through W_F). Measured on
    ``n_seq`` fresh sequences from the run's task (stream "head-or-bigram" of its seed), ``chunk`` at a time.

    Returns:
        ``bins``: one dict per :data:`RANK_BINS` entry (``ranks``, ``n``, ``acc``, ``top1``, ``head_acc``,
        ``bigram_top1``). ``acc_in`` / ``top1_in``: accuracy and share predicting q's likeliest successor
        when o is q's 2nd to :data:`companion.experiments.induction.BIGRAM_TOP`-th likeliest; ``acc_off`` / ``top1_off`` the same when o is
        not among its :data:`companion.experiments.induction.BIGRAM_TOP` likeliest. ``*_matched``: the same compared within strata of equal
        trigger and evidence (the occurrence of q, binned by :data:`OCCURRENCE_BINS`): the mean per stratum
        over the ``strata_matched`` strata with both kinds of positions, weighted by each one's positions of the
        first kind (``matched_share`` of them), so that which triggers fall in which group, and how often
        they occurred before, do not enter.
        ``attention`` (per bin, and ``attention_in`` / ``attention_off``): the second layer's attention on
        the positions s <= t with z_{s-1} = q, the keys that hold o. The other :data:`MECHANISM` measures
        (``*_in_matched`` / ``*_off_matched`` only) split where that attention comes from (see
        :func:`_key_measures`).

    ``edit``, if given, maps layer indices (0-based) to (V, V) tables [query token, key token] added to that
    layer's attention logits (:func:`companion.experiments.induction.discount_edit`): the same positions measured on an edited model.
    """
    exp = r.exp
    if exp.ff != ("none", "linear"):
        raise ValueError(
            f"head_or_bigram needs ff=('none', 'linear') (two layers, a final linear W_F); got {exp.ff}"
        )
    check_int("n_seq", n_seq, low=1)
    check_int("chunk", chunk, low=1)
    model = r.model()
    task = exp.task()
    V = task.vocab_size
    for l, table in (edit or {}).items():
        if l not in (0, 1) or tuple(table.shape) != (V, V):
            raise ValueError(
                f"edit must map layers 0 and 1 to ({V}, {V}) tables; got layer {l!r}, shape "
                f"{tuple(table.shape)}"
            )
    rng = np.random.default_rng(config.seed_streams(exp.seed, ["head-or-bigram"])["head-or-bigram"])
    cols = {k: [] for k in ("q", "occurrence", "rank", *COLUMNS, *MECHANISM)}
    bigram, ranks = torch.as_tensor(task.stats.bigram), successor_ranks(task)
    for start in range(0, n_seq, chunk):
        b = task.sample(rng, min(chunk, n_seq - start))
        x, rec = torch.as_tensor(b.inputs), {}
        bias = edit_bias(edit, x)
        logits, head, rest = head_and_bigram_paths(model, x, rec, bias)
        at = torch.as_tensor(b.recall_positions)
        q, o = x[at], torch.as_tensor(b.targets)[at]
        after_q = after_earlier(x)
        for k, v in _key_measures(model, x, rec, after_q, torch.as_tensor(b.targets), bias.get(1)).items():
            cols[k].append(v[at])
        top = bigram[q].argmax(-1)  # q's likeliest successor
        cols["q"].append(q)
        cols["occurrence"].append(torch.as_tensor(b.occurrence)[at])
        cols["rank"].append(ranks[q, o])
        cols["acc"].append(logits[at].argmax(-1) == o)
        cols["top1"].append(logits[at].argmax(-1) == top)
        cols["head_acc"].append(head[at].argmax(-1) == o)
        cols["bigram_top1"].append(rest[at].argmax(-1) == top)
    c = {k: torch.cat(v).numpy() for k, v in cols.items()}
    inside, outside = random_sides(c["rank"]).values()

    def mean(key: str, g: np.ndarray) -> float:
        return float(c[key][g].mean()) if g.any() else float("nan")

    bins = [
        {
            "ranks": (lo, hi),
            "n": int(((c["rank"] >= lo) & (c["rank"] <= hi)).sum()),
            **{k: mean(k, (c["rank"] >= lo) & (c["rank"] <= hi)) for k in COLUMNS},
        }
        for lo, hi in RANK_BINS
    ]
    stratum = (
        c["q"] * len(OCCURRENCE_BINS) + np.searchsorted(OCCURRENCE_BINS, c["occurrence"], side="right") - 1
    )
    both = [
        t for t in np.unique(stratum) if (inside & (stratum == t)).any() and (outside & (stratum == t)).any()
    ]
    weight = np.array([(inside & (stratum == t)).sum() for t in both])

    def matched(key: str, g: np.ndarray) -> float:  # per stratum, weighted by the stratum's inside positions
        return (
            float(np.average([mean(key, g & (stratum == t)) for t in both], weights=weight))
            if both
            else float("nan")
        )

    sides = (("in", inside), ("off", outside))
    return {
        "bins": bins,
        "positions": int(len(c["rank"])),
        "acc_in": mean("acc", inside),
        "top1_in": mean("top1", inside),
        "acc_off": mean("acc", outside),
        "top1_off": mean("top1", outside),
        "attention_in": mean("attention", inside),
        "attention_off": mean("attention", outside),
        **{f"{k}_{side}_matched": matched(k, g) for k in ("acc", "top1", *MECHANISM) for side, g in sides},
        "strata_matched": len(both),
        "matched_share": float(weight.sum() / max(inside.sum(), 1)),
    }


def head_or_bigram_rows(hb: dict) -> list[list]:
    """Rows for :data:`HEAD_OR_BIGRAM_HEADER`."""

    def name(lo, hi):
        return (
            "never follows the trigger"
            if lo == NEVER
            else str(lo)
            if lo == hi
            else f"{lo} and above"
            if hi == NEVER - 1
            else f"{lo} to {hi}"
        )

    return [[name(*b["ranks"]), b["n"], *(b[k] for k in COLUMNS)] for b in hb["bins"]]


MECHANISM_HEADER = (
    "at the second and later occurrences of q, within strata of equal trigger and occurrence",
    f"o is q's 2nd to {BIGRAM_TOP}th likeliest successor",
    f"o is not among q's {BIGRAM_TOP} likeliest",
    "difference",
)


def matched_gap(hb: dict, measure: str) -> float:
    """A :func:`head_or_bigram` measure (``acc``, ``top1`` or one of :data:`MECHANISM`) within strata, o in the
    top minus o off the top."""
    return hb[f"{measure}_in_matched"] - hb[f"{measure}_off_matched"]


def top1_ratio(hb: dict, matched: bool = False) -> float:
    """The head-or-bigram claim's ratio R: the share predicting q's likeliest successor with o its 2nd to :data:`companion.experiments.induction.BIGRAM_TOP`-th
    likeliest over the same share with o off the top (within strata when ``matched``); inf where no position off
    the top predicts the likeliest successor and some in the top do, NaN where none does (a model barely trained).

    >>> top1_ratio({"top1_in": 0.3, "top1_off": 0.1}), top1_ratio({"top1_in": 0.3, "top1_off": 0.0})
    (2.9999999999999996, inf)
    """
    end = "_matched" if matched else ""
    top_in, off = hb[f"top1_in{end}"], hb[f"top1_off{end}"]
    if off == 0:
        return math.inf if top_in > 0 else math.nan
    return top_in / off


def head_or_bigram_mechanism_rows(hb: dict) -> list[list]:
    """Rows for :data:`MECHANISM_HEADER`: each :data:`MECHANISM` measure compared within strata."""
    return [
        [name, hb[f"{k}_in_matched"], hb[f"{k}_off_matched"], matched_gap(hb, k)]
        for k, name in MECHANISM.items()
    ]


def _key_measures(
    model: Transformer,
    x: torch.Tensor,
    rec: dict,
    keys: torch.Tensor,
    targets: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Per query position (batch, T), what sets the second layer's attention on ``keys`` (batch, T, T), a
    causal mask of the keys that hold the answer: their total attention, their mean logit, its token-token
    part c w_E(z_t)^T W_QK^2 w_E(z_s) and its part from the query's token and the keys' first-layer output
    h^1_s, the first layer's attention of those keys on their previous token, and the log-sum-exp of the
    other keys' logits; and where the rest of the attention goes: to the other keys holding the query's
    token z_t (s = t included), to the other keys holding the target ``targets`` (batch, T), and to all the
    others (the four attention shares add up to 1). ``rec`` is what the forward pass of the two-layer model
    recorded; its first feed-forward layer must be none, so that the stream entering layer 2 is w_E + p + h^1.
    ``bias`` (batch, T, T), if the forward pass added one to the second layer's logits, is a token-token edit
    (:func:`companion.experiments.induction.discount_edit`): it enters the logits and their token-token part."""
    n = keys.sum(-1).clamp_min(1)
    W2, c = model.layers[1].qk(), model.scale
    emb = model.W_E[x]
    h1 = rec["u1"] - model.embed(x)  # the first attention layer's output
    bias = torch.zeros(()) if bias is None else bias
    scores = (rec["u1"] @ W2) @ rec["u1"].transpose(1, 2) * c + bias  # (batch, t, s)
    q2 = emb @ W2 * c  # the query's token part, (batch, t, d)
    prev = F.pad(rec["attn1"].diagonal(offset=-1, dim1=1, dim2=2), (1, 0))  # a^1(s, s - 1)
    causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device).tril()

    def key_mean(v: torch.Tensor) -> torch.Tensor:  # (batch, t, s) -> (batch, t): mean over the keys
        return (v * keys).sum(-1) / n

    own = (x[:, None, :] == x[:, :, None]) & causal & ~keys  # other keys holding the query's token
    target = (x[:, None, :] == targets[:, :, None]) & causal & ~keys & ~own  # other keys holding the target
    rest = causal & ~keys & ~own & ~target
    return {
        "attention": (rec["attn2"] * keys).sum(-1),
        "key_score": key_mean(scores),
        "pair_score": key_mean(q2 @ emb.transpose(1, 2) + bias),
        "match_score": key_mean(q2 @ h1.transpose(1, 2)),
        "prev_attention": key_mean(prev[:, None, :].expand_as(scores)),
        "rest_score": torch.logsumexp(scores.masked_fill(keys | ~causal, float("-inf")), -1),
        "attention_query_token": (rec["attn2"] * own).sum(-1),
        "attention_target_elsewhere": (rec["attn2"] * target).sum(-1),
        "attention_rest": (rec["attn2"] * rest).sum(-1),
    }


PAIR_MODELS = ("random triggers, trained", "random triggers, at initialisation", "fixed triggers, trained")


def pair_score_models(random_run: InductionRun, fixed_run: InductionRun) -> dict[str, dict]:
    """:func:`companion.experiments.induction.pair_scores` of the random-trigger model, of the same model at its initialisation, and of the
    fixed-trigger model (pairs with its fixed triggers), keyed by :data:`PAIR_MODELS`."""
    task = random_run.exp.task()
    return dict(
        zip(
            PAIR_MODELS,
            (
                pair_scores(random_run.model(), task),
                pair_scores(random_run.model(trained=False), task),
                pair_scores(fixed_run.model(), fixed_run.exp.task()),
            ),
        )
    )


PAIR_SCORE_HEADER = ("model", "layer", *PAIR_KINDS, "likely minus another successor")


def pair_score_rows(models: dict[str, dict]) -> list[list]:
    """Rows (model, layer, one column per :data:`companion.experiments.induction.PAIR_KINDS`, likely minus other) of :func:`pair_score_models`."""
    return [
        [m, layer, *(v[k] for k in PAIR_KINDS), v["likely_minus_other"]]
        for m, by_layer in models.items()
        for layer, v in by_layer.items()
    ]


def discount_edits(
    r: InductionRun, n_seq: int = 2048, chunk: int = 256, keys: tuple[str, ...] = tuple(DISCOUNT_EDITS)
) -> dict[str, dict]:
    """:func:`head_or_bigram` of a random-trigger run for each of :data:`companion.experiments.induction.DISCOUNT_EDITS` named in
    ``keys`` (``"trained"``: no edit; all of them by default), on the same ``n_seq`` sequences, so that every edit is
    measured at the same positions.

    Raises:
        ValueError: a key that is not an edit of ``DISCOUNT_EDITS``, before any work.
    """
    for k in keys:
        check_choice("edit", k, tuple(DISCOUNT_EDITS))
    model, task = r.model(), r.exp.task()
    return {
        k: head_or_bigram(r, n_seq, chunk, edit=discount_edit(model, task, strengths, how) or None)
        for k, (_, strengths, how) in DISCOUNT_EDITS.items()
        if k in keys
    }


DISCOUNT_EDIT_HEADER = (
    "edit",
    f"accuracy, o q's 2nd to {BIGRAM_TOP}th likeliest",
    "accuracy, o off the top",
    "top-1 share, o in the top",
    "top-1 share, o off the top",
    "ratio",
    "ratio within strata",
    "attention on o's keys, in - off (within strata)",
    "first layer on q, in - off",
)


def discount_edit_rows(edits: dict[str, dict]) -> list[list]:
    """Rows for :data:`DISCOUNT_EDIT_HEADER` from :func:`discount_edits`."""
    return [
        [
            DISCOUNT_EDITS[k][0],
            hb["acc_in"],
            hb["acc_off"],
            hb["top1_in"],
            hb["top1_off"],
            top1_ratio(hb),
            top1_ratio(hb, matched=True),
            matched_gap(hb, "attention"),
            matched_gap(hb, "prev_attention"),
        ]
        for k, hb in edits.items()
    ]


def head_or_bigram_values(edits: dict, pg: dict, scores: dict) -> dict[str, float]:
    """The head-or-bigram claim's numbers of one random-trigger model from :func:`discount_edits` (``"trained"``: its
    :func:`head_or_bigram`), :func:`pair_gradient` and :func:`companion.experiments.induction.pair_scores` (of the trained model), named as
    :data:`RANDOM_MEASURES`. R, the ratio of ``top1_in`` to ``top1_off``, is read for every edit on the same
    positions; ``discount_removed_share`` is (R trained - R both removed) / (R trained - 1), the share of R's
    excess over 1 (no preference) that goes with both discounts, ``discount_doubled_growth`` (R both doubled -
    R trained) / (R trained - 1), ``discount_pairwise_share`` the share that goes with both removed pair by pair.
    ``edits`` may hold only some edits besides ``"trained"`` (:data:`ROW_EDITS`): the entries of the others are left
    out."""
    hb = edits["trained"]
    ratio = {k: top1_ratio(e) for k, e in edits.items()}
    excess = ratio["trained"] - 1 or float("nan")  # no preference to explain: the shares are undefined
    return {
        "acc_off": hb["acc_off"],
        "top1_ratio": ratio["trained"],
        "top1_ratio_matched": top1_ratio(hb, matched=True),
        **{f"{k}_gap": matched_gap(hb, k) for k in MECHANISM},
        "pair_QK1": scores["W_QK^1"]["likely_minus_other"],
        "pair_QK2": scores["W_QK^2"]["likely_minus_other"],
        "pair_discount_weaker": max(v["likely_minus_other"] for v in scores.values()),
        "balance_gap": pg["likely"]["balance"] - pg["other"]["balance"],
        **{f"ratio_{k}": ratio[k] for k in DISCOUNT_EDITS if k != "trained" and k in ratio},
        **{
            share: sign * (ratio["trained"] - ratio[k]) / excess
            for share, (k, sign) in EDIT_SHARES.items()
            if k in ratio
        },
    }


# the shares of the ratio's excess over 1 that an edit takes away (sign 1) or adds (sign -1): share -> (edit, sign)
EDIT_SHARES = {
    "discount_removed_share": ("both_removed", 1),
    "discount_doubled_growth": ("both_doubled", -1),
    "discount_pairwise_share": ("both_pairwise", 1),
}


RANDOM_MEASURES = {  # head_or_bigram_values and random_training_values: name -> (column header, meaning)
    "acc_off": (
        "accuracy, o off the top",
        f"accuracy where o is not among q's {BIGRAM_TOP} likeliest successors",
    ),
    "top1_ratio": (
        "top-1 share, in / off",
        f"share predicting q's likeliest successor, o its 2nd to {BIGRAM_TOP}th likeliest over o off the top",
    ),
    "top1_ratio_matched": (
        "the same within strata",
        "the same ratio within strata (trigger, occurrence bin)",
    ),
    "attention_gap": (
        "attention on o's keys, in - off",
        "second layer's attention on the keys holding o, in minus off, within strata",
    ),
    "prev_attention_gap": (
        "first layer on q, in - off",
        "first layer's attention of the keys holding o on q, in minus off, within strata",
    ),
    "key_score_gap": (
        "mean logit of o's keys",
        "second layer's mean logit of the keys holding o, in minus off, within strata",
    ),
    "pair_score_gap": ("its token-token part", "its token-token part, in minus off, within strata"),
    "match_score_gap": (
        "its induction match",
        "its part from the query's token and the keys' h^1, in minus off, within strata",
    ),
    "rest_score_gap": (
        "other keys' log-sum-exp",
        "log-sum-exp of the other keys' logits, in minus off, within strata",
    ),
    "attention_query_token_gap": (
        "attention on q's keys",
        "attention on the keys holding q itself, in minus off, within strata",
    ),
    "attention_target_elsewhere_gap": (
        "on o elsewhere",
        "attention on the keys holding o elsewhere, in minus off, within strata",
    ),
    "attention_rest_gap": ("on all other keys", "attention on all other keys, in minus off, within strata"),
    "pair_QK1": (
        "W_QK^1 likely - other",
        "token-token logit in W_QK^1, q's likeliest successors minus others",
    ),
    "pair_QK2": ("W_QK^2 likely - other", "the same in W_QK^2"),
    "pair_discount_weaker": ("weaker layer", "the larger (weaker) of the two"),
    "balance_gap": (
        "push undone, likely - other",
        "share of the triggers' push that the other repeated positions undo, likely keys minus other keys",
    ),
    **{
        f"ratio_{k}": (f"ratio, {name}", f"the top-1 share ratio with {name}")
        for k, (name, *_) in DISCOUNT_EDITS.items()
        if k != "trained"
    },
    "discount_removed_share": ("share of the excess gone", "(R trained - R both removed) / (R trained - 1)"),
    "discount_doubled_growth": ("growth, doubled", "(R both doubled - R trained) / (R trained - 1)"),
    "discount_pairwise_share": (
        "share gone, pair by pair",
        "(R trained - R both pair by pair) / (R trained - 1)",
    ),
    **{
        f"{m}_{w}": (
            f"{head}, {w}",
            f"{w} window of training (test batch): {meaning}",
        )  # random_training_values
        for w in ("early", "late")
        for m, head, meaning in (
            ("ratio", "ratio", "the top-1 share ratio R"),
            ("ratio_removed", "ratio, both removed", "R with both discounts removed"),
            ("removed_share", "share gone", "(R - R both removed) / (R - 1)"),
            ("ratio_pairwise", "ratio, pair by pair", "R with both discounts removed pair by pair"),
            ("pairwise_share", "share gone, pair by pair", "(R - R both pair by pair) / (R - 1)"),
            ("pair_QK1", "W_QK^1 likely - other", "W_QK^1's pair discount, mean over the window"),
            ("pair_QK2", "W_QK^2 likely - other", "W_QK^2's pair discount, mean over the window"),
        )
    },
}


TRAINING_MEASURES = (
    "ratio",
    "ratio_removed",
    "removed_share",
    "ratio_pairwise",
    "pairwise_share",
    "pair_QK1",
    "pair_QK2",
)


# --- the chapter's numbers ---


def random_study(profile: str | None = None, progress: bool = True) -> dict:
    """Every run of ``book/induction_random``: the final-W_F models with random and with fixed triggers
    (the latter shared with :func:`companion.experiments.induction_layers.study`, cached), and what the random-trigger model does at repeated
    triggers: head or bigram, the pair gradient, the pair scores and the discount edits."""
    ffr = run(ff_experiment(profile), progress=progress)
    rnd = run(random_trigger_experiment(profile), progress=progress)
    edits = discount_edits(rnd)
    return {
        "ff": ffr,
        "random": rnd,
        "discount_edits": edits,
        "head_or_bigram": edits["trained"],
        "pair_gradient": pair_gradient(rnd),
        "pair_scores": pair_score_models(rnd, ffr),
    }


def random_summary(res: dict) -> report.Summary:
    """The claim values of :func:`random_study` (see ``data/claims.toml``, ids ``ih.random_*`` of
    ``book/induction_random``)."""
    ffr, hb = res["ff"], res["head_or_bigram"]
    ps, pg = res["pair_scores"], res["pair_gradient"]
    hob = head_or_bigram_values(res["discount_edits"], pg, ps[PAIR_MODELS[0]])
    return report.Summary(
        {
            **_trained_entries(hob, pg),
            "head_or_bigram_discount_pairwise_share": (
                hob["discount_pairwise_share"],
                RANDOM_MEASURES["discount_pairwise_share"][1],
            ),
            "acc_ff": (
                ffr.final("acc"),
                "memories + final linear W_F, fixed triggers: in-context accuracy at the end",
            ),
            "acc_random": (
                res["random"].final("acc"),
                "the same model, random triggers: in-context accuracy at the end",
            ),
            "head_or_bigram_k": (
                res["random"].exp.n_triggers,
                "random triggers: triggers drawn per sequence",
            ),
            "head_or_bigram_steps": (res["random"].exp.steps, "random triggers: training steps"),
            "head_or_bigram_positions": (
                hb["positions"],
                "random triggers: second and later trigger occurrences measured",
            ),
            "head_or_bigram_top": (
                BIGRAM_TOP,
                "the bigram's 'top predictions': the trigger's likeliest successors counted",
            ),
            "head_or_bigram_acc_in": (
                hb["acc_in"],
                f"accuracy where o is the trigger's 2nd to {BIGRAM_TOP}th likeliest successor",
            ),
            "head_or_bigram_top1_off": (
                hb["top1_off"],
                "share predicting the trigger's likeliest successor, o not in the top",
            ),
            "head_or_bigram_top1_in": (hb["top1_in"], f"the same, o the 2nd to {BIGRAM_TOP}th likeliest"),
            "head_or_bigram_attention_in": (
                hb["attention_in"],
                "second layer's attention on the keys after earlier q, o in the top",
            ),
            "head_or_bigram_attention_off": (hb["attention_off"], "the same, o not in the top"),
            "head_or_bigram_acc_first": (
                hb["bins"][0]["acc"],
                "accuracy where o is the trigger's likeliest successor",
            ),
            "head_or_bigram_head_first": (
                hb["bins"][0]["head_acc"],
                "the same positions: the head path alone predicts o",
            ),
            "head_or_bigram_attention_first": (
                hb["bins"][0]["attention"],
                "the same positions: attention on the keys after q",
            ),
            "head_or_bigram_strata_matched": (
                hb["strata_matched"],
                "strata (trigger, occurrence bin) with both kinds of positions",
            ),
            "head_or_bigram_matched_share": (
                hb["matched_share"],
                "share of the top positions in those strata",
            ),
            "head_or_bigram_attention_in_matched": (
                hb["attention_in_matched"],
                "attention on the keys after earlier q, o in the top, within strata",
            ),
            "head_or_bigram_attention_off_matched": (
                hb["attention_off_matched"],
                "the same, o not in the top, same strata",
            ),
            "head_or_bigram_acc_in_matched": (hb["acc_in_matched"], "accuracy, o in the top, within strata"),
            "head_or_bigram_acc_off_matched": (
                hb["acc_off_matched"],
                "accuracy, o not in the top, weighted to the same strata",
            ),
            "head_or_bigram_top1_ratio_matched": (
                hob["top1_ratio_matched"],
                "share predicting the likeliest successor, in over off, within strata",
            ),
            **{
                f"head_or_bigram_{k}_{side}": (
                    hb[f"{k}_{side}_matched"],
                    f"{MECHANISM[k]}, o {'in' if side == 'in' else 'not in'} the top, within strata",
                )
                for k in MECHANISM
                if k != "attention"
                for side in ("in", "off")
            },
            "head_or_bigram_key_score_gap": (
                hob["key_score_gap"],
                "second layer's mean logit of the keys holding o: in minus off, within strata",
            ),
            "head_or_bigram_pair_score_gap": (hob["pair_score_gap"], "its token-token part"),
            "head_or_bigram_match_score_gap": (hob["match_score_gap"], "its query-token x first-layer part"),
            "head_or_bigram_rest_score_gap": (
                hob["rest_score_gap"],
                "log-sum-exp of the other keys' logits: in minus off, within strata",
            ),
            **{
                f"pair_{layer[2:].replace('^', '')}_{m}": (
                    ps[name][layer]["likely_minus_other"],
                    f"{name}, {layer}: token-token logit, y among q's "
                    f"{BIGRAM_TOP} likeliest successors minus another successor",
                )
                for m, name in zip(("random", "init", "fixed"), PAIR_MODELS)
                for layer in ("W_QK^1", "W_QK^2")
            },
            **{push_name(k, p): push_entry(pg, k, p) for k in KEY_KINDS for p in (*QUERY_PARTS, "net")},
            **{
                f"head_or_bigram_ratio_{k}": (hob[f"ratio_{k}"], RANDOM_MEASURES[f"ratio_{k}"][1])
                for k in DISCOUNT_EDITS
                if k != "trained"
            },
            "seconds": (res["random"].seconds, "training time of the random-trigger run (s)"),
        }
    )


# the edits that the Check's rows on the trained model read (trained_summary)
ROW_EDITS = ("trained", "both_removed", "both_doubled")


def _trained_entries(hob: dict, pg: dict) -> dict[str, tuple[float, str]]:
    """The entries of :func:`random_summary` that the Check's rows on the trained random-trigger model read
    (``late_rows.INDUCTION_RANDOM``), from :func:`head_or_bigram_values` (``hob``), and the parts of
    :func:`pair_gradient` (``pg``) that split the balance gap one of them reads (:data:`PUSH_ENTRIES`)."""
    return {
        "head_or_bigram_acc_off": (
            hob["acc_off"],
            f"accuracy where o is not among the trigger's {BIGRAM_TOP} likeliest successors",
        ),
        "head_or_bigram_top1_ratio": (hob["top1_ratio"], "o in the top over o not in the top"),
        "head_or_bigram_prev_attention_gap": (
            hob["prev_attention_gap"],
            "first layer's attention of the keys holding o on q: in minus off, within strata",
        ),
        "pair_discount_weaker": (
            hob["pair_discount_weaker"],
            "random triggers: the weaker (larger) of the two layers' likely-minus-other",
        ),
        **{push_name("likely", p): push_entry(pg, "likely", p) for p in QUERY_PARTS},
        **{
            f"push_{k}_balance": (
                pg[k]["balance"],
                f"share of the triggers' push on {k} keys that the other positions undo",
            )
            for k in KEY_KINDS
        },
        "push_balance_gap": (hob["balance_gap"], "likely keys' balance minus other keys'"),
        **{
            f"head_or_bigram_{k}": (hob[k], RANDOM_MEASURES[k][1])
            for k in ("discount_removed_share", "discount_doubled_growth")
        },
    }


# the entries of trained_summary: the rows' (late_rows.INDUCTION_RANDOM) and the parts of the balance gap
TRAINED_ENTRIES = (
    "head_or_bigram_acc_off",
    "head_or_bigram_top1_ratio",
    "head_or_bigram_prev_attention_gap",
    "pair_discount_weaker",
    *PUSH_ENTRIES,
    "head_or_bigram_discount_removed_share",
    "head_or_bigram_discount_doubled_growth",
)


def trained_summary(runs: dict[str, InductionRun], n_seq: int = 2048) -> report.Summary:
    """The entries of :func:`random_summary` that the Check's rows on the trained random-trigger model read, and the
    parts of the balance gap (:data:`TRAINED_ENTRIES`), of ``runs["random"]`` (a run or one cut by ``stopped_after``
    in its late window, with the weights of that evaluation), measured as the chapter measures them (the same
    ``n_seq`` sequences; only the edits of :data:`ROW_EDITS`): what ``late_verdicts.stopped_entries`` judges the rows
    on and :func:`companion.experiments.induction_random_push.late_pushes` reads."""
    r = runs["random"]
    pg = pair_gradient(r, n_seq)
    edits = discount_edits(r, n_seq, keys=ROW_EDITS)
    hob = head_or_bigram_values(edits, pg, pair_scores(r.model(), r.exp.task()))
    return report.Summary(_trained_entries(hob, pg))
