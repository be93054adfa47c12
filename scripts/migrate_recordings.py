"""Migrate the committed recordings (data/recorded/) when a claim row or a name changes, so that nothing is
retrained for a rename (issue 52).

Each migration below is a step applied once, in order, and named in the commit that made it; applying it again
changes nothing. A recording's runs, summary values and provenance (commit, package hash, device, times) are left
as they were: a migration only edits the bookkeeping that names them.

    python scripts/migrate_recordings.py          # apply every step (idempotent)
    python scripts/migrate_recordings.py --check  # exit 1 if a step would still change a file
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from companion import recorded

RECORDED = Path(__file__).resolve().parents[1] / "data" / "recorded"

# 2026-11-28: the checks of our pipeline that were claim rows (runs that must agree to the last digit) became
# tests (tests/test_khop_agree.py); recordings stop listing them among the claims they check. Their summary
# entries stay: the tests read them.
DROPPED_CLAIMS = (
    "khop.k4_doubling_same_until_split",
    "khop.k4_entry_prefix",
)


def drop_claims(data: dict, ids) -> dict:
    """``data`` (a recording) without the claim ids ``ids`` among the claims it checks."""
    return {**data, "claims": {k: v for k, v in data.get("claims", {}).items() if k not in set(ids)}}


# 2026-11-28: names that explain themselves. "B10" was our notes' label for the talk's claim that a model with
# random triggers prefers the induction head unless the bigram's top predictions agree with it; the experiment,
# claim ids, summary entries and curves take plain words (induction_random_seeds, ih.random_*, random_seeds_*,
# random_*).
RENAMES = (
    (r"^induction_b10_seeds$", "induction_random_seeds"),
    (r"^ih\.b10_", "ih.random_"),
    (r"^b10s_", "random_seeds_"),
    (r"^b10_", "random_"),
)


def rename(data: dict, rules=RENAMES) -> dict:
    """``data`` (a recording) with each rule (pattern, replacement) applied to its experiment's name, its
    command's, and the names of its summary entries, meanings, claims and curves; values are kept."""

    def new(name: str) -> str:
        for pattern, replacement in rules:
            name = re.sub(pattern, replacement, name)
        return name

    out = dict(data, experiment=new(data["experiment"]))
    if "command" in data:
        words = data["command"].split(" ")
        out["command"] = " ".join(new(w) for w in words)
    for field in ("summary", "meaning", "claims", "curves"):
        if field in data:
            out[field] = {new(k): v for k, v in data[field].items()}
    return out


# 2026-11-28: the paper gives no number for Fig. 7 (left)'s previous-token head or App. B.1's pre-trained head
# (issue 53). Their rows now judge what the paper says against a position-blind head (the summary entries
# prev_over_uniform and pre_n_over_uniform, computed from entries the recording stores and its T); our bars of
# 0.5 become rows of ours (recall.prev_token_sharp, finetune.pretrain_even) on the entries the old rows read.
# Frozen here rather than imported: companion.experiments.summaries computes the same entries for new runs.
ATTENDS = {
    "recall": (
        "prev",
        "prev_over_uniform",
        "prev over a position-blind head's mean mass on s = t - 1, (H_T - 1) / (T - 1)",
        lambda value, T: value * (T - 1) / sum(1.0 / k for k in range(2, T + 1)),
        {"recall.prev_token_head": "prev_over_uniform", "recall.prev_token_sharp": "prev"},
    ),
    "finetune": (
        "pre_n",
        "pre_n_over_uniform",
        "pre_n in units of the uniform 1 / T",
        lambda value, T: value * T,
        {"finetune.pretrain_attends_all": "pre_n_over_uniform", "finetune.pretrain_even": "pre_ratio"},
    ),
}


def against_uniform(data: dict, table=ATTENDS) -> dict:
    """``data`` (a recording of an experiment in ``table``) with the entry measured against a position-blind
    head added to its summary and meanings, and its claims read from the entries ``table`` names."""
    if data["experiment"] not in table:
        return data
    source, entry, meaning, scale, claims = table[data["experiment"]]
    if entry in data["summary"]:  # recorded by a package that computes it (or migrated before): kept as it is
        return data
    summary = {**data["summary"], entry: scale(data["summary"][source], data["config"]["seq_len"])}
    out = dict(data, summary=summary, meaning={**data.get("meaning", {}), entry: meaning})
    out["claims"] = {**data["claims"], **{cid: summary[key] for cid, key in claims.items()}}
    return out


