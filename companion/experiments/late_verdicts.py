"""Whether a verdict read on a late mean is a matter of timing: a check of our own code.

A trained-model chapter reads most of its rows on late means, the mean of a metric over the evaluations in the last
fifth of training (:meth:`companion.experiments.noisy_recall.RecallRun.late_mean`). Such a verdict is a measurement of
the trained model only if it does not depend on where in that window the run happened to stop: if some evaluation of
the window alone gives the row another category, a run a little shorter or longer, another seed or another machine's
rounding can turn the row over (book/finetune met it: at 400 fine-tuning steps its row read a curve still rising).
:func:`require_late_verdicts` judges each row again with each run read at each evaluation of its window alone, the
other runs as they are, and stops the chapter where an asserted row changes category. It reads the spread about the
row's own bar, so an oscillation far from the bar passes and a curve that crosses it fails, however small its
drift.

The rows each chapter judges so are tables in :mod:`companion.experiments.late_rows`, {claim id: entry of the
chapter's summary}; tests/test_late_verdicts.py holds them to the chapters' Check cells. Rows read on late means
(``NOISY_RECALL``, ``FINETUNE``, ``ARCHITECTURES``, ``SYNTHETIC_IOI``, ``SYNTHETIC_IOI_SGD``) are judged at each
evaluation of the late window alone (:func:`views`, :func:`late_values`); a row read at the last evaluation of a
phase (``FINETUNE_PRETRAIN``: the end of pre-training; ``TRIGGERS``: the trained models' matching logits) the same
way, at each evaluation of that phase's late window (``phase=0`` for pre-training); a row read on a mean of a run's
last training losses (``ALLOCATION``) at each of those steps alone (:func:`view_values` of the views its module
makes); rows read on runs as they ended (``KHOP``, ``INDUCTION_HEAD``, ``INDUCTION_LAYERS``: final accuracies, the
best reached, the first step at a level; ``SCAN_SNAP_TEXT``: entropies at the end, the last quarter's movement) with
each run cut after each evaluation of its late window, as if it had stopped there (:func:`stopped_values`); so are
the rows read on a trained model's weights where the run keeps the weights of that window (``INDUCTION_RANDOM``,
with :func:`stopped_entries`, which measures each view once for the rows and the numbers that explain them). A
recording is what it was: for the rows read on its curves (``SYNTHETIC_IOI_LARGER``, ``SYNTHETIC_IOI_STABILITY``;
the paper-configuration recordings of book/paper_scale, read with :func:`recorded_values`) and for the rows read on
recorded runs as they ended (``KHOP_RATES``, ``KHOP_FOUR_HOPS``, ``KHOP_STALL``, ``FACT_CAPACITY``: each run a
study's summary reads cut in turn, :func:`stopped_studies`) :func:`same_verdicts` reports which ones a view turns
over, without stopping the chapter, :func:`changed_text` says it and :func:`turned_text` which runs, stopped where,
turn them (:func:`judged_views` gives a chapter the table and that sentence, each row judged once in each view;
:func:`judged_studies`, of recorded studies; :func:`judged_study`, of one). A recording keeps the views of its
chapter's rows, made when it is recorded (:attr:`companion.recorded.Recordable.views`, ``late_rows.RECORDED_ROWS``),
so that :func:`recorded_values` reads them as they were, where an older recording gives only what its curves give.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from companion import claims
from companion.experiments import summaries
from companion.experiments.noisy_recall import RecallRun, late_curve
from companion.report import Summary, and_list, markdown_table
from companion.train import LATE_FRACTION, late_mask

# The entries of recall_summary and finetune_summary that a recorded run's curves (summaries.recall_curves) give at
# each evaluation: {entry: its value from one evaluation's curve values}. The rest read the model or curves a recording
# does not keep (attn1_prev, the pre-training phase).
CURVE_ENTRIES: dict[str, Callable[[dict[str, float]], float]] = {
    "p_noise_full": lambda v: v["p_noise_full"],
    "p_correct_full": lambda v: v["p_correct_full"],
    "p_correct_drop": lambda v: v["p_correct_drop"],
    "drop_gain": lambda v: v["p_correct_drop"] - v["p_correct_full"],
    "noise_late": lambda v: v["noisy_p_noise"],
    "attn_ratio": lambda v: summaries.attention_ratio(v["attn_to_correct"], v["attn_to_noise"]),
}
CURVE_ENTRIES["ft_ratio"] = CURVE_ENTRIES["attn_ratio"]  # finetune_summary's name for the same ratio
RECORDED_CURVES = (
    "p_noise_full",
    "p_correct_full",
    "p_correct_drop",
    "attn_to_correct",
    "attn_to_noise",
    "noisy_p_noise",
)

LATE_LEAD = "At one evaluation alone"  # views of late means (views, late_values)
STOPPED_LEAD = "With one run stopped at one evaluation of its late window"  # views of runs as they ended
HEADER = ["row", "value read", "lowest, highest in one view", "category", "views giving another"]


def views(runs, phase: int = 1) -> list:
    """``runs`` (one run, or a dict of runs) with one run read at one evaluation of the late window of ``phase``
    alone (``at_late``: :meth:`RecallRun.at_late`, or a recorded run's), the others as they are: one view per
    evaluation of each run's window. A run that diverged has none (its late statistics are not read: NaN,
    :mod:`companion.experiments.summaries`)."""
    if not isinstance(runs, dict):
        return [runs.at_late(i, phase) for i in range(runs.late_count(phase))]
    return [
        {**runs, k: r.at_late(i, phase)}
        for k, r in runs.items()
        if r.diverged_at is None
        for i in range(r.late_count(phase))
    ]


def stopped_views(runs: dict, keys: Sequence[str] = (), frac: float = LATE_FRACTION) -> list[dict]:
    """``runs`` with one run cut after one evaluation of its late window (the last ``frac`` of its evaluated steps,
    :func:`companion.train.late_mask`), as if it had stopped there, the others whole: one view
    per evaluation of each run's window, the last of each being the run as it ended. A run is a dict that holds
    ``"step"`` and some of ``keys`` (what a run holds one value of per evaluation; those it holds are cut), or an
    object with its evaluated ``steps`` and ``stopped_after(i)``, the run cut after its evaluation ``i``
    (:meth:`companion.experiments.induction.InductionRun.stopped_after`). :func:`stopped_cuts` names the views.

    Raises:
        ValueError: a dict run while ``keys`` lack ``"step"``, one without ``"step"``, or one whose value under some
            key does not hold one entry per evaluation (the run and key named).
    """
    return [{**runs, name: cut} for name, _, cut in _cuts(runs, keys, frac)]


def stopped_cuts(runs: dict, keys: Sequence[str] = (), frac: float = LATE_FRACTION) -> list[tuple[str, int]]:
    """(the run cut, the step it stopped at) of each view of :func:`stopped_views`, in its order.

    Raises:
        ValueError: as :func:`stopped_views`.
    """
    return [(name, step) for name, step, _ in _cuts(runs, keys, frac)]


def _cuts(runs: dict, keys: Sequence[str], frac: float):
    """(name, step, the run cut after that evaluation) for each evaluation of each run's late window."""
    for name, r in runs.items():
        if isinstance(r, dict):
            if "step" not in keys:
                raise ValueError(f"stopped_views: keys {list(keys)} must include 'step'")
            if "step" not in r:
                raise ValueError(
                    f"stopped_views: run {name!r} has no 'step': allowed a run with its evaluated steps"
                )
            held = [k for k in keys if k in r]  # a continuation's curves keep no loss
            steps = np.asarray(r["step"])
            bad = [k for k in held if len(r[k]) != len(steps)]
            if bad:
                raise ValueError(
                    f"stopped_views: run {name!r} has {bad} of another length than its {len(steps)} evaluations"
                )
        else:
            steps = np.asarray(r.steps)
        for i in np.flatnonzero(late_mask(steps, frac)):
            cut = (
                {**r, **{k: np.asarray(r[k])[: i + 1] for k in held}}
                if isinstance(r, dict)
                else r.stopped_after(i)
            )
            yield name, int(steps[i]), cut


