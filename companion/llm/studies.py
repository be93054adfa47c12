"""The LLM chapters' pipelines, the paper's reported numbers, and results files.

Each function takes a :class:`~companion.llm.hub.Loaded` model (a real one
from the Hub, or a stand-in from :mod:`~companion.llm.standin`) and returns
plain numbers, so a chapter runs the same lines whatever model it got.
"""

from __future__ import annotations

import datetime
import json
import platform
from pathlib import Path

import numpy as np

from companion import config
from companion.config import check_int
from companion.io import atomic_write_text
from companion.llm import hub, laser, measure, prompts
from companion.llm.prompts import THE

PAPER_IOI_PROMPT = "When Mary and John went to a store, John gave a drink to"
# Sec. 4.1 / Fig. 17 (GPT-2 Small): the top-4 tokens and the candidates tracked over rho
PAPER_GPT2_TOP4 = [" Mary", " them", " the", " John"]
# Appendix C.2: (task, model) -> (layer, matrix, rho)
PAPER_LASER = {
    ("ioi", "EleutherAI/pythia-410m"): (22, "mlp_in", 0.02),
    ("ioi", "EleutherAI/pythia-1b"): (11, "mlp_in", 0.008),
    ("factual", "EleutherAI/pythia-1b"): (16, "mlp_in", 0.0125),
    ("factual", "EleutherAI/pythia-1.4b"): (24, "mlp_in", 0.025),
    ("factual", "EleutherAI/pythia-2.8b"): (32, "mlp_in", 0.04),
    ("gsm8k", "microsoft/Phi-3-mini-4k-instruct"): (28, "mlp_out", 0.02),
    ("gsm8k", "meta-llama/Llama-3.1-8B"): (27, "mlp_out", 0.02),
    ("gsm8k", "meta-llama/Llama-3.1-8B-Instruct"): (27, "mlp_out", 0.02),
}
# Table 1 (Pythia-1B, "Madrid is located in"), top-5 probabilities before and after LASER
PAPER_TABLE1 = {
    "tokens": [" the", " Spain", " a", " southern", " northern"],
    "full": [0.499, 0.079, 0.069, 0.023, 0.021],
    "laser": [0.027, 0.300, 0.002, 0.044, 0.046],
}
# Sec. 4.1 (Pythia-1B, "Madrid is located in"): the greedy generations, full model and LASER, and the prompt
# that needs no LASER ("... the country of" predicts "Spain")
PAPER_GREEDY = {"full": " the north of Spain", "laser": " Spain", "country_of": " Spain"}
COUNTRY_OF = " the country of"
# Sec. 4.1 (Pythia-1B at step 14000): probability ratios target / "the", full -> LASER
PAPER_RATIOS_14K = {"ioi": (2.3, 12.3), "factual": (0.16, 11.3)}
# Table 2: GSM8K accuracy (%) for k = 1, 2, 4, 8 shots
PAPER_TABLE2 = {
    "Phi-3": [56.0, 72.2, 78.2, 82.7],
    "Phi-3 + LASER": [66.1, 74.4, 77.0, 82.3],
    "Llama-3.1-8B": [44.7, 50.0, 57.6, 56.0],
    "Llama-3.1-8B + LASER": [46.1, 50.7, 55.9, 53.8],
    "Llama-3.1-8B-Instruct": [72.6, 74.7, 78.5, 79.7],
    "Llama-3.1-8B-Instruct + LASER": [73.6, 75.6, 77.7, 77.0],
}


def top_tokens(loaded: hub.Loaded, prompt: str, k: int = 5, specs=()) -> list[tuple[str, float]]:
    """Top-k next tokens of one prompt, optionally under LASER ``specs`` [(layer, matrix, rho)]."""
    with laser.laser(loaded.model, specs):
        lp = measure.next_token_logprobs(loaded.model, loaded.tokenizer, [prompt])
    return measure.topk(lp[0], loaded.tokenizer, k)


def greedy(loaded: hub.Loaded, prompt: str, n_tokens: int = 5, specs=()) -> str:
    """The greedy continuation (``n_tokens`` new tokens, decoded) of one prompt, optionally under LASER ``specs``
    [(layer, matrix, rho)]; the weights are restored afterwards."""
    check_int("n_tokens", n_tokens, low=1)
    with laser.laser(loaded.model, specs):
        return measure.generate(loaded.model, loaded.tokenizer, [prompt], n_tokens, batch_size=1)[0]


