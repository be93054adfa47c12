"""What chapters show: named summaries, Markdown tables, glue, fitted slopes.

A chapter computes its numbers with one named package call that returns a
:class:`Summary`; the reader sees it (its ``_repr_markdown_`` is a table of
names, values and meanings), the prose glues it (:meth:`Summary.glue`) and
the Check cell asserts its entries.

>>> s = Summary({"gap": (0.25, "loss gap in nats")})
>>> s["gap"], s.meaning["gap"]
(0.25, 'loss gap in nats')
>>> print(Summary({"d": (1, "max |a - b|")})._repr_markdown_().splitlines()[-1])
| `d` | 1 | max \\|a - b\\| |
>>> print(markdown_table(["a", "b"], [[1, 0.5]]))
| a | b |
|---|---|
| 1 | 0.5 |
>>> round(loglog_slope([1, 10, 100], [1, 0.1, 0.01]), 6)
-1.0
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

import numpy as np

from companion.criterion import Criterion


def _plain(value):
    """numpy scalars -> Python numbers (glue and JSON need them)."""
    return value.item() if isinstance(value, np.generic) else value


class Summary(dict):
    """Named values of a study, each with what it means.

    Build from ``{name: (value, meaning)}`` (or plain values). Indexing gives
    the value; ``meaning`` the descriptions.
    """

    def __init__(self, items: dict | None = None):
        super().__init__()
        self.meaning: dict[str, str] = {}
        for name, v in (items or {}).items():
            value, meaning = v if isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], str) else (v, "")
            self[name] = _plain(value)
            self.meaning[name] = meaning

    def entries(self) -> dict:
        """``{name: (value, meaning)}``, as the constructor takes them (to merge two summaries)."""
        return {name: (value, self.meaning.get(name, "")) for name, value in self.items()}

    def glue(self) -> None:
        """Glue every number and string entry under its name (for ``{glue:text}`` in the prose)."""
        from myst_nb import glue

        for name, value in self.items():
            if isinstance(value, (int, float, str)) and not isinstance(value, bool):
                glue(name, value, display=False)

    def _repr_markdown_(self) -> str:
        # a '|' in a meaning (a norm, |V|) would end the table cell
        rows = [
            [f"`{k}`", format_value(v), self.meaning.get(k, "").replace("|", "\\|")] for k, v in self.items()
        ]
        return markdown_table(["name", "value", "meaning"], rows)


def format_value(v, digits: int = 4) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if math.isnan(v) or math.isinf(v):
            return str(v)
        return f"{v:.{digits}g}"
    return str(v)


_WORDS = (
    "no",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
)


def glue_markdown(texts: Mapping[str, str]) -> None:
    """Glue each sentence of ``texts`` ({name: Markdown}) as Markdown, for ``{glue:md}`name:myst``` in the prose: a
    sentence with math, a claim id or a cross-reference, which ``{glue:text}`` would print verbatim."""
    from IPython.display import Markdown
    from myst_nb import glue

    for name, text in texts.items():
        glue(name, Markdown(text), display=False)


def count_word(n: int, capital: bool = False) -> str:
    """A count as a sentence says it: a word up to twelve ("no" for 0), digits above.

    >>> count_word(4, capital=True), count_word(0), count_word(15)
    ('Four', 'no', '15')
    """
    word = _WORDS[n] if 0 <= n < len(_WORDS) else str(n)
    return word.capitalize() if capital else word


def count_noun(n: int, noun: str, capital: bool = False) -> str:
    """A count and its noun as a sentence says them, the noun plural (an added "s") unless the count is one.

    >>> count_noun(1, "seed", capital=True), count_noun(2, "seed"), count_noun(0, "run")
    ('One seed', 'two seeds', 'no runs')
    """
    return f"{count_word(n, capital)} {noun}{'' if n == 1 else 's'}"


def and_list(items: Sequence[str]) -> str:
    """Items as a sentence lists them: "a", "a and b", "a, b and c".

    >>> and_list(["a"]), and_list(["a", "b"]), and_list(["a", "b", "c"])
    ('a', 'a and b', 'a, b and c')

    Raises:
        ValueError: no item.
    """
    if not items:
        raise ValueError("and_list: no items (allowed: one or more)")
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def markdown_table(header: Sequence[str], rows: Iterable[Sequence], digits: int = 4) -> str:
    """A Markdown (MyST) table; numbers formatted to ``digits`` significant digits."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        lines.append(
            "| " + " | ".join(format_value(v, digits) if not isinstance(v, str) else v for v in row) + " |"
        )
    return "\n".join(lines)