def stopped_entries(
    make: Callable[[dict], Summary],
    runs: dict,
    entries: Sequence[str],
    keys: Sequence[str] = (),
    *,
    whole: Summary | None = None,
) -> dict[str, tuple[float, list[float]]]:
    """{entry: (its value in ``whole``, the summary of ``runs`` as they ended where the caller has it, else in
    ``make(runs)``; its value in ``make`` of each view of :func:`stopped_views`, in their order)} for each of
    ``entries``: the summary of each view is made once, whatever the entries read of it (rows and the numbers that
    explain them; :func:`row_values` picks the rows). ``whole`` must give the entries as ``make(runs)`` would.

    Raises:
        ValueError: before any view is made, an entry the summary lacks; a run as :func:`stopped_views` refuses it.
    """
    return _entries_at(make, runs, stopped_views(runs, keys), entries, "stopped_entries", whole)


def row_values(
    values: dict[str, tuple[float, list[float]]],
    rows: dict[str, str],
    registry: dict[str, claims.Claim] | None = None,
) -> dict[str, tuple[float, list[float]]]:
    """{claim id: the values of its entry} for each row of ``rows`` ({claim id: entry}), from ``values`` ({entry:
    (value read, values in the views)}: :func:`stopped_entries`), as :func:`same_verdicts` takes them.

    >>> reg = {"x.a": None, "x.b": None}
    >>> row_values({"a": (1.0, [0.5, 1.0]), "b": (2.0, [2.0, 2.0])}, {"x.a": "a"}, reg)
    {'x.a': (1.0, [0.5, 1.0])}
    >>> row_values({"a": (1.0, [1.0])}, {"x.b": "b"}, reg)
    Traceback (most recent call last):
    ...
    ValueError: row_values: entries ['b'] were not measured (measured: ['a'])

    Raises:
        ValueError: a row id not in the registry, or an entry ``values`` lacks.
    """
    _check_rows(rows, registry, "row_values")
    missing = sorted(set(rows.values()) - set(values))
    if missing:
        raise ValueError(f"row_values: entries {missing} were not measured (measured: {sorted(values)})")
    return {cid: values[entry] for cid, entry in rows.items()}


