"""What the language-model chapters show and assert: banners, settings, pipeline checks, paper comparisons.

Pipeline checks are checks that a broken pipeline would fail (weights not
restored, a wrong rank, padding that changes a prediction, two checkpoints
with the same weights, an answer extractor that misreads references, a stop
rule that lets the next question through), run on whatever model a chapter
got. Paper comparisons are computed only from real weights; with a stand-in
the chapter records them as not checked.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from companion.criterion import Criterion
from companion.llm import hub, laser, measure, studies
from companion.report import Summary, markdown_table

# Fig. 5 / Fig. 14: the Pythia revisions the chapter measures (a subset of the 154 of hub.PYTHIA_STEPS)
PYTHIA_REVISIONS = [
    f"step{s}"
    for s in (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 2000, 4000, 8000, 14000, 32000, 64000, 143000)
]
PAPER_STEP = "step14000"  # Sec. 4.1 and Fig. 5 report their ratios at 14K steps
TOP_RANK = 10  # Fig. 14: "the" is "one of the top predictions" when its average rank is at most this


def banner(model: str, real: bool, why: str, spec, stands_for: str, extra: str = "") -> str:
    """The MyST banner of an LLM chapter: real weights named, or a warning that names the stand-in and why."""
    if real and Path(model).is_dir():  # a folder written by save_pretrained: named without the machine's path
        return (
            f"Real weights from the local folder **{Path(model).name}** (`save_pretrained`'s layout). The claims "
            "about the paper's models are checked only where the chapter loads them by their Hub names."
        )
    if real:
        return f"Real weights: **{model}** from the Hugging Face Hub (or its cache)."
    arch = "GPT-NeoX (Pythia-architecture)" if spec.family == "gpt_neox" else "GPT-2-architecture"
    return (
        f":::{{warning}}\n**Stand-in, not {stands_for}.** The weights of `{model}` could not be loaded here "
        f"({why}). Every number below comes from a {spec.n_layer}-layer, d = {spec.d} {arch} model with the "
        f"real GPT-2 tokenizer, trained for {spec.steps} steps on WikiText-2 (validation split), and says "
        f"nothing about {stands_for}. {extra}The paper's numbers are shown as references; the checks test the "
        "pipeline only. With Hub access (or a cached copy) the same cells compute the real numbers.\n:::"
    )


def why_not(real: bool, model: str, about, unavailable: str) -> str:
    """Why a claim about the pretrained model(s) ``about`` is not checked in a run of ``model`` ("" if it is).

    >>> why_not(False, "gpt2", "gpt2", "GPT-2 weights unavailable (stand-in used)")
    'GPT-2 weights unavailable (stand-in used)'
    >>> why_not(True, "EleutherAI/pythia-410m", "EleutherAI/pythia-1b", "")
    'the claim is about EleutherAI/pythia-1b (set the chapter to that model to check it)'
    >>> why_not(True, "gpt2", ("openai-community/gpt2", "gpt2"), "")
    ''
    """
    names = (about,) if isinstance(about, str) else tuple(about)
    if not real:
        return unavailable
    return (
        "" if model in names else f"the claim is about {names[0]} (set the chapter to that model to check it)"
    )


def laser_setting(task: str, model: str, real: bool, n_layers: int, reference: str, reference_layers: int):
    """Appendix C.2's (layer, matrix, rho) for ``(task, model)`` where it gives one; otherwise the
    ``reference`` model's setting moved to this depth (same relative layer, matrix and rho)."""
    if real and (task, model) in studies.PAPER_LASER:
        return studies.PAPER_LASER[task, model]
    return studies.scaled_spec(studies.PAPER_LASER[task, reference], reference_layers, n_layers)


def batch_gap(loaded: hub.Loaded, texts: list[str]) -> float:
    """Max |p_batched - p_one_by_one| over the next-token distributions of ``texts`` (right padding)."""
    batched = measure.next_token_logprobs(loaded.model, loaded.tokenizer, texts).exp()
    single = np.concatenate(
        [measure.next_token_logprobs(loaded.model, loaded.tokenizer, [t]).exp().numpy() for t in texts]
    )
    return float(np.abs(batched.numpy() - single).max())


