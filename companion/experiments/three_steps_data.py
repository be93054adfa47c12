"""The chapter ``book/three_steps_data``: the three gradient steps of :mod:`companion.experiments.three_steps` on
Shakespeare's data. Its numbers (:func:`data_summary`, :func:`qk2_rank_table`); what breaks step 2 with random
embeddings, read from the step-2 gradient split by the parts of the streams (:func:`step2_outer`,
:func:`step2_token_weights`, :func:`step2_probe_parts`, :func:`key_coherence`); and why step 3 misses row 1
(:func:`step3_row_paths`). The population computations are cached (the book's build reads what its test run
computed)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from companion import report
from companion.config import check_int
from companion.experiments.induction import STEP_ORDER, memory_scores, strict_recall
from companion.experiments.three_steps import (
    DATA_RUNS,
    POPULATION_FACTOR,
    ThreeStepExperiment,
    after_first_step,
    cached,
    check_runs,
    line_searched_steps,
    load_state,
    qk1_misses,
    step_setup,
)
from companion.models import Transformer

MODULES = ("companion.experiments.three_steps_data",)  # the cache key of this module's computations


def data_summary(results: dict[str, dict]) -> report.Summary:
    """The values ``book/three_steps_data`` asserts, read from its runs (:data:`~companion.experiments.three_steps.
    DATA_RUNS`, keyed by name)."""
    check_runs(results, DATA_RUNS, "data_summary")
    text, ortho, iid, big = (results[n]["rows"] for n in DATA_RUNS)
    return report.Summary(
        {
            "text_ov": (text[1]["probe_OV2"], "Gaussian, Shakespeare bigram: W_OV^2 probe after step 1"),
            "text_qk2": (text[2]["probe_QK2_all"], "the same: W_QK^2 probe after step 2"),
            "text_qk1": (text[3]["probe_QK1"], "the same: W_QK^1 probe after step 3"),
            "text_ortho_qk2": (
                ortho[2]["probe_QK2_all"],
                "orthonormal embeddings, Shakespeare bigram: W_QK^2 probe after step 2",
            ),
            "iid_qk2": (
                iid[2]["probe_QK2_all"],
                "Gaussian, Shakespeare's frequencies drawn independently: W_QK^2 probe after step 2",
            ),
            "text_ortho_qk1": (
                ortho[3]["probe_QK1"],
                "orthonormal embeddings, Shakespeare bigram: W_QK^1 probe after step 3",
            ),
            "population_factor": (POPULATION_FACTOR, "the population-size control's factor"),
            "text_ortho_qk1_big": (
                big[3]["probe_QK1"],
                f"the same with {POPULATION_FACTOR}x the population: W_QK^1 probe after step 3",
            ),
            "text_ortho_step2_size": (
                ortho[2]["eta"],
                "orthonormal embeddings, Shakespeare bigram: step 2's size (line-searched)",
            ),
            "text_ortho_step2_size_big": (
                big[2]["eta"],
                f"the same with {POPULATION_FACTOR}x the population",
            ),
            "text_ortho_row1_recalled": (
                float(1 not in dict(qk1_misses(results[DATA_RUNS[1]]))),
                "orthonormal embeddings, Shakespeare bigram: 1 if the W_QK^1 probe recalls row 1 after step 3",
            ),
            "seconds": (
                sum(results[n]["seconds"] for n in DATA_RUNS),
                f"time of the {len(DATA_RUNS)} runs (s)",
            ),
        }
    )


def qk2_rank_table(results: dict[str, dict], runs: dict[str, ThreeStepExperiment]) -> str:
    """Markdown: for each trigger of the named runs (which share their triggers), its frequency and, per run,
    the rank of its own remapped key in its W_QK^2 probe row after step 2 (1: recalled) and the winning key."""
    names = list(results)
    stats = runs[names[0]].task().stats
    triggers = runs[names[0]].task().triggers
    if any(runs[n].task().triggers != triggers for n in names):
        raise ValueError(f"the runs {names} do not share their triggers")
    second = {n: next(r for r in results[n]["rows"] if r["matrix"] == "W_QK^2") for n in names}
    rows = []
    for i, q in enumerate(triggers):
        cells = []
        for n in names:
            rank, win = second[n]["qk2_rank"][i], second[n]["qk2_winner"][i]
            cells.append("1" if rank == 1 else f"{rank} ({stats.itos[win]!r} wins)")
        rows.append([repr(stats.itos[q]), float(stats.unigram[q]), *cells])
    return report.markdown_table(["trigger", "frequency", *names], rows, digits=2)


# x_t = w_E(z_t) + p_t + h^1_t, the stream entering layer 2
STREAM_PARTS = ("token", "position", "first layer")


@torch.no_grad()
def step2_outer(
    model: Transformer, population, keep: list | None = None
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The negative population gradient of W_QK^2 at W_QK^2 = 0, in closed form and split by source.

    With W_QK^2 = 0 the last position attends uniformly to the T positions, and for a loss at the last position
    -dl/dW_QK^2 = (c / T) sum_s (b_s - mean_s b_s) x_{T-1} x_s^T, with b_s = (e_o - pi)^T W_U W_V^2 x_s (how much
    attending to s would raise log p(o)), x the stream entering layer 2 and c attention's 1/sqrt(d). Each stream is
    the sum of :data:`STREAM_PARTS`: its token's embedding, its position and what the first layer wrote. Returns
    (Q, K), each part's (n, d) rows over the n sequences with a loss position: Q[a] the query's part a,
    K[b] = (c / T) sum_s (b_s - mean b) (part b of x_s); the gradient is sum_{a, b} Q[a]^T K[b] / n.
    ``keep``, if a list, receives per batch (tokens, outputs, gains b_s, pi) for :func:`step2_token_weights`,
    so that it needs no second pass over the population.

    Raises:
        ValueError: not two attention-only layers, W_QK^2 not zero, or a loss position before the last.
    """
    if len(model.layers) != 2 or any(layer.ff.kind != "none" for layer in model.layers):
        raise ValueError(
            "step2_outer needs two attention-only layers, got feed-forward kinds "
            f"{[layer.ff.kind for layer in model.layers]}"
        )
    if model.matrix("W_QK^2").abs().max() > 0:
        raise ValueError("step2_outer needs W_QK^2 = 0 (uniform attention in layer 2)")
    if any(b.loss_mask[:, :-1].any() for b in population):
        raise ValueError("step2_outer needs the loss at the last position only (loss_on='final_recall')")
    Q, K = ({a: [] for a in STREAM_PARTS} for _ in range(2))
    for tokens, target, x, gain, pi in _step2_gains(model, population):
        if keep is not None:
            keep.append((tokens, target, gain, pi))
        w = model.scale / x.shape[1] * (gain - gain.mean(1, keepdim=True))
        token, position = model.W_E[tokens], model.P[: x.shape[1]].expand_as(x)
        for a, X in zip(STREAM_PARTS, (token, position, x - token - position)):
            Q[a].append(X[:, -1])
            K[a].append(torch.einsum("nt,ntd->nd", w, X))
    return {a: torch.cat(v) for a, v in Q.items()}, {a: torch.cat(v) for a, v in K.items()}


