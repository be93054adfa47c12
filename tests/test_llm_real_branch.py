"""The LLM chapters' real-weights branch, which CI never reaches through the Hub (``HF_HUB_OFFLINE=1``, no cached
weights): each chapter executed on tiny models of the real depths, with the real GPT-2 tokenizer, reached in the two
ways a reader's build reaches real weights:

- by the paper's Hub names, from a Hugging Face cache that holds them (the cache's layout: ``refs/<revision>``
  names a snapshot folder): the claims about the chapter's model are checked with the paper's criteria (recorded,
  not raised: a tiny random model fails them), those about other sizes skipped as such;
- by a local folder in the chapter's model variable (``COMPANION_PYTHIA``, ...), laid out as the chapter reads it
  (Pythia's with a ``step<N>/`` folder per checkpoint): the claims about the paper's models skipped because the
  chapter ran another model.

Neither builds the stand-in, and no row is skipped as a stand-in's."""

from __future__ import annotations

import hashlib
import json

import pytest

pytest.importorskip("transformers")
jupytext = pytest.importorskip("jupytext")
nbclient = pytest.importorskip("nbclient")

from companion import claims, config  # noqa: E402
from companion.data import tokenizer  # noqa: E402
from companion.llm.summaries import PYTHIA_REVISIONS  # noqa: E402

# Hub name: (family, layers) as the paper's model has them, so that Appendix C.2's LASER layers exist
MODELS = {
    "openai-community/gpt2": ("gpt2", 12),
    "EleutherAI/pythia-1b": ("gpt_neox", 16),
    "EleutherAI/pythia-1.4b": ("gpt_neox", 24),
}
PYTHIAS = ("EleutherAI/pythia-1b", "EleutherAI/pythia-1.4b")
# (chapter, how it reaches the weights): its model variable and the model it is pointed at
RUNS = {
    ("book/llm_gpt2_ioi", "hub"): ("COMPANION_GPT2", "openai-community/gpt2"),
    ("book/llm_pythia", "hub"): ("COMPANION_PYTHIA", "EleutherAI/pythia-1b"),
    ("book/leading_terms_pythia", "hub"): ("COMPANION_PYTHIA_LEADING", "EleutherAI/pythia-1.4b"),
    ("book/llm_pythia", "folder"): ("COMPANION_PYTHIA", "EleutherAI/pythia-1b"),
    # the GSM8K chapter's quick rows need all test problems; its real branch (1 to 8 shots, 256 new tokens) runs
    ("book/llm_gsm8k", "folder"): ("COMPANION_GSM8K_MODEL", "openai-community/gpt2"),
}


def _publish(hf_home, repo: str, revision: str, folder) -> None:
    """``folder`` (save_pretrained's files) in the Hugging Face cache at ``hf_home`` as ``repo`` at ``revision``."""
    base = hf_home / "hub" / f"models--{repo.replace('/', '--')}"
    commit = hashlib.sha1(f"{repo}@{revision}".encode()).hexdigest()
    snapshot = base / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for f in folder.iterdir():
        (snapshot / f.name).symlink_to(f)
    (base / "refs").mkdir(exist_ok=True)
    (base / "refs" / revision).write_text(commit)


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """(folders, hf_home): each model of :data:`MODELS` saved under ``folders/<hub name>`` (a Pythia as one
    ``step<N>`` folder per checkpoint, each its own weights), and the same in a Hugging Face cache."""
    import torch
    from transformers import AutoModelForCausalLM, GPT2Config, GPTNeoXConfig

    tok = tokenizer.gpt2_tokenizer(download=False)
    root = tmp_path_factory.mktemp("weights")
    folders, hf_home = root / "models", root / "hf"
    configs = {
        "gpt2": lambda n: GPT2Config(n_layer=n, n_embd=16, n_head=2, vocab_size=len(tok), n_positions=2048),
        "gpt_neox": lambda n: GPTNeoXConfig(
            num_hidden_layers=n,
            hidden_size=16,
            num_attention_heads=2,
            intermediate_size=64,
            vocab_size=len(tok),
            max_position_embeddings=2048,
        ),  # fmt: skip
    }
    for name, (family, layers) in MODELS.items():
        revisions = PYTHIA_REVISIONS if name in PYTHIAS else ["main"]
        for seed, revision in enumerate(revisions):
            folder = folders / name / revision if name in PYTHIAS else folders / name
            torch.manual_seed(seed)
            AutoModelForCausalLM.from_config(configs[family](layers)).save_pretrained(folder)
            tok.save_pretrained(folder)
            _publish(hf_home, name, revision, folder)
        if name in PYTHIAS:  # the tokenizer of a Pythia is read at main
            _publish(hf_home, name, "main", folders / name / PYTHIA_REVISIONS[-1])
    return folders, hf_home


def _execute(chapter: str, env: dict, monkeypatch) -> list[str]:
    """The chapter executed in a kernel that inherits ``env``; the Markdown its cells show."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    nb = jupytext.read(config.REPO_ROOT / f"{chapter}.md")
    # raises CellExecutionError, with the cell and its traceback, where the branch breaks
    nbclient.NotebookClient(
        nb, timeout=600, resources={"metadata": {"path": str(config.REPO_ROOT / "book")}}
    ).execute()
    return [
        out["data"]["text/markdown"]
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if "text/markdown" in out.get("data", {})
    ]


@pytest.mark.parametrize("chapter, way", sorted(RUNS))
def test_the_real_weights_branch_runs(chapter, way, weights, tmp_path, monkeypatch):
    folders, hf_home = weights
    variable, name = RUNS[chapter, way]
    cache = tmp_path / "cache"
    env = {"COMPANION_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
    if way == "hub":
        env |= {variable: name, "HF_HOME": str(hf_home), "COMPANION_CHECKS": "record"}
        banner = f"Real weights: **{name}** from the Hugging Face Hub"
    else:
        env |= {variable: str(folders / name)}
        monkeypatch.delenv("COMPANION_CHECKS", raising=False)
        banner = f"Real weights from the local folder **{(folders / name).name}**"
    shown = _execute(chapter, env, monkeypatch)
    assert any(m.startswith(banner) for m in shown), shown[:3]
    assert not any("Stand-in" in m for m in shown)
    assert not (cache / "llm").exists()  # no stand-in built
    rows = [c for c in claims.CLAIMS.values() if c.chapter == chapter and c.scale == "real"]
    recs = [json.loads(claims.record_path(c.id, config.get_profile(), cache).read_text()) for c in rows]
    assert rows and not any("stand-in" in r.get("skipped", "") for r in recs), recs
    checked = [r["id"] for r in recs if "observed" in r]
    if way == "folder":  # another model than the paper's: nothing held to the paper's numbers
        assert not checked, checked
    elif chapter != "book/llm_gsm8k":  # the paper's model: its rows checked with the paper's criteria
        assert checked and all(r["asserted"] for r in recs if "observed" in r), recs
