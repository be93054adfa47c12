"""The LLM chapters' real-weights branch, which CI never reaches through the Hub: each chapter executed with its
model variable (``COMPANION_GPT2``, ...) pointing at a tiny local model laid out as the chapter reads a real one
(a folder written by ``save_pretrained``; Pythia's with a ``step<N>/`` folder per checkpoint of the schedule the
chapter reads). The claims about the paper's models are then skipped with the reason that the chapter ran another
model, never asserted on a tiny model's numbers and never skipped as a stand-in's."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")
jupytext = pytest.importorskip("jupytext")
nbclient = pytest.importorskip("nbclient")

from companion import claims, config  # noqa: E402
from companion.data import tokenizer  # noqa: E402
from companion.llm.summaries import PYTHIA_REVISIONS  # noqa: E402

# chapter: (its model variable, the local folder it points at)
REAL_BRANCH = {
    "book/llm_gpt2_ioi": ("COMPANION_GPT2", "gpt2"),
    "book/llm_pythia": ("COMPANION_PYTHIA", "pythia"),
    "book/leading_terms_pythia": ("COMPANION_PYTHIA_LEADING", "pythia"),
    "book/llm_gsm8k": ("COMPANION_GSM8K_MODEL", "gpt2"),
}


@pytest.fixture(scope="module")
def local_models(tmp_path_factory):
    """A 4-layer GPT-2 and a folder of 4-layer GPT-NeoX checkpoints (one per revision, each its own weights),
    with the real GPT-2 tokenizer and room for GSM8K's 8-shot prompts."""
    import torch
    from transformers import AutoModelForCausalLM, GPT2Config, GPTNeoXConfig

    tok = tokenizer.gpt2_tokenizer(download=False)
    root = tmp_path_factory.mktemp("models")

    def save(cfg, folder, seed: int) -> None:
        torch.manual_seed(seed)
        AutoModelForCausalLM.from_config(cfg).save_pretrained(folder)
        tok.save_pretrained(folder)

    save(GPT2Config(n_layer=4, n_embd=16, n_head=2, vocab_size=len(tok), n_positions=2048), root / "gpt2", 0)
    neox = GPTNeoXConfig(
        num_hidden_layers=4, hidden_size=16, num_attention_heads=2, intermediate_size=64,
        vocab_size=len(tok), max_position_embeddings=2048,
    )  # fmt: skip
    for seed, revision in enumerate(PYTHIA_REVISIONS):
        save(neox, root / "pythia" / revision, seed)
    return root


@pytest.mark.parametrize("chapter", sorted(REAL_BRANCH))
def test_the_real_weights_branch_runs_on_a_local_model(chapter, local_models, tmp_path, monkeypatch):
    variable, folder = REAL_BRANCH[chapter]
    cache = tmp_path / "cache"
    for name, value in {variable: str(local_models / folder), "COMPANION_CACHE_DIR": str(cache)}.items():
        monkeypatch.setenv(name, value)  # the kernel inherits them
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("COMPANION_CHECKS", raising=False)
    nb = jupytext.read(config.REPO_ROOT / f"{chapter}.md")
    # raises CellExecutionError, with the cell and its traceback, where the branch breaks
    nbclient.NotebookClient(
        nb, timeout=600, resources={"metadata": {"path": str(config.REPO_ROOT / "book")}}
    ).execute()
    shown = [
        out["data"]["text/markdown"]
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if "text/markdown" in out.get("data", {})
    ]
    assert any(m.startswith(f"Real weights from the local folder **{folder}**") for m in shown), shown[:3]
    assert not any("Stand-in" in m for m in shown)
    assert not (cache / "llm").exists()  # no stand-in built
    rows = [c for c in claims.CLAIMS.values() if c.chapter == chapter and c.scale == "real"]
    assert rows
    for c in rows:
        rec = json.loads(claims.record_path(c.id, config.get_profile(), cache).read_text())
        assert "stand-in" not in rec["skipped"] and "observed" not in rec, rec
