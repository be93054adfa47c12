"""A chapter's prose as a build under each sampler reads it, and where the two differ (issue 54's switch).

A chapter's text writes its numbers with ``{glue:text}`` and the sentences around them by hand. When the batches
change (the switch from the numpy generators to the counter-based samplers) the numbers follow, the sentences do
not: "the prediction fails" beside a count that now meets it. This executes the chapter once per sampler (in a
kernel started with ``COMPANION_SAMPLER`` set, ``COMPANION_CHECKS=record`` so a row that does not hold is printed,
not raised), puts the glued values into its Markdown cells, and prints the paragraphs that differ:

    python scripts/prose_under.py book/khop_starts                      # numpy against counter
    python scripts/prose_under.py book/khop_starts --out /tmp/prose     # also each sampler's text, as files

A value glued by no cell shows as ``<<name?>>``; a cell that raised is printed with its error, and the text after it
reads what the cells before it glued.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLUED = "application/papermill.record/text/plain"  # how myst-nb's glue stores a value's text in an output
GLUED_MD = "application/papermill.record/text/markdown"  # and a Markdown value's source (the {glue:md} role)
_ROLE = re.compile(r"\{glue:(text|md)\}`([^`:]+)(?::([^`]*))?`")


def glued(cells: list[dict]) -> dict[str, str]:
    """{name: the text/plain form of its value, or the Markdown source of a Markdown value} of the values the
    executed ``cells`` glued (the last one wins)."""
    found = {}
    for cell in cells:
        for out in cell.get("outputs", []):
            record, data = out.get("metadata", {}).get("scrapbook"), out.get("data", {})
            if record and (GLUED_MD in data or GLUED in data):
                found[record["name"]] = data.get(GLUED_MD, data.get(GLUED))
    return found


def fill(text: str, values: dict[str, str]) -> str:
    """``text`` with each ``{glue:text}`name:format``` replaced by the value, formatted as the role says, and each
    ``{glue:md}`name:myst``` by the Markdown glued (its suffix is the Markdown's dialect, not a format).

    >>> fill("seed {glue:text}`s` at {glue:text}`x:.2f`, {glue:text}`w` and {glue:text}`y`", {"s": "'1, 4'", "x": "0.4567", "w": "nan"})
    'seed 1, 4 at 0.46, nan and <<y?>>'
    >>> fill("{glue:md}`m:myst`.", {"m": "the $L = 5$ run"})
    'the $L = 5$ run.'
    """

    def one(m: re.Match) -> str:
        if m[2] not in values:
            return f"<<{m[2]}?>>"
        raw = values[m[2]]
        if m[1] == "md":
            return raw
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            return raw
        return format(value, m[3]) if m[3] else str(value)

    return _ROLE.sub(one, text)


def prose(cells: list[dict]) -> list[str]:
    """The executed chapter's paragraphs: its Markdown with the glued values in, and each code cell's error."""
    values = glued(cells)
    out = []
    for cell in cells:
        if cell["cell_type"] == "markdown":
            out += [p for p in fill(cell["source"], values).split("\n\n") if p.strip()]
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                out.append(f"[error] {o['ename']}: {o['evalue']}")
    return out


def execute(chapter: Path, sampler: str, timeout: int = 900) -> list[dict]:
    """The chapter's cells executed in a kernel under ``sampler`` (checks recorded, not raised), errors kept."""
    import jupytext
    from nbclient import NotebookClient

    nb = jupytext.read(chapter)
    saved = {k: os.environ.get(k) for k in ("COMPANION_SAMPLER", "COMPANION_CHECKS")}
    os.environ.update(COMPANION_SAMPLER=sampler, COMPANION_CHECKS="record")  # the kernel inherits them
    try:
        NotebookClient(
            nb, timeout=timeout, allow_errors=True, resources={"metadata": {"path": str(chapter.parent)}}
        ).execute()
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    return nb.cells


def differ(a: list[str], b: list[str], labels: tuple[str, str]) -> str:
    """The paragraphs of ``a`` and ``b`` that differ, as a unified diff (one paragraph a line)."""
    return "\n".join(difflib.unified_diff(a, b, *labels, lineterm="", n=0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapter", help="book/<name> (with or without .md)")
    parser.add_argument("--samplers", nargs=2, default=["numpy", "counter"])
    parser.add_argument(
        "--out", type=Path, help="also write each sampler's text to <out>/<chapter>_<sampler>.md"
    )
    args = parser.parse_args(argv)
    path = ROOT / (args.chapter if args.chapter.endswith(".md") else f"{args.chapter}.md")
    if not path.is_file():
        raise ValueError(f"chapter={args.chapter!r}: allowed a chapter of book/ ({path} is no file)")
    from companion import config

    for s in args.samplers:
        config.check_choice("sampler", s, tuple(config.SAMPLER_VERSIONS))
    texts = [prose(execute(path, s)) for s in args.samplers]
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        for s, t in zip(args.samplers, texts):
            (args.out / f"{path.stem}_{s}.md").write_text("\n\n".join(t) + "\n")
    print(differ(*texts, labels=tuple(f"{path.stem} under {s}" for s in args.samplers)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
