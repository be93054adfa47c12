"""Scan and Snap on real text (Scan and Snap, Fig. 7, Appendix E and Fig. 10): does the first attention layer of a
transformer trained with SGD on WikiText-2 become sparse, and then freeze?

The model is the authors' (:class:`companion.models.text.TextModel`: the PyTorch word-language-model
tutorial's, one causal head per layer). Training: batches of
20 streams, windows of 35 tokens read in order, SGD with gradient clipping at 0.5; the feed-forward layers
take ``lr_ffn`` and everything else ``lr`` (the notebook: 10 and 5; Appendix E: one rate for all).

Data. The text is WikiText-2 (the tokenised version with ``<unk>``), lower-cased and split on spaces; the
vocabulary is built from the training text (its ``vocab_size - 1`` most frequent words, the rest ``<unk>``).
``split="train"`` trains on the train split and measures on the validation split, as the paper does; the
train split is fetched from its canonical source when online. ``split="valid"`` (the offline stand-in) trains
on the validation split and measures on the test split.

Measured along training (:func:`run`), on fixed held-out windows with dropout off: the held-out loss, the
mean entropy of the first layer's attention rows (each query over its causal past), and the mean total
variation between the attention rows of two consecutive evaluations (how much the attention still moves);
and the first layer's attention map on one training window (window 100, stream 0: the notebook's choice).
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from companion import cache, config, report
from companion import train as engine
from companion.config import check_choice, check_float, check_int
from companion.data import sources
from companion.experiments.scan_snap import late_movement, total_variation
from companion.models.text import TextModel

SPLITS = ("train", "valid")
UNK = "<unk>"


# --- data ---------------------------------------------------------------------------------------------------


def _words(name: str, download: bool) -> list[str]:
    text = sources.fetch(name, download).read_text(encoding="utf-8")
    return [w for line in text.lower().splitlines() for w in line.split() + ["<eos>"] if line.strip()]


def corpus(split: str = "valid", vocab_size: int | None = None, download: bool = True) -> dict:
    """``{"train", "heldout"}`` token id streams, the vocabulary ``itos`` and the names of the two splits used.
    ``split="train"``: WikiText-2 train / validation (the paper); ``"valid"``: validation / test (offline)."""
    check_choice("split", split, SPLITS)
    if vocab_size is not None:
        check_int("vocab_size", vocab_size, low=2)
    names = (
        ("wikitext2_train", "wikitext2_valid") if split == "train" else ("wikitext2_valid", "wikitext2_test")
    )
    train, held = (_words(n, download) for n in names)
    counts = collections.Counter(w for w in train if w != UNK)
    keep = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    itos = ([UNK] + keep)[: vocab_size or len(keep) + 1]
    stoi = {w: i for i, w in enumerate(itos)}

    def ids(ws):
        return np.array([stoi.get(w, 0) for w in ws], dtype=np.int64)

    return {"train": ids(train), "heldout": ids(held), "itos": itos, "splits": names}


def batchify(stream: np.ndarray, n_streams: int) -> torch.Tensor:
    """The tutorial's layout: the stream cut into ``n_streams`` equal columns, (n_streams, length)."""
    n = len(stream) // n_streams
    return torch.as_tensor(stream[: n * n_streams]).view(n_streams, n)


# --- the experiment -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextExperiment(config.Profiled):
    """One training run on WikiText-2 (see the module docstring).

    Raises:
        ValueError: a non-positive rate or size, dropout outside [0, 1), an unknown split.
    """

    profile: str = "quick"
    split: str = "valid"
    vocab_size: int | None = 2048
    d: int = 64
    d_hid: int = 64
    n_layers: int = 1
    dropout: float = 0.3
    lr: float = 5.0
    lr_ffn: float | None = 10.0  # None: the same rate as the rest (Appendix E)
    clip: float = 0.5
    n_streams: int = 20
    bptt: int = 35
    steps: int = 600
    eval_every: int = 50
    n_eval: int = 40  # held-out windows of bptt tokens (from n_eval // n_streams + 1 columns)
    seed: int = field(default_factory=config.book_seed)

    @classmethod
    def full(cls, **kw):
        """The notebook's sizes: d = d_hid = 200, the whole vocabulary, 2000 iterations."""
        return cls(
            **{
                "profile": "full",
                "vocab_size": None,
                "d": 200,
                "d_hid": 200,
                "steps": 2000,
                "eval_every": 100,
                "n_eval": 200,
                **kw,
            }
        )

    def __post_init__(self):
        config.check_int("seed", self.seed, low=0)
        config.get_profile(self.profile)
        check_choice("split", self.split, SPLITS)
        if self.vocab_size is not None:
            check_int("vocab_size", self.vocab_size, low=2)
        for name in ("d", "d_hid", "n_layers", "n_streams", "steps", "eval_every", "n_eval"):
            check_int(name, getattr(self, name), low=1)
        check_int("bptt", self.bptt, low=2)
        check_float("dropout", self.dropout, low=0, high=1, high_open=True)
        check_float("lr", self.lr, low=0, low_open=True)
        if self.lr_ffn is not None:
            check_float("lr_ffn", self.lr_ffn, low=0, low_open=True)
        check_float("clip", self.clip, low=0, low_open=True)


