"""The claim rows (data/claims.toml), the scorecard categories, the cache helper and the report helpers."""

import dataclasses
import json
import math

import numpy as np
import pytest

from companion import (
    cache,
    claim_flips,
    claim_pages,
    claims,
    config,
    record,
    record_reads,
    report,
    statements,
)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path))


def write_rows(tmp_path, text):
    path = tmp_path / "claims.toml"
    path.write_text(text)
    return path


ROW = 'id = "x.a"\nchapter = "book/x"\nsource = "s"\norigin = "paper"\nstatement = "st"\npaper = "p"\n'
OURS = ROW.replace(
    'origin = "paper"',
    'origin = "ours"\nregistered = 2026-11-22\nkind = "prediction"\ncontext = "nothing run"',
).replace('paper = "p"\n', "")


def test_every_row_is_valid_and_every_chapter_exists():
    from pathlib import Path

    root = Path(claims.__file__).resolve().parent.parent
    assert len(claims.CLAIMS) > 50
    for c in claims.CLAIMS.values():
        assert (root / f"{c.chapter}.md").is_file(), c.id
        assert c.criteria, c.id
        if c.scale == "any":
            assert set(c.criteria) == {"quick", "full"}, c.id


def test_a_row_says_refuted_exactly_where_it_is_marked_refuted():
    """The mark and the statement agree: a row whose statement tells of a refuted prediction is marked
    ``refuted = true`` (and so counted apart in the scorecard, not as "holds"), and only such a row."""
    import re

    said = {
        c.id for c in claims.CLAIMS.values() if re.search(r"\brefut", statements.own_clauses(c.statement))
    }
    marked = {c.id for c in claims.CLAIMS.values() if c.refuted}
    assert said == marked, (
        f"statement and mark differ: said only {said - marked}, marked only {marked - said}"
    )
    assert len(marked) >= 40


def test_every_claim_is_checked_by_its_chapter():
    from pathlib import Path

    root = Path(claims.__file__).resolve().parent.parent
    for c in claims.CLAIMS.values():
        text = (root / f"{c.chapter}.md").read_text()
        assert f'"{c.id}"' in text, f"{c.id} is not checked in {c.chapter}.md"


@pytest.mark.parametrize(
    "body, match",
    [
        ("check = { above = 1.0 }\nbogus = 1\n", "unknown keys"),
        ('scale = "huge"\ncheck = { above = 1.0 }\n', "unknown scale 'huge'"),
        ("check = { expected = 1.0 }\n", "expected and tol together"),
        ("check = { above = 1.0, expected = 1.0, tol = 0.1 }\n", "not both"),
        ("check = { around = 1.0 }\n", "bad criterion"),
        ("quick = { above = 1.0 }\n", "needs a criterion for quick, full"),
        ("check = { expected = 1.0, tol = -0.1 }\n", r"tol=-0.1 is out of range"),
        ('check = { above = 1.0 }\nrefuted = "yes"\n', r"refuted='yes' is not a boolean"),
        ('check = { above = 1.0 }\nrefuted = true\nfinding = "f"\n', "exclude each other"),
        ('check = { above = 1.0 }\nseeds = "lr_solved_seeds"\n', "seeds = 'lr_solved_seeds'; allowed a list"),
        (
            'check = { above = 1.0 }\nseeds = ["lr_solved_seeds"]\n',
            "its statement's outcome clause names no seed",
        ),
    ],
)
def test_bad_rows_are_refused_with_the_row_named(tmp_path, body, match):
    with pytest.raises(ValueError, match=match):
        claims.load(write_rows(tmp_path, "[[claim]]\n" + ROW + body))


@pytest.mark.parametrize(
    "row, match",
    [
        (ROW.replace('origin = "paper"\n', ""), r"missing keys \['origin'\]"),
        (ROW.replace('"paper"', '"theirs"'), "unknown origin 'theirs'; allowed paper, ours"),
        (ROW.replace('paper = "p"\n', ""), "gives the paper's value"),
        (
            ROW + "registered = 2026-11-22\n",
            r"registered = datetime.date\(2026, 11, 22\): allowed for origin",
        ),
        (OURS.replace("registered = 2026-11-22\n", ""), "needs the date it was registered.*got None"),
        (OURS.replace("2026-11-22", '"yesterday"'), "got 'yesterday'"),
        (OURS.replace('"prediction"', '"hunch"'), "kind = 'hunch'; allowed 'prediction', 'post hoc'"),
        (OURS.replace('context = "nothing run"\n', ""), "needs its context"),
        (OURS.replace('"nothing run"', '" "'), "needs its context"),
        (OURS.replace('kind = "prediction"', 'kind = "post hoc"') + "refuted = true\n", "kind = 'post hoc'"),
        (ROW + 'kind = "prediction"\n', "for claims of ours"),
        (OURS + "agrees = false\n", "agrees = False; allowed false"),
        (OURS.replace('kind = "prediction"', 'kind = "post hoc"') + "agrees = false\n", "agrees = False"),
        (ROW + 'agrees = "no"\n', "agrees = 'no'"),
        (ROW + 'history = " "\n', "history = ' '; give the row's notes as text"),
        (OURS + "history = 3\n", "history = 3"),
    ],
)
def test_a_row_says_where_it_comes_from(tmp_path, row, match):
    """``origin``: a source's claim gives the paper's value and no registration date; a claim of ours needs the date
    it was registered (a TOML date) and may leave the paper's value out."""
    with pytest.raises(ValueError, match=match):
        claims.load(write_rows(tmp_path, "[[claim]]\n" + row + "check = { above = 1.0 }\n"))
    ours = claims.load(write_rows(tmp_path, "[[claim]]\n" + OURS + "check = { above = 1.0 }\n"))["x.a"]
    assert (ours.origin, ours.registered, ours.paper, ours.kind) == ("ours", "2026-11-22", "", "prediction")
    assert ours.context == "nothing run"
    assert ours.reference == "ours (prediction), registered 2026-11-22"


def test_the_check_output_says_whose_claim_it_is(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path))
    reg = claims.load(
        write_rows(
            tmp_path,
            "[[claim]]\n"
            + ROW
            + "check = { above = 1.0 }\n[[claim]]\n"
            + OURS.replace("x.a", "x.b")
            + "check = { above = 1.0 }\n",
        )
    )
    claims.check("x.a", 2.0, registry=reg)
    claims.check("x.b", 2.0, registry=reg)
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "[holds] x.a: criterion > 1, observed 2 in the quick profile (paper: p)",
        "[holds] x.b: criterion > 1, observed 2 in the quick profile (ours (prediction), registered 2026-11-22)",
    ]


