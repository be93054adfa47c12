"""environment.yml and pyproject.toml carry the same pins; the package imports cleanly."""

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def pyproject_pins() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    specs = list(data["project"]["dependencies"])
    for extra in data["project"]["optional-dependencies"].values():
        specs += extra
    return dict(_split(s) for s in specs)


def environment_pins() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return dict(_split(s) for s in pip)


def _split(spec: str) -> tuple[str, str]:
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", spec.strip())
    assert m, f"not an exact pin: {spec!r}"
    return m.group(1).lower(), m.group(2)


def test_pins_agree():
    a, b = pyproject_pins(), environment_pins()
    assert a == b, (
        f"pins differ: pyproject only {set(a.items()) - set(b.items())}, "
        f"environment.yml only {set(b.items()) - set(a.items())}"
    )


def test_python_version_agrees():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    assert ">=3.11,<3.12" in (ROOT / "pyproject.toml").read_text()


def test_cli_help_and_validation(capsys):
    import pytest

    from companion.cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    assert "recall" in capsys.readouterr().out
    with pytest.raises(ValueError, match="alpha=2.0 is out of range"):
        main(["recall", "--alpha", "2"])


def _private_uses(path: Path) -> list[str]:
    """``module._name`` and ``from companion.module import _name`` in one source file, where the module is
    another module of the package."""
    import ast
    import importlib.util

    tree = ast.parse(path.read_text())
    aliases, found = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update(
                {a.asname: a.name for a in node.names if a.asname and a.name.startswith("companion.")}
            )
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("companion"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if importlib.util.find_spec(node.module) and _is_module(full):
                    aliases[a.asname or a.name] = full
                elif a.name.startswith("_") and not a.name.startswith("__"):
                    found.append(f"from {node.module} import {a.name}")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{aliases[node.value.id]}.{node.attr} (line {node.lineno})")
    return found


def _is_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def test_no_module_of_the_package_uses_a_private_name_of_another(tmp_path):
    """Issue 52: a module reaches another only through its public names."""
    root = Path(__file__).resolve().parents[1] / "companion"
    uses = {str(p.relative_to(root)): u for p in sorted(root.rglob("*.py")) if (u := _private_uses(p))}
    assert not uses, uses
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from companion import config\nfrom companion.experiments import khop as kh\n"
        "from companion.record import _commit\nconfig._range(1, 2, True, True)\nkh._train\nconfig.__name__\n"
    )
    assert sorted(_private_uses(bad)) == [
        "companion.config._range (line 4)",
        "companion.experiments.khop._train (line 5)",
        "from companion.record import _commit",
    ]


