"""Measurements of a trained model on the noisy in-context recall task.

All functions run under ``torch.no_grad`` and return plain floats or numpy
arrays. Token ids follow :class:`companion.data.recall.RecallTask`.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from companion import truncation


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine similarity of two arrays (flattened, in float64); 0 when either is zero.

    >>> cosine(torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 1.0]])), cosine(torch.ones(2), torch.zeros(2))
    (0.7071067811865475, 0.0)
    """
    a, b = a.detach().double().reshape(-1), b.detach().double().reshape(-1)
    den = float(a.norm() * b.norm())
    return float(a @ b) / den if den > 0 else 0.0


@torch.no_grad()
def final_position_metrics(
    logits: torch.Tensor, correct: torch.Tensor, noise_token: int, distractor: torch.Tensor | None = None
) -> dict:
    """Mean probability of the correct token and of the noise token, and the loss on ``correct``.

    ``logits`` (batch, V) at the last position; ``correct`` (batch,) ids;
    ``distractor`` (batch,) ids (synthetic IOI) adds ``p_distractor`` and
    ``pred_distractor``.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    p = logp.exp()
    rows = torch.arange(len(correct), device=logits.device)
    pred = logits.argmax(-1)
    return {
        "p_correct": p[rows, correct].mean().item(),
        "p_noise": p[:, noise_token].mean().item(),
        "loss": F.nll_loss(logp, correct).item(),
        "pred_noise": (pred == noise_token).float().mean().item(),
        "pred_correct": (pred == correct).float().mean().item(),
    } | (
        {}
        if distractor is None
        else {
            "p_distractor": p[rows, distractor].mean().item(),
            "pred_distractor": (pred == distractor).float().mean().item(),
        }
    )


@torch.no_grad()
def rho_sweep(
    model,
    tokens: torch.Tensor,
    correct: torch.Tensor,
    noise_token: int,
    name: str,
    rhos,
    distractor: torch.Tensor | None = None,
    u: torch.Tensor | None = None,
) -> dict[str, np.ndarray]:
    """Final-position metrics for each rho applied to matrix ``name`` (one SVD).

    When ``name`` belongs to the last feed-forward layer, the stream entering
    that layer at the last position (``u``, batch x d: ``record["u{L}"]`` of a
    ``last_only`` forward; computed here if not given) is used for every rho, and
    only F_L and the unembedding are re-run, so a sweep costs little more than
    one evaluation.
    """
    L = len(model.layers)
    last_ff = name.startswith(f"F{L}.")
    if last_ff and u is None:
        record: dict = {}
        model(tokens, last_only=True, record=record)
        u = record[f"u{L}"]
    out: dict[str, list] = {}
    for _ in truncation.sweep(model, name, rhos):
        if last_ff:
            logits = model.unembed(model.feed_forward(L - 1, u))
        else:
            logits = model(tokens, last_only=True)
        for key, value in final_position_metrics(logits, correct, noise_token, distractor).items():
            out.setdefault(key, []).append(value)
    return {k: np.asarray(v) for k, v in out.items()}


@torch.no_grad()
def ff_margin(model, layer: int, trigger: int, noise_token: int) -> float:
    """Fig. 3 (right): [W_U F_l(W_E(q))]_tau - max_{k != tau} [W_U F_l(W_E(q))]_k (layer 1-based)."""
    logits = model.unembed(model.layers[layer - 1].ff(model.W_E[trigger]))  # (V,)
    others = torch.cat([logits[:noise_token], logits[noise_token + 1 :]])
    return (logits[noise_token] - others.max()).item()


@torch.no_grad()
def ff_logit_map(model, layer: int) -> np.ndarray:
    """Fig. 7 (middle): <F_l(W_E(i)), W_U(j)> for every input i and output j, (V, V)."""
    return model.unembed(model.layers[layer - 1].ff(model.W_E)).cpu().numpy()


@torch.no_grad()
def value_recall_map(model, layer: int) -> np.ndarray:
    """Fig. 7 (right): <W_V^l W_E(i), W_U(j)> for every input i and output j, (V, V)."""
    return model.unembed(model.W_E @ model.layers[layer - 1].v().T).cpu().numpy()


@torch.no_grad()
def previous_token_attention(model, tokens: torch.Tensor) -> tuple[np.ndarray, float]:
    """Fig. 7 (left): mean first-layer attention map (T, T) and its mean mass on s = t - 1."""
    record: dict = {}
    model(tokens, last_only=True, record=record)
    attn = record["attn1"].mean(0)  # (T, T)
    return attn.cpu().numpy(), attn.diagonal(-1).mean().item()


def previous_token_by_position(attn: np.ndarray, parts: int = 4) -> np.ndarray:
    """Mean mass on s = t - 1 of an attention map ``attn`` (T, T) over each of ``parts`` consecutive, equal
    (up to one) groups of query positions t = 1..T-1, earliest first: how a previous-token head's mass changes
    along the context.

    >>> a = np.tril(np.ones((5, 5))) / np.arange(1, 6)[:, None]  # uniform causal attention
    >>> previous_token_by_position(a, 2).round(3).tolist()
    [0.417, 0.225]
    """
    from companion.config import check_int

    attn = np.asarray(attn)
    if attn.ndim != 2 or attn.shape[0] != attn.shape[1]:
        raise ValueError(f"attention map of shape {attn.shape}: expected a square (T, T) map")
    check_int("parts", parts, low=1, high=attn.shape[0] - 1)
    return np.array([g.mean() for g in np.array_split(np.diagonal(attn, -1), parts)])


@torch.no_grad()
def recall_attention(
    model, tokens: torch.Tensor, triggers, noise_token: int, attn: torch.Tensor | None = None
) -> dict:
    """Fig. 4: last-layer attention from the final position to [q, ybar] vs [q, tau] positions.

    ``tokens`` (batch, T) inputs holding both kinds of pairs (noisy data).
    Returns the mean (over sequences) total attention mass on positions s
    with z_{s-1} a trigger and z_s = tau (``to_noise``) or z_s != tau
    (``to_correct``), their mean per-position values, and the attention
    map (batch, T). ``attn``: that map, if a ``last_only`` forward already
    recorded it (``record["attn{L}"][:, 0]``).
    """
    if attn is None:
        record: dict = {}
        model(tokens, last_only=True, record=record)
        attn = record[f"attn{len(model.layers)}"][:, 0]  # (batch, T)
    prev_is_trigger = torch.zeros_like(tokens, dtype=torch.bool)
    prev_is_trigger[:, 1:] = torch.isin(tokens[:, :-1], torch.as_tensor(list(triggers), device=tokens.device))
    is_noise = tokens == noise_token
    to_noise_pos = prev_is_trigger & is_noise
    to_correct_pos = prev_is_trigger & ~is_noise
    n_noise = to_noise_pos.sum(1).clamp(min=1)
    n_correct = to_correct_pos.sum(1).clamp(min=1)
    mass_noise = (attn * to_noise_pos).sum(1)
    mass_correct = (attn * to_correct_pos).sum(1)
    return {
        "to_correct": mass_correct.mean().item(),
        "to_noise": mass_noise.mean().item(),
        "per_pos_correct": (mass_correct / n_correct).mean().item(),
        "per_pos_noise": (mass_noise / n_noise).mean().item(),
        "attn": attn.cpu().numpy(),
    }


def pair_kinds(z: np.ndarray, triggers, noise_token: int) -> np.ndarray:
    """Per position of a sequence z (T,): "[q, tau]" or "[q, ybar]" if z_{s-1} is a trigger, else "other"."""
    after_q = np.r_[False, np.isin(z[:-1], list(triggers))]
    return np.where(after_q & (z == noise_token), "[q, tau]", np.where(after_q, "[q, ybar]", "other"))


def sequence_with_both_pairs(inputs: np.ndarray, triggers, noise_token: int) -> int:
    """Index of the sequence of a batch (batch, T) with the most [q, ybar] x [q, tau] pairs."""
    kinds = [pair_kinds(z, triggers, noise_token) for z in inputs]
    return int(np.argmax([(k == "[q, tau]").sum() * (k == "[q, ybar]").sum() for k in kinds]))


@torch.no_grad()
def matching_logits(model, layer: int = 2) -> np.ndarray:
    """Fig. 9: attention logit between a key holding W_V^{l-1} W_E(i) and a query W_E(j), (V, V).

    With scores x_t^T W_QK x_s (query x_t, key x_s), entry [i, j] is
    W_E(j)^T W_QK^l W_V^{l-1} W_E(i) (the paper writes the same pairing as
    <W_V^1 W_E(i), W_QK^2 W_E(j)>).
    """
    keys = model.W_E @ model.layers[layer - 2].v().T  # (V, d): rows W_V W_E(i)
    queries = model.W_E @ model.layers[layer - 1].W_QK  # (V, d): rows W_E(j)^T W_QK
    return (keys @ queries.T).cpu().numpy()  # [i, j]


def trigger_contrast(M: np.ndarray, triggers) -> tuple[float, list[bool]]:
    """Appendix B.4 (Fig. 9) on matching logits ``M`` (:func:`matching_logits`): the smallest trigger entry (q, q)
    over the largest entry off the triggers' diagonal, and per trigger whether (q, q) is the largest of its row and
    of its column.

    >>> M = np.array([[5.0, 1.0, 0.0], [2.0, 0.5, 0.0], [0.0, 0.0, 4.0]])
    >>> trigger_contrast(M, [0, 2])
    (2.0, [True, True])
    >>> trigger_contrast(M, [0, 1])
    (0.125, [True, False])
    """
    trig = list(triggers)
    off = np.ones_like(M, dtype=bool)
    off[trig, trig] = False
    argmax_ok = [bool(M[q].argmax() == q and M[:, q].argmax() == q) for q in trig]
    return float(M[trig, trig].min() / M[off].max()), argmax_ok