@pytest.mark.parametrize(
    "extra, observed, line",
    [
        (
            'finding = "it is 2"\n',
            2.0,
            "[finding against the paper] x.a: criterion > 1, observed 2 in the quick "
            "profile (paper: p); corrected: it is 2",
        ),
        (
            "refuted = true\n",
            2.0,
            "[our prediction, refuted] x.a: criterion > 1, observed 2 in the quick profile "
            "(paper: p); the row asserts what was observed; the prediction and its result: st",
        ),
        (
            "agrees = false\n",
            2.0,
            "[does not hold here] x.a: criterion > 1, observed 2 in the quick profile "
            "(paper: p); the source's statement does not hold at this size: the row asserts what was observed",
        ),
        (
            'scale = "full"\n',
            0.5,
            "[does not hold here] x.a: criterion > 1, observed 0.5 in the quick profile "
            "(paper: p); asserted at full scale only",
        ),
        (
            'scale = "full"\n',
            2.0,
            "[holds at this scale only] x.a: criterion > 1, observed 2 in the quick profile "
            "(paper: p); asserted at full scale only; holds here",
        ),
        (
            'scale = "full"\n',
            float("nan"),
            "[not checked here] x.a: criterion > 1, observed nan in the quick profile "
            "(paper: p); not measurable at this size (observed NaN); asserted at full scale only",
        ),
        ("", 0.5, "[FAIL] x.a: criterion > 1, observed 0.5 in the quick profile (paper: p)"),
        # a value that would print as the criterion's edge gets the digits that tell it apart
        ("", 1.00018, "[holds] x.a: criterion > 1, observed 1.0002 in the quick profile (paper: p)"),
        ("", 1.0, "[FAIL] x.a: criterion > 1, observed 1 in the quick profile (paper: p)"),
        # a finding belongs to the scale whose criterion asserts it
        (
            'scale = "full"\nfinding = "f"\n',
            2.0,
            "[finding against the paper] x.a: criterion > 1, observed 2 in the "
            "quick profile (paper: p); established at full scale, where it is asserted; shows here too: f",
        ),
        (
            'scale = "full"\nfinding = "f"\n',
            0.5,
            "[does not hold here] x.a: criterion > 1, observed 0.5 in the quick "
            "profile (paper: p); a finding at full scale, where it is asserted; it does not show at this size",
        ),
    ],
)
def test_the_check_output_uses_the_scorecards_words(tmp_path, capsys, monkeypatch, extra, observed, line):
    """Issue 53: one vocabulary: the check output's mark is the scorecard's category, a refuted prediction prints
    its prediction and result, a source's statement asserted to fail here is never "holds"."""
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path))
    reg = claims.load(write_rows(tmp_path, "[[claim]]\n" + ROW + extra + "check = { above = 1.0 }\n"))
    try:
        claims.check("x.a", observed, profile="quick", registry=reg)
    except AssertionError:
        assert line.startswith("[FAIL]")
    assert capsys.readouterr().out.strip() == line
    (row,) = claims.results("quick", registry=reg)
    assert line.startswith(f"[{row['category']}]")


def test_a_row_that_disagrees_with_its_source_is_never_counted_holds():
    """``agrees = false`` (the criterion asserts that the source's statement fails here) is for a source's rows and
    for post hoc rows of ours that a later build contradicts (with a history); every such row of the registry is a
    finding, a refuted prediction or 'does not hold here' when it passes."""
    rows = [c for c in claims.CLAIMS.values() if not c.agrees]
    assert {"khop.k4_doubling_solved", "khop.k4_deep_cumulative_min"} <= {c.id for c in rows}
    for c in rows:
        category, _ = claims.status(c, {"passed": True}, "quick" if c.scale != "full" else "full")
        assert c.origin == "paper" or (c.kind == "post hoc" and c.history), c.id
        assert category in (claims.FINDING, claims.REFUTED, claims.NOT_HERE), c.id


def test_duplicate_ids_are_refused(tmp_path):
    row = "[[claim]]\n" + ROW + "check = { above = 1.0 }\n"
    with pytest.raises(ValueError, match="duplicate"):
        claims.load(write_rows(tmp_path, row + row))


def test_criteria_and_infinite_values():
    c = claims.Criterion(above=0.5)
    assert c.holds(0.6) and not c.holds(0.5) and not c.holds(math.nan)
    assert not c.holds(math.inf) and c.holds(math.inf, infinite_ok=True)
    assert not claims.Criterion(below=1.0).holds(-math.inf)
    assert claims.Criterion(expected=1.0, tol=0.0).holds(1.0)
    assert not claims.Criterion(expected=1.0, tol=0.5).holds(math.inf, infinite_ok=True)


def test_every_outcome_a_statement_can_name_has_its_categories():
    """companion.statements reads the outcome words; claims.OUTCOMES gives each the categories a build may give
    the row beside it: the two lists are the same words."""
    assert tuple(claims.OUTCOMES) == statements.OUTCOME_WORDS
    assert set().union(*claims.OUTCOMES.values()) <= set(claims.CATEGORIES)


def test_a_prediction_is_the_rows_criterion_turned_round_where_the_row_is_refuted():
    """The text beside a value names the row's prediction (claims.prediction): a refuted row's criterion asserts
    what refuted it, so the prediction is its one bound the other way; a refuted row with two bounds or a
    tolerance has none to turn."""

    def row(crit, refuted):
        return claims.Claim("x", "book/x", "ours", "s", "", {"quick": crit}, refuted=refuted)

    reg = {
        "held": row(claims.Criterion(above=0.05), False),
        "refuted": row(claims.Criterion(below=2.5), True),
        "band": row(claims.Criterion(above=0, below=1), True),
        "tol": row(claims.Criterion(expected=1, tol=0.1), True),
    }
    assert claims.prediction("held", "quick", reg) == claims.Criterion(above=0.05)
    assert claims.prediction("refuted", "quick", reg).words() == "above 2.5"
    for cid in ("band", "tol"):
        with pytest.raises(ValueError, match=f"claim {cid}: refuted, with criterion"):
            claims.prediction(cid, "quick", reg)
    # the rows book/synthetic_ioi names: one refuted (its prediction above the bar it asserts below), one held
    assert claims.prediction("ioi.larger_adam_deep_fails", "quick").words() == "above 0.5"
    assert claims.prediction("ioi.larger_adam_rho", "quick").words() == "above 0.05"


def test_a_diverged_run_passes_a_fails_to_converge_claim_and_nothing_else():
    assert claims.CLAIMS["ioi.adam_deep_fails"].infinite_ok
    assert claims.check("ioi.adam_deep_fails", math.inf, profile="full", quiet=True)["passed"]
    with pytest.raises(AssertionError):
        claims.check("recall.noise_before_icl", math.inf, quiet=True)  # "never" is not a pass
    with pytest.raises(AssertionError):
        claims.check("ioi.sgd_drop_last", math.nan, quiet=True)