def stopped_values(
    make: Callable[[dict], Summary],
    runs: dict,
    rows: dict[str, str],
    keys: Sequence[str] = (),
    registry: dict[str, claims.Claim] | None = None,
    *,
    whole: Summary | None = None,
) -> dict[str, tuple[float, list[float]]]:
    """:func:`late_values` for rows read on runs as they ended (a final accuracy, the best one reached, the first
    step at a level): {claim id: (its entry of ``whole``, the summary of ``runs`` where the caller has it, else of
    ``make(runs)``; the same entry in every view of :func:`stopped_views`)}.

    Raises:
        ValueError: before any view is made, a row id not in the registry or an entry the summary lacks; a run as
            :func:`stopped_views` refuses it.
    """
    _check_rows(rows, registry, "stopped_values")
    return row_values(
        _entries_at(make, runs, stopped_views(runs, keys), rows.values(), "stopped_values", whole),
        rows,
        registry,
    )


def stopped_studies(
    over: Callable[[str], tuple[Callable[[dict], Summary], dict]],
    studies: dict[str, dict[str, str]],
    keys: Sequence[str] = (),
    registry: dict[str, claims.Claim] | None = None,
) -> tuple[dict[str, tuple[float, list[float]]], dict[str, list[tuple[str, int]]]]:
    """:func:`stopped_values` of several studies' rows (``studies``: {study: {claim id: entry}}), each study's summary
    and runs given by ``over(study)`` ((make, runs): every run the summary reads, so that each is cut in turn).
    Returns the values ({claim id: (value read, its value in each view)}) and, for each row, the views' cuts
    (:func:`stopped_cuts`: (run, step) in the same order), for :func:`turned_text`.

    Raises:
        ValueError: before any view is made, a row id not in the registry or a claim id in two studies; as
            :func:`stopped_values`.
    """
    ids = [cid for rows in studies.values() for cid in rows]
    twice = sorted({cid for cid in ids if ids.count(cid) > 1})
    if twice:
        raise ValueError(f"stopped_studies: {twice} are rows of two studies: allowed each row in one study")
    _check_rows(ids, registry, "stopped_studies")
    values, cuts = {}, {}
    for study, rows in studies.items():
        make, runs = over(study)
        values |= stopped_values(make, runs, rows, keys, registry)
        seen = stopped_cuts(runs, keys)
        cuts |= {cid: seen for cid in rows}
    return values, cuts


