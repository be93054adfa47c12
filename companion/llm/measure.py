"""Next-token measurements on prompt sets, batched.

Prompts are tokenised once, right-padded into batches and run through the
model with an attention mask; the logits are read at each prompt's last real
token. With right padding every prompt keeps positions 0..n-1, so the result
equals running the prompts one by one (a test checks this for each family).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from companion.config import check_int


@dataclass
class Encoded:
    """Tokenised prompts: ids (n, T) right-padded, attention mask, lengths."""

    ids: torch.Tensor
    mask: torch.Tensor
    lengths: torch.Tensor


def encode(tokenizer, prompts: list[str]) -> Encoded:
    """Tokenise (with the tokenizer's own special tokens, e.g. Llama's BOS) and right-pad."""
    if len(prompts) == 0:
        raise ValueError("no prompts given")
    seqs = [tokenizer.encode(p) for p in prompts]
    empty = [p for p, s in zip(prompts, seqs) if len(s) == 0]
    if empty:
        raise ValueError(f"prompts that tokenise to nothing: {empty[:3]}")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    T = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), T), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), T), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    return Encoded(ids, mask, mask.sum(1))


@torch.no_grad()
def next_token_logprobs(
    model,
    tokenizer=None,
    prompts: list[str] | None = None,
    batch_size: int = 32,
    encoded: Encoded | None = None,
) -> torch.Tensor:
    """Log-probabilities (n, V), float32 on the CPU, of the token after each prompt.

    Pass ``encoded`` (from :func:`encode`) to reuse a tokenisation across
    models or checkpoints.
    """
    check_int("batch_size", batch_size, low=1)
    enc = encoded if encoded is not None else encode(tokenizer, prompts)
    device = next(model.parameters()).device
    out = []
    for start in range(0, len(enc.ids), batch_size):
        ids = enc.ids[start : start + batch_size]
        mask = enc.mask[start : start + batch_size]
        T = int(mask.sum(1).max())  # drop columns that are padding in the whole batch
        logits = model(input_ids=ids[:, :T].to(device), attention_mask=mask[:, :T].to(device)).logits
        last = (mask[:, :T].sum(1) - 1).to(device)
        picked = logits[torch.arange(len(ids), device=device), last].float()
        out.append(torch.log_softmax(picked, dim=-1).cpu())
    return torch.cat(out)


def probs_of(logprobs: torch.Tensor, ids: list[int]) -> np.ndarray:
    """Probabilities (n, k) of the same k token ids after every prompt."""
    return logprobs.exp()[:, torch.as_tensor(list(ids), dtype=torch.long)].numpy()


def per_prompt_prob(logprobs: torch.Tensor, ids) -> np.ndarray:
    """(n,) probability of ``ids[i]`` after prompt i."""
    ids = torch.as_tensor(ids, dtype=torch.long).view(-1, 1)
    return logprobs.exp().gather(1, ids)[:, 0].numpy()


def rank_of(logprobs: torch.Tensor, token_id: int) -> np.ndarray:
    """(n,) 1-based rank of ``token_id`` among all next tokens (1 = the top prediction)."""
    target = logprobs[:, token_id : token_id + 1]
    return (logprobs > target).sum(1).numpy() + 1


def topk(logprobs_row: torch.Tensor, tokenizer, k: int = 5) -> list[tuple[str, float]]:
    """The k most likely next tokens of one prompt, as (decoded token, probability)."""
    check_int("k", k, low=1)
    p, i = logprobs_row.exp().topk(k)
    return [(tokenizer.decode([int(j)]), float(q)) for q, j in zip(p, i)]


def generate(
    model,
    tokenizer,
    prompts: list[str],
    max_new_tokens: int = 256,
    batch_size: int = 8,
    progress: bool = False,
    stop: str | None = None,
) -> list[str]:
    """Greedy continuations of ``prompts`` (left-padded batches), decoded, each cut at ``stop`` (None: the
    ``max_new_tokens`` new tokens whole)."""
    from tqdm.auto import tqdm

    check_int("max_new_tokens", max_new_tokens, low=1)
    check_int("batch_size", batch_size, low=1)
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    old_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    outs = []
    limit = getattr(model.config, "max_position_embeddings", None) or getattr(
        model.config, "n_positions", None
    )
    longest = max(len(tokenizer.encode(p)) for p in prompts)
    if limit is not None and longest + max_new_tokens > limit:
        raise ValueError(
            f"the longest prompt has {longest} tokens; with max_new_tokens={max_new_tokens} it "
            f"exceeds the model's context of {limit} positions: use fewer shots or tokens"
        )
    try:
        for start in tqdm(range(0, len(prompts), batch_size), desc="generate", disable=not progress):
            batch = tokenizer(prompts[start : start + batch_size], return_tensors="pt", padding=True).to(
                device
            )
            with torch.no_grad():
                gen = model.generate(
                    **batch,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    pad_token_id=pad,
                    **({"stop_strings": [stop], "tokenizer": tokenizer} if stop else {}),
                )
            new = gen[:, batch["input_ids"].shape[1] :]
            texts = tokenizer.batch_decode(new, skip_special_tokens=True)
            outs += [t.split(stop)[0] for t in texts] if stop else texts
    finally:
        tokenizer.padding_side = old_side
    return outs
