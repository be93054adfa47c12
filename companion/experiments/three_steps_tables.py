"""book/three_steps's tables and the numbers it asserts, read from the results of
:func:`companion.experiments.three_steps.three_steps` (the computation, its runs and its constants are there)."""

from __future__ import annotations

import numpy as np

from companion import report
from companion.experiments.three_steps import (
    MIXES,
    OWN_BLOCK,
    POPULATION_FACTOR,
    STEP_PROBE,
    ThreeStepExperiment,
    qk1_misses,
)


def three_step_table(results: dict[str, dict]) -> str:
    """Markdown: per run and step, the matrix stepped, its step size, the loss, the accuracy and the probes."""
    rows = []
    for run_name, res in results.items():
        for r in res["rows"]:
            rows.append(
                [
                    run_name if r["step"] == 0 else "",
                    r["step"],
                    r["matrix"],
                    report.format_value(r["eta"]),
                    *(report.format_value(r[k], 3) for k in ("loss", "acc", *STEP_PROBE.values())),
                ]
            )
    head = [
        "run",
        "step",
        "matrix stepped",
        "step size",
        "population loss",
        "in-context acc",
        "W_OV^2 probe",
        "W_QK^2 probe",
        "W_QK^1 probe",
    ]
    return report.markdown_table(head, rows)


def three_step_summary(results: dict[str, dict]) -> report.Summary:
    """The claim values of the three-step section (ids ``ih.three_steps_*``)."""
    main, rev = results["slide order, orthonormal"], results["reverse order, orthonormal"]["rows"]
    gauss, text = (
        results["slide order, Gaussian"]["rows"],
        results["slide order, Gaussian, Shakespeare"]["rows"],
    )
    rows = main["rows"]
    after = {r["matrix"]: r for r in rows[1:]}
    sizes = [s["second_size"] for s in main["sweep"]]
    qk1 = [s["third"]["probe_QK1"] for s in main["sweep"]]
    return report.Summary(
        {
            "ov_after_step1": (
                after["W_V^2"]["probe_OV2"],
                "slide order: W_OV^2 probe after step 1 (W_OV^2)",
            ),
            "qk2_after_step2": (
                after["W_QK^2"]["probe_QK2_all"],
                "W_QK^2 probe (N-way) after step 2 (W_QK^2)",
            ),
            "qk1_after_step3": (after["W_QK^1"]["probe_QK1"], "W_QK^1 probe after step 3 (W_QK^1)"),
            "min_after_three": (
                min(rows[-1][p] for p in STEP_PROBE.values()),
                "slide order: the smallest of the three probes after the three steps",
            ),
            "second_size": (after["W_QK^2"]["eta"], "the size of step 2 chosen by the loss after step 3"),
            "qk1_smallest_size": (
                qk1[int(np.argmin(sizes))],
                "W_QK^1 probe after step 3 with the smallest step 2",
            ),
            "qk1_largest_size": (
                qk1[int(np.argmax(sizes))],
                "W_QK^1 probe after step 3 with the largest step 2",
            ),
            "acc_init": (rows[0]["acc"], "slide order: in-context accuracy at zero init"),
            "acc_after_three": (rows[-1]["acc"], "the same after the three steps"),
            "reverse_grad_qk": (
                max(r["grad_norm"] for r in rev[1:3]),
                "reverse order: the larger gradient norm of its steps 1 and 2 (W_QK^1, W_QK^2)",
            ),
            "reverse_min_after_three": (
                min(rev[-1][p] for p in STEP_PROBE.values()),
                "reverse order: the smallest probe after the three steps",
            ),
            "gauss_ov": (gauss[1]["probe_OV2"], "Gaussian embeddings: W_OV^2 probe after step 1"),
            "gauss_qk2": (gauss[2]["probe_QK2_all"], "Gaussian embeddings: W_QK^2 probe after step 2"),
            "gauss_qk1": (gauss[3]["probe_QK1"], "Gaussian embeddings: W_QK^1 probe after step 3"),
            "text_ov": (text[1]["probe_OV2"], "Gaussian, Shakespeare bigram: W_OV^2 probe after step 1"),
            "text_qk2": (text[2]["probe_QK2_all"], "the same: W_QK^2 probe after step 2"),
            "text_qk1": (text[3]["probe_QK1"], "the same: W_QK^1 probe after step 3"),
            **_scale_summary(main),
            "text_ortho_qk2": (
                results["slide order, orthonormal, Shakespeare"]["rows"][2]["probe_QK2_all"],
                "orthonormal embeddings, Shakespeare bigram: W_QK^2 probe after step 2",
            ),
            "iid_qk2": (
                results["slide order, Gaussian, Shakespeare i.i.d."]["rows"][2]["probe_QK2_all"],
                "Gaussian, Shakespeare's frequencies drawn independently: W_QK^2 probe after step 2",
            ),
            "text_ortho_qk1": (
                results["slide order, orthonormal, Shakespeare"]["rows"][3]["probe_QK1"],
                "orthonormal embeddings, Shakespeare bigram: W_QK^1 probe after step 3",
            ),
            "population_factor": (POPULATION_FACTOR, "the population-size control's factor"),
            "text_ortho_qk1_big": (
                results[f"slide order, orthonormal, Shakespeare, {POPULATION_FACTOR}x population"]["rows"][3][
                    "probe_QK1"
                ],
                f"the same with {POPULATION_FACTOR}x the population: W_QK^1 probe after step 3",
            ),
            "text_ortho_step2_size": (
                results["slide order, orthonormal, Shakespeare"]["rows"][2]["eta"],
                "orthonormal embeddings, Shakespeare bigram: step 2's size (line-searched)",
            ),
            "text_ortho_step2_size_big": (
                results[f"slide order, orthonormal, Shakespeare, {POPULATION_FACTOR}x population"]["rows"][2][
                    "eta"
                ],
                f"the same with {POPULATION_FACTOR}x the population",
            ),
            "text_ortho_row1_recalled": (
                float(1 not in dict(qk1_misses(results["slide order, orthonormal, Shakespeare"]))),
                "orthonormal embeddings, Shakespeare bigram: 1 if the W_QK^1 probe recalls row 1 "
                "after step 3",
            ),
            "seconds": (sum(r["seconds"] for r in results.values()), f"time of the {len(results)} runs (s)"),
        }
    )


