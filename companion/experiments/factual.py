"""Factual recall: the toy task and the dynamics of one attention layer (the talk; Nichani, Lee, Bietti, ICLR 2025).

Task: :class:`companion.data.facts.FactTask` (subjects, relations, noise and EOS; structured or random
facts). Model: :class:`companion.models.attention_facts.AttentionFacts` (one attention layer read at EOS,
linear or softmax, one-hot or random embeddings).

Losses on a test set: the total cross-entropy; the relation-only loss
E[-log sum_{a in A_r} p(a | z)] and the subject-only loss, the same with A_s =
{a*(s, r'): r' in [R]} (for the structured facts, the answers with the same
index within their block, as in the notebook).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from companion import cache, config, report, train
from companion.config import check_float, check_int
from companion.data.facts import FactBatch, FactTask
from companion.data.streams import TrainingStream
from companion.models.attention_facts import AttentionFacts


@dataclass(frozen=True)
class FactExperiment:
    """One training run of :class:`AttentionFacts` on :class:`FactTask` (plain SGD on fresh batches)."""

    profile: str = "quick"
    task: FactTask = field(default_factory=FactTask)
    embed: str = "onehot"
    attention: str = "linear"
    d: int | None = None
    init: float = 1e-5
    lr: float = 0.1
    batch: int = 1024
    steps: int = 8192
    eval_every: int = 128
    n_test: int = 2**16
    seed: int = field(default_factory=config.book_seed)

    def __post_init__(self):
        config.check_int("seed", self.seed, low=0)
        config.get_profile(self.profile)
        check_float("lr", self.lr, 0.0, None, low_open=True)
        check_int("batch", self.batch, low=1)
        check_int("steps", self.steps, low=1)
        check_int("eval_every", self.eval_every, low=1)
        check_int("n_test", self.n_test, low=1)
        self.model()  # embedding, attention, d and init checked now

    def model(self) -> AttentionFacts:
        return AttentionFacts(
            self.task.vocab_size,
            self.task.n_answers,
            self.d,
            self.embed,
            self.attention,
            self.init,
            self.seed,
        )


@torch.no_grad()
def losses(model: AttentionFacts, task: FactTask, batch: FactBatch, chunk: int = 8192) -> dict[str, float]:
    """Total, relation-only and subject-only cross-entropy, and accuracy, on a batch (evaluated in chunks, on
    the model's device)."""
    device = next(model.parameters()).device
    by_rel, by_subj = (torch.as_tensor(m, device=device) for m in task.answer_sets())
    sums = {"loss": 0.0, "loss_relation": 0.0, "loss_subject": 0.0, "acc": 0.0}
    n = len(batch.answer)
    for i in range(0, n, chunk):
        sl = slice(i, i + chunk)
        logp = torch.log_softmax(model(torch.as_tensor(batch.tokens[sl], device=device)), dim=-1)
        a = torch.as_tensor(batch.answer[sl], device=device)
        sums["loss"] += -logp.gather(1, a[:, None]).sum().item()
        for key, mask, idx in (
            ("loss_relation", by_rel, batch.relation),
            ("loss_subject", by_subj, batch.subject),
        ):
            m = mask[torch.as_tensor(idx[sl], device=device)]
            sums[key] += -torch.logsumexp(logp.masked_fill(~m, -math.inf), dim=1).sum().item()
        sums["acc"] += (logp.argmax(1) == a).sum().item()
    return {k: v / n for k, v in sums.items()}


MODULES = ("companion.experiments.factual",)


def run(exp: FactExperiment, *, device=None, progress: bool = True, use_cache: bool = True) -> dict:
    """Train (or load the cached result of) ``exp``: ``{"step", "loss", "loss_relation", "loss_subject",
    "acc"}`` arrays at every ``eval_every`` steps (and the last), the training time and the device."""
    return cache.load_or_compute(
        "factual", exp, lambda: _train(exp, progress, device), MODULES, use_cache=use_cache
    )


def _train(exp: FactExperiment, progress: bool, device=None) -> dict:
    device = config.get_device(device)
    streams = config.seed_streams(exp.seed, ["test-data"])
    data = TrainingStream(exp.seed, "train-data", device=device)
    test = exp.task.sample(np.random.default_rng(streams["test-data"]), exp.n_test)
    model = exp.model().to(device)

    def loss_at(step: int) -> torch.Tensor:
        b = data.batch(exp.task, exp.batch, step)
        tokens, answer = (torch.as_tensor(a, device=device) for a in (b.tokens, b.answer))
        return F.cross_entropy(model(tokens), answer)

    out = train.fit(
        model,
        torch.optim.SGD(model.parameters(), lr=exp.lr),
        exp.steps,
        loss_at,
        evaluate=lambda step: losses(model, exp.task, test),
        eval_at=lambda step: step % exp.eval_every == 0,
        progress=progress,
        desc=f"facts {exp.attention}",
    )
    res = {k: out.series(k) for k in out.evals[0]}
    res["seconds"] = out.seconds
    res["device"] = config.device_name(device)
    return res


def at(res: dict, key: str, step: int) -> float:
    """The value of a logged series at the evaluation of ``step`` (which must be an evaluated step)."""
    hit = np.nonzero(res["step"] == step)[0]
    if not len(hit):
        raise ValueError(f"step={step} was not evaluated: evaluations every {int(res['step'][1])} steps")
    return float(res[key][hit[0]])


def first_below(res: dict, key: str, threshold: float) -> float:
    """First evaluated step at which ``key`` is below ``threshold``; inf if never."""
    hit = np.nonzero(res[key] < threshold)[0]
    return float(res["step"][hit[0]]) if len(hit) else float("inf")


def which_first(res: dict, threshold: float = 0.1) -> float:
    """At the first evaluation where the relation-only or the subject-only loss is below ``threshold``: subject-only
    minus relation-only loss (> 0: the relation was learned first); nan if neither gets there."""
    hit = np.nonzero(np.minimum(res["loss_relation"], res["loss_subject"]) < threshold)[0]
    return float(res["loss_subject"][hit[0]] - res["loss_relation"][hit[0]]) if len(hit) else float("nan")


def notebook_values() -> list[dict]:
    """The test losses the authors' notebook prints for its run (``data/factual_notebook.json``)."""
    import json

    return json.loads((config.committed_data_dir() / "factual_notebook.json").read_text())["printed"]


def notebook_table(res: dict) -> tuple[str, float]:
    """Markdown table of the notebook's printed losses beside this run's, and the largest absolute difference."""
    rows, gap = [], 0.0
    for row in notebook_values():
        for key in ("loss", "loss_relation", "loss_subject"):
            if key in row:
                ours = at(res, key, row["step"])
                gap = max(gap, abs(ours - row[key]))
                rows.append(
                    [
                        row["step"],
                        key.replace("loss_", "") if key != "loss" else "total",
                        f"{row[key]:.3f}",
                        f"{ours:.3f}",
                    ]
                )
    return report.markdown_table(["step", "loss", "notebook", "this run"], rows), gap


# --- the reparameterisation of the linear model (pasted Sec. 5 of the slides' source) ---


def reparam_gap(
    task: FactTask | None = None,
    steps: int = 50,
    lr: float = 0.1,
    init: float = 1e-5,
    batch: int = 256,
    seed: int = 0,
) -> dict[str, float]:
    """Gradient descent on the d x d matrices W_OV, W_KQ of F_lin = W_OV (sum_t phi(z_t) phi(z_t)^T) W_KQ phi(EOS),
    logits <phi(a), F_lin>, with orthonormal embeddings phi of the tokens and the answers (d = |vocabulary| + |A|),
    against gradient descent on the coordinates W_OV(a, z) = phi(a)^T W_OV phi(z) and W_KQ(z) = phi(z)^T W_KQ
    phi(EOS) (the model :class:`AttentionFacts`), from the same start and on the same batches, in float64.

    Returns the largest loss difference and the largest coordinate difference over the run, and the loss
    change (to show the run moved).

    Kept apart from the training engine (:func:`companion.train.fit`): two parametrisations stepped in lockstep
    and compared after every step, a check of an identity rather than a training run.
    """
    task = task or FactTask()
    check_int("steps", steps, low=1)
    V, nA, eos = task.vocab_size, task.n_answers, task.eos
    d = V + nA
    gen = config.torch_generator(config.seed_streams(seed, ["orthonormal"])["orthonormal"])
    Q, _ = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
    phi, psi = Q[:, :V], Q[:, V:]  # columns: token and answer embeddings
    coords = AttentionFacts(V, nA, init=init).double()
    W_OV = torch.nn.Parameter(psi @ coords.V.detach().T @ phi.T)  # sum_{a,z} V[z, a] psi(a) phi(z)^T
    W_KQ = torch.nn.Parameter(phi @ coords.A.detach()[:, eos : eos + 1] @ phi[:, eos : eos + 1].T)
    opt_c = torch.optim.SGD(coords.parameters(), lr=lr)
    opt_f = torch.optim.SGD([W_OV, W_KQ], lr=lr)
    data = TrainingStream(seed, "train-data")
    gap_loss = gap_coord = 0.0
    first = last = None
    for step in range(steps):
        b = data.batch(task, batch, step)
        tokens, target = torch.as_tensor(b.tokens), torch.as_tensor(b.answer)
        X = phi.T[tokens]  # (batch, T, d)
        F_lin = ((X @ W_KQ @ phi[:, eos]).unsqueeze(-1) * X).sum(1) @ W_OV.T  # (batch, d)
        loss_f = F.cross_entropy(F_lin @ psi, target)
        loss_c = F.cross_entropy(coords(tokens), target)
        gap_loss = max(gap_loss, abs(loss_f.item() - loss_c.item()))
        first = loss_c.item() if first is None else first
        last = loss_c.item()
        for opt, loss in ((opt_f, loss_f), (opt_c, loss_c)):
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            gap_coord = max(
                gap_coord,
                (psi.T @ W_OV @ phi - coords.V.T).abs().max().item(),
                (phi.T @ W_KQ @ phi[:, eos] - coords.A[:, eos]).abs().max().item(),
            )
    return {"loss_gap": gap_loss, "coord_gap": gap_coord, "loss_change": first - last}


# --- the chapter ---

FLIPPED = dict(n_subjects=4, n_relations=16, answers_per_relation=4)


def experiments(profile: str | None = None) -> dict[str, FactExperiment]:
    """The notebook's run (Fig. 5 left), the same with fewer subjects than relations (S = 4, R = 16, D = 4), and
    one softmax head with random unit-norm embeddings (Fig. 5 right; d = 64 and lr 1.0 are our choices).

    Both profiles run the paper's own size (it takes seconds); ``full`` adds the test set of the notebook
    (2^16 sequences) where ``quick`` uses 2^14, and runs the softmax head 16384 steps instead of 4096.
    """
    p = config.get_profile(profile)
    n_test = {"quick": 2**14, "full": 2**16}[p]
    return {
        "S = 16, R = 4 (paper)": FactExperiment(profile=p, n_test=n_test),
        "S = 4, R = 16": FactExperiment(profile=p, task=FactTask(**FLIPPED), n_test=n_test),
        "softmax, random embeddings": FactExperiment(
            profile=p,
            attention="softmax",
            embed="random",
            d=64,
            lr=1.0,
            steps={"quick": 4096, "full": 16384}[p],
            n_test=n_test,
        ),
    }


def study(profile: str | None = None, progress: bool = True, *, device=None) -> dict:
    """The runs of :func:`experiments` (``"runs"``, on ``device``: default :func:`companion.config.get_device`'s)
    and the reparameterisation check (``"reparam"``; init 0.1 and lr 1.0, so that 50 steps move the loss; float64
    on the CPU, an identity check)."""
    return {
        "runs": {name: run(e, device=device, progress=progress) for name, e in experiments(profile).items()},
        "reparam": reparam_gap(init=0.1, lr=1.0),
    }


def references(runs: dict) -> dict[str, dict[str, float]]:
    """The dashed lines of the chapter's figure: log |A| and the plateau levels (log D; log R when S < R)."""
    out = {}
    for name, e in experiments().items():
        if name not in runs:
            continue
        t = e.task
        plateau = (
            ("log R", t.n_relations) if t.n_relations > t.n_subjects else ("log D", t.answers_per_relation)
        )
        out[name] = {"log |A|": math.log(t.n_answers), plateau[0]: math.log(plateau[1])}
    return out


def summary(res: dict) -> report.Summary:
    runs = res["runs"]
    paper, flipped, soft = (
        runs["S = 16, R = 4 (paper)"],
        runs["S = 4, R = 16"],
        runs["softmax, random embeddings"],
    )
    soft_hit = np.nonzero(soft["loss_relation"] < 0.1)[0]
    t = FactTask()
    return report.Summary(
        {
            "log_A": (math.log(t.n_answers), "log |A|"),
            "log_D": (math.log(t.answers_per_relation), "log D"),
            "loss_1024": (at(paper, "loss", 1024), "total test loss at step 1024"),
            "rel_2048": (at(paper, "loss_relation", 2048), "relation-only loss at step 2048"),
            "loss_2048": (at(paper, "loss", 2048), "total loss at step 2048"),
            "loss_3072": (at(paper, "loss", 3072), "total loss at step 3072 (the plateau)"),
            "subj_3072": (at(paper, "loss_subject", 3072), "subject-only loss at step 3072"),
            "rel_3072": (at(paper, "loss_relation", 3072), "relation-only loss at step 3072"),
            "escape_step": (first_below(paper, "loss", 1.0), "first evaluated step with total loss < 1"),
            "notebook_gap": (
                notebook_table(paper)[1],
                "largest |this run - notebook| over the losses it prints",
            ),
            "loss_final": (paper["loss"][-1], f"total loss at step {int(paper['step'][-1])}"),
            "acc_final": (paper["acc"][-1], "test accuracy at the end"),
            "order_paper": (
                which_first(paper),
                "S = 16, R = 4: subject-only minus relation-only loss when one first < 0.1",
            ),
            "order_flipped": (which_first(flipped), "S = 4, R = 16: the same"),
            "flipped_plateau": (
                float(np.median(flipped["loss"][(flipped["loss_subject"] < 0.1) & (flipped["loss"] > 0.5)]))
                if ((flipped["loss_subject"] < 0.1) & (flipped["loss"] > 0.5)).any()
                else float("nan"),
                "S = 4, R = 16: median total loss while only the subject is known",
            ),
            "log_R_flipped": (math.log(FLIPPED["n_relations"]), "log R for S = 4, R = 16"),
            "soft_rel_step": (
                float(soft["step"][soft_hit[0]]) if len(soft_hit) else float("inf"),
                "softmax head: first evaluated step with relation-only loss < 0.1",
            ),
            "soft_subj_then": (
                float(soft["loss_subject"][soft_hit[0]]) if len(soft_hit) else float("nan"),
                "softmax head: subject-only loss at that step",
            ),
            "soft_loss_final": (
                soft["loss"][-1],
                f"softmax head: total loss at step {int(soft['step'][-1])}",
            ),
            "soft_acc_final": (soft["acc"][-1], "softmax head: accuracy at the end"),
            "reparam_loss_gap": (
                res["reparam"]["loss_gap"],
                "GD on W_OV, W_KQ vs on the coordinates: largest loss gap",
            ),
            "reparam_coord_gap": (
                res["reparam"]["coord_gap"],
                "the same: largest gap between the coordinates",
            ),
            "reparam_loss_change": (
                res["reparam"]["loss_change"],
                "the same run: loss decrease over its 50 steps",
            ),
            "seconds": (
                paper["seconds"] + flipped["seconds"] + soft["seconds"],
                "training time of the runs (s)",
            ),
        }
    )