def truncated_rank_gap(
    loaded: hub.Loaded, layer: int, matrix: str = "mlp_in", rho: float = 0.1
) -> tuple[int, str]:
    """(numerical rank of the truncated matrix - floor(rho min(shape)), what was truncated)."""
    import torch

    probe = laser.resolve(loaded.model, layer, matrix)
    with laser.laser(loaded.model, [(layer, matrix, rho)]) as (t,):
        got = int(torch.linalg.matrix_rank(t.param.detach().float(), rtol=1e-4))
    return got - int(np.floor(rho * min(probe.shape))), f"{probe.describe()}, rho = {rho}: rank {got}"


FIG17_RHOS, FIG17_LAYERS, FIG17_TOKENS = (0.1, 0.8), 3, (1, 2)  # rho range, first swept layers, them and the


def laser_drops(sweep: np.ndarray, rhos) -> np.ndarray:
    """Fig. 17: the drop of p(them) and p(the) from the full model at every grid rho in [0.1, 0.8], for the first
    three swept layers: ``sweep`` (layers, rhos, tokens [Mary, them, the, John]; rho = 1 last) gives
    (3, rhos in range, 2).

    >>> sweep = np.zeros((4, 3, 4)); sweep[:, -1] = 0.5; sweep[0, 1, 2] = 0.6  # one rise of p(the), at rho 0.5
    >>> laser_drops(sweep, [0.05, 0.5, 1.0])[:, :, 1].ravel().round(2).tolist()
    [-0.1, 0.5, 0.5]
    """
    rhos = np.asarray(rhos, dtype=float)
    if sweep.ndim != 3 or sweep.shape[1] != len(rhos) or rhos[-1] != 1.0:
        raise ValueError(
            f"sweep of shape {sweep.shape} with rhos {rhos.tolist()}: needs (layers, rhos, tokens), rho 1 last"
        )
    lo, hi = FIG17_RHOS
    mid = (rhos >= lo) & (rhos <= hi)
    full = sweep[:FIG17_LAYERS, -1:, FIG17_TOKENS]
    return full - sweep[:FIG17_LAYERS][:, mid][:, :, FIG17_TOKENS]


# Checks of our pipeline on whatever model ran (asserted in the chapters with companion.report.require, and on
# tiny models in tests/test_llm.py): not claims of the paper, so not claim rows.
GPT2_PIPELINE = {
    "restored": Criterion(expected=1.0, tol=0),
    "rank_gap": Criterion(expected=0.0, tol=0),
    "batch_gap": Criterion(below=1e-4),
}
PYTHIA_PIPELINE = {
    "restored": Criterion(expected=1.0, tol=0),
    "batch_gap": Criterion(below=1e-4),
    "distinct_checkpoints": Criterion(expected=1.0, tol=0),
}
GSM8K_PIPELINE = {
    "extraction": Criterion(expected=1.0, tol=0),
    "batch_mismatches": Criterion(expected=0.0, tol=0),
}


def gpt2_summary(loaded: hub.Loaded, result: dict, texts: list[str]) -> Summary:
    """Sec. 4.1 and Fig. 17 (``result`` of :func:`companion.llm.studies.study_gpt2_ioi`)."""
    sweep, rhos = result["sweep"], np.asarray(result["rhos"])
    full = sweep[0, -1]
    drops = laser_drops(sweep, rhos)
    top = [t for t, _ in result["top"]]
    rank_gap, what = truncated_rank_gap(loaded, result["layers"][0])
    return Summary(
        {
            "restored": (float(result["restored"]), "1 if every weight equals its original after the sweep"),
            "rank_gap": (rank_gap, what),
            "batch_gap": (batch_gap(loaded, texts), "max |p batched - p one by one| over the prompts"),
            "top4_in_order": (
                sum(a == b for a, b in zip(top, studies.PAPER_GPT2_TOP4)),
                f"positions of the top 4 equal to {studies.PAPER_GPT2_TOP4} (in order)",
            ),
            "laser_drop_min": (
                float(drops.min()),
                "smallest drop of p(the) and p(them) from the full model at any grid rho in [0.1, 0.8], first "
                "three swept layers",
            ),
            "laser_drop_mean_min": (
                float(drops.mean(1).min()),
                "the same with the drops averaged over rho first (per layer and token)",
            ),
            "p_the_full": (float(full[2]), 'p(" the") of the full model'),
            "p_mary_full": (float(full[0]), 'p(" Mary") of the full model'),
        }
    )


def first_top_step(along: dict) -> float:
    """Fig. 14: first checkpoint step at which the average rank of " the" is at most TOP_RANK after both the
    prepositions and the sentences of App. I.1 (inf if never)."""
    for rev in along["revisions"]:
        r = along["rows"][rev]
        if max(r["the_rank_prepositions"], r["the_rank_sentences"]) <= TOP_RANK:
            return float(int(rev.removeprefix("step")))
    return math.inf


