"""The claim registry: every checked claim of the book, the paper's value next to ours.

The rows (id, chapter, source, statement, the paper's value, scale, the
criterion per profile, for a finding the corrected statement, and for a
prediction of ours that its result refuted the mark ``refuted = true``) are data,
in ``data/claims.toml``; this module reads and validates them. A chapter's
Check cell is one line per claim::

    claims.check("recall.full_noise", s["p_noise_full"])

:func:`check` judges the observed value by the row's criterion for the active
profile, records the result atomically under
``<cache>/claims/<profile>/<id>.json`` and raises ``AssertionError`` when an
asserted claim does not hold, so CI fails when a claim stops holding; :func:`results`
and :func:`counts` read this build's results back. The pages built from them (the
scorecard, results at a glance, the errata) are :mod:`companion.claim_pages`.

A criterion on its own:

>>> Criterion(expected=0.5, tol=0.05).holds(0.49)
True
>>> str(Criterion(above=0.75))
'> 0.75'
"""

from __future__ import annotations

import datetime
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from companion import config
from companion.criterion import Criterion  # re-exported: claims.Criterion is the rows' criterion
from companion.io import atomic_write_text
from companion.statements import stated_outcome, stated_seeds, stated_value

SCALES = ("any", "quick", "full", "real")
# Where a claim comes from: a source (one of the papers or the talk) makes it, or it is ours (a study of this book,
# a check of our own derivation or pipeline); the scorecard counts the two apart.
ORIGINS = ("paper", "ours")
# A claim of ours is a prediction (a written record says it was registered before its result was seen) or post hoc
# (registered knowing the value, or with no record either way).
KINDS = ("prediction", "post hoc")
CLAIMS_FILE = config.committed_data_dir() / "claims.toml"

# Scorecard categories, in the order the scorecard counts them.
HOLDS = "holds"
HOLDS_HERE = "holds at this scale only"
NOT_HERE = "does not hold here"
NOT_CHECKED = "not checked here"
FINDING = "finding against the paper"
REFUTED = "our prediction, refuted"
FAIL = "FAIL"
# The detail of a NOT_CHECKED row of another scale whose value is NaN at this size (e.g. no run reached the level
# whose steps it compares): it starts with this, and the scorecard test recognises it by it.
NOT_MEASURABLE = "not measurable at this size"
CATEGORIES = (HOLDS, HOLDS_HERE, FINDING, REFUTED, NOT_HERE, NOT_CHECKED, FAIL)


