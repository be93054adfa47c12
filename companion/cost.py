"""What a run costs: matrix-multiply FLOPs of the transformer of Eq. (1), per step and per run.

Counts the multiply-adds of every matrix product (2 m n k FLOPs each), in the
forward pass and in the backward pass (2 m n k for each operand that needs a
gradient: W_E, the positions and W_U are fixed, so the first layer's input
and the unembedding's weight get none). Softmax, ReLU and the loss are not
counted (a few percent at these sizes). ``tests/test_cost.py`` checks the
count against ``torch.utils.flop_counter.FlopCounterMode``.

>>> from companion.models import ModelConfig
>>> cfg = ModelConfig(vocab_size=66, d=256, max_len=256)
>>> f"{train_step_flops(cfg, batch=512, seq_len=256, last_only=True):.3g}"
'6.21e+11'
"""

from __future__ import annotations

from companion.config import check_float, check_int
from companion.train import eval_schedule


def _layer_matmuls(
    cfg, seq_len: int, l: int, last_only: bool, queries: int | None = None
) -> list[tuple[int, int, int, bool, bool]]:
    """(m, n, k, first operand needs grad, second needs grad) of every product of layer ``l`` (0-based)."""
    T, d, h, L = seq_len, cfg.d, cfg.hidden, cfg.n_layers
    tq = _last_queries(T, last_only, queries) if l == L - 1 else T
    x_grad = l > 0  # the stream entering layer 1 is x = W_E(z) + p, both fixed
    out = [
        (tq, d, d, x_grad, True),  # query @ W_QK
        (tq, T, d, True, x_grad),  # (query W_QK) @ x^T
        (T, d, d, x_grad, True),  # x @ W_V^T
        (tq, d, T, True, True),
    ]  # attention @ values
    kind = cfg.ff[l]
    if kind == "mlp":
        out += [(tq, h, d, True, True), (tq, d, h, True, True)]
    elif kind == "linear":
        out += [(tq, d, d, True, True)]
    return out


def _last_queries(seq_len: int, last_only: bool, queries: int | None) -> int:
    """The positions at which the last layer runs: ``queries`` if given, else 1 (``last_only``) or T."""
    if queries is not None:
        check_int("queries", queries, low=1, high=seq_len)
        return queries
    return 1 if last_only else seq_len


def _matmuls(
    cfg, seq_len: int, last_only: bool, queries: int | None = None
) -> list[tuple[int, int, int, bool, bool]]:
    """Every product of one sequence's forward pass: the layers, then the unembedding by the fixed W_U."""
    if cfg.attn_rank is not None:
        raise ValueError("attn_rank is set: FLOPs are counted for the unfactorised attention of Eq. (1) only")
    out = [m for l in range(cfg.n_layers) for m in _layer_matmuls(cfg, seq_len, l, last_only, queries)]
    return out + [(_last_queries(seq_len, last_only, queries), cfg.vocab_size, cfg.d, True, False)]


def _flops(matmuls) -> int:
    return sum(2 * m * n * k for m, n, k, _, _ in matmuls)


def last_only(exp) -> bool:
    """Whether a run's loss is on the final position only (the paper's choice; synthetic IOI too)."""
    return exp.loss_on == "final" or exp.task_kind == "ioi"


def forward_flops(cfg, batch: int, seq_len: int, last_only: bool, queries: int | None = None) -> float:
    """Matrix-multiply FLOPs of one forward pass over ``batch`` sequences of length ``seq_len``; ``queries``:
    the last layer runs at that many positions per sequence (``Transformer(..., positions=...)``)."""
    check_int("batch", batch, low=1)
    check_int("seq_len (T)", seq_len, low=1, high=cfg.max_len)
    return float(batch * _flops(_matmuls(cfg, seq_len, last_only, queries)))


def train_step_flops(cfg, batch: int, seq_len: int, last_only: bool, queries: int | None = None) -> float:
    """Forward and backward FLOPs of one training step (``last_only``: the loss is on the final position;
    ``queries``: on that many positions per sequence, where the last layer runs)."""
    fwd = forward_flops(cfg, batch, seq_len, last_only, queries)
    bwd = batch * sum(2 * m * n * k * (a + b) for m, n, k, a, b in _matmuls(cfg, seq_len, last_only, queries))
    return fwd + float(bwd)


def run_flops(exp) -> dict[str, float]:
    """FLOPs of a whole noisy-recall run (:class:`companion.experiments.noisy_recall.RecallExperiment`):
    ``train`` (every step of every phase; for a loss on trigger occurrences, the dense count, an upper bound,
    since :func:`companion.train.batch_loss` runs the last layer only at the loss positions), ``evaluation`` (every evaluation: the clean and the noisy test
    sets, one last-position forward pass each, the dropped-F1 pass re-running the layers after the first
    attention, and the 64-sequence first-layer attention probe; the rho sweep re-runs only F_L and W_U and is
    not counted) and ``total``.
    """
    cfg, T = exp.model_config(), exp.seq_len
    phases = [exp.steps] + ([exp.pretrain_steps] if exp.schedule == "finetune" else [])
    train = sum(s * train_step_flops(cfg, exp.batch, T, last_only(exp)) for s in phases)
    n_evals = sum(len(eval_schedule(s, exp.eval_every, exp.dense_until)) + 1 for s in phases)
    one = forward_flops(cfg, exp.n_test, T, True)
    first_layer = exp.n_test * _flops(_layer_matmuls(cfg, T, 0, True))
    drop_f1 = (one - first_layer) if (cfg.n_layers > 1 and cfg.ff[0] != "none") else 0.0
    evaluation = n_evals * (2 * one + drop_f1 + forward_flops(cfg, min(64, exp.n_test), T, True))
    return {"train": train, "evaluation": evaluation, "total": train + evaluation, "evaluations": n_evals}