def test_categories_profile_criteria_and_findings(tmp_path):
    rows = write_rows(
        tmp_path,
        "\n".join(
            [
                "[[claim]]",
                ROW.replace("x.a", "x.same"),
                "check = { above = 0.0 }",
                "[[claim]]",
                ROW.replace("x.a", "x.scaled"),
                "quick = { above = 0.0 }",
                "full = { above = 0.9 }",
                "[[claim]]",
                ROW.replace("x.a", "x.finding"),
                "check = { above = 0.0 }",
                'finding = "it is 2"',
                "[[claim]]",
                ROW.replace("x.a", "x.big"),
                'scale = "full"',
                "full = { above = 0.0 }",
                "[[claim]]",
                ROW.replace("x.a", "x.big2"),
                'scale = "full"',
                "full = { above = 0.0 }",
                "[[claim]]",
                ROW.replace("x.a", "x.real"),
                'scale = "real"',
                "check = { above = 0.0 }",
                "[[claim]]",
                ROW.replace("x.a", "x.unrun"),
                "check = { above = 0.0 }",
                "[[claim]]",
                OURS.replace("x.a", "x.refuted"),
                "check = { below = 0.5 }",
                "refuted = true",
                "[[claim]]",
                OURS.replace("x.a", "x.later").replace('kind = "prediction"', 'kind = "post hoc"'),
                "check = { below = 0.5 }",
                "agrees = false",
                "history = '2026-12-02: another build contradicts it'",
            ]
        ),
    )
    reg = claims.load(rows)
    for cid, value in [
        ("x.same", 1),
        ("x.scaled", 0.5),
        ("x.finding", 1),
        ("x.big", 1),
        ("x.big2", -1),
        ("x.refuted", 0),
        ("x.later", 0),
    ]:
        claims.check(
            cid,
            value,
            profile="quick",
            quiet=True,
            registry=reg,
            note="corpus <z>" if cid == "x.same" else "",
        )
    claims.skip("x.real", "weights unavailable", profile="quick", quiet=True, registry=reg)
    cat = {r["claim"]: r["category"] for r in claims.results("quick", registry=reg)}
    assert cat == {
        "x.same": claims.HOLDS,
        "x.scaled": claims.HOLDS_HERE,
        "x.finding": claims.FINDING,
        "x.big": claims.HOLDS_HERE,
        "x.big2": claims.NOT_HERE,
        "x.real": claims.NOT_CHECKED,
        "x.unrun": claims.NOT_CHECKED,
        "x.refuted": claims.REFUTED,
        "x.later": claims.NOT_HERE,
    }
    later = next(r for r in claims.results("quick", registry=reg) if r["claim"] == "x.later")
    assert later["detail"].startswith("our post hoc statement does not hold in this build")
    with pytest.raises(AssertionError):  # a refuted prediction's row asserts what was observed, and can fail
        claims.check("x.refuted", 1, profile="quick", quiet=True, registry=reg, record=False)
    # the scaled claim is judged by its full criterion in the full profile
    with pytest.raises(AssertionError):
        claims.check("x.scaled", 0.5, profile="full", quiet=True, registry=reg)
    n = claims.counts("quick", registry=reg)
    assert n[claims.HOLDS_HERE] == 2 and n[claims.NOT_CHECKED] == 2 and n[claims.REFUTED] == 1
    assert n[claims.NOT_HERE] == 2 and sum(n.values()) == 9
    # the claims of ours are counted apart from the sources'
    ours, sources = (
        claims.counts("quick", registry=reg, origin="ours"),
        claims.counts("quick", registry=reg, origin="paper"),
    )
    assert ours[claims.REFUTED] == 1 and ours[claims.NOT_HERE] == 1 and sum(ours.values()) == 2
    assert sum(sources.values()) == 7
    assert all(ours[k] + sources[k] == n[k] for k in claims.CATEGORIES)
    with pytest.raises(ValueError, match="origin 'mine'"):
        claims.counts("quick", registry=reg, origin="mine")
    html = claim_pages.scorecard("quick", registry=reg)
    assert html.count('class="table scorecard"') == 1 and 'href="x.html"' in html and "it is 2" in html
    assert "<th>the sources' claims</th><th>our studies' claims</th><th>all</th>" in html
    assert f"<tr><td>{claims.REFUTED}</td><td>0</td><td>1</td><td>1</td></tr>" in html
    assert "<td><b>7</b></td><td><b>2</b></td><td><b>9</b></td>" in html
    assert (
        "Of our 2 claims, 1 were registered as predictions before their results were seen (1 of them refuted)"
        in html
    )
    assert (
        "<td>ours (prediction), registered 2026-11-22</td>" in html
        and "ours: 1 our prediction, refuted" in html
    )
    # the note, escaped; and x.later's history (two: its summary and its text)
    assert "<small>corpus &lt;z&gt;</small>" in html and html.count("<small>") == 3
    noted = {
        **reg,
        "x.same": dataclasses.replace(
            reg["x.same"], history="Registered 2026-11-22:\nbar 1 <b>.\n2026-11-23: 2."
        ),
    }
    html = claim_pages.scorecard("quick", registry=noted)
    assert (
        '<details class="claim-history"><summary><small>history</small></summary><small>Registered 2026-11-22: '
        "bar 1 &lt;b&gt;.<br>2026-11-23: 2.</small></details>" in html
    )
    assert html.count("claim-history") == 2  # x.same and x.later; rows without a history show none
    with pytest.raises(ValueError, match="scale='real'"):
        claims.skip("x.same", "no", registry=reg)
    errata = claim_pages.errata("quick", registry=reg, path=tmp_path / "no-errata.toml")
    assert errata.count('class="erratum"') == 1 and "it is 2" in errata and 'href="x.html"' in errata
    assert "<h3>Findings without an erratum entry yet</h3>" in errata
    # a paper-scale claim that does not hold at this size is pointed to, not counted as a finding
    assert "<h3>Paper-scale claims that do not hold at this build's size</h3>" in errata
    assert "<li><code>x.big2</code>" in errata
    book = tmp_path / "errata.toml"
    book.write_text(
        '[[paper]]\nname = "Paper X"\n[[paper.erratum]]\nclaim = "x.finding"\ntitle = "A <title>"\nquote = "q $x$"\nwhere = "w"\n'
        'kind = "experiment"\nanchor = "sec"\neffect = "$y$ = {value:.1f}, {gap:+.1f} from the paper, {ratio:.2f} of it"\n'
        "paper_value = 4\n"
    )
    errata = claim_pages.errata("quick", registry=reg, path=book)
    assert "<h3>Paper X</h3><p><b>Experiments</b></p>" in errata and "<h4>A &lt;title&gt;</h4>" in errata
    assert 'href="x.html#sec"' in errata and "without an erratum entry" not in errata
    assert '<dd>“q <span class="math notranslate nohighlight">\\(x\\)</span>” (w)</dd>' in errata
    # the size of the effect, filled with the row's value in this build (1), the paper's number given
    assert (
        '<dt>size of the effect</dt><dd><span class="math notranslate nohighlight">\\(y\\)</span> = 1.0, -3.0 from '
        "the paper, 0.25 of it (this build, quick profile)</dd>" in errata
    )
    # one reading of "the value at the finding's scale" serves the effect and the "where established" line
    rows = {r["claim"]: r for r in claims.results("quick", registry=reg)}
    assert rows["x.finding"]["finding_scale_here"] and rows["x.finding"]["finding_scale_value"] == 1.0
    assert rows["x.finding"]["finding_scale_label"] == "this build, quick profile"
    big = rows["x.big2"]  # a full-scale row observed at quick, never recorded: not its scale, no value there
    assert (
        not big["finding_scale_here"] and big["finding_scale_value"] is None and big["observed"] is not None
    )


def test_import_closure_follows_companion_imports_only():
    mods = cache.import_closure("companion.experiments.noisy_recall")
    assert "companion.train" in mods and "companion.models.transformer" in mods
    assert "companion.claims" not in mods and "companion.plotting" not in mods
    with pytest.raises(ValueError, match="not a module"):
        cache.import_closure("companion.nothing_here")