def test_the_house_style_is_a_file_and_importing_plotting_changes_nothing():
    """Issue 52: ``plotting`` sets no rcParams at import; the chapters' style is ``book/matplotlibrc``."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    code = (
        "import matplotlib as mpl; before = dict(mpl.rcParams); import companion.plotting; "
        "print(before == dict(mpl.rcParams))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
    import matplotlib as mpl

    rc = mpl.rc_params_from_file(str(root / "book" / "matplotlibrc"), use_default_template=False)
    assert rc["axes.grid"] and not rc["legend.frameon"] and rc["figure.dpi"] == 110


# Modules that serve many chapters by design (besides data and models, which are not analysis): the house
# helpers, the main paper's model family and its run configurations, the talk's two-layer runs on the bigram task
# with triggers (induction: configurations, training, probes, the memories by construction), the k-hop family's
# configurations, training and runs (khop), its probes (khop_probes) and recorded studies (khop_studies), the language-model pipeline.
SHARED_MODULES = {
    "companion.claims",
    "companion.claim_flips",  # issue 54's flip list: the status page, a chapter's own rows in the seed sweep
    "companion.claim_pages",  # the claim rows' views: the status pages
    "companion.config",
    "companion.plotting",
    "companion.record",
    "companion.record_pages",  # a chapter's recorded runs beside its live one, the recorded claims' tables
    "companion.recorded",  # the recorded files: how a recording was trained (same_rounding, run_rounding)
    "companion.report",
    "companion.experiments.catalog",
    "companion.experiments.induction",
    "companion.experiments.khop",
    "companion.experiments.khop_members",  # the k-hop chapters' shared member names (EXPLORED) and sizes
    "companion.experiments.khop_probes",
    "companion.experiments.khop_studies",
    "companion.experiments.late_rows",  # the rows late_verdicts judges again, one table per chapter
    "companion.experiments.late_verdicts",  # the trained-model chapters' check that a late mean's verdict is not timing
    "companion.experiments.noisy_recall",
    "companion.experiments.summaries",
    "companion.experiments.three_steps",  # the two three-step chapters' steps, runs and table of a run's steps
    "companion.figures.khop",
    "companion.figures.noisy_recall",
    "companion.figures.synthetic_ioi",  # Appendix J's two chapters (Figs. 19 and 20) draw the same panels
    "companion.figures.three_steps",  # the two three-step chapters draw their runs' steps alike
    "companion.llm.laser",
    "companion.llm.standin",
    "companion.llm.studies",
    "companion.llm.summaries",
}
# Today's analysis modules that serve several chapters (issue 52 splits them, one module per chapter; an entry
# that serves one chapter or none fails the test, so the list shrinks as each one goes).
SERVES_SEVERAL_TODAY: dict[str, set[str]] = {}


def test_importing_the_package_silences_tqdms_ipywidgets_notice_and_nothing_else():
    """In a kernel without ipywidgets, tqdm.auto's "IProgress not found" notice showed in a cell of the built book
    (book/status); importing the package ignores that notice only: other tqdm warnings still show."""
    import subprocess
    import sys

    code = (
        "import warnings; import companion; from tqdm import TqdmWarning; "
        "warnings.warn('IProgress not found. Please update jupyter and ipywidgets.', TqdmWarning); "
        "warnings.warn('another tqdm notice', TqdmWarning)"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert "IProgress" not in out.stderr and "another tqdm notice" in out.stderr


def test_an_analysis_module_serves_one_chapter():
    """Issue 52: each chapter's analysis lives in its own module (read from the chapters' package calls,
    :func:`companion.book_ext.chapter_calls`), except :data:`SHARED_MODULES` and today's listed exceptions."""
    from collections import defaultdict

    from companion import book_ext

    root = Path(__file__).resolve().parents[1]
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    chapters = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    served = defaultdict(set)
    for ch in chapters:
        for call in book_ext.chapter_calls((root / f"{ch}.md").read_text()):
            served[call.module].add(ch.split("/")[-1])
    analysis = {
        m: chs for m, chs in served.items() if not m.startswith(("companion.data.", "companion.models."))
    }
    several = {m: chs for m, chs in analysis.items() if len(chs) > 1 and m not in SHARED_MODULES}
    assert several == SERVES_SEVERAL_TODAY
    assert served["companion.theory.attention_study"] == {"theory_attention"}  # the reading sees the chapters
    # A chapter's own figures are in the figure module of its name; the two family modules serve their families.
    figures = {
        m.removeprefix("companion.figures."): chs
        for m, chs in served.items()
        if m.startswith("companion.figures.")
    }
    modules = {p.stem for p in (root / "companion" / "figures").glob("*.py") if p.stem != "__init__"}
    assert set(figures) == modules  # every figure module draws in some chapter
    family = {
        "khop": {"khop", "khop_four_hops", "khop_starts", "khop_stall"},
        "noisy_recall": {"noisy_recall", "finetune"},
        "synthetic_ioi": {"synthetic_ioi", "synthetic_ioi_sgd"},
        "three_steps": {"three_steps", "three_steps_data"},
    }
    assert {m: chs for m, chs in figures.items() if chs != {m}} == family


def test_our_studies_stand_apart_and_the_landing_page_names_every_chapter():
    """Issue 52: the table of contents has one part "Beyond the papers" of at most four chapters, each titled
    "(our study)" and checking claims of ours above all; the sources' parts hold no such title; the landing page
    links every chapter."""
    from companion import claims

    root = Path(__file__).resolve().parents[1]
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    ours = [p for p in toc["parts"] if p["caption"].startswith("Beyond the papers")]
    assert len(ours) == 1 and 1 <= len(ours[0]["chapters"]) <= 4
    beyond = {c["file"] for c in ours[0]["chapters"]}
    intro = (root / "intro.md").read_text()
    for part in toc["parts"]:
        for c in part["chapters"]:
            title = next(
                ln for ln in (root / f"{c['file']}.md").read_text().splitlines() if ln.startswith("# ")
            )
            assert ("(our study)" in title) == (c["file"] in beyond), title
            assert f"{{doc}}`{c['file']}`" in intro, f"the landing page does not name {c['file']}"
    for chapter in beyond:
        rows = [c for c in claims.CLAIMS.values() if c.chapter == chapter]
        assert sum(c.origin == "ours" for c in rows) > 0.8 * len(rows), chapter


