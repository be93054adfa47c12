"""The factual-recall task of the talk (Nichani, Lee, Bietti, ICLR 2025): subjects, relations and their answers.

Vocabulary: S subjects, R relations, ``n_noise`` noise tokens and EOS (ids in that order; 41 tokens for the
paper's S = 16, R = 4, 20 noise tokens). A sequence of length T has EOS at the last position, the subject and the
relation at two distinct uniform positions before it, noise tokens (uniform) elsewhere. The answer a*(s, r) is
one of |A| = D R answers, each relation owning the block A_r = {rD, ..., rD + D - 1}. ``facts="structured"`` is
the authors' notebook: a*(s, r) = floor(s D / S) + r D (S / D subjects share an answer within a relation);
``"random"``: uniform in A_r. The models and training are :mod:`companion.experiments.factual`'s and
:mod:`companion.experiments.fact_capacity`'s.

>>> task = FactTask(seq_len=8)
>>> b = task.sample(np.random.default_rng(0), 3)
>>> b.tokens.shape, bool((b.tokens[:, -1] == task.eos).all()), task.vocab_size, task.n_answers
((3, 8), True, 41, 32)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from companion import config
from companion.config import check_choice, check_int
from companion.data import counter

FACTS = ("structured", "random")


@dataclass(frozen=True)
class FactBatch:
    tokens: np.ndarray  # (batch, T), EOS last
    subject: np.ndarray  # (batch,)
    relation: np.ndarray  # (batch,) in [0, R)
    answer: np.ndarray  # (batch,) in [0, D R)


@dataclass(frozen=True)
class FactTask:
    """The factual-recall distribution; validated on construction (see the module docstring)."""

    n_subjects: int = 16
    n_relations: int = 4
    answers_per_relation: int = 8
    n_noise: int = 20
    seq_len: int = 32
    facts: str = "structured"
    facts_seed: int = 0

    def __post_init__(self):
        check_int("n_subjects (S)", self.n_subjects, low=1)
        check_int("n_relations (R)", self.n_relations, low=1)
        check_choice("facts", self.facts, FACTS)
        high = self.n_subjects if self.facts == "structured" else None
        # structured facts give each answer of a relation floor(S / D) subjects: D > S would leave answers unused
        check_int("answers_per_relation (D)", self.answers_per_relation, low=1, high=high)
        check_int("seq_len (T)", self.seq_len, low=3)
        check_int("n_noise", self.n_noise, low=1 if self.seq_len > 3 else 0)

    @property
    def vocab_size(self) -> int:
        return self.n_subjects + self.n_relations + self.n_noise + 1

    @property
    def eos(self) -> int:
        return self.vocab_size - 1

    @property
    def n_answers(self) -> int:
        return self.answers_per_relation * self.n_relations

    def fact_table(self) -> np.ndarray:
        """(S, R) the answer a*(s, r)."""
        S, R, D = self.n_subjects, self.n_relations, self.answers_per_relation
        if self.facts == "structured":
            within = (np.arange(S) * D) // S
            return within[:, None] + D * np.arange(R)[None, :]
        rng = np.random.default_rng(config.seed_streams(self.facts_seed, ["facts"])["facts"])
        return rng.integers(0, D, size=(S, R)) + D * np.arange(R)[None, :]

    def sample(self, rng: np.random.Generator, batch: int) -> FactBatch:
        check_int("batch", batch, low=1)
        S, R, T = self.n_subjects, self.n_relations, self.seq_len
        tokens = (
            S + R + rng.integers(0, self.n_noise, size=(batch, T))
            if self.n_noise
            else np.zeros((batch, T), int)
        )
        s = rng.integers(0, S, size=batch)
        r = rng.integers(0, R, size=batch)
        ps = rng.integers(0, T - 1, size=batch)
        pr = rng.integers(0, T - 2, size=batch)
        pr = pr + (pr >= ps)  # distinct from the subject's position
        rows = np.arange(batch)
        tokens[rows, ps] = s
        tokens[rows, pr] = S + r
        tokens[:, -1] = self.eos
        return FactBatch(tokens.astype(np.int64), s, r, self.fact_table()[s, r])

    def draw(self, seeds, steps, batch: int, *, stream: int = 0, device=None) -> FactBatch:
        """The counter-based batches of ``seeds`` (R) at ``steps`` (S) of ``stream`` on ``device``: a
        :class:`FactBatch` of tensors with leading dimensions (R, S), each batch a function of (seed, stream,
        step) alone (as :meth:`companion.data.recall.RecallTask.draw`), with :meth:`sample`'s distribution."""
        S, R, T = self.n_subjects, self.n_relations, self.seq_len
        draws = counter.Draws("facts", seeds, steps, stream, batch, device)
        if self.n_noise:
            tokens = S + R + counter.uniform_int(draws.bits("noise", T), self.n_noise)
        else:
            tokens = torch.zeros((*draws.shape, T), dtype=torch.int64, device=draws.device)
        fact, places = draws.bits("fact", 2), draws.bits("places", 2)
        s, r = counter.uniform_int(fact[..., 0], S), counter.uniform_int(fact[..., 1], R)
        ps, pr = counter.uniform_int(places[..., 0], T - 1), counter.uniform_int(places[..., 1], T - 2)
        pr = pr + (pr >= ps)  # distinct from the subject's position
        tokens.scatter_(-1, ps[..., None], s[..., None])
        tokens.scatter_(-1, pr[..., None], S + r[..., None])
        tokens[..., -1] = self.eos
        answer = torch.as_tensor(self.fact_table(), device=draws.device)[s, r]
        return FactBatch(tokens, s, r, answer)

    def answer_sets(self) -> tuple[np.ndarray, np.ndarray]:
        """Boolean masks (R, |A|) of A_r and (S, |A|) of A_s = {a*(s, r'): r'}."""
        table = self.fact_table()
        by_rel = np.zeros((self.n_relations, self.n_answers), bool)
        by_rel[np.arange(self.n_answers) // self.answers_per_relation, np.arange(self.n_answers)] = True
        by_subj = np.zeros((self.n_subjects, self.n_answers), bool)
        by_subj[np.repeat(np.arange(self.n_subjects), self.n_relations), table.ravel()] = True
        return by_rel, by_subj
