"""The three-step chapters' figures (``book/three_steps``; ``book/three_steps_data`` draws its runs' steps with
:func:`three_step_panels` too), beside the study they draw (:func:`companion.experiments.three_steps.three_steps`)."""

from __future__ import annotations

import matplotlib.pyplot as plt

from companion.experiments import three_steps


def three_step_scales(res: dict, title: str = ""):
    """The talk, the three gradient steps rescaled: in-context accuracy against the scale of the memories'
    stored pairs, one line per mix of learned and hand-written memories
    (the ``scales`` of :func:`companion.experiments.three_steps.three_steps`)."""
    fig, ax = plt.subplots(figsize=(5.6, 3.4), constrained_layout=True)
    scales = [s["scale"] for s in res["scales"]]
    styles = {
        "learned": dict(color="C3", lw=2),
        "constructed": dict(color="black", lw=2),
        "learned, own blocks": dict(color="C3", lw=2, ls="--"),
    }
    for i, mix in enumerate(three_steps.MIXES):
        label = (
            {"constructed": "hand-written"}.get(mix, mix)
            .replace("W_V^2", "$W^2_{OV}$")
            .replace("W_QK^2", "$W^2_{QK}$")
            .replace("W_QK^1", "$W^1_{QK}$")
        )
        ax.plot(
            scales,
            [s[mix] for s in res["scales"]],
            marker="o",
            ms=3,
            label=label,
            **styles.get(mix, dict(color=f"C{i - 2}", lw=1)),
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("scale of the stored pairs' scores")
    ax.set_ylabel("in-context accuracy")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig


def three_step_panels(results: dict):
    """The talk, the three gradient steps: one panel per run, the three recall probes and the in-context
    accuracy after each step (the x labels name the matrix stepped); a last panel, for the first run with a
    sweep, the same after step 3 against the size of step 2. ``results``: the
    :func:`companion.experiments.three_steps.three_steps` outputs by run name."""
    labels = {
        "probe_OV2": "$W^2_{OV}$ probe",
        "probe_QK2_all": "$W^2_{QK}$ probe",
        "probe_QK1": "$W^1_{QK}$ probe",
        "acc": "in-context accuracy",
    }
    assert set(three_steps.STEP_PROBE.values()) <= set(labels)
    colours = dict(zip(labels, ["C0", "C1", "C2", "black"]))
    names = {"W_V^2": "$W^2_{OV}$", "W_QK^2": "$W^2_{QK}$", "W_QK^1": "$W^1_{QK}$", "init": "init"}
    swept = [(n, r) for n, r in results.items() if r["sweep"]]
    n = len(results) + bool(swept)
    ncol = min(3, n)
    nrow = -(-n // ncol)
    fig, axes = plt.subplots(
        nrow, ncol, figsize=(3.6 * ncol, 2.8 * nrow), squeeze=False, constrained_layout=True
    )
    axes = axes.ravel()
    for ax, (name, res) in zip(axes, results.items()):
        rows = res["rows"]
        for key in labels:
            ax.plot(
                [r["step"] for r in rows],
                [r[key] for r in rows],
                marker="o",
                ms=3,
                color=colours[key],
                ls="--" if key == "acc" else "-",
                label=labels[key],
            )
        ax.set_xticks([r["step"] for r in rows])
        ax.set_xticklabels([names.get(r["matrix"], r["matrix"]) for r in rows])
        ax.set_xlabel("after the step on")
        ax.set_ylabel("probe / accuracy")
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(name, fontsize=9)
    axes[0].legend(fontsize=7, loc="center left")
    if swept:
        name, res = swept[0]
        bx = axes[len(results)]
        sizes = [s["second_size"] for s in res["sweep"]]
        for key in labels:
            bx.plot(
                sizes,
                [s["third"][key] for s in res["sweep"]],
                marker="o",
                ms=3,
                color=colours[key],
                ls="--" if key == "acc" else "-",
                label=labels[key],
            )
        bx.set_xscale("log", base=2)
        bx.set_xlabel("size of step 2 ($\\|\\Delta W^2_{QK}\\|_F$)")
        bx.set_ylabel("after step 3")
        bx.set_ylim(-0.03, 1.03)
        bx.set_title(f"{name}: step 2's size", fontsize=9)
    for ax in axes[n:]:
        ax.axis("off")
    return fig
