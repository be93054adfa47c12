"""The chapter ``book/khop_stall``'s own figures; the house helpers are :mod:`companion.plotting`'s. No
computation imports this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from companion import plotting
from companion.experiments import khop_curves, khop_members, khop_onset, khop_probes, khop_stall_paths


def hop_probe_panels(summary, study=None):
    """The k-hop probes of :func:`companion.experiments.khop_probes.probe_summary` (live or recorded) of ``study``
    (default :data:`companion.experiments.khop_probes.PROBE`), one column per probed run: top, the linear probe of each
    v_j at position 0 after each block; bottom, the probe of the answer v_k at the entry each hop reads. Each cell
    is annotated with its accuracy; colour scale 0 to 1."""
    study = khop_probes.PROBE if study is None else study
    k, tags = int(summary[f"{study.shared}_k"]), study.tags
    fig, axes = plt.subplots(
        2, len(tags), figsize=(4.6 * len(tags), 6.4), constrained_layout=True, squeeze=False
    )
    for c, (name, tag) in enumerate(tags.items()):
        depth = int(summary[f"{tag}_depth"])
        for r, (kind, xlabel) in enumerate(
            (
                ("probe", "value probed at position 0: v_j after hop j"),
                ("entry", f"entry read by hop j, probed for the answer v_{k}"),
            )
        ):
            M = np.array(
                [[summary[f"{tag}_{kind}_l{l}_v{j}"] for j in range(1, k + 1)] for l in range(depth + 1)]
            )
            ax = axes[r, c]
            plotting.heatmap(
                ax, M, xlabel, "after block (0: embeddings)", "probe accuracy", vmin=0, vmax=1, cmap="viridis"
            )
            ax.set_xticks(range(k), [str(j) for j in range(1, k + 1)])
            ax.set_yticks(range(depth + 1), [str(l) for l in range(depth + 1)])
            for (l, j), v in np.ndenumerate(M):
                ax.text(
                    j,
                    l,
                    f"{v:.2f}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if v < 0.6 else "black",
                )
            plotting.panel_label(ax, name)
    return fig


def reseed_panels(curves: dict, plain: dict, chance: float, upto: int | None = None):
    """Seed 0's two runs with other data on the last stage (:func:`companion.experiments.khop_stall_paths.reseed_members`):
    one panel per run, the k-hop test accuracy along training on each stream of last-stage data (colour) and
    on the run's own (``plain``, the same run without other data, where it is there: black, dashed), up to step
    ``upto`` (default: the last of ``curves``); the step it moves to its last stage (the same on every stream) as
    a grey vertical line. Also for :func:`companion.experiments.khop_stall_paths.delay_members`, one panel per delay.
    ``curves``, ``plain``: :func:`companion.experiments.khop_members.curves` of the runs, the plain ones by their own
    names."""
    by_base: dict[str, list] = {}
    for name in curves["acc"]:
        base, stream = name.rsplit(khop_members.RESEED_SUFFIX, 1)
        by_base.setdefault(base, []).append((int(stream), name))
    fig, axes = plt.subplots(
        1,
        len(by_base),
        figsize=(5.2 * len(by_base), 3.4),
        sharey=True,
        squeeze=False,
        constrained_layout=True,
    )
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (base, members) in zip(axes[0], by_base.items()):
        last = upto or max(int(np.asarray(curves["step"][n])[-1]) for _, n in members)
        for stream, name in members:
            step, acc = np.asarray(curves["step"][name]), np.asarray(curves["acc"][name])
            keep = step <= last
            ax.plot(
                step[keep],
                acc[keep, -1],
                color=colours[(stream - 1) % len(colours)],
                lw=1.4,
                label=f"last-stage data {stream}",
            )
        if base in plain["acc"]:
            step, acc = np.asarray(plain["step"][base]), np.asarray(plain["acc"][base])
            keep = step <= last
            ax.plot(step[keep], acc[keep, -1], "k--", lw=1.2, label="its own data")
        ax.axvline(
            khop_curves.last_stage_at({k: curves[k][members[0][1]] for k in ("step", "acc", "stage")}),
            color="grey",
            lw=0.8,
        )
        ax.axhline(chance, color="grey", ls=":", lw=1)
        ax.set_title(base, fontsize=10)
        ax.set_xlabel("training step")
        ax.set_ylabel(f"test accuracy, {np.asarray(curves['acc'][members[0][1]]).shape[1]} hops")
        ax.legend(fontsize=8, loc="upper left")
    return fig


def onset_lines(summary):
    """Seed 0's runs read along their last stage (:func:`companion.experiments.khop_onset.onset_summary`): the share
    of k-hop answers at v_(k-1) with table k shown to block 1 only (left) and hop k - 2's entry's attention on
    table k in block 1 (right) against the steps on the last stage (symmetric log axis: 0 is the move), one line
    per run; the stall's path (share below one half) shaded on the left."""
    k = int(summary["onset_k"])
    e = khop_stall_paths.marked_entry(k)
    fig, axes = plt.subplots(1, 2, figsize=(10.4, 3.4), constrained_layout=True)
    x = np.asarray(khop_onset.ONSET_AFTER, float)
    for name, tag in khop_onset.ONSET_RUNS.items():
        if f"{tag}_onset" not in summary:
            continue
        for ax, key in zip(axes, ("tk_b1_prev", f"tkattn_l1_e{e}")):
            ax.plot(
                x,
                [summary[f"{tag}_a{a}_{key}"] for a in khop_onset.ONSET_AFTER],
                "o-",
                ms=3,
                lw=1.4,
                label=name,
            )
    axes[0].axhspan(0, 0.5, color="grey", alpha=0.12, lw=0)
    axes[0].set_ylabel(f"answers v_{k - 1}\n(table {k} shown to block 1 only)")
    axes[1].set_ylabel(f"hop {e}'s entry's attention\non table {k}, block 1")
    for ax in axes:
        ax.set_xscale("symlog", linthresh=100)
        ax.set_xlabel("training steps on the last stage")
        ax.set_ylim(0, 1.02)
    axes[0].legend(fontsize=8, loc="lower left")
    return fig