def _step2_gains(model: Transformer, population):
    """Per batch of the population (sequences with a loss position): the tokens (n, T), the outputs (n,), the
    streams entering layer 2 (n, T, d), the gains b_s = (e_o - pi)^T W_U W_V^2 x_s (n, T) and pi (n, V)."""
    for b in population:
        keep = torch.as_tensor(b.loss_mask[:, -1])
        tokens, target = torch.as_tensor(b.inputs)[keep], torch.as_tensor(b.targets[:, -1])[keep]
        record = {}
        logits = model(tokens, last_only=True, record=record)  # (n, V)
        x = record["u1"]  # (n, T, d): layer 1 has no feed-forward, so this enters layer 2
        pi = torch.softmax(logits, -1)
        err = F.one_hot(target, logits.shape[-1]).to(x) - pi
        yield tokens, target, x, torch.einsum("nv,ntv->nt", err, model.unembed(x @ model.layers[1].v().T)), pi


KEY_ROLES = ("other", "query's token", "output")  # what a key's token is to its sequence


@torch.no_grad()
def step2_token_weights(
    model: Transformer, population, query: torch.Tensor, gains: list | None = None
) -> dict:
    """Why the keys' token vectors of step 2 add up coherently: each key's weight b_s - mean b split into the
    mean over the population of the keys with its token and role (:data:`KEY_ROLES`: the query's own token, the
    output, another token) and the rest.

    ``m`` (3, V): those means; ``cos`` / ``cos_min``: over the triggers, the cosine between a trigger's row of
    the keys' token part, sum_n sum_s (b_s - mean b) w_E(z_s) over its sequences, and the same with every
    weight replaced by its token's and role's mean (1: the means make the row); ``alpha`` (V,):
    W_U(j)^T W_V^2 w_E(j), how strongly step 1 stored token j; ``pi`` (V,): its mean predicted probability.
    For a key holding another token j, b_s = (e_o - pi)^T W_U W_V^2 x_s has the part -alpha_j pi_j.
    ``query`` as in :func:`key_coherence`, in the population's order. ``gains``: what :func:`step2_outer`
    kept (``keep``) for the same model and population, read instead of a pass over the population.
    """
    _check_query(query, sum(int(b.loss_mask[:, -1].sum()) for b in population))
    if gains is None:
        gains = [
            (tokens, target, gain, pi) for tokens, target, _, gain, pi in _step2_gains(model, population)
        ]
    V = model.W_U.shape[0]
    sums, counts, pi_sum, rows, keys = torch.zeros(3 * V), torch.zeros(3 * V), 0.0, [], []
    for tokens, target, gain, pi in gains:
        w = gain - gain.mean(1, keepdim=True)
        # output wins a tie
        role = torch.where(tokens == target[:, None], 2, (tokens == tokens[:, -1:]).long())
        key = (role * V + tokens).flatten()
        sums.index_add_(0, key, w.flatten())
        counts += torch.bincount(key, minlength=3 * V)
        pi_sum = pi_sum + pi.sum(0)
        rows.append(torch.einsum("nt,ntd->nd", w, model.W_E[tokens]))
        keys.append((role * V + tokens, tokens))
    m = sums / counts.clamp_min(1)
    key, tokens = (torch.cat(k) for k in zip(*keys))
    q = query.T.to(m)
    whole, from_means = q @ torch.cat(rows), q @ torch.einsum("nt,ntd->nd", m[key], model.W_E[tokens])
    cos = F.cosine_similarity(whole, from_means, dim=1)
    alpha = (model.W_U * (model.layers[1].v() @ model.W_E.T).T).sum(1)
    return {
        "m": m.view(3, V),
        "counts": counts.view(3, V),
        "alpha": alpha,
        "pi": pi_sum / len(tokens),
        "cos": cos.mean().item(),
        "cos_min": cos.min().item(),
    }


