"""Tokens per second of the numpy generators and the counter-based samplers, side by side (issue 54).

For the recall task (the paper's choices) and the bigram task, at the quick size (T = 32, batch 128) and the
full size (T = 256, batch 512): the numpy generator on the CPU (one batch per call, as training draws it) and the
counter sampler on ``--device``, one step per call and a block of ``--block`` steps per call. Best of
``--repeats``, after a warm-up call. Writes benchmarks/results/<machine>-samplers.json (atomically) and prints it.

Usage: python benchmarks/bench_samplers.py [--device cuda] [--block 16] [--repeats 25]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import results_file
import torch

from companion import config, record
from companion.data.recall import BigramTask, RecallTask

SIZES = {"quick": (32, 128), "full": (256, 512)}  # (T, batch) of Fig. 3's profiles


def rate(fn, tokens: int, repeats: int, device) -> float:
    """Tokens per second of ``fn`` (which makes ``tokens`` tokens), best of ``repeats`` after one warm-up."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - t0)
    return tokens / best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=25)
    args = ap.parse_args()
    config.check_int("block", args.block, low=1)
    config.check_int("repeats", args.repeats, low=1)
    device = config.get_device(args.device)
    name = config.device_name(device)
    out = {
        "device": name,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "commit": record.commit(),
        "block": args.block,
        "tokens_per_s": {},
    }
    for size, (T, batch) in SIZES.items():
        for kind, task in {
            "recall": RecallTask(seq_len=T, alpha=0.5),
            "bigram": BigramTask(seq_len=T),
        }.items():
            rng = np.random.default_rng(0)
            one = batch * (T + 1)
            row = {
                "numpy_cpu": rate(lambda: task.sample(rng, batch), one, args.repeats, torch.device("cpu")),
                "counter_1_step": rate(
                    lambda: task.draw([0], [0], batch, device=device), one, args.repeats, device
                ),
                f"counter_{args.block}_steps": rate(
                    lambda: task.draw([0], range(args.block), batch, device=device),
                    one * args.block,
                    args.repeats,
                    device,
                ),
            }
            out["tokens_per_s"][f"{kind}_{size}"] = {k: float(f"{v:.4g}") for k, v in row.items()}
            print(kind, size, out["tokens_per_s"][f"{kind}_{size}"], flush=True)
    results_file.write(results_file.path(name, "-samplers"), out)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