# 2026-11-28: the fine-tuning summary also stores the uniform share 1 / T and pre_c in its units, which two
# chapters computed from the recording (summaries.over_uniform, retired). Frozen here as above.
PER_POSITION = {
    "finetune": (
        ("uniform", "uniform attention per position, 1 / T", lambda summary, T: 1.0 / T),
        (
            "pre_c_over_uniform",
            "pre_c in units of the uniform 1 / T",
            lambda summary, T: summary["pre_c"] * T,
        ),
    ),
}


def add_entries(data: dict, table=PER_POSITION) -> dict:
    """``data`` (a recording of an experiment in ``table``) with the summary entries ``table`` computes from its
    summary and T added, with their meanings."""
    if data["experiment"] not in table:
        return data
    T = data["config"]["seq_len"]
    entries = table[data["experiment"]]
    if all(name in data["summary"] for name, _, _ in entries):  # already there: kept as recorded
        return data
    summary = {**data["summary"], **{name: f(data["summary"], T) for name, _, f in entries}}
    return dict(data, summary=summary, meaning={**data.get("meaning", {}), **{n: m for n, m, _ in entries}})


# 2026-12-02: the experiments whose runs draw no training batch from the sampler (Recordable.draws false: data drawn
# once, or the full set each step) store no sampler version, so that the switch to the counter sampler (issue 54)
# does not label their recordings as another sampler's. Frozen here: the registry declares the same.
SAMPLER_FREE = ("scan_snap_text", "theory_one_step", "theory_attention")


def sampler_free(data: dict, names=SAMPLER_FREE) -> dict:
    """``data`` (a recording) with sampler null where its experiment is one of ``names``."""
    if data["experiment"] not in names or data.get("sampler", 0) is None:
        return data
    return {**data, "sampler": None}


# 2026-12-02: the quick synthetic IOI batch became 64 (128 took its chapter 4.5 minutes on one CPU thread, over the
# 3 a chapter has); the larger IOI run (catalog.IOI_LARGER), recorded when the quick batch was 128, names that batch
# among its settings, as the catalog now does. Frozen here: (experiment, profile, setting, the value it ran with).
INHERITED = (("synthetic_ioi", "quick", "batch", 128),)


def name_inherited(data: dict, table=INHERITED) -> dict:
    """``data`` (a recording) with each setting of ``table`` that it inherited from its profile (every run's
    configuration has the value, its overrides do not name it) added to its overrides and its command."""
    configs = data["config"] if "d" not in data["config"] else {"": data["config"]}
    for experiment, profile, key, value in table:
        if (
            (data["experiment"], data["profile"]) != (experiment, profile)
            or key in data["overrides"]
            or any(c.get(key) != value for c in configs.values())
        ):
            continue
        data = {**data, "overrides": {**data["overrides"], key: value}}
        data["command"] = recorded.command(*_named(data))
    return data


STEPS = (
    ("claims that became tests", lambda data: drop_claims(data, DROPPED_CLAIMS)),
    ("names that explain themselves", rename),
    ("the paper's words against a position-blind head", against_uniform),
    ("the fine-tuning head's shares in units of 1 / T", add_entries),
    ("runs that draw no batch from the sampler", sampler_free),
    ("settings inherited from a profile that has changed", name_inherited),
)


def _named(data: dict) -> tuple:
    """A recording's experiment, profile, settings (JSON lists back to tuples) and precision, as
    :func:`companion.recorded.file_name` and :func:`companion.recorded.command` take them."""
    settings = {k: tuple(v) if isinstance(v, list) else v for k, v in data["overrides"].items()}
    return data["experiment"], data["profile"], settings, data.get("precision", "fp32")


def dumps(data: dict) -> str:
    """A recording as :func:`companion.record.record` writes it."""
    return json.dumps(data, indent=1) + "\n"


def migrate(directory: Path = RECORDED, write: bool = True) -> list[str]:
    """Apply every step to every recording in ``directory``; return the names of the files that changed (or
    would change, with ``write=False``). Files are replaced atomically."""
    changed = []
    for path in sorted(directory.glob("*.json")):
        text = path.read_text()
        data = json.loads(text)
        for _, step in STEPS:
            data = step(data)
        new = dumps(data)
        # a renamed experiment or a named setting renames its file (the name gives the experiment and settings)
        target = path.with_name(recorded.file_name(*_named(data)))
        if new != text or target != path:
            changed.append(path.name)
            if write:
                tmp = target.with_suffix(".json.tmp")
                tmp.write_text(new)
                tmp.replace(target)
                if target != path:
                    path.unlink()
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    args = parser.parse_args(argv)
    changed = migrate(write=not args.check)
    for name in changed:
        print(("would change " if args.check else "changed ") + name)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
