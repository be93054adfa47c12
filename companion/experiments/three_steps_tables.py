"""book/three_steps's tables and the numbers it asserts, read from the results of
:func:`companion.experiments.three_steps.three_steps` (the computation, its runs and its constants are there)."""

from __future__ import annotations

import numpy as np

from companion import report
from companion.experiments.three_steps import (
    MIXES,
    OWN_BLOCK,
    SLIDE_RUNS,
    STEP_PROBE,
    check_runs,
)


def three_step_summary(results: dict[str, dict]) -> report.Summary:
    """The values ``book/three_steps`` asserts, read from its runs (:data:`~companion.experiments.three_steps.
    SLIDE_RUNS`, keyed by name)."""
    check_runs(results, SLIDE_RUNS, "three_step_summary")
    main, rev = results["slide order, orthonormal"], results["reverse order, orthonormal"]["rows"]
    gauss = results["slide order, Gaussian"]["rows"]
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
            **_scale_summary(main),
            "seconds": (
                sum(results[n]["seconds"] for n in SLIDE_RUNS),
                f"time of the {len(SLIDE_RUNS)} runs (s)",
            ),
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
