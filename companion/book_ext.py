"""A Sphinx extension for the book: the claims directives and the source links of every chapter.

``claims-scorecard``, ``claims-errata`` and ``claims-headlines`` leave a
placeholder that is filled at ``doctree-resolved`` with a page of
:mod:`companion.claim_pages`, i.e. after every chapter has been read (and, with
myst-nb, executed), so the pages show the claims recorded in this build
whatever order Sphinx reads the pages in.

Source links: every module of the ``companion`` package gets a highlighted
page ``_source/companion/...html`` with an anchor per line (``#L-12``), and
every chapter ends with "Code behind this page": each package function its
code cells call, linked to the line where it is defined
(:func:`chapter_calls` reads the calls from the chapter's own source).

>>> text = "```{code-cell} ipython3\\nfrom companion.report import markdown_table\\nmarkdown_table(['a'], [])\\n```"
>>> [(c.module, c.name) for c in chapter_calls(text)]
[('companion.report', 'markdown_table')]
"""

from __future__ import annotations

import ast
import importlib.util
import re
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive

SOURCE_DIR = "_source"
CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.S | re.M)


class scorecard_placeholder(nodes.General, nodes.Element):
    pass


class errata_placeholder(nodes.General, nodes.Element):
    pass


class headlines_placeholder(nodes.General, nodes.Element):
    pass


class ScorecardDirective(Directive):
    has_content = False

    def run(self):
        return [scorecard_placeholder()]


class ErrataDirective(Directive):
    has_content = False

    def run(self):
        return [errata_placeholder()]


class HeadlinesDirective(Directive):
    has_content = False

    def run(self):
        return [headlines_placeholder()]


def _fill(app, doctree, docname):
    from companion import claim_pages, config

    profile = config.get_profile()

    def link(chapter: str) -> str:
        return app.builder.get_relative_uri(docname, chapter)

    for node in doctree.traverse(scorecard_placeholder):
        html = f"<p>profile: <code>{profile}</code></p>" + claim_pages.scorecard(profile, link=link)
        node.replace_self(nodes.raw("", html, format="html"))
    for node in doctree.traverse(errata_placeholder):
        node.replace_self(nodes.raw("", claim_pages.errata(profile, link=link), format="html"))
        # the quotes carry inline math (claim_pages.quoted): load MathJax on this page as on a page with equations
        app.env.get_domain("math").data["has_equations"][docname] = True
    for node in doctree.traverse(headlines_placeholder):
        node.replace_self(nodes.raw("", claim_pages.headlines(profile, link=link), format="html"))


@dataclass(frozen=True)
class Call:
    """A package function (or class) a chapter calls: its module, name and the line it is defined on."""

    module: str
    name: str
    line: int


def is_chapter(path: Path) -> bool:
    """Whether ``path`` is a chapter: a ``.md`` file whose front matter names jupytext (the book's other pages
    are plain MyST)."""
    path = Path(path)
    if path.suffix != ".md" or not path.is_file():
        return False
    head = path.read_text(encoding="utf-8")[:400]
    return head.startswith("---") and "jupytext" in head


# What jupyter_client raises when a kernel dies, or never answers, before it runs anything.
KERNEL_NOT_STARTED = ("Kernel died before replying to kernel_info", "Kernel didn't respond")


def start_kernel(start, tries: int = 2):
    """Call ``start`` (nbval's setup of a chapter: it starts the chapter's kernel) up to ``tries`` times while the
    kernel dies or stays silent before it runs a cell (:data:`KERNEL_NOT_STARTED`), and return what it returns.
    Kernels of two test processes starting at once can race for their ports (jupyter_client picks free ports, then
    the kernel binds them; jupyter/jupyter_client#154), and the kernel then exits at start-up: the CI run at
    3c26b19 lost book/khop_stall so, its cells never run. Any other error, and the last try's, is raised.

    Raises:
        ValueError: ``tries`` below 1.
    """
    if tries < 1:
        raise ValueError(f"tries={tries}: allowed 1 or more")
    for attempt in range(1, tries + 1):
        try:
            return start()
        except RuntimeError as err:
            if attempt == tries or not str(err).startswith(KERNEL_NOT_STARTED):
                raise
            warnings.warn(f"{err} (try {attempt} of {tries}): starting the kernel again", stacklevel=2)


def chapter_code(text: str) -> str:
    """The Python of a jupytext MyST chapter's code cells (cell options and magics dropped)."""
    out = []
    for cell in CELL.findall(text):
        lines = cell.splitlines()
        if lines and lines[0].strip() == "---":  # YAML cell options
            end = next((i for i, ln in enumerate(lines[1:], 1) if ln.strip() == "---"), 0)
            lines = lines[end + 1 :]
        out.extend(ln for ln in lines if not ln.lstrip().startswith(("%", "!", ":tags:")))
    return "\n".join(out)