@dataclass(frozen=True)
class Claim:
    """A claim the book checks (one row of ``data/claims.toml``): a source's (``origin = "paper"``), or ours
    (``origin = "ours"``, with the date it was ``registered``)."""

    id: str
    chapter: str  # docname of the chapter that checks it, e.g. "book/noisy_recall"
    source: str  # where the paper says it (ours: what it is about)
    statement: str  # what the observed value is
    paper: (
        str  # the paper's value, as the paper gives it ("" for a claim of ours that the paper gives none for)
    )
    criteria: dict = field(default_factory=dict)  # profile -> Criterion
    scale: str = "any"  # "any" | "quick" | "full" | "real"
    finding: str | None = None  # the corrected statement, where the check shows the paper wrong
    infinite_ok: bool = False
    # A prediction registered before its result (ours, or the paper's statement at a size it does not give), which
    # the result refuted: the criterion now asserts what was observed, the statement gives the prediction.
    refuted: bool = False
    origin: str = "paper"
    registered: str | None = None  # ours: the date the row was registered (ISO), with its criterion
    kind: str | None = None  # ours: "prediction" or "post hoc" (KINDS)
    context: str = ""  # ours: what was known when the row was registered
    # False where the criterion asserts that the source's statement fails at the book's size (the row then carries a
    # finding, is a refuted prediction, or is counted "does not hold here", never "holds"); for a post hoc row of
    # ours, that a later build (other batches, another seed) contradicts it, as its history tells
    # ("does not hold here": a prediction that fails is marked refuted instead)
    agrees: bool = True
    history: str = ""  # any row: its registration notes and later changes, dated, as written at the time
    # the summary entries (of the recording that stores the row, recomputed from its curves) whose seeds its
    # outcome clause names ("refuted: 3 of 7 (seeds 1, 3, 5)"): their union is the set it names (stated_seeds)
    seeds: tuple[str, ...] = ()

    @property
    def reference(self) -> str:
        """The paper's value, or, for a claim of ours, that it is ours and when it was registered: what the tables'
        "paper" column shows (the check output prefixes a source's value with "paper: ").

        >>> Claim("x", "book/x", "main paper", "p", "≈ 0.5").reference
        '≈ 0.5'
        >>> Claim("y", "book/x", "this book", "p", "", origin="ours", registered="2026-11-22", kind="post hoc").reference
        'ours (post hoc), registered 2026-11-22'
        """
        if self.origin == "ours":
            return f"ours ({self.kind}), registered {self.registered}" + (
                f"; the paper: {self.paper}" if self.paper else ""
            )
        return self.paper

    def _beside(self) -> str:
        return self.reference if self.origin == "ours" else f"paper: {self.paper}"

    def criterion(self, profile: str) -> Criterion:
        """The criterion of ``profile``; for a claim of the other scale, that scale's (to judge an observation)."""
        if profile in self.criteria:
            return self.criteria[profile]
        return next(iter(self.criteria.values()))

    def asserted(self, profile: str) -> bool:
        return self.scale in ("any", "real", profile)

    def finding_profiles(self) -> set[str]:
        """The profiles whose criterion asserts the finding: the row's scale; where the quick and full criteria
        differ, full (the quick one checks the paper's claim scaled down); otherwise every profile."""
        if self.scale in config.PROFILES:
            return {self.scale}
        if self.criteria.get("quick") != self.criteria.get("full"):
            return {"full"}
        return set(config.PROFILES)

    def scaled_down(self, profile: str) -> bool:
        """True where the criterion of ``profile`` is a smaller-scale stand-in for the paper's."""
        if self.scale == "quick":
            return True
        return profile == "quick" and self.criteria.get("quick") != self.criteria.get("full")


_ROW_KEYS = {
    "id",
    "chapter",
    "source",
    "statement",
    "paper",
    "scale",
    "check",
    "quick",
    "full",
    "finding",
    "infinite_ok",
    "refuted",
    "origin",
    "registered",
    "kind",
    "context",
    "agrees",
    "history",
    "seeds",
}


