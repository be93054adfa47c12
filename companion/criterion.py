"""A claim row's criterion (:class:`Criterion`): the one reading of "holds" that the claim rows
(:mod:`companion.claims`) and the checks of our own code in a chapter (:func:`companion.report.require`) share.
A module of its own, on the ground floor, so that what imports it (every module that imports ``report``) does
not carry the claims registry into its cache key.

>>> Criterion(expected=1, tol=0.5).holds(1.4), str(Criterion(above=0, below=1))
(True, '> 0 and < 1')
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Criterion:
    """``|observed - expected| <= tol``, or strict bounds ``observed > above`` and/or ``observed < below``.

    NaN never holds; an infinite value holds only with ``infinite_ok`` (a
    diverged run, where the claim is that the run fails) and then by the
    bounds.
    """

    expected: float | None = None
    tol: float | None = None
    above: float | None = None
    below: float | None = None

    def __post_init__(self):
        if (self.expected is None) != (self.tol is None):
            raise ValueError(f"criterion {self!r}: give expected and tol together")
        if self.expected is not None and (self.above is not None or self.below is not None):
            raise ValueError(f"criterion {self!r}: give expected/tol or above/below, not both")
        if self.expected is None and self.above is None and self.below is None:
            raise ValueError("empty criterion: give expected and tol, or above and/or below")
        if self.tol is not None and not self.tol >= 0:
            raise ValueError(f"tol={self.tol!r} is out of range: allowed [0, inf)")

    def holds(self, observed: float, infinite_ok: bool = False) -> bool:
        x = float(observed)
        if math.isnan(x) or (math.isinf(x) and not infinite_ok):
            return False
        if self.expected is not None:
            return abs(x - self.expected) <= self.tol
        return (self.above is None or x > self.above) and (self.below is None or x < self.below)

    def near(self, observed: float, within: float = 0.1) -> bool:
        """Whether ``observed`` lies within ``within`` of one of the criterion's edges (its bar), on either side,
        relative to the edge's size: |observed - edge| <= within |edge|. An edge at 0 takes the tolerance as
        its size (``expected`` +/- ``tol``); a bound at 0 has no size, so no value is near it. NaN and infinite
        values are never near.

        >>> Criterion(above=0.2).near(0.21), Criterion(above=0.2).near(0.5), Criterion(above=0.0).near(1e-9)
        (True, False, False)
        >>> Criterion(expected=0.98, tol=0.03).near(0.96), Criterion(expected=0.0, tol=0.5).near(0.46)
        (True, True)
        """
        x = float(observed)
        if not math.isfinite(x):
            return False
        edges = [(e, abs(e)) for e in (self.above, self.below) if e is not None]
        if self.expected is not None:
            edges = [(e, abs(e) or self.tol) for e in (self.expected - self.tol, self.expected + self.tol)]
        return any(abs(x - e) <= within * size for e, size in edges)

    def show(self, observed: float, digits: int = 4) -> str:
        """``observed`` with ``digits`` significant digits, or more (up to 12) where fewer would print it as one of
        the criterion's edges that it is not (1.00018 against "> 1" shows as 1.0002, not 1).

        >>> c = Criterion(above=1)
        >>> c.show(1.00018), c.show(1.0), c.show(2.5), c.show(float("nan"))
        ('1.0002', '1', '2.5', 'nan')
        """
        x = float(observed)
        edges = [self.above, self.below]
        if self.expected is not None:
            edges += [self.expected - self.tol, self.expected + self.tol]
        edges = [e for e in edges if e is not None and e != x]
        for d in range(digits, 13):
            text = f"{x:.{d}g}"
            if float(text) not in edges:
                return text
        return repr(x)

    def words(self) -> str:
        """The criterion as a sentence says it.

        >>> Criterion(above=0.5).words(), Criterion(above=0, below=1).words(), Criterion(expected=1, tol=0.1).words()
        ('above 0.5', 'above 0 and below 1', 'within 0.1 of 1')
        """
        if self.expected is not None:
            return f"within {self.tol:g} of {self.expected:g}"
        return " and ".join(
            f"{word} {bound:g}"
            for word, bound in (("above", self.above), ("below", self.below))
            if bound is not None
        )

    def __str__(self) -> str:
        if self.expected is not None:
            return f"{self.expected:g} ± {self.tol:g}"
        parts = ([f"> {self.above:g}"] if self.above is not None else []) + (
            [f"< {self.below:g}"] if self.below is not None else []
        )
        return " and ".join(parts)
