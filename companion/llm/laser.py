"""LASER on Hugging Face models, targets named in the paper's vocabulary.

A target is ``(layer, matrix)`` with ``layer`` 1-based (the paper's "layer
16" of Pythia-1B is ``model.gpt_neox.layers[15]``) and ``matrix`` one of

* ``"mlp_in"``: the input matrix of the MLP (GPT-2 ``mlp.c_fc``, GPT-NeoX
  ``mlp.dense_h_to_4h``, Llama ``mlp.up_proj``, Phi-3 the "up" half of the
  fused ``mlp.gate_up_proj``);
* ``"mlp_gate"``: the gate matrix (Llama ``mlp.gate_proj``, Phi-3 the "gate"
  half of ``mlp.gate_up_proj``);
* ``"mlp_out"``: the output matrix of the MLP (``mlp.c_proj``,
  ``mlp.dense_4h_to_h``, ``mlp.down_proj``);
* ``"attn_qkv"``: the fused query/key/value matrix (GPT-2 ``attn.c_attn``,
  GPT-NeoX ``attention.query_key_value``, Phi-3 ``self_attn.qkv_proj``);
  Llama has ``"attn_q"``, ``"attn_k"``, ``"attn_v"`` instead;
* ``"attn_out"``: the attention output matrix (``attn.c_proj``,
  ``attention.dense``, ``self_attn.o_proj``).

GPT-2's ``Conv1D`` stores its weight as (in, out), transposed relative to
``nn.Linear``; the rank rule floor(rho * min(shape)) and the truncated SVD do
not depend on the orientation, so the weight is truncated as stored. The SVD
runs in float32 (one per target, reused across rhos) and the result is cast
back to the weight's dtype. Biases are left alone. Weights are restored
exactly when a context exits.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Iterable, Iterator

import torch

from companion.truncation import LowRank, rank_for

# family -> (path of the layer list, {matrix: (module path in a layer, half)}); half selects the
# rows of a fused [gate; up] weight: None = the whole weight, 0 = first half, 1 = second half
FAMILIES = {
    "gpt2": (
        "transformer.h",
        {
            "mlp_in": ("mlp.c_fc", None),
            "mlp_out": ("mlp.c_proj", None),
            "attn_qkv": ("attn.c_attn", None),
            "attn_out": ("attn.c_proj", None),
        },
    ),
    "gpt_neox": (
        "gpt_neox.layers",
        {
            "mlp_in": ("mlp.dense_h_to_4h", None),
            "mlp_out": ("mlp.dense_4h_to_h", None),
            "attn_qkv": ("attention.query_key_value", None),
            "attn_out": ("attention.dense", None),
        },
    ),
    "llama": (
        "model.layers",
        {
            "mlp_in": ("mlp.up_proj", None),
            "mlp_gate": ("mlp.gate_proj", None),
            "mlp_out": ("mlp.down_proj", None),
            "attn_q": ("self_attn.q_proj", None),
            "attn_k": ("self_attn.k_proj", None),
            "attn_v": ("self_attn.v_proj", None),
            "attn_out": ("self_attn.o_proj", None),
        },
    ),
    "phi3": (
        "model.layers",
        {
            "mlp_in": ("mlp.gate_up_proj", 1),
            "mlp_gate": ("mlp.gate_up_proj", 0),
            "mlp_out": ("mlp.down_proj", None),
            "attn_qkv": ("self_attn.qkv_proj", None),
            "attn_out": ("self_attn.o_proj", None),
        },
    ),
}
PAPER_NAMES = {
    "mlp_in": "input matrix of the MLP",
    "mlp_out": "output matrix of the MLP",
    "mlp_gate": "gate matrix of the MLP",
    "attn_qkv": "query/key/value matrix",
    "attn_q": "query matrix",
    "attn_k": "key matrix",
    "attn_v": "value matrix",
    "attn_out": "attention output matrix",
}


@dataclass(frozen=True)
class Target:
    """A resolved LASER target: the parameter and the rows of it that form the matrix."""

    layer: int  # 1-based
    matrix: str
    module: str  # full module path, e.g. "transformer.h.8.mlp.c_fc"
    param: torch.nn.Parameter
    rows: slice

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.param[self.rows].shape)

    def describe(self) -> str:
        return f"layer {self.layer} {PAPER_NAMES[self.matrix]} ({self.module}.weight, {self.shape[0]}x{self.shape[1]})"


def family_of(model) -> str:
    kind = getattr(getattr(model, "config", None), "model_type", None)
    if kind not in FAMILIES:
        raise ValueError(f"unknown model family {kind!r}: supported are {', '.join(FAMILIES)}")
    return kind


def n_layers(model) -> int:
    path, _ = FAMILIES[family_of(model)]
    return len(model.get_submodule(path))


def resolve(model, layer: int, matrix: str) -> Target:
    """The target (layer, matrix) of ``model``; 1-based layer.

    Raises:
        ValueError: unknown family or matrix name for the family, layer out of range.
    """
    family = family_of(model)
    path, matrices = FAMILIES[family]
    if matrix not in matrices:
        raise ValueError(f"unknown matrix {matrix!r} for {family}: allowed {', '.join(matrices)}")
    L = n_layers(model)
    if not (isinstance(layer, int) and 1 <= layer <= L):
        raise ValueError(f"layer={layer!r} is out of range: allowed [1, {L}] (1-based, as in the paper)")
    sub, half = matrices[matrix]
    module = f"{path}.{layer - 1}.{sub}"
    param = model.get_submodule(module).weight
    if half is None:
        rows = slice(None)
    else:
        n = param.shape[0] // 2
        rows = slice(half * n, (half + 1) * n)
    return Target(layer, matrix, module, param, rows)


class TargetSVD:
    """One float32 SVD of a target's matrix, truncated at any rho."""

    def __init__(self, target: Target):
        self.target = target
        self.original = target.param.detach()[target.rows].clone()
        self.lowrank = LowRank(self.original.float())

    def approx(self, rho: float) -> torch.Tensor:
        k = rank_for(rho, self.target.shape)
        return self.lowrank.approx_rank(k).to(self.original.dtype)


