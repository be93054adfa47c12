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
    sha256: str


SOURCES = {
    "tinyshakespeare": Source(
        "tinyshakespeare/input.txt",
        "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
        "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
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
            digest = sha256_of(path)
            if digest != src.sha256:
                raise DataFileError(
                    f"{path} is corrupt: sha256 {digest} differs from the expected {src.sha256}. "
                    f"Delete it and fetch a fresh copy from {src.url}")
            return path
    if download:
        target = config.cache_dir() / "downloads" / src.relpath
        try:
            _download(src.url, target, src.sha256)
            return target
        except OSError as err:  # network down, 404, checksum
            reason = f"download from {src.url} failed ({err})"
    else:
        reason = "downloading is disabled"
    raise DataFileError(
        f"{name} data not found; looked in: {', '.join(searched)}; {reason}. "
        f"Get the file from {src.url} and place it at <dir>/{src.relpath} with "
        f"COMPANION_DATA_DIR=<dir> set (sha256 {src.sha256}).")


def _download(url: str, target: Path, sha256: str) -> None:
    with urllib.request.urlopen(url, timeout=30) as resp:
        data = resp.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise OSError(f"downloaded file has sha256 {digest}, expected {sha256}")
    atomic_write_bytes(target, data)
