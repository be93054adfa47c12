"""The word-level language model of Scan and Snap's text study (Fig. 7, Appendix E): the authors' model.

The model of ``luckmatters/ssl/real-dataset/scan_snap/figure_7.ipynb`` (the PyTorch word-language-model
tutorial): token embeddings scaled by sqrt(d), sinusoidal positions, dropout, then ``n_layers`` post-LayerNorm
layers of one causal attention head and a ReLU feed-forward layer, and a linear decoder over the vocabulary; the
embeddings and the decoder start uniform in [-0.1, 0.1]. Each layer also returns its attention weights. Data and
training are :mod:`companion.experiments.scan_snap_text`'s.

>>> m = TextModel(vocab_size=50, d=16, d_hid=16, n_layers=2, dropout=0.0, seed=0)
>>> logits, attn = m(torch.zeros(3, 7, dtype=torch.long))
>>> tuple(logits.shape), tuple(attn.shape), bool(torch.allclose(attn.sum(-1), torch.ones(3, 7)))
((3, 7, 50), (3, 7, 7), True)
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class TextLayer(nn.Module):
    """One post-LayerNorm encoder layer (PyTorch's ``TransformerEncoderLayer``, one head), returning the
    attention weights as well."""

    def __init__(self, d: int, d_hid: int, dropout: float):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, 1, dropout=dropout, batch_first=True)
        self.linear1, self.linear2 = nn.Linear(d, d_hid), nn.Linear(d_hid, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.drop, self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x, mask):
        a, w = self.attn(x, x, x, attn_mask=mask, need_weights=True)
        x = self.norm1(x + self.drop1(a))
        x = self.norm2(x + self.drop2(self.linear2(self.drop(F.relu(self.linear1(x))))))
        return x, w


class TextModel(nn.Module):
    """The tutorial transformer; ``forward(tokens)`` gives the logits and the first layer's attention
    (batch, T, T), causal."""

    def __init__(self, vocab_size: int, d: int, d_hid: int, n_layers: int, dropout: float, seed: int):
        super().__init__()
        torch.manual_seed(seed)
        self.d = d
        self.embed = nn.Embedding(vocab_size, d)
        self.layers = nn.ModuleList(TextLayer(d, d_hid, dropout) for _ in range(n_layers))
        self.decoder = nn.Linear(d, vocab_size)
        self.drop = nn.Dropout(dropout)
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def positions(self, T: int) -> torch.Tensor:
        """(T, d) sinusoidal positions, computed on the CPU (the same numbers on every device)."""
        pos = torch.arange(T, dtype=torch.float32)[:, None]
        div = torch.exp(torch.arange(0, self.d, 2, dtype=torch.float32) * (-math.log(10000.0) / self.d))
        pe = torch.zeros(T, self.d)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div[: self.d // 2])
        return pe

    def forward(self, tokens: torch.Tensor):
        T, device = tokens.shape[1], tokens.device
        mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1).to(device)
        x = self.drop(self.embed(tokens) * math.sqrt(self.d) + self.positions(T).to(device))
        first = None
        for layer in self.layers:
            x, w = layer(x, mask)
            first = w if first is None else first
        return self.decoder(x), first