def step2_probe_parts(exp: ThreeStepExperiment, use_cache: bool = True) -> dict:
    """The W_QK^2 probe after step 2 of the slide's order, split by which parts of the query and of the keys
    (:data:`STREAM_PARTS`) each score comes from (:func:`step2_outer`); any embeddings and data. The probe row of
    trigger q scores w_E(q)^T G W_V^1 w_E(k) over every token k, and G is a sum of nine outer products, so each
    row is a sum of nine parts. ``probe``: the whole probe's recall (step 2 scales G, so this is the run's
    ``probe_QK2_all``); ``query`` and ``key``: for each part of the query (keys whole) or of the keys (query
    whole), the recall of its scores alone and their ``spread`` (the rows' standard deviation over keys, mean
    over rows); ``without key``: the recall of the whole probe less one part of the keys; ``key tokens``: how the
    keys' token vectors of the sequences add up in each trigger's row (:func:`key_coherence`).

    Raises:
        ValueError: an order other than the slide's, or a loss other than ``final_recall``.
    """
    if exp.order != STEP_ORDER or exp.loss_on != "final_recall":
        raise ValueError(
            f"step2_probe_parts needs the slide's order {STEP_ORDER} and loss_on='final_recall', not "
            f"{exp.order} and {exp.loss_on!r}"
        )
    return cached(
        "three_steps_probe_parts", exp, {}, lambda: _step2_probe_parts(exp, use_cache), MODULES, use_cache
    )