MODULES = ("companion.experiments.scan_snap_text",)


def first_batch(exp: TextExperiment) -> dict:
    """The first training batch of ``exp``: the first window of ``bptt`` tokens of every stream and its
    targets (the batches are read in order, so this fixes the data, the vocabulary and the layout)."""
    train = batchify(corpus(exp.split, exp.vocab_size)["train"], exp.n_streams)
    return {"x": train[:, : exp.bptt].numpy(), "y": train[:, 1 : exp.bptt + 1].numpy()}


def run(exp: TextExperiment, *, device=None, progress: bool = True, use_cache: bool = True) -> dict:
    """Train (or load) one run: ``step``, held-out ``loss``, ``entropy`` and ``moved`` (total variation of the
    first layer's attention since the previous evaluation; NaN at the first) at every evaluation, the
    ``train_loss`` of every step, the attention ``maps`` (n_eval_points, 35, 35) on the training window,
    ``max_entropy`` (the mean entropy of uniform causal attention), the ``splits`` used and ``seconds``."""
    return cache.load_or_compute(
        "scan_snap_text", exp, lambda: _train(exp, progress, device), MODULES, use_cache=use_cache
    )


def attention_entropy(attn: torch.Tensor) -> float:
    """Mean entropy (nats) of the attention rows (..., T, T)."""
    return float(-(attn * torch.log(attn.clamp_min(1e-30))).sum(-1).mean())


# what a run holds one value of per evaluation (late_verdicts.stopped_values cuts these)
EVALUATED = ("step", "loss", "entropy", "moved", "maps")


def _train(exp: TextExperiment, progress: bool, device=None) -> dict:
    device = config.get_device(device)
    data = corpus(exp.split, exp.vocab_size)
    V = len(data["itos"])
    train = batchify(data["train"], exp.n_streams).to(device)
    held = batchify(data["heldout"], exp.n_streams).to(device)
    n_cols = min(held.shape[1] // exp.bptt, -(-exp.n_eval // exp.n_streams))
    held_x = torch.cat([held[:, i * exp.bptt : (i + 1) * exp.bptt] for i in range(n_cols)])[: exp.n_eval]
    held_y = torch.cat([held[:, i * exp.bptt + 1 : (i + 1) * exp.bptt + 1] for i in range(n_cols)])[
        : exp.n_eval
    ]
    w0 = 100 * exp.bptt if train.shape[1] > 101 * exp.bptt + 1 else 0
    map_window = train[:1, w0 : w0 + exp.bptt]
    model = TextModel(V, exp.d, exp.d_hid, exp.n_layers, exp.dropout, exp.seed).to(device)
    ffn = [p for n, p in model.named_parameters() if ".linear" in n]
    rest = [p for n, p in model.named_parameters() if ".linear" not in n]
    opt = torch.optim.SGD([{"params": rest, "lr": exp.lr}, {"params": ffn, "lr": exp.lr_ffn or exp.lr}])
    n_windows = (train.shape[1] - 1) // exp.bptt
    out = {k: [] for k in EVALUATED}
    prev = None

    def evaluate(step):
        nonlocal prev
        model.eval()
        with torch.no_grad():
            logits, attn = model(held_x)
            out["step"].append(step)
            out["loss"].append(F.cross_entropy(logits.reshape(-1, V), held_y.reshape(-1)).item())
            out["entropy"].append(attention_entropy(attn))
            out["moved"].append(float("nan") if prev is None else total_variation(attn, prev))
            out["maps"].append(model(map_window)[1][0].cpu().numpy())
            prev = attn
        model.train()

    def loss_at(step):
        i = (step % n_windows) * exp.bptt
        x, y = train[:, i : i + exp.bptt], train[:, i + 1 : i + 1 + exp.bptt]
        logits, _ = model(x)
        return F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))

    fitted = engine.fit(
        model,
        opt,
        exp.steps,
        loss_at,
        evaluate=evaluate,
        eval_at=lambda step: step % exp.eval_every == 0,
        nonfinite="continue",
        clip=exp.clip,
        progress=progress,
        desc="wikitext",
    )
    T = exp.bptt
    uniform = float(np.mean([math.log(t + 1) for t in range(T)]))
    res = {k: np.asarray(v) for k, v in out.items()}
    res.update(
        train_loss=fitted.losses.astype(np.float32),
        max_entropy=uniform,
        splits=data["splits"],
        vocab=V,
        seconds=fitted.seconds,
        device=config.device_name(device),
    )
    return res


