"""Where and how a benchmark writes its result: ``results/<prefix><device><suffix>.json`` (the device name with
every other character than letters and digits as ``_``), atomically, as indented JSON."""

from __future__ import annotations

import json
from pathlib import Path

from companion.io import atomic_write_text

RESULTS = Path(__file__).parent / "results"


def path(device: str, suffix: str = "", prefix: str = "") -> Path:
    """The result file of a benchmark on ``device`` (a name from ``config.device_name``).

    >>> path("CPU AMD EPYC, 2 threads", "-engine").name
    'CPU_AMD_EPYC__2_threads-engine.json'
    """
    slug = "".join(c if c.isalnum() else "_" for c in device).strip("_")
    return RESULTS / f"{prefix}{slug}{suffix}.json"


def write(where: Path, out: dict) -> None:
    """Write ``out`` to ``where`` atomically (a benchmark stopped at its time limit keeps the last whole file)."""
    atomic_write_text(where, json.dumps(out, indent=1) + "\n")