def test_no_cached_computation_is_keyed_on_the_claims_registry_or_a_figure():
    """Every module that caches its runs (its ``MODULES``) keys them on its import closure; the claims registry
    (edited by most changes) and the figures stay out of it, so editing them re-keys no cached run. A chapter's
    check of our own code (``report.require``) reads ``companion.criterion``, not ``companion.claims``."""
    import importlib
    import pkgutil

    import companion

    keyed = {}
    for info in pkgutil.walk_packages(companion.__path__, "companion."):
        if info.name.endswith(("__main__", "book_ext")):
            continue
        modules = getattr(importlib.import_module(info.name), "MODULES", None)
        if isinstance(modules, tuple) and all(isinstance(m, str) for m in modules):
            keyed[info.name] = cache.import_closure(*modules)
    assert len(keyed) > 10 and "companion.experiments.khop" in keyed
    bad = {
        m: [c for c in mods if c == "companion.claims" or c.startswith("companion.figures")]
        for m, mods in keyed.items()
    }
    assert {m: b for m, b in bad.items() if b} == {}
    assert "companion.criterion" in keyed["companion.experiments.khop_onset"]  # through report
    # the base k-hop runs are keyed on their training alone: the chapter's members and summary stay out
    assert "companion.experiments.khop_members" in keyed["companion.experiments.khop_onset"]
    assert not {"companion.experiments.khop_members", "companion.report"} & set(
        keyed["companion.experiments.khop"]
    )


def test_load_or_compute_computes_once_and_keys_on_settings(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"x": np.arange(3)}

    mods = ("companion.report",)
    a = cache.load_or_compute("t", {"n": 1}, compute, mods)
    b = cache.load_or_compute("t", {"n": 1}, compute, mods)
    assert len(calls) == 1 and (a["x"] == b["x"]).all()
    cache.load_or_compute("t", {"n": 2}, compute, mods)
    assert len(calls) == 2
    cache.load_or_compute("t", {"n": 1}, compute, mods, use_cache=False)
    assert len(calls) == 3
    assert cache.load_or_compute("j", {"n": 1}, lambda: [1, 2], mods, fmt="json") == [1, 2]
    assert not list(tmp_path.rglob(".part-*"))
    with pytest.raises(ValueError, match="cache format"):
        cache.load_or_compute("t", {"n": 1}, compute, mods, fmt="yaml")


def test_report_helpers():
    s = report.Summary({"a": (np.float64(0.5), "half"), "b": 3})
    assert isinstance(s["a"], float) and s.meaning["b"] == ""
    assert "| `a` | 0.5 | half |" in s._repr_markdown_()
    assert math.isnan(report.strict_min([1.0, math.nan])) and math.isnan(report.strict_min([math.nan, 1.0]))
    assert report.loglog_slope([1, 2, 4], [3, 12, 48]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="positive finite"):
        report.loglog_slope([1, 2], [0.0, 1.0])


def test_headlines_show_each_sources_claims_with_both_values(tmp_path, monkeypatch):
    """``data/headlines.toml`` names, per source, rows of claims.toml of the sources' origin; the table gives the
    paper's value, our finding where there is one, this build's value and status, and the chapter."""
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path / "cache"))
    reg = claims.load(
        write_rows(
            tmp_path,
            "[[claim]]\n" + ROW + 'check = { above = 1.0 }\nfinding = "it is 2 <b>"\n'
            "[[claim]]\n" + OURS.replace("x.a", "x.ours") + "check = { above = 1.0 }\n",
        )
    )
    good = tmp_path / "headlines.toml"
    good.write_text('[[source]]\nname = "Paper X"\nclaims = ["x.a"]\n')
    claims.check("x.a", 2.5, profile="quick", quiet=True, registry=reg)
    html = claim_pages.headlines("quick", registry=reg, path=good)
    assert "<h3>Paper X</h3>" in html and "<th>this build (quick)</th>" in html
    assert "<td>p</td><td>2.5<br><small>finding against the paper</small></td>" in html
    assert "<b>Finding:</b> it is 2 &lt;b&gt;" in html and 'href="x.html"' in html
    for names, match in ((["x.b"], "'x.b' of 'Paper X'.*no such claim row"), (["x.ours"], "origin 'ours'")):
        bad = tmp_path / "bad.toml"
        bad.write_text(f'[[source]]\nname = "Paper X"\nclaims = {names!r}\n'.replace("'", '"'))
        with pytest.raises(ValueError, match=match):
            claim_pages.headlines("quick", registry=reg, path=bad)
    # the book's headlines are rows of the registry, each a source's claim, none twice
    ids = [c for cs in claim_pages.load_headlines().values() for c in cs]
    assert len(ids) == len(set(ids)) >= 12 and all(claims.CLAIMS[c].origin == "paper" for c in ids)


def test_a_finding_of_the_papers_size_is_not_counted_at_the_quick_size(tmp_path, monkeypatch):
    """Quick and full criteria differ (quick: the paper's claim scaled down; full: the finding): the quick run is
    judged as the paper's claim at a smaller size, the full run as the finding."""
    monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path))
    body = 'quick = { above = 0.75 }\nfull = { below = 0.97 }\nfinding = "it is 0.96"\n'
    reg = claims.load(write_rows(tmp_path, "[[claim]]\n" + ROW + body))
    assert reg["x.a"].finding_profiles() == {"full"}
    claims.check("x.a", 0.9, profile="quick", quiet=True, registry=reg)
    claims.check("x.a", 0.96, profile="full", quiet=True, registry=reg)
    quick, full = (claims.results(p, registry=reg)[0] for p in ("quick", "full"))
    assert (
        quick["category"] == claims.HOLDS_HERE
        and "at the paper's size a finding (criterion < 0.97)" in quick["detail"]
    )
    assert full["category"] == claims.FINDING
    # the errata page names the scale the finding belongs to, and its recorded value there (none here)
    none = tmp_path / "no-errata.toml"
    assert "<dt>where the finding was established</dt><dd>the full profile: no recorded run yet</dd>" in (
        claim_pages.errata("quick", registry=reg, path=none)
    )
    assert "where the finding was established" not in claim_pages.errata("full", registry=reg, path=none)


@pytest.mark.parametrize(
    "entries, match",
    [
        (
            'claim = "x.nope"\ntitle = "t"\nquote = "q $x$"\nwhere = "w"\nkind = "theory"\n',
            "not a claim row with a finding",
        ),
        ('claim = "x.a"\ntitle = "t"\nquote = "q $x$"\nwhere = "w"\nkind = "typo"\n', "kind 'typo'"),
        (
            'claim = "x.a"\ntitle = "t"\nquote = "q $x$"\nwhere = "w"\nkind = "theory"\n[[paper.erratum]]\nclaim = "x.b"\ntitle = "u"\nquote = "q $x$"\nwhere = "w"\n'
            'kind = "experiment"\n',
            "the experiments come before the theory",
        ),
        (
            'claim = "x.a"\ntitle = "t"\nquote = "q $x$"\nwhere = "w"\nkind = "theory"\n[[paper.erratum]]\nclaim = "x.a"\ntitle = "u"\nquote = "q $x$"\nwhere = "w"\n'
            'kind = "theory"\n',
            "listed twice",
        ),
        (
            'claim = "x.a"\ntitle = "t"\nquote = "q $x$"\nwhere = "w"\nkind = "theory"\nalso = ["x.a"]\n',
            "'x.a' in .* listed twice",
        ),
        (
            'claim = "x.a"\ntitle = "t"\nquote = "q $x$"\nwhere = "w"\nkind = "theory"\nalso = ["x.c"]\n',
            "'x.c' in .* not a claim row",
        ),
        ('claim = "x.a"\ntitle = "t"\nwhere = "w"\nkind = "theory"\n', "needs its quote and where"),
        (
            'claim = "x.a"\ntitle = "t"\nquote = "q"\nwhere = "w"\nkind = "theory"\neffect = "{gap:.1f}"\n',
            "effect '{gap:.1f}' cannot be filled",
        ),
    ],
)
def test_bad_errata_entries_are_refused(tmp_path, entries, match):
    reg = claims.load(
        write_rows(
            tmp_path,
            "[[claim]]\n" + ROW + 'check = { above = 1.0 }\nfinding = "f"\n'
            "[[claim]]\n" + ROW.replace("x.a", "x.b") + 'check = { above = 1.0 }\nfinding = "g"\n',
        )
    )
    book = tmp_path / "errata.toml"
    book.write_text('[[paper]]\nname = "P"\n[[paper.erratum]]\n' + entries)
    with pytest.raises(ValueError, match=match):
        claim_pages.load_errata(book, registry=reg)
    # the control: a row that states the same erratum is shown inside the entry, not on its own
    book.write_text(
        '[[paper]]\nname = "P"\n[[paper.erratum]]\nclaim = "x.a"\ntitle = "t"\nquote = "q $x$"\nwhere = "w"\nkind = "theory"\nalso = ["x.b"]\n'
    )
    html = claim_pages.errata("quick", registry=reg, path=book)
    assert (
        html.count('class="erratum"') == 1
        and "<dt>the same erratum, also checked by</dt><dd><code>x.b</code>" in html
    )


