"""Word-level corpora of fixed-length sequences for the leading-terms chapters (the leading-terms paper).

The tokeniser is the one of the authors' public code (attn-dynamics-basis):
lower-case, every run of letters is a token and every other character is a
token of its own (digits are split, "didn't" gives "didn", "'", "t"), and
spaces and newlines are dropped. The vocabulary is the ``vocab_size`` most
frequent tokens.

Two ways to make samples of ``T + 1`` tokens:

- ``oov="filter"`` (the paper, Appendix C): each document (a TinyStories
  story) is a sample; documents with a token outside the vocabulary or fewer
  than ``T + 1`` tokens are dropped; the rest are cut to their first
  ``T + 1`` tokens.
- ``oov="unk"`` (the offline stand-ins): the corpus is one token stream cut
  into consecutive windows of ``T + 1`` tokens, and every token outside the
  top ``vocab_size - 1`` becomes ``<unk>`` (the last index). WikiText-2 and
  tiny Shakespeare have far too few windows without a rare word for the
  paper's filter (at 500 words and T = 64: 0 of about 4000 windows).

TinyStories itself comes from the Hugging Face Hub (``roneneldan/TinyStories``,
``TinyStories-train.txt``, stories separated by ``<|endoftext|>``), or from
``<data dir>/tinystories/TinyStories-train.txt``; it is not reachable offline.

>>> tokenize("Didn't Lily see 42 fish?")
['didn', "'", 't', 'lily', 'see', '4', '2', 'fish', '?']
"""

from __future__ import annotations

import collections
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from companion import config
from companion.data import sources

_TOKEN = re.compile(r"[a-z]+|[^a-z]")
UNK = "<unk>"
_OOV_MARK = "\x00"  # a word the source itself hides (WikiText's <unk>): never in the vocabulary
CORPORA = ("wikitext2", "tinyshakespeare", "tinystories")
OOV = ("filter", "unk")
TOKENIZERS = ("words", "gpt2")  # the public code's word-level tokens, or GPT-2's byte-level BPE
TINYSTORIES = dict(
    repo_id="roneneldan/TinyStories",
    filename="TinyStories-train.txt",
    relpath="tinystories/TinyStories-train.txt",
    separator="<|endoftext|>",
)


def tokenize(text: str) -> list[str]:
    """The public code's word-level tokens of ``text`` (see the module docstring)."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in (" ", "\n")]


def _clean_wikitext(text: str) -> str:
    """WikiText's own markers: its ``<unk>`` (a word outside WikiText's vocabulary) becomes our unknown
    token, ``@-@`` etc. their character."""
    text = text.replace("<unk>", f" {_OOV_MARK} ")
    return re.sub(r" @(.)@ ", r"\1", text)


def _bpe(docs: list[str], download: bool) -> list[list[str]]:
    """GPT-2 byte-level BPE tokens of each document (WikiText's <unk> marker kept as one token)."""
    from companion.data.tokenizer import gpt2_tokenizer

    tok = gpt2_tokenizer(download)
    out = []
    for d in docs:
        pieces = d.split(_OOV_MARK)
        row = []
        for i, piece in enumerate(pieces):
            if i:
                row.append(_OOV_MARK)
            row.extend(tok.convert_ids_to_tokens(tok(piece)["input_ids"]))
        out.append(row)
    return out


class CorpusUnavailable(RuntimeError):
    """The corpus cannot be read here (offline, not in a data folder); the message says what to do."""


def tinystories_file(download: bool = True) -> Path:
    """Path of TinyStories' training text: a data folder, else the Hub (checked against the Hub's LFS sha256)."""
    for folder in config.data_dirs():
        path = folder / TINYSTORIES["relpath"]
        if path.is_file():
            return path
    if not download:
        raise CorpusUnavailable("TinyStories not found in the data folders and downloading is disabled")
    try:
        from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

        path = Path(hf_hub_download(TINYSTORIES["repo_id"], TINYSTORIES["filename"], repo_type="dataset"))
        meta = get_hf_file_metadata(
            hf_hub_url(TINYSTORIES["repo_id"], TINYSTORIES["filename"], repo_type="dataset")
        )
    except Exception as err:  # offline, hub error
        raise CorpusUnavailable(
            f"TinyStories ({TINYSTORIES['repo_id']}/{TINYSTORIES['filename']}) is not reachable: "
            f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}. Put the file at "
            f"<dir>/{TINYSTORIES['relpath']} with COMPANION_DATA_DIR=<dir>, or use a stand-in corpus "
            f"({', '.join(c for c in CORPORA if c != 'tinystories')})"
        ) from None
    digest = sources.sha256_of(path)
    if meta.etag and len(meta.etag) == 64 and digest != meta.etag:
        raise sources.DataFileError(f"{path}: sha256 {digest} differs from the Hub's {meta.etag}")
    return path


def documents(corpus: str, download: bool = True) -> list[str]:
    """The raw documents of a corpus: TinyStories' stories, or one document for a stand-in's whole text."""
    config.check_choice("corpus", corpus, CORPORA)
    if corpus == "tinystories":
        text = tinystories_file(download).read_text(encoding="utf-8")
        return [d for d in text.split(TINYSTORIES["separator"]) if d.strip()]
    if corpus == "tinyshakespeare":
        return [sources.fetch("tinyshakespeare", download).read_text(encoding="utf-8")]
    return [
        _clean_wikitext(sources.fetch(name, download).read_text(encoding="utf-8"))
        for name in ("wikitext2_valid", "wikitext2_test")
    ]