def turned_text(
    values: dict[str, tuple[float, Sequence[float]]],
    cuts: dict[str, Sequence[tuple[str, int]]],
    profile: str,
    registry: dict[str, claims.Claim] | None = None,
) -> str:
    """Which cuts turn each row over that some view puts in another category (``values`` as :func:`stopped_studies`
    gives them, ``cuts`` its cuts): the runs and the steps at which, stopped there, they give the row another
    category than the value read, and how many late evaluations each run has; empty when no view turns a row.

    Raises:
        ValueError: a row id not in the registry, or a row whose cuts and views differ in number.
    """
    registry = _check_rows(values, registry, "turned_text")
    _check_cuts(values, cuts, "turned_text")
    return _turned(_categories(values, profile, registry), cuts)


def _check_cuts(values: dict, cuts: dict, caller: str) -> None:
    bad = sorted(cid for cid, (_, at_each) in values.items() if len(cuts.get(cid, ())) != len(at_each))
    if bad:
        raise ValueError(f"{caller}: {bad} have not one cut per view")


def _categories(
    values: dict, profile: str, registry: dict[str, claims.Claim]
) -> dict[str, tuple[str, list[str]]]:
    """{claim id: (the category of the value read, the category in each view)}, each judged once."""
    out = {}
    for cid, (value, at_each) in values.items():
        judge = partial(claims.judged, registry[cid], profile=profile)
        out[cid] = (
            judge(value)["category"],
            [judge(v)["category"] for v in np.asarray(at_each, dtype=float)],
        )
    return out


def _turned(categories: dict[str, tuple[str, list[str]]], cuts: dict[str, Sequence[tuple[str, int]]]) -> str:
    """:func:`turned_text` on rows already judged (:func:`_categories`)."""
    parts = []
    for cid, (category, at_each) in categories.items():
        by_run: dict[str, list[int]] = {}
        for (run, step), other in zip(cuts[cid], at_each):
            by_run.setdefault(run, [])
            if other != category:
                by_run[run].append(step)
        turned = [
            f'"{run}" stopped at {len(steps)} of its {sum(r == run for r, _ in cuts[cid])} late evaluations '
            f"(steps {min(steps)} to {max(steps)})"
            if len(steps) > 1
            else f'"{run}" stopped at step {steps[0]}'
            for run, steps in by_run.items()
            if steps
        ]
        if turned:
            parts.append(f"`{cid}` by {and_list(turned)}")
    return f"Turned by: {'; '.join(parts)}." if parts else ""


def curve_views(rec, entries: Sequence[str]) -> list[dict[str, float]]:
    """A recorded run's curves (:func:`companion.experiments.summaries.recall_curves`) at each evaluation of their
    late window (:func:`companion.experiments.noisy_recall.late_curve`): one {entry: value} per evaluation, for the
    summary ``entries`` that are curves of the same name ("p_correct_drop", "p_noise_full", ...).

    Raises:
        ValueError: an entry the recording keeps no curve of.
    """
    curves = rec.curves
    missing = sorted(set(entries) - set(curves))
    if missing:
        raise ValueError(f"curve_views: {rec.path.name} keeps no curve {missing} (curves: {sorted(curves)})")
    columns = {e: late_curve(curves, e) for e in entries}
    return [dict(zip(columns, at)) for at in zip(*(v.tolist() for v in columns.values()))]