def load(path: Path | str = CLAIMS_FILE) -> dict[str, Claim]:
    """Read and validate the claim rows; every error names the row and the bad value.

    Raises:
        ValueError: unknown or missing keys, a duplicate id, a bad scale or criterion.
    """
    with open(path, "rb") as f:
        rows = tomllib.load(f).get("claim", [])
    out: dict[str, Claim] = {}
    for i, row in enumerate(rows):
        name = row.get("id", f"row {i + 1}")
        unknown = set(row) - _ROW_KEYS
        if unknown:
            raise ValueError(
                f"claim {name!r} in {path}: unknown keys {sorted(unknown)}; allowed {sorted(_ROW_KEYS)}"
            )
        missing = {"id", "chapter", "source", "statement", "origin"} - set(row)
        if missing:
            raise ValueError(f"claim {name!r} in {path}: missing keys {sorted(missing)}")
        origin = row["origin"]
        if origin not in ORIGINS:
            raise ValueError(f"claim {name!r}: unknown origin {origin!r}; allowed {', '.join(ORIGINS)}")
        registered = row.get("registered")
        if origin == "paper" and ("paper" not in row or registered is not None):
            raise ValueError(
                f"claim {name!r}: a source's claim (origin = 'paper') gives the paper's value (paper) and no "
                f"registration date (registered = {registered!r}: allowed for origin = 'ours' only)"
            )
        if origin == "ours" and not isinstance(registered, datetime.date):
            raise ValueError(
                f"claim {name!r}: a claim of ours needs the date it was registered, as a TOML date "
                f"(registered = 2026-11-22); got {registered!r}"
            )
        kind, context = row.get("kind"), row.get("context", "")
        if origin == "paper" and ("kind" in row or "context" in row):
            raise ValueError(
                f"claim {name!r}: kind and context are for claims of ours (origin = 'ours') only"
            )
        if origin == "ours":
            if kind not in KINDS:
                raise ValueError(f"claim {name!r}: kind = {kind!r}; allowed {', '.join(map(repr, KINDS))}")
            if not isinstance(context, str) or not context.strip():
                raise ValueError(
                    f"claim {name!r}: a claim of ours needs its context (what was known when it was registered)"
                )
            if row.get("refuted") and kind != "prediction":
                raise ValueError(
                    f"claim {name!r}: refuted = true marks a prediction that its result refuted; kind = {kind!r}"
                )
        history = row.get("history", "")
        if "history" in row and (not isinstance(history, str) or not history.strip()):
            raise ValueError(
                f"claim {name!r}: history = {history!r}; give the row's notes as text, or leave it out"
            )
        if name in out:
            raise ValueError(f"claim {name!r} in {path}: duplicate id")
        scale = row.get("scale", "any")
        if scale not in SCALES:
            raise ValueError(f"claim {name!r}: unknown scale {scale!r}; allowed {', '.join(SCALES)}")
        if "check" in row and ({"quick", "full"} & set(row)):
            raise ValueError(f"claim {name!r}: give 'check' (every profile) or 'quick'/'full', not both")
        try:
            if "check" in row:
                criteria = {p: Criterion(**row["check"]) for p in config.PROFILES}
            else:
                criteria = {p: Criterion(**row[p]) for p in config.PROFILES if p in row}
        except TypeError as e:
            raise ValueError(
                f"claim {name!r}: bad criterion ({e}); keys are expected, tol, above, below"
            ) from None
        except ValueError as e:
            raise ValueError(f"claim {name!r}: {e}") from None
        needed = [scale] if scale in config.PROFILES else list(config.PROFILES)
        if any(p not in criteria for p in needed):
            raise ValueError(f"claim {name!r} (scale {scale!r}) needs a criterion for {', '.join(needed)}")
        refuted = row.get("refuted", False)
        if not isinstance(refuted, bool):
            raise ValueError(f"claim {name!r}: refuted={refuted!r} is not a boolean: allowed true or false")
        agrees = row.get("agrees", True)
        later = origin == "ours" and kind == "post hoc" and bool(row.get("history", "").strip())
        if not isinstance(agrees, bool) or (not agrees and origin != "paper" and not later):
            raise ValueError(
                f"claim {name!r}: agrees = {agrees!r}; allowed false (a source's statement the criterion asserts "
                "to fail, origin = 'paper'; or a post hoc statement of ours that a later build contradicts, told "
                "in its history) or true"
            )
        if refuted and row.get("finding"):
            raise ValueError(
                f"claim {name!r}: a finding against the paper (finding) and a refuted prediction of "
                "ours (refuted) exclude each other: give one"
            )
        seeds = row.get("seeds", [])
        if not isinstance(seeds, list) or not all(isinstance(e, str) and e for e in seeds):
            raise ValueError(f"claim {name!r}: seeds = {seeds!r}; allowed a list of summary entries' names")
        if seeds and stated_seeds(row["statement"]) is None:
            raise ValueError(
                f"claim {name!r}: seeds = {seeds!r} names entries, but its statement's outcome clause names no "
                "seed (allowed: a clause such as '; refuted: seeds 1, 3')"
            )
        out[name] = Claim(
            row["id"],
            row["chapter"],
            row["source"],
            row["statement"],
            row.get("paper", ""),
            criteria,
            scale,
            row.get("finding"),
            bool(row.get("infinite_ok", False)),
            refuted,
            origin,
            registered.isoformat() if registered is not None else None,
            kind,
            context,
            agrees,
            history.strip(),
            tuple(seeds),
        )
    return out