@dataclass(frozen=True)
class CorpusConfig:
    """Which corpus, vocabulary size, sequence length T (samples have T + 1 tokens) and OOV rule."""

    corpus: str = "wikitext2"
    vocab_size: int = 256
    T: int = 32
    oov: str = "unk"
    max_samples: int | None = None  # the first samples kept (the paper: 65536)
    tokenizer: str = "words"

    def __post_init__(self):
        config.check_choice("corpus", self.corpus, CORPORA)
        config.check_choice("tokenizer", self.tokenizer, TOKENIZERS)
        config.check_choice("oov", self.oov, OOV)
        config.check_int("vocab_size", self.vocab_size, 2)
        config.check_int("T", self.T, 1)
        if self.max_samples is not None:
            config.check_int("max_samples", self.max_samples, 1)


@dataclass(frozen=True)
class Corpus:
    """Samples ``tokens`` (N, T + 1) over the vocabulary ``itos`` (most frequent first)."""

    cfg: CorpusConfig
    itos: tuple[str, ...]
    tokens: np.ndarray  # (N, T + 1) int64
    n_documents: int
    oov_fraction: float  # share of the kept samples' tokens that are <unk> (0 with oov="filter")
    stoi: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "stoi", {w: i for i, w in enumerate(self.itos)})

    @property
    def V(self) -> int:
        return len(self.itos)

    def split(self, n_train: int) -> tuple[np.ndarray, np.ndarray]:
        """The first ``n_train`` samples and the rest (consecutive windows: held-out text)."""
        config.check_int("n_train", n_train, 1, len(self.tokens) - 1)
        return self.tokens[:n_train], self.tokens[n_train:]

    def fingerprint(self) -> str:
        return hashlib.sha256(self.tokens.tobytes() + "\0".join(self.itos).encode()).hexdigest()[:16]


def build(cfg: CorpusConfig, docs: list[str] | None = None, download: bool = True) -> Corpus:
    """Tokenise, choose the vocabulary and cut samples (see the module docstring).

    Raises:
        ValueError: the corpus has fewer distinct tokens than ``vocab_size``, or
            no sample of ``T + 1`` tokens survives; the message gives what it has.

    >>> c = build(CorpusConfig("wikitext2", vocab_size=4, T=2), docs=["a b a c a b d a b"])
    >>> c.itos, c.tokens.tolist()
    (('a', 'b', 'c', '<unk>'), [[0, 1, 0], [2, 0, 1], [3, 0, 1]])
    """
    docs = documents(cfg.corpus, download) if docs is None else docs
    toks = [tokenize(d) for d in docs] if cfg.tokenizer == "words" else _bpe(docs, download)
    counts = collections.Counter(t for d in toks for t in d)
    counts.pop(_OOV_MARK, None)
    n_words = cfg.vocab_size - (cfg.oov == "unk")
    if len(counts) < n_words:
        raise ValueError(
            f"vocab_size={cfg.vocab_size} is larger than the corpus supports: {cfg.corpus} has "
            f"{len(counts)} distinct tokens (allowed vocab_size <= {len(counts) + (cfg.oov == 'unk')})"
        )
    # most frequent first; ties broken alphabetically so that the vocabulary is reproducible
    words = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n_words]]
    itos = tuple(words) + ((UNK,) if cfg.oov == "unk" else ())
    stoi = {w: i for i, w in enumerate(itos)}
    L = cfg.T + 1
    if cfg.oov == "filter":
        rows = [[stoi[t] for t in d[:L]] for d in toks if len(d) >= L and all(t in stoi for t in d)]
    else:
        stream = np.array([stoi.get(t, len(itos) - 1) for d in toks for t in d], dtype=np.int64)
        n = len(stream) // L
        rows = stream[: n * L].reshape(n, L)
    tokens = np.asarray(rows, dtype=np.int64).reshape(-1, L)
    if cfg.max_samples is not None:
        tokens = tokens[: cfg.max_samples]
    if len(tokens) == 0:
        raise ValueError(
            f"T={cfg.T} leaves no sample: no document of {cfg.corpus} has T + 1 = {L} tokens "
            f"{'all in the vocabulary' if cfg.oov == 'filter' else ''} (use a smaller T)"
        )
    oov = float((tokens == len(itos) - 1).mean()) if cfg.oov == "unk" else 0.0
    return Corpus(cfg, itos, tokens, len(docs), oov)


def load(cfg: CorpusConfig, download: bool = True) -> Corpus:
    """:func:`build` on the corpus's own documents (cached by the configuration)."""
    from companion import cache

    return cache.load_or_compute(
        "wordcorpus", cfg, lambda: build(cfg, download=download), ("companion.data.wordcorpus",)
    )


def note(c: dict) -> str:
    """The corpus a value comes from (``c``: a :class:`CorpusConfig` as a dict, as the studies' results keep
    it), for the scorecard (``claims.check(..., note=...)``).

    >>> note({"corpus": "wikitext2", "vocab_size": 256, "T": 32, "tokenizer": "gpt2"})
    'wikitext2 stand-in, GPT-2 BPE, |V| = 256, T = 32'
    """
    kind = "TinyStories" if c["corpus"] == "tinystories" else f"{c['corpus']} stand-in"
    bpe = ", GPT-2 BPE" if c.get("tokenizer") == "gpt2" else ""
    return f"{kind}{bpe}, |V| = {c['vocab_size']}, T = {c['T']}"
