"""The k-hop model family: a bidirectional transformer read at position 0 (the talk's k-hop result).

Learned token and absolute position embeddings, ``depth`` pre-LayerNorm blocks of bidirectional multi-head
attention (padding masked), an optional GELU MLP (4d), a final LayerNorm and a linear readout of position 0 over
the N values of :class:`companion.data.khop.KHopTask`. Blocks listed in ``hide_k_from`` never see the last table
(part of the model); :func:`table_hidden` builds the ``hide`` argument of an intervention that hides it from
chosen blocks. The experiment's default depth is the paper's ceil(log2 k) + 1
(:mod:`companion.experiments.khop`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from companion import config
from companion.config import check_int
from companion.data.khop import KHopTask


class HopBlock(torch.nn.Module):
    """One pre-LayerNorm block: bidirectional multi-head attention (the mask hides keys), then an optional MLP."""

    # False: attention computed explicitly, never by the fused kernel (a pack sets it on its base model: vmap has
    # no batching rule for the fused kernel on the CPU, and would run it once per replica)
    fused = True

    def __init__(self, d: int, heads: int, mlp: bool):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d) if mlp else None
        self.mlp = (
            torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))
            if mlp
            else None
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor, record: dict | None = None) -> torch.Tensor:
        """``record``, if a dict, receives the attention weights (b, heads, T, T; query, key) under ``"attn"``
        (a list, one entry per block), computed explicitly instead of by the fused kernel."""
        b, T, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, T, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if record is None and self.fused:
            h = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])
        else:
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.heads)
            a = scores.masked_fill(~mask[:, None, None, :], float("-inf")).softmax(-1)
            if record is not None:
                record.setdefault("attn", []).append(a)
            h = a @ v
        x = x + self.out(h.transpose(1, 2).reshape(b, T, d))
        return x + self.mlp(self.ln2(x)) if self.mlp is not None else x


class HopTransformer(torch.nn.Module):
    """Bidirectional transformer read at position 0; see the module docstring."""

    def __init__(
        self,
        task: KHopTask,
        d: int,
        depth: int,
        heads: int,
        mlp: bool,
        seed: int = 0,
        hide_k_from: tuple = (),
    ):
        super().__init__()
        check_int("depth", depth, low=1)
        check_int("heads", heads, low=1)
        if d % heads:
            raise ValueError(f"d={d} is not a multiple of heads={heads}: allowed d in multiples of {heads}")
        for blk in hide_k_from:
            check_int("block that never sees table k (hide_k_from)", blk, low=1, high=depth)
        # blocks (from 1) whose keys never include table k: part of the model
        self.hide_k_from = tuple(hide_k_from)
        # (T,): False on table k
        self.register_buffer("shows_k", ~table_hidden(task, [1], 1)[0], persistent=False)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(config.seed_streams(seed, ["init"])["init"].generate_state(1)[0]))
            self.embed = torch.nn.Embedding(task.N + 1, d)
            # the tokens' scale (0.02 stalls hop 2)
            self.pos = torch.nn.Parameter(torch.randn(task.seq_len, d))
            self.blocks = torch.nn.ModuleList([HopBlock(d, heads, mlp) for _ in range(depth)])
            self.ln = torch.nn.LayerNorm(d)
            self.readout = torch.nn.Linear(d, task.N)

    def forward(
        self,
        tokens: torch.Tensor,
        mask: torch.Tensor,
        record: dict | None = None,
        hide: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(b, T) tokens and mask -> (b, N) logits of the value after the composition. ``record``, if a dict,
        receives the stream (b, T, d) before the first block and after each block (``"streams"``, depth + 1
        entries) and each block's attention weights (``"attn"``). ``hide``, if given, (depth, T) bool: positions
        hidden from each block's keys besides the masked ones (an intervention; see :func:`table_interference`).
        The blocks of ``hide_k_from`` never see table k, whatever ``hide`` says."""
        x = self.embed(tokens) + self.pos
        if record is not None:
            record["streams"] = [x]
        for i, blk in enumerate(self.blocks):
            m = mask if hide is None else mask & ~hide[i]
            x = blk(x, m & self.shows_k if i + 1 in self.hide_k_from else m, record)
            if record is not None:
                record["streams"].append(x)
        return self.readout(self.ln(x[:, 0]))


def table_hidden(task: KHopTask, blocks, depth: int) -> torch.Tensor:
    """(depth, T) bool: table k's positions in the rows of ``blocks`` (numbered from 1), False elsewhere; the
    ``hide`` argument of the model's forward that hides the last table from those blocks' keys.

    Raises:
        ValueError: a block outside 1..depth.
    """
    out = torch.zeros(depth, task.seq_len, dtype=torch.bool)
    for b in blocks:
        check_int("block", b, low=1, high=depth)
        out[b - 1, task.last_table] = True
    return out