def log_ratio_error(ours: float, paper: float) -> float:
    """|log(ours / paper)|: the relative error of a ratio on a log scale."""
    return abs(math.log(max(ours, 1e-30) / paper))


def table1_error(top_full, top_laser) -> float:
    """Table 1: max |ours - paper| over the five tokens' probabilities before and after LASER.

    ``top_full``/``top_laser`` are lists of (token, probability); a token of the paper missing from
    our top list counts with probability 0.
    """
    err = 0.0
    for ours, key in ((dict(top_full), "full"), (dict(top_laser), "laser")):
        for tok, p in zip(studies.PAPER_TABLE1["tokens"], studies.PAPER_TABLE1[key]):
            err = max(err, abs(ours.get(tok, 0.0) - p))
    return err


def pythia_summary(along: dict, last: dict, restored: bool, final: hub.Loaded) -> Summary:
    """Figs. 5, 14-16 and Table 1 (``along`` of :func:`~companion.llm.studies.study_checkpoints`, ``last`` of
    :func:`~companion.llm.studies.study_final` on the final checkpoint ``final``; Table 1 at 14K steps is in
    ``along`` when that step was run)."""
    from companion.llm import prompts

    revs = along["revisions"]
    out = {
        "restored": (float(restored), "1 if every weight equals its original after the LASER measurements"),
        "batch_gap": (
            batch_gap(final, [f.prompt for f in prompts.factual_table5(final.tokenizer)]),
            "max |p batched - p one by one| on the 20 Table 5 prompts, final checkpoint",
        ),
        "distinct_checkpoints": (
            1.0 - len(along["duplicates"]) / max(1, len(revs) - 1),
            "fraction of consecutive checkpoints whose weights differ",
        ),
        "first_top": (
            first_top_step(along),
            f'first step with average rank of " the" <= {TOP_RANK} (both sets)',
        ),
        "ioi_the_drop": (
            float(np.mean(last["ioi"]["laser_the"]) / np.mean(last["ioi"]["full_the"])),
            'final checkpoint, IOI: mean p(" the") with LASER over without',
        ),
        "ioi_io_kept": (
            float(np.mean(last["ioi"]["laser_target"]) / np.mean(last["ioi"]["full_target"])),
            "final checkpoint, IOI: mean p([IO]) with LASER over without",
        ),
        "factual_boost": (
            last["factual"]["laser_ratio"] / last["factual"]["full_ratio"],
            'final checkpoint, Table 5: ratio p(target)/p(" the") with LASER over without',
        ),
        "greedy_full": (
            last["greedy_full"],
            'final checkpoint: greedy continuation of "Madrid is located in"',
        ),
        "greedy_laser": (last["greedy_laser"], "the same with LASER"),
        "greedy_full_match": (
            float(last["greedy_full"].startswith(studies.PAPER_GREEDY["full"])),
            f"1 if the full model's begins {studies.PAPER_GREEDY['full']!r} (Sec. 4.1)",
        ),
        "greedy_laser_match": (
            float(last["greedy_laser"].startswith(studies.PAPER_GREEDY["laser"])),
            f"1 if LASER's begins {studies.PAPER_GREEDY['laser']!r} (Sec. 4.1)",
        ),
        "country_of_top": (last["country_of_top"], 'top next token of "Madrid is located in the country of"'),
        "country_of_match": (
            float(last["country_of_top"] == studies.PAPER_GREEDY["country_of"]),
            f"1 if it is {studies.PAPER_GREEDY['country_of']!r} (Sec. 4.1)",
        ),
        "table1_final_err": (
            table1_error(last["table1_full"], last["table1_laser"]),
            "Table 1 at the final checkpoint: max |ours - paper| over the 10 probabilities",
        ),
    }
    if PAPER_STEP in along["rows"]:
        at = along["rows"][PAPER_STEP]
        paper = studies.PAPER_RATIOS_14K
        out.update(
            {
                "ioi_ratios_14k": (
                    f"{at['ioi']['full_ratio']:.3g}x -> {at['ioi']['laser_ratio']:.3g}x",
                    f"[IO]/the at {PAPER_STEP} (paper {paper['ioi'][0]}x -> {paper['ioi'][1]}x)",
                ),
                "ioi_ratio_err": (
                    max(
                        log_ratio_error(at["ioi"]["full_ratio"], paper["ioi"][0]),
                        log_ratio_error(at["ioi"]["laser_ratio"], paper["ioi"][1]),
                    ),
                    "max |log(ours / paper)| of the two IOI ratios",
                ),
                "factual_ratios_14k": (
                    f"{at['factual']['full_ratio']:.3g}x -> {at['factual']['laser_ratio']:.3g}x",
                    f"Spain/the at {PAPER_STEP} (paper {paper['factual'][0]}x -> {paper['factual'][1]}x)",
                ),
                "factual_ratio_err": (
                    max(
                        log_ratio_error(at["factual"]["full_ratio"], paper["factual"][0]),
                        log_ratio_error(at["factual"]["laser_ratio"], paper["factual"][1]),
                    ),
                    "max |log(ours / paper)| of the two factual ratios",
                ),
            }
        )
        if "table1_full" in at:
            out["table1_14k_err"] = (
                table1_error(at["table1_full"], at["table1_laser"]),
                f"Table 1 at {PAPER_STEP}: max |ours - paper| over the 10 probabilities",
            )
    return Summary(out)


