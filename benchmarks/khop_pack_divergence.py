"""Does packing decide which k-hop run stalls? (issue 54's flip list; issue 51's replicas)

The seed study's four runs (``khop_seeds``: the cumulative curriculum, seeds 0, 1, 2 advancing every 100 steps
and seed 0 every 250) trained as one pack of replicas for ``--steps`` steps, under the sampler that drew the
recording's batches whatever the one in force, against the same runs trained alone in a committed recording (default: the numpy generators' ``khop_seeds``, made run by
run). Same seeds, same batches: the two differ only in the rounding of the arithmetic, the pack's, and the
machine's and thread count's where the recording trained elsewhere (numpy khop_seeds: 2 threads). For each run: the
first evaluation whose test accuracies differ, the step it moves to each curriculum stage alone and packed, and
both runs' accuracies at the last evaluation they share.

The recording may have trained on another machine or thread count than the pack. ``--control NAME`` (repeatable)
trains that run alone here, on the pack's device and thread count, and compares it with the recording's run
(``against_recording``: what the machine and thread count change) and with the packed run (``against_pack``:
what the pack alone changes).

Writes benchmarks/results/<machine>-khop-pack.json (atomically) and prints it. ``--curves`` reads the packed
runs' curves from an earlier call's file instead of training them again, and its controls' curves where it
has them (a control trained now needs that call's device).
Usage: python benchmarks/khop_pack_divergence.py [--steps 3000] [--alone FILE] [--curves FILE] [--control NAME ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from pathlib import Path

import numpy as np
import results_file

from companion import config, record
from companion.config import check_int
from companion.experiments import khop, khop_stall_paths
from companion.experiments.khop import KHopExperiment

ALONE = record.RECORDED_DIR / "khop_seeds-quick-depth=4-eval_every=100-k=4-steps=16000.json"


def stage_steps(curves: dict) -> dict[str, float | None]:
    """{stage: the evaluation step at which the run moved to it} for stages 2..k
    (:func:`companion.experiments.khop_stall_paths.stage_moves`; None: never)."""
    moves = khop_stall_paths.stage_moves(curves)
    return {str(s): None if math.isinf(m) else m for s, m in enumerate(moves, start=2)}


def curves_of(r: dict) -> dict[str, list]:
    """A run's ``step``, ``acc``, ``stage`` and ``loss`` curves as lists of floats (for the results file)."""
    return {f: np.asarray(r[f], dtype=float).tolist() for f in ("step", "acc", "stage", "loss")}


def compare(alone: dict, packed: dict) -> dict:
    """One run alone against the same run packed (curves ``step``, ``acc``, ``stage`` of each), at the
    evaluations they share: the leading ones at the same steps."""
    n = next(
        (i for i, (a, b) in enumerate(zip(alone["step"], packed["step"])) if a != b),
        min(len(alone["step"]), len(packed["step"])),
    )
    first = next((alone["step"][i] for i in range(n) if alone["acc"][i] != packed["acc"][i]), None)
    return {
        "first_differing_eval": first,
        "stages_alone": stage_steps({f: alone[f][:n] for f in ("step", "acc", "stage")}),
        "stages_packed": stage_steps({f: packed[f][:n] for f in ("step", "acc", "stage")}),
        "last_shared_step": alone["step"][n - 1],
        "acc_alone": alone["acc"][n - 1],
        "acc_packed": packed["acc"][n - 1],
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--alone", default=str(ALONE), help="a khop_seeds recording whose runs trained alone")
    ap.add_argument("--curves", help="the packed runs' curves from an earlier call's results file")
    ap.add_argument(
        "--control",
        action="append",
        default=[],
        help="also train this run alone here and compare it with the recording's (repeatable)",
    )
    args = ap.parse_args(argv)
    check_int("steps", args.steps, low=1)
    rec = record.load(Path(args.alone))
    if rec.packing != "alone":
        raise ValueError(
            f"{args.alone}: its runs trained in {rec.packing}; allowed a recording made run by run"
        )
    exps = {n: dataclasses.replace(KHopExperiment(**c), steps=args.steps) for n, c in rec.config.items()}
    for name in args.control:
        if name not in exps:
            raise ValueError(f"--control {name!r}: allowed one of the recording's runs {sorted(exps)}")
    # where, at which commit and under which sampler the packed runs trained: this call (under the recording's
    # sampler, so that both draw the same batches), or the earlier one
    made = {"device": config.device_name(), "commit": record.commit(), "sampler": rec.drawn_by}
    if args.curves:
        earlier = json.loads(Path(args.curves).read_text())
        if earlier["steps"] != args.steps:
            raise ValueError(f"{args.curves} trained {earlier['steps']} steps; this call asks {args.steps}")
        made = {key: earlier[key] for key in made}
    if rec.drawn_by != made["sampler"]:  # an earlier call's pack, before any training
        raise ValueError(
            f"the alone runs drew from the {rec.drawn_by} sampler; the packed from {made['sampler']}"
        )
    if args.control and made["device"] != config.device_name():
        raise ValueError(
            f"the packed runs trained on {made['device']}, this call runs on {config.device_name()}: "
            "a control must train where the pack did"
        )
    if args.curves:
        packed, seconds = earlier["packed"], earlier["seconds"]
    else:
        start = time.perf_counter()
        with config.using_sampler(rec.drawn_by):
            runs = khop.run_many(exps, use_cache=False)
        seconds = time.perf_counter() - start
        packed = {n: curves_of(r) for n, r in runs.items()}
    out = {
        **made,
        "steps": args.steps,
        "alone": rec.path.name,
        "alone_sampler": rec.drawn_by,
        "alone_device": rec.data["device"],
        "seconds": seconds,
        "runs": {
            n: compare({f: rec.curves[f][n] for f in ("step", "acc", "stage")}, packed[n]) for n in exps
        },
        "packed": packed,
    }
    earlier_controls = earlier.get("control", {}) if args.curves else {}
    for name in args.control:  # each run alone here, where the pack trained (or the earlier call's)
        if name in earlier_controls:
            made_alone = {
                key: earlier_controls[name][key] for key in ("device", "commit", "seconds", "curves")
            }
        else:
            start = time.perf_counter()
            with config.using_sampler(rec.drawn_by):
                here = curves_of(khop.run(exps[name], use_cache=False))
            made_alone = {
                "device": config.device_name(),
                "commit": record.commit(),
                "seconds": time.perf_counter() - start,
                "curves": here,
            }
        here = made_alone["curves"]
        out.setdefault("control", {})[name] = made_alone | {
            "against_recording": compare({f: rec.curves[f][name] for f in ("step", "acc", "stage")}, here),
            "against_pack": compare(here, packed[name]),
        }
    path = results_file.path(out["device"], "-khop-pack")
    results_file.write(path, out)
    shown = {key: v for key, v in out.items() if key != "packed"}
    if "control" in out:
        shown["control"] = {
            n: {key: v for key, v in c.items() if key != "curves"} for n, c in out["control"].items()
        }
    print(json.dumps(shown, indent=1))


if __name__ == "__main__":
    main()
