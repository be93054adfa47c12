"""Leading-term features in a GPT-NeoX (Pythia) model along training (the leading-terms paper, Sec. 5.2, Figs. 6-8).

The paper's steps: pass every token alone through the model; per layer l
collect the layer's input ``E_pre`` (|K| x d, one row per token), its output
``E_post`` and its output without the MLP ``E_attn = E_pre + attention``;
average the heads' key-query products into ``A_emb`` (d x d) and map it to
tokens, ``A_tok = N(E_pre) A_emb N(E_pre)^T`` (|K| x |K|); compare covariance
matrices by their cosine: ``cov(A_tok)`` with ``cov(Q-bar)``, ``cov(E_post)`` and
``cov(E_attn)`` with ``cov(Phi-bar^T B-bar^T)``, the leading terms' rows first
normalised to unit norm.

Orientation: rows of ``A_tok`` and of ``Q-bar`` are **query** tokens, columns
key tokens; ``A_emb = mean_h W_q^h^T W_k^h`` with ``W_q^h`` (d_head x d) the rows
of head h's query in ``query_key_value`` (GPT-NeoX stores, per head, the
query, key and value rows one after the other). ``N`` is the layer's input
LayerNorm (the model applies it before attention; the authors' TransformerLens
model folds it into W_Q, W_K). The query and key biases are left out, and
rotary embeddings cancel for a token attending to its own position.

The statistics are those of |K| tokens, the most frequent of the corpus under
the model's tokenizer; every other token is one extra "other" index while
they are computed, and dropped after (the authors use the whole vocabulary).
"""

from __future__ import annotations

import numpy as np
import torch

from companion import config
from companion.criterion import Criterion
from companion.theory import leading_terms as lt


def _layers(model):
    if getattr(model.config, "model_type", "") != "gpt_neox":
        raise ValueError(
            f"the leading-term probe reads GPT-NeoX (Pythia) models, got {model.config.model_type!r}"
        )
    return model.gpt_neox.layers


def token_embeddings(model, token_ids, batch: int = 512) -> dict[str, np.ndarray]:
    """``pre``, ``post``, ``attn`` (L, K, d): each token passed alone; per layer its input, its output,
    and its input plus the attention block's output (no MLP)."""
    layers = _layers(model)
    grabbed: dict[str, list] = {"pre": [], "post": [], "attn_out": []}
    hooks = []
    for layer in layers:
        hooks.append(
            layer.register_forward_pre_hook(
                lambda m, args, kw: grabbed["pre"].append(
                    (kw.get("hidden_states") if not args else args[0]).detach()
                ),
                with_kwargs=True,
            )
        )
        hooks.append(
            layer.register_forward_hook(
                lambda m, a, out: grabbed["post"].append((out[0] if isinstance(out, tuple) else out).detach())
            )
        )
        hooks.append(
            layer.attention.register_forward_hook(
                lambda m, a, out: grabbed["attn_out"].append(out[0].detach())
            )
        )
    ids = torch.as_tensor(np.asarray(token_ids), dtype=torch.long)
    device = next(model.parameters()).device
    chunks = {k: [] for k in ("pre", "post", "attn")}
    try:
        with torch.no_grad():
            for i in range(0, len(ids), batch):
                for v in grabbed.values():
                    v.clear()
                model(input_ids=ids[i : i + batch, None].to(device))
                pre = torch.stack([h[:, 0] for h in grabbed["pre"]])  # (L, b, d)
                post = torch.stack([h[:, 0] for h in grabbed["post"]])
                attn = pre + torch.stack([h[:, 0] for h in grabbed["attn_out"]])
                for k, v in (("pre", pre), ("post", post), ("attn", attn)):
                    chunks[k].append(v.float().cpu())
    finally:
        for h in hooks:
            h.remove()
    return {k: torch.cat(v, dim=1).numpy() for k, v in chunks.items()}