def _step2_probe_parts(exp: ThreeStepExperiment, use_cache: bool) -> dict:
    model, task, population = after_first_step(exp, use_cache=use_cache)
    kept = []
    Q, K = step2_outer(model, population, keep=kept)
    S = {}
    with torch.no_grad():
        for a in STREAM_PARTS:  # each part of G in W_QK^2 in turn, read by the probe itself
            for b in STREAM_PARTS:
                model.layers[1].W_QK.copy_(Q[a].T @ K[b] / len(Q[a]))
                S[a, b] = memory_scores(model, task.triggers, task.n)["W_QK^2"]
    whole = sum(S.values())

    def read(M: torch.Tensor) -> dict[str, float]:
        return {"probe": strict_recall(M), "spread": M.std(1).mean().item()}

    key = {b: sum(S[a, b] for a in STREAM_PARTS) for b in STREAM_PARTS}
    with torch.no_grad():
        # (n, K): its trigger
        query = (Q["token"][:, None, :] == model.W_E[list(task.triggers)][None]).all(-1)
    weights = step2_token_weights(model, population, query, gains=kept)
    n = task.n  # ordinary tokens: their frequencies
    unigram = torch.as_tensor(task.stats.unigram, dtype=weights["m"].dtype)

    def corr(a: torch.Tensor, b: torch.Tensor) -> float:  # nan when one is constant (uniform data)
        return (
            float(np.corrcoef(a[:n].numpy(), b[:n].numpy())[0, 1])
            if a[:n].std() > 0 and b[:n].std() > 0
            else float("nan")
        )

    return {
        "probe": strict_recall(whole),
        "query": {a: read(sum(S[a, b] for b in STREAM_PARTS)) for a in STREAM_PARTS},
        "key": {b: read(M) for b, M in key.items()},
        "without key": {b: strict_recall(whole - M) for b, M in key.items()},
        "key tokens": key_coherence(K["token"], query),
        "token means": {
            "cos": weights["cos"],
            "cos_min": weights["cos_min"],
            "m_unigram": corr(weights["m"][0], unigram),
            "m_predicted": corr(weights["m"][0], -weights["alpha"] * weights["pi"]),
            "m_query": float(weights["m"][1][list(task.triggers)].mean()),
            "m_other": float(weights["m"][0][list(task.triggers)].mean()),
            "alpha_unigram": corr(weights["alpha"], unigram),
            "pi_unigram": corr(weights["pi"], unigram),
        },
    }


def _check_query(query: torch.Tensor, n: int) -> None:
    if query.ndim != 2 or len(query) != n or not (query.sum(1) == 1).all():
        raise ValueError(
            f"the query needs exactly one trigger per sequence ({n} sequences); got {query.sum(-1)}"
        )


def key_coherence(K: torch.Tensor, query: torch.Tensor) -> dict[str, float]:
    """How the sequences' key vectors ``K`` (n, d) add up in each trigger's row of step 2's gradient, given
    ``query`` (n, K), True where sequence n's query is trigger j (one per row). For trigger j, C_j is the sum of
    its sequences' rows. ``coherence``: the mean over triggers of ||C_j||^2 / sum ||K_n||^2, about 1 when the
    sequences' vectors add like independent ones of mean zero, up to the number of sequences when they are alike;
    ``shared``: the mean over triggers of the share of ||C_j||^2 along sum_j C_j, the direction all rows share (1:
    every trigger's row is the same vector, up to scale); ``sequences``: the fewest sequences of a trigger.

    >>> same = key_coherence(torch.ones(4, 3), torch.tensor([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=torch.bool))
    >>> round(same["coherence"], 6), round(same["shared"], 6)
    (2.0, 1.0)

    Raises:
        ValueError: a sequence whose query is not exactly one trigger.
    """
    _check_query(query, len(K))
    with torch.no_grad():
        q = query.to(K)
        C = q.T @ K  # (K, d)
        own = q.T @ K.pow(2).sum(1)  # (K,): sum of ||K_n||^2 per trigger
        shared = C.sum(0) / C.sum(0).norm()
        return {
            "coherence": (C.pow(2).sum(1) / own).mean().item(),
            "shared": ((C @ shared) ** 2 / C.pow(2).sum(1)).mean().item(),
            "sequences": q.sum(0).min().item(),
        }


GAUSSIAN_RUNS = (
    "slide order, Gaussian",
    "slide order, Gaussian, Shakespeare",
    "slide order, Gaussian, Shakespeare i.i.d.",
)  # the chapter's runs with random embeddings


