"""The leading-terms text chapter's computations (How transformers learn to associate tokens: Table 1, Fig. 4,
Table 2, Table 3, the neighbours), cached, and their summaries.

:func:`text_study`: minibatch SGD on the corpus at the paper's two rates (Table 1, Fig. 4): cosines of every
weight with its leading term at checkpoints, losses, the leading-term removal of Table 3, and the statistics of
the first batch beside those of the whole training set. The theorem's study is
:mod:`companion.theory.leading_theorem`.

Sizes come from :data:`SIZES` (``quick``: a 2-core CPU in about a minute each; ``full``: the paper's
|V| = 3000, T = 200, three layers, batch 2048, 100 epochs, on TinyStories when it can be read).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch

from companion import cache, config
from companion import train as engine
from companion.data import wordcorpus as wc
from companion.data.streams import EpochOrders
from companion.models.attn_only import AttnOnly, AttnOnlyConfig
from companion.report import Summary, markdown_table
from companion.theory import leading_terms as lt

MODULES = ("companion.theory.leading_study",)
PAIRS = {  # pre-registered in data/claims.toml (lt.neighbours_*) before any statistic was computed
    "B": (("united", "states"), ("such", "as"), ("due", "to")),
    "Sigma": (("he", "she"), ("his", "her"), ("first", "second")),
    "Phi": (("album", "song"), ("season", "game"), ("war", "army")),
}
SHOWN_WORDS = ("the", "he", "album", "river", "war", "game", "song", "city")


@dataclass(frozen=True)
class TextConfig:
    """SGD on the first ``n_train`` samples (the rest held out) with batch ``batch`` for ``epochs``
    epochs at each rate in ``rates``; checkpoints every ``every`` steps. ``micro_batch`` (a divisor of
    ``batch``; None: the whole batch) computes each step's gradient in pieces of that many sequences
    (:func:`companion.train.fit`'s ``accumulate``): the model's residual stream has V dimensions, so a batch's
    activations grow as batch x T x V (about 16 GB a tensor at the full BPE size), and pieces keep one piece's
    in memory. The same gradient up to rounding."""

    corpus: wc.CorpusConfig = wc.CorpusConfig("wikitext2", vocab_size=256, T=32)
    L: int = 3
    n_train: int = 2048
    n_heldout: int = 512
    batch: int = 64
    epochs: int = 10
    rates: tuple[float, ...] = (0.005, 0.05)
    every: int = 32
    stats_from: str = "all"  # "all" training samples (default) or "first_batch" (the paper's code)
    seed: int = 0
    micro_batch: int | None = None

    def __post_init__(self):
        config.check_int("seed", self.seed, low=0)
        config.check_int("L", self.L, 1)
        config.check_int("n_train", self.n_train, 1)
        config.check_int("n_heldout", self.n_heldout, 1)
        config.check_int("batch", self.batch, 1, self.n_train)
        config.check_int("epochs", self.epochs, 1)
        config.check_int("every", self.every, 1)
        config.check_choice("stats_from", self.stats_from, ("all", "first_batch"))
        if self.micro_batch is not None:
            config.check_int("micro_batch", self.micro_batch, 1, self.batch)
            if self.batch % self.micro_batch:
                raise ValueError(
                    f"micro_batch = {self.micro_batch} does not divide batch = {self.batch} (allowed: a divisor "
                    f"of {self.batch})"
                )
        for r in self.rates:
            config.check_float("rate", r, 0.0, low_open=True)


PAPER_CORPUS = wc.CorpusConfig("tinystories", vocab_size=3000, T=200, oov="filter", max_samples=65536)
# Table 2: a BPE vocabulary of 10,000 trained on TinyStories; here GPT-2's BPE restricted to its most frequent tokens
PAPER_BPE = wc.CorpusConfig(
    "tinystories", vocab_size=10000, T=200, oov="filter", max_samples=65536, tokenizer="gpt2"
)
SIZES = {
    "quick": dict(
        text=TextConfig(),
        bpe=TextConfig(wc.CorpusConfig("wikitext2", vocab_size=256, T=32, tokenizer="gpt2"), rates=(0.005,)),
    ),
    "full": dict(
        text=TextConfig(PAPER_CORPUS, n_train=65536 - 4096, n_heldout=4096, batch=2048, epochs=100, every=64),
        bpe=TextConfig(
            PAPER_BPE,
            n_train=65536 - 4096,
            n_heldout=4096,
            batch=2048,
            epochs=10,
            every=32,
            rates=(0.005,),
            micro_batch=256,  # 8 pieces: about 29 GB of activations instead of about 230 (micro_batch's note)
        ),
    ),
}


def configs(profile: str | None = None, corpus: wc.CorpusConfig | None = None) -> dict:
    """The profile's configurations; ``corpus`` replaces the text study's corpus (a stand-in)."""
    sizes = dict(SIZES[config.get_profile(profile)])
    if corpus is not None:
        sizes["text"] = replace(sizes["text"], corpus=corpus)
    return sizes


def corpus_for(cfg: wc.CorpusConfig, download: bool = True) -> tuple[wc.Corpus, str]:
    """The corpus, or (when it is TinyStories and unreachable) the stand-in of the same sizes, and why."""
    try:
        return wc.load(cfg, download), ""
    except wc.CorpusUnavailable as err:
        stand = wc.CorpusConfig("wikitext2", cfg.vocab_size, cfg.T, "unk", cfg.max_samples, cfg.tokenizer)
        return wc.load(stand), str(err)


def fit_to(cfg: TextConfig, corpus: wc.Corpus, standin: bool) -> TextConfig:
    """A stand-in with fewer windows than the configuration asks for keeps 7/8 of them for training and
    1/8 held out (the paper's corpus must have them: :func:`_split` refuses)."""
    n = len(corpus.tokens)
    if not standin or n >= cfg.n_train + cfg.n_heldout:
        return cfg
    held = max(1, n // 8)
    return replace(cfg, n_train=n - held, n_heldout=held, batch=min(cfg.batch, n - held))


# --- Table 1, Fig. 4, Table 3: SGD on the corpus ---


def _split(corpus: wc.Corpus, cfg: TextConfig):
    need = cfg.n_train + cfg.n_heldout
    if len(corpus.tokens) < need:
        raise ValueError(
            f"n_train + n_heldout = {need} is more than the {len(corpus.tokens)} samples of "
            f"{corpus.cfg.corpus} at T = {corpus.cfg.T} (allowed <= {len(corpus.tokens)})"
        )
    return corpus.tokens[: cfg.n_train], corpus.tokens[cfg.n_train : need]


def _mean_loss(model: AttnOnly, seqs: np.ndarray, batch: int = 512) -> float:
    """The model's mean loss on ``seqs``, in batches (on the model's device)."""
    device = next(model.parameters()).device
    with torch.no_grad():
        tot = sum(
            float(model.loss(torch.as_tensor(seqs[i : i + batch], device=device))) * len(seqs[i : i + batch])
            for i in range(0, len(seqs), batch)
        )
    return tot / len(seqs)


def _cosines(model: AttnOnly, leads: dict) -> dict:
    out = {}
    for key, w in model.weights().items():
        out[key] = lt.cosine(w, leads[lt.weight_kind(key)])
    return out


def remove_projection(model: AttnOnly, key: str, lead: torch.Tensor) -> None:
    """Subtract from weight ``key`` (``W_O``, ``W2``, ``V1``, ...) its projection on ``lead`` (in place)."""
    w = model.weights()[key]
    u = lead.to(w.dtype) / lead.norm()
    with torch.no_grad():
        w -= (w * u).sum() * u


def sgd_run(
    train: np.ndarray,
    heldout: np.ndarray,
    stats: lt.Stats,
    V: int,
    cfg: TextConfig,
    rate: float,
    device=None,
    progress: bool = True,
) -> dict:
    """Plain minibatch SGD (shuffled each epoch: data.streams.EpochOrders), cosines every ``cfg.every`` steps and at each
    epoch's end; then Table 3's removals on the final model."""
    device = config.get_device(device)
    T = train.shape[1] - 1
    model = AttnOnly(AttnOnlyConfig(V=V, T=T, L=cfg.L)).to(device)
    leads = {k: stats.leading(k).float().to(device) for k in lt.WEIGHTS}
    orders = EpochOrders(cfg.seed, "train-order", len(train))
    data = torch.as_tensor(train)
    steps_per_epoch = len(train) // cfg.batch
    log = {"step": [], "epoch": [], "cos": [], "train_loss": []}
    epoch_end = {"epoch": [], "heldout_loss": []}
    epoch = {"order": None, "losses": []}  # this epoch's order of the sequences, and its losses so far
    micro = cfg.micro_batch or cfg.batch
    pieces = cfg.batch // micro

    def loss_at(step: int, piece: int = 0) -> torch.Tensor:
        b = step % steps_per_epoch
        if b == 0 and piece == 0:
            epoch["order"], epoch["losses"] = orders.order(step // steps_per_epoch), []
        start = b * cfg.batch + piece * micro
        loss = model.loss(data[epoch["order"][start : start + micro]].to(device))
        if pieces > 1:
            loss = loss * (micro / cfg.batch)  # the batch's mean: each piece's mean times its share
        if piece == 0:
            epoch["losses"].append(loss.detach())  # read at the evaluation, not each step
        else:
            epoch["losses"][-1] = epoch["losses"][-1] + loss.detach()
        return loss

    def evaluate(step: int) -> None:
        """After ``step`` updates: the cosines and the recent training loss; at an epoch's end, the held-out loss."""
        log["step"].append(step)
        log["epoch"].append(step / steps_per_epoch if step else 0.0)
        log["cos"].append(_cosines(model, leads))
        recent = epoch["losses"][-cfg.every :]
        log["train_loss"].append(
            float(np.mean(torch.stack(recent).cpu().double().numpy())) if step else math.log(V)
        )
        if step % steps_per_epoch == 0:
            epoch_end["epoch"].append(step // steps_per_epoch)
            epoch_end["heldout_loss"].append(_mean_loss(model, heldout.astype(np.int64) if step else heldout))

    fitted = engine.fit(
        None,
        torch.optim.SGD(model.parameters(), lr=rate),
        cfg.epochs * steps_per_epoch,
        loss_at,
        evaluate=evaluate,
        eval_at=lambda step: step % cfg.every == 0 or step % steps_per_epoch == 0,
        nonfinite="continue",
        progress=progress,
        desc=f"SGD rate {rate}",
        accumulate=pieces,
    )
    weights = model.weights()
    pairs = [(a, b) for a in range(1, cfg.L + 1) for b in range(a + 1, cfg.L + 1)]
    layer_cos = {
        kind: min((lt.cosine(weights[f"{kind}{a}"], weights[f"{kind}{b}"]) for a, b in pairs), default=1.0)
        for kind in ("V", "W")
    }
    removal = {"original": _mean_loss(model, heldout)}
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for key in model.weights():
        base = lt.weight_kind(key)
        if base == "P":
            continue  # Table 3 removes W_O, V and W only
        remove_projection(model, key, leads[base])
        removal[key] = _mean_loss(model, heldout)
        model.load_state_dict(state)
    return {
        "log": log,
        "epoch_end": epoch_end,
        "removal": removal,
        "layer_cos": layer_cos,
        "seconds": fitted.seconds,
        "steps_per_epoch": steps_per_epoch,
    }


def text_study(
    cfg: TextConfig | None = None,
    profile: str | None = None,
    use_cache: bool = True,
    progress: bool = True,
    device=None,
) -> dict:
    """Statistics (of the whole training set, and of its first shuffled batch) and one SGD run per rate, on
    ``device`` (default: :func:`companion.config.get_device`'s); ``"seconds"`` (the training time of all rates)
    and ``"device"`` besides."""
    cfg = cfg or configs(profile)["text"]
    corpus, why = corpus_for(cfg.corpus)
    cfg = fit_to(cfg, corpus, bool(why))
    device = config.get_device(device)

    def compute():
        train, heldout = _split(corpus, cfg)
        first = train[EpochOrders(cfg.seed, "train-order", len(train)).order(0)[: cfg.batch].numpy()]
        all_stats = lt.statistics(train, corpus.V, device)
        first_stats = lt.statistics(first, corpus.V, device)
        stats = all_stats if cfg.stats_from == "all" else first_stats
        runs = {
            rate: sgd_run(train, heldout, stats, corpus.V, cfg, rate, device, progress) for rate in cfg.rates
        }
        agree = {k: lt.cosine(all_stats.leading(k), first_stats.leading(k)) for k in lt.WEIGHTS}
        basis = {"B": all_stats.B.cpu(), "Sigma": all_stats.Sigma.cpu(), "Phi": all_stats.Phi.cpu()}
        eq10 = lt.eq10_check(train, corpus.V, all_stats.Sigma, device)
        return {
            "runs": runs,
            "stats_agreement": agree,
            "basis": basis,
            "eq10": eq10,
            "itos": corpus.itos,
            "corpus": asdict(corpus.cfg),
            "oov_fraction": corpus.oov_fraction,
            "why_standin": why,
            "n_train": len(train),
            "n_heldout": len(heldout),
            "seconds": sum(r["seconds"] for r in runs.values()),
            "device": config.device_name(device),
        }

    settings = asdict(cfg) | {"corpus_used": asdict(corpus.cfg), "corpus_hash": corpus.fingerprint()}
    return cache.load_or_compute("leading_text", settings, compute, MODULES, use_cache=use_cache)


def first_batch(cfg: TextConfig) -> dict:
    """The first training batch of the text study ``cfg``: the first ``batch`` sequences of the first epoch's
    shuffle (what :func:`sgd_run` draws first, and what the paper's code takes its statistics from)."""
    corpus, why = corpus_for(cfg.corpus)
    cfg = fit_to(cfg, corpus, bool(why))
    train, _ = _split(corpus, cfg)
    return {"x": train[EpochOrders(cfg.seed, "train-order", len(train)).order(0)[: cfg.batch].numpy()]}


def stand_in(members: dict[str, TextConfig]) -> str:
    """Why the text studies ``members`` do not train on the paper's corpus (TinyStories), or "" if they do."""
    whys = []
    for cfg in members.values():
        if cfg.corpus.corpus != PAPER_CORPUS.corpus:
            whys.append(f"{cfg.corpus.corpus} in place of the paper's {PAPER_CORPUS.corpus}")
        elif why := corpus_for(cfg.corpus)[1]:
            whys.append(f"{PAPER_CORPUS.corpus} unavailable ({why}): WikiText-2 of the same sizes")
    return "; ".join(dict.fromkeys(whys))


def bpe_summary(res: dict) -> Summary:
    """Table 2: minimum cosines over checkpoints of the BPE run."""
    run = res["runs"][min(res["runs"])]
    rows = run["log"]["cos"][1:]
    names = {"W_O": "output", "V": "value", "W": "attention", "P": "position"}
    return Summary(
        {
            f"bpe_min_cos_{names[k]}": (
                _min_cos(rows, k),
                f"BPE, rate {min(res['runs'])}: min over checkpoints "
                f"and layers of the cosine of {k} with {lt.LEADING[k]}",
            )
            for k in names
        }
        | {"bpe_oov_fraction": (res["oov_fraction"], "share of <unk> tokens")}
    )


def _min_cos(cos_rows: list[dict], prefix: str) -> float:
    return min(v for row in cos_rows for k, v in row.items() if lt.weight_kind(k) == prefix)


def _min_shown(cos_row: dict) -> float:
    """Smallest cosine over the weights Fig. 4 shows (W_O, V, W; not P)."""
    return min(v for k, v in cos_row.items() if not k.startswith("P"))


def _at_epoch(run: dict, epoch: float) -> dict:
    log = run["log"]
    i = int(np.searchsorted(np.asarray(log["epoch"]), epoch - 1e-9))
    return log["cos"][min(i, len(log["cos"]) - 1)]


def eq10_summary(res: dict) -> Summary:
    """Eq. (10) as printed beside the Sigma_B the study ranks (:func:`companion.theory.leading_terms.eq10_check`,
    on the study's training set)."""
    e = res["eq10"]
    return Summary(
        {
            "eq10_gap": (
                e["gap"],
                "Eq. (10) as printed against Sigma_B = B-bar^T B-bar: relative Frobenius distance",
            ),
            "eq10_cos": (e["cos"], "their cosine"),
            "eq10_top10": (
                e["top"],
                "share of a row's 10 largest entries the two have in common, mean over rows",
            ),
            "eq10_uncentred_gap": (
                e["uncentred_gap"],
                "Eq. (10) as printed against the Gram matrix of the uncentred bigram frequencies: relative distance",
            ),
        }
    )


def neighbour_ranks(res: dict) -> dict:
    """Rank of every pre-registered neighbour in its word's row, per basis."""
    return {
        basis: {f"{w} -> {n}": lt.neighbour_rank(res["basis"][basis], res["itos"], w, n) for w, n in pairs}
        for basis, pairs in PAIRS.items()
    }


def text_summary(res: dict, cfg: TextConfig | None = None) -> Summary:
    small, large = min(res["runs"]), max(res["runs"])
    rs, rl = res["runs"][small], res["runs"][large]
    skip0 = rs["log"]["cos"][1:]  # checkpoint 0 is the zero initialisation (cosine 0 by definition)
    rem = rl["removal"]
    values = [rem[k] for k in rem if k.startswith("V")]
    attns = [rem[k] for k in rem if k.startswith("W") and k != "W_O"]
    ranks = neighbour_ranks(res)
    epochs = rl["epoch_end"]["epoch"][-1]
    out = {
        "min_cos_output": (_min_cos(skip0, "W_O"), f"rate {small}: min over checkpoints of cos(W_O, B-bar)"),
        "min_cos_value": (
            _min_cos(skip0, "V"),
            f"rate {small}: min over checkpoints and layers of cos(V, Phi^T B^T)",
        ),
        "min_cos_attention": (
            _min_cos(skip0, "W"),
            f"rate {small}: min over checkpoints and layers of cos(W, Q-bar)",
        ),
        "min_cos_position": (
            _min_cos(skip0, "P"),
            f"rate {small}: min over checkpoints and layers of cos(P, Delta)",
        ),
        "large_min_cos_30": (
            _min_shown(_at_epoch(rl, min(30, epochs))),
            f"rate {large}: min cosine over W_O, V, W after epoch {min(30, epochs)}",
        ),
        "large_min_cos_end": (
            _min_shown(rl["log"]["cos"][-1]),
            f"rate {large}: min cosine over W_O, V, W after epoch {epochs}",
        ),
        "large_min_cos_P_end": (
            min(v for k, v in rl["log"]["cos"][-1].items() if k.startswith("P")),
            f"rate {large}: min cosine of P with Delta after epoch {epochs} (not in Fig. 4)",
        ),
        "epochs": (epochs, "epochs trained"),
        "loss_end_large": (
            rl["epoch_end"]["heldout_loss"][-1],
            f"held-out loss after training at rate {large}",
        ),
        "loss_start": (rl["epoch_end"]["heldout_loss"][0], "held-out loss at initialisation (ln |V|)"),
        "loss_start_gap": (
            rl["epoch_end"]["heldout_loss"][0] - math.log(res["corpus"]["vocab_size"]),
            "that loss minus ln |V| (zero initialisation: a uniform prediction)",
        ),
        "layers_parallel": (
            min(rs["layer_cos"].values()),
            f"rate {small}: min cosine between two layers' V, or two layers' W",
        ),
        "removal_original": (rem["original"], "held-out loss of the rate-0.05 model"),
        "removal_output": (rem["W_O"], "... without W_O's leading-term component"),
        "removal_value_max": (max(values), "... without one value matrix's (worst layer)"),
        "removal_value_min": (min(values), "... without one value matrix's (mildest layer)"),
        "removal_attention_max": (max(attns), "... without one attention matrix's (worst layer)"),
        "removal_order": (
            min(rem["W_O"] - max(values), min(values) - max(attns)),
            "min(output - worst value, mildest value - worst attention)",
        ),
        "oov_fraction": (res["oov_fraction"], "share of <unk> tokens in the samples"),
    }
    for k in lt.WEIGHTS:
        out[f"first_batch_cos_{k}"] = (
            res["stats_agreement"][k],
            f"cosine of {lt.LEADING[k]} from the first batch and from the whole training set",
        )
    for basis, r in ranks.items():
        out[f"rank_{basis}"] = (max(r.values()), f"{basis}: worst rank among {', '.join(r)}")
    return Summary(out)


# --- what the text chapter shows ---

PAPER_TABLE1 = {"Output": ("W_O", 0.998486), "Value": ("V", 0.999169), "Attention": ("W", 0.999496)}
PAPER_TABLE3 = {
    "Original": ("original", 5.349),
    "Attention Layer 0": ("W1", 5.350),
    "Attention Layer 1": ("W2", 5.352),
    "Attention Layer 2": ("W3", 5.361),
    "Value Layer 0": ("V1", 6.192),
    "Value Layer 1": ("V2", 6.526),
    "Value Layer 2": ("V3", 6.520),
    "Output": ("W_O", 8.287),
}


BASES = {"B": "bigram B-bar", "Sigma": "interchangeability Sigma_B", "Phi": "context Phi-bar"}
NEIGHBOUR_CLAIMS = {
    "B": "lt.neighbours_bigram",
    "Sigma": "lt.neighbours_interchange",
    "Phi": "lt.neighbours_context",
}


def banner(res: dict) -> str:
    """The stand-in banner (MyST), or a line naming the paper's corpus when it was used."""
    c = res["corpus"]
    if c["corpus"] == "tinystories":
        return f"Corpus: **TinyStories** (the paper's), {c['vocab_size']} words, T = {c['T']}."
    why = f" TinyStories could not be read: {res['why_standin']}" if res["why_standin"] else ""
    return (
        f":::{{warning}}\n**Stand-in corpus, not TinyStories.** Every number below comes from "
        f"{c['corpus']} ({res['n_train']} training and {res['n_heldout']} held-out windows of T + 1 = "
        f"{c['T'] + 1} tokens, {c['vocab_size']} tokens including `<unk>`, which is "
        f"{res['oov_fraction']:.0%} of the text), tokenised as in the authors' code.{why} The paper's "
        "numbers are shown as references, not reproduced.\n:::"
    )


PAPER_TABLE2 = {"Output": ("W_O", 0.997891), "Value": ("V", 0.998800), "Attention": ("W", 0.999914)}


def table1_markdown(res: dict, paper: dict = PAPER_TABLE1) -> str:
    """Table 1 (or Table 2 with ``paper=PAPER_TABLE2``): the paper's minimum cosines beside ours (rate
    0.005), with P against Delta added."""
    run = res["runs"][min(res["runs"])]
    rows = [[name, value, _min_cos(run["log"]["cos"][1:], key)] for name, (key, value) in paper.items()]
    rows.append(["Position (P vs Delta)", "not measured", _min_cos(run["log"]["cos"][1:], "P")])
    return markdown_table(["weights", "paper (TinyStories)", "here"], rows, digits=6)


def table3_markdown(res: dict) -> str:
    """Table 3: held-out loss after removing each weight's leading-term component (rate 0.05 model)."""
    rem = res["runs"][max(res["runs"])]["removal"]
    rows = [[name, paper, rem.get(key, float("nan"))] for name, (key, paper) in PAPER_TABLE3.items()]
    return markdown_table(["weights removed", "paper (TinyStories)", "here (held-out)"], rows)


def token_cell(tok: str) -> str:
    r"""A token as a code span that survives a Markdown table ('|' escaped, a backtick fenced by two).

    >>> token_cell("<unk>"), token_cell("|"), token_cell("`")
    ('`<unk>`', '`\\|`', '`` ` ``')
    """
    if "`" in tok:
        return f"`` {tok} ``"
    return "`" + tok.replace("|", "\\|") + "`"


def neighbours_markdown(res: dict, basis: str, words=SHOWN_WORDS, k: int = 10) -> str:
    """Fig. 5 for one basis: the top-k tokens of each word's row, one column per word."""
    words = [w for w in words if w in res["itos"]]
    cols = [lt.top_neighbours(res["basis"][basis], res["itos"], w, k) for w in words]
    return markdown_table(
        [token_cell(w) for w in words], [[token_cell(c[r]) for c in cols] for r in range(k)]
    )


def prereg_markdown(res: dict, cutoff: dict) -> str:
    """The pre-registered pairs, each neighbour's rank, and the registered cutoff per basis."""
    rows = [
        [BASES[b], pair, rank, f"< {cutoff[b]:g}"]
        for b, ranks in neighbour_ranks(res).items()
        for pair, rank in ranks.items()
    ]
    return markdown_table(["basis", "pair (row -> neighbour)", "rank (0 = top)", "registered"], rows)
