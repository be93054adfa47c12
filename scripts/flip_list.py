"""Issue 54's flip list: the claim rows of some chapters as two builds judged them, the same code under the numpy
generators and under the counter-based samplers, written to data/flip_list.json (book/status shows it).

Each build is the chapters executed (for example under nbval) with its own cache folder; the second with
COMPANION_SAMPLER=counter. Rows whose category differs are the flips; a row's bar never moves for them.

    python scripts/flip_list.py --before CACHE_NUMPY --after CACHE_COUNTER \\
        --before-label "numpy, CI of 123936f" --after-label "counter, bcd6225" book/noisy_recall book/finetune ...

The seed sweep (the rows near their bars under two more seeds): builds of some chapters with COMPANION_SEED=1
and 2 under each sampler, given as ``--sweep "numpy, seed 1=CACHE"`` (the label names the sampler and the seed)
and ``--swept book/noisy_recall`` for each chapter those builds ran.

The rows that chapters read from recordings change only when the recordings are made again:

    python scripts/flip_list.py --add-recordings data/recorded/counter

adds to the committed list, for each recording in that folder (made under the counter sampler), the rows it checks
against the same file in data/recorded (made under the numpy generators).

Most recordings made again also trained on another number of threads, or in packs, than their namesakes, so
their rounding changed with the sampler. The rounding's share is measured on its own by recordings made again under
the numpy generators, each with the arithmetic of its counter namesake (data/recorded/rounding/):

    python scripts/flip_list.py --add-rounding data/recorded/rounding

adds, for each of them, the rows it checks against the same file in data/recorded: the rows that change category
with the rounding alone.

A chapter whose runs change after the list was made (another quick size) is compared again on its own: new builds
of that chapter (and its seed sweep, under the list's sweep labels) replace its rows, and the list says why:

    python scripts/flip_list.py --again "its quick batch became 64" --before ... --after ... book/synthetic_ioi
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from companion import claim_flips, config, record
from companion.experiments import khop_curves
from companion.io import atomic_write_text

OUT = config.committed_data_dir() / "flip_list.json"


def _write(path, data: dict) -> None:
    """The flip list ``data`` written to ``path``, atomically."""
    atomic_write_text(Path(path), json.dumps(data, indent=1) + "\n")


def add_recordings(folder, out=OUT, recorded=None) -> dict:
    """The committed flip list (``out``) with its ``recordings`` entry made from ``folder``: each recording there
    (made under the counter sampler) against the file of the same name in ``recorded`` (default
    data/recorded/, made under the numpy generators), by :func:`companion.claim_flips.recorded_flips`; written back.
    Where a k-hop recording's curriculum runs that end before their last stage (k hops) differ under the two
    samplers, its entry names them (``short_of_last_stage``): a study of the last stage is judged on runs that
    never trained on it. Each recording says how its runs trained under each sampler (``trained``: alone or in packs, on how many
    CPU threads or which GPU, :attr:`companion.recorded.Recorded.trained`), and a row whose recording trained
    otherwise under the two carries that too: its change is the sampler's and the rounding's together.

    Raises:
        ValueError: a recording in ``folder`` that is not the counter sampler's, or has no file of its name in
            ``recorded``, or whose namesake is not the numpy generators'.
    """
    recorded = Path(recorded or record.RECORDED_DIR)
    pairs, made = [], []
    for path in sorted(Path(folder).glob("*.json")):
        new, old_path = record.load(path), recorded / path.name
        if new.drawn_by != "counter":
            raise ValueError(f"{path}: drawn by the {new.drawn_by} sampler; allowed the counter sampler's")
        if not old_path.is_file():
            raise ValueError(f"{path.name}: no recording of that name in {recorded}")
        old = record.load(old_path)
        if old.drawn_by != "numpy":
            raise ValueError(
                f"{old_path}: drawn by the {old.drawn_by} sampler; allowed the numpy generators'"
            )
        pairs.append((path.name, old.claims, new.claims))
        trained = {"numpy": old.trained, "counter": new.trained}
        made.append({"file": path.name, "label": new.label(), "command": new.command, "trained": trained})
        short = {side: _short(r) for side, r in (("numpy", old), ("counter", new))}
        if short["numpy"] != short["counter"]:
            made[-1]["short_of_last_stage"] = short
    rows = claim_flips.recorded_flips(pairs)
    how = {m["file"]: m["trained"] for m in made}
    for (
        row
    ) in rows:  # a row whose recording's runs trained otherwise (packed, threads) under the two samplers
        if how[row["recording"]]["numpy"] != how[row["recording"]]["counter"]:
            row["trained"] = how[row["recording"]]
    data = json.loads(Path(out).read_text())
    data["recordings"] = {"folder": str(Path(folder)), "made": made, "rows": rows}
    _write(out, data)
    return data


def _short(rec) -> list[str]:
    """A k-hop recording's curriculum runs that ended before their last stage
    (:func:`companion.experiments.khop_curves.short_of_last_stage`); none for another experiment's."""
    stages = (rec.data.get("curves") or {}).get("stage") if rec.experiment.startswith("khop") else None
    return khop_curves.short_of_last_stage(stages, rec.config) if stages else []


