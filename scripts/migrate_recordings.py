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
import sys
from pathlib import Path

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


STEPS = (("claims that became tests", lambda data: drop_claims(data, DROPPED_CLAIMS)),)


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
        if new != text:
            changed.append(path.name)
            if write:
                tmp = path.with_suffix(".json.tmp")
                tmp.write_text(new)
                tmp.replace(path)
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