def candidate_ids(tokenizer, candidates: list[str]) -> list[int]:
    return [prompts.single_token_id(tokenizer, c, what="candidate") for c in candidates]


def rho_sweep(
    loaded: hub.Loaded,
    prompt_texts: list[str],
    candidates: list[str],
    layers: list[int],
    rhos: list[float],
    matrix: str = "mlp_in",
) -> np.ndarray:
    """Mean probability of each candidate over the prompts: (len(layers), len(rhos), len(candidates)).

    One SVD per layer; the prompts are tokenised once (Fig. 17).
    """
    ids = candidate_ids(loaded.tokenizer, candidates)
    enc = measure.encode(loaded.tokenizer, prompt_texts)
    out = np.zeros((len(layers), len(rhos), len(ids)))
    for layer in layers:
        laser.resolve(loaded.model, layer, matrix)  # validate before the work
    for i, layer in enumerate(layers):
        for j, _ in enumerate(laser.sweep(loaded.model, layer, matrix, rhos)):
            lp = measure.next_token_logprobs(loaded.model, encoded=enc)
            out[i, j] = measure.probs_of(lp, ids).mean(0)
    return out


def target_vs_the(
    loaded: hub.Loaded,
    prompt_texts: list[str] | None,
    target_ids: list[int],
    specs=(),
    encoded=None,
    others: dict[str, list[int]] | None = None,
) -> dict:
    """Per-prompt probabilities of each prompt's target and of " the", with and without LASER.

    ``others`` adds per-prompt ids measured in the same passes (e.g. ``{"s": ...}`` gives
    ``full_s`` and ``laser_s``).
    """
    the = prompts.single_token_id(loaded.tokenizer, THE)
    enc = encoded or measure.encode(loaded.tokenizer, prompt_texts)
    out = {}
    for name, s in (("full", ()), ("laser", specs)):
        with laser.laser(loaded.model, s):
            lp = measure.next_token_logprobs(loaded.model, encoded=enc)
        out[f"{name}_target"] = measure.per_prompt_prob(lp, target_ids)
        out[f"{name}_the"] = measure.per_prompt_prob(lp, [the] * len(target_ids))
        out[f"{name}_ratio"] = float(out[f"{name}_target"].mean() / out[f"{name}_the"].mean())
        for key, ids in (others or {}).items():
            out[f"{name}_{key}"] = measure.per_prompt_prob(lp, ids)
    return out


def ioi_distribution(loaded: hub.Loaded, items: list[prompts.IOIPrompt], specs=()) -> dict:
    """Fig. 5 (left) / Fig. 15: probabilities of [IO], [S] and " the" on IOI prompts, full and with LASER."""
    tok = loaded.tokenizer
    io = [prompts.single_token_id(tok, p.io, "IO name") for p in items]
    s = [prompts.single_token_id(tok, p.s, "S name") for p in items]
    return target_vs_the(loaded, [p.prompt for p in items], io, specs, others={"s": s})


def the_ranks(loaded: hub.Loaded, texts: list[str]) -> np.ndarray:
    """Fig. 14: rank of " the" (1 = top) as the next token of each text."""
    the = prompts.single_token_id(loaded.tokenizer, THE)
    lp = measure.next_token_logprobs(loaded.model, loaded.tokenizer, texts)
    return measure.rank_of(lp, the)


def versions() -> dict:
    import torch

    out = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "companion": config.package_hash(),
    }
    try:
        import transformers

        out["transformers"] = transformers.__version__
    except ImportError:
        pass
    return out


