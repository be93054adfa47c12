"""scripts/prose_under.py: a chapter's prose under each sampler, and the paragraphs that differ (issue 54)."""

from __future__ import annotations

import doctest
import os

import pytest


def test_the_glued_values_go_into_the_text(prose_script):
    assert doctest.testmod(prose_script).failed == 0
    cells = [
        {"cell_type": "markdown", "source": "Solved: {glue:text}`n` of 7.\n\nThe prediction fails."},
        {
            "cell_type": "code",
            "source": "",
            "outputs": [
                {
                    "output_type": "display_data",
                    "metadata": {"scrapbook": {"name": "n", "mime_prefix": "application/papermill.record/"}},
                    "data": {prose_script.GLUED: "2"},
                },
                {"output_type": "error", "ename": "ValueError", "evalue": "no such recording"},
            ],
        },
    ]
    assert prose_script.glued(cells) == {"n": "2"}
    assert prose_script.prose(cells) == [
        "Solved: 2 of 7.",
        "The prediction fails.",
        "[error] ValueError: no such recording",
    ]
    diff = prose_script.differ(["Solved: 0 of 7.", "same"], ["Solved: 2 of 7.", "same"], ("a", "b"))
    assert "-Solved: 0 of 7." in diff and "+Solved: 2 of 7." in diff and "same" not in diff


def test_a_chapter_is_executed_under_each_sampler(prose_script, tmp_path, monkeypatch):
    """A chapter whose glued value depends on the sampler: each kernel sees its own, and the variables the
    script set for the kernels are restored after."""
    monkeypatch.delenv("COMPANION_CHECKS", raising=False)
    chapter = tmp_path / "tiny.md"
    chapter.write_text(
        "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
        "    format_version: 0.13\nkernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n\n"
        "```{code-cell} ipython3\nimport os\nfrom myst_nb import glue\n"
        "glue('s', os.environ['COMPANION_SAMPLER'] + ' ' + os.environ['COMPANION_CHECKS'], display=False)\n```\n\n"
        "Drawn by {glue:text}`s`.\n"
    )
    texts = {
        s: prose_script.prose(prose_script.execute(chapter, s, timeout=120)) for s in ("numpy", "counter")
    }
    assert texts == {"numpy": ["Drawn by numpy record."], "counter": ["Drawn by counter record."]}
    assert "COMPANION_CHECKS" not in os.environ
    with pytest.raises(ValueError, match="allowed a chapter"):
        prose_script.main(["book/no_such_chapter"])
