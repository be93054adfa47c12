"""k-hop reasoning: composing k in-context permutations, directly or from easy to hard (seed 002, K1-K3).

The talk's last result (Wang, Nichani, Bietti, Damian, Hsu, Lee, Wu, COLT 2025):
gradient descent on k-hop data alone needs exp(k) samples or compute (a
statistical-query lower bound), while a curriculum from easy to hard, or a
mixture of hop counts, solves it with O(k), learning hops 1, 2, 4, ... in turn;
log2 k + 1 layers suffice. The slides give no sizes and no public code was
found, so this module builds the task as the paper's abstract defines it and
chooses the rest (the chapter says which choices are ours).

Task (:class:`KHopTask`). N values, k hops; hidden permutations pi_1..pi_k of
[N], fixed by ``hidden_seed`` (the model must learn them); per sequence, k
in-context permutations sigma_1..sigma_k, uniform. A k'-hop example
(1 <= k' <= k) asks for f(x) = sigma_k' o pi_k' o ... o sigma_1 o pi_1 (x).
The sequence is ``x`` then the tables of sigma_1..sigma_k', each written as its
N values in order (position 1 + (i - 1) N + a holds sigma_i(a)); the blocks
after k' are padding, masked out of attention. So T = 1 + k N, and a k'-hop
example is the same format with fewer tables: "the composition of every table
shown", read at position 0.

Model (:class:`HopTransformer`). Learned token and absolute position
embeddings, ``depth`` pre-LayerNorm blocks of bidirectional multi-head
attention (padding masked), an optional GELU MLP (4d), a final LayerNorm and
a linear readout of position 0 over the N values. The default depth is the
paper's ceil(log2 k) + 1.

Training data (``data``): ``"direct"`` (every example has k hops), ``"mixture"``
(k' drawn from ``weights`` over 1..k, uniform by default) or ``"curriculum"``
(k' = the current stage, starting at 1 and moving to the next hop count once
the test accuracy at the current one reaches ``advance_at``). AdamW (weight
decay 0), fresh batches; test accuracy at every hop count every
``eval_every`` steps.

>>> t = KHopTask(N=4, k=2)
>>> b = t.sample(np.random.default_rng(0), np.array([1, 2]))
>>> b.tokens.shape, b.tokens[0, 5:].tolist(), bool(b.mask[1].all())
((2, 9), [4, 4, 4, 4], True)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from companion import cache, config
from companion.config import check_choice, check_float, check_int

DATA = ("direct", "mixture", "curriculum")


@dataclass(frozen=True)
class HopBatch:
    tokens: np.ndarray  # (batch, 1 + k N): x, then the tables, padding (token N) after hop k'
    mask: np.ndarray  # (batch, 1 + k N) bool: True where a token is shown
    hops: np.ndarray  # (batch,) k' per example
    chain: np.ndarray  # (batch, k): the value after each hop (after hop k' it stays put)
    answer: np.ndarray  # (batch,): the value after k' hops


@dataclass(frozen=True)
class KHopTask:
    """The k-fold composition task; validated on construction (see the module docstring)."""

    N: int = 8
    k: int = 4
    hidden_seed: int = 0

    def __post_init__(self):
        check_int("N (values)", self.N, low=2)
        check_int("k (hops)", self.k, low=1)

    @property
    def seq_len(self) -> int:
        return 1 + self.k * self.N

    @property
    def pad(self) -> int:
        return self.N

    def hidden(self) -> np.ndarray:
        """(k, N): the hidden permutations pi_i (row i - 1), fixed by ``hidden_seed``."""
        rng = np.random.default_rng(config.seed_streams(self.hidden_seed, ["khop-hidden"])["khop-hidden"])
        return np.stack([rng.permutation(self.N) for _ in range(self.k)])

    def sample(self, rng: np.random.Generator, hops) -> HopBatch:
        """One example per entry of ``hops`` (its k', each in 1..k).

        Raises:
            ValueError: a hop count outside 1..k.
        """
        hops = np.asarray(hops, dtype=np.int64)
        if hops.ndim != 1 or len(hops) == 0 or hops.min() < 1 or hops.max() > self.k:
            bad = hops[(hops < 1) | (hops > self.k)] if hops.ndim == 1 else hops
            raise ValueError(f"hop counts {bad.tolist()[:5]} out of range: allowed 1..{self.k} (k = {self.k})")
        n, N, k = len(hops), self.N, self.k
        sigma = np.argsort(rng.random((n, k, N)), axis=-1)  # uniform permutations, one per hop and example
        x = rng.integers(0, N, n)
        pi = self.hidden()
        chain = np.empty((n, k), dtype=np.int64)
        v, rows = x.copy(), np.arange(n)
        for i in range(k):
            v = np.where(i < hops, sigma[rows, i, pi[i][v]], v)
            chain[:, i] = v
        block = np.concatenate([[0], np.repeat(np.arange(1, k + 1), N)])  # 0 for x, i for table i
        mask = block[None, :] <= hops[:, None]
        tokens = np.where(mask, np.concatenate([x[:, None], sigma.reshape(n, k * N)], axis=1), self.pad)
        return HopBatch(tokens, mask, hops, chain, chain[:, -1])


class _Block(torch.nn.Module):
    def __init__(self, d: int, heads: int, mlp: bool):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d) if mlp else None
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d)) \
            if mlp else None

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, T, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, T, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        h = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])
        x = x + self.out(h.transpose(1, 2).reshape(b, T, d))
        return x + self.mlp(self.ln2(x)) if self.mlp is not None else x


class HopTransformer(torch.nn.Module):
    """Bidirectional transformer read at position 0; see the module docstring."""

    def __init__(self, task: KHopTask, d: int, depth: int, heads: int, mlp: bool, seed: int = 0):
        super().__init__()
        check_int("depth", depth, low=1)
        check_int("heads", heads, low=1)
        if d % heads:
            raise ValueError(f"d={d} is not a multiple of heads={heads}: allowed d in multiples of {heads}")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(config.seed_streams(seed, ["init"])["init"].generate_state(1)[0]))
            self.embed = torch.nn.Embedding(task.N + 1, d)
            self.pos = torch.nn.Parameter(torch.randn(task.seq_len, d))  # the tokens' scale (0.02 stalls hop 2)
            self.blocks = torch.nn.ModuleList([_Block(d, heads, mlp) for _ in range(depth)])
            self.ln = torch.nn.LayerNorm(d)
            self.readout = torch.nn.Linear(d, task.N)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(b, T) tokens and mask -> (b, N) logits of the value after the composition."""
        x = self.embed(tokens) + self.pos
        for blk in self.blocks:
            x = blk(x, mask)
        return self.readout(self.ln(x[:, 0]))


@dataclass(frozen=True)
class KHopExperiment(config.Profiled):
    """One run: the task (N, k), the model (d, depth, heads, mlp) and the training data (direct, mixture or
    curriculum)."""

    profile: str = "quick"
    N: int = 8
    k: int = 4
    data: str = "mixture"
    weights: tuple = ()  # mixture: the distribution of k' over 1..k (empty: uniform)
    advance_at: float = 0.9  # curriculum: move to the next hop count at this test accuracy
    depth: int = 0  # 0: ceil(log2 k) + 1, the paper's
    d: int = 32
    heads: int = 4
    mlp: bool = False
    lr: float = 3e-3
    batch: int = 128
    steps: int = 4000
    eval_every: int = 100
    n_test: int = 1024
    seed: int = 0

    def __post_init__(self):
        config.get_profile(self.profile)
        check_int("N (values)", self.N, low=2)
        check_int("k (hops)", self.k, low=1)
        check_choice("data", self.data, DATA)
        check_int("d", self.d, low=1)
        check_int("batch", self.batch, low=1)
        check_int("steps", self.steps, low=1)
        check_int("eval_every", self.eval_every, low=1)
        check_int("n_test", self.n_test, low=1)
        check_int("depth", self.depth, low=0)
        check_float("lr", self.lr, 0.0, None, low_open=True)
        check_float("advance_at", self.advance_at, 0.0, 1.0, low_open=True)
        self.mixture()
        self.model()

    @property
    def layers(self) -> int:
        """The depth used: ``depth``, or ceil(log2 k) + 1."""
        return self.depth or math.ceil(math.log2(self.k)) + 1

    def task(self) -> KHopTask:
        return KHopTask(self.N, self.k, self.seed)

    def mixture(self) -> np.ndarray:
        """The distribution of k' over 1..k that ``data="mixture"`` draws from.

        Raises:
            ValueError: ``weights`` is not a distribution over 1..k (its length, a negative entry, or a sum
                other than 1).
        """
        if not self.weights:
            return np.full(self.k, 1.0 / self.k)
        w = np.asarray(self.weights, dtype=float)
        if w.ndim != 1 or len(w) != self.k:
            raise ValueError(f"weights={self.weights!r} has {w.size} entries: allowed one per hop count 1..{self.k}")
        if not np.isfinite(w).all() or w.min() < 0 or abs(w.sum() - 1) > 1e-9:
            raise ValueError(f"weights={self.weights!r} is not a distribution: allowed entries >= 0 summing to 1 "
                             f"(they sum to {w.sum():g})")
        return w

    def model(self) -> HopTransformer:
        return HopTransformer(self.task(), self.d, self.layers, self.heads, self.mlp, self.seed)


MODULES = ("companion.experiments.khop",)


def run(exp: KHopExperiment, progress: bool = True, use_cache: bool = True, device=None) -> dict:
    """Train (or load) ``exp``: ``"step"`` (every evaluation), ``"acc"`` ((evaluations, k): test accuracy at
    each hop count), ``"stage"`` (the curriculum's hop count at each evaluation; k for direct, 0 for mixture),
    ``"loss"`` (the training loss at each evaluation step), ``"seconds"`` and ``"device"``."""
    return cache.load_or_compute("khop", exp, lambda: _train(exp, progress, device), MODULES, use_cache=use_cache)


def _train(exp: KHopExperiment, progress: bool, device=None) -> dict:
    device = config.get_device(device)
    streams = config.seed_streams(exp.seed, ["train-data", "test-data"])
    rng = np.random.default_rng(streams["train-data"])
    task, weights = exp.task(), exp.mixture()
    test_rng = np.random.default_rng(streams["test-data"])
    tests = [_tensors(task.sample(test_rng, np.full(exp.n_test, h)), device) for h in range(1, exp.k + 1)]
    model = exp.model().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=exp.lr, weight_decay=0.0)
    stage = 1
    steps, accs, stages, losses = [], [], [], []
    loss = torch.tensor(float("nan"))
    start = time.perf_counter()
    for step in tqdm(range(exp.steps + 1), desc=f"{exp.k}-hop {exp.data}", disable=not progress, mininterval=2.0):
        if step % exp.eval_every == 0 or step == exp.steps:
            with torch.no_grad():
                acc = [float((model(t, m).argmax(1) == y).float().mean()) for t, m, y in tests]
            steps.append(step), accs.append(acc), losses.append(float(loss.detach()))
            stages.append({"direct": exp.k, "mixture": 0, "curriculum": stage}[exp.data])
            if exp.data == "curriculum" and acc[stage - 1] >= exp.advance_at and stage < exp.k:
                stage += 1
            if step == exp.steps:
                break
        hops = {"direct": np.full(exp.batch, exp.k), "curriculum": np.full(exp.batch, stage),
                "mixture": None}[exp.data]
        if hops is None:
            hops = rng.choice(exp.k, size=exp.batch, p=weights) + 1
        t, m, y = _tensors(task.sample(rng, hops), device)
        loss = F.cross_entropy(model(t, m), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return {"step": np.asarray(steps), "acc": np.asarray(accs), "stage": np.asarray(stages),
            "loss": np.asarray(losses), "seconds": time.perf_counter() - start,
            "device": config.device_name(device)}


def _tensors(b: HopBatch, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (torch.as_tensor(b.tokens, device=device), torch.as_tensor(b.mask, device=device),
            torch.as_tensor(b.answer, device=device))


def learned_at(r: dict, level: float = 0.9) -> np.ndarray:
    """(k,): the first evaluation step at which the test accuracy at each hop count reaches ``level`` (inf if
    never)."""
    acc = np.asarray(r["acc"])
    out = np.full(acc.shape[1], np.inf)
    for h in range(acc.shape[1]):
        hit = np.flatnonzero(acc[:, h] >= level)
        if len(hit):
            out[h] = r["step"][hit[0]]
    return out