def recorded_values(
    rec, rows: dict[str, str], registry: dict[str, claims.Claim] | None = None
) -> tuple[dict[str, tuple[float, list[float]]], list[str]]:
    """The rows of ``rows`` ({claim id: entry of the recording's summary}) that a recording can judge again at
    each evaluation of its late window: {claim id: (the recorded value, its value in each view)}, and the ids of
    the others (they read what the recording does not keep). A recording keeps the views of its chapter's rows
    (``views``, :attr:`companion.recorded.Recordable.views`: made when it was recorded, on the same values);
    one made before it kept them gives the rows its curves give (:data:`CURVE_ENTRIES`, each run read at each
    evaluation of the window alone, :func:`curve_views`).

    Each entry read on the curves is first computed again on the late means of the curves; it must give the
    recorded value, or the recording was made by another rule than the one its views are read by.

    Raises:
        ValueError: a row id not in the registry, an entry the recording's summary lacks, a curve it lacks, or a
            late mean of the curves that is not the recorded value (the entry named).
    """
    _check_rows(rows, registry, "recorded_values")
    summary = rec.summary
    missing = sorted(set(rows.values()) - set(summary))
    if missing:
        raise ValueError(f"recorded_values: {missing} are not entries of {rec.path.name}'s summary")
    stored = rec.views
    kept = {cid: e for cid, e in rows.items() if cid not in stored and e in CURVE_ENTRIES}
    at_each = curve_views(rec, RECORDED_CURVES) if kept else []
    means = {c: float(np.mean([v[c] for v in at_each])) for c in RECORDED_CURVES} if kept else {}
    out = {
        cid: (float(summary[e]), [float(v) for v in stored[cid]]) for cid, e in rows.items() if cid in stored
    }
    for cid, entry in kept.items():
        again = CURVE_ENTRIES[entry](means)
        if not np.isclose(again, summary[entry], rtol=1e-9, atol=1e-12):
            raise ValueError(
                f"recorded_values: {rec.path.name}'s {entry} is {summary[entry]!r}, its curves' late means give "
                f"{again!r}: the recording was made by another rule"
            )
        out[cid] = (float(summary[entry]), [CURVE_ENTRIES[entry](v) for v in at_each])
    return {cid: out[cid] for cid in rows if cid in out}, [cid for cid in rows if cid not in out]


def alpha_values(
    run: RecallRun, recorded: dict, rows: dict[str, str], registry: dict[str, claims.Claim] | None = None
) -> dict[str, tuple[float, list[float]]]:
    """:func:`late_values` of the rows over noise levels (:func:`companion.experiments.summaries.alpha_summary`):
    this build's ``run`` and the recordings ``recorded`` ({alpha: recorded run}), with this build's run read at each
    evaluation of its late window, then each recording at each of its own, the others as they are.

    Raises:
        ValueError: a row id not in the registry, an entry alpha_summary does not give, a curve a recording lacks.
    """
    _check_rows(rows, registry, "alpha_values")
    entries = ("p_noise_full", "p_correct_drop")
    recs = {a: r.summary for a, r in recorded.items()}

    def make(live, recs):
        return summaries.alpha_summary(live, run.exp.alpha, recs)

    live = summaries.recall_summary(run)
    whole = make(live, recs)
    missing = sorted(set(rows.values()) - set(whole))
    if missing:
        raise ValueError(
            f"alpha_values: {missing} are not entries of alpha_summary (entries: {sorted(whole)})"
        )
    at_each = [make(summaries.recall_summary(view), recs) for view in views(run)]
    at_each += [make(live, {**recs, a: v}) for a, r in recorded.items() for v in curve_views(r, entries)]
    return {cid: (whole[entry], [s[entry] for s in at_each]) for cid, entry in rows.items()}


