"""Checks of the built book (run after `jupyter-book build`): pages, figures, math, no errors."""

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
pytestmark = pytest.mark.html


def toc_docnames() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    names = [toc["root"]]
    for part in toc.get("parts", []):
        names += [c["file"] for c in part["chapters"]]
    return names


def chapters() -> list[str]:
    """Docnames of the experiment and theory chapters (everything in book/ but the about pages)."""
    return [
        n
        for n in toc_docnames()
        if n.startswith("book/") and n not in ("book/scorecard", "book/errata", "book/status")
    ]


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if not exe:
        pytest.fail("headless Chromium is required for the HTML checks: apt-get install chromium")
    return exe


def render(page: Path, screenshot: Path | None = None) -> str:
    """The DOM of a page after its scripts ran (MathJax typesetting included)."""
    with tempfile.TemporaryDirectory() as profile:
        args = [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=8000",
        ]
        if screenshot is not None:
            subprocess.run(
                args + ["--window-size=1280,2000", f"--screenshot={screenshot}", page.as_uri()],
                check=True,
                capture_output=True,
                timeout=120,
            )
        out = subprocess.run(
            args + ["--dump-dom", page.as_uri()], check=True, capture_output=True, timeout=120, text=True
        )
    return out.stdout


def test_every_page_exists():
    missing = [n for n in toc_docnames() if not (HTML / f"{n}.html").is_file()]
    assert not missing, f"pages missing from {HTML}: {missing} (build the book first)"


@pytest.mark.parametrize("docname", chapters())
def test_chapter_has_figures_math_and_no_errors(docname):
    page = HTML / f"{docname}.html"
    html = page.read_text(encoding="utf-8")
    images = re.findall(r'<img[^>]+src="([^"]+\.(?:png|svg))"', html)
    assert images, f"{docname}: no figures"
    for src in images:
        assert (page.parent / src).is_file(), f"{docname}: figure {src} not in the build"
    for bad in ("Traceback (most recent call last)", "[FAIL]", 'class="output traceback"', "output error"):
        assert bad not in html, f"{docname}: error output in the page ({bad!r})"
    assert re.search(r"<figcaption", html), f"{docname}: figures have no captions"
    # a sentence glued as plain text ({glue:text}) prints its Markdown verbatim: math, code and roles are glued as
    # Markdown (report.glue_markdown, {glue:md}`name:myst`)
    for pasted in re.findall(r'<span class="pasted-text">(.*?)</span>', html, flags=re.S):
        assert not re.search(r"\$|`|\{(?:ref|doc|glue)", pasted), (
            f"{docname}: Markdown glued as text: {pasted!r}"
        )
    text = re.sub(r"<[^>]+>", "", html)
    # a directive or table printed as text (smartquotes: --- -> \u2014), or a role left as text (a role inside
    # math is not one: $e^{{glue:text}`x`}$ prints it)
    for raw in (":::{", "|---|", "|\u2014|", "{glue:", "{ref}", "{doc}"):
        assert raw not in text, f"{docname}: unrendered Markdown ({raw!r}) in the page"
    mathjax = re.findall(r'<script[^>]+src="([^"]*mathjax[^"]*)"', html, flags=re.I)
    assert mathjax and not any(s.startswith(("http:", "https:", "//")) for s in mathjax), (
        f"{docname}: MathJax must be served locally, found {mathjax}"
    )
    shots = ROOT / "_build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    dom = render(page, shots / f"{docname.replace('/', '_')}.png")
    n_math = dom.count("<mjx-container")
    assert n_math > 0, f"{docname}: no rendered math (no mjx-container) in the browser"
    assert "\\(" not in re.sub(r"<script.*?</script>", "", dom, flags=re.S) or n_math > 0


@pytest.mark.parametrize("docname", toc_docnames())
def test_no_page_shows_a_python_warning_a_loading_bar_or_the_build_folder(docname):
    """What a reader should not see in a cell's output: a Python warning (a RuntimeWarning of numpy and tqdm's
    ipywidgets notice were printed in two chapters), transformers' "Loading weights" bar (one per load of the
    stand-in), or this build's folder (the stand-in's cache path was printed as the model's name)."""
    text = re.sub(r"<[^>]+>", "", (HTML / f"{docname}.html").read_text(encoding="utf-8"))
    found = (re.search(p, text) for p in (r"\.py:\d+: \w*Warning", r"Loading weights", re.escape(f"{ROOT}/")))
    shown = [m.group(0) for m in found if m]
    assert not shown, f"{docname}: the page shows {shown}"


