"""A Sphinx extension for the book: the ``claims-scorecard`` and ``claims-errata`` directives.

The directive leaves a placeholder that is filled at ``doctree-resolved``,
i.e. after every chapter has been read (and, with myst-nb, executed), so the
scorecard shows the claims recorded in this build whatever order Sphinx reads
the pages in: counts per category, then one table per chapter, linked.
"""

from __future__ import annotations

from docutils import nodes
from docutils.parsers.rst import Directive


class scorecard_placeholder(nodes.General, nodes.Element):
    pass


class errata_placeholder(nodes.General, nodes.Element):
    pass


class ScorecardDirective(Directive):
    has_content = False

    def run(self):
        return [scorecard_placeholder()]


class ErrataDirective(Directive):
    has_content = False

    def run(self):
        return [errata_placeholder()]


def _fill(app, doctree, docname):
    from companion import claims, config

    profile = config.get_profile()

    def link(chapter: str) -> str:
        return app.builder.get_relative_uri(docname, chapter)

    for node in doctree.traverse(scorecard_placeholder):
        html = f"<p>profile: <code>{profile}</code></p>" + claims.scorecard(profile, link=link)
        node.replace_self(nodes.raw("", html, format="html"))
    for node in doctree.traverse(errata_placeholder):
        node.replace_self(nodes.raw("", claims.errata(profile, link=link), format="html"))


def setup(app):
    app.add_node(scorecard_placeholder)
    app.add_node(errata_placeholder)
    app.add_directive("claims-scorecard", ScorecardDirective)
    app.add_directive("claims-errata", ErrataDirective)
    app.connect("doctree-resolved", _fill)
    return {"version": "0.2", "parallel_read_safe": True, "parallel_write_safe": True}