def _check_rows(ids, registry: dict[str, claims.Claim] | None, caller: str) -> dict[str, claims.Claim]:
    """The registry (by default data/claims.toml's), once every id of ``ids`` is a row of it.

    Raises:
        ValueError: the ids that are not.
    """
    registry = claims.CLAIMS if registry is None else registry
    unknown = sorted(set(ids) - set(registry))
    if unknown:
        raise ValueError(f"{caller}: {unknown} are not rows of the registry (data/claims.toml)")
    return registry


def late_values(
    make: Callable[[Any], Summary],
    runs,
    rows: dict[str, str],
    registry: dict[str, claims.Claim] | None = None,
    *,
    phase: int = 1,
) -> dict[str, tuple[float, list[float]]]:
    """{claim id: (its entry of ``make(runs)``, the chapter's summary of late means; the same entry of ``make`` of
    every view of :func:`views` of ``phase``)} for each row of ``rows`` ({claim id: entry of the summary}).

    Raises:
        ValueError: before any view is made, a row id not in the registry or an entry the summary lacks.
    """
    return view_values(make, runs, views(runs, phase), rows, registry, caller="late_values")


def view_values(
    make: Callable[[Any], Summary],
    runs,
    seen: Sequence,
    rows: dict[str, str],
    registry: dict[str, claims.Claim] | None = None,
    *,
    caller: str = "view_values",
) -> dict[str, tuple[float, list[float]]]:
    """:func:`late_values` of views the chapter makes (``seen``: ``runs`` with one run read at one step of its late
    window alone, the others as they are, where a run is not a :class:`RecallRun`:
    :func:`companion.experiments.allocation.late_views`): {claim id: (its entry of ``make(runs)``, the same entry of
    ``make`` of each view)}, as :func:`same_verdicts` takes them.

    Raises:
        ValueError: before any view is read, a row id not in the registry or an entry the summary lacks.
    """
    _check_rows(rows, registry, caller)
    values = _entries_at(make, runs, seen, rows.values(), caller)
    return {cid: values[entry] for cid, entry in rows.items()}


def _entries_at(make, runs, seen: list, entries, caller: str, whole: Summary | None = None) -> dict:
    """{entry: (its value in ``whole``, by default ``make(runs)``; its value in ``make`` of each view of ``seen``)},
    once the summary has every entry."""
    whole = make(runs) if whole is None else whole
    missing = sorted(set(entries) - set(whole))
    if missing:
        raise ValueError(f"{caller}: {missing} are not entries of the summary (entries: {sorted(whole)})")
    at_each = [make(view) for view in seen]
    return {e: (whole[e], [s[e] for s in at_each]) for e in entries}


def same_verdicts(
    values: dict[str, tuple[float, Sequence[float]]],
    profile: str,
    registry: dict[str, claims.Claim] | None = None,
) -> tuple[str, dict[str, tuple[int, int]]]:
    """Each row of ``values`` ({claim id: (the value it reads, its values in the views)}) judged on each by its check
    in ``profile`` (:func:`companion.claims.judged`). Returns the rows as a Markdown table (the value the row reads: a
    late mean, a phase's last evaluation or a run as it ended; the lowest and highest value in one view; category; how
    many views give another category) and, for each row that some view puts in another category, (how many views do,
    how many there are).

    Raises:
        ValueError: a row id not in the registry, or a row with no view.
    """
    registry = _check_rows(values, registry, "same_verdicts")
    _check_views(values, "same_verdicts")
    return _table(values, _categories(values, profile, registry))


def _check_views(values: dict, caller: str) -> None:
    empty = sorted(cid for cid, (_, at_each) in values.items() if len(at_each) == 0)
    if empty:
        raise ValueError(f"{caller}: {empty} have no view (allowed: one or more values each)")