def key_query(model, layer: int, head: int | None = None) -> torch.Tensor:
    """``A_emb`` (d x d, query side first) of ``layer`` (0-based): the mean over heads of W_q^T W_k, or one head's."""
    attn = _layers(model)[layer].attention
    n_heads = model.config.num_attention_heads
    d = model.config.hidden_size
    hs = d // n_heads
    W = attn.query_key_value.weight.detach().float().reshape(n_heads, 3, hs, d)  # (h, q/k/v, d_head, d)
    prods = torch.einsum("hid,hie->hde", W[:, 0], W[:, 1])  # (h, d, d): W_q^T W_k per head
    if head is not None:
        config.check_int("head", head, 0, n_heads - 1)
        return prods[head]
    return prods.mean(0)


def attention_tokens(model, layer: int, E_pre: np.ndarray, head: int | None = None) -> np.ndarray:
    """``A_tok = N(E_pre) A_emb N(E_pre)^T`` (K x K; rows query tokens, columns key tokens)."""
    ln = _layers(model)[layer].input_layernorm
    with torch.no_grad():
        X = ln(torch.as_tensor(E_pre).to(ln.weight.device, ln.weight.dtype)).float().cpu()
    return (X @ key_query(model, layer, head) @ X.T).numpy()


def covariance(M: np.ndarray) -> np.ndarray:
    """Covariance of the rows of M (rows are the variables, as ``np.cov``), in float64."""
    M = np.asarray(M, dtype=np.float64)
    C = M - M.mean(axis=1, keepdims=True)
    return C @ C.T / max(1, M.shape[1] - 1)


def row_normalised(M: np.ndarray) -> np.ndarray:
    """Every row scaled to unit norm (zero rows stay zero), as the paper does to the leading terms."""
    M = np.asarray(M, dtype=np.float64)
    n = np.linalg.norm(M, axis=1, keepdims=True)
    return np.divide(M, n, out=np.zeros_like(M), where=n > 0)


def cov_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine between the covariance matrices of the rows of a and b."""
    return lt.cosine(torch.as_tensor(covariance(a)), torch.as_tensor(covariance(b)))


def top_tokens(ids: np.ndarray, k: int) -> np.ndarray:
    """The k most frequent token ids of a stream (ties: smaller id first)."""
    counts = np.bincount(ids)
    if k > (counts > 0).sum():
        raise ValueError(
            f"k={k} is larger than the {(counts > 0).sum()} distinct tokens of the corpus "
            f"(allowed k <= {(counts > 0).sum()})"
        )
    return np.lexsort((np.arange(len(counts)), -counts))[:k]


def leading_features(ids: np.ndarray, top: np.ndarray, T: int) -> dict[str, np.ndarray]:
    """Q-bar and Phi-bar^T B-bar^T over the tokens ``top`` (K x K), from windows of T + 1 tokens of the
    stream ``ids`` (other tokens: one extra index, dropped after)."""
    K = len(top)
    index = np.full(int(max(ids.max(), top.max())) + 1, K, dtype=np.int64)
    index[top] = np.arange(K)
    mapped = index[ids]
    n = len(mapped) // (T + 1)
    if n < 1:
        raise ValueError(f"T={T} is longer than the corpus ({len(ids)} tokens)")
    stats = lt.statistics(mapped[: n * (T + 1)].reshape(n, T + 1), K + 1)
    return {"Q": stats.leading("W")[:K, :K].numpy(), "V": stats.leading("V")[:K, :K].numpy()}


def compare(model, features: dict[str, np.ndarray], top: np.ndarray, heads: bool = False) -> dict:
    """Per layer: cosines of cov(A_tok) with cov(Q-bar), cov(E_post) and cov(E_attn) with cov(Phi^T B^T);
    with ``heads`` also per head (Fig. 7). ``attention_authors``: cov(A_tok) against cov(Q-bar^T), the
    orientation of the authors' ``pythia.py`` (:func:`orientation_ceilings`)."""
    emb = token_embeddings(model, top)
    Qn, Vn = row_normalised(features["Q"]), row_normalised(features["V"])
    Qt = row_normalised(features["Q"].T)
    out = {"attention": [], "attention_authors": [], "embedding": [], "embedding_no_mlp": [], "heads": []}
    for layer in range(emb["pre"].shape[0]):
        A = attention_tokens(model, layer, emb["pre"][layer])
        out["attention"].append(cov_cosine(A, Qn))
        out["attention_authors"].append(cov_cosine(A, Qt))
        out["embedding"].append(cov_cosine(emb["post"][layer], Vn))
        out["embedding_no_mlp"].append(cov_cosine(emb["attn"][layer], Vn))
        if heads:
            out["heads"].append(
                [
                    cov_cosine(attention_tokens(model, layer, emb["pre"][layer], h), Qn)
                    for h in range(model.config.num_attention_heads)
                ]
            )
    return out