def record_path(claim_id: str, profile: str, cache: Path | None = None) -> Path:
    """Where a build keeps its result of a claim: under ``cache`` (a build's cache folder; default this one's)."""
    return (config.cache_dir() if cache is None else Path(cache)) / "claims" / profile / f"{claim_id}.json"


def lookup(claim_id: str, registry: dict[str, Claim] | None = None) -> Claim:
    """The row ``claim_id`` of ``registry`` (default :data:`CLAIMS`).

    Raises:
        KeyError: an id with no row.
    """
    registry = CLAIMS if registry is None else registry
    if claim_id not in registry:
        raise KeyError(f"unknown claim {claim_id!r}: add a row to {CLAIMS_FILE.name}")
    return registry[claim_id]


def check(
    claim_id: str,
    observed: float,
    *,
    note: str = "",
    profile: str | None = None,
    record: bool = True,
    quiet: bool = False,
    registry: dict[str, Claim] | None = None,
    recorded: str = "",
    source: str = "",
) -> dict:
    """Judge ``observed`` by the claim's criterion for the profile, record it, and assert.

    A claim of another scale (``scale="full"`` in the quick profile, ...) is
    recorded and shown as observed, never asserted. ``recorded`` (a label:
    profile, device, date, commit) marks a value from a recorded run
    (:mod:`companion.record`, file name ``source``): it is kept apart from the
    live build's result and shown in the scorecard's "recorded" column.

    Raises:
        KeyError: unknown claim id.
        AssertionError: an asserted claim does not hold (after recording the failure), unless
            ``$COMPANION_CHECKS`` is ``record`` (:func:`companion.config.checks_assert`).
    """
    claim = lookup(claim_id, registry)
    profile = config.get_profile(profile)
    enforce = config.checks_assert()
    observed = float(observed)
    crit = claim.criterion(profile)
    passed = crit.holds(observed, claim.infinite_ok)
    asserted = claim.asserted(profile)
    result = {
        "id": claim_id,
        "observed": observed,
        "criterion": str(crit),
        "passed": passed,
        "asserted": asserted,
        "profile": profile,
        "note": note,
        "package": config.package_hash(),
    }
    if recorded:
        result.update(recorded=recorded, source=source)
    if record:
        atomic_write_text(
            record_path(claim_id, "recorded" if recorded else profile), json.dumps(result, indent=1)
        )
    if not quiet:
        print(_line(claim, result))
    if asserted and not passed and enforce:
        raise AssertionError(
            f"claim {claim_id} does not hold: observed {crit.show(observed)}, expected {crit} ({claim.statement})"
        )
    return result


def _line(claim: Claim, result: dict) -> str:
    """The check output of one result, in the scorecard's words: ``[category] id: criterion, observed (the paper's
    value or ours)``, then what the category needs said (the correction, the prediction and its result, why the
    source's statement is not asserted here)."""
    shown = claim.criterion(result["profile"]).show(result["observed"])
    head = f"{claim.id}: criterion {result['criterion']}, observed {shown}"
    if "recorded" in result:
        word = "holds" if result["passed"] else "does not hold"
        line = f"[recorded: {word}] {head} ({result['recorded']}; {claim._beside()})"
        return line + (f"; corrected: {claim.finding}" if claim.finding and result["passed"] else "")
    category, detail = status(claim, result, result["profile"])
    line = f"[{category}] {head} in the {result['profile']} profile ({claim._beside()})"
    if category == FINDING:
        return f"{line}; " + (detail if detail != claim.finding else f"corrected: {claim.finding}")
    if category == REFUTED:
        return f"{line}; the row asserts what was observed; the prediction and its result: {claim.statement}"
    return line + (f"; {detail}" if detail else "")


def skip(
    claim_id: str,
    reason: str,
    profile: str | None = None,
    quiet: bool = False,
    registry: dict[str, Claim] | None = None,
) -> dict:
    """Record that a claim about a pretrained model was not checked (e.g. weights unreachable), and why."""
    claim = lookup(claim_id, registry)
    if claim.scale != "real":
        raise ValueError(
            f"only claims about pretrained models (scale='real') can be skipped; {claim_id!r} "
            f"is scale={claim.scale!r}"
        )
    profile = config.get_profile(profile)
    result = {"id": claim_id, "skipped": reason, "profile": profile, "package": config.package_hash()}
    atomic_write_text(record_path(claim_id, profile), json.dumps(result, indent=1))
    if not quiet:
        print(f"[NOT CHECKED] {claim_id}: {reason} ({claim._beside()})")
    return result