def _table(
    values: dict, categories: dict[str, tuple[str, list[str]]]
) -> tuple[str, dict[str, tuple[int, int]]]:
    """:func:`same_verdicts` on rows already judged (:func:`_categories`)."""
    table, changed = [], {}
    for cid, (late, at_each) in values.items():
        category, seen = categories[cid]
        others = sum(c != category for c in seen)
        at = np.asarray(at_each, dtype=float)
        spread = "nan" if np.isnan(at).all() else f"{np.nanmin(at):.4g}, {np.nanmax(at):.4g}"
        table.append([f"`{cid}`", late, spread, category, f"{others} of {len(seen)}"])
        if others:
            changed[cid] = (int(others), len(seen))
    return markdown_table(HEADER, table), changed


def require_same_verdicts(
    values: dict[str, tuple[float, Sequence[float]]],
    profile: str,
    registry: dict[str, claims.Claim] | None = None,
) -> str:
    """:func:`same_verdicts`' table, once no row asserted in ``profile`` takes another category in some view.

    Raises:
        ValueError: as :func:`same_verdicts`.
        AssertionError: the rows asserted in ``profile`` that some view puts in another category (every one named):
            their verdicts depend on when a run stopped.
    """
    registry = _check_rows(values, registry, "require_same_verdicts")
    return judged_views(values, profile, require=True, registry=registry)[0]


def _require(values: dict, changed: dict[str, tuple[int, int]], profile: str, registry) -> None:
    failed = [
        f"{cid} ({claims.judged(registry[cid], values[cid][0], profile)['category']} on the value read; another in "
        f"{k} of {n} views)"
        for cid, (k, n) in changed.items()
        if registry[cid].asserted(profile)
    ]
    if failed:
        raise AssertionError("verdicts that depend on when the run stopped: " + "; ".join(failed))


def judged_views(
    values: dict[str, tuple[float, Sequence[float]]],
    profile: str,
    lead: str = LATE_LEAD,
    cuts: dict[str, Sequence[tuple[str, int]]] | None = None,
    *,
    require: bool = False,
    registry: dict[str, claims.Claim] | None = None,
) -> tuple[str, str]:
    """What a chapter shows of its rows' views, each row judged once in each: :func:`same_verdicts`' table and a
    sentence, :func:`changed_text` after ``lead`` (:data:`LATE_LEAD`, or :data:`STOPPED_LEAD` for runs cut),
    followed where the views' ``cuts`` are given (:func:`stopped_studies`) by :func:`turned_text`. With ``require``,
    first as :func:`require_same_verdicts`.

    Raises:
        ValueError: as :func:`same_verdicts`; a row whose cuts and views differ in number.
        AssertionError: with ``require``, as :func:`require_same_verdicts`.
    """
    registry = _check_rows(values, registry, "judged_views")
    _check_views(values, "judged_views")
    if cuts is not None:
        _check_cuts(values, cuts, "judged_views")
    categories = _categories(values, profile, registry)
    table, changed = _table(values, categories)
    if require:
        _require(values, changed, profile, registry)
    text = changed_text(changed, lead)
    turned = "" if cuts is None else _turned(categories, cuts)
    return table, f"{text} {turned}" if turned else text


def judged_studies(
    over: Callable[[str], tuple[Callable[[dict], Summary], dict]],
    studies: dict[str, dict[str, str]],
    keys: Sequence[str],
    profile: str,
    registry: dict[str, claims.Claim] | None = None,
) -> tuple[str, str]:
    """What a chapter shows of recorded studies' rows read on runs as they ended: :func:`judged_views` of
    :func:`stopped_studies` (each run a study's summary reads cut in turn at each evaluation of its late window), after
    :data:`STOPPED_LEAD` and with the runs that turn a row named. Reported, never required: a recording is what it was.

    Raises:
        ValueError: as :func:`stopped_studies`.
    """
    values, cuts = stopped_studies(over, studies, keys, registry)
    return judged_views(values, profile, STOPPED_LEAD, cuts, registry=registry)


def judged_study(
    make: Callable[[dict], Summary],
    runs: dict,
    rows: dict[str, str],
    keys: Sequence[str],
    profile: str,
    registry: dict[str, claims.Claim] | None = None,
) -> tuple[str, str]:
    """:func:`judged_studies` of one recorded study: its summary ``make`` of its ``runs`` (every run the summary
    reads) and its ``rows`` ({claim id: entry}).

    Raises:
        ValueError: as :func:`stopped_studies`.
    """
    return judged_studies(lambda _: (make, runs), {"study": rows}, keys, profile, registry)