REQUIRE_HEADER = ["check of our code", "value", "required", "meaning"]


def require(summary: Summary, criteria: dict[str, Criterion]) -> str:
    """Checks of our own code in a chapter (a pipeline's or a probe's, not a claim of a paper; the unit tests run
    the same criteria on tiny models): each entry of ``summary`` named in ``criteria`` against its
    :class:`companion.criterion.Criterion`, judged and printed as a claim row's is. Returns them as a Markdown
    table; raises AssertionError naming every one that fails, so the chapter stops there.

    >>> s = Summary({"gap": (0.0, "difference"), "err": (2e-6, "max error")})
    >>> print(require(s, {"gap": Criterion(expected=0, tol=0), "err": Criterion(below=1e-4)}).splitlines()[-1])
    | `err` | 2e-06 | < 0.0001 | max error |
    >>> require(s, {"err": Criterion(below=1e-7), "gap": Criterion(expected=1, tol=0.5)})
    Traceback (most recent call last):
    AssertionError: checks of our code failed: err = 2e-06 (required < 1e-07); gap = 0 (required 1 ± 0.5)
    >>> require(s, {"loss": Criterion(below=1)})
    Traceback (most recent call last):
    ValueError: require: 'loss' is not an entry of the summary (entries: ['err', 'gap'])
    >>> require(s, {"gap": {"below": 1}})
    Traceback (most recent call last):
    ValueError: require: the bound of 'gap' is {'below': 1}; give a companion.criterion.Criterion

    Raises:
        ValueError: before any check, a name the summary lacks or a bound that is not a Criterion.
    """
    for name, criterion in criteria.items():
        if name not in summary:
            raise ValueError(f"require: {name!r} is not an entry of the summary (entries: {sorted(summary)})")
        if not isinstance(criterion, Criterion):
            raise ValueError(
                f"require: the bound of {name!r} is {criterion!r}; give a companion.criterion.Criterion"
            )
    rows, failed = [], []
    for name, criterion in criteria.items():
        value = summary[name]
        rows.append([f"`{name}`", value, str(criterion), summary.meaning.get(name, "").replace("|", "\\|")])
        if not criterion.holds(value):
            failed.append(f"{name} = {format_value(value)} (required {criterion})")
    if failed:
        raise AssertionError("checks of our code failed: " + "; ".join(failed))
    return markdown_table(REQUIRE_HEADER, rows)


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x (every value must be positive and finite).

    Raises:
        ValueError: a non-positive or non-finite value (its log is undefined).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.size < 2:
        raise ValueError(f"need two or more (x, y) pairs of equal length, got shapes {x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all() and (x > 0).all() and (y > 0).all()):
        raise ValueError(f"log-log slope needs positive finite values, got x={x.tolist()}, y={y.tolist()}")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def mean_se(x, axis: int = 0):
    """Mean along ``axis`` and its standard error (sample standard deviation, ddof 1, over the square root of
    the count): floats for a 1-d ``x``, arrays otherwise.

    >>> mean_se([1.0, 2.0, 3.0])
    (2.0, 0.5773502691896258)
    >>> mean_se([1.0])
    Traceback (most recent call last):
    ...
    ValueError: a standard error needs 2 or more values along axis 0, got 1
    """
    x = np.asarray(x, dtype=float)
    n = x.shape[axis]
    if n < 2:
        raise ValueError(f"a standard error needs 2 or more values along axis {axis}, got {n}")
    mean, se = x.mean(axis), x.std(axis, ddof=1) / np.sqrt(n)
    return (float(mean), float(se)) if np.ndim(mean) == 0 else (mean, se)


def strict_min(values: Iterable[float]) -> float:
    """The minimum, NaN if any value is NaN (Python's ``min`` drops NaN depending on order).

    >>> strict_min([0.3, float("nan")]), strict_min([0.3, float("inf")])
    (nan, 0.3)
    """
    return float(np.min(np.asarray(list(values), dtype=float)))  # numpy propagates NaN


def strict_max(values: Iterable[float]) -> float:
    """The maximum, NaN if any value is NaN.

    >>> strict_max([float("nan"), 0.3]), strict_max([0.3, 0.5])
    (nan, 0.5)
    """
    return float(np.max(np.asarray(list(values), dtype=float)))
