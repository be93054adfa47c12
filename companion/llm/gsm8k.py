"""GSM8K few-shot chain-of-thought harness (main paper, Section 4.2, Table 2).

* Data: ``test.jsonl`` / ``train.jsonl`` of openai/grade-school-math (found in
  ``$COMPANION_DATA_DIR/gsm8k`` or downloaded from the pinned commit, sha256
  checked). Malformed lines are counted and reported, never fatal.
* Prompts: k exemplars (k = 1, 2, 4, 8) drawn from the training problems with
  a fixed seed; each shows the question, the reference solution with its
  calculator annotations ``<<...>>`` removed, and "The answer is N.".
* Decoding: greedy, batched (left padding), stopped at the next "Question:"
  or after ``max_new_tokens``.
* Scoring: the reference is the number after "####"; a generation's answer is
  the number after its last "The answer is", else its last number; both are
  normalised (commas, trailing ".0") and compared as strings.

>>> reference_answer("So she has 18 - 2 = <<18-2=16>>16.\\n#### 1,600")
'1600'
>>> extract_answer("She pays 3 * 4 = 12 dollars. The answer is 12.\\n\\nQuestion: ...")
'12'
>>> extract_answer("no digits here") is None
True
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass

import numpy as np

from companion import config
from companion.config import check_choice
from companion.data import sources

SPLITS = {"test": "gsm8k_test", "train": "gsm8k_train"}
SHOTS = (0, 1, 2, 4, 8)
STOP = "\nQuestion:"
_NUMBER = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True)
class Problem:
    question: str
    answer: str  # the full reference solution, ending with "#### N"

    @property
    def target(self) -> str:
        return reference_answer(self.answer)


def normalise(number: str) -> str:
    s = number.replace(",", "").replace("$", "").strip().rstrip(".")
    if re.fullmatch(r"-?\d+\.0+", s):
        s = s.split(".")[0]
    return s


def reference_answer(answer: str) -> str:
    """The number after ``####`` in a reference solution.

    Raises:
        ValueError: no ``####`` line.
    """
    if "####" not in answer:
        raise ValueError(f"reference solution without '####': {answer[-80:]!r}")
    return normalise(answer.split("####")[-1])


def extract_answer(generation: str) -> str | None:
    """The answer of a generated solution (cut at the stop string): after "The answer is", else the last number."""
    text = generation.split(STOP)[0]
    tail = text.rsplit("The answer is", 1)
    if len(tail) == 2:
        m = _NUMBER.search(tail[1])
        if m:
            return normalise(m.group())
    numbers = _NUMBER.findall(text)
    return normalise(numbers[-1]) if numbers else None


def load(split: str = "test", download: bool = True) -> tuple[list[Problem], int]:
    """(problems, number of malformed lines skipped) of a split; a warning reports any skipped line."""
    check_choice("split", split, SPLITS)
    path = sources.fetch(SPLITS[split], download=download)
    return parse_lines(path.read_text(encoding="utf-8").splitlines(), source=str(path))


def parse_lines(lines: list[str], source: str = "<lines>") -> tuple[list[Problem], int]:
    problems, bad = [], []
    for no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            p = Problem(str(row["question"]), str(row["answer"]))
            reference_answer(p.answer)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            bad.append((no, type(err).__name__))
            continue
        problems.append(p)
    if bad:
        warnings.warn(
            f"{source}: skipped {len(bad)} malformed line(s), first at line {bad[0][0]} ({bad[0][1]})",
            stacklevel=2,
        )
    return problems, len(bad)


def solution_text(answer: str) -> str:
    """A reference solution as an exemplar: annotations removed, "The answer is N." at the end."""
    body = re.sub(r"<<[^>]*>>", "", answer.split("####")[0]).strip()
    return f"{body} The answer is {reference_answer(answer)}."


def few_shot_prefix(train: list[Problem], k: int, seed: int = 0) -> str:
    """k exemplars from the training problems, drawn with ``seed``."""
    check_choice("shots k", k, SHOTS)
    if k > len(train):
        raise ValueError(f"k={k} exemplars requested but only {len(train)} training problems")
    rng = np.random.default_rng(config.seed_streams(seed, ["gsm8k-shots"])["gsm8k-shots"])
    picks = rng.choice(len(train), size=k, replace=False)
    return "".join(
        f"Question: {train[i].question}\nAnswer: {solution_text(train[i].answer)}\n\n" for i in picks
    )


def prompt(prefix: str, problem: Problem) -> str:
    return f"{prefix}Question: {problem.question}\nAnswer:"


def generate(
    model,
    tokenizer,
    prompts: list[str],
    max_new_tokens: int = 256,
    batch_size: int = 8,
    progress: bool = False,
) -> list[str]:
    """Greedy continuations of ``prompts`` cut at :data:`STOP` (:func:`companion.llm.measure.generate`)."""
    from companion.llm import measure

    return measure.generate(model, tokenizer, prompts, max_new_tokens, batch_size, progress, stop=STOP)


def accuracy(generations: list[str], problems: list[Problem]) -> float:
    if len(generations) != len(problems):
        raise ValueError(f"{len(generations)} generations for {len(problems)} problems")
    return float(np.mean([extract_answer(g) == p.target for g, p in zip(generations, problems)]))
