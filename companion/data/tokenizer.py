"""The real GPT-2 tokenizer, offline: built once from its vocabulary and merges files
(:mod:`companion.data.sources`: ``$COMPANION_DATA_DIR/gpt2-tokenizer`` or the canonical URLs, sha256-checked)
into the cache, then loaded with transformers' ``AutoTokenizer``. The word corpora
(:mod:`companion.data.wordcorpus`) and the language-model stand-ins (:mod:`companion.llm.standin`) read text
through it.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from companion import config
from companion.data import sources


def tokenizer_dir(download: bool = True) -> Path:
    """A folder with the GPT-2 tokenizer (vocab.json, merges.txt and transformers' files), built once."""
    out = config.cache_dir() / "llm" / "gpt2-tokenizer"
    if (out / "tokenizer_config.json").is_file():
        return out
    from transformers import GPT2Tokenizer

    tmp = Path(tempfile.mkdtemp(dir=config.cache_dir()))
    try:
        for name in ("gpt2_vocab", "gpt2_merges"):
            src = sources.fetch(name, download=download)
            shutil.copy(src, tmp / src.name)
        GPT2Tokenizer.from_pretrained(tmp).save_pretrained(tmp)
        out.parent.mkdir(parents=True, exist_ok=True)
        if not out.exists():
            tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def gpt2_tokenizer(download: bool = True):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_dir(download))
