"""How a claim row's statement reports what a build observed, read from its prose: the outcome clause ("...;
refuted: 4 of 7 (seeds 1, 3, 5)"), the value and seeds it gives, and the earlier build's result kept after
:data:`REPLICATION` (issue 54's switch). Text only: :mod:`companion.claims` judges rows with these readers
(:func:`~companion.claims.states_otherwise`, :func:`~companion.claims.names_other_outcome`) and loads the rows with
:func:`stated_seeds`.

>>> stated_value("...; refuted: 4 of 7 walk"), stated_outcome("...; as predicted: none")
((4.0, 0, 7), 'as predicted')
"""

from __future__ import annotations

import re

# A statement's outcome clause: "...; holds", "...; refuted: 4 of 7 walk", "...; as predicted: none" (a row whose
# category is the source's, agrees = false, while our prediction about it held); the last one counts. Where it gives
# the value its build observed ("4 of 7", "none", "0.36, seed 0 ..."; "0 against 2" compares two and gives none),
# _STATED reads it.
OUTCOME_WORDS = ("holds", "refuted", "as predicted")
_OUTCOME = re.compile(rf"; ({'|'.join(OUTCOME_WORDS)})\b")
# Issue 54's switch: a row whose outcome changed with the batches keeps the earlier build's outcome after this mark,
# a replication result with both values ("...; holds: 2 of 7 (seeds 1, 4); under the numpy generators: refuted,
# none"); the readers below read the build's own clauses, before it (:func:`own_clauses`).
REPLICATION = "; under the numpy generators: "


def own_clauses(statement: str) -> str:
    """A statement without its replication clause (:data:`REPLICATION`): what the build in force observed.

    >>> own_clauses("x (prediction: at least 1); holds: 2 of 7 (seeds 1, 4); under the numpy generators: refuted, none")
    'x (prediction: at least 1); holds: 2 of 7 (seeds 1, 4)'
    >>> replication("x; holds: 2 of 7; under the numpy generators: refuted, none"), replication("x; holds")
    ('refuted, none', '')
    """
    return statement.partition(REPLICATION)[0]


def replication(statement: str) -> str:
    """What the earlier build (the numpy generators' batches) observed, where the statement keeps it ("" where
    not): :func:`own_clauses`."""
    return statement.partition(REPLICATION)[2]


_STATED = re.compile(
    rf"; (?:{'|'.join(OUTCOME_WORDS)}): (none|-?\d+(?:\.\d+)?)(?: of (\d+))?(?![\d.]| against)"
)


def stated_value(statement: str) -> tuple[float, int, int | None] | None:
    """The value a statement's outcome clause gives (the one its build observed, written into the prose):
    (value, its decimals, the M of "N of M" or None); None where it gives none.

    >>> stated_value("... (prediction: at most 3 of 7); refuted: 4 of 7 walk")
    (4.0, 0, 7)
    >>> stated_value("...; holds: none, every run flat"), stated_value("...; refuted: 0.36, seed 0 ...")
    ((0.0, 0, None), (0.36, 2, None))
    >>> stated_value("...; holds: 0 against 2"), stated_value("...; refuted: seed 2"), stated_value("...; holds")
    (None, None, None)
    >>> stated_value("...; refuted: -1, seed 4 solved only every 100")
    (-1.0, 0, None)
    """
    found = list(_STATED.finditer(own_clauses(statement)))
    if not found:
        return None
    value, of = found[-1].groups()
    decimals = len(value.partition(".")[2])
    return (0.0 if value == "none" else float(value)), decimals, (int(of) if of else None)


_SEEDS = re.compile(r"\bseeds? (\d+(?:(?:, | and )\d+)*)")


def stated_seeds(statement: str) -> set[int] | None:
    """The seeds a statement's last outcome clause names ("seeds 1, 3, 5", "seed 0 ... and seed 1"), None where it
    names none: a claim row's ``seeds`` entries give the build's set (issue 54: seeds written into the prose go
    stale with the batches, as values do).

    >>> stated_seeds("...; refuted: 3 of 7 (seeds 1, 3, 5)"), stated_seeds("...; refuted: seed 2")
    ({1, 3, 5}, {2})
    >>> stated_seeds("...; refuted: 0, seed 0 solved only every 250 and seed 1 only every 100")
    {0, 1}
    >>> stated_seeds("seeds 0-6 ...; refuted: 4 of 7"), stated_seeds("seed 3 ...")
    (None, None)
    >>> s = "...; holds: 2 of 7 (seeds 1, 4); under the numpy generators: refuted, none (seed 4 levels off)"
    >>> stated_seeds(s), stated_value(s), stated_outcome(s)
    ({1, 4}, (2.0, 0, 7), 'holds')
    """
    own = own_clauses(statement)
    found = list(_OUTCOME.finditer(own))
    if not found:
        return None
    named = {int(n) for m in _SEEDS.finditer(own[found[-1].end() :]) for n in re.split(", | and ", m[1])}
    return named or None


def seeds_entry(value: str) -> set[int]:
    """The seeds a summary entry lists ("1, 3, 5"; "none": the empty set).

    >>> seeds_entry("1, 3, 5"), seeds_entry("none")
    ({1, 3, 5}, set())

    Raises:
        ValueError: a value that is not such a list.
    """
    if value == "none":
        return set()
    if not re.fullmatch(r"\d+(, \d+)*", value):
        raise ValueError(f"seed list {value!r}: allowed 'none' or seeds separated by ', '")
    return {int(n) for n in value.split(", ")}


def stated_outcome(statement: str) -> str | None:
    """The outcome a statement's last outcome clause names (one of :data:`OUTCOME_WORDS`), None where it names
    none (:data:`companion.claims.OUTCOMES`: the categories a build may give the row beside each).

    >>> stated_outcome("...; refuted: 4 of 7 walk"), stated_outcome("...; as predicted: none"), stated_outcome("x")
    ('refuted', 'as predicted', None)
    """
    found = _OUTCOME.findall(own_clauses(statement))
    return found[-1] if found else None