def step2_probe_summary(parts: dict[str, dict]) -> report.Summary:
    """The claim values of :func:`step2_probe_parts` over the chapter's :data:`GAUSSIAN_RUNS` (keyed by run name)."""
    check_runs(parts, GAUSSIAN_RUNS, "step2_probe_summary")
    uni, iid = parts[GAUSSIAN_RUNS[0]], parts[GAUSSIAN_RUNS[2]]

    def ratio(r: dict, side: str, part: str, over: str) -> float:
        return r[side][part]["spread"] / r[side][over]["spread"]

    return report.Summary(
        {
            "step2_parts_first_layer_min": (
                min(parts[n]["key"]["first layer"]["probe"] for n in GAUSSIAN_RUNS),
                "Gaussian runs: the probe's part from the keys' first-layer output (the remapped "
                "tokens) alone, smallest recall over the three runs",
            ),
            "step2_parts_context_max": (
                max(ratio(parts[n], "query", "first layer", "token") for n in GAUSSIAN_RUNS),
                "Gaussian runs: spread of the part from what the first layer adds to the query over "
                "that of the part from the query's token, largest over the three runs",
            ),
            "step2_parts_token_iid": (
                ratio(iid, "key", "token", "first layer"),
                "Shakespeare's frequencies i.i.d.: spread "
                "of the part from the keys' token embeddings over that of their first-layer output",
            ),
            "step2_parts_position_iid": (
                ratio(iid, "key", "position", "first layer"),
                "the same for the keys' positions",
            ),
            "step2_parts_token_uniform": (
                ratio(uni, "key", "token", "first layer"),
                "uniform data: keys' tokens over their first-layer output",
            ),
            "step2_parts_position_uniform": (
                ratio(uni, "key", "position", "first layer"),
                "uniform data: keys' positions over their first-layer output",
            ),
            "step2_parts_without_token_iid": (
                iid["without key"]["token"],
                "Shakespeare's frequencies i.i.d.: recall of the whole probe less the keys' token part",
            ),
            "step2_parts_without_position_iid": (
                iid["without key"]["position"],
                "the same less the keys' position part",
            ),
            "step2_parts_coherence_uniform": (
                uni["key tokens"]["coherence"],
                "uniform data: how coherently the keys' token "
                "vectors of one trigger's sequences add (1: as independent ones of mean zero)",
            ),
            "step2_parts_coherence_iid": (
                iid["key tokens"]["coherence"],
                "Shakespeare's frequencies i.i.d.: the same",
            ),
            "step2_parts_shared_uniform": (
                uni["key tokens"]["shared"],
                "uniform data: share of each trigger's keys' token "
                "part along the direction common to all triggers",
            ),
            "step2_parts_shared_iid": (
                iid["key tokens"]["shared"],
                "Shakespeare's frequencies i.i.d.: the same",
            ),
            "step2_parts_sequences_min": (
                min(parts[n]["key tokens"]["sequences"] for n in GAUSSIAN_RUNS),
                "the fewest sequences in one trigger's row, over the three runs",
            ),
            "step2_parts_coherence_ratio": (
                iid["key tokens"]["coherence"] / uni["key tokens"]["coherence"],
                "coherence of the keys' token vectors, Shakespeare's frequencies i.i.d. over uniform",
            ),
            "step2_parts_means_cos_iid": (
                iid["token means"]["cos_min"],
                "Shakespeare's frequencies i.i.d.: cosine between a "
                "trigger's keys' token part and the same with each key's weight replaced by its "
                "token's mean, smallest over triggers",
            ),
            "step2_parts_means_cos_uniform": (
                uni["token means"]["cos"],
                "uniform data: the same, mean over triggers",
            ),
            "step2_parts_means_cos_iid_mean": (
                iid["token means"]["cos"],
                "Shakespeare's frequencies i.i.d.: the same, mean",
            ),
            "step2_parts_weight_unigram_iid": (
                iid["token means"]["m_unigram"],
                "Shakespeare's frequencies i.i.d.: correlation "
                "over tokens of the mean weight of keys holding the token (not as the query's token "
                "or the output) with its frequency",
            ),
            "step2_parts_weight_predicted_iid": (
                iid["token means"]["m_predicted"],
                "the same with -alpha_j pi_j",
            ),
            "step2_parts_weight_predicted_uniform": (
                uni["token means"]["m_predicted"],
                "uniform data: the same",
            ),
            "step2_parts_weight_query_iid": (
                iid["token means"]["m_query"],
                "Shakespeare's frequencies i.i.d.: mean weight of "
                "keys holding the query's own trigger, mean over the triggers",
            ),
            "step2_parts_weight_trigger_other_iid": (
                iid["token means"]["m_other"],
                "the same run: mean weight of keys holding a trigger character that is not the query",
            ),
            "step2_parts_alpha_unigram_iid": (
                iid["token means"]["alpha_unigram"],
                "the same run: correlation of step 1's memory strength alpha_j with the frequency",
            ),
            "step2_parts_pi_unigram_iid": (
                iid["token means"]["pi_unigram"],
                "the same run: correlation of the mean predicted probability pi_j with the frequency",
            ),
        }
    )


