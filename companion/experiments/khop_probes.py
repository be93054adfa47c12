"""What a trained k-hop model computes where: linear probes of the chain at position 0 and at the entries the
hops read (:func:`hop_probe`), the attention on those entries, table 4 shown to some blocks only
(:func:`table_interference`), and the tables of a probe study (:class:`ProbeStudy`, :func:`probe_rows`,
:func:`walk_rows`). Read by the talk's k = 4 chapter and our two studies; the task, the model and the training
are :mod:`companion.experiments.khop`'s."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from companion import config, report
from companion.config import check_choice, check_int
from companion.data.khop import HopBatch, KHopTask
from companion.experiments.khop import KHopExperiment, run
from companion.experiments.khop_curves import learned_at
from companion.experiments.khop_members import EXPLORED, EXPLORED_EVERY
from companion.experiments.khop_studies import (
    SEED_SETTINGS,
)
from companion.models.hop import table_hidden

# --- what a trained model computes where: linear probes of the chain (recorded: ``khop_probe``) ---

# the depth-4 study's budget: seed 0 stalls, every 250 it does not
PROBE_SETTINGS = SEED_SETTINGS | {"steps": 8000}


PROBED = ("seed 0", EXPLORED)  # the two runs of seed 0 that differ only in when the curriculum advances


def read_positions(task: KHopTask, b: HopBatch) -> np.ndarray:
    """(batch, h): the position that hop j reads, 1 + (j - 1) N + pi_j(v_{j-1}) (v_0 = x, the query), the entry
    of table j that holds v_j, in a batch of h-hop examples (one hop count h for all).

    Raises:
        ValueError: examples with different hop counts.
    """
    counts = sorted(set(b.hops.tolist()))
    if len(counts) != 1:
        raise ValueError(f"read_positions needs examples of one hop count: got hop counts {counts}")
    h, pi = counts[0], task.hidden()
    before = np.concatenate([b.tokens[:, :1], b.chain[:, : h - 1]], axis=1)  # v_{j-1}
    return 1 + np.arange(h) * task.N + pi[np.arange(h), before]


def linear_probe(
    X: torch.Tensor,
    y: torch.Tensor,
    X_test: torch.Tensor,
    y_test: torch.Tensor,
    classes: int,
    l2: float = 1e-3,
    iters: int = 200,
) -> float:
    """Test accuracy of a softmax regression of ``y`` on ``X`` (features standardised on the training set, L2
    penalty ``l2``, L-BFGS from zero, so that the fit is deterministic; a convex fit on fixed features, kept apart
    from the training engine, :func:`companion.train.fit`)."""
    mu, sd = X.mean(0), X.std(0).clamp_min(1e-6)
    X, X_test = (X - mu) / sd, (X_test - mu) / sd
    W = torch.zeros(X.shape[1] + 1, classes, requires_grad=True)
    ones = torch.ones(len(X), 1)
    opt = torch.optim.LBFGS([W], max_iter=iters, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(torch.cat([X, ones], 1) @ W, y) + l2 * (W[:-1] ** 2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    pred = (torch.cat([X_test, torch.ones(len(X_test), 1)], 1) @ W).argmax(1)
    return float((pred == y_test).float().mean())


def hop_probe(
    exp: KHopExperiment, state: dict, n_train: int = 4096, n_test: int = 2048, hops: int | None = None
) -> dict:
    """Where a trained model has the chain of an h-hop example (``hops``, default k), on fresh h-hop examples
    (stream "hop-probe" of its seed): ``probe`` (depth + 1, h), the test accuracy of a linear probe
    (:func:`linear_probe`, fitted on ``n_train`` examples, tested on ``n_test`` others) of v_j, the value after
    hop j, from position 0's stream before the first block (row 0) and after each block; ``entry``
    (depth + 1, h), the same probe of v_h, the answer, from the stream at the entry that hop j reads
    (:func:`read_positions`; does that entry hold the rest of the chain before position 0 reads it?);
    ``attention`` (depth, h), position 0's attention in each block on the entry that hop j reads, the largest
    over the heads of its mean over the examples; ``chain`` (depth + 1, h, h), the probe of v_j from the stream
    at the entry that hop i reads, ``chain[l, i - 1, j - 1]`` for j >= i (NaN below: the chain before that entry),
    so that ``entry`` is its last column; ``entry_attention`` (depth, h, h), the attention in each block of hop i's
    entry on hop j's entry, largest head as above (does that entry walk the rest of the chain itself?); ``acc``,
    the model's own accuracy on the test examples; ``answers`` (h + 1,), the share of its answers on them that
    are v_j, j = 0..h (v_0 = x; values of a chain may coincide, so the shares may sum to more than 1)."""
    check_int("n_train", n_train, low=1)
    check_int("n_test", n_test, low=1)
    task, model = exp.task(), exp.model()
    h = task.k if hops is None else hops
    check_int("hops", h, low=1, high=task.k)
    model.load_state_dict(state)
    rng = np.random.default_rng(config.seed_streams(exp.seed, ["hop-probe"])["hop-probe"])
    parts = []
    for n in (n_train, n_test):
        b, rec = task.sample(rng, np.full(n, h)), {}
        with torch.no_grad():
            pred = model(torch.as_tensor(b.tokens), torch.as_tensor(b.mask), record=rec).argmax(1)
        parts.append((b, rec["streams"], rec["attn"], pred))
    (b, streams, _, _), (bt, streams_t, maps_t, pred) = parts
    probe = np.array(
        [
            [
                linear_probe(
                    s[:, 0], torch.as_tensor(b.chain[:, j]), st[:, 0], torch.as_tensor(bt.chain[:, j]), task.N
                )
                for j in range(h)
            ]
            for s, st in zip(streams, streams_t)
        ]
    )
    # (n, h)
    where, where_t = torch.as_tensor(read_positions(task, b)), torch.as_tensor(read_positions(task, bt))
    rows, rows_t = torch.arange(len(where)), torch.arange(len(where_t))
    chain = np.full((len(streams), h, h), np.nan)
    for (l, i, j), _ in np.ndenumerate(chain):
        if j >= i:
            s, st = streams[l], streams_t[l]
            chain[l, i, j] = linear_probe(
                s[rows, where[:, i]],
                torch.as_tensor(b.chain[:, j]),
                st[rows_t, where_t[:, i]],
                torch.as_tensor(bt.chain[:, j]),
                task.N,
            )

    def attending(a: torch.Tensor, query: torch.Tensor) -> np.ndarray:  # (n, heads, T, T), (n,) -> (h,)
        return a[rows_t, :, query][rows_t[:, None], :, where_t].mean(0).max(-1).values.numpy()

    attention = np.array([attending(a, torch.zeros_like(rows_t)) for a in maps_t])
    entry_attention = np.array([[attending(a, where_t[:, i]) for i in range(h)] for a in maps_t])
    return {
        "probe": probe,
        "entry": chain[:, :, -1],
        "attention": attention,
        "chain": chain,
        "entry_attention": entry_attention,
        "acc": float((pred == torch.as_tensor(bt.answer)).float().mean()),
        "answers": (pred.numpy()[:, None] == np.concatenate([bt.tokens[:, :1], bt.chain[:, :h]], 1)).mean(0),
    }


def table_interference(exp: KHopExperiment, state: dict, n: int = 2048) -> dict:
    """Does the last table get in the way? On fresh k-hop examples (stream "interference" of the run's seed), the
    model's answers when table k is shown to the keys of no block, of one block only, of all blocks but one, or
    of all (in that order: none, 1..depth, all but 1..depth, all; the last is the model as it is; a block of the
    run's ``hide_k_from`` never sees it): ``prev``
    (2 depth + 2,), the share of answers that are v_{k-1}, the (k - 1)-hop answer; ``answer``, the share that
    are v_k; and ``attention`` (depth, k - 1): in each block, the attention of hop i's entry on table k's entries
    in total (the largest head of its mean over the examples). Hiding table k from a block hides it from every
    query of that block, table k's own entries included.

    Raises:
        ValueError: ``n`` below 1, or k = 1 (no earlier hop to be disturbed).
    """
    check_int("n", n, low=1)
    task, model = exp.task(), exp.model()
    check_int("k (hops) of a run measured for interference", task.k, low=2)
    model.load_state_dict(state)
    rng = np.random.default_rng(config.seed_streams(exp.seed, ["interference"])["interference"])
    b = task.sample(rng, np.full(n, task.k))
    t, m = torch.as_tensor(b.tokens), torch.as_tensor(b.mask)
    depth, rows, rec = exp.layers, torch.arange(n), {}
    every = list(range(1, depth + 1))
    prev, ans = [], []
    with torch.no_grad():  # shown to: none, each block only, all but each block, all
        for hidden in [every, *([o for o in every if o != s] for s in every), *([s] for s in every), []]:
            hide = table_hidden(task, hidden, depth) if hidden else None
            pred = model(t, m, record=rec if hide is None else None, hide=hide).argmax(1).numpy()
            prev.append(float((pred == b.chain[:, -2]).mean())), ans.append(float((pred == b.answer).mean()))
    # the entries of hops 1..k-1
    where, last = torch.as_tensor(read_positions(task, b))[:, :-1], task.last_table
    attention = np.array(
        [
            [a[rows, :, where[:, i], last].sum(-1).mean(0).max().item() for i in range(task.k - 1)]
            for a in rec["attn"]
        ]
    )
    return {"prev": np.array(prev), "answer": np.array(ans), "attention": attention}


@dataclass(frozen=True)
class ProbeStudy:
    """A set of probed runs of :func:`seed_members`: ``tags`` maps each member's name to the prefix of its summary
    entries; ``shared`` prefixes the entries the runs share (``<shared>_k``, ``<shared>_chance``, ...), so that two
    studies glue on one page. Tags and prefixes are run and study tags of :mod:`companion.experiments.khop_keys`
    (a test holds them to it)."""

    tags: dict
    shared: str
    hops: tuple = ()  # the hop counts of the probed examples, the first unprefixed (empty: k, then k - 1)

    def probed(self, k: int) -> tuple[int, ...]:
        """The hop counts probed in a run with k hops, the first named without a hop suffix.

        Raises:
            ValueError: a hop count outside 1..k.
        """
        for h in self.hops:
            check_int(f"hops probed (k = {k})", h, low=1, high=k)
        return self.hops or tuple(sorted({k, max(k - 1, 1)}, reverse=True))

    def prefix(self, tag: str, h: int, k: int) -> str:
        """The summary prefix of a run's (``tag``) probe on h-hop examples, k its hop count: the tag for the first
        probed hop count, ``<tag>_h<h>`` for the others."""
        return tag if h == self.probed(k)[0] else f"{tag}_h{h}"


PROBE_TAGS = {"seed 0": "p100", EXPLORED: f"p{EXPLORED_EVERY}"}  # summary prefixes of the probed runs


PROBE = ProbeStudy(PROBE_TAGS, "probe")  # seed 0 stalled and solved (recorded: ``khop_probe``)


def probe_run(exp: KHopExperiment, progress: bool = True, device=None) -> dict:
    """:func:`run` of ``exp``, carrying ``exp`` itself (``"exp"``), as :func:`probe_summary` reads it."""
    return {**run(exp, progress=progress, device=device), "exp": exp}


def probe_summary(runs: dict[str, dict], level: float = 0.9, study: ProbeStudy = PROBE) -> report.Summary:
    """:func:`hop_probe` of each run of ``study`` (from :func:`probe_run`: with ``state`` and ``exp``) on k-hop
    examples, named ``<tag>_probe_l<layer>_v<j>``, ``<tag>_entry_l<layer>_v<j>`` (v_k at hop j's entry),
    ``<tag>_attention_l<layer>_v<j>`` (layers from 0, the embeddings, for the probes; from 1 for the blocks),
    ``<tag>_chain_l<layer>_e<i>_v<j>`` (v_j at hop i's entry, j > i) and ``<tag>_eattn_l<layer>_e<i>_to<j>`` (hop
    i's entry's attention on hop j's, j > i), with per run the model's own k-hop accuracy (``<tag>_acc``), the
    share of its answers that are v_j (``<tag>_answers_v<j>``, j from 0: x), the first layer at which each v_j is
    read above ``level`` (``<tag>_first_v<j>``; inf: none) and the best probe accuracy of each v_j over the layers
    (``<tag>_best_v<j>``; ``<tag>_best_vk`` for v_k); and the same on (k - 1)-hop examples, named with
    ``_h<k - 1>`` after the tag (``p100_h3_probe_l4_v3``, ...), or on the study's own hop counts
    (:meth:`ProbeStudy.probed`: the first unsuffixed, the others with ``_h<h>``).
    ``<shared>_chance`` is 1/N.

    Raises:
        ValueError: a run that is not one of the study's.
    """
    out = {}
    for name, r in runs.items():
        check_choice("probed run", name, tuple(study.tags))
        tag, exp = study.tags[name], member_of(name, r)
        for h in study.probed(exp.k):
            pre = study.prefix(tag, h, exp.k)
            _probe_values(out, f"{name}, {h}-hop examples", pre, hop_probe(exp, r["state"], hops=h), level)
        if exp.k > 1:
            interference_values(out, name, tag, table_interference(exp, r["state"]))
        out[f"{tag}_depth"] = (exp.layers, f"{name}: blocks")
    out[f"{study.shared}_chance"] = (1 / exp.N, "chance: 1/N")  # the probed runs share their task and budget
    out[f"{study.shared}_k"] = (exp.k, "hops")
    out[f"{study.shared}_steps"] = (exp.steps, "training steps of each probed run")
    return report.Summary(out)


def _probe_values(out: dict, name: str, pre: str, res: dict, level: float) -> None:
    """:func:`probe_summary`'s entries of one :func:`hop_probe` result, named with the prefix ``pre``."""
    P, A = res["probe"], res["attention"]
    h = P.shape[1]
    out[f"{pre}_acc"] = (res["acc"], f"{name}: the model's accuracy on the probe's test examples")
    for j, v in enumerate(res["answers"]):
        out[f"{pre}_answers_v{j}"] = (
            float(v),
            f"{name}: share of the model's answers on them that are {'x, the query' if j == 0 else f'v_{j}'}",
        )
    for (l, j), v in np.ndenumerate(P):
        out[f"{pre}_probe_l{l}_v{j + 1}"] = (float(v), f"{name}: probe accuracy of v_{j + 1} after block {l}")
    for (l, j), v in np.ndenumerate(res["entry"]):
        out[f"{pre}_entry_l{l}_v{j + 1}"] = (
            float(v),
            f"{name}: probe accuracy of v_{h} at hop {j + 1}'s entry after block {l}",
        )
    for (l, j), v in np.ndenumerate(A):
        out[f"{pre}_attention_l{l + 1}_v{j + 1}"] = (
            float(v),
            f"{name}: position 0's attention in block {l + 1} on hop {j + 1}'s entry (largest head)",
        )
    for (l, i, j), v in np.ndenumerate(res["chain"]):
        if j > i:
            out[f"{pre}_chain_l{l}_e{i + 1}_v{j + 1}"] = (
                float(v),
                f"{name}: probe accuracy of v_{j + 1} at hop {i + 1}'s entry after block {l}",
            )
    for (l, i, j), v in np.ndenumerate(res["entry_attention"]):
        if j > i:
            out[f"{pre}_eattn_l{l + 1}_e{i + 1}_to{j + 1}"] = (
                float(v),
                f"{name}: hop {i + 1}'s entry's attention in block {l + 1} on hop {j + 1}'s entry "
                "(largest head)",
            )
    # the first layer instead of the first step
    first = learned_at({"step": np.arange(len(P)), "acc": P}, level)
    for j in range(h):
        out[f"{pre}_first_v{j + 1}"] = (
            float(first[j]),
            f"{name}: first layer (0: embeddings) whose probe reads v_{j + 1} at {level} or more",
        )
        out[f"{pre}_best_v{j + 1}"] = (
            float(P[:, j].max()),
            f"{name}: best probe accuracy of v_{j + 1} over the layers",
        )
    out[f"{pre}_best_vk"] = (
        float(P[:, -1].max()),
        f"{name}: best probe accuracy of the answer over the layers",
    )


def interference_values(out: dict, name: str, tag: str, res: dict) -> None:
    """:func:`probe_summary`'s entries of one :func:`table_interference` result: ``<tag>_tk_<shown>_prev`` and
    ``_answer`` (``shown``: ``none``, ``b<block>`` (that block only), ``not<block>`` (all but it) or ``all``)
    and ``<tag>_tkattn_l<block>_e<i>``."""
    depth = len(res["attention"])
    for key, p, a in zip(shown_keys(depth), res["prev"], res["answer"]):
        where = shown_to(key)
        out[f"{tag}_tk_{key}_prev"] = (
            p,
            f"{name}: share of k-hop answers that are v_(k-1), the last table shown to {where}",
        )
        out[f"{tag}_tk_{key}_answer"] = (
            a,
            f"{name}: share of k-hop answers that are v_k, the last table shown to {where}",
        )
    for (l, i), v in np.ndenumerate(res["attention"]):
        out[f"{tag}_tkattn_l{l + 1}_e{i + 1}"] = (
            float(v),
            f"{name}: hop {i + 1}'s entry's attention in block "
            f"{l + 1} on the last table in total (largest head)",
        )


def shown_keys(depth: int) -> list[str]:
    """The names of :func:`table_interference`'s visibilities, in its order."""
    return ["none", *(f"b{b}" for b in range(1, depth + 1)), *(f"not{b}" for b in range(1, depth + 1)), "all"]


def shown_to(key: str) -> str:
    """Which blocks see the last table under the visibility ``key`` of :func:`shown_keys`."""
    if key.startswith("not"):
        return f"every block but block {key[3:]}"
    return {"none": "no block", "all": "every block (the model as it is)"}.get(key, f"block {key[1:]} only")


def member_of(name: str, r: dict) -> KHopExperiment:
    """The configuration a recorded or live probe run was trained with (its ``exp`` entry)."""
    if "exp" not in r:
        raise ValueError(f"run {name!r} carries no configuration ('exp'): probe runs come from probe_run")
    return r["exp"]


PROBE_KINDS = {
    "probe": "linear probe of v_j at position 0",
    "entry": "linear probe of v_k at hop j's entry",
    "attention": "position 0's attention on hop j's entry",
}


def probe_header(k: int, kind: str = "probe") -> list[str]:
    """Columns of :func:`probe_rows` (``k``: the examples' hop count): the run, the layer (0: the embeddings; the
    blocks from 1), one per hop."""
    check_choice("kind", kind, tuple(PROBE_KINDS))
    what = {
        "probe": "v_{j}, probe accuracy",
        "entry": "v_{k} at hop {j}'s entry",
        "attention": "hop {j}'s entry, attention",
    }[kind]
    return [
        "run",
        "block" if kind == "attention" else "after block",
        *(what.format(j=j, k=k) for j in range(1, k + 1)),
    ]


def _hops(summary, study: ProbeStudy, hops: int | None) -> tuple[int, int]:
    """(k, h): the probed runs' hop count and the examples' (``hops``: one of :meth:`ProbeStudy.probed`, the first
    by default)."""
    k = int(summary[f"{study.shared}_k"])
    probed = study.probed(k)
    h = probed[0] if hops is None else hops
    check_choice("hops (a probed hop count)", h, probed)
    return k, h


def probe_rows(
    summary, kind: str = "probe", hops: int | None = None, study: ProbeStudy = PROBE
) -> list[list]:
    """One row per probed run of ``study`` and layer of its :func:`probe_summary` (live or recorded), on its k-hop
    examples (``hops`` None) or its (k - 1)-hop ones (``hops=k - 1``): ``kind="probe"``, the probe accuracy of each
    v_j at position 0 after that block; ``"entry"``, of the answer at the entry each hop reads; ``"attention"``,
    position 0's attention in that block on the entry each hop reads."""
    check_choice("kind", kind, tuple(PROBE_KINDS))
    k, h = _hops(summary, study, hops)
    rows = []
    for name, tag in study.tags.items():
        depth, pre = int(summary[f"{tag}_depth"]), study.prefix(tag, h, k)
        layers = range(1, depth + 1) if kind == "attention" else range(depth + 1)
        rows += [[name, l, *(summary[f"{pre}_{kind}_l{l}_v{j}"] for j in range(1, h + 1))] for l in layers]
    return rows


WALK_KINDS = {
    "chain": "linear probe of v_j at hop i's entry",
    "eattn": "hop i's entry's attention on hop j's",
}


def walk_header(k: int, kind: str = "chain") -> list[str]:
    """Columns of :func:`walk_rows` (``k``: the examples' hop count): the run, the entry, the layer, one per hop
    after the first."""
    check_choice("kind", kind, tuple(WALK_KINDS))
    what = "v_{j}, probe accuracy" if kind == "chain" else "hop {j}'s entry, attention"
    return [
        "run",
        "entry of hop",
        "after block" if kind == "chain" else "block",
        *(what.format(j=j) for j in range(2, k + 1)),
    ]


def walk_rows(
    summary,
    kind: str = "chain",
    hops: int | None = None,
    study: ProbeStudy = PROBE,
    entries: tuple[int, ...] | None = None,
) -> list[list]:
    """Does the entry that hop i reads walk the rest of the chain itself? One row per probed run of ``study``,
    entry i (``entries``, default every hop but the last) and layer: ``kind="chain"``, the probe accuracy of each
    later v_j (j = 2..h; blank for j <= i) from that entry's stream after that block; ``"eattn"``, that entry's
    attention in that block on each later hop's entry. ``hops`` as in :func:`probe_rows`."""
    check_choice("kind", kind, tuple(WALK_KINDS))
    k, h = _hops(summary, study, hops)
    entries = tuple(range(1, h)) if entries is None else entries
    for i in entries:
        check_int("entry", i, low=1, high=h - 1)
    rows = []
    for name, tag in study.tags.items():
        depth, pre = int(summary[f"{tag}_depth"]), study.prefix(tag, h, k)
        layers = range(1, depth + 1) if kind == "eattn" else range(depth + 1)
        key = "{pre}_chain_l{l}_e{i}_v{j}" if kind == "chain" else "{pre}_eattn_l{l}_e{i}_to{j}"
        rows += [
            [
                name,
                i,
                l,
                *(summary[key.format(pre=pre, l=l, i=i, j=j)] if j > i else "" for j in range(2, h + 1)),
            ]
            for i in entries
            for l in layers
        ]
    return rows
