"""The chapter ``book/khop_stall`` (our study), the stall's onset: seed 0's runs on the stall's path and off it,
read after each of :data:`ONSET_AFTER` training steps on their last stage (:func:`onset_run`, recorded as
``khop_onset``), where block 1 comes to read table k. The runs themselves are
:mod:`companion.experiments.khop_stall_paths`'s (:func:`~companion.experiments.khop_stall_paths.reseed_members`)
and the seed study's."""

from __future__ import annotations

import math

from companion import cache, report
from companion.config import check_choice, check_float
from companion.experiments.khop import KHopExperiment, train_run
from companion.experiments.khop_members import EXPLORED, EXPLORED_EVERY, run_sizes
from companion.experiments.khop_probes import interference_values, table_interference
from companion.experiments.khop_stall import run_outcome
from companion.experiments.khop_stall_paths import (
    ENTRY_PROBE,
    block1_breaks,
    marked_entry,
    reseed_members,
    reseed_name,
)
from companion.experiments.khop_studies import seed_members

MODULES = ("companion.experiments.khop_onset",)  # the cache key of this module's runs (its imports included)

# training steps on the last stage at which the model is read
ONSET_AFTER = (0, 100, 200, 400, 800, 1600, 3200)


ONSET_RUNS = {
    "seed 0": "on100",
    EXPLORED: f"on{EXPLORED_EVERY}",
    reseed_name("seed 0", 1): "on100_d1",
    reseed_name("seed 0", 3): "on100_d3",
}


def onset_members(profile: str | None = None) -> dict[str, KHopExperiment]:
    """The runs :data:`ONSET_RUNS`, as the seed study and :func:`~companion.experiments.khop_stall_paths.reseed_members` configure them."""
    every = seed_members(profile) | reseed_members(profile)
    return {name: every[name] for name in ONSET_RUNS}


def onset_run(exp: KHopExperiment, progress: bool = True, device=None) -> dict:
    """:func:`companion.experiments.khop.run` of ``exp`` that also keeps the model after each of :data:`ONSET_AFTER` training steps on its
    last stage (``"kept"``: {steps: state dict}; the states that runs of exactly that many steps would end with),
    with its configuration (``"exp"``)."""
    r = cache.load_or_compute(
        "khop-onset", exp, lambda: train_run(exp, progress, device, keep=ONSET_AFTER), MODULES
    )
    return {**r, "exp": exp}


def onset_summary(runs: dict[str, dict], path: float = 0.5) -> report.Summary:
    """The runs of :func:`onset_members` (from :func:`onset_run`) read after each of :data:`ONSET_AFTER` steps
    ``a`` on their last stage: :func:`companion.experiments.khop_probes.table_interference`'s entries as :func:`companion.experiments.khop_probes.probe_summary` names them, under
    ``<tag>_a<a>`` (tags :data:`ONSET_RUNS`: ``_tk_b1_prev``, the share of k-hop answers that are v_(k-1) with
    table k shown to block 1 only; ``_tk_all_answer``, the share that are right; ``_tkattn_l<block>_e<i>``, ...);
    per run, the same at its end (``<tag>_end_*``), the first of those steps at which block 1 breaks the
    (k - 1)-hop answer (``<tag>_onset``, as :func:`~companion.experiments.khop_stall_paths.reseed_paths` at ``path``; inf: at none) and how it ends
    (:func:`run_outcome`, at 0.9); over the runs on that path at their end, how many (``onset_path_n``) and the
    latest of their onsets (``onset_path_latest``); over the others, how many (``onset_spared_n``) and the
    smallest share of v_(k-1) answers with table k shown to block 1 only at any step read
    (``onset_spared_min``); and the sizes (``onset_k``, ``onset_steps``, ``onset_chance``).

    Raises:
        ValueError: ``path`` outside (0, 1], a run that is not one of :func:`onset_members`, or one without a
            kept state at one of :data:`ONSET_AFTER` (its last stage too short).
    """
    check_float("path", path, 0.0, 1.0, low_open=True)
    out, onsets, spared = {}, [], []
    for name, r in runs.items():
        check_choice("run read along its last stage", name, list(ONSET_RUNS))
        tag = ONSET_RUNS[name]
        short = [a for a in ONSET_AFTER if a not in r["kept"]]
        if short:
            raise ValueError(
                f"{name!r} has no state after {short} steps on its last stage: allowed runs that train "
                f"at least {max(ONSET_AFTER)} steps on it"
            )
        for a in ONSET_AFTER:
            res = table_interference(r["exp"], r["kept"][a])
            interference_values(out, f"{name}, after {a} steps on its last stage", f"{tag}_a{a}", res)
        interference_values(
            out, f"{name}, at its end", f"{tag}_end", table_interference(r["exp"], r["state"])
        )
        breaks = [a for a in ONSET_AFTER if block1_breaks(report.Summary(out), f"{tag}_a{a}", path)]
        out[f"{tag}_onset"] = (
            float(breaks[0]) if breaks else math.inf,
            f"{name}: first of {list(ONSET_AFTER)} steps on its last stage at which block 1, "
            f"shown table k alone, leaves fewer than {path} of the k-hop answers at v_(k-1) "
            "(inf: none)",
        )
        out |= run_outcome(r, tag, name, 0.9)
        on_path = block1_breaks(report.Summary(out), f"{tag}_end", path)
        (onsets if on_path else spared).append(
            (out[f"{tag}_onset"][0], min(out[f"{tag}_a{a}_tk_b1_prev"][0] for a in ONSET_AFTER))
        )
    out["onset_path_n"] = (
        len(onsets),
        f"runs on the stall's path at their end (block 1's share below {path})",
    )
    out["onset_path_latest"] = (
        max((o for o, _ in onsets), default=math.nan),
        "runs on the stall's path at their end: the latest first step at which they are on it "
        "(NaN: no such run)",
    )
    out["onset_spared_n"] = (len(spared), "runs off the stall's path at their end")
    out["onset_spared_min"] = (
        min((m for _, m in spared), default=math.nan),
        "runs off the stall's path at their end: the smallest share of k-hop answers at "
        "v_(k-1) with table k shown to block 1 only, over every step read (NaN: no such run)",
    )
    out["onset_after"] = (
        ", ".join(map(str, ONSET_AFTER)),
        "the steps on the last stage after which the runs are read",
    )
    out |= run_sizes(next(iter(runs.values())), prefix="onset_")
    return report.Summary(out)


