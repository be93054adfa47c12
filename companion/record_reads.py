"""Which recording of a study a build reads, under each sampler (issue 54's switch): its own sampler's, or another's
by a named exception (:attr:`companion.recorded.Recordable.reads_under`: the stall chapter's studies, whose rule
picks no run under the counter sampler, are read as made under the numpy generators), and which recordings are
still waiting to be made again under a sampler. Apart from :mod:`companion.record`, which makes and checks them.
"""

from __future__ import annotations

from companion import config, record
from companion.recorded import RECORDED_DIR, Recorded, committed_paths, load, not_yet_under  # noqa: F401 (RECORDED_DIR: the doctests')


def reads_under(rec: Recorded, sampler: str | None = None) -> tuple[str | None, str]:
    """(the sampler whose recording of ``rec``'s experiment its chapter reads in a build under ``sampler``, why
    where that is not the sampler in force: :attr:`companion.recorded.Recordable.reads_under`, a named exception);
    (None, "") for runs that draw no batch from a sampler.

    >>> reads_under(load(RECORDED_DIR / "induction_order-quick.json"), "counter")
    ('counter', '')
    """
    sampler = config.sampler(sampler)
    if rec.drawn_by is None:
        return None, ""
    return record.experiment(rec.experiment).reads_under(sampler)


def read_under(rec: Recorded) -> dict[str, str]:
    """{sampler: why} of the other samplers under which ``rec``'s chapter reads this very recording
    (:func:`reads_under`; :func:`companion.recorded.batches_cell` marks them)."""
    if rec.drawn_by is None:
        return {}
    others = {s: reads_under(rec, s) for s in config.SAMPLERS if s != rec.drawn_by}
    return {s: why for s, (read, why) in others.items() if read == rec.drawn_by}


def in_force(sampler: str | None = None) -> list[Recorded]:
    """The committed recordings whose claims a build under ``sampler`` (default: the one in force) checks, sorted by
    file name: :func:`committed_paths`'s, where a study whose chapter reads another sampler's recording
    (:func:`reads_under`) has that sampler's file instead.

    >>> names = lambda s: {r.path.parent.name for r in in_force(s) if r.experiment == "khop_probe"}
    >>> names("numpy"), names("counter")
    ({'recorded'}, {'recorded'})
    >>> {r.path.parent.name for r in in_force("counter") if r.experiment == "khop_seeds"}
    {'counter'}

    Raises:
        ValueError: an unknown ``sampler``; a study whose chapter reads another sampler's recording that is not
            committed.
    """
    sampler = config.sampler(sampler)
    out = {}
    for path in committed_paths(sampler):
        rec = load(path)
        read, why = reads_under(rec, sampler)
        if read not in (None, rec.drawn_by):
            found = [p for p in committed_paths(read) if p.name == path.name]
            if not found:
                raise ValueError(
                    f"{path.name}: its chapter reads the {read} sampler's recording under {sampler} ({why}), "
                    f"and none is committed: run `{rec.command}` under it"
                )
            rec = load(found[0])
        out[path.name] = rec
    return [out[name] for name in sorted(out)]


def kept_under(sampler: str, recs: list[Recorded] | None = None) -> list[tuple[Recorded, str]]:
    """(recording, why) for each recording of ``recs`` (default: :func:`in_force` under ``sampler``) drawn by
    another sampler that a build under ``sampler`` reads by a named exception (:func:`reads_under`): kept as
    evidence there, not waiting to be made again.

    Raises:
        ValueError: an unknown ``sampler``.
    """
    config.check_choice("sampler", sampler, config.SAMPLERS)
    recs = in_force(sampler) if recs is None else recs
    return [(r, read_under(r)[sampler]) for r in recs if sampler in read_under(r)]


def waiting_under(sampler: str, recs: list[Recorded] | None = None) -> list[Recorded]:
    """The recordings of ``recs`` (default: :func:`in_force` under ``sampler``) drawn by another sampler that are
    not yet made again under ``sampler`` (:func:`companion.recorded.not_yet_under`), less those a build under it
    keeps by a named exception (:func:`kept_under`).

    Raises:
        ValueError: an unknown ``sampler``.
    """
    recs = in_force(sampler) if recs is None else recs
    kept = {r.path for r, _ in kept_under(sampler, recs)}
    return [r for r in not_yet_under(sampler, recs) if r.path not in kept]


def unread_again(data: dict, sampler: str = "counter") -> list[dict]:
    """The rows of the flip list's recordings made again under ``sampler`` (``data``: ``data/flip_list.json``,
    its ``recordings``) whose chapter a build under ``sampler`` does not read them in: it reads another sampler's
    recording of that study by a named exception (:func:`reads_under`), so the switch leaves those rows as they are.

    >>> import json
    >>> from companion import claim_flips
    >>> rows = unread_again(json.loads(claim_flips.FLIP_LIST.read_text()))
    >>> {r["chapter"] for r in rows}
    {'book/khop_stall'}
    """
    again = data.get("recordings", {})
    folder = config.REPO_ROOT / again.get("folder", "")
    made = {m["file"]: load(folder / m["file"]) for m in again.get("made", [])}
    return [r for r in again.get("rows", []) if reads_under(made[r["recording"]], sampler)[0] != sampler]
