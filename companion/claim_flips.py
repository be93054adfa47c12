"""Issue 54's flip list: the claim rows as two builds judge them (the same code under the numpy generators and
under the counter-based samplers), from their cache folders (:func:`flips`) or from a recording made under each
(:func:`recorded_flips`); ``scripts/flip_list.py`` writes what these give to ``data/flip_list.json`` and
:func:`companion.claim_pages.flip_list` shows it. Apart from :mod:`companion.claims`, which judges one build.
"""

from __future__ import annotations

import math
from pathlib import Path

from companion import claims

NEAR_BAR = 0.1  # issue 54: the rows within 10% of their bar get two more seeds (Criterion.near)


def recorded_flips(
    pairs, profile: str = "quick", registry: dict[str, claims.Claim] | None = None
) -> list[dict]:
    """The rows that recordings check, as a recording made under one sampler and the same recording made again
    under the other judge them (issue 54: a chapter reads a recording, so a build under another sampler does not
    change such a row until the recording is made again). ``pairs``: (file name, the claims the first stores, the
    claims the second stores), each {claim id: value}. Each row: the claim, its chapter, the file, per recording its
    category (as the chapter's check would judge the value in ``profile``) and value, ``changed`` and ``moved``
    as in :func:`flips`.

    Raises:
        ValueError: a claim the first recording stores and the second does not (not the same recording).
    """
    registry = claims.CLAIMS if registry is None else registry
    out = []
    for name, before, after in pairs:
        missing = sorted(set(before) - set(after))
        if missing:
            raise ValueError(f"{name}: the recording made again does not store {missing}")
        for cid in before:
            c = claims.lookup(cid, registry)
            row = {"claim": cid, "chapter": c.chapter, "recording": name}
            row |= {
                k: claims.judged(c, float(v[cid]), profile) for k, v in (("before", before), ("after", after))
            }
            out.append(_compared(row))
    return out


def _compared(row: dict) -> dict:
    """A flip-list row with ``changed`` (the two sides' categories differ) and ``moved`` (both sides observed it
    and their values differ; NaN equals NaN)."""
    a, b = row["before"]["observed"], row["after"]["observed"]
    row["changed"] = row["before"]["category"] != row["after"]["category"]
    row["moved"] = a is not None and b is not None and a != b and not (math.isnan(a) and math.isnan(b))
    return row


def flips(
    before: Path,
    after: Path,
    chapters,
    profile: str = "quick",
    registry: dict[str, claims.Claim] | None = None,
    sweeps: dict[str, Path] | None = None,
    swept=(),
) -> list[dict]:
    """The rows of ``chapters`` (docnames) as two builds judged them: the builds whose cache folders are ``before``
    and ``after`` (the same rows under two samplers, issue 54's flip list). Each: the claim, its chapter, and per
    build its category and observed value (None where the build did not reach it); ``changed`` where the
    categories differ, ``moved`` where both builds observed the row and their values differ (NaN equals NaN).
    ``near_bar``: either build observed a value within :data:`NEAR_BAR` of the row's bar
    (:meth:`~companion.criterion.Criterion.near`). ``sweeps`` (label -> cache folder, e.g. ``"counter, seed 1"``):
    builds of the chapters ``swept`` under other seeds (``$COMPANION_SEED``); each row of those chapters gets
    ``"sweep"``, its category and value in each (None where not reached).

    Raises:
        ValueError: a chapter with no registered row.
    """
    registry = claims.CLAIMS if registry is None else registry
    chapters = list(chapters)
    known = {c.chapter for c in registry.values()}
    for ch in chapters:
        if ch not in known:
            raise ValueError(f"chapter {ch!r} has no claim row: chapters with rows are {sorted(known)}")
    swept = list(swept)
    for ch in swept:
        if ch not in chapters:
            raise ValueError(f"swept chapter {ch!r} is not among the chapters compared: {chapters}")
    if swept and not sweeps:
        raise ValueError(f"swept chapters {swept} need the sweep builds' cache folders")
    caches = {"before": Path(before), "after": Path(after), **{k: Path(v) for k, v in (sweeps or {}).items()}}
    sides = {
        name: {r["claim"]: r for r in claims.results(profile, registry, cache)}
        for name, cache in caches.items()
    }

    def side(c: claims.Claim, name: str) -> dict:
        reached = claims.record_path(c.id, profile, caches[name]).is_file()
        r = sides[name][c.id]
        return {"category": r["category"] if reached else None, "observed": r["observed"]}

    out = []
    for c in registry.values():
        if c.chapter not in chapters:
            continue
        row = _compared(
            {"claim": c.id, "chapter": c.chapter, "before": side(c, "before"), "after": side(c, "after")}
        )
        crit = c.criterion(profile)
        row["near_bar"] = any(
            s["category"] is not None and s["observed"] is not None and crit.near(s["observed"], NEAR_BAR)
            for s in (row["before"], row["after"])
        )
        if c.chapter in swept:
            row["sweep"] = {name: side(c, name) for name in sweeps}
        out.append(row)
    return out
