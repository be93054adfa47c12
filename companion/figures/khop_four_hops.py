"""The chapter ``book/khop_four_hops``'s own figures (the k = 4 studies of
:mod:`companion.experiments.khop_four_hops`); the family's shared figures are
:mod:`companion.figures.khop`'s. No computation imports this module, so editing a figure re-keys no cached
run."""

from __future__ import annotations

from companion.experiments import khop_four_hops
from companion.figures import khop as khop_figures


def interval_lines(runs: dict, chance: float):
    """The talk, K2 at two evaluation intervals: :func:`companion.figures.khop.seed_lines` with one panel per
    interval. ``runs``: the :func:`companion.experiments.khop_four_hops.interval_pool`."""
    by = khop_four_hops.by_interval(runs)
    return khop_figures.seed_lines(
        {f"advancing every {every} steps": by[every] for every in khop_four_hops.INTERVALS}, chance
    )
