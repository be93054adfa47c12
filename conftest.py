"""Collect the book's MyST-markdown chapters as notebooks for nbval.

nbval only collects ``.ipynb`` files; chapters are jupytext ``.md`` files.
With ``--nbval`` or ``--nbval-lax``, every ``book/*.md`` with a jupytext
header is read through ``jupytext.read`` and executed in place (kernel
working directory = the chapter's folder, as in the book build).
"""

from __future__ import annotations

import pytest

from companion.book_ext import is_chapter, start_kernel


def _is_notebook(path) -> bool:
    return path.parent.name == "book" and is_chapter(path)


def pytest_collect_file(file_path, parent):
    opt = parent.config.option
    if not (getattr(opt, "nbval", False) or getattr(opt, "nbval_lax", False)):
        return None
    if _is_notebook(file_path):
        return MarkdownNotebook.from_parent(parent, path=file_path)
    return None


try:
    from nbval.plugin import IPyNbFile
except ImportError:  # nbval not installed: nothing to collect
    IPyNbFile = pytest.File


class MarkdownNotebook(IPyNbFile):
    """nbval's notebook collector, reading the notebook through jupytext."""

    def collect(self):
        import jupytext
        import nbval.plugin as plugin

        original = plugin.nbformat.read
        plugin.nbformat.read = lambda path, as_version=4: jupytext.read(path)
        try:
            return list(super().collect())
        finally:
            plugin.nbformat.read = original

    def setup(self):
        """nbval's setup, its kernel started again once where it dies before running a cell
        (:func:`companion.book_ext.start_kernel`)."""
        start_kernel(super().setup)
