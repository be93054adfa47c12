"""Issue 54's flip list: the claim rows of some chapters as two builds judged them, the same code under the numpy
generators and under the counter-based samplers, written to data/flip_list.json (book/status shows it).

Each build is the chapters executed (for example under nbval) with its own cache folder; the second with
COMPANION_SAMPLER=counter. Rows whose category differs are the flips; a row's bar never moves for them.

    python scripts/flip_list.py --before CACHE_NUMPY --after CACHE_COUNTER \\
        --before-label "numpy, CI of 123936f" --after-label "counter, bcd6225" book/noisy_recall book/finetune ...

The seed sweep (the rows near their bars under two more seeds): builds of some chapters with COMPANION_SEED=1
and 2 under each sampler, given as ``--sweep "numpy, seed 1=CACHE"`` (the label names the sampler and the seed)
and ``--swept book/noisy_recall`` for each chapter those builds ran.
"""

from __future__ import annotations

import argparse
import json
import time

from companion import claims, config
from companion.io import atomic_write_text

OUT = config.committed_data_dir() / "flip_list.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="the numpy build's cache folder")
    ap.add_argument("--after", required=True, help="the counter build's cache folder")
    ap.add_argument("--before-label", required=True)
    ap.add_argument("--after-label", required=True)
    ap.add_argument(
        "--why", action="append", default=[], metavar="CHAPTER=TEXT",
        help="why a chapter's build did not reach some of its rows (repeatable)",
    )  # fmt: skip
    ap.add_argument(
        "--sweep", action="append", default=[], metavar="SAMPLER, seed N=CACHE",
        help="a build of the swept chapters under another seed (repeatable)",
    )  # fmt: skip
    ap.add_argument(
        "--swept", action="append", default=[], metavar="CHAPTER", help="a chapter the sweeps ran"
    )
    ap.add_argument("chapters", nargs="+", help="docnames, e.g. book/noisy_recall")
    args = ap.parse_args()
    sweeps = dict(s.rsplit("=", 1) for s in args.sweep)
    for label in sweeps:
        sampler, _, seed = label.partition(", seed ")
        if sampler not in ("numpy", "counter") or not seed.isdigit():
            raise ValueError(f"--sweep label {label!r}: allowed '<numpy or counter>, seed <N>'")
    why = dict(w.split("=", 1) for w in args.why)
    for chapter in why:
        if chapter not in args.chapters:
            raise ValueError(f"--why names {chapter!r}, which is not among the chapters compared")
    rows = claims.flips(args.before, args.after, args.chapters, sweeps=sweeps, swept=args.swept)
    out = {
        "issue": 54,
        "profile": "quick",
        "date": time.strftime("%Y-%m-%d"),
        "before": {"sampler": "numpy", "build": args.before_label},
        "after": {"sampler": "counter", "build": args.after_label},
        "chapters": args.chapters,
        "not_reached": why,
        "sweeps": list(sweeps),
        "swept": args.swept,
        "rows": rows,
    }
    atomic_write_text(OUT, json.dumps(out, indent=1) + "\n")
    changed = [r for r in rows if r["changed"]]
    print(f"{len(rows)} rows, {len(changed)} changed; wrote {OUT}")
    for r in changed:
        print(f"  {r['claim']}: {r['before']['category']} -> {r['after']['category']}")


if __name__ == "__main__":
    main()