def _scale_summary(res: dict) -> dict:
    """The rescaling numbers of one run (:func:`compare_scales`, :func:`block_shares`)."""
    scales = [s["scale"] for s in res["scales"]]

    def best(mix: str) -> float:
        return float(np.nanmax([s[mix] for s in res["scales"]]))

    def at_best(mix: str) -> float:
        return scales[int(np.nanargmax([s[mix] for s in res["scales"]]))]

    shares = res["blocks"]
    return {
        "rescaled_best": (
            best("learned"),
            "the three learned memories rescaled as a whole: best in-context accuracy over the scales",
        ),
        "rescaled_best_scale": (at_best("learned"), "the scale at which it is reached"),
        "constructed_best": (
            best("constructed"),
            "the hand-written memories: best accuracy over the same scales",
        ),
        **{
            f"single_{key}_best": (
                best(f"learned {name} only"),
                f"learned {name} alone (the other two hand-written): best accuracy over the scales",
            )
            for key, name in (("ov", "W_V^2"), ("qk2", "W_QK^2"), ("qk1", "W_QK^1"))
        },
        "blocks_best": (
            best("learned, own blocks"),
            "the learned memories projected on their own blocks, then "
            "rescaled: best accuracy over the scales",
        ),
        "blocks_best_scale": (at_best("learned, own blocks"), "the scale at which it is reached"),
        "largest_scale": (max(scales), "the largest scale tried"),
        **{
            f"{key}_own_share": (
                shares[name][" x ".join(OWN_BLOCK[name])],
                f"share of learned {name}'s squared norm in its own block",
            )
            for key, name in (("ov", "W_V^2"), ("qk2", "W_QK^2"), ("qk1", "W_QK^1"))
        },
    }


def scale_table(res: dict) -> str:
    """Markdown: the in-context accuracy of each mix of :data:`MIXES` at each scale, for one run."""
    head = ["scale", *(m.replace("W_V^2", "W_OV^2") for m in MIXES)]
    return report.markdown_table(
        head, [[s["scale"], *(s[m] for m in MIXES)] for s in res["scales"]], digits=3
    )


def block_table(res: dict) -> str:
    """Markdown: the share of each learned memory's squared norm in each block (rows: the memory and its query
    or output subspace; columns: its key or input subspace); the memory's own block in bold."""
    names = {"W_V^2": "W_OV^2", "W_QK^2": "W_QK^2", "W_QK^1": "W_QK^1"}
    rows = []
    for name, shares in res["blocks"].items():
        for left in dict.fromkeys(k.split(" x ")[0] for k in shares):
            cells = []
            for right in ("E", "P", "R"):
                v = report.format_value(shares[f"{left} x {right}"], 2)
                cells.append(f"**{v}**" if (left, right) == OWN_BLOCK[name] else v)
            rows.append([names[name], left, *cells])
    return report.markdown_table(
        ["memory", "query / output side", "E (tokens)", "P (positions)", "R (remapped tokens)"], rows
    )


def qk2_rank_table(results: dict[str, dict], runs: dict[str, ThreeStepExperiment]) -> str:
    """Markdown: for each trigger of the named runs (which share their triggers), its frequency and, per run,
    the rank of its own remapped key in its W_QK^2 probe row after step 2 (1: recalled) and the winning key."""
    names = list(results)
    stats = runs[names[0]].task().stats
    triggers = runs[names[0]].task().triggers
    if any(runs[n].task().triggers != triggers for n in names):
        raise ValueError(f"the runs {names} do not share their triggers")
    second = {n: next(r for r in results[n]["rows"] if r["matrix"] == "W_QK^2") for n in names}
    rows = []
    for i, q in enumerate(triggers):
        cells = []
        for n in names:
            rank, win = second[n]["qk2_rank"][i], second[n]["qk2_winner"][i]
            cells.append("1" if rank == 1 else f"{rank} ({stats.itos[win]!r} wins)")
        rows.append([repr(stats.itos[q]), float(stats.unigram[q]), *cells])
    return report.markdown_table(["trigger", "frequency", *names], rows, digits=2)