def test_every_finding_has_one_erratum_entry_whose_section_exists():
    """data/errata.toml lists every finding row once, each entry gives the size of its effect, and each entry's
    anchor is a label of its chapter."""
    book = claim_pages.load_errata()
    entries = [e for es in book.values() for e in es]
    named = [c for e in entries for c in [e["claim"], *e["also"]]]
    assert sorted(named) == sorted(c.id for c in claims.CLAIMS.values() if c.finding)
    assert [e["claim"] for e in entries if not e.get("effect")] == []  # each gives the size of its effect
    for e in entries:
        text = (config.REPO_ROOT / f"{e['chapter']}.md").read_text()
        assert f"\n({e['anchor']})=\n" in text, (
            f"{e['claim']}: no label ({e['anchor']})= in {e['chapter']}.md"
        )


def test_each_erratum_quotes_its_paper_verbatim():
    """Every erratum quotes the paper's statement with where it stands, and the quote is the paper's text
    (``config.papers_dir()``, the plain-text sources; spaces, ``$`` and ``&`` aside, ``…`` where words are left out),
    in the paper the entry is filed under. Where the sources are not on the machine only the first part runs."""
    import re
    import tomllib

    with open(claim_pages.ERRATA_FILE, "rb") as f:
        papers = tomllib.load(f)["paper"]
    entries = [(p, e) for p in papers for e in p["erratum"]]
    assert entries and all(e["quote"].strip() and e["where"].strip() for _, e in entries)
    where = config.papers_dir()
    if not where.is_dir():
        pytest.skip(f"the papers' plain-text sources are not at {where}")

    def norm(text: str) -> str:
        return re.sub(r"[\s$&]+", "", text)

    missing = []
    for p, e in entries:
        text, at = norm((where / p["text"]).read_text()), 0
        for part in e["quote"].split("…"):
            at = text.find(norm(part), at)
            if at < 0:
                missing.append(f"{e['claim']}: {part!r} not in {p['text']}")
                break
            at += len(norm(part))
    assert missing == []


def test_a_rows_notes_are_its_history_not_comments():
    """Issue 52: registration notes are the rows' ``history`` (read, and shown on the scorecard), not comments in
    data/claims.toml: after the file's header, a comment line may only head a section (``# ---``)."""
    text = claims.CLAIMS_FILE.read_text()
    body = text[text.index("[[claim]]") :].splitlines()
    assert [ln for ln in body if ln.startswith("#") and not ln.startswith("# ---")] == []
    assert sum(1 for c in claims.CLAIMS.values() if c.history) > 80


def test_flips_compare_two_builds_row_by_row(tmp_path, monkeypatch, flip_script):
    """Issue 54's flip list: a row's category under each build's cache, changed where they differ, None where a
    build did not reach the row; the page shows the changed rows with both values."""
    reg = claims.load(
        write_rows(
            tmp_path,
            "\n".join(
                [
                    f"[[claim]]\n{ROW.replace('x.a', f'x.{n}')}check = {{ above = 0.0 }}"
                    for n in ("a", "b", "c")
                ]
                + [
                    f"[[claim]]\n{ROW.replace('x.a', 'y.other').replace('book/x', 'book/y')}check = {{ above = 0.0 }}"
                ]
            ),
        )
    )
    before, after = tmp_path / "numpy", tmp_path / "counter"
    for cache_dir, values in ((before, {"x.a": 1, "x.b": 1, "x.c": 1}), (after, {"x.a": -1, "x.b": 2})):
        monkeypatch.setenv("COMPANION_CACHE_DIR", str(cache_dir))
        for cid, v in values.items():
            try:
                claims.check(cid, v, profile="quick", quiet=True, registry=reg)
            except AssertionError:
                pass  # recorded as failing first
    rows = {r["claim"]: r for r in claim_flips.flips(before, after, ["book/x"], registry=reg)}
    assert sorted(rows) == ["x.a", "x.b", "x.c"]  # the other chapter's row left out
    assert rows["x.a"]["changed"] and rows["x.a"]["after"] == {"category": claims.FAIL, "observed": -1.0}
    assert not rows["x.b"]["changed"] and rows["x.b"]["after"]["observed"] == 2.0
    assert rows["x.a"]["moved"] and rows["x.b"]["moved"]  # another value, whether or not the category moved
    assert rows["x.c"]["changed"] and rows["x.c"]["after"]["category"] is None and not rows["x.c"]["moved"]
    with pytest.raises(ValueError, match="book/z"):
        claim_flips.flips(before, after, ["book/z"], registry=reg)
    # the page, from the file the script writes (with the real registry's rows)
    real = next(c for c in claims.CLAIMS.values() if c.chapter == "book/noisy_recall")
    data = {
        "issue": 54, "profile": "quick", "date": "2026-12-02", "chapters": ["book/noisy_recall"],
        "before": {"sampler": "numpy", "build": "numpy build"}, "after": {"sampler": "counter", "build": "counter build"},
        "rows": [{**rows["x.a"], "claim": real.id, "chapter": real.chapter}, {**rows["x.b"], "claim": real.id}],
    }  # fmt: skip
    path = tmp_path / "flip_list.json"
    path.write_text(json.dumps(data))
    page = claim_flips.flip_list(path)
    assert (
        "2 rows, of which 2 take another value" in page
        and "1 changes category and 0 were not reached" in page
    )
    assert "{doc}`noisy_recall`" in page
    now = f"{claims.judged(real, 1.0)['category']}; {claims.judged(real, -1.0)['category']}"
    assert f"| `{real.id}` | {{doc}}`noisy_recall` | holds (1) | FAIL (-1) | {now} |" in page
    path.write_text(json.dumps({**data, "not_reached": {"book/noisy_recall": "its run stops early"}}))
    assert "Not reached in {doc}`noisy_recall`: its run stops early" in claim_flips.flip_list(path)
    path.write_text(json.dumps({**data, "rows": [{**rows["x.a"]}]}))
    with pytest.raises(KeyError, match="x.a"):
        claim_flips.flip_list(path)
    # the script writes what flips gives
    monkeypatch.setattr(flip_script, "OUT", tmp_path / "out.json")
    monkeypatch.setattr(claims, "CLAIMS", reg)
    monkeypatch.setattr(
        "sys.argv", ["flip_list.py", "--before", str(before), "--after", str(after), "--before-label", "a",
                     "--after-label", "b", "book/x"],
    )  # fmt: skip
    flip_script.main()
    assert json.loads((tmp_path / "out.json").read_text())["rows"] == list(rows.values())