def step2_probe_table(parts: dict[str, dict]) -> str:
    """Markdown: for each :func:`step2_probe_parts` result (keyed by run name), the whole probe's recall and, for
    each part of the query and of the keys, the recall of that part alone and its spread."""
    head = ["scores from"] + [f"{c} ({n})" for n in parts for c in ("recall", "spread")]
    rows = [["the whole probe", *(x for r in parts.values() for x in (r["probe"], "–"))]]
    rows += [
        [
            f"{side}: {part}",
            *(x for r in parts.values() for x in (r[side][part]["probe"], r[side][part]["spread"])),
        ]
        for side in ("query", "key")
        for part in STREAM_PARTS
    ]
    return report.markdown_table(head, rows, digits=3)


# how a first-layer logit reaches the loss: through layer 2's keys or its values
STEP3_PATHS = ("key", "value")


def step3_row_paths(
    exp: ThreeStepExperiment, row: int = 1, factors=(1.0, 2.0), use_cache: bool = True
) -> dict:
    """Why the W_QK^1 probe misses a row after step 3: the (row, row - 1) entry (the previous position) of step 3's
    negative population gradient on the first layer's attention logits, split by path and by sequence.

    Step 1 and step 2 are taken as in :func:`three_steps` (step 2 line-searched: ``exp`` must have no
    ``second_step_sizes``); then W_QK^2 is set to each of ``factors`` times step 2 and the gradient is read. At
    W_QK^1 = 0, entry (t, s) of the gradient's P x P block is c |p|^4 times the mean over the loss sequences of
    the logit gradient computed here. A logit of row t < T - 1 reaches the loss only through position t's stream
    as a key of layer 2 (``key``) and as its value (``value``). The entries of a row sum to zero, so in row 1,
    whose keys are positions 0 and 1, the probe recalls exactly when this entry is positive. ``trigger``: the same
    parts from the sequences whose token at ``row - 1`` is the final trigger (so that position ``row`` holds its
    output); ``trigger_share``: their share of the loss sequences. Values are sums over the loss sequences
    divided by their number. ``ov_remapped``: after step 1, the mean score W_U(k)^T W_V^2 x of a token's own
    unembedding for x its remapped token W_V^1 w_E(k), over the same for x = w_E(k).

    Raises:
        ValueError: ``row`` outside [1, T - 2], an empty or non-positive ``factors``, a loss other than
            ``final_recall``, an order other than the slide's, or a run whose step 2 size is swept.
    """
    if exp.order != STEP_ORDER or exp.loss_on != "final_recall" or exp.second_step_sizes:
        raise ValueError(
            f"step3_row_paths needs the slide's order {STEP_ORDER}, loss_on='final_recall' and a "
            f"line-searched step 2, not {exp.order}, {exp.loss_on!r} and second_step_sizes="
            f"{exp.second_step_sizes}"
        )
    check_int("row", row, low=1, high=exp.seq_len - 2)
    factors = tuple(float(f) for f in factors)
    if not factors or min(factors) <= 0:
        raise ValueError(f"factors={factors} must be a non-empty list of numbers > 0")
    return cached(
        "three_steps_row_paths",
        exp,
        {"row": row, "factors": list(factors)},
        lambda: _step3_row_paths(exp, row, factors, use_cache),
        MODULES,
        use_cache,
    )


