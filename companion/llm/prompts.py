"""Prompt sets for the LLM probes (main paper Sections 2.2, 4.1; Appendices C.1, I).

* IOI: sentences like "When Mary and John went to a store, John gave a drink
  to", generated here from templates with a seeded generator. As in the paper,
  the place takes "a", not "the", so that "the" never appears in the context.
  Only names that are one token (with their leading space) for the tokenizer
  in use are drawn.
* Factual recall: "Madrid is located in" -> Spain (Table 1, Fig. 5) and the 20
  prompts of Table 5; the target token is the first token of " " + target.
* Prepositions: the 30 prepositions and the 40 sentences of Appendix I.1.

The fixed lists are committed in ``data/llm_prompts.json`` (copied from the
paper); the IOI vocabulary below is this book's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from companion import config
from companion.config import check_int

IOI_TEMPLATES = (
    "When {IO} and {S} went to a {place}, {S} gave a {object} to",
    "When {S} and {IO} went to a {place}, {S} gave a {object} to",
    "After {IO} and {S} arrived at a {place}, {S} handed a {object} to",
    "While {IO} and {S} were sitting in a {place}, {S} passed a {object} to",
    "Once {S} and {IO} had lunch at a {place}, {S} threw a {object} to",
)
IOI_NAMES = (
    "Mary",
    "John",
    "Tom",
    "James",
    "Anna",
    "Paul",
    "Mark",
    "Sarah",
    "David",
    "Lisa",
    "Michael",
    "Kate",
    "Peter",
    "Laura",
    "Daniel",
    "Emma",
    "Robert",
    "Alice",
    "Steven",
    "Rachel",
    "Chris",
    "Jessica",
    "Kevin",
    "Amy",
    "Brian",
    "Karen",
    "George",
    "Julia",
    "Eric",
    "Linda",
    "Frank",
    "Susan",
    "Adam",
    "Helen",
    "Jack",
    "Grace",
    "Sam",
    "Rose",
    "Ben",
    "Claire",
)
IOI_PLACES = (
    "store",
    "park",
    "restaurant",
    "school",
    "hospital",
    "station",
    "garden",
    "market",
    "library",
    "museum",
    "beach",
    "cafe",
)
IOI_OBJECTS = (
    "drink",
    "book",
    "ring",
    "snack",
    "ball",
    "computer",
    "necklace",
    "flower",
    "gift",
    "letter",
    "bag",
    "key",
)
THE = " the"


@dataclass(frozen=True)
class IOIPrompt:
    prompt: str
    io: str  # the indirect object, with its leading space (the correct answer)
    s: str  # the subject, repeated in the sentence


@dataclass(frozen=True)
class FactualPrompt:
    prompt: str
    target: str  # as the paper gives it, e.g. "New York Harbor"
    target_token: str  # the first token of " " + target
    target_id: int
    single_token: bool


def token_ids(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def single_token_id(tokenizer, text: str, what: str = "target") -> int:
    """The id of ``text`` if it is exactly one token, else a ValueError naming it and its pieces."""
    ids = token_ids(tokenizer, text)
    if len(ids) != 1:
        pieces = [tokenizer.decode([i]) for i in ids]
        raise ValueError(f"{what} {text!r} is not a single token for this tokenizer: it splits into {pieces}")
    return ids[0]


def single_token_names(tokenizer, names=IOI_NAMES) -> list[str]:
    """The names that are one token with a leading space."""
    return [n for n in names if len(token_ids(tokenizer, " " + n)) == 1]


def ioi_prompts(tokenizer, n: int = 100, seed: int = 0) -> list[IOIPrompt]:
    """``n`` IOI sentences (templates, names, places, objects drawn with ``seed``).

    Raises:
        ValueError: fewer than two single-token names for this tokenizer.
    """
    check_int("n", n, low=1)
    names = single_token_names(tokenizer)
    if len(names) < 2:
        raise ValueError(f"only {len(names)} of the IOI names are single tokens for this tokenizer; need 2")
    rng = np.random.default_rng(config.seed_streams(seed, ["ioi-prompts"])["ioi-prompts"])
    out = []
    for _ in range(n):
        template = IOI_TEMPLATES[rng.integers(len(IOI_TEMPLATES))]
        io, s = rng.choice(names, size=2, replace=False)
        text = template.format(
            IO=io,
            S=s,
            place=IOI_PLACES[rng.integers(len(IOI_PLACES))],
            object=IOI_OBJECTS[rng.integers(len(IOI_OBJECTS))],
        )
        out.append(IOIPrompt(text, " " + str(io), " " + str(s)))
    return out


@lru_cache(maxsize=1)
def _committed() -> dict:
    return json.loads((config.committed_data_dir() / "llm_prompts.json").read_text(encoding="utf-8"))


def prepositions() -> list[str]:
    """The 30 prepositions of Appendix I.1."""
    return list(_committed()["prepositions"])


def preposition_sentences() -> list[str]:
    """The 40 sentences ending with a preposition of Appendix I.1."""
    return list(_committed()["preposition_sentences"])


def _factual(tokenizer, rows) -> list[FactualPrompt]:
    out = []
    for row in rows:
        ids = token_ids(tokenizer, " " + row["target"])
        out.append(
            FactualPrompt(row["prompt"], row["target"], tokenizer.decode(ids[:1]), ids[0], len(ids) == 1)
        )
    return out


def factual_madrid(tokenizer) -> FactualPrompt:
    """ "Madrid is located in" -> Spain (Table 1, Fig. 5)."""
    return _factual(tokenizer, [_committed()["factual_madrid"]])[0]


def factual_table5(tokenizer) -> list[FactualPrompt]:
    """The 20 prompts of Table 5 with the first token of each target."""
    return _factual(tokenizer, _committed()["factual_table5"])