def test_every_configuration_refuses_a_negative_seed_at_construction():
    """Issue 53: a negative seed is refused with a ValueError naming it when a configuration is built (not when its
    run starts), for every dataclass of the package with a ``seed`` field (built by ``quick`` where it has one)."""
    import dataclasses
    import importlib
    import inspect
    import pkgutil

    import companion

    found = []
    for info in pkgutil.walk_packages(companion.__path__, "companion."):
        if info.name.endswith(("__main__", "book_ext")):
            continue
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != info.name or not dataclasses.is_dataclass(cls):
                continue
            if "seed" not in {f.name for f in dataclasses.fields(cls)}:
                continue
            build = cls.quick if hasattr(cls, "quick") else cls
            found.append(name)
            assert build(seed=1).seed == 1  # the control: a valid seed is taken
            with pytest.raises(ValueError, match=r"seed=-1 is out of range"):
                build(seed=-1)
    assert {"RecallExperiment", "KHopExperiment", "TextConfig", "StandIn"} <= set(found)


def test_prose_stats_count_the_prose_only(tmp_path, prose_stats):
    """benchmarks/prose_stats.py (issue 52's sentence counter): code cells, options, labels and tables are not
    prose; the Overview admonition is the overview; abbreviations do not end a sentence; every chapter counts."""
    root = Path(__file__).resolve().parents[1]
    page = tmp_path / "ch.md"
    page.write_text(
        "---\nkernelspec: {}\n---\n\n(ch)=\n# Title here\n\n:::{admonition} Overview\n:class: tip\n"
        "**Claim.** One two three, cf. Fig. 3 four. Five six!\n:::\n\n```{code-cell} ipython3\nx = 1. + 2\n```\n\n"
        "## Section\n\n| a | b |\n| --- | --- |\n\nSeven $x^2$ eight {glue:text}`v:.2f` nine.\n- An item\n"
    )
    s = prose_stats.chapter_stats(page)
    assert (s["sentences"], s["words"], s["overview_words"]) == (4, 17, 10), s
    assert prose_stats.sentences("No end here and e.g. none. Two.") == ["No end here and e.g. none.", "Two."]
    every = {ch: prose_stats.chapter_stats(root / f"{ch}.md") for ch in prose_stats.chapters()}
    assert all(s["sentences"] > 0 and s["overview_words"] > 0 for s in every.values())


def test_each_chapter_opens_with_a_short_overview_that_states_the_result(prose_stats):
    """Issue 52 item 7: every chapter of the sources' parts and of "Beyond the papers" opens with an Overview
    of at most 150 words (counted by benchmarks/prose_stats.py) that gives the claim and the result; the runtime
    goes in a note of its own. The landing page and the pages about the book are not chapters of a claim."""
    root = Path(__file__).resolve().parents[1]
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    chapters = [
        c["file"] for part in toc["parts"] if part["caption"] != "About this book" for c in part["chapters"]
    ]
    assert len(chapters) >= 29
    too_long, without = {}, []
    for ch in chapters:
        text = (root / f"{ch}.md").read_text()
        words = prose_stats.chapter_stats(root / f"{ch}.md")["overview_words"]
        if words > 150:
            too_long[ch] = words
        overview = text[text.index(":::{admonition} Overview") :]
        if "**Result.**" not in overview[: overview.index("\n:::\n")]:
            without.append(ch)
    assert too_long == {} and without == []


def test_no_link_that_prints_a_title_is_read_as_a_possessive():
    """A {doc} or {ref} link without its own text prints the page's or section's title: "{doc}`llm_gpt2_ioi`'s"
    was built as "GPT-2 Small on IOI: "the" next to the answer (Section 4.1, Fig. 17)'s". Such a link says
    what it is (``{ref}`the induction-head chapter <induction-head>`'s``)."""
    root = Path(__file__).resolve().parents[1]
    found = [
        f"{path.relative_to(root)}: {m.group(0)}"
        for path in sorted([*root.glob("*.md"), *(root / "book").glob("*.md")])
        for m in re.finditer(r"\{(?:doc|ref)\}`[^`<]*`['’]s", path.read_text(encoding="utf-8"))
    ]
    assert not found, found


def test_every_name_a_chapter_reads_from_the_package_exists():
    """A chapter that reads ``module.name`` of a module that no longer defines it (a move or a rename the
    chapter missed) fails here, on the CPU in a second, rather than in the chapter's run."""
    import importlib

    from companion import book_ext

    root = Path(__file__).resolve().parents[1]
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    chapters = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    missing = [
        f"{ch}: {module}.{name}"
        for ch in chapters
        for module, name in sorted(book_ext.chapter_names((root / f"{ch}.md").read_text()))
        if not hasattr(importlib.import_module(module), name)
    ]
    assert missing == []
    assert ("companion.experiments.khop_studies", "prefix_gap") in book_ext.chapter_names(
        (root / "book/khop_four_hops.md").read_text()
    )