def add_rounding(folder, out=OUT, recorded=None) -> dict:
    """The committed flip list (``out``) with its ``rounding`` entry made from ``folder``: each recording there,
    made again under the numpy generators with the arithmetic (:attr:`companion.recorded.Recorded.trained`) of
    its namesake made under the counter sampler (in ``recorded``/counter), against its namesake in ``recorded``
    (default data/recorded/, made under the numpy generators otherwise), by
    :func:`companion.claim_flips.recorded_flips`: the rows that change category with the rounding alone. Written back.

    Raises:
        ValueError: a recording in ``folder`` that is not the numpy generators', or has no namesake in
            ``recorded`` and its counter folder, or was not made with its counter namesake's arithmetic, or with
            the arithmetic of its numpy namesake (no rounding changed).
    """
    recorded = Path(recorded or record.RECORDED_DIR)
    pairs, made = [], []
    for path in sorted(Path(folder).glob("*.json")):
        new = record.load(path)
        if new.drawn_by != "numpy":
            raise ValueError(f"{path}: drawn by the {new.drawn_by} sampler; allowed the numpy generators'")
        if not (recorded / path.name).is_file() or not (recorded / "counter" / path.name).is_file():
            raise ValueError(f"{path.name}: allowed a recording made again under both samplers in {recorded}")
        old, counter = record.load(recorded / path.name), record.load(recorded / "counter" / path.name)
        if new.trained != counter.trained:
            raise ValueError(
                f"{path.name}: trained {new.trained}; its counter namesake {counter.trained} (allowed the same)"
            )
        if new.trained == old.trained:
            raise ValueError(
                f"{path.name}: trained {new.trained}, as its numpy namesake: no rounding changed"
            )
        pairs.append((path.name, old.claims, new.claims))
        trained = {"numpy": old.trained, "again": new.trained}
        made.append({"file": path.name, "label": new.label(), "command": new.command, "trained": trained})
    data = json.loads(Path(out).read_text())
    data["rounding"] = {"folder": str(Path(folder)), "made": made, "rows": claim_flips.recorded_flips(pairs)}
    _write(out, data)
    return data


