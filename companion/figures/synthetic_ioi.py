"""The chapter ``book/synthetic_ioi``'s own figures; the house helpers are :mod:`companion.plotting`'s. No
computation imports this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import matplotlib.pyplot as plt

from companion import plotting


def depth_panels(runs_by_depth: dict, truncated_rho: float, label: str):
    """Figs. 19-20: clean test loss (top) and accuracy (bottom) along training, one column per depth L,
    for the full model and with the last MLP's input at ``truncated_rho`` (runs of
    :func:`companion.experiments.noisy_recall.run`)."""
    fig, axes = plt.subplots(
        2, len(runs_by_depth), figsize=(4 * len(runs_by_depth), 5.6), constrained_layout=True, squeeze=False
    )
    for col, (L, run) in enumerate(runs_by_depth.items()):
        for row, (key, name) in enumerate(
            [("loss", "clean test loss"), ("pred_correct", "clean test accuracy")]
        ):
            steps, full = run.series(f"clean_{key}", rho=1.0)
            ys = {"full model": full, label: run.series(f"clean_{key}", rho=truncated_rho)[1]}
            plotting.curves(axes[row, col], steps, ys, "training step", name)
        plotting.panel_label(
            axes[0, col], f"L = {L}" + (" (diverged)" if run.diverged_at is not None else "")
        )
    return fig
