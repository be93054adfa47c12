"""Which seeds give the k-hop stall studies their runs? (issue 54: the studies' subjects, chosen by outcome)

The stall studies (book/khop_stall) probe a run that stalled on its last stage (four hops) and the same seed's run
that learned it advancing its curriculum every 250 steps instead of every 100. Which run stalls turns on the
rounding (benchmarks/khop_pack_divergence.py), so those runs have to be chosen by outcome, among runs trained the
way the studies train them: alone, at the probe study's settings (``khop_probe``: depth 4, 8000 steps). This
trains seeds 0 .. ``--seeds`` - 1, each advancing every 100 and every 250 steps, alone and under the sampler in
force, and classifies each run's end (:func:`companion.experiments.khop_curves.last_stage_outcome`): the seeds whose
run every 100 stalled on its last stage and whose run every 250 learned it are the pairs a study could take.

The rule that picks the subject (:func:`companion.experiments.khop_stall.subject`, registered on 2026-12-03,
before seeds 3-9 were trained under either sampler): **the lowest seed in 0 .. 9 that gives such a pair, under the
sampler in force, on one thread.** If none of 0 .. 9 does, the stall studies have no subject at quick size under
that sampler: their chapter says so and their rows wait for the full profile (no wider search on the CPU). The
runs, the pairs and the rule are the package's (:mod:`companion.experiments.khop_stall`); this script trains
them and writes what they gave.

Writes benchmarks/results/<machine>-khop-subjects-<sampler>.json (atomically) and prints its table.
Usage: python benchmarks/khop_subjects.py [--seeds 3] [--first 0] [--steps 8000]
(``--first``: train seeds first .. seeds - 1 only, so that two processes share the survey; a later call over all
the seeds reads their runs from the cache and writes the one result file.)
"""

from __future__ import annotations

import argparse
import math

import results_file

from companion import config, record
from companion.config import check_int
from companion.experiments import khop, khop_curves, khop_stall_paths
from companion.experiments.khop_four_hops import interval_name
from companion.experiments.khop_members import EXPLORED_EVERY
from companion.experiments.khop_stall import subject, subject_members, subject_pairs
from companion.report import markdown_table

HEADER = ["seed", "every", "moves to stages 2..k", "final accuracy at 1..k hops", "outcome", "seconds"]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--steps", type=int, default=8000)
    args = ap.parse_args(argv)
    check_int("seeds", args.seeds, low=1)
    check_int("first", args.first, low=0, high=args.seeds - 1)
    check_int("steps", args.steps, low=1)
    runs, rows, outcomes = {}, [], {}
    for (seed, every), exp in subject_members(args.seeds, args.steps).items():
        if seed < args.first:
            continue
        r = khop.run(exp)  # alone, as the stall studies train (cached under the sampler in force)
        seconds = r["seconds"]  # its training time as the run measured it, whether trained now or read back
        curves = {f: r[f] for f in ("step", "acc", "stage")}
        outcomes[seed, every] = khop_curves.last_stage_outcome(curves)
        moves = [None if math.isinf(m) else m for m in khop_stall_paths.stage_moves(curves)]  # None: never
        final = [round(float(a), 4) for a in r["acc"][-1]]
        runs[interval_name(seed, every)] = {
            "moves": moves,
            "final": final,
            "outcome": outcomes[seed, every],
            "seconds": seconds,
        }
        rows.append([seed, every, moves, final, outcomes[seed, every], round(seconds)])
    sampler = config.sampler()
    out = {
        "device": config.device_name(),
        "commit": record.commit(),
        "sampler": sampler,
        "steps": args.steps,
        "runs": runs,
        "pairs": subject_pairs(outcomes),
    }
    print(markdown_table(HEADER, rows))
    print(f"seeds with a stalled run every 100 and a learned run every {EXPLORED_EVERY}: {out['pairs']}")
    if args.first:  # a share of the survey: its runs are cached, the result file waits for the call over all
        return
    try:
        out["subject"] = subject(outcomes)
    except ValueError as e:  # fewer seeds than the rule needs: the survey so far, no subject yet
        out["subject"] = None
        out["subject_pending"] = str(e)
    print(f"subject (the registered rule): {out.get('subject_pending') or out['subject']}")
    results_file.write(results_file.path(out["device"], f"-khop-subjects-{sampler}"), out)


if __name__ == "__main__":
    main()
