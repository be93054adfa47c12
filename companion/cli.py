"""Command line: ``python -m companion ...`` for long runs outside Jupyter.

Examples::

    python -m companion derive-counts                 # data/tinyshakespeare_char_counts.json
    python -m companion recall --profile full         # train + cache the Fig. 3 run
    python -m companion recall --schedule finetune --pretrain-steps 2000
    python -m companion recall --ff mlp linear --truncate F2.W_F --steps 2000   # Fig. 11
    python -m companion recall --task ioi --ff mlp mlp mlp --truncate F3.U_in    # Fig. 19
    python -m companion allocation --profile full                               # Fig. 6
    python -m companion record recall --profile full                            # data/recorded/recall-full.json
    python -m companion record recall --set d=128 --set seq_len=64 --set steps=1000 --threads 1
    python -m companion record architectures --profile full                     # Figs. 10-13 (4 runs)
    python -m companion record --all --profile full --deadline 500 --device cuda  # the sources' experiments
    python -m companion llm gpt2-ioi --model openai-community/gpt2 --out gpt2_ioi.json   # Fig. 17
    python -m companion llm pythia --model EleutherAI/pythia-1b --out pythia.json      # Figs. 5, 14-16, Table 1
    python -m companion llm gsm8k --model microsoft/Phi-3-mini-4k-instruct --out phi3.json  # Table 2
"""

from __future__ import annotations

import argparse
import json
import sys

