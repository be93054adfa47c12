"""The transformer of the main paper's Eq. (1), for any number of layers L.

For l = 1..L (Eq. (1) is L = 2), with x_t^0 = W_E(z_t) + p_t:

    h_t^l   = sum_{s <= t} softmax_s(c * x_t^{l-1 T} W_QK^l x_s^{l-1}) W_V^l x_s^{l-1}
    x_t^l   = x_t^{l-1} + h_t^l + F_l(x_t^{l-1} + h_t^l)
    xi_t    = W_U x_t^L

W_E (V x d) and the positions p_t (N(0, 1) entries) and W_U (V x d) are
fixed at their random initialisation; W_QK^l, W_V^l (d x d) and F_l are
learnable. W_U and the learnable matrices start uniform in
[-1/sqrt(fan_in), 1/sqrt(fan_in)] (``torch.nn.Linear``'s default, which the
public code uses). F_l is one of

* ``"mlp"``: F(u) = U_out ReLU(U_in u), U_in (h x d), U_out (d x h), no biases,
  h = 4d unless ``mlp_width`` says otherwise;
* ``"linear"``: F(u) = W_F u;
* ``"none"``: F(u) = 0.

``c`` is 1/sqrt(d) by default, as in the public code (Eq. (1) writes no
scale; ``attn_scale="none"`` follows the equation literally).

``attn_rank=k`` factorises every attention layer as W_QK = W_Q^T W_K and
W_V = W_O W_Vk with inner dimension k (the usual head dimension), so that
attention has 4dk parameters instead of 2d^2; the parameter-allocation
experiment (Appendix A, Fig. 6) trades them against the MLP width.
Factorised layers have no ``W_QK^l`` / ``W_V^l`` to truncate.

``value_out=True`` writes every layer's value map as W_O^l W_V^l, two d x d
matrices (the public code of Birth of a Transformer, ``ihead_basic_model.py``,
whose second layer learns W_O^2 against a frozen random W_V^2). W_O^l starts
uniform as the others, drawn from a stream of its own, so the other matrices
are those of the model without it at the same seed.

The last layer can be evaluated at the final position only
(``last_only=True``), which is all the paper's loss needs: keys and values
still use every position, queries only the last one. ``positions`` does the
same for a few positions per sequence (the public code's loss on trigger
occurrences).

Matrices are addressed by paper names: ``"W_QK^2"``, ``"W_V^1"``, ``"W_O^2"``,
``"F2.U_in"``, ``"F2.U_out"``, ``"F1.W_F"`` (layer numbers 1-based).

>>> m = Transformer(ModelConfig(vocab_size=66, d=16, max_len=8))
>>> m(torch.zeros(3, 8, dtype=torch.long)).shape
torch.Size([3, 8, 66])
>>> m(torch.zeros(3, 8, dtype=torch.long), last_only=True).shape
torch.Size([3, 66])
>>> m(torch.zeros(3, 8, dtype=torch.long), positions=torch.tensor([[2, 7]] * 3)).shape
torch.Size([3, 2, 66])
>>> tuple(m.matrix("F2.U_in").shape)
(64, 16)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch
from torch import nn

from companion.config import check_choice, check_int, torch_generator

FF_KINDS = ("mlp", "linear", "none")
ATTN_SCALES = ("sqrt_d", "none")


@dataclass(frozen=True)
class ModelConfig:
    """Sizes and architecture choices; validated on construction."""

    vocab_size: int
    d: int = 256
    max_len: int = 256
    ff: tuple[str, ...] = ("mlp", "mlp")
    mlp_mult: int = 4
    attn_scale: str = "sqrt_d"
    mlp_width: int | None = None
    attn_rank: int | None = None
    value_out: bool = False

    def __post_init__(self):
        check_int("vocab_size", self.vocab_size, low=2)
        check_int("d", self.d, low=1)
        check_int("max_len", self.max_len, low=1)
        check_int("mlp_mult", self.mlp_mult, low=1)
        object.__setattr__(self, "ff", tuple(self.ff))
        if len(self.ff) < 1:
            raise ValueError(f"ff={self.ff!r}: give one feed-forward kind per layer (L >= 1 layers)")
        for kind in self.ff:
            check_choice("feed-forward kind", kind, FF_KINDS)
        check_choice("attn_scale", self.attn_scale, ATTN_SCALES)
        if self.mlp_width is not None:
            check_int("mlp_width", self.mlp_width, low=1)
        if self.attn_rank is not None:
            check_int("attn_rank", self.attn_rank, low=1, high=self.d)
        if not isinstance(self.value_out, bool):
            raise ValueError(f"value_out={self.value_out!r} is not a boolean: allowed True or False")
        if self.value_out and self.attn_rank is not None:
            raise ValueError(
                f"value_out=True with attn_rank={self.attn_rank}: a factorised layer already has its W_O; "
                "give one of them"
            )

    @property
    def n_layers(self) -> int:
        return len(self.ff)

    @property
    def hidden(self) -> int:
        """Width h of the MLP feed-forward layers."""
        return self.mlp_mult * self.d if self.mlp_width is None else self.mlp_width

    def n_params(self) -> dict[str, int]:
        """Learnable parameters: ``attention``, ``feed_forward`` and ``total`` (W_E, P, W_U are fixed).

        >>> ModelConfig(66, d=8, ff=("mlp", "linear")).n_params()
        {'attention': 256, 'feed_forward': 576, 'total': 832}
        """
        d = self.d
        per_layer = (2 + self.value_out) * d * d if self.attn_rank is None else 4 * d * self.attn_rank
        attn = self.n_layers * per_layer
        ff = sum({"mlp": 2 * d * self.hidden, "linear": d * d, "none": 0}[k] for k in self.ff)
        return {"attention": attn, "feed_forward": ff, "total": attn + ff}


class FeedForward(nn.Module):
    """F(u) for one of the kinds in :data:`FF_KINDS`; parameters named as in the paper."""

    def __init__(self, kind: str, d: int, hidden: int, gen: torch.Generator):
        super().__init__()
        self.kind = kind
        if kind == "mlp":
            self.U_in = nn.Parameter(_uniform((hidden, d), gen))
            self.U_out = nn.Parameter(_uniform((d, hidden), gen))
        elif kind == "linear":
            self.W_F = nn.Parameter(_uniform((d, d), gen))

    def forward(self, u: torch.Tensor) -> torch.Tensor:  # (..., d) -> (..., d)
        if self.kind == "mlp":
            return torch.relu(u @ self.U_in.T) @ self.U_out.T
        if self.kind == "linear":
            return u @ self.W_F.T
        return torch.zeros_like(u)


class Layer(nn.Module):
    """One attention + feed-forward layer of Eq. (1)."""

    def __init__(
        self,
        d: int,
        ff: str,
        hidden: int,
        gen: torch.Generator,
        attn_rank: int | None = None,
        out_gen: torch.Generator | None = None,
    ):
        super().__init__()
        self.factorised = attn_rank is not None
        if self.factorised:  # as nn.Linear(d, k) weights (k x d) and an output map W_O (d x k)
            self.W_Q = nn.Parameter(_uniform((attn_rank, d), gen))
            self.W_K = nn.Parameter(_uniform((attn_rank, d), gen))
            self.W_Vk = nn.Parameter(_uniform((attn_rank, d), gen))
            self.W_O = nn.Parameter(_uniform((d, attn_rank), gen))
        else:
            self.W_QK = nn.Parameter(_uniform((d, d), gen))
            self.W_V = nn.Parameter(_uniform((d, d), gen))
        self.ff = FeedForward(ff, d, hidden, gen)
        self.value_out = out_gen is not None  # the value map is W_O W_V (``ModelConfig.value_out``)
        if self.value_out:
            self.W_O = nn.Parameter(_uniform((d, d), out_gen))

    def qk(self) -> torch.Tensor:
        """The (d x d) attention logit matrix W_QK."""
        return self.W_Q.T @ self.W_K if self.factorised else self.W_QK

    def v(self) -> torch.Tensor:
        """The (d x d) value map: W_V, or W_O W_V (``value_out``; W_O W_Vk when factorised)."""
        if self.factorised:
            return self.W_O @ self.W_Vk
        return self.W_O @ self.W_V if self.value_out else self.W_V


class Transformer(nn.Module):
    """L-layer transformer of Eq. (1); see the module docstring."""

    takes_positions = True  # forward(tokens, positions=...) runs the last layer at those positions only

    def __init__(self, cfg: ModelConfig, seed: int = 0):
        super().__init__()
        self.cfg = cfg
        gen = torch_generator(_seed_seq(seed, "model-init"))
        d, V = cfg.d, cfg.vocab_size
        self.register_buffer("W_E", torch.randn(V, d, generator=gen))  # (V, d), row i = W_E(i)
        self.register_buffer("P", torch.randn(cfg.max_len, d, generator=gen))  # (T_max, d), p_t
        self.register_buffer("W_U", _uniform((V, d), gen))  # (V, d), row j = W_U(j)
        out_gen = torch_generator(_seed_seq(seed, "model-init-W_O")) if cfg.value_out else None
        self.layers = nn.ModuleList(
            Layer(d, kind, cfg.hidden, gen, cfg.attn_rank, out_gen) for kind in cfg.ff
        )
        self.scale = 1.0 / math.sqrt(d) if cfg.attn_scale == "sqrt_d" else 1.0

    # --- the forward pass, split into stages so that truncation sweeps can resume mid-way ---
    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """(batch, T) ids -> (batch, T, d) x_t = W_E(z_t) + p_t."""
        T = tokens.shape[1]
        if T > self.cfg.max_len:
            raise ValueError(f"sequence length {T} exceeds max_len={self.cfg.max_len}")
        return self.W_E[tokens] + self.P[:T]

    def attend(
        self,
        l: int,
        x: torch.Tensor,
        last_only: bool = False,
        record: dict | None = None,
        positions: torch.Tensor | None = None,
        score_bias: torch.Tensor | None = None,
    ):
        """x^{l-1} (batch, T, d) -> u = x^{l-1} + h^l: (batch, T, d), (batch, d) at the last position, or
        (batch, m, d) at ``positions`` (batch, m) only (each query attends to the keys up to its position).
        ``score_bias``, if given, is added to the attention logits before the mask and softmax; it must
        broadcast to (batch, Tq, T) (a probe: the derivative of a loss along a set of logits)."""
        layer = self.layers[l]
        T = x.shape[1]
        if positions is not None:
            query = x.gather(1, positions[..., None].expand(-1, -1, x.shape[2]))  # (batch, m, d)
        else:
            query = x[:, -1:] if last_only else x  # (batch, Tq, d)
        scores = (query @ layer.qk()) @ x.transpose(1, 2) * self.scale  # (batch, Tq, T)
        if score_bias is not None:
            scores = scores + score_bias
        if positions is not None:
            future = torch.arange(T, device=x.device) > positions[..., None]  # (batch, m, T)
            scores = scores.masked_fill(future, float("-inf"))
        elif not last_only:
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            scores = scores.masked_fill(~causal, float("-inf"))
        attn = torch.softmax(scores, dim=-1)  # (batch, Tq, T)
        u = query + attn @ (x @ layer.v().T)  # (batch, Tq, d)
        if record is not None:
            record[f"attn{l + 1}"] = attn.detach()
        return u[:, 0] if last_only else u

    def feed_forward(self, l: int, u: torch.Tensor) -> torch.Tensor:
        """u (..., d) -> x^l = u + F_l(u)."""
        return u + self.layers[l].ff(u)

    def unembed(self, x: torch.Tensor) -> torch.Tensor:
        """x^L (..., d) -> logits xi (..., V)."""
        return x @ self.W_U.T

    def forward(
        self,
        tokens: torch.Tensor,
        last_only: bool = False,
        record: dict | None = None,
        positions: torch.Tensor | None = None,
        score_bias: torch.Tensor | dict | None = None,
    ):
        """Logits (batch, T, V), (batch, V) for the last position when ``last_only``, or (batch, m, V) at
        ``positions`` (batch, m), indices into T: the last layer runs only there (a loss on a few positions).

        ``record``, if a dict, receives the attention maps ``attn1`` and ``attn{L}``
        of the first and last layers, the stream ``u1`` entering the first
        feed-forward layer (every position) and the stream ``u{L}`` entering the
        last one (the middle layers' maps are not kept: at T = 256 each costs
        about 0.5 GB for 2048 sequences). ``score_bias`` is added to the last layer's attention logits
        (see :meth:`attend`), or, given as a dict {layer index (0-based): bias}, to those layers' logits.
        """
        return self.forward_from(0, self.embed(tokens), last_only, record, positions, score_bias)

    def forward_from(
        self,
        start: int,
        x: torch.Tensor,
        last_only: bool = False,
        record: dict | None = None,
        positions: torch.Tensor | None = None,
        score_bias: torch.Tensor | dict | None = None,
    ):
        """Run layers ``start``, ``start + 1``, ... (0-based) on the stream x (batch, T, d), then unembed.

        With ``start = 1`` and x = ``record["u1"]`` this is the model with F1 dropped, without re-running
        the first attention layer. ``score_bias``: as in :meth:`forward`.

        Raises:
            ValueError: both ``last_only`` and ``positions``, a position outside [0, T - 1], or a
                ``score_bias`` layer that is not one of the layers run.
        """
        L = len(self.layers)
        biases = (
            score_bias if isinstance(score_bias, dict) else {} if score_bias is None else {L - 1: score_bias}
        )
        for l in biases:
            if not (isinstance(l, int) and start <= l < L):
                raise ValueError(f"score_bias layer {l!r} is not run: choose layers in [{start}, {L - 1}]")
        if positions is not None:
            if last_only:
                raise ValueError("give either last_only or positions, not both")
            T = x.shape[1]
            if positions.numel() and not (0 <= int(positions.min()) and int(positions.max()) < T):
                raise ValueError(
                    f"positions must lie in [0, {T - 1}]; got [{int(positions.min())}, "
                    f"{int(positions.max())}]"
                )
        for l in range(start, L):
            final = l == L - 1
            u = self.attend(
                l,
                x,
                last_only=last_only and final,
                record=record if (final or l == 0) else None,
                positions=positions if final else None,
                score_bias=biases.get(l),
            )
            if record is not None and (final or l == 0):
                record[f"u{l + 1}"] = u.detach()
            x = self.feed_forward(l, u)
        return self.unembed(x)

    # --- paper names for matrices ---
    def matrix(self, name: str) -> nn.Parameter:
        """The parameter called ``name`` in the paper's notation (layers 1-based).

        Raises:
            ValueError: unknown name, layer out of range, or a matrix the layer lacks.
        """
        m = re.fullmatch(r"(W_QK|W_V|W_O)\^(\d+)|F(\d+)\.(U_in|U_out|W_F)", name)
        if not m:
            raise ValueError(
                f"unknown matrix name {name!r}: use 'W_QK^l', 'W_V^l', 'W_O^l', 'Fl.U_in', "
                f"'Fl.U_out' or 'Fl.W_F' with l in 1..{len(self.layers)}"
            )
        l = int(m.group(2) or m.group(3))
        check_int("layer", l, low=1, high=len(self.layers))
        layer = self.layers[l - 1]
        if m.group(1):
            if layer.factorised:
                raise ValueError(
                    f"{name!r}: attention is factorised (attn_rank={self.cfg.attn_rank}); "
                    "only full d x d attention matrices can be named"
                )
            if m.group(1) == "W_O" and not layer.value_out:
                raise ValueError(f"{name!r}: the value map is one matrix W_V here (value_out=False)")
            return getattr(layer, m.group(1))
        attr = m.group(4)
        if not hasattr(layer.ff, attr):
            raise ValueError(f"{name!r}: F{l} is {layer.ff.kind!r} and has no {attr}")
        return getattr(layer.ff, attr)

    def matrix_names(self) -> list[str]:
        """Every learnable matrix, by paper name."""
        names = []
        for l, layer in enumerate(self.layers, start=1):
            names += [] if layer.factorised else [f"W_QK^{l}", f"W_V^{l}"] + [f"W_O^{l}"] * layer.value_out
            names += [f"F{l}.{p}" for p, _ in layer.ff.named_parameters()]
        return names


def _uniform(shape: tuple[int, int], gen: torch.Generator) -> torch.Tensor:
    """Uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)], fan_in = shape[1] (nn.Linear's default)."""
    bound = 1.0 / math.sqrt(shape[1])
    return (torch.rand(shape, generator=gen) * 2 - 1) * bound


def _seed_seq(seed: int, name: str):
    from companion.config import seed_streams

    return seed_streams(seed, [name])[name]