def test_scorecard_lists_every_claim_with_a_result():
    from companion import claims

    html = (HTML / "book" / "scorecard.html").read_text(encoding="utf-8")
    assert re.search(r'<table class="table scorecard-counts"', html), "no counts table in the scorecard"
    n = {o: sum(c.origin == o for c in claims.CLAIMS.values()) for o in claims.ORIGINS}
    totals = f"<td><b>{n['paper']}</b></td><td><b>{n['ours']}</b></td><td><b>{len(claims.CLAIMS)}</b></td>"
    assert totals in html, "the counts table does not count the sources' claims and ours apart"
    tables = re.findall(r'<table class="table scorecard".*?</table>', html, flags=re.S)
    assert tables, "no scorecard tables in the scorecard page"
    status = {}
    for t in tables:  # the status column by its header: a "recorded" column follows it once a run is recorded
        head, *rows = re.findall(r"<tr>(.*?)</tr>", t, flags=re.S)
        at = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*>(.*?)</th>", head, flags=re.S)].index(
            "status"
        )
        for r in rows:
            c = re.findall(r"<td>(.*?)</td>", r, flags=re.S)
            status[re.sub(r"<[^>]+>", "", c[0])] = c[at]
    assert set(status) == set(claims.CLAIMS), (
        f"scorecard rows differ from the registry: {set(status) ^ set(claims.CLAIMS)}"
    )
    profile = claims.config.get_profile()
    allowed = {  # what each kind of claim may show in a green build
        "asserted": (claims.HOLDS, claims.HOLDS_HERE, claims.FINDING, claims.REFUTED),
        "other scale": (
            claims.HOLDS_HERE,
            claims.NOT_HERE,
            claims.FINDING,
        ),  # FINDING: a finding shown here too
        "real": (claims.HOLDS, claims.HOLDS_HERE, claims.FINDING, claims.NOT_CHECKED),
        "disagrees": (claims.FINDING, claims.REFUTED, claims.NOT_HERE),  # never "holds"
    }
    bad = {}
    for cid, text in status.items():
        c = claims.CLAIMS[cid]
        kind = "real" if c.scale == "real" else ("asserted" if c.asserted(profile) else "other scale")
        kind = "disagrees" if not c.agrees and kind == "asserted" else kind
        # a row of another scale whose value cannot be measured at this size (a NaN observation: e.g. no run
        # reached the level whose steps the row compares) is "not checked here", saying so
        unmeasurable = kind == "other scale" and text.startswith(
            f"{claims.NOT_CHECKED} ({claims.NOT_MEASURABLE}"
        )
        if (
            "stale" in text
            or "chapter not run" in text
            or not (text.startswith(allowed[kind]) or unmeasurable)
        ):
            bad[cid] = text
    assert not bad, f"claims not passing (or not run, or stale) in the scorecard: {bad}"
    for chapter in {c.chapter for c in claims.CLAIMS.values()}:
        assert f'href="{chapter.split("/")[-1]}.html' in html, f"no link to {chapter} in the scorecard"
    # issue 52: each chapter's rows collapsed under its title; the book's stylesheet (wrapping check output, the
    # scorecard at page width) is loaded
    assert html.count('<details class="scorecard-rows">') == len(tables)
    assert re.search(r'href="[^"]*_static/companion\.css', html), "the book's stylesheet is not loaded"


@pytest.mark.parametrize("page", ["intro", "book/scorecard"])
def test_results_at_a_glance_show_every_headline(page):
    """The landing page and the scorecard open with each source's headline claims (data/headlines.toml), each with
    this build's value and a link to its chapter."""
    from companion import claim_pages, claims

    html = (HTML / f"{page}.html").read_text(encoding="utf-8")
    tables = re.findall(r'<table class="table headlines".*?</table>', html, flags=re.S)
    heads = claim_pages.load_headlines()
    assert len(tables) == len(heads), f"{page}: {len(tables)} headline tables for {len(heads)} sources"
    for table, ids in zip(tables, heads.values()):
        rows = re.findall(r"<tr><td>(.*?)</tr>", table, flags=re.S)
        assert [re.search(r"<code>(.*?)</code>", r).group(1) for r in rows] == ids
        for cid, row in zip(ids, rows):
            assert "chapter not run" not in row, f"{page}: {cid} shows no value of this build"
            assert f'{claims.CLAIMS[cid].chapter.split("/")[-1]}.html"' in row, f"{page}: {cid} has no link"