def orientation_ceilings(features: dict[str, np.ndarray]) -> dict[str, float]:
    """What the attention comparison gives for a token-basis key-query map whose rows point exactly as Q-bar's
    (queries in the rows; each row scaled to unit norm, as the paper scales the leading term's), in two
    orientations of the leading term: ``ours``, against cov(Q-bar) with normalised rows (the paper's
    orientation, as :func:`compare` reads it: 1); ``authors``, against Q-bar^T's, as the authors' ``pythia.py``
    builds Q-bar (keys in the rows: its final transpose of each sequence's Jacobian term) while its key-query map
    keeps queries in the rows. ``unnormalised``: the paper's measure for a map equal to Q-bar itself, whose rows
    keep their sizes (the measure scales the leading term's rows only).

    >>> Q = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0], [2.0, 0.0, 1.0]])
    >>> c = orientation_ceilings({"Q": Q}); round(c["ours"], 12), c["authors"] < 1
    (1.0, True)
    """
    Q = np.asarray(features["Q"], dtype=np.float64)
    Qn = row_normalised(Q)
    return {
        "ours": cov_cosine(Qn, Qn),
        "authors": cov_cosine(Qn, row_normalised(Q.T)),
        "unnormalised": cov_cosine(Q, Qn),
    }


# --- the chapter's study (Figs. 6-7) ---


def corpus_ids(tokenizer, download: bool = True) -> np.ndarray:
    """The statistics' corpus under the model's tokenizer: WikiText-2 test (the paper: 100K OpenWebText
    documents, not reachable here; the stand-in models were trained on WikiText-2 validation)."""
    from companion.data import sources

    text = sources.fetch("wikitext2_test", download).read_text(encoding="utf-8")
    return np.asarray(tokenizer(text)["input_ids"], dtype=np.int64)


def study(
    source: str,
    revisions: list[str],
    tokenizer,
    K: int = 500,
    T: int = 64,
    heads: bool = True,
    progress: bool = False,
) -> dict:
    """Leading features of the corpus over its K most frequent tokens, then :func:`compare` at every
    checkpoint ``source``/``revision`` (local ``step{N}`` folders or Hub revisions)."""
    from tqdm.auto import tqdm

    from companion.llm import hub

    config.check_int("K", K, 2)
    config.check_int("T", T, 1)
    ids = corpus_ids(tokenizer)
    top = top_tokens(ids, K)
    features = leading_features(ids, top, T)
    out = {"revisions": list(revisions), "top": top, "K": K, "T": T, "n_tokens": len(ids), "by_revision": {}}
    out["ceilings"] = orientation_ceilings(features)
    for rev in tqdm(revisions, desc="checkpoints", disable=not progress):
        loaded = hub.load(source, rev)  # a folder's rev: its subfolder
        out["by_revision"][rev] = compare(loaded.model, features, top, heads=heads)
        del loaded
    return out


# The probe reads what it should (asserted in the chapter with companion.report.require, and on a tiny model in
# tests/test_leading_terms.py): a check of our code, not a claim row.
PIPELINE = {"hook_error": Criterion(below=1e-4), "qk_error": Criterion(below=1e-4)}


