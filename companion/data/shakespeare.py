"""Character-level unigram and bigram statistics of tiny Shakespeare (N = 65).

The counts are derived once from the original text by
``python -m companion derive-counts`` and committed as
``data/tinyshakespeare_char_counts.json``; the experiments only read that file.
The vocabulary is the sorted set of characters, so index 0 is newline and
index 1 is the space (the most frequent character).

>>> stats = load_char_stats()
>>> stats.n, stats.itos[1], round(float(stats.unigram.sum()), 6)
(65, ' ', 1.0)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from companion import config
from companion.data.sources import DataFileError, fetch, sha256_of
from companion.io import atomic_write_text

COUNTS_FILE = "tinyshakespeare_char_counts.json"


def derive_counts(text: str) -> dict:
    """Vocabulary, unigram and bigram counts of a text, as JSON-ready lists.

    >>> c = derive_counts("abab")
    >>> c["vocab"], c["unigram"], c["bigram"]
    ('ab', [2, 2], [[0, 2], [1, 0]])
    """
    vocab = sorted(set(text))
    index = {ch: i for i, ch in enumerate(vocab)}
    ids = np.fromiter((index[ch] for ch in text), dtype=np.int64, count=len(text))
    n = len(vocab)
    unigram = np.bincount(ids, minlength=n)
    bigram = np.bincount(ids[:-1] * n + ids[1:], minlength=n * n).reshape(n, n)
    return {"vocab": "".join(vocab), "unigram": unigram.tolist(), "bigram": bigram.tolist()}


def write_counts(out: Path | None = None, download: bool = True) -> Path:
    """Derive the counts from the verified original text and write them atomically."""
    src = fetch("tinyshakespeare", download=download)
    counts = derive_counts(src.read_text(encoding="utf-8"))
    counts["source"] = {"file": "tinyshakespeare/input.txt", "sha256": sha256_of(src)}
    out = out or config.committed_data_dir() / COUNTS_FILE
    atomic_write_text(out, json.dumps(counts, separators=(",", ":")) + "\n")
    return out


@dataclass(frozen=True)
class CharStats:
    """Unigram ``pi_u`` (N,) and bigram ``pi_b`` (N, N) distributions, rows summing to 1."""

    itos: str
    unigram: np.ndarray  # (N,)
    bigram: np.ndarray  # (N, N), bigram[i, j] = P(next = j | current = i)

    @property
    def n(self) -> int:
        return len(self.itos)

    @classmethod
    def uniform(cls, n: int) -> "CharStats":
        """Uniform pi_u and pi_b over n tokens (the simplified data of Section 3.1).

        >>> CharStats.uniform(4).bigram.sum(1).tolist()
        [1.0, 1.0, 1.0, 1.0]
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise ValueError(f"n={n!r} is out of range: allowed an integer >= 2")
        itos = "".join(chr(0x4E00 + i) for i in range(n))  # n distinct placeholder symbols
        return cls(itos, np.full(n, 1.0 / n), np.full((n, n), 1.0 / n))

    def independent(self) -> "CharStats":
        """The same unigram with each token drawn independently of the one before (every bigram row is pi_u).

        >>> s = CharStats("ab", np.array([0.75, 0.25]), np.array([[0.0, 1.0], [1.0, 0.0]])).independent()
        >>> s.bigram.tolist(), s.unigram.tolist()
        ([[0.75, 0.25], [0.75, 0.25]], [0.75, 0.25])
        """
        return CharStats(self.itos, self.unigram.copy(), np.tile(self.unigram, (self.n, 1)))

    def decode(self, ids) -> str:
        """Characters of token ids (ids >= N print as ``<N+1>``-style markers)."""
        return "".join(self.itos[i] if i < self.n else f"<{i + 1}>" for i in np.asarray(ids).tolist())


def load_char_stats(path: Path | None = None) -> CharStats:
    """Read the committed counts and normalise them into distributions."""
    path = path or config.committed_data_dir() / COUNTS_FILE
    if not path.is_file():
        raise DataFileError(f"{path} is missing: regenerate it with `python -m companion derive-counts`")
    counts = json.loads(path.read_text(encoding="utf-8"))
    uni = np.asarray(counts["unigram"], dtype=np.float64)
    bi = np.asarray(counts["bigram"], dtype=np.float64)
    # every character but the last one of the text has a successor; the last
    # one ('\n' here) has one too, so no row is empty
    if np.any(bi.sum(1) == 0):
        raise DataFileError(f"{path}: a bigram row is empty; regenerate the counts")
    return CharStats(counts["vocab"], uni / uni.sum(), bi / bi.sum(1, keepdims=True))