from companion import config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m companion", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("derive-counts", help="derive the committed character counts from tiny Shakespeare")
    p.add_argument(
        "--no-download", action="store_true", help="only look in $COMPANION_DATA_DIR and the cache"
    )

    p = sub.add_parser("recall", help="train and measure the noisy in-context recall model (cached)")
    p.add_argument("--profile", default=None, help="quick or full (default: $COMPANION_PROFILE or quick)")
    p.add_argument("--schedule", default="noisy", help="noisy or finetune")
    p.add_argument("--pretrain-steps", type=int, default=None)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--alpha", type=float, default=None)
    p.add_argument("--loss-on", default=None, help="final (paper) or triggers (public code)")
    p.add_argument("--noise", default=None, help="new (paper) or existing (public code)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--task", dest="task_kind", default=None, help="recall (Sec. 3) or ioi (App. J)")
    p.add_argument("--ff", nargs="+", default=None, help="one of mlp, linear, none per layer (L = count)")
    p.add_argument("--truncate", default=None, help="matrix swept over rho, e.g. F2.U_in, W_V^1")
    p.add_argument("--optimizer", default=None, help="sgd or adam")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--d", type=int, default=None)
    p.add_argument("--seq-len", type=int, default=None)
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--no-cache", action="store_true")

    p = sub.add_parser("llm", help="probe a pretrained model (Sec. 4, App. C) and write a results JSON")
    p.add_argument("study", choices=["gpt2-ioi", "pythia", "gsm8k"])
    p.add_argument(
        "--model", required=True, help="Hub name or local folder (for pythia: with step{N} folders)"
    )
    p.add_argument("--revisions", nargs="+", default=None, help="pythia: checkpoints (default: Fig. 5's)")
    p.add_argument("--layer", type=int, default=None, help="LASER layer (1-based; default: App. C.2)")
    p.add_argument("--matrix", default=None, help="LASER matrix: mlp_in, mlp_out, ... (default: App. C.2)")
    p.add_argument("--rho", type=float, default=None, help="LASER kept-rank fraction (default: App. C.2)")
    p.add_argument("--shots", type=int, nargs="+", default=[1, 2, 4, 8], help="gsm8k: numbers of exemplars")
    p.add_argument("--n-problems", type=int, default=None, help="gsm8k: first N test problems (default all)")
    p.add_argument("--dtype", default="float32", help="float32, float16 or bfloat16")
    p.add_argument("--device", default=None)
    p.add_argument("--out", required=True, help="results file (JSON)")

    p = sub.add_parser("allocation", help="parameter allocation MLP vs attention (Fig. 6; cached)")
    p.add_argument("--profile", default=None, help="quick or full (default: $COMPANION_PROFILE or quick)")
    p.add_argument("--device", default=None)
    p.add_argument("--no-cache", action="store_true")

    p = sub.add_parser("record", help="run an experiment and write its results file under data/recorded/")
    p.add_argument(
        "experiment", nargs="?", default=None, help="recordable experiment: " + ", ".join(_recordable())
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="every experiment of the sources, then their sweeps (App. B.6's learning rates; not our own "
        "studies unless --include), one after another, skipping those already recorded, within --deadline",
    )
    p.add_argument("--include", action="append", default=[], metavar="NAME", help="with --all: a study too")
    p.add_argument("--deadline", type=float, default=600.0, help="with --all: seconds for all (default 600)")
    p.add_argument("--profile", default=None, help="quick or full (default: $COMPANION_PROFILE or quick)")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one setting of the profile (repeatable), e.g. --set d=128 --set ff=mlp,linear",
    )
    p.add_argument("--device", default=None)
    p.add_argument(
        "--threads", type=int, default=None, help="CPU threads for torch and numpy's BLAS (default: theirs)"
    )
    p.add_argument(
        "--out-dir",
        default=None,
        help="folder of the results file (default: data/recorded/ under the numpy sampler, "
        "data/recorded/<sampler>/ under another)",
    )
    p.add_argument(
        "--precision", default="fp32", help="float32 matrix products: fp32 (default) or tf32 (TF32 on CUDA)"
    )
    args = parser.parse_args(argv)

    if args.command == "record":
        try:
            return _record(args)
        except ValueError as e:  # bad experiment name or setting: said before any work
            parser.error(str(e))

    if args.command == "derive-counts":
        from companion.data.shakespeare import write_counts

        print(write_counts(download=not args.no_download))
        return 0

    if args.command == "llm":
        return _llm(args)

    if args.command == "allocation":
        from companion.experiments import allocation

        exp = allocation.AllocationExperiment.for_profile(args.profile)
        result = allocation.run(exp, device=args.device, use_cache=not args.no_cache)
        summary = {
            "seconds": result["seconds"],
            "device": result["device"],
            "entropy": result["entropy"],
            "best": allocation.best_rows(result),
        }
        json.dump(summary, sys.stdout, indent=1)
        print()
        return 0

    from companion.experiments import noisy_recall

    overrides = {
        k: v
        for k, v in dict(
            schedule=args.schedule,
            pretrain_steps=args.pretrain_steps,
            steps=args.steps,
            alpha=args.alpha,
            loss_on=args.loss_on,
            noise=args.noise,
            seed=args.seed,
            task_kind=args.task_kind,
            ff=None if args.ff is None else tuple(args.ff),
            truncate=args.truncate,
            optimizer=args.optimizer,
            lr=args.lr,
            d=args.d,
            seq_len=args.seq_len,
            batch=args.batch,
        ).items()
        if v is not None
    }
    exp = noisy_recall.RecallExperiment.for_profile(args.profile, **overrides)  # validates first
    run = noisy_recall.run(exp, device=args.device, use_cache=not args.no_cache)
    summary = {"seconds": run.seconds, "device": run.device, "diverged_at": run.diverged_at}
    for key in sorted(run.metrics):  # late means of every clean-data variant (full, drops, rho sweep)
        if key.startswith("clean_") and run.metrics[key].ndim == 1:
            summary[f"late_{key}"] = run.late_mean(key)
        elif key.startswith("clean_"):
            summary[f"late_{key}"] = {f"rho={r:g}": run.late_mean(key, rho=r) for r in exp.rhos}
    summary["late_attn_to_correct"] = run.late_mean("attn_to_correct")
    summary["late_attn_to_noise"] = run.late_mean("attn_to_noise")
    json.dump(summary, sys.stdout, indent=1)
    print()
    return 0