def test_the_committed_flip_list_names_registered_rows_and_renders():
    data, page = json.loads(claim_flips.FLIP_LIST.read_text()), claim_flips.flip_list()
    assert f"{len(data['rows'])} rows, of which" in page and data["before"]["sampler"] == "numpy"
    assert all(f"`{r['claim']}`" in page for r in data["rows"] if r["changed"])
    # the labels stored before the switch said "(the book's: numpy)", which book/status under counter contradicted
    assert "the book's: numpy" in json.dumps(data["recordings"]["made"]) and "the book's:" not in page
    # beside the categories the rows gave when the list was made, the ones the rows in force give the same values:
    # a row rewritten at issue 54's switch to assert the counter build's outcome no longer fails that build
    switched = {r["claim"]: r for r in data["rows"] if r["changed"]}["khop.k4_anystart_solved"]
    assert switched["after"]["category"] == claims.FAIL
    assert claim_flips.today(switched) == f"{claims.FAIL}; {claims.HOLDS}"
    assert claim_flips.today({**switched, "after": {"category": None, "observed": None}}) == (
        f"{claims.FAIL}; not reached"
    )


def test_a_statement_that_gives_its_value_gives_the_value_of_the_build_in_force():
    """A statement written with its build's value ("refuted: 4 of 7 walk") gives the value of the recording the
    build reads, and a chapter's row the flip list's value under the build's sampler; the outcome its last clause
    names ("holds", "refuted", "as predicted") is one of the categories that build gives the row. At issue 54's
    switch, the statements the counter sampler contradicts (the flip list page lists them) fail here until
    rewritten."""
    recorded_ids, stale = set(), []
    for (
        rec
    ) in record_reads.in_force():  # the recordings whose claims the build checks (a named exception included)
        for cid, value in rec.claims.items():
            recorded_ids.add(cid)
            stale += (
                [(rec.path.name, cid, value)] if claims.states_otherwise(claims.CLAIMS[cid], value) else []
            )
    side = claim_flips.SIDES[config.sampler()]
    data = json.loads(claim_flips.FLIP_LIST.read_text())
    live = [r for r in data["rows"] if r["claim"] not in recorded_ids]
    stale += [
        ("flip list", r["claim"], r[side]["observed"])
        for r in live
        if claims.states_otherwise(claims.CLAIMS[r["claim"]], r[side]["observed"])
    ]
    assert not stale
    rows = claim_flips.by_claim(data)
    named = sum(statements.stated_outcome(claims.CLAIMS[cid].statement) is not None for cid in rows)
    # the stall chapter's rows are read from the numpy generators' recordings under either sampler
    kept = frozenset(r["claim"] for r in record_reads.unread_again(data))
    # the category the row gives the build's value now (the flip list keeps the categories the rows gave before
    # issue 54's switch, when a row that changed outcome still asserted the numpy generators' one)
    observed = {cid: r[claim_flips.side(config.sampler(), cid, kept)]["observed"] for cid, r in rows.items()}
    other = [
        cid
        for cid, v in observed.items()
        if v is not None
        and claims.names_other_outcome(claims.CLAIMS[cid], claims.judged(claims.CLAIMS[cid], v)["category"])
    ]
    assert not other and named >= 50
    assert sum(statements.stated_value(c.statement) is not None for c in claims.CLAIMS.values()) >= 25
    stale_under = {
        k: {r["claim"] for r in claim_flips.stated_rows(data, k) if "counter" in r["stale"]}
        for k in (frozenset(), kept)
    }
    assert stale_under[frozenset()] - stale_under[kept] == {
        "khop.k4_delay100_fewer_paths",
        "khop.k4_delay400_spared",
    }
    assert not stale_under[
        kept
    ]  # every statement gives the value of the build in force (the counter sampler's)
    with_value = claim_flips.stated_rows(data)
    assert {"khop.k4_onestart_move_walkers", "khop.k4_lr_solved"} <= {r["claim"] for r in with_value}
    # written for the counter sampler since the switch (holds: 2 of 7), the numpy generators' 4 of 7 kept after it
    assert [r["stale"] for r in with_value if r["claim"] == "khop.k4_onestart_move_walkers"] == [["numpy"]]
    assert "Under the counter sampler, 0 of them give another value." in claim_flips.flip_list(kept=kept)


def test_a_statement_that_names_seeds_names_those_of_the_build_in_force():
    """A row's ``seeds`` entries (of the recording the build reads for it, its summary recomputed from its curves)
    give the seeds its outcome clause names ("refuted: 3 of 7 (seeds 1, 3, 5)"). At issue 54's switch the
    statements whose seeds the counter sampler's runs change fail here until rewritten."""
    from companion.experiments import khop_studies

    recs = {cid: r for r in record_reads.in_force() for cid in r.claims}
    named = [c for c in claims.CLAIMS.values() if c.seeds]
    assert len(named) >= 6
    stale = []
    for c in named:
        summary = khop_studies.recorded_summary(recs[c.id], prefix="")
        got = set().union(*(statements.seeds_entry(summary[key]) for key in c.seeds))
        stale += (
            [(c.id, sorted(statements.stated_seeds(c.statement)), sorted(got))]
            if got != statements.stated_seeds(c.statement)
            else []
        )
    assert not stale


def test_a_record_only_build_records_a_failing_row_and_goes_on(tmp_path, monkeypatch):
    reg = claims.load(write_rows(tmp_path, "[[claim]]\n" + ROW + "check = { above = 0.0 }"))
    monkeypatch.setenv("COMPANION_CHECKS", "record")
    assert claims.check("x.a", -1, profile="quick", quiet=True, registry=reg)["passed"] is False
    assert {r["claim"]: r["category"] for r in claims.results("quick", reg)}["x.a"] == claims.FAIL
    monkeypatch.setenv("COMPANION_CHECKS", "assert")
    with pytest.raises(AssertionError, match="x.a does not hold"):
        claims.check("x.a", -1, profile="quick", quiet=True, registry=reg)
    monkeypatch.setenv("COMPANION_CHECKS", "warn")
    with pytest.raises(ValueError, match="COMPANION_CHECKS"):
        claims.check("x.a", 1, profile="quick", quiet=True, registry=reg)