def _step3_row_paths(exp: ThreeStepExperiment, row: int, factors: tuple[float, ...], use_cache: bool) -> dict:
    model, task, population, _ = step_setup(exp)
    first, second = line_searched_steps(exp, 2, use_cache=use_cache)
    load_state(model, first["state"])
    # step 1's W_V^2 read on the tokens and on the remapped tokens: its own-token recall
    with torch.no_grad():
        n_tok = task.n
        tokens = model.W_E[:n_tok]
        own = {
            name: torch.diagonal(model.W_U[:n_tok] @ model.matrix(STEP_ORDER[0]) @ X.T).mean().item()
            for name, X in (("token", tokens), ("remapped", tokens @ model.layers[0].v().T))
        }
    load_state(model, second["state"])
    size = second["eta"]
    step2 = model.matrix(STEP_ORDER[1]).detach().clone()
    layer, T = model.layers[1], exp.seq_len
    out = {
        "row": row,
        "step2_size": size,
        "factors": list(factors),
        "trigger_share": 0.0,
        "ov_remapped": own["remapped"] / own["token"],
        **{p: [] for p in STEP3_PATHS},
        "trigger": {p: [] for p in STEP3_PATHS},
    }
    for f in factors:
        sums = {p: 0.0 for p in STEP3_PATHS}
        case = {p: 0.0 for p in STEP3_PATHS}
        n = n_case = 0
        with torch.no_grad():
            model.matrix(STEP_ORDER[1]).copy_(f * step2)
        for b in population:
            keep = torch.as_tensor(b.loss_mask[:, -1])
            target = torch.as_tensor(b.targets[:, -1])[keep]
            bias = torch.zeros(len(b.inputs), T, T, requires_grad=True)
            u = model.attend(0, model.embed(torch.as_tensor(b.inputs)), score_bias=bias)[keep]
            query = u[:, -1:].detach()

            def loss(keys, values):
                attn = torch.softmax((query @ layer.qk()) @ keys.transpose(1, 2) * model.scale, dim=-1)
                return F.cross_entropy(
                    model.unembed((query + attn @ (values @ layer.v().T))[:, 0]), target, reduction="sum"
                )

            grads = dict(
                zip(
                    STEP3_PATHS,
                    torch.autograd.grad(loss(u, u.detach()), bias, retain_graph=True)
                    + torch.autograd.grad(loss(u.detach(), u), bias),
                )
            )
            first = torch.as_tensor(b.inputs[:, row - 1] == b.inputs[:, -1])[keep]
            for p, g in grads.items():
                entry = -g[keep][:, row, row - 1]
                sums[p] += entry.sum().item()
                case[p] += entry[first].sum().item()
            n, n_case = n + int(keep.sum()), n_case + int(first.sum())
        for p in STEP3_PATHS:
            out[p].append(sums[p] / n)
            out["trigger"][p].append(case[p] / n)
        out["trigger_share"] = n_case / n
    return out


def step3_row_summary(paths: dict) -> report.Summary:
    """The claim values of :func:`step3_row_paths` (factors 1 and 2 needed): ids ``ih.step3_row1_*``."""
    f = paths["factors"]
    if 1.0 not in f or 2.0 not in f:
        raise ValueError(f"step3_row_summary needs factors 1 and 2 (the run's step 2 and twice it), got {f}")
    one, two = f.index(1.0), f.index(2.0)
    key, value = paths["key"][one], paths["value"][one]
    return report.Summary(
        {
            "step3_row_row": (paths["row"], "the probe row read"),
            "step3_row_size": (paths["step2_size"], "step 2's size, line-searched"),
            "step3_row_key": (
                key,
                "previous-position entry of the step-3 logit gradient, through layer 2's keys",
            ),
            "step3_row_value": (value, "the same, through layer 2's values"),
            "step3_row_total": (key + value, "the whole entry (the probe recalls the row when > 0)"),
            "step3_row_value_over_key": (
                -value / key,
                "minus the value path over the key path (> 1: the values win)",
            ),
            "step3_row_trigger_share": (
                paths["trigger_share"],
                "share of the loss sequences whose token before the row's position is the final trigger",
            ),
            "step3_row_value_trigger": (
                paths["trigger"]["value"][one] / value,
                "share of the value path that comes from those sequences",
            ),
            "step3_row_key_trigger": (
                paths["trigger"]["key"][one] / key,
                "share of the key path from those sequences",
            ),
            "step3_row_total_double": (
                paths["key"][two] + paths["value"][two],
                "the whole entry with step 2 twice as large",
            ),
            "step3_row_key_double": (
                paths["key"][two] / key,
                "the key path with step 2 twice as large, over the run's",
            ),
            "step3_row_ov_remapped": (
                paths["ov_remapped"],
                "step 1's W_V^2: own-unembedding score of a remapped token over that of the token itself",
            ),
        }
    )