def check_real(claim_id: str, observed, why_not: str = "", **kwargs) -> dict:
    """A claim about a pretrained model: :func:`check` it, or, where ``why_not`` says why it cannot be
    (e.g. "Pythia weights unavailable (stand-in used)"), record it as not checked."""
    if why_not:
        return skip(
            claim_id, why_not, **{k: v for k, v in kwargs.items() if k in ("profile", "quiet", "registry")}
        )
    if observed is None:
        raise ValueError(f"claim {claim_id}: no observed value, and no reason why it is not checked")
    return check(claim_id, observed, **kwargs)


def status(claim: Claim, rec: dict | None, profile: str) -> tuple[str, str]:
    """(category, detail) of a claim given its recorded result (None: not run)."""
    if rec is None:
        return NOT_CHECKED, (
            f"{claim.scale} scale only" if not claim.asserted(profile) else "chapter not run"
        )
    if "skipped" in rec:
        return NOT_CHECKED, rec["skipped"]
    if not claim.asserted(profile):
        observed = rec.get("observed")
        if isinstance(observed, float) and math.isnan(observed):  # nothing to judge at this size
            return (
                NOT_CHECKED,
                f"{NOT_MEASURABLE} (observed NaN); asserted at {claim.scale} scale only",
            )
        if claim.finding:  # the criterion is the finding's, established (and asserted) at the row's scale
            return (
                (
                    FINDING,
                    f"established at {claim.scale} scale, where it is asserted; shows here too: {claim.finding}",
                )
                if rec["passed"]
                else (
                    NOT_HERE,
                    f"a finding at {claim.scale} scale, where it is asserted; it does not show at this size",
                )
            )
        return (
            (HOLDS_HERE, f"asserted at {claim.scale} scale only; holds here")
            if rec["passed"]
            else (NOT_HERE, f"asserted at {claim.scale} scale only")
        )
    if not rec["passed"]:
        return FAIL, ""
    if claim.finding and profile in claim.finding_profiles():
        return FINDING, claim.finding
    if claim.refuted:
        return REFUTED, "asserts what was observed; the statement gives the prediction"
    if not claim.agrees:
        if claim.origin == "ours":
            return (
                NOT_HERE,
                "our post hoc statement does not hold in this build (its history says which): the row asserts "
                "what was observed",
            )
        return (
            NOT_HERE,
            "the source's statement does not hold at this size: the row asserts what was observed",
        )
    if claim.scaled_down(profile):
        if (
            claim.finding
        ):  # the finding belongs to the paper's size; this size checks the paper's claim scaled down
            return (
                HOLDS_HERE,
                f"at the paper's size a finding (criterion {claim.criterion('full')}): {claim.finding}",
            )
        return (
            HOLDS_HERE,
            f"paper-scale criterion: {claim.criterion('full')}" if "full" in claim.criteria else "",
        )
    return HOLDS, ""