def require_late_verdicts(
    make: Callable[[Any], Summary],
    runs,
    rows: dict[str, str],
    profile: str,
    registry: dict[str, claims.Claim] | None = None,
    *,
    phase: int = 1,
) -> str:
    """The rows of ``rows`` ({claim id: entry of the summary}) judged on ``make(runs)``, the chapter's summary of late
    means, and in every view of :func:`views` of ``phase`` (:func:`late_values`), as :func:`require_same_verdicts`
    judges them; returns its table.

    Raises:
        ValueError: before any view is made, a row id not in the registry or an entry the summary lacks.
        AssertionError: a row asserted in ``profile`` that some view puts in another category (every such row
            named): its verdict depends on when a run stopped.
    """
    return require_same_verdicts(late_values(make, runs, rows, registry, phase=phase), profile, registry)


def unviewed_text(not_viewed: dict[str, tuple[Sequence[str], Sequence[str]]]) -> str:
    """A sentence on the rows of recordings that :func:`recorded_values` could not judge at each evaluation
    ({recording's file name: (those rows, all the rows asked of it)}).

    >>> unviewed_text({"a-full.json": (["x.a", "x.b"], ["x.a", "x.b", "x.c"]), "b-full.json": ([], ["y.a"])})
    'Not judged at each evaluation: `x.a` and `x.b` of a-full.json; their recordings keep neither the views of these rows nor the curves they read.'
    >>> unviewed_text({"a-full.json": (["x.a"], ["x.a"]), "b-full.json": (["y.a", "y.b"], ["y.a", "y.b"])})
    'Not judged at each evaluation: the rows of a-full.json and b-full.json; their recordings keep neither the views of these rows nor the curves they read.'
    >>> unviewed_text({"a-full.json": ([], ["x.a"])})
    'Every row of these recordings is judged at each evaluation of its late window.'
    """
    whole = [name for name, (left, rows) in not_viewed.items() if left and list(left) == list(rows)]
    parts = [f"the rows of {and_list(whole)}"] if whole else []
    parts += [
        f"{and_list([f'`{c}`' for c in left])} of {name}"
        for name, (left, _) in not_viewed.items()
        if left and name not in whole
    ]
    if not parts:
        return "Every row of these recordings is judged at each evaluation of its late window."
    return (
        f"Not judged at each evaluation: {'; '.join(parts)}; their recordings keep neither the views of these rows "
        "nor the curves they read."
    )


def changed_text(changed: dict[str, tuple[int, int]], lead: str = LATE_LEAD) -> str:
    """A sentence on :func:`same_verdicts`' second value: which rows some view puts in another category, and in how
    many views, after ``lead``, what a view is (:data:`LATE_LEAD`, or :data:`STOPPED_LEAD` for
    :func:`stopped_values`).

    >>> changed_text({})
    'At one evaluation alone, every row keeps its category.'
    >>> changed_text({"x.a": (2, 15), "x.b": (3, 15)})
    'At one evaluation alone, `x.a` takes another category in 2 of 15 views and `x.b` in 3 of 15: their verdicts depend on when the runs stopped.'
    >>> changed_text({"x.a": (1, 5)}, STOPPED_LEAD)
    'With one run stopped at one evaluation of its late window, `x.a` takes another category in 1 of 5 views: its verdict depends on when the runs stopped.'
    """
    if not changed:
        return f"{lead}, every row keeps its category."
    (first, (k, n)), *rest = changed.items()
    parts = [f"`{first}` takes another category in {k} of {n} views"]
    parts += [f"`{cid}` in {k} of {n}" for cid, (k, n) in rest]
    whose = "their verdicts depend" if rest else "its verdict depends"
    return f"{lead}, {and_list(parts)}: {whose} on when the runs stopped."