def _recordable() -> list[str]:
    from companion.record import EXPERIMENTS

    return list(EXPERIMENTS)


def _record(args) -> int:
    from companion import record
    from companion.report import markdown_table

    if args.all == (args.experiment is not None):
        raise ValueError("name one experiment, or give --all (not both)")
    if args.all:
        if args.sets:
            raise ValueError("--set applies to one experiment; --all records the profile's configurations")
        if args.threads is not None:
            config.check_int("threads", args.threads, low=1)
        rows = record.record_all(
            args.profile,
            args.deadline,
            tuple(args.include),
            args.device,
            args.out_dir,
            args.threads,
            progress=True,
            precision=args.precision,
        )
        print(markdown_table(record.ALL_HEADER, rows))
        return 0
    overrides = record.parse_overrides(args.sets)
    record.build(args.experiment, args.profile, overrides)  # bad names or values fail here, before any work
    if args.threads is not None:
        import torch

        config.check_int("threads", args.threads, low=1)
        torch.set_num_threads(args.threads)
    path = record.record(
        args.experiment,
        args.profile,
        overrides,
        device=args.device,
        out_dir=args.out_dir,
        precision=args.precision,
    )
    rec = record.load(path)
    print(
        json.dumps(
            {
                "file": str(path),
                "label": rec.label(),
                "train_seconds": rec.train_seconds,
                "wall_seconds": rec.wall_seconds,
                "claims": rec.claims,
            },
            indent=1,
        )
    )
    return 0


def _llm(args) -> int:
    from companion.llm import hub, studies
    from companion.llm.summaries import PYTHIA_REVISIONS

    def spec(task: str):
        given = (args.layer, args.matrix, args.rho)
        default = studies.PAPER_LASER.get((task, args.model))
        if default is None and None in given:
            raise ValueError(
                f"no Appendix C.2 LASER setting for {task} on {args.model!r}: "
                f"give --layer, --matrix and --rho"
            )
        layer, matrix, rho = (g if g is not None else d for g, d in zip(given, default or given))
        # before the model loads (a download of gigabytes, or minutes of reading); the layer's top and the matrix
        # names depend on the model, checked once it is loaded
        config.check_int("layer", layer, 1)
        config.check_float("rho", rho, 0.0, 1.0)
        return layer, matrix, rho

    settings = {"study": args.study, "model": args.model, "dtype": args.dtype}
    if args.study == "gpt2-ioi":
        loaded = hub.load(args.model, dtype=args.dtype, device=args.device)
        metrics = studies.study_gpt2_ioi(loaded)
    elif args.study == "pythia":
        revisions = args.revisions or list(PYTHIA_REVISIONS)
        for r in revisions:
            hub.check_revision(args.model, r)  # every revision checked before the first download
        ioi, fact = spec("ioi"), spec("factual")
        settings.update(revisions=revisions, ioi_spec=ioi, factual_spec=fact)
        metrics = {
            "checkpoints": studies.study_checkpoints(
                args.model, revisions, ioi, fact, dtype=args.dtype, device=args.device
            )
        }
        loaded = hub.load(args.model, revisions[-1], dtype=args.dtype, device=args.device)
        metrics["final"] = studies.study_final(loaded, ioi, fact)
    else:
        s = spec("gsm8k")
        studies.check_gsm8k(args.shots, args.n_problems)  # before the model loads
        settings.update(spec=s, shots=args.shots, n_problems=args.n_problems)
        loaded = hub.load(args.model, dtype=args.dtype, device=args.device)
        metrics = studies.study_gsm8k(loaded, shots=tuple(args.shots), spec=s, n_problems=args.n_problems)
    path = studies.save_results(args.out, args.study, loaded, settings, metrics)
    print(path)
    return 0