@contextmanager
def _written(target: Target, value: torch.Tensor) -> Iterator[None]:
    saved = target.param.detach()[target.rows].clone()
    with torch.no_grad():
        target.param[target.rows] = value.to(target.param.device)
    try:
        yield
    finally:
        with torch.no_grad():
            target.param[target.rows] = saved


@contextmanager
def laser(model, specs: Iterable[tuple[int, str, float]]) -> Iterator[list[Target]]:
    """Context in which each (layer, matrix, rho) is replaced by its rank floor(rho * min(shape)) approximation.

    All specs are validated before any weight changes; every weight is restored
    exactly on exit (also on error).

    >>> from transformers import GPT2Config, GPT2LMHeadModel
    >>> m = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=50, n_positions=8))
    >>> with laser(m, [(2, "mlp_in", 0.25)]) as (t,):
    ...     print(t.describe(), int(torch.linalg.matrix_rank(t.param)))
    layer 2 input matrix of the MLP (transformer.h.1.mlp.c_fc.weight, 16x64) 4
    """
    specs = list(specs)
    targets = []
    for layer, matrix, rho in specs:
        targets.append(resolve(model, layer, matrix))
        rank_for(rho, (1, 1))
    with ExitStack() as stack:
        for t, (_, _, rho) in zip(targets, specs):
            stack.enter_context(_written(t, TargetSVD(t).approx(rho)))
        yield targets


def sweep(model, layer: int, matrix: str, rhos: Iterable[float]) -> Iterator[float]:
    """Yield each rho with the target truncated to it (one SVD for the whole sweep)."""
    rhos = list(rhos)
    for rho in rhos:
        rank_for(rho, (1, 1))
    target = resolve(model, layer, matrix)
    svd = TargetSVD(target)
    for rho in rhos:
        with _written(target, svd.approx(rho)):
            yield rho
