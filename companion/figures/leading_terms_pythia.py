"""The chapter ``book/leading_terms_pythia``'s own figures; the house helpers are :mod:`companion.plotting`'s. No
computation imports this module, so editing a figure re-keys no cached run."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def layer_checkpoint_maps(res: dict, keys=("attention", "embedding", "embedding_no_mlp")):
    """The leading-terms paper, Fig. 6: one heat map per comparison, layers (rows) by checkpoints (columns),
    colour = cosine between covariance matrices."""
    revs = res["revisions"]
    fig, axes = plt.subplots(1, len(keys), figsize=(4.6 * len(keys), 3.4), constrained_layout=True)
    for ax, key in zip(np.atleast_1d(axes), keys):
        M = np.array([res["by_revision"][r][key] for r in revs]).T  # (layers, checkpoints)
        im = ax.imshow(M, aspect="auto", origin="lower", cmap="RdBu_r", vmin=-1, vmax=1)
        ax.set_xticks(range(len(revs)), [r.removeprefix("step") for r in revs], rotation=90, fontsize=6)
        ax.set_yticks(range(M.shape[0]), [str(i + 1) for i in range(M.shape[0])], fontsize=7)
        ax.set_xlabel(f"checkpoint step ({key.replace('_', ' ')})")
        ax.set_ylabel("layer")
        ax.grid(False)
    fig.colorbar(im, ax=axes, label="cosine of covariance matrices")
    return fig


def head_checkpoint_maps(res: dict, layers: list[int]):
    """The leading-terms paper, Fig. 7: per head (rows) and checkpoint (columns), the attention cosine of a
    few layers."""
    revs = res["revisions"]
    fig, axes = plt.subplots(1, len(layers), figsize=(4.4 * len(layers), 3.2), constrained_layout=True)
    for ax, layer in zip(np.atleast_1d(axes), layers):
        M = np.array([res["by_revision"][r]["heads"][layer] for r in revs]).T  # (heads, checkpoints)
        im = ax.imshow(M, aspect="auto", origin="lower", cmap="RdBu_r", vmin=-1, vmax=1)
        ax.set_xticks(range(len(revs)), [r.removeprefix("step") for r in revs], rotation=90, fontsize=6)
        ax.set_xlabel(f"checkpoint step (layer {layer + 1})")
        ax.set_ylabel("head")
        ax.grid(False)
    fig.colorbar(im, ax=axes, label="cosine of covariance matrices")
    return fig