def seconds(flops: float, peak_flops: float, utilisation: float) -> float:
    """Time implied by ``flops`` at ``utilisation`` of a device's peak (e.g. H100 SXM TF32 dense: 4.95e14).

    >>> seconds(1e15, 1e15, 0.5)
    2.0
    """
    check_float("utilisation", utilisation, 0.0, 1.0, low_open=True)
    check_float("peak_flops", peak_flops, 0.0, low_open=True)
    return flops / (peak_flops * utilisation)


# Dense peak throughput of an H100 SXM (NVIDIA datasheet): TF32 tensor cores 495 TFLOP/s (989 with sparsity),
# BF16 989 TFLOP/s, plain FP32 67 TFLOP/s.
H100_PEAK = {"tf32": 4.95e14, "bf16": 9.89e14, "fp32": 6.7e13}


def summary(exp, utilisations=(0.1, 0.3)):
    """The cost of a noisy-recall run: FLOPs of one step and of the run, the evaluations' share, and the
    time the count implies on one H100 (TF32 tensor cores) at the given utilisations."""
    from companion.report import Summary

    step = train_step_flops(exp.model_config(), exp.batch, exp.seq_len, last_only(exp))
    run = run_flops(exp)
    out = {
        "step_flops": (step, "matmul FLOPs of one training step (forward + backward)"),
        "run_flops": (run["total"], f"the whole run: {exp.steps} steps and {run['evaluations']} evaluations"),
        "eval_share": (run["evaluation"] / run["total"], "share of the run's FLOPs spent in evaluations"),
    }
    for u in utilisations:
        out[f"h100_s_{round(100 * u)}"] = (
            seconds(run["total"], H100_PEAK["tf32"], u),
            f"seconds on one H100 at {u:.0%} of its TF32 peak",
        )
    return Summary(out)


def benchmarks(directory=None) -> list[list]:
    """Rows (device, date, seconds of one full-size training step, evaluation / training step and
    evaluations' share of a full-profile run, at
    d = T = 128 and at the full sizes) of the committed benchmark results (``benchmarks/results/*.json``,
    written by ``benchmarks/bench_recall.py``); files without these measurements are skipped."""
    import json
    from pathlib import Path

    from companion.config import REPO_ROOT

    rows = []
    for path in sorted(Path(directory or REPO_ROOT / "benchmarks" / "results").glob("*.json")):
        b = json.loads(path.read_text())
        if "eval_share_of_full_run_full" in b:
            rows.append(
                [
                    b["device"],
                    b["date"],
                    b["train_step_s_full_config"],
                    b["eval_over_train_step_d128_T128"],
                    b["eval_share_of_full_run_d128_T128"],
                    b["eval_over_train_step_full"],
                    b["eval_share_of_full_run_full"],
                    b.get("full_fig3_run_s", float("nan")),
                ]
            )
    return rows


def measured_run_seconds(device: str, directory=None) -> float:
    """The full-profile Fig. 3 run's wall-clock seconds that ``benchmarks/bench_recall.py --full-run`` recorded
    on ``device`` (its name as the results file gives it).

    Raises:
        ValueError: no committed benchmark of that device has a full run (the message lists the devices that do).
    """
    import json
    from pathlib import Path

    from companion.config import REPO_ROOT

    found = {}
    for path in sorted(Path(directory or REPO_ROOT / "benchmarks" / "results").glob("*.json")):
        b = json.loads(path.read_text())
        if "full_fig3_run_s" in b:
            found[b["device"]] = b["full_fig3_run_s"]
    if device not in found:
        raise ValueError(
            f"no benchmark with a full run on device {device!r}: recorded on {sorted(found) or 'none'}"
            f" (run benchmarks/bench_recall.py --full-run --device cuda there)"
        )
    return float(found[device])


BENCHMARK_HEADER = [
    "device",
    "date",
    "one training step, full sizes (s)",
    "evaluation / step (d = T = 128)",
    "evaluations' share (d = T = 128)",
    "evaluation / step (full)",
    "evaluations' share (full)",
    "full Fig. 3 run (s; NaN: not run)",
]


def achieved(exp, seconds: float):
    """What a measured run of ``exp`` that took ``seconds`` achieved: its counted FLOPs per second and that
    rate as a share of one H100's plain FP32 and TF32 dense peaks (:data:`H100_PEAK`). PyTorch runs float32
    matrix products without TF32 unless asked (``torch.backends.cuda.matmul.allow_tf32``), and the package
    does not ask, so the FP32 share is the one to read.

    >>> from companion.experiments import catalog
    >>> a = achieved(catalog.recall("full"), 100.0)
    >>> round(a["flops_per_s"] / 1e12, 2), round(a["fp32_share"], 3), round(a["tf32_share"], 4)
    (13.55, 0.202, 0.0274)
    """
    check_float("seconds", seconds, 0.0, low_open=True)
    from companion.report import Summary

    rate = run_flops(exp)["total"] / seconds
    return Summary(
        {
            "run_seconds": (seconds, "measured wall-clock time of the run"),
            "flops_per_s": (rate, "counted matmul FLOPs of the run per second"),
            "fp32_share": (rate / H100_PEAK["fp32"], "share of one H100's plain FP32 peak (67 TFLOP/s)"),
            "tf32_share": (rate / H100_PEAK["tf32"], "share of one H100's TF32 tensor-core peak"),
        }
    )