def results(
    profile: str | None = None,
    registry: dict[str, Claim] | None = None,
    cache: Path | None = None,
    book: dict | None = None,
) -> list[dict]:
    """One row per registered claim, with its recorded result and scorecard category; ``cache``: the results of
    the build whose cache folder that is (default this one's); ``book``: a recorded run of the book at the full
    profile (default the committed one, :func:`book_run`), whose status of the row is ``book_run``."""
    profile = config.get_profile(profile)
    current = config.package_hash()
    book = book_run() if book is None else book
    rows = []
    for c in (CLAIMS if registry is None else registry).values():
        path = record_path(c.id, profile, cache)
        rec = json.loads(path.read_text()) if path.is_file() else None
        category, detail = status(c, rec, profile)
        stale = rec is not None and rec["package"] != current
        kept = _recorded_result(c.id)
        rows.append(
            {
                "claim": c.id,
                "chapter": c.chapter,
                "source": c.source,
                "statement": c.statement,
                "paper": c.reference,
                "origin": c.origin,
                "history": c.history,
                "criterion": rec.get("criterion", "") if rec else str(c.criterion(profile)),
                "ours": c.criterion(profile).show(rec["observed"], 3) if rec and "observed" in rec else "—",
                "observed": float(rec["observed"]) if rec and "observed" in rec else None,
                "note": rec.get("note", "") if rec else "",
                "profile": profile,
                "category": category,
                "detail": detail,
                "stale": stale,
                "status": category + (f" ({detail})" if detail else "") + (" (stale)" if stale else ""),
                "recorded": (
                    f"{c.criterion(kept['profile']).show(kept['observed'], 3)} ({'the finding ' if c.finding else ''}"
                    f"{'holds' if kept['passed'] else 'does not hold'}; {kept['recorded']})"
                )
                if kept
                else "",
                "book_run": in_book_run(c, book),
                **_at_finding_scale(c, profile, rec, kept),
            }
        )
    return rows


def _at_finding_scale(c: Claim, profile: str, rec: dict | None, kept: dict | None) -> dict:
    """The row's value at the scale its finding belongs to (:meth:`Claim.finding_profiles`), for the errata page
    and its effect sizes: this build's where the build's profile is one of them, else the recorded run's (None
    when neither measured it), with the label that says which."""
    here = profile in c.finding_profiles()
    if here:
        value, label = (
            (float(rec["observed"]) if rec and "observed" in rec else None),
            f"this build, {profile} profile",
        )
    else:
        value, label = (float(kept["observed"]), f"recorded: {kept['recorded']}") if kept else (None, "")
    return {"finding_scale_here": here, "finding_scale_value": value, "finding_scale_label": label}


def _recorded_result(claim_id: str) -> dict | None:
    """The result of a recorded run's check of the claim, while its recorded file is still in ``data/``."""
    path = record_path(claim_id, "recorded")
    if not path.is_file():
        return None
    rec = json.loads(path.read_text())
    # source: one recorded file, or several (", "-separated) for a claim measured over runs (record.check_over)
    files = [config.committed_data_dir() / "recorded" / name for name in rec.get("source", "").split(", ")]
    return rec if all(f.is_file() for f in files) else None


BOOK_RUN_DIR = config.committed_data_dir() / "recorded" / "book"
# what became of a chapter in a book run (scripts/book_run.py)
BOOK_RUN_OUTCOMES = ("passed", "failed", "timed out", "error")


def book_run(profile: str = "full", path: Path | None = None) -> dict:
    """The committed record of the book executed at ``profile`` (``scripts/book_run.py``, issue 56:
    ``data/recorded/book/<profile>.json``): {"profile", "chapters": {chapter: outcome, cells, seconds, device,
    commit, date, versions and "rows", each checked row's result}}; an empty record ({}) where none is committed.

    Raises:
        ValueError: the file records another profile.
    """
    path = BOOK_RUN_DIR / f"{profile}.json" if path is None else Path(path)
    if not path.is_file():
        return {}
    run = json.loads(path.read_text())
    if run.get("profile") != profile:
        raise ValueError(f"{path} records the profile {run.get('profile')!r}, not profile={profile!r}")
    return run


