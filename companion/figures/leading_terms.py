"""The chapter ``book/leading_terms``'s own figures; the house helpers are :mod:`companion.plotting`'s. No
computation imports this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import matplotlib.pyplot as plt


def deviation(table: dict, covered: int, title_keys: dict | None = None):
    """The leading-terms paper, Theorem 4.1: relative distance of each weight to its leading term over the GD
    steps (solid), the theorem's bound over the leading term's size (dotted), the steps the theorem covers
    shaded. ``table`` is :func:`companion.theory.leading_theorem.theorem_table`'s output."""
    keys = title_keys or {k: k for k in table["rel"]}
    fig, ax = plt.subplots(figsize=(6.4, 3.8), constrained_layout=True)
    s = table["s"]
    for j, (key, label) in enumerate(keys.items()):
        ax.plot(s, table["rel"][key], "-", color=f"C{j}", label=f"{label}: distance / leading term")
        ax.plot(s, table["bound_rel"][key], ":", color=f"C{j}", label=f"{label}: bound / leading term")
    ax.axvspan(0.5, covered + 0.5, color="gray", alpha=0.15, lw=0, label="steps the theorem covers")
    ax.set_yscale("log")
    ax.set_xlabel("gradient step s")
    ax.set_ylabel("relative to the leading term's norm")
    ax.legend(fontsize=7, ncol=2)
    return fig