def table2_markdown() -> str:
    """Table 2 of the main paper as Markdown (accuracy, %)."""
    rows = [[name, *(f"{v:.1f}" for v in row)] for name, row in studies.PAPER_TABLE2.items()]
    return markdown_table(["model", "1-shot", "2-shot", "4-shot", "8-shot (standard)"], rows)


TABLE2_NAMES = {
    "microsoft/Phi-3-mini-4k-instruct": "Phi-3",
    "meta-llama/Llama-3.1-8B": "Llama-3.1-8B",
    "meta-llama/Llama-3.1-8B-Instruct": "Llama-3.1-8B-Instruct",
}


def generation_mismatches(loaded: hub.Loaded, texts: list[str], max_new_tokens: int) -> int:
    """How many greedy generations differ between one left-padded batch and one prompt at a time."""
    from companion.llm import gsm8k

    batched = gsm8k.generate(loaded.model, loaded.tokenizer, texts, max_new_tokens, batch_size=len(texts))
    single = [
        gsm8k.generate(loaded.model, loaded.tokenizer, [t], max_new_tokens, batch_size=1)[0] for t in texts
    ]
    return sum(a != b for a, b in zip(batched, single))


def gsm8k_summary(
    result: dict,
    test: list,
    model: str,
    loaded: hub.Loaded,
    train: list,
    max_new_tokens: int,
    n_batch: int = 4,
) -> Summary:
    """Table 2 (``result`` of :func:`~companion.llm.studies.study_gsm8k`, ``test``/``train`` the GSM8K
    problems); the padding check generates the first ``n_batch`` 1-shot prompts both ways."""
    from companion.llm import gsm8k

    extracted = [gsm8k.extract_answer(gsm8k.solution_text(p.answer)) == p.target for p in test]
    prefix = gsm8k.few_shot_prefix(train, 1, 0)
    texts = [gsm8k.prompt(prefix, p) for p in test[:n_batch]]
    out = {
        "extraction": (
            float(np.mean(extracted)),
            "fraction of reference solutions whose answer is extracted",
        ),
        "batch_mismatches": (
            generation_mismatches(loaded, texts, max_new_tokens),
            f"greedy generations (first {n_batch} problems, 1-shot) that differ between a "
            "left-padded batch and one at a time",
        ),
        "n_problems": (result["n_problems"], "problems scored"),
    }
    return Summary({**out, **table2_comparison(result, model)})


def table2_comparison(result: dict, model: str) -> dict:
    """{name: (value, meaning)} comparing a run with its row of Table 2; empty unless ``model`` is one of
    Table 2's and the run has 1, 2, 4, 8 shots with LASER."""
    name = TABLE2_NAMES.get(model)
    if not (name and list(result["shots"]) == [1, 2, 4, 8] and result["laser"]):
        return {}
    ours = 100 * np.array(result["full"] + result["laser"])
    paper = np.array(studies.PAPER_TABLE2[name] + studies.PAPER_TABLE2[f"{name} + LASER"])
    gain = 100 * (np.array(result["laser"]) - np.array(result["full"]))
    return {
        "table2_err": (
            float(np.abs(ours - paper).max()),
            f"max |ours - paper| over the 8 {name} entries (points)",
        ),
        "few_shot_gain": (float(gain[:2].min()), "smallest LASER gain at 1 and 2 shots (points)"),
        "eight_shot_gain": (float(gain[3]), "LASER gain at 8 shots (points; the paper: negative)"),
    }
