"""Replicas against the same runs one after another (issue 51: the training engine).

For each packed family at quick sizes, on the current machine in one process: fact_capacity's quick grid trained
for ``--steps`` steps each, one after another (each run alone, as `run` trains it) and as packs (`run_many`'s
grouping: one pack per H; and every run in one pack, heads padded), without early stopping; allocation's smallest
quick budget, each (MLP share, learning rate) alone and the learning rates of each share as one pack; k-hop's quick
runs of one shape (the chapter's and the seed study's), each alone and as one pack. The ratio is the time one after
another over the time packed. Families not yet packed are listed with ``null`` and the reason.

Writes benchmarks/results/<machine>-engine.json (atomically) and prints it.
Usage: python benchmarks/bench_engine.py [--device cuda] [--steps 64]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import results_file
import torch

from companion import config, record
from companion.experiments import allocation, fact_capacity, khop, khop_members, khop_studies

NOT_PACKED: dict[str, str] = {}


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def alone_seconds(train, runs: list, device) -> float:
    """Seconds to train ``runs`` one after another by ``train(run, progress=, device=)``, after one warm-up run."""
    train(runs[0], progress=False, device=device)
    sync(device)
    t0 = time.perf_counter()
    for e in runs:
        train(e, progress=False, device=device)
    sync(device)
    return time.perf_counter() - t0


def fact_capacity_times(steps: int, device) -> dict:
    """Seconds for the quick grid's runs (``steps`` steps each, no early stop): alone, one pack per H, one pack."""
    runs = [
        dataclasses.replace(e, steps=steps, eval_every=steps, stop_at=1.0)
        for e in fact_capacity.grid("quick").values()
    ]
    out = {"runs": len(runs), "steps": steps, "alone_s": alone_seconds(fact_capacity._train, runs, device)}
    for label, pad in (("per_H", False), ("one", True)):
        groups: dict = {}
        for e in runs:
            groups.setdefault(fact_capacity.pack_key(e, pad), []).append(e)
        sync(device)
        t0 = time.perf_counter()
        for members in groups.values():
            fact_capacity._train_pack(members, progress=False, device=device)
        sync(device)
        out[f"packed_{label}_s"] = time.perf_counter() - t0
        out[f"packs_{label}"] = len(groups)
    return out


def allocation_times(steps: int, device) -> dict:
    """Seconds for the quick experiment's smallest budget (every MLP share, every learning rate, ``steps`` steps
    each): each run alone through :func:`companion.train.train`, and the learning rates of each share as one pack
    (:func:`companion.experiments.allocation._train_all`)."""
    import numpy as np

    from companion.data.recall import BigramTask
    from companion.models import Transformer
    from companion.train import TrainConfig, train

    exp = dataclasses.replace(allocation.AllocationExperiment(), budgets=(8192,), steps=steps, last=1)
    task = BigramTask(exp.seq_len)
    out = {"runs": len(exp.mlp_fracs) * len(exp.lrs), "steps": steps}
    sync(device)
    t0 = time.perf_counter()
    for f in exp.mlp_fracs:
        for lr in exp.lrs:
            model = Transformer(exp.model_config(8192, f), seed=exp.seed).to(device)
            cfg = TrainConfig(
                steps=steps, batch=exp.batch, lr=lr, momentum=exp.momentum, weight_decay=exp.weight_decay
            )
            train(model, task, cfg, np.random.default_rng(0), progress=False, stop_on_nonfinite=True)
    sync(device)
    out["alone_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    allocation._train_all(exp, device, progress=False)
    sync(device)
    out["packed_s"] = time.perf_counter() - t0
    out["packs"] = len(exp.mlp_fracs)
    return out


def khop_times(steps: int, device) -> dict:
    """Seconds for the quick chapter's and seed study's runs of one shape (``steps`` steps each, evaluated once):
    each alone, then as one pack (:func:`companion.experiments.khop._train_pack`)."""
    members = {**khop_members.members("quick"), **khop_studies.seed_members("quick")}
    runs = [dataclasses.replace(e, steps=steps, eval_every=steps) for e in members.values()]
    key = khop.pack_key(runs[0])
    runs = [e for e in runs if khop.pack_key(e) == key]
    out = {"runs": len(runs), "steps": steps, "alone_s": alone_seconds(khop.train_run, runs, device)}
    t0 = time.perf_counter()
    khop._train_pack(runs, progress=False, device=device)
    sync(device)
    out["packed_s"] = time.perf_counter() - t0
    out["packs"] = 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default=None)
    ap.add_argument("--steps", type=int, default=64)
    args = ap.parse_args()
    config.check_int("steps", args.steps, low=1)
    device = config.get_device(args.device)
    out = {
        "device": config.device_name(device),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "date": time.strftime("%Y-%m-%d"),
        "commit": record.commit(),
    }
    path = results_file.path(out["device"], "-engine")
    # each family's times are written as soon as they are measured: a call stopped at its limit keeps them
    for family, times in (
        ("fact_capacity", fact_capacity_times),
        ("allocation", allocation_times),
        ("khop", khop_times),
    ):
        t = times(args.steps, device)
        out[family] = t
        packed = min(v for k, v in t.items() if k.startswith("packed") and k.endswith("_s"))
        out[f"replica_ratio_{family}"] = t["alone_s"] / packed
        results_file.write(path, out)
    for family, why in NOT_PACKED.items():
        out[f"replica_ratio_{family}"] = None
        out[f"replica_note_{family}"] = why
    results_file.write(path, out)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