def in_book_run(c: Claim, run: dict) -> str:
    """The row's status in a recorded book run (:func:`book_run`), judged by the registry's criterion at the run's
    profile, with its value, device and date, and the recordings of another profile its chapter read (the row's
    value may be theirs: a chapter that reads our quick CPU recordings checks their values at any profile); why
    not where the chapter did not check it; "" without a run.

    >>> c = CLAIMS["b3.no_overshoot"]
    >>> in_book_run(c, {})
    ''
    >>> ran = {"outcome": "passed", "cells": 5, "passed": 5, "device": "cuda (H100)", "date": "2026-12-03"}
    >>> in_book_run(c, {"profile": "full", "chapters": {c.chapter: ran | {"rows": {c.id: {"observed": 1e-16}}}}})
    'holds: 1e-16 (cuda (H100), 2026-12-03)'
    >>> in_book_run(c, {"profile": "full", "chapters": {c.chapter: ran | {"rows": {}}}})
    'not checked here: the chapter passed, 5 of 5 cells'
    >>> reads = {"quick": ["khop-quick-depth=4.json"], "full": ["fig3-full.json"]}
    >>> in_book_run(c, {"profile": "full", "chapters": {c.chapter: ran | {"rows": {c.id: {"observed": 0}}, "reads": reads}}})
    'holds: 0 (cuda (H100), 2026-12-03; its chapter read 1 recording at quick)'

    A chapter run on other training batches than this build's (``sampler``, as :func:`companion.config.sampler_label`
    states it) is marked stale: its values are not what this build's chapter computes.

    >>> other = ran | {"rows": {c.id: {"observed": 0}}, "sampler": "numpy (version 1)"}
    >>> with config.using_sampler("counter"):
    ...     in_book_run(c, {"profile": "full", "chapters": {c.chapter: other}})
    'holds: 0 (cuda (H100), 2026-12-03) (stale: drawn by numpy (version 1), this build by counter (version 2))'
    """
    if not run:
        return ""
    profile, chapters = run["profile"], run["chapters"]
    own = chapters.get(c.chapter)
    # the row's result in its own chapter, else in another chapter that checks it
    entry = next((e for e in (own, *chapters.values()) if e and c.id in e["rows"]), None)
    if entry is None:
        if own is None:
            return f"{NOT_CHECKED}: the chapter was not run at {profile}"
        return f"{NOT_CHECKED}: the chapter {own['outcome']}, {own['passed']} of {own['cells']} cells"
    rec = entry["rows"][c.id]
    if "skipped" in rec:
        return f"{NOT_CHECKED}: {rec['skipped']}"
    seen = judged(c, float(rec["observed"]), profile)
    shown = c.criterion(profile).show(seen["observed"], 3)
    # a chapter that reads recordings of another profile may check its rows on their values, not at ``profile``
    other = "".join(
        f"; its chapter read {len(files)} recording{'s' * (len(files) > 1)} at {p}"
        for p, files in entry.get("reads", {}).items()
        if p != profile
    )
    here = config.sampler_label()
    stale = (
        f" (stale: drawn by {entry['sampler']}, this build by {here})"
        if entry.get("sampler", here) != here
        else ""
    )
    return f"{seen['category']}: {shown} ({entry['device']}, {entry['date']}{other}){stale}"


# A statement's outcome clause names one of these (companion.statements reads it): the categories a build may give
# the row beside it. "as predicted": a row whose category is the source's, agrees = false, while our prediction
# about it held.
OUTCOMES = {
    "holds": (HOLDS, HOLDS_HERE),
    "refuted": (REFUTED, FINDING, NOT_HERE),
    "as predicted": (NOT_HERE,),
}


def names_other_outcome(claim: Claim, category: str) -> bool:
    """True where the claim's statement names an outcome (:func:`stated_outcome`) that ``category``, the one a
    build gives the row, is not among (:data:`OUTCOMES`).

    >>> c = Claim("x", "book/x", "ours", "seeds that walk; refuted: 2 of 7", "")
    >>> names_other_outcome(c, REFUTED), names_other_outcome(c, FAIL)
    (False, True)
    """
    outcome = stated_outcome(claim.statement)
    return outcome is not None and category not in OUTCOMES[outcome]