def test_recordings_made_again_under_the_counter_sampler_join_the_flip_list(
    tmp_path, monkeypatch, flip_script
):
    """A recording made again under the counter sampler: each row it checks, judged on both recordings as the
    chapter's check would; the page lists the rows that change category with the file and both values."""

    name = "induction_random_seeds-quick.json"
    old = record.load(record.RECORDED_DIR / name)
    assert old.drawn_by == "numpy"
    # a prediction, above 0.2, asserted at the full size: at quick 0.2577 (numpy) holds here only, 0.15 does not hold
    cid = "ih.random_seeds_ambiguity"
    folder = tmp_path / "counter"
    folder.mkdir()
    new = dict(old.data, sampler=2, claims={**old.data["claims"], cid: 0.15})
    (folder / name).write_text(json.dumps(new))
    out = tmp_path / "flip_list.json"
    committed = json.loads(claim_flips.FLIP_LIST.read_text())
    committed.pop("rounding")  # the committed rounding control has this recording too: not this test's
    out.write_text(json.dumps(committed))
    data = flip_script.add_recordings(folder, out)
    rows = {r["claim"]: r for r in data["recordings"]["rows"]}
    assert set(rows) == set(old.claims) and json.loads(out.read_text())["recordings"] == data["recordings"]
    assert rows[cid]["changed"] and rows[cid]["after"] == {"category": claims.NOT_HERE, "observed": 0.15}
    assert rows[cid]["before"]["category"] == claims.HOLDS_HERE and rows[cid]["recording"] == name
    assert sum(r["changed"] for r in rows.values()) == 1 and sum(r["moved"] for r in rows.values()) == 1
    page = claim_flips.flip_list(out)
    assert "Of the 10 rows they check, 1 changes category:" in page
    assert (
        f"| `{cid}` | {{doc}}`induction_random` | `{name}` | holds at this scale only (0.2577) | does not hold here (0.15) |"
        in page
    )
    assert old.data["device"] == new["device"] == "CPU AMD EPYC, 2 threads"
    assert "trained" not in rows[cid] and data["recordings"]["made"][0]["trained"] == {
        "numpy": "alone, 2 threads",
        "counter": "alone, 2 threads",
    }
    # runs trained alone under numpy and packed under counter: the row and the page say so
    (folder / name).write_text(json.dumps(dict(new, packs={"seed 0": {"replicas": 4}})))
    data = flip_script.add_recordings(folder, out)
    row = next(r for r in data["recordings"]["rows"] if r["claim"] == cid)
    assert row["trained"] == {"numpy": "alone, 2 threads", "counter": "packs of 4, 2 threads"}
    page = claim_flips.flip_list(out)
    assert (
        f"`{name}` (numpy: alone, 2 threads; counter: packs of 4, 2 threads) | holds at this scale only (0.2577) | "
        "does not hold here" in page
    )
    assert "(1 of them from recordings whose runs trained otherwise under the two samplers" in page
    # alone under both, on one thread instead of two: marked too
    (folder / name).write_text(json.dumps(dict(new, device="CPU AMD EPYC, 1 threads", threads=1)))
    data = flip_script.add_recordings(folder, out)
    row = next(r for r in data["recordings"]["rows"] if r["claim"] == cid)
    assert row["trained"] == {"numpy": "alone, 2 threads", "counter": "alone, 1 thread"}
    # the recording made again must be the counter sampler's, its namesake the numpy generators'
    (folder / name).write_text(json.dumps(dict(new, sampler=1)))
    with pytest.raises(ValueError, match="drawn by the numpy sampler; allowed the counter"):
        flip_script.add_recordings(folder, out)
    (folder / "recall-quick-none.json").write_text(json.dumps(new))
    (folder / name).unlink()
    with pytest.raises(ValueError, match="recall-quick-none.json: no recording of that name"):
        flip_script.add_recordings(folder, out)
    with pytest.raises(ValueError, match="does not store"):
        claim_flips.recorded_flips([(name, {cid: 0.3}, {})])


def test_a_chapter_compared_again_replaces_its_rows_in_the_flip_list(tmp_path, flip_script):
    """After a chapter's runs change (another quick size), new builds of it replace its rows where they stood; the
    other chapters' rows are kept, and the page says which chapter was compared again, why and by which builds."""
    import shutil

    out = tmp_path / "flip_list.json"
    shutil.copy(claim_flips.FLIP_LIST, out)
    committed = json.loads(out.read_text())
    chapter = "book/synthetic_ioi"
    old = [r for r in committed["rows"] if r["chapter"] == chapter]
    assert old and chapter in committed["swept"]
    rows = [dict(r, after={"category": claims.FAIL, "observed": -9.0}, changed=True) for r in old]
    builds = {"before": "numpy, new build", "after": "counter, new build"}
    data = flip_script.again(chapter, rows, builds, "its quick batch became 64", out)
    assert json.loads(out.read_text()) == data
    assert [r for r in data["rows"] if r["chapter"] == chapter] == rows
    assert [r for r in data["rows"] if r["chapter"] != chapter] == [
        r for r in committed["rows"] if r["chapter"] != chapter
    ]
    first = lambda d: next(i for i, r in enumerate(d["rows"]) if r["chapter"] == chapter)  # noqa: E731
    assert first(data) == first(committed) and len(data["rows"]) == len(committed["rows"])
    assert data["again"][chapter]["why"] == "its quick batch became 64"
    page = claim_flips.flip_list(out)
    assert "{doc}`synthetic_ioi`, after its quick batch became 64" in page
    assert "come from numpy, new build against counter, new build." in page
    # a chapter whose old builds did not reach some rows: the new builds' reason replaces theirs
    stopped = "book/khop_starts"
    data = json.loads(out.read_text())
    out.write_text(json.dumps({**data, "not_reached": {stopped: "its probe's cells stop"}}))
    moved = [dict(r, chapter=stopped) for r in rows]
    assert (
        stopped not in flip_script.again(stopped, moved, builds, "recordings made again", out)["not_reached"]
    )
    assert flip_script.again(stopped, moved, builds, "w", out, "stops")["not_reached"][stopped] == "stops"
    with pytest.raises(ValueError, match="book/nowhere"):
        flip_script.again("book/nowhere", rows, builds, "why", out)
    with pytest.raises(ValueError, match="rows of \\['book/noisy_recall'\\]"):
        flip_script.again(chapter, rows + [dict(rows[0], chapter="book/noisy_recall")], builds, "why", out)
    with pytest.raises(ValueError, match="was swept"):
        flip_script.again(
            chapter, [{k: v for k, v in r.items() if k != "sweep"} for r in rows], builds, "w", out
        )