def again(chapter: str, rows: list[dict], builds: dict, why: str, out=OUT, not_reached: str = "") -> dict:
    """The committed flip list (``out``) with the rows of ``chapter`` replaced by ``rows``
    (:func:`companion.claim_flips.flips` of new builds of that chapter alone), where the old rows stood, and with
    ``data["again"][chapter]``: the builds' labels (``builds``: {"before": ..., "after": ...}), ``why`` the chapter
    was compared again, and the date; written back. The old builds' reason for rows they did not reach is replaced
    by ``not_reached`` (none: the new builds reached every row).

    Raises:
        ValueError: ``chapter`` is not among the list's chapters, ``rows`` hold another chapter's rows, or the
            chapter was swept and ``rows`` do not carry the list's sweep builds.
    """
    data = json.loads(Path(out).read_text())
    if chapter not in data["chapters"]:
        raise ValueError(f"{chapter!r} is not among the flip list's chapters: allowed {data['chapters']}")
    others = sorted({r["chapter"] for r in rows} - {chapter})
    if others:
        raise ValueError(f"rows of {others}: allowed only {chapter!r}'s")
    if chapter in data["swept"] and any(sorted(r.get("sweep", {})) != sorted(data["sweeps"]) for r in rows):
        raise ValueError(f"{chapter} was swept: each row needs the sweep builds {data['sweeps']}")
    old = [i for i, r in enumerate(data["rows"]) if r["chapter"] == chapter]
    kept = [r for r in data["rows"] if r["chapter"] != chapter]
    at = old[0] if old else len(kept)
    data["rows"] = kept[:at] + rows + kept[at:]
    entry = {
        "before": builds["before"],
        "after": builds["after"],
        "why": why,
        "date": time.strftime("%Y-%m-%d"),
    }
    data["again"] = {**data.get("again", {}), chapter: entry}
    data["not_reached"] = {k: v for k, v in data["not_reached"].items() if k != chapter}
    data["not_reached"] |= {chapter: not_reached} if not_reached else {}
    _write(out, data)
    return data


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--add-recordings", metavar="FOLDER", help="recordings made again under the counter sampler"
    )
    ap.add_argument(
        "--add-rounding",
        metavar="FOLDER",
        help="recordings made again under the numpy generators with their counter namesakes' arithmetic",
    )
    ap.add_argument("--before", help="the numpy build's cache folder")
    ap.add_argument("--after", help="the counter build's cache folder")
    ap.add_argument("--before-label")
    ap.add_argument("--after-label")
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
    ap.add_argument(
        "--again",
        metavar="WHY",
        help="replace one chapter's rows by these builds' (why it was compared again)",
    )
    ap.add_argument("chapters", nargs="*", help="docnames, e.g. book/noisy_recall")
    args = ap.parse_args(argv)
    if args.add_recordings and args.add_rounding:
        ap.error("--add-recordings and --add-rounding are separate calls")
    if args.add_recordings or args.add_rounding:
        entry = "recordings" if args.add_recordings else "rounding"
        data = (add_recordings if args.add_recordings else add_rounding)(
            args.add_recordings or args.add_rounding
        )
        rows = data[entry]["rows"]
        print(f"{len(rows)} recorded rows, {sum(r['changed'] for r in rows)} changed; wrote {OUT}")
        for r in rows:
            if r["changed"]:
                print(f"  {r['claim']}: {r['before']['category']} -> {r['after']['category']}")
        return
    missing = [a for a in ("before", "after", "before_label", "after_label") if not getattr(args, a)]
    if missing or not args.chapters:
        ap.error(
            f"the builds' comparison needs --before, --after, their labels and chapters (missing: {missing})"
        )
    sweeps = dict(s.rsplit("=", 1) for s in args.sweep)
    for label in sweeps:
        sampler, _, seed = label.partition(", seed ")
        if sampler not in ("numpy", "counter") or not seed.isdigit():
            raise ValueError(f"--sweep label {label!r}: allowed '<numpy or counter>, seed <N>'")
    why = dict(w.split("=", 1) for w in args.why)
    for chapter in why:
        if chapter not in args.chapters:
            raise ValueError(f"--why names {chapter!r}, which is not among the chapters compared")
    if args.again and len(args.chapters) != 1:
        raise ValueError(f"--again compares one chapter again; given {args.chapters}")
    rows = claim_flips.flips(args.before, args.after, args.chapters, sweeps=sweeps, swept=args.swept)
    if args.again:
        builds = {"before": args.before_label, "after": args.after_label}
        again(args.chapters[0], rows, builds, args.again, not_reached=why.get(args.chapters[0], ""))
        print(f"{args.chapters[0]}: {len(rows)} rows replaced; wrote {OUT}")
        return
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
    _write(OUT, out)
    changed = [r for r in rows if r["changed"]]
    print(f"{len(rows)} rows, {len(changed)} changed; wrote {OUT}")
    for r in changed:
        print(f"  {r['claim']}: {r['before']['category']} -> {r['after']['category']}")


if __name__ == "__main__":
    main()
