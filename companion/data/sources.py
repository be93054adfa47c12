"""Third-party files: where they are looked for, where they come from, their sha256.

A file is looked for under every folder of :func:`companion.config.data_dirs`
(``$COMPANION_DATA_DIR`` first, then the download cache); when absent and
``download=True`` it is fetched from its canonical URL into the cache. Its
sha256 is always checked. Nothing third-party is committed to the repository.
"""

from __future__ import annotations

import hashlib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from companion import config
from companion.io import atomic_write_bytes


@dataclass(frozen=True)
class Source:
    """A third-party file: its relative path in a data folder, URL and checksum."""

    relpath: str
    url: str
    sha256: str | None  # None: no published checksum; the file is checked by its line count
    prefix: bytes = b""  # prepended to the downloaded bytes before the check (see gpt2_merges)
    lines: int | None = None  # the expected number of lines, checked when sha256 is None


SOURCES = {
    "tinyshakespeare": Source(
        "tinyshakespeare/input.txt",
        "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
        "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
    ),
    "gsm8k_test": Source(
        "gsm8k/test.jsonl",
        "https://raw.githubusercontent.com/openai/grade-school-math/b0bb162abedc65e1fdd8e93ed090fd7598ee68bc/"
        "grade_school_math/data/test.jsonl",
        "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
    ),
    "gsm8k_train": Source(
        "gsm8k/train.jsonl",
        "https://raw.githubusercontent.com/openai/grade-school-math/b0bb162abedc65e1fdd8e93ed090fd7598ee68bc/"
        "grade_school_math/data/train.jsonl",
        "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465",
    ),
    "wikitext2_valid": Source(
        "wikitext-2/valid.txt",
        "https://raw.githubusercontent.com/pytorch/examples/d5678bc8ac0cdd79dbd5e44d4130271018bcec4e/"
        "word_language_model/data/wikitext-2/valid.txt",
        "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8",
    ),
    "wikitext2_test": Source(
        "wikitext-2/test.txt",
        "https://raw.githubusercontent.com/pytorch/examples/d5678bc8ac0cdd79dbd5e44d4130271018bcec4e/"
        "word_language_model/data/wikitext-2/test.txt",
        "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0",
    ),
    # The train split is not in ../shared/data and no sha256 of this copy is published; it is checked by its
    # line count, 36718 (torchtext's NUM_LINES for wiki.train.tokens, which valid.txt and test.txt above match:
    # 3760 and 4358). With network access, pin its sha256 here.
    "wikitext2_train": Source(
        "wikitext-2/train.txt",
        "https://raw.githubusercontent.com/pytorch/examples/d5678bc8ac0cdd79dbd5e44d4130271018bcec4e/"
        "word_language_model/data/wikitext-2/train.txt",
        None,
        lines=36718,
    ),
    # the GPT-2 byte-level BPE files (50257 tokens, 50000 merges), for offline tokenizer tests and stand-ins
    "gpt2_vocab": Source(
        "gpt2-tokenizer/vocab.json",
        "https://raw.githubusercontent.com/dilawarm/assignment1-basics/c887f06413d6e05447ecb292a33dc5e243f7d2a5/"
        "tests/fixtures/gpt2_vocab.json",
        "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    ),
    "gpt2_merges": Source(
        "gpt2-tokenizer/merges.txt",
        "https://raw.githubusercontent.com/dilawarm/assignment1-basics/c887f06413d6e05447ecb292a33dc5e243f7d2a5/"
        "tests/fixtures/gpt2_merges.txt",
        "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
        prefix=b"#version: 0.2\n",  # the standard header, so that tokenizers reads the first merge too
    ),
}


class DataFileError(FileNotFoundError):
    """A third-party file is missing or corrupt; the message says where it was looked for."""


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def available(*names: str) -> bool:
    """Whether every named source has a verified local copy (nothing is downloaded).

    >>> available()
    True
    """
    try:
        for name in names:
            fetch(name, download=False)
    except DataFileError:
        return False
    return True


def fetch(name: str, download: bool = True) -> Path:
    """Path of the verified local copy of a known source, downloading it if allowed.

    Raises:
        ValueError: ``name`` is not a known source.
        DataFileError: the file is missing (and could not be downloaded) or its
            sha256 does not match; the message lists the places searched.
    """
    config.check_choice("data source", name, SOURCES)
    src = SOURCES[name]
    searched = []
    for folder in config.data_dirs():
        path = folder / src.relpath
        searched.append(str(path))
        if path.is_file():
            problem = _problem(path.read_bytes(), src)
            if problem:
                raise DataFileError(
                    f"{path} is corrupt: {problem}. Delete it and fetch a fresh copy from {src.url}"
                )
            return path
    if download:
        target = config.cache_dir() / "downloads" / src.relpath
        try:
            _download(src, target)
            return target
        except OSError as err:  # network down, 404, checksum
            reason = f"download from {src.url} failed ({err})"
    else:
        reason = "downloading is disabled"
    raise DataFileError(
        f"{name} data not found; looked in: {', '.join(searched)}; {reason}. "
        f"Get the file from {src.url} and place it at <dir>/{src.relpath} with "
        f"COMPANION_DATA_DIR=<dir> set ({_expected(src)})."
    )


def _expected(src: Source) -> str:
    return f"sha256 {src.sha256}" if src.sha256 else f"{src.lines} lines; no published sha256"


def _problem(data: bytes, src: Source) -> str:
    """Why ``data`` is not the file ``src`` names ("" when it is)."""
    if src.sha256 is not None:
        digest = hashlib.sha256(data).hexdigest()
        return "" if digest == src.sha256 else f"sha256 {digest} differs from the expected {src.sha256}"
    n = data.count(b"\n")
    return "" if n == src.lines else f"{n} lines, expected {src.lines}"


def _download(src: Source, target: Path) -> None:
    with urllib.request.urlopen(src.url, timeout=30) as resp:
        data = src.prefix + resp.read()
    problem = _problem(data, src)
    if problem:
        raise OSError(f"the downloaded file does not match: {problem}")
    atomic_write_bytes(target, data)