def test_errata_lists_every_finding():
    from companion import claims

    html = (HTML / "book" / "errata.html").read_text(encoding="utf-8")
    findings = {c.id for c in claims.CLAIMS.values() if c.finding}
    shown = re.findall(r'<div class="erratum" id="erratum-(.*?)">', html)
    # a row that states the same erratum as another is shown inside that entry
    also = re.findall(r"<dt>the same erratum, also checked by</dt><dd><code>(.*?)</code>", html)
    assert findings and sorted(shown + also) == sorted(findings), (
        f"errata differ from the finding rows: {set(shown + also) ^ findings}"
    )
    assert "without an erratum entry" not in html, "a finding row has no entry in data/errata.toml"
    # each entry links the section holding its evidence, and that section exists in the built chapter
    for href in re.findall(r'<dt>evidence</dt><dd><a href="([^"#]+)#([^"]+)"', html):
        page, anchor = (HTML / "book" / href[0]).resolve(), href[1]
        assert f'id="{anchor}"' in page.read_text(encoding="utf-8"), f"errata: {href[0]}#{anchor} missing"


@pytest.mark.parametrize("docname", chapters())
def test_chapter_links_its_code(docname):
    """'Code behind this page' links every package call to an existing line of a highlighted source page."""
    page = HTML / f"{docname}.html"
    html = page.read_text(encoding="utf-8")
    assert 'id="code-behind-this-page"' in html, f"{docname}: no 'Code behind this page' section"
    links = re.findall(r'<a class="companion-source[^"]*" href="([^"#]+)#(L-\d+)"', html)
    assert links, f"{docname}: no source links"
    for target, anchor in links:
        source = (page.parent / target).resolve()
        assert source.is_file(), f"{docname}: {target} was not generated"
        assert f'id="{anchor}"' in source.read_text(encoding="utf-8"), f"{docname}: {target}#{anchor} missing"


def test_the_book_links_its_sources_and_publishes_its_data():
    """Issue 52 item 8: the landing page links the sources and the authors' public code, and publishes
    data/claims.toml and data/errata.toml; the status page publishes every committed recording and the flip list
    (data/flip_list.json). Each download is the committed file, byte for byte."""
    intro = (HTML / "intro.html").read_text(encoding="utf-8")
    for url in (
        "https://arxiv.org/abs/2406.03068",
        "https://arxiv.org/abs/2305.16380",
        "https://arxiv.org/abs/2601.19208",
        "https://github.com/leichen2018/ATTN_vs_MLP",
    ):
        assert f'href="{url}"' in intro, url

    def downloads(page: Path) -> dict[str, Path]:
        hrefs = re.findall(
            r'<a class="reference download internal"[^>]*href="([^"]+)"', page.read_text(encoding="utf-8")
        )
        paths = [unquote(h) for h in hrefs]  # the href is URL-encoded (a recording's "=" is %3D)
        return {Path(h).name: (page.parent / h).resolve() for h in paths}

    published = downloads(HTML / "intro.html")
    for name in ("claims.toml", "errata.toml"):
        assert published[name].read_bytes() == (ROOT / "data" / name).read_bytes(), name
    status = HTML / "book" / "status.html"
    hrefs = re.findall(
        r'<a class="reference download internal"[^>]*href="([^"]+)"', status.read_text("utf-8")
    )
    recordings = [(status.parent / unquote(h)).resolve() for h in hrefs]
    flip = next(p for p in recordings if p.name == "flip_list.json")  # issue 54's flip list, beside them
    assert flip.read_bytes() == (ROOT / "data" / "flip_list.json").read_bytes()
    from companion import record, record_reads

    # every recording the book lists (those it has run and those in force, the counter sampler's made again: two
    # files of one name where both are listed), each published as committed
    listed = {r.path for r in record.runs() + record_reads.in_force()}
    published = [p for p in recordings if p.name != "flip_list.json"]
    assert sorted(p.name for p in published) == sorted(p.name for p in listed)
    assert sorted(p.read_bytes() for p in published) == sorted(p.read_bytes() for p in listed)
    assert {r.path for r in record_reads.in_force()} <= listed and all(p.is_file() for p in listed)