def _pyflakes(codes: dict[str, str], tmp_path: Path) -> list[str]:
    """ruff's pyflakes rules (F) over each named piece of code: the findings, one line each."""
    import subprocess

    from ruff.__main__ import find_ruff_bin

    for name, code in codes.items():
        (tmp_path / f"{name}.py").write_text(code)
    cmd = [
        find_ruff_bin(),
        "check",
        "--no-cache",
        "--isolated",
        "--select",
        "F",
        "--output-format",
        "concise",
    ]
    out = subprocess.run([*cmd, str(tmp_path)], capture_output=True, text=True)
    return [ln for ln in out.stdout.splitlines() if ": F" in ln]


def test_every_chapters_code_names_only_what_it_defines_or_imports(tmp_path):
    """A chapter's code cells have no undefined name and no unused import (pyflakes' rules), so a function moved
    or renamed in the package, or an import left behind, fails here in seconds rather than under nbval."""
    from companion import book_ext

    root = Path(__file__).resolve().parents[1]
    chapters = {p.stem: book_ext.chapter_code(p.read_text()) for p in sorted((root / "book").glob("*.md"))}
    (tmp_path / "book").mkdir()
    assert len(chapters) > 30 and _pyflakes(chapters, tmp_path / "book") == []
    control = "```{code-cell} ipython3\nfrom companion import plotting, report\nplotting.curves(x)\n```\n"
    found = _pyflakes({"control": book_ext.chapter_code(control)}, tmp_path)
    assert len(found) == 2 and "F401" in found[0] + found[1] and "F821" in found[0] + found[1]


def test_the_book_build_may_read_chapters_in_parallel(build_book):
    """scripts/build_book.py (`make html`, `make book`) reads the chapters in BOOK_JOBS processes: a bad job count
    is refused before any work, and the book extension declares the three extensions that do not say so themselves
    parallel-safe and lets sphinx-proof's domain merge (its data holds nothing per chapter). Sphinx itself warns,
    and so fails the -W build, if a loaded extension is still undeclared."""
    from types import SimpleNamespace

    from sphinx.domains import Domain

    from companion import book_ext

    with pytest.raises(ValueError, match=r"--jobs=0 is out of range: allowed \[1, inf\)"):
        build_book.main(["--jobs", "0"])

    class Proofs(Domain):  # a domain that leaves merge_domaindata to the base class, as sphinx-proof 0.4 does
        name = "prf"

    ext = {
        n: SimpleNamespace(parallel_read_safe=None, parallel_write_safe=None) for n in book_ext.PARALLEL_SAFE
    }
    ext["declared"] = SimpleNamespace(parallel_read_safe=False, parallel_write_safe=True)
    proofs = Proofs.__new__(Proofs)
    env = SimpleNamespace(domains={"prf": proofs}, get_domain=lambda name: proofs)
    with pytest.raises(NotImplementedError):  # the control: Sphinx refuses to merge such a domain
        proofs.merge_domaindata({"a"}, {})
    book_ext._declare_parallel_safe(SimpleNamespace(extensions=ext, env=env))
    assert all(e.parallel_read_safe and e.parallel_write_safe for n, e in ext.items() if n != "declared")
    assert ext["declared"].parallel_read_safe is False  # an extension's own declaration is kept
    assert proofs.merge_domaindata({"a"}, {}) is None


