"""Command line: ``python -m companion ...`` for long runs outside Jupyter.

Examples::

    python -m companion derive-counts                 # data/tinyshakespeare_char_counts.json
    python -m companion recall --profile full         # train + cache the Fig. 3 run
    python -m companion recall --schedule finetune --pretrain-steps 2000
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m companion", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("derive-counts", help="derive the committed character counts from tiny Shakespeare")
    p.add_argument("--no-download", action="store_true", help="only look in $COMPANION_DATA_DIR and the cache")

    p = sub.add_parser("recall", help="train and measure the noisy in-context recall model (cached)")
    p.add_argument("--profile", default=None, help="quick or full (default: $COMPANION_PROFILE or quick)")
    p.add_argument("--schedule", default="noisy", help="noisy or finetune")
    p.add_argument("--pretrain-steps", type=int, default=None)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--alpha", type=float, default=None)
    p.add_argument("--loss-on", default=None, help="final (paper) or triggers (public code)")
    p.add_argument("--noise", default=None, help="new (paper) or existing (public code)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--no-cache", action="store_true")
    args = parser.parse_args(argv)

    if args.command == "derive-counts":
        from companion.data.shakespeare import write_counts

        print(write_counts(download=not args.no_download))
        return 0

    from companion.experiments import noisy_recall

    overrides = {k: v for k, v in dict(schedule=args.schedule, pretrain_steps=args.pretrain_steps,
                                       steps=args.steps, alpha=args.alpha, loss_on=args.loss_on,
                                       noise=args.noise, seed=args.seed).items() if v is not None}
    exp = noisy_recall.RecallExperiment.for_profile(args.profile, **overrides)  # validates first
    run = noisy_recall.run(exp, device=args.device, use_cache=not args.no_cache)
    summary = {
        "seconds": run.seconds, "device": run.device,
        "late_p_noise_full": run.late_mean("clean_p_noise", rho=1.0),
        "late_p_correct_full": run.late_mean("clean_p_correct", rho=1.0),
        "late_p_correct_drop_F2": run.late_mean("clean_p_correct", rho=0.0),
        "late_attn_to_correct": run.late_mean("attn_to_correct"),
        "late_attn_to_noise": run.late_mean("attn_to_noise"),
    }
    json.dump(summary, sys.stdout, indent=1)
    print()
    return 0
