"""One attention layer read at EOS: the model of the talk's factual-recall dynamics (Nichani, Lee, Bietti, ICLR 2025).

Embeddings x_t = phi(z_t), one-hot (``embed="onehot"``, d = vocabulary size: the paper's orthogonal embeddings)
or random unit-norm Gaussian (``"random"``, any d), fixed. One attention layer read at the EOS position: scores
s_t = x_t^T A x_EOS; ``attention="linear"``: h = sum_t s_t x_t over all positions, EOS included, with no mask and
no normalisation (the notebook's ``lin_attn``); ``"softmax"``: h = sum_t softmax(s)_t x_t. Logits over the
answers: V^T h, V of size (d, |A|). A and V start at ``init`` times all-ones (1e-5 in the notebook). With one-hot
embeddings, A[z, EOS] is the paper's W_KQ(z) and V[z, a] its W_OV(a, z). The task is
:class:`companion.data.facts.FactTask`; training, :mod:`companion.experiments.factual`.
"""

from __future__ import annotations

import torch

from companion import config
from companion.config import check_choice, check_float, check_int

EMBEDDINGS = ("onehot", "random")


ATTENTION = ("linear", "softmax")


class AttentionFacts(torch.nn.Module):
    """One attention layer read at EOS, logits V^T h over the answers (see the module docstring)."""

    def __init__(
        self,
        vocab_size: int,
        n_answers: int,
        d: int | None = None,
        embed: str = "onehot",
        attention: str = "linear",
        init: float = 1e-5,
        seed: int = 0,
    ):
        super().__init__()
        check_choice("embed", embed, EMBEDDINGS)
        check_choice("attention", attention, ATTENTION)
        check_float("init", init, 0.0, None)
        if embed == "onehot":
            if d not in (None, vocab_size):
                raise ValueError(f"d={d}: one-hot embeddings have d = vocabulary size ({vocab_size})")
            d = vocab_size
            E = torch.eye(vocab_size)
        else:
            if d is None:
                raise ValueError("embed='random' needs d, the embedding dimension (an integer >= 1)")
            check_int("d", d, low=1)
            gen = config.torch_generator(config.seed_streams(seed, ["embeddings"])["embeddings"])
            E = torch.randn(vocab_size, d, generator=gen)
            E = E / E.norm(dim=1, keepdim=True)
        self.attention = attention
        self.register_buffer("E", E)
        self.A = torch.nn.Parameter(torch.full((d, d), float(init)))
        self.V = torch.nn.Parameter(torch.full((d, n_answers), float(init)))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(batch, T), the query token last -> (batch, |A|) logits.

        A position's score depends only on its token, so the sum over positions is computed as a sum over
        the vocabulary weighted by each sequence's token counts (exactly :meth:`forward_positions`, at a
        fraction of the cost).
        """
        V = self.E.shape[0]
        counts = torch.zeros(tokens.shape[0], V, dtype=self.E.dtype, device=tokens.device)
        counts.scatter_add_(1, tokens, torch.ones_like(tokens, dtype=self.E.dtype))
        scores = (self.E @ self.A @ self.E[tokens[:, -1]].T).T  # (batch, V): phi(z)^T A x_query
        if self.attention == "linear":
            weights = counts * scores
        else:
            e = counts * torch.exp(scores - scores.max(dim=1, keepdim=True).values)
            weights = e / e.sum(dim=1, keepdim=True)
        return (weights @ self.E) @ self.V

    def forward_positions(self, tokens: torch.Tensor) -> torch.Tensor:
        """The same logits, literally: one score per position (the definition; used to test :meth:`forward`)."""
        X = self.E[tokens]  # (batch, T, d)
        scores = X @ (self.A @ X[:, -1, :, None])  # (batch, T, 1): x_t^T A x_query
        weights = scores if self.attention == "linear" else torch.softmax(scores, dim=1)
        return (weights * X).sum(1) @ self.V