def test_chapter_times_reads_the_chapters_stage_of_a_log(chapter_times):
    """benchmarks/chapter_times.py: of a whole `make test` log, only the durations section that lists chapter
    cells counts (the unit tests' and the HTML checks' are left out), a cell's setup and call add up, and a log
    without that section, or with two, is refused."""
    import doctest

    assert doctest.testmod(chapter_times).failed == 0
    unit = (
        "=== slowest durations ===\n75.88s call     tests/test_full_config.py::test_full\n"
        "1119 passed, 53 skipped in 507.47s (0:08:27)\n"
    )
    notebooks = (
        "==== slowest durations ====\n"
        "100.00s call     book/a.md::Cell 2\n90.50s call     book/b.md::Cell 1\n"
        "95.00s call     book/a.md::Cell 1\n1.00s setup    book/a.md::Cell 1\n"
        "410 passed in 150.00s (0:02:30)\n"
    )
    html = "=== slowest durations ===\n14.64s call     tests/test_html.py::test_chapter[book/a]\n66 passed in 9.00s\n"
    times = chapter_times.parse(unit + notebooks + html)
    assert times["stage_s"] == 150.0
    assert list(times["chapters"]) == ["book/a", "book/b"]
    assert times["chapters"]["book/a"] == {
        "seconds": 196.0,
        "cells": 2,
        "slowest_cell": "Cell 2",
        "slowest_s": 100.0,
    }
    assert chapter_times.over_budget(times) == ["book/a"]
    assert chapter_times.over_budget(times, budget_s=90.0) == ["book/a", "book/b"]
    with pytest.raises(ValueError, match="0 durations sections"):
        chapter_times.parse(unit + html)
    with pytest.raises(ValueError, match="2 durations sections"):
        chapter_times.parse(notebooks + notebooks)
    with pytest.raises(ValueError, match="passed in"):
        chapter_times.parse(notebooks.rsplit("410", 1)[0])
    assert chapter_times.device_of(2).endswith(", 2 threads")
    runs = chapter_times.with_run(None, {"stage_s": 1.0}, "cpu")
    for stage in (2.0, 3.0):
        runs = chapter_times.with_run(runs, {"stage_s": stage}, "cpu", keep=2)
    assert [r["stage_s"] for r in runs["runs"]] == [2.0, 3.0]  # the newest two, oldest first
    with pytest.raises(ValueError, match=r"keep=0 is out of range"):
        chapter_times.with_run(runs, {"stage_s": 4.0}, "cpu", keep=0)
    with pytest.raises(ValueError, match=r"of device 'cpu', not 'gpu'"):
        chapter_times.with_run(runs, {"stage_s": 4.0}, "gpu")
    with pytest.raises(ValueError, match=r"no list of runs: keys \['device', 'stage_s'\]"):
        chapter_times.with_run({"device": "cpu", "stage_s": 1.0}, {"stage_s": 2.0}, "cpu")


def test_every_benchmark_result_is_named_after_its_device(results_file):
    """The benchmarks write through benchmarks/results_file.py: each committed result (the prose counts aside) is
    the file that ``path`` names for the device it records, with the benchmark's suffix or prefix."""
    kinds = {
        "": ("", ""),
        "-engine": ("-engine", ""),
        "-samplers": ("-samplers", ""),
        "-khop-pack": ("-khop-pack", ""),
        "-khop-subjects-numpy": ("-khop-subjects-numpy", ""),
        "-khop-subjects-counter": ("-khop-subjects-counter", ""),
        "-chapters": ("-chapters", ""),
        "llm_": ("", "llm_"),
    }
    assert (
        results_file.path("CPU AMD EPYC, 2 threads", "-engine").name == "CPU_AMD_EPYC__2_threads-engine.json"
    )
    files = [f for f in sorted(results_file.RESULTS.glob("*.json")) if not f.name.startswith("prose-")]
    assert len(files) >= 6
    for f in files:
        device = json.loads(f.read_text())["device"]
        names = {results_file.path(device, s, p).name for s, p in kinds.values()}
        assert f.name in names, (f.name, device)


def test_a_chapters_kernel_that_dies_at_start_up_is_started_once_more():
    """conftest's chapters start their kernel through book_ext.start_kernel: a kernel that dies (or stays silent)
    before it runs a cell is started again, once by default; a second death, or any other error, fails the
    chapter."""
    from companion import book_ext

    def starter(errors):
        calls = []

        def start():
            calls.append(1)
            if len(calls) <= len(errors):
                raise errors[len(calls) - 1]
            return "kernel"

        return start, calls

    died = RuntimeError("Kernel died before replying to kernel_info")
    start, calls = starter([died])
    with pytest.warns(UserWarning, match=r"try 1 of 2\): starting the kernel again"):
        assert book_ext.start_kernel(start) == "kernel"
    assert len(calls) == 2
    start, calls = starter([died, RuntimeError("Kernel didn't respond in 60 seconds")])
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="didn't respond"):
        book_ext.start_kernel(start)
    assert len(calls) == 2
    start, calls = starter([RuntimeError("a cell failed")])
    with pytest.raises(RuntimeError, match="a cell failed"):
        book_ext.start_kernel(start)
    assert len(calls) == 1
    with pytest.raises(ValueError, match="tries=0: allowed 1 or more"):
        book_ext.start_kernel(start, tries=0)