@lru_cache(maxsize=None)
def _definitions(module: str) -> dict[str, int]:
    """Top-level functions and classes of a package module, with their line numbers."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return {}
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    return {n.name: n.lineno for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _aliases(tree: ast.AST) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """A chapter's imports from the package: alias -> module, and alias -> (module, name)."""
    modules, names = {}, {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "companion":
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if _is_module(full):
                    modules[a.asname or a.name] = full
                else:
                    names[a.asname or a.name] = (node.module, a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "companion" and a.asname:
                    modules[a.asname] = a.name
    return modules, names


def chapter_names(text: str) -> set[tuple[str, str]]:
    """Every (module, name) a chapter's code cells read from the package: ``alias.name`` of an imported module
    (called or not) and each name imported from a module; a test checks that each one exists.

    >>> sorted(chapter_names("```{code-cell} ipython3\\nfrom companion import claims\\nclaims.CLAIMS\\n```"))
    [('companion.claims', 'CLAIMS')]
    """
    tree = ast.parse(chapter_code(text))
    modules, names = _aliases(tree)
    found = set(names.values())
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            found.add((modules[node.value.id], node.attr))
    return found


def chapter_calls(text: str) -> list[Call]:
    """The ``companion`` functions and classes a chapter's code cells call, in order of first use."""
    tree = ast.parse(chapter_code(text))
    modules, names = _aliases(tree)
    found: list[tuple[int, int, str, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in modules:
            found.append((node.lineno, node.col_offset, modules[f.value.id], f.attr))
        elif isinstance(f, ast.Name) and f.id in names:
            found.append((node.lineno, node.col_offset, *names[f.id]))
    out, seen = [], set()
    for _, _, module, name in sorted(found):
        line = _definitions(module).get(name)
        if line is not None and (module, name) not in seen:
            seen.add((module, name))
            out.append(Call(module, name, line))
    return out


def source_page(module: str) -> str:
    """The page name of a module's highlighted source."""
    return f"{SOURCE_DIR}/{module.replace('.', '/')}"


def _add_code_links(app, doctree, docname):
    if not docname.startswith("book/"):
        return
    path = Path(app.env.doc2path(docname))
    if path.suffix != ".md":
        return
    calls = chapter_calls(path.read_text(encoding="utf-8"))
    if not calls:
        return
    section = nodes.section(ids=["code-behind-this-page"])
    section += nodes.title(text="Code behind this page")
    section += nodes.paragraph(text="The package functions this page calls, each linked to its source:")
    items = nodes.bullet_list()
    by_module: dict[str, list[Call]] = {}
    for c in calls:
        by_module.setdefault(c.module, []).append(c)
    for module, cs in by_module.items():
        uri = app.builder.get_relative_uri(docname, source_page(module))
        para = nodes.paragraph()
        para += nodes.literal(text=module)
        para += nodes.Text(": ")
        for i, c in enumerate(cs):
            if i:
                para += nodes.Text(", ")
            ref = nodes.reference("", "", refuri=f"{uri}#L-{c.line}", classes=["companion-source"])
            ref += nodes.literal(text=c.name)
            para += ref
        items += nodes.list_item("", para)
    section += items
    top = doctree.next_node(nodes.section)  # the chapter's own (h1) section: ours becomes its last h2
    (top if top is not None else doctree).append(section)


def _source_pages(app):
    """Highlighted source of every package module, one anchor per line."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    root = Path(__file__).resolve().parent
    formatter = HtmlFormatter(linenos="inline", lineanchors="L", anchorlinenos=True)
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        body = f"<h1><code>{module}</code></h1>" + highlight(
            path.read_text(encoding="utf-8"), PythonLexer(), formatter
        )
        yield source_page(module), {"title": module, "body": body}, "page.html"


# Extensions that Jupyter Book loads (or the book names) whose ``setup`` does not say whether it may read or write
# in parallel, so that Sphinx would read serially (scripts/build_book.py --jobs); each is safe, for the reason
# given: it changes nothing that a reading process would have to send back to the main one.
PARALLEL_SAFE = {
    "sphinx-mathjax-offline": "copies MathJax into _static at build-finished, in the main process",
    "sphinx_jupyterbook_latex": "its transforms edit only the doctree being read, which goes back whole; its env "
    "settings are made for a LaTeX builder only",
    "sphinx_multitoc_numbering": "replaces the toctree collector's section numbering, which runs after reading",
}


def _declare_parallel_safe(app):
    from sphinx.domains import Domain

    for name in PARALLEL_SAFE.keys() & app.extensions.keys():
        ext = app.extensions[name]
        for attr in ("parallel_read_safe", "parallel_write_safe"):
            if getattr(ext, attr, None) is None:
                setattr(ext, attr, True)
    # sphinx-proof says it may read in parallel but its domain cannot merge what a reading process sends back:
    # its records live in ``env.proof_list`` (merged by its own env-merge-info handler) and the domain's data holds
    # nothing of a chapter's, so there is nothing to merge.
    if "prf" in app.env.domains:
        proof = type(app.env.get_domain("prf"))
        if proof.merge_domaindata is Domain.merge_domaindata:
            proof.merge_domaindata = _merge_nothing


def _merge_nothing(self, docnames, otherdata):
    """A domain's ``merge_domaindata`` for a domain whose data holds nothing per document."""


def setup(app):
    app.connect("builder-inited", _declare_parallel_safe)
    app.connect("doctree-resolved", _add_code_links)
    app.connect("html-collect-pages", _source_pages)
    app.add_node(scorecard_placeholder)
    app.add_node(errata_placeholder)
    app.add_node(headlines_placeholder)
    app.add_directive("claims-scorecard", ScorecardDirective)
    app.add_directive("claims-errata", ErrataDirective)
    app.add_directive("claims-headlines", HeadlinesDirective)
    app.connect("doctree-resolved", _fill)
    return {"version": "0.2", "parallel_read_safe": True, "parallel_write_safe": True}
