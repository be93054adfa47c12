"""The one-layer transformer of the talk's fact-capacity figures (Nichani, Lee, Bietti, ICLR 2025), and its packed form.

:class:`OneLayerTF` is the public code's ``TF_one_layer`` re-implemented: fixed embeddings and unembeddings
N(0, 1/d); H heads with query, key, value maps d -> d_h (N(0, 1/d_h)) whose query is the last token (EOS) only,
softmax over every position (EOS included) of scores scaled by 1/sqrt(d_h), no positional embeddings; the heads'
outputs concatenated and mapped back by O (N(0, 1/d)); no residual from the EOS embedding; then x + MLP(x) with a
ReLU MLP of width m (first layer with bias, second without); logits over the D R answers by the unembedding.
Parameters counted as the paper does: 4 H d_h d (attention) + 2 m d (MLP). :class:`PackedOneLayerTF` holds
several such models of one shape, zero-padded in heads and MLP width, as one computation with a leading replica
dimension. Training and the grid are :mod:`companion.experiments.fact_capacity`'s.
"""

from __future__ import annotations

import torch

from companion import config
from companion.config import check_int


class OneLayerTF(torch.nn.Module):
    """One attention layer (H heads, query from the last token) plus an MLP; see the module docstring."""

    def __init__(self, vocab_size: int, n_answers: int, d: int, H: int, d_h: int, m: int, seed: int = 0):
        super().__init__()
        for name, v in (("d", d), ("H", H), ("d_h", d_h), ("m", m)):
            check_int(name, v, low=1)
        gen = config.torch_generator(config.seed_streams(seed, ["init"])["init"])

        def normal(*shape, std):
            return torch.randn(*shape, generator=gen) * std

        self.d_h = d_h
        self.register_buffer("E", normal(vocab_size, d, std=d**-0.5))  # fixed, as the code's set_to_zero
        self.register_buffer("U", normal(n_answers, d, std=d**-0.5))
        self.Q = torch.nn.Parameter(normal(H, d, d_h, std=d_h**-0.5))
        self.K = torch.nn.Parameter(normal(H, d, d_h, std=d_h**-0.5))
        self.V = torch.nn.Parameter(normal(H, d, d_h, std=d_h**-0.5))
        self.O = torch.nn.Parameter(normal(H * d_h, d, std=d**-0.5))
        # flax Dense: lecun_normal kernel (variance 1/fan_in), zero bias
        self.W1 = torch.nn.Parameter(normal(d, m, std=d**-0.5))
        self.b1 = torch.nn.Parameter(torch.zeros(m))
        self.W2 = torch.nn.Parameter(normal(m, d, std=m**-0.5))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(batch, T) with the query (EOS) last -> (batch, n_answers) logits.

        Keys and values depend only on the token, so attention over positions is computed as attention over
        the vocabulary weighted by each sequence's token counts: exactly :meth:`forward_positions`, several
        times faster.
        """
        n_vocab = self.E.shape[0]
        counts = torch.zeros(len(tokens), n_vocab, dtype=self.E.dtype, device=tokens.device)
        counts.scatter_add_(1, tokens, torch.ones_like(tokens, dtype=self.E.dtype))
        q = torch.einsum("bd,hde->bhe", self.E[tokens[:, -1]], self.Q)  # (b, H, d_h)
        k = torch.einsum("vd,hde->hve", self.E, self.K)  # (H, vocab, d_h)
        v = torch.einsum("vd,hde->hve", self.E, self.V)
        s = torch.einsum("hve,bhe->bhv", k, q) / self.d_h**0.5
        present = (counts > 0)[:, None, :]
        top = s.masked_fill(~present, -torch.inf).max(dim=-1, keepdim=True).values  # over the tokens present
        w = counts[:, None, :] * torch.exp((s - top).masked_fill(~present, -torch.inf))
        a = w / w.sum(dim=-1, keepdim=True)  # (b, H, vocab): the softmax over positions, grouped by token
        return self._head(torch.einsum("bhv,hve->bhe", a, v))

    def forward_positions(self, tokens: torch.Tensor) -> torch.Tensor:
        """The same logits, literally: one score per position (the definition; used to test :meth:`forward`)."""
        x = self.E[tokens]  # (b, T, d)
        q = torch.einsum("bd,hde->bhe", x[:, -1], self.Q)
        k = torch.einsum("btd,hde->bhte", x, self.K)
        v = torch.einsum("btd,hde->bhte", x, self.V)
        a = torch.softmax(torch.einsum("bhte,bhe->bht", k, q) / self.d_h**0.5, dim=-1)
        return self._head(torch.einsum("bht,bhte->bhe", a, v))

    def _head(self, heads: torch.Tensor) -> torch.Tensor:
        """(b, H, d_h) head outputs -> logits: concatenate, map back by O, add the MLP, unembed."""
        h = heads.reshape(len(heads), -1) @ self.O
        h = h + torch.relu(h @ self.W1 + self.b1) @ self.W2
        return h @ self.U.T


class PackedOneLayerTF(torch.nn.Module):
    """Several :class:`OneLayerTF` as one computation: each parameter gains a leading replica dimension, and
    replicas with fewer heads or a narrower MLP than the pack are padded with zeros (zero query, key and value
    maps and zero rows of O for a missing head; zero columns of W1 and b1 and zero rows of W2 for a missing MLP
    unit). Padding is exact: a missing head adds zero to the output and a missing unit adds relu(0) W2 = 0, their
    gradients are zero, and zero gradients leave a zero parameter at zero under SGD, Adam or AdamW (and under
    weight decay); ``tests/test_engine.py`` checks it against the runs alone.

    >>> small, large = OneLayerTF(20, 4, d=8, H=1, d_h=2, m=3), OneLayerTF(20, 4, d=8, H=2, d_h=2, m=5, seed=1)
    >>> pack = PackedOneLayerTF([small, large])
    >>> tokens = torch.randint(0, 20, (2, 6, 7))
    >>> torch.allclose(pack(tokens)[0], small(tokens[0]), atol=1e-6)
    True
    """

    def __init__(self, models: list[OneLayerTF]):
        super().__init__()
        if not models:
            raise ValueError("a pack needs at least one model")
        shapes = {(m.E.shape, m.U.shape, m.d_h) for m in models}
        if len(shapes) > 1:
            raise ValueError(
                f"models of different vocabularies, answers, d or d_h cannot be packed: {shapes}"
            )
        self.d_h = models[0].d_h
        H = max(m.Q.shape[0] for m in models)
        width = max(m.W1.shape[1] for m in models)

        def stack(get, shape_of):
            out = []
            for m in models:
                t = get(m).detach()
                pad = torch.zeros(shape_of(t), dtype=t.dtype)
                pad[tuple(slice(0, n) for n in t.shape)] = t
                out.append(pad)
            return torch.stack(out)

        def heads(t):
            return (H, *t.shape[1:])

        self.register_buffer("E", stack(lambda m: m.E, lambda t: t.shape))
        self.register_buffer("U", stack(lambda m: m.U, lambda t: t.shape))
        self.Q = torch.nn.Parameter(stack(lambda m: m.Q, heads))
        self.K = torch.nn.Parameter(stack(lambda m: m.K, heads))
        self.V = torch.nn.Parameter(stack(lambda m: m.V, heads))
        # O's rows are (head, d_h) pairs: pad per head
        self.O = torch.nn.Parameter(
            stack(lambda m: m.O.reshape(m.Q.shape[0], self.d_h, -1), heads).flatten(1, 2)
        )
        self.W1 = torch.nn.Parameter(stack(lambda m: m.W1, lambda t: (t.shape[0], width)))
        self.b1 = torch.nn.Parameter(stack(lambda m: m.b1, lambda t: (width,)))
        self.W2 = torch.nn.Parameter(stack(lambda m: m.W2, lambda t: (width, t.shape[1])))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(replicas, batch, T) with the query (EOS) last -> (replicas, batch, n_answers): each replica's
        :meth:`OneLayerTF.forward` on its own rows."""
        R, n_vocab = self.E.shape[0], self.E.shape[1]
        counts = torch.zeros(R, tokens.shape[1], n_vocab, dtype=self.E.dtype, device=tokens.device)
        counts.scatter_add_(2, tokens, torch.ones_like(tokens, dtype=self.E.dtype))
        last = torch.gather(self.E, 1, tokens[:, :, -1:].expand(-1, -1, self.E.shape[2]))  # (R, b, d)
        q = torch.einsum("rbd,rhde->rbhe", last, self.Q)
        k = torch.einsum("rvd,rhde->rhve", self.E, self.K)
        v = torch.einsum("rvd,rhde->rhve", self.E, self.V)
        s = torch.einsum("rhve,rbhe->rbhv", k, q) / self.d_h**0.5
        present = (counts > 0)[:, :, None, :]
        top = s.masked_fill(~present, -torch.inf).max(dim=-1, keepdim=True).values
        w = counts[:, :, None, :] * torch.exp((s - top).masked_fill(~present, -torch.inf))
        a = w / w.sum(dim=-1, keepdim=True)
        h = torch.einsum("rbhv,rhve->rbhe", a, v).flatten(2) @ self.O
        h = h + torch.relu(h @ self.W1 + self.b1[:, None, :]) @ self.W2
        return h @ self.U.transpose(1, 2)