# --- the chapter's study ------------------------------------------------------------------------------------

FIG10_LRS = (1.0, 2.5, 5.0, 10.0)


def experiments(profile: str | None = None, split: str = "valid") -> dict:
    """Fig. 7: one and three layers at the notebook's rates (5, feed-forward 10); Fig. 10: one layer, one rate
    for all weights in ``FIG10_LRS``, two seeds (``quick``, 300 iterations) or five (``full``, the paper's)."""
    p = config.get_profile(profile)
    make = TextExperiment.quick if p == "quick" else TextExperiment.full
    seeds = (0, 1) if p == "quick" else (0, 1, 2, 3, 4)
    fig10_steps = {"quick": 300, "full": 2000}[p]
    return {
        "fig7": {"1 layer": make(split=split), "3 layers": make(split=split, n_layers=3)},
        "fig10": {
            (lr, s): make(split=split, lr=lr, lr_ffn=None, seed=s, steps=fig10_steps)
            for lr in FIG10_LRS
            for s in seeds
        },
    }


def study_split(download: bool | None = None) -> tuple[str, str]:
    """("train", "") when WikiText-2's train split can be had (a local copy, or a download), else ("valid",
    why not): the split the study trains on. ``download=None`` downloads unless ``HF_HUB_OFFLINE=1`` (set by
    ``make test``: tests never download)."""
    import os

    if download is None:
        download = os.environ.get("HF_HUB_OFFLINE", "0") != "1"
    try:
        sources.fetch("wikitext2_train", download=download)
        return "train", ""
    except sources.DataFileError as err:
        return "valid", str(err).split(";")[-1].strip().split(".")[0]


def study_members(profile: str | None = None, split: str | None = None) -> dict[str, TextExperiment]:
    """Every run of the chapter's study (:func:`experiments`) by name: ``"fig7: 1 layer"``, ``"fig7: 3
    layers"`` and ``"fig10: lr=2.5, seed 0"``; ``split`` None: :func:`study_split`'s."""
    exps = experiments(profile, split or study_split()[0])
    return {
        **{f"fig7: {k}": e for k, e in exps["fig7"].items()},
        **{f"fig10: lr={lr:g}, seed {s}": e for (lr, s), e in exps["fig10"].items()},
    }


def study_from_runs(runs: dict[str, dict], why: str = "") -> dict:
    """:func:`study`'s result from the finished runs of :func:`study_members` (by the same names)."""
    fig7 = {k.removeprefix("fig7: "): r for k, r in runs.items() if k.startswith("fig7: ")}
    fig10 = {}
    for k, r in runs.items():
        if k.startswith("fig10: "):
            lr, seed = k.removeprefix("fig10: lr=").split(", seed ")
            fig10[(float(lr), int(seed))] = r
    train_split = next(iter(runs.values()))["splits"][0]
    return {
        "split": "train" if train_split == "wikitext2_train" else "valid",
        "why": why,
        "fig7": fig7,
        "fig10": fig10,
    }


def study_runs(res: dict) -> dict[str, dict]:
    """The runs of a study's result by their :func:`study_members` names, as :func:`study_from_runs` takes them
    (its inverse).

    >>> res = {"why": "", "fig7": {"1 layer": {"splits": ["wikitext2_valid"]}}, "fig10": {(2.5, 0): {}}}
    >>> list(study_runs(res))
    ['fig7: 1 layer', 'fig10: lr=2.5, seed 0']
    """
    return {
        **{f"fig7: {k}": r for k, r in res["fig7"].items()},
        **{f"fig10: lr={lr:g}, seed {s}": r for (lr, s), r in res["fig10"].items()},
    }


