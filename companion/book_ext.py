"""A Sphinx extension for the book: the ``claims-scorecard`` directive.

The directive leaves a placeholder that is filled at ``doctree-resolved``,
i.e. after every chapter has been read (and, with myst-nb, executed), so the
table shows the claims recorded in this build whatever order Sphinx reads
the pages in.
"""

from __future__ import annotations

from docutils import nodes
from docutils.parsers.rst import Directive


class scorecard_placeholder(nodes.General, nodes.Element):
    pass


class ScorecardDirective(Directive):
    has_content = False

    def run(self):
        return [scorecard_placeholder()]


def _fill(app, doctree, docname):
    from companion import claims, config

    for node in doctree.traverse(scorecard_placeholder):
        profile = config.get_profile()
        html = f"<p>profile: <code>{profile}</code></p>" + claims.scorecard(profile)
        node.replace_self(nodes.raw("", html, format="html"))


def setup(app):
    app.add_node(scorecard_placeholder)
    app.add_directive("claims-scorecard", ScorecardDirective)
    app.connect("doctree-resolved", _fill)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