def test_the_seed_sweep_gives_the_rows_near_their_bar_under_more_seeds(tmp_path, monkeypatch):
    """Issue 54's seed sweep: rows within 10% of their bar (either sampler, seed 0) are marked near_bar; the rows
    of a swept chapter carry their category and value under each sweep build; the page lists the near rows with
    every seed and counts those that take more than one category."""
    reg = claims.load(
        write_rows(
            tmp_path,
            "\n".join(
                f"[[claim]]\n{ROW.replace('x.a', f'x.{n}')}check = {{ above = 1.0 }}" for n in ("a", "b")
            ),
        )
    )
    builds = {
        "numpy0": {"x.a": 1.05, "x.b": 3.0},
        "counter0": {"x.a": 1.2, "x.b": 3.0},
        "numpy1": {"x.a": 0.9, "x.b": 2.0},
        "counter1": {"x.a": 1.3},
    }
    for name, values in builds.items():
        monkeypatch.setenv("COMPANION_CACHE_DIR", str(tmp_path / name))
        for cid, v in values.items():
            try:
                claims.check(cid, v, profile="quick", quiet=True, registry=reg)
            except AssertionError:
                pass
    sweeps = {"numpy, seed 1": tmp_path / "numpy1", "counter, seed 1": tmp_path / "counter1"}

    def flips(swept):
        return claim_flips.flips(
            tmp_path / "numpy0", tmp_path / "counter0", ["book/x"], registry=reg, sweeps=sweeps, swept=swept
        )

    rows = {r["claim"]: r for r in flips(["book/x"])}
    assert rows["x.a"]["near_bar"] and not rows["x.b"]["near_bar"]
    assert rows["x.a"]["sweep"]["numpy, seed 1"] == {"category": claims.FAIL, "observed": 0.9}
    assert rows["x.b"]["sweep"]["counter, seed 1"]["category"] is None  # not reached
    with pytest.raises(ValueError, match="book/y"):
        flips(["book/y"])
    # the page
    monkeypatch.setattr(claims, "CLAIMS", reg)
    data = {
        "issue": 54, "profile": "quick", "date": "2026-12-02", "chapters": ["book/x"], "not_reached": {},
        "before": {"sampler": "numpy", "build": "a"}, "after": {"sampler": "counter", "build": "b"},
        "rows": list(rows.values()), "sweeps": list(sweeps), "swept": ["book/x"],
    }  # fmt: skip
    path = tmp_path / "flip_list.json"
    path.write_text(json.dumps(data))
    page = claim_flips.flip_list(path)
    assert (
        "1 lie within 10% of their bar under one of the two samplers at seed 0 or change category between them (0)"
        in page
    )
    assert "1 of them take more than one category under the numpy sampler and 0 under the counter" in page
    assert "| `x.a` | {doc}`x` | holds (1.05); FAIL (0.9) | holds (1.2); holds (1.3) |" in page
    assert "`x.b`" not in page.split("Seed sweep")[1] and "more rows near their bar" not in page
    # one chapter's rows (a chapter shows its own): the same cells, a row the sweep ran and did not list too
    table = claim_flips.sweep_table(["x.b", "x.a"], path)
    assert table.splitlines()[2:] == [
        "| `x.b` | {doc}`x` | holds (3); holds (2) | holds (3); not reached |",
        "| `x.a` | {doc}`x` | holds (1.05); FAIL (0.9) | holds (1.2); holds (1.3) |",
    ]
    with pytest.raises(ValueError, match=r"\['x.c'\] were not swept"):
        claim_flips.sweep_table(["x.c"], path)
    flip_b = {**rows["x.b"], "changed": True, "after": {"category": claims.FAIL, "observed": 0.5}}
    path.write_text(json.dumps({**data, "rows": [rows["x.a"], flip_b]}))
    page = claim_flips.flip_list(path)
    assert (
        "or change category between them (1)" in page
        and "| `x.b` | {doc}`x` | holds (3); holds (2) |" in page
    )
    data["rows"] = [{**rows["x.a"], "chapter": "book/y"}] + [r for r in data["rows"] if r["claim"] != "x.a"]
    del data["rows"][0]["sweep"]
    path.write_text(json.dumps(data))
    assert "1 more row near their bar belongs to chapters the sweep did not run ({doc}`y`)" in (
        claim_flips.flip_list(path)
    )


def test_the_rounding_alone_joins_the_flip_list(tmp_path, flip_script):
    """A recording made again under the numpy generators with its counter namesake's arithmetic (one thread
    instead of two): the rows it checks against its namesake, judged as the chapter would; the page lists those
    that change and puts the value beside the counter sampler's in the recordings' table."""
    import shutil

    name, cid = (
        "induction_random_seeds-quick.json",
        "ih.random_seeds_ambiguity",
    )  # 0.2577 holds here only, 0.1 not
    recorded = tmp_path / "recorded"
    (recorded / "counter").mkdir(parents=True)
    old = record.load(record.RECORDED_DIR / name)
    counter = dict(old.data, sampler=2, device="CPU AMD EPYC, 1 threads", threads=1)
    (recorded / name).write_text(json.dumps(old.data))
    (recorded / "counter" / name).write_text(json.dumps(dict(counter, claims={**old.claims, cid: 0.15})))
    folder = tmp_path / "rounding"
    folder.mkdir()
    again = dict(counter, sampler=old.data.get("sampler", 1), claims={**old.claims, cid: 0.1})
    (folder / name).write_text(json.dumps(again))
    out = tmp_path / "flip_list.json"
    shutil.copy(claim_flips.FLIP_LIST, out)
    flip_script.add_recordings(recorded / "counter", out, recorded)
    data = flip_script.add_rounding(folder, out, recorded)
    rows = {r["claim"]: r for r in data["rounding"]["rows"]}
    assert set(rows) == set(old.claims) and sum(r["changed"] for r in rows.values()) == 1
    assert rows[cid]["after"] == {"category": claims.NOT_HERE, "observed": 0.1}
    assert data["rounding"]["made"][0]["trained"] == {"numpy": "alone, 2 threads", "again": "alone, 1 thread"}
    assert "recordings" in json.loads(out.read_text())  # the counter rows kept
    page = claim_flips.flip_list(out)
    assert "does not hold here (0.15); numpy generators, same rounding: does not hold here (0.1) |" in page
    assert "Of the 10 rows they check, 1 changes category with the rounding alone:" in page
    assert (
        f"| `{cid}` | {{doc}}`induction_random` | `{name}` | holds at this scale only (0.2577) | does not hold here (0.1) |"
        in page
    )
    # another arithmetic than the counter namesake's, or the numpy namesake's own, or another sampler: refused
    (folder / name).write_text(json.dumps(dict(again, threads=2, device="CPU AMD EPYC, 2 threads")))
    with pytest.raises(ValueError, match="trained alone, 2 threads; its counter namesake alone, 1 thread"):
        flip_script.add_rounding(folder, out, recorded)
    (recorded / "counter" / name).write_text(json.dumps(old.data | {"sampler": 2}))
    with pytest.raises(ValueError, match="as its numpy namesake: no rounding changed"):
        flip_script.add_rounding(folder, out, recorded)
    (folder / name).write_text(json.dumps(dict(again, sampler=2)))
    with pytest.raises(ValueError, match="drawn by the counter sampler; allowed the numpy generators'"):
        flip_script.add_rounding(folder, out, recorded)
    (recorded / "counter" / name).unlink()
    (folder / name).write_text(json.dumps(again))
    with pytest.raises(ValueError, match="allowed a recording made again under both samplers"):
        flip_script.add_rounding(folder, out, recorded)


def test_runs_short_of_their_last_stage_are_named(tmp_path, flip_script):
    """A k-hop recording made again whose runs end before their last stage where its namesake's reached it: the
    flip list names them, and the page says that its rows are then judged on runs that never trained on it."""
    import shutil

    name = "khop_probe-quick-depth=4-eval_every=100-k=4-steps=8000.json"
    old = record.load(record.RECORDED_DIR / name)
    assert flip_script._short(old) == []
    curves = old.data["curves"]
    stage = {n: [min(s, 3) for s in v] for n, v in curves["stage"].items()}  # never on four hops
    folder = tmp_path / "counter"
    folder.mkdir()
    (folder / name).write_text(json.dumps(dict(old.data, sampler=2, curves=dict(curves, stage=stage))))
    out = tmp_path / "flip_list.json"
    shutil.copy(claim_flips.FLIP_LIST, out)
    data = flip_script.add_recordings(folder, out)
    (made,) = data["recordings"]["made"]
    assert made["short_of_last_stage"] == {"numpy": [], "counter": ["seed 0", "seed 0, every 250"]}
    page = claim_flips.flip_list(out)
    assert f"`{name}` (numpy: 0, counter: 2 of its runs; counter: 'seed 0', 'seed 0, every 250')" in page
    assert f"Their {len(old.claims)} rows ({len(old.claims)} in the same category under both)" in page
