"""The k-hop chapter's own figures (``book/khop``, whose study is :mod:`companion.experiments.khop_talk`); the
family's shared figures are :mod:`companion.figures.khop`'s. No computation imports this module, so editing a
figure re-keys no cached run."""

from __future__ import annotations

from companion.experiments import khop_talk
from companion.figures import khop as khop_figures


def interval_lines(runs: dict, chance: float):
    """Seed 002, K2 at two evaluation intervals: :func:`companion.figures.khop.seed_lines` with one panel per interval. ``runs``: the
    :func:`companion.experiments.khop_talk.interval_pool`."""
    by = khop_talk.by_interval(runs)
    return khop_figures.seed_lines(
        {f"advancing every {every} steps": by[every] for every in khop_talk.INTERVALS}, chance
    )
