"""Build the HTML book as ``jupyter-book build --all -W -n --keep-going .`` does, with the chapters read (and so
executed) by ``--jobs`` processes.

Jupyter Book 1's command line has no option for Sphinx's parallel reading, although its own ``build_sphinx``
takes one (``jobs``) and every extension the book loads may read in parallel (myst-nb executes a chapter while
reading it; :data:`companion.book_ext.PARALLEL_SAFE` names the three extensions that do not say so
themselves). With two processes the chapters execute two at a time, as they do under nbval; the claim pages
are still filled after every chapter has been read (``doctree-resolved``).

    python scripts/build_book.py            # one process: what `jupyter-book build --all -W -n --keep-going .` does
    python scripts/build_book.py --jobs 2   # chapters executed two at a time
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--jobs", type=int, default=1, help="processes that read (execute) chapters; default 1"
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        raise ValueError(f"--jobs={args.jobs} is out of range: allowed [1, inf)")
    from jupyter_book.sphinx import build_sphinx

    result = build_sphinx(
        ROOT,
        ROOT / "_build" / "html",
        use_external_toc=True,
        noconfig=True,
        path_config=ROOT / "_config.yml",
        confoverrides={
            "external_toc_path": (ROOT / "_toc.yml").as_posix(),
            "nitpicky": True,
            "latex_individualpages": False,
        },
        builder="html",
        warningiserror=True,
        keep_going=True,
        freshenv=True,
        jobs=args.jobs,
    )
    if isinstance(result, Exception):
        raise RuntimeError("the book build failed; the cause is above") from result
    if result:
        print(f"the book build returned {result}; the cause is above", file=sys.stderr)
        return int(result)
    print(f"book: open {os.path.relpath(ROOT / '_build' / 'html' / 'index.html')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