def summary_of_runs(res: dict):
    """The chapter's summary as a function of the runs (:func:`study_runs`' names), for
    :func:`companion.experiments.late_verdicts.stopped_values`: each run cut at an evaluation of its late window."""
    return lambda runs: summary(study_from_runs(runs, res["why"]))


def stand_in(members: dict[str, TextExperiment]) -> str:
    """Why runs ``members`` do not train on the paper's data ("" if every one trains on the train split)."""
    if all(e.split == "train" for e in members.values()):
        return ""
    return (
        "trained on WikiText-2's validation split and measured on its test split (the offline stand-in; "
        "the paper trains on the train split)"
    )


def curves(runs: dict[str, dict]) -> dict:
    """What a recorded file keeps of each run: the evaluation steps, the held-out loss, the first layer's
    attention entropy and how far it moved between evaluations."""
    return {key: {name: r[key] for name, r in runs.items()} for key in ("step", "loss", "entropy", "moved")}


def study(profile: str | None = None, progress: bool = True, download: bool | None = None) -> dict:
    """Every run of the chapter, on the train split when it can be had (a local copy, or a download) and on
    the labelled stand-in (``split="valid"``) otherwise (:func:`study_split`); ``"split"`` says which, ``"why"``
    why not the paper's, ``"experiments"`` the configurations (as :func:`experiments`)."""
    split, why = study_split(download)
    members = study_members(profile, split)
    out = study_from_runs({k: run(e, progress=progress) for k, e in members.items()}, why)
    return {**out, "experiments": experiments(profile, split)}


def fig10_table(res: dict) -> tuple[tuple, np.ndarray]:
    """(learning rates, final held-out entropy (n_lr, n_seeds))."""
    keys = sorted(res["fig10"])
    lrs = tuple(sorted({k[0] for k in keys}))
    ent = np.array([[res["fig10"][(lr, s)]["entropy"][-1] for (l2, s) in keys if l2 == lr] for lr in lrs])
    return lrs, ent


def summary(res: dict):
    from scipy.stats import spearmanr

    one, three = res["fig7"]["1 layer"], res["fig7"]["3 layers"]
    lrs, ent = fig10_table(res)
    rho = spearmanr(np.repeat(lrs, ent.shape[1]), ent.ravel()).statistic
    return report.Summary(
        {
            "split": (res["split"], "the split trained on (train: the paper's; valid: the offline stand-in)"),
            "steps": (int(one["step"][-1]), "SGD iterations of the Fig. 7 runs"),
            "vocab": (
                int(one["vocab"]),
                "vocabulary size (most frequent words of the training text, then <unk>)",
            ),
            "log_vocab": (math.log(one["vocab"]), "the loss of a uniform guess over the vocabulary"),
            "uniform_entropy": (
                one["max_entropy"],
                "mean entropy of uniform causal attention over 35 positions",
            ),
            "ent_start_1": (
                float(one["entropy"][0]),
                "1 layer: held-out entropy of the attention at initialisation",
            ),
            "ent_end_1": (float(one["entropy"][-1]), "1 layer: the same at the end"),
            "sparser_1": (
                float(one["entropy"][0] - one["entropy"][-1]),
                "1 layer: entropy at the start minus at the end",
            ),
            "ent_start_3": (float(three["entropy"][0]), "3 layers: first layer's entropy at initialisation"),
            "ent_end_3": (float(three["entropy"][-1]), "3 layers: first layer's entropy at the end"),
            "sparser_3": (
                float(three["entropy"][0] - three["entropy"][-1]),
                "3 layers: first layer, start minus end",
            ),
            "moved_late_1": (
                late_movement(one["moved"][1:]),
                "1 layer: attention movement per evaluation interval, last quarter over the largest interval",
            ),
            "loss_end_1": (float(one["loss"][-1]), "1 layer: held-out loss at the end"),
            "loss_end_3": (float(three["loss"][-1]), "3 layers: held-out loss at the end"),
            "fig10_spearman": (
                float(rho),
                "Fig. 10: rank correlation of the learning rate and the final entropy, all runs",
            ),
            **{
                f"fig10_ent_{lr:g}": (
                    float(ent[i].mean()),
                    f"Fig. 10: mean final entropy at learning rate {lr:g}",
                )
                for i, lr in enumerate(lrs)
            },
            "fig10_loss_max": (
                float(max(r["loss"][-1] for r in res["fig10"].values())),
                "Fig. 10: largest final held-out loss over the runs",
            ),
            "seconds": (
                float(sum(r["seconds"] for r in [*res["fig7"].values(), *res["fig10"].values()])),
                "training time, all runs",
            ),
        }
    )