def onset_vs_entry(onset, entry) -> report.Summary:
    """The states kept at the move (0 steps on the last stage, :func:`onset_summary`) of seed 0's two runs against
    the same runs trained to that step (:func:`~companion.experiments.khop_stall_paths.stage_entry_summary`, tags :data:`ENTRY_PROBE`): the largest
    difference of their :func:`companion.experiments.khop_probes.table_interference` entries (``onset_entry_gap``: zero when a kept state is the
    state that a run of that many steps ends with), over ``onset_entry_n`` entries.

    Raises:
        ValueError: one of the two runs missing from either summary.
    """
    worst, n = 0.0, 0
    for name, tag in ENTRY_PROBE.tags.items():
        keys = [key[len(tag) :] for key in entry if key.startswith(f"{tag}_tk")]
        mine = f"{ONSET_RUNS.get(name)}_a0"
        if not keys or any(mine + key not in onset for key in keys):
            raise ValueError(
                f"{name!r} is missing from the onset or the stage-entry summary: allowed summaries of "
                "both studies with seed 0's two runs"
            )
        worst = max([worst, *(abs(onset[mine + key] - entry[tag + key]) for key in keys)])
        n += len(keys)
    return report.Summary(
        {
            "onset_entry_gap": (
                float(worst),
                "largest difference of the interference entries, the state kept at the "
                "move against the run trained to it",
            ),
            "onset_entry_n": (n, "interference entries compared"),
        }
    )


ONSET_HEADER_ROWS = (
    "v_(k-1) answers, table k shown to block 1 only",
    "hop (k-2)'s entry's attention on table k, block 1",
    "right k-hop answers",
)


ONSET_HEADER = ["run", "measure", *(f"after {a} steps" for a in ONSET_AFTER)]  # columns of :func:`onset_rows`


def onset_rows(summary) -> list[list]:
    """Three rows per run of :func:`onset_summary` (its share of v_(k-1) answers with table k shown to block 1
    only, block 1's attention on table k, its right answers), one column per step of :data:`ONSET_AFTER`."""
    rows, e = [], marked_entry(int(summary["onset_k"]))
    for name, tag in ONSET_RUNS.items():
        if f"{tag}_onset" not in summary:
            continue
        for key, what in zip(("tk_b1_prev", f"tkattn_l1_e{e}", "tk_all_answer"), ONSET_HEADER_ROWS):
            rows.append([name, what, *(summary[f"{tag}_a{a}_{key}"] for a in ONSET_AFTER)])
    return rows