def save_results(path: Path, kind: str, loaded: hub.Loaded | None, settings: dict, metrics: dict) -> Path:
    """Write a results file (JSON: kind, model, revision, settings, metrics, versions, timestamp) atomically."""

    def plain(x):
        if isinstance(x, np.ndarray):
            return x.tolist()
        if isinstance(x, (np.floating, np.integer)):
            return x.item()
        if isinstance(x, dict):
            return {str(k): plain(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [plain(v) for v in x]
        return x

    blob = {
        "kind": kind,
        "model": loaded.name if loaded else None,
        "revision": loaded.revision if loaded else None,
        "dtype": loaded.dtype if loaded else None,
        "device": loaded.device if loaded else None,
        "settings": plain(settings),
        "metrics": plain(metrics),
        "versions": versions(),
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    atomic_write_text(Path(path), json.dumps(blob, indent=1))
    return Path(path)


def load_results(path: Path) -> dict:
    return json.loads(Path(path).read_text())


# --- whole studies: one call per chapter section (also run by ``python -m companion llm``) ---
RHOS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def study_gpt2_ioi(loaded: hub.Loaded, layers: list[int] | None = None, rhos=RHOS, k: int = 4) -> dict:
    """Sec. 4.1 and Fig. 17: top-k tokens on the paper's IOI prompt, and the four candidates over rho.

    ``layers`` defaults to the last four (9-12 for GPT-2 Small, as in Fig. 17).
    """
    L = laser.n_layers(loaded.model)
    layers = list(layers or range(max(1, L - 3), L + 1))
    before = hub.fingerprint(loaded.model, max_tensors=10_000)
    sweep = rho_sweep(loaded, [PAPER_IOI_PROMPT], PAPER_GPT2_TOP4, layers, list(rhos))
    restored = hub.fingerprint(loaded.model, max_tensors=10_000) == before
    return {
        "top": top_tokens(loaded, PAPER_IOI_PROMPT, k),
        "layers": layers,
        "rhos": list(rhos),
        "candidates": PAPER_GPT2_TOP4,
        "sweep": sweep,
        "restored": restored,
    }


def scaled_spec(spec: tuple[int, str, float], paper_layers: int, layers: int) -> tuple[int, str, float]:
    """A paper LASER spec moved to a model with another depth (same relative layer, matrix and rho)."""
    layer, matrix, rho = spec
    return (max(1, min(layers, round(layer * layers / paper_layers))), matrix, rho)


def study_checkpoints(
    source: str,
    revisions: list[str],
    ioi_spec,
    factual_spec,
    n_ioi: int = 100,
    dtype: str = "float32",
    device=None,
    progress: bool = True,
) -> dict:
    """Fig. 5 and Fig. 14 along training: per checkpoint, IOI and "Madrid" probabilities with and without
    LASER, and the rank of " the" after the prepositions and sentences of App. I.1.

    ``source`` is a Hub name (revisions are branches) or a folder with ``revision`` subfolders.
    Prompts are tokenised once (all checkpoints share the tokenizer). Checkpoints with the same
    weights as the previous one are flagged in ``duplicates``.
    """
    from tqdm.auto import tqdm

    rows, fps, enc = {}, {}, None
    for rev in tqdm(revisions, desc="checkpoints", disable=not progress):
        loaded = hub.load(source, rev, dtype=dtype, device=device)  # a folder's rev: its subfolder
        if enc is None:
            tok = loaded.tokenizer
            items = prompts.ioi_prompts(tok, n=n_ioi)
            madrid = prompts.factual_madrid(tok)
            io_ids = [prompts.single_token_id(tok, p.io) for p in items]
            s_ids = [prompts.single_token_id(tok, p.s) for p in items]
            enc = {
                "ioi": measure.encode(tok, [p.prompt for p in items]),
                "madrid": measure.encode(tok, [madrid.prompt]),
            }
        fps[rev] = hub.fingerprint(loaded.model)
        ioi = target_vs_the(loaded, None, io_ids, [ioi_spec], encoded=enc["ioi"], others={"s": s_ids})
        fact = target_vs_the(loaded, None, [madrid.target_id], [factual_spec], encoded=enc["madrid"])
        rows[rev] = {
            "ioi": {k: (float(np.mean(v)) if isinstance(v, np.ndarray) else v) for k, v in ioi.items()},
            "factual": {k: (float(np.mean(v)) if isinstance(v, np.ndarray) else v) for k, v in fact.items()},
            "the_rank_prepositions": float(the_ranks(loaded, prompts.prepositions()).mean()),
            "the_rank_sentences": float(the_ranks(loaded, prompts.preposition_sentences()).mean()),
            "table1_full": top_tokens(loaded, madrid.prompt, 5),
            "table1_laser": top_tokens(loaded, madrid.prompt, 5, [factual_spec]),
        }
        del loaded
    return {
        "revisions": list(revisions),
        "rows": rows,
        "fingerprints": fps,
        "duplicates": hub.duplicated_checkpoints(fps),
        "ioi_spec": list(ioi_spec),
        "factual_spec": list(factual_spec),
    }


def study_final(loaded: hub.Loaded, ioi_spec, factual_spec, n_ioi: int = 100) -> dict:
    """Table 1, Fig. 15 and Fig. 16 on one (final) checkpoint, and Sec. 4.1's greedy continuations of "Madrid is
    located in" (full model and LASER) and the top token of "Madrid is located in the country of"."""
    tok = loaded.tokenizer
    madrid = prompts.factual_madrid(tok)
    table5 = prompts.factual_table5(tok)
    return {
        "table1_full": top_tokens(loaded, madrid.prompt, 5),
        "table1_laser": top_tokens(loaded, madrid.prompt, 5, [factual_spec]),
        "ioi": ioi_distribution(loaded, prompts.ioi_prompts(tok, n=n_ioi), [ioi_spec]),
        "factual": target_vs_the(
            loaded, [f.prompt for f in table5], [f.target_id for f in table5], [factual_spec]
        ),
        "factual_targets": [f.target_token for f in table5],
        "greedy_full": greedy(loaded, madrid.prompt),
        "greedy_laser": greedy(loaded, madrid.prompt, specs=[factual_spec]),
        "country_of_top": top_tokens(loaded, madrid.prompt + COUNTRY_OF, 1)[0][0],
    }


def check_gsm8k(shots, n_problems: int | None, n_test: int | None = None) -> None:
    """The GSM8K study's settings, checked before a model is loaded or a generation runs (a shot count it cannot
    use stopped the study only when its turn came, after the counts before it had generated on every problem);
    ``n_test``, the test set's size where it is known, bounds ``n_problems``.

    >>> check_gsm8k((1, 3), None)
    Traceback (most recent call last):
    ...
    ValueError: unknown shots k 3: allowed values are 0, 1, 2, 4, 8
    >>> check_gsm8k((1,), -1)
    Traceback (most recent call last):
    ...
    ValueError: n_problems=-1 is out of range: allowed [1, inf)
    """
    from companion.llm import gsm8k

    if not len(shots):
        raise ValueError(f"shots: none given (allowed: one or more of {', '.join(map(str, gsm8k.SHOTS))})")
    for k in shots:
        config.check_choice("shots k", k, gsm8k.SHOTS)
    if n_problems is not None:
        check_int("n_problems", n_problems, 1, n_test)


def study_gsm8k(
    loaded: hub.Loaded,
    shots=(1, 2, 4, 8),
    spec=None,
    n_problems: int | None = None,
    max_new_tokens: int = 256,
    batch_size: int = 8,
    seed: int = 0,
    progress: bool = True,
) -> dict:
    """Table 2: k-shot CoT accuracy on the GSM8K test set (its first ``n_problems``; None: all), full and with
    LASER ``spec``.

    Raises:
        ValueError: :func:`check_gsm8k`'s, or more problems than the test set holds.
    """
    from companion.llm import gsm8k

    test, bad_test = gsm8k.load("test")
    train, bad_train = gsm8k.load("train")
    check_gsm8k(shots, n_problems, len(test))
    problems = test if n_problems is None else test[:n_problems]
    out = {
        "n_problems": len(problems),
        "malformed_lines": bad_test + bad_train,
        "shots": list(shots),
        "full": [],
        "laser": [],
        "examples": {},
    }
    for k in shots:
        prefix = gsm8k.few_shot_prefix(train, k, seed)
        texts = [gsm8k.prompt(prefix, p) for p in problems]
        for name, specs in (("full", ()), ("laser", [spec] if spec else ())):
            if name == "laser" and not spec:
                continue
            with laser.laser(loaded.model, specs):
                gens = gsm8k.generate(
                    loaded.model, loaded.tokenizer, texts, max_new_tokens, batch_size, progress
                )
            out[name].append(gsm8k.accuracy(gens, problems))
            out["examples"][f"{name}-{k}"] = gens[0]
    return out


def real_or_standin(
    name: str,
    revision: str | None = None,
    spec=None,
    dtype: str = "float32",
    device=None,
    revision_of_standin: str | None = None,
) -> tuple[hub.Loaded, bool, str]:
    """(model, is_real, why not real): the real model if it loads, else the stand-in ``spec``.

    A chapter shows ``why not real`` in its banner when the stand-in is used.
    """
    from companion.llm import standin

    try:
        return hub.load(name, revision, dtype=dtype, device=device), True, ""
    except hub.ModelUnavailable as err:
        reason = str(err).splitlines()[0]
    spec = spec or standin.StandIn()
    folder = standin.build(spec, progress=False)
    rev = revision_of_standin or spec.revisions()[-1]
    return hub.load(str(folder), rev, device=device), False, reason


METRICS = ("target_prob", "log_ratio_the")


def _metric(lp, target_ids, the_id: int, metric: str) -> float:
    t = measure.per_prompt_prob(lp, target_ids)
    if metric == "target_prob":
        return float(t.mean())
    the = measure.per_prompt_prob(lp, [the_id] * len(target_ids))
    return float(np.mean(np.log(t + 1e-12) - np.log(the + 1e-12)))


def search(
    loaded: hub.Loaded,
    prompt_texts: list[str],
    target_ids: list[int],
    layers: list[int],
    matrices=("mlp_in",),
    rhos=RHOS,
    metric: str = "log_ratio_the",
    val_frac: float = 0.5,
    seed: int = 0,
) -> dict:
    """Best LASER (layer, matrix, rho) for a task metric, chosen on a validation split, reported on the test split.

    The prompts are split once (``val_frac`` to validation, drawn with ``seed``); every candidate is
    scored on validation (one SVD per (layer, matrix)); the best candidate and the full model are then
    scored on the held-out test prompts. ``metric``: ``"target_prob"`` (mean probability of the
    target) or ``"log_ratio_the"`` (mean log P(target) / P(" the")).
    """
    from companion.config import check_choice, check_float

    check_choice("metric", metric, METRICS)
    check_float("val_frac", val_frac, 0.0, 1.0, low_open=True, high_open=True)
    if len(prompt_texts) != len(target_ids) or len(prompt_texts) < 2:
        raise ValueError(
            f"need >= 2 prompts with one target each; got {len(prompt_texts)} and {len(target_ids)}"
        )
    for layer in layers:
        for matrix in matrices:
            laser.resolve(loaded.model, layer, matrix)
    the = prompts.single_token_id(loaded.tokenizer, THE)
    rng = np.random.default_rng(config.seed_streams(seed, ["laser-search"])["laser-search"])
    order = rng.permutation(len(prompt_texts))
    n_val = min(len(order) - 1, max(1, int(round(val_frac * len(order)))))
    split = {"validation": order[:n_val], "test": order[n_val:]}
    enc = {k: measure.encode(loaded.tokenizer, [prompt_texts[i] for i in idx]) for k, idx in split.items()}
    tgt = {k: [target_ids[i] for i in idx] for k, idx in split.items()}

    def score(part: str) -> float:
        return _metric(measure.next_token_logprobs(loaded.model, encoded=enc[part]), tgt[part], the, metric)

    rows = [{"layer": None, "matrix": None, "rho": 1.0, "validation": score("validation")}]
    for layer in layers:
        for matrix in matrices:
            for rho in laser.sweep(loaded.model, layer, matrix, rhos):
                if rho < 1.0:
                    rows.append(
                        {"layer": layer, "matrix": matrix, "rho": rho, "validation": score("validation")}
                    )
    best = max(rows, key=lambda r: r["validation"])
    full_test = score("test")
    spec = [] if best["layer"] is None else [(best["layer"], best["matrix"], best["rho"])]
    with laser.laser(loaded.model, spec):
        best_test = score("test")
    return {
        "metric": metric,
        "rows": rows,
        "best": best,
        "test_full": full_test,
        "test_best": best_test,
        "n_validation": len(split["validation"]),
        "n_test": len(split["test"]),
    }
