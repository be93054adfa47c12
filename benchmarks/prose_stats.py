"""How readable is each chapter's prose? Words, sentences, median sentence length, long sentences, overview size.

Issue 52 (item 7) asks for chapters that open with an overview of at most 150 words and sentences of about 20
words. This script counts, per chapter of ``_toc.yml``, the prose only: code cells, directive and math blocks,
front matter, MyST labels, tables, HTML and comments are left out; inline roles and math become one word.
Sentences end at ``.``, ``?`` or ``!`` followed by a space and a capital, a digit, a quote or an opening bracket
("e.g. the" and "Fig. 3" do not end one); a paragraph end ends one too. The overview is the ``Overview``
admonition's prose, or the prose between the title and the next heading.

    python benchmarks/prose_stats.py                 # a table on stdout
    python benchmarks/prose_stats.py --json out.json # and the numbers, per chapter

>>> sentences("A short one. Another, e.g. this one, ends here! Fig. 3 shows it.")
['A short one.', 'Another, e.g. this one, ends here!', 'Fig. 3 shows it.']
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
LONG = 40  # words: a sentence over this is "long"
# abbreviations after which a period does not end a sentence
ABBREVIATIONS = (
    "e.g.",
    "i.e.",
    "cf.",
    "Fig.",
    "Figs.",
    "Eq.",
    "Eqs.",
    "Sec.",
    "App.",
    "Thm.",
    "vs.",
    "et al.",
)
_END = re.compile(r"(?<=[.?!])[\"')\]]*\s+(?=[A-Z0-9\"'(\[`$])")


def prose(markdown: str) -> tuple[str, str]:
    """The chapter's prose as paragraphs separated by blank lines: (overview, whole). The overview is the
    ``Overview`` admonition's prose if the chapter has one, else the prose between the title and the next
    heading. Colon fences (admonitions, notes) keep their prose; backtick fences (code cells, figures' and other
    directives' bodies) do not."""
    text = re.sub(r"\A---\n.*?\n---\n", "", markdown, flags=re.S)  # front matter
    text = re.sub(r"^(`{3,}).*?^\1\s*$", "", text, flags=re.S | re.M)  # code cells, backtick directives
    text = re.sub(r"^\$\$.*?^\$\$\s*$", "", text, flags=re.S | re.M)  # display math
    text = re.sub(r"<!--.*?-->|<[^>]+>", "", text, flags=re.S)  # comments and HTML
    kept, headings, in_overview = [], 0, False
    overview, admonition = [], []
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith(":::"):  # a colon fence opens or closes; its prose stays
            in_overview = s.startswith(":::{admonition} Overview")
            kept.append("")
            continue
        if s.startswith("#") or re.match(r"^:[\w-]+:", s):  # headings, a directive's options
            headings += s.startswith("#")
            kept.append("")
            continue
        if s.startswith(("|", "+++")) or (s.startswith("(") and s.endswith(")=")):
            kept.append("")  # tables, cell separators, labels
            continue
        kept.append(line)
        (admonition if in_overview else overview if headings == 1 else []).append(line)
    return "\n".join(admonition or overview), "\n".join(kept)


def _words(sentence: str) -> int:
    s = re.sub(r"\{[a-z:]+\}`[^`]*`", " x ", sentence)  # roles, glued numbers
    s = re.sub(r"\$[^$]*\$", " x ", s)  # inline math
    return len(re.findall(r"\w[\w'’-]*", s))


def sentences(text: str) -> list[str]:
    """Sentences of ``text`` (paragraphs separated by blank lines; a list item is a paragraph of its own)."""
    out = []
    for para in re.split(r"\n\s*\n|\n(?=\s*(?:[-*]|\d+\.)\s)", text):
        para = " ".join(para.split())
        if not para or _words(para) == 0:
            continue
        protected = para
        for i, a in enumerate(ABBREVIATIONS):
            protected = protected.replace(a + " ", a.replace(".", f"\0{i}") + " ")
        for part in _END.split(protected):
            for i, a in enumerate(ABBREVIATIONS):
                part = part.replace(a.replace(".", f"\0{i}"), a)
            if _words(part):
                out.append(part.strip())
    return out


def chapter_stats(path: Path) -> dict:
    """Words, sentences, median words per sentence, share of sentences over :data:`LONG` words, overview words."""
    overview, whole = prose(path.read_text(encoding="utf-8"))
    lengths = [_words(s) for s in sentences(whole)]
    return {
        "words": sum(lengths),
        "sentences": len(lengths),
        "median_sentence": statistics.median(lengths) if lengths else 0,
        "long_share": round(sum(n > LONG for n in lengths) / len(lengths), 3) if lengths else 0.0,
        "overview_words": sum(_words(s) for s in sentences(overview)),
    }


def chapters() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [toc["root"], *(c["file"] for part in toc["parts"] for c in part["chapters"])]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="also write the numbers to this file")
    args = ap.parse_args(argv)
    stats = {ch: chapter_stats(ROOT / f"{ch}.md") for ch in chapters()}
    print(f"| chapter | words | sentences | median words/sentence | over {LONG} words | overview words |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for ch, s in stats.items():
        print(
            f"| {ch} | {s['words']} | {s['sentences']} | {s['median_sentence']:g} | {s['long_share']:.0%} "
            f"| {s['overview_words']} |"
        )
    if args.json:
        args.json.write_text(json.dumps(stats, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