def states_otherwise(claim: Claim, observed) -> bool:
    """True where the claim's statement gives a value (:func:`stated_value`) and ``observed`` is not it at the
    decimals given: a count N "of M" is N or the share N / M. A statement written with one build's value goes stale
    when another build (other batches: issue 54's switch) observes another; its bar is in the criterion, not here.

    >>> c = Claim("x", "book/x", "ours", "seeds that walk; refuted: 2 of 7", "")
    >>> states_otherwise(c, 2), states_otherwise(c, 2 / 7), states_otherwise(c, 4), states_otherwise(c, None)
    (False, False, True, True)
    >>> states_otherwise(Claim("y", "book/x", "ours", "the share; holds: 1.00 from every table", ""), 0.998)
    False
    """
    stated = stated_value(claim.statement)
    if stated is None:
        return False
    if observed is None or (isinstance(observed, float) and math.isnan(observed)):
        return True
    value, decimals, of = stated
    return not any(round(v, decimals) == value for v in (float(observed), float(observed) * (of or 1)))


def prediction_outcome(
    claim_id: str, observed, profile: str | None = None, registry: dict[str, Claim] | None = None
) -> str:
    """What ``observed`` says of the prediction a row registered, whatever the row's ``refuted`` flag says of the
    build that set it: ``"holds"`` or ``"refuted"``. A row whose criterion asserts its prediction (not ``refuted``)
    passes where the prediction holds; a ``refuted`` row's criterion asserts what refuted it, so there the
    prediction holds where the criterion fails. Text written beside a value reads its outcome here, so that it
    stays true when other batches change the value (issue 54's switch), before and after the flag follows.

    A NaN meets no prediction (a gain over runs of which one diverged, a p-value of no test), whichever way the
    row's criterion points.

    >>> reg = {"x": Claim("x", "book/x", "ours", "s", "", {"quick": Criterion(below=0.5)}, refuted=True)}
    >>> prediction_outcome("x", 0.0, "quick", reg), prediction_outcome("x", 1.0, "quick", reg)
    ('refuted', 'holds')
    >>> prediction_outcome("x", float("nan"), "quick", reg)
    'refuted'
    """
    registry = CLAIMS if registry is None else registry
    claim = registry[claim_id]
    if math.isnan(float(observed)):
        return "refuted"
    passed = claim.criterion(config.get_profile(profile)).holds(observed, claim.infinite_ok)
    return "holds" if passed != claim.refuted else "refuted"


def prediction(
    claim_id: str, profile: str | None = None, registry: dict[str, Claim] | None = None
) -> Criterion:
    """The prediction a row registered, as a criterion: the row's own where it is not ``refuted``; where it is, its
    criterion asserts what refuted the prediction with the bar unchanged, so the prediction is that criterion turned
    round (the text beside a value names the prediction from here, not typed: :meth:`Criterion.words`).

    >>> reg = {"x": Claim("x", "book/x", "ours", "s", "", {"quick": Criterion(below=0.5)}, refuted=True)}
    >>> prediction("x", "quick", reg).words()
    'above 0.5'

    Raises:
        ValueError: a refuted row whose criterion has not exactly one bound (nothing to turn round).
    """
    registry = CLAIMS if registry is None else registry
    claim = registry[claim_id]
    crit = claim.criterion(config.get_profile(profile))
    if not claim.refuted:
        return crit
    if crit.expected is not None or (crit.above is None) == (crit.below is None):
        raise ValueError(
            f"claim {claim_id}: refuted, with criterion {crit} (allowed: one bound, above or below)"
        )
    return Criterion(above=crit.below) if crit.above is None else Criterion(below=crit.above)


def judged(c: Claim, value: float, profile: str = "quick") -> dict:
    """A value's category as the row's check in ``profile`` would give it, and the value."""
    passed = c.criterion(profile).holds(value, c.infinite_ok)
    return {"category": status(c, {"observed": value, "passed": passed}, profile)[0], "observed": value}


def counts(
    profile: str | None = None, registry: dict[str, Claim] | None = None, origin: str | None = None
) -> dict[str, int]:
    """How many claims fall in each scorecard category (every category listed, zeros included); ``origin``
    ("paper" or "ours"; None: both) counts only the claims of that origin."""
    if origin is not None:
        config.check_choice("origin", origin, ORIGINS)
    out = dict.fromkeys(CATEGORIES, 0)
    for r in results(profile, registry):
        if origin is None or r["origin"] == origin:
            out[r["category"]] += 1
    return out


CLAIMS = load()