def pipeline_checks(model, token_ids) -> dict[str, float]:
    """Two checks that fail if the probe reads the wrong tensors: (1) the hooked layer outputs against
    transformers' ``output_hidden_states`` (all layers but the last, which the model normalises), and
    (2) A_tok[i, j] against the mean over heads of q_i . k_j, with q and k read from the model's own
    projection (minus its bias) of each token alone: a wrong head layout, or keys in the rows, shows up."""
    ids = torch.as_tensor(np.asarray(token_ids), dtype=torch.long)
    emb = token_embeddings(model, ids)
    with torch.no_grad():
        hs = model(
            input_ids=ids[:, None].to(next(model.parameters()).device), output_hidden_states=True
        ).hidden_states
    L = emb["post"].shape[0]
    hook_err = max(
        (float(np.abs(emb["post"][l] - hs[l + 1][:, 0].float().cpu().numpy()).max()) for l in range(L - 1)),
        default=0.0,
    )
    layer = _layers(model)[L - 1]
    captured = []
    h = layer.attention.query_key_value.register_forward_hook(lambda m, a, o: captured.append(o.detach()))
    try:
        with torch.no_grad():
            model(input_ids=ids[:, None].to(next(model.parameters()).device))
    finally:
        h.remove()
    n_heads = model.config.num_attention_heads
    hs_ = model.config.hidden_size // n_heads
    bias = layer.attention.query_key_value.bias
    bias = bias.detach() if bias is not None else None
    qkv = captured[0][:, 0] - (bias if bias is not None else 0)
    qkv = qkv.float().cpu().reshape(len(ids), n_heads, 3, hs_)
    direct = torch.einsum("ihd,jhd->ij", qkv[:, :, 0], qkv[:, :, 1]).numpy() / n_heads  # query i . key j
    A = attention_tokens(model, L - 1, emb["pre"][L - 1])
    scale = float(np.abs(direct).max()) or 1.0
    return {"hook_error": hook_err, "qk_error": float(np.abs(A - direct).max()) / scale}


def early_revision(revisions: list[str]) -> str:
    """The checkpoint read as Fig. 6's "early stage": ``step1000`` when studied, else the middle one."""
    return "step1000" if "step1000" in revisions else revisions[len(revisions) // 2]


def summary(res: dict, checks: dict):
    """The chapter's numbers: the pipeline checks, and Fig. 6's agreement early and at the end."""
    from companion.report import Summary

    early, last = early_revision(res["revisions"]), res["revisions"][-1]
    e, f = res["by_revision"][early], res["by_revision"][last]
    L = len(e["embedding"])
    half = max(1, L // 2)
    drop = [a - b for a, b in zip(e["embedding"], f["embedding"])]
    return Summary(
        {
            "hook_error": (checks["hook_error"], "max |hooked layer output - transformers' hidden state|"),
            "qk_error": (checks["qk_error"], "max |A_tok - mean_h q_i . k_j| / max |q . k|, last layer"),
            "early": (early, "checkpoint read as the early stage"),
            "embed_min_early": (
                min(e["embedding"]),
                f"{early}: min over layers of cos(cov E_post, cov Phi^T B^T)",
            ),
            "attn_min_early": (
                min(e["attention"][1:] or e["attention"]),
                f"{early}: min over layers after the first of cos(cov A_tok, cov Q-bar)",
            ),
            "attn_first_early": (e["attention"][0], f"{early}: the first layer's attention cosine"),
            "attn_min_early_authors": (
                min(e["attention_authors"][1:] or e["attention_authors"]),
                f"{early}: the same minimum against cov(Q-bar^T), the authors' script's orientation",
            ),
            "ceiling_authors": (
                res["ceilings"]["authors"],
                "a map whose rows point as Q-bar's, against cov(Q-bar^T) with normalised rows (the authors' "
                "script's orientation; 1 in the paper's)",
            ),
            "ceiling_unnormalised": (
                res["ceilings"]["unnormalised"],
                "a map equal to Q-bar, rows unscaled, against cov(Q-bar) with normalised rows",
            ),
            "embed_min_last": (min(f["embedding"]), f"{last}: min over layers of the embedding cosine"),
            "drift_early_layers": (
                float(np.mean(drop[:half]) - np.mean(drop[half:])),
                f"embedding cosine lost from {early} to {last}: first half of the layers minus second half",
            ),
            "no_mlp_gap": (
                max(abs(a - b) for a, b in zip(e["embedding"][1:], e["embedding_no_mlp"][1:]))
                if L > 1
                else 0.0,
                f"{early}: largest |with MLP - without MLP| embedding cosine, layers after the first",
            ),
        }
    )
