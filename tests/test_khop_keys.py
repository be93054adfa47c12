"""The k-hop summary keys follow one scheme (issue 52 item 6; :mod:`companion.experiments.khop_keys`).

The committed recordings and the chapters are read as they are: no training."""

import json
import re
from pathlib import Path

import pytest

from companion.experiments import khop_keys, khop_probes, khop_stall, khop_stall_paths, khop_starts

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ("khop", "khop_four_hops", "khop_starts", "khop_stall")


def _recordings() -> dict[str, dict]:
    return {
        p.name: json.loads(p.read_text()) for p in sorted((ROOT / "data" / "recorded").glob("khop*.json"))
    }


def _chapter_keys(text: str) -> set[str]:
    """The keys a chapter glues (``{glue:text}`key``` or ``{glue:md}`key:myst```) and those its Check cell reads (``x["key"]``)."""
    glued = re.findall(r"\{glue(?::text|:md)?\}`([A-Za-z0-9_]+)", text)
    checked = re.findall(r'claims\.check\("[^"]+", *\w+\["(\w+)"\]', text)
    return set(glued) | set(checked)


def test_every_recorded_k_hop_entry_reads_in_the_scheme_and_names_its_recording():
    """Every summary entry of every committed k-hop recording is read fragment by fragment, and its first fragment
    names that recording (a key that starts with a word, not a study, is the talk's own recording ``khop``)."""
    recordings = _recordings()
    assert len(recordings) >= 27
    seen = 0
    for name, data in recordings.items():
        experiment = data["experiment"]
        for key in data["summary"]:
            first = khop_keys.fragments(key)[0][0]
            tag = khop_keys.tag(first)
            owner = re.findall(r"\b(khop\w*)\b", tag) if tag else ["khop"]
            assert experiment in owner, (name, key, tag)
            seen += 1
    assert seen > 5000


def test_every_key_a_k_hop_chapter_glues_or_checks_reads_in_the_scheme():
    keys = set()
    for chapter in CHAPTERS:
        found = _chapter_keys((ROOT / "book" / f"{chapter}.md").read_text())
        assert len(found) >= 20, chapter  # the reading sees the chapter's keys
        keys |= found
    unread = {}
    for key in sorted(keys):
        try:
            khop_keys.fragments(key)
        except ValueError as err:
            unread[key] = str(err)
    assert unread == {}


def test_the_probed_runs_tags_are_runs_of_the_scheme():
    """The tags the probe studies give their runs' entries (:class:`~companion.experiments.khop_probes.ProbeStudy`)
    are run or study tags of the scheme, as are the studies' shared prefixes."""
    studies = [
        v
        for module in (khop_probes, khop_stall, khop_stall_paths, khop_starts)
        for v in vars(module).values()
        if isinstance(v, khop_probes.ProbeStudy)
    ]
    assert len(studies) >= 6
    for study in studies:
        for tag in [*study.tags.values(), study.shared]:
            assert khop_keys.tag(tag), tag


def test_the_scheme_reads_a_key_fragment_by_fragment_and_refuses_what_it_does_not_define():
    parts = khop_keys.fragments("rl_rs100_d1_tk_b1_prev")
    assert [p for p, _ in parts] == ["rl", "rs100", "d1", "tk", "b1", "prev"]
    assert "khop_reseed_long" in parts[0][1] and "every 100 steps" in parts[1][1]  # a run of another study
    assert (
        parts[2][1].startswith("last-stage data stream 1")
        and parts[4][1] == "the last table shown to block 1 only"
    )
    # e<N> right after the study is a run (every N steps); after a block it is a hop's entry
    assert khop_keys.fragments("hid12l_e250_wait")[1][1] == "seed 0 advancing every 250 steps"
    assert khop_keys.fragments("h0_tkattn_l1_e3")[3][1] == "hop 3's entry"
    assert khop_keys.explain("mixture_final") == "mixture of 1..k hops | final accuracy"
    for bad in ("", "il250__final", "il250_s6_hk_atx", "zz9_acc"):
        with pytest.raises(ValueError, match="k-hop"):
            khop_keys.fragments(bad)
