"""Offline stand-ins for the paper's language models (clearly not them).

Without the Hugging Face Hub there are no GPT-2, Pythia, Phi-3 or Llama
weights here. A stand-in is a small model of the same *family* (GPT-2 or
GPT-NeoX, the Pythia architecture) built from a config with the real GPT-2
tokenizer (``$COMPANION_DATA_DIR/gpt2-tokenizer``), trained briefly on the
WikiText-2 validation text, with checkpoints saved along training under
``step{N}`` folders like Pythia's branches. It is saved with
``save_pretrained`` and loaded back with the same
:func:`companion.llm.hub.load` call a real model goes through, so every line
of a chapter runs; its numbers are a stand-in's, never the paper's models'.

Pythia uses its own (GPT-NeoX) tokenizer, which is not available offline; the
GPT-NeoX stand-in uses the GPT-2 tokenizer instead.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from companion import cache, config, train
from companion.config import check_choice, check_int
from companion.data import sources
from companion.data.tokenizer import gpt2_tokenizer
from companion.llm import hub

FAMILIES = ("gpt2", "gpt_neox")


@dataclass(frozen=True)
class StandIn:
    """Size and training of a stand-in; ``checkpoints`` are the saved steps (Pythia-like schedule)."""

    family: str = "gpt_neox"
    n_layer: int = 4
    d: int = 64
    n_head: int = 4
    ctx: int = 64  # training window
    max_positions: int = 1024  # the model's context (GSM8K prompts are long; untrained beyond ctx)
    batch: int = 8
    steps: int = 256
    lr: float = 3e-3
    checkpoints: tuple[int, ...] = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256)
    seed: int = 0

    def __post_init__(self):
        config.check_int("seed", self.seed, low=0)
        check_choice("stand-in family", self.family, FAMILIES)
        check_int("n_layer", self.n_layer, low=1)
        check_int("steps", self.steps, low=0)
        for s in self.checkpoints:
            check_int("checkpoint step", s, low=0, high=self.steps)
        if self.d % self.n_head:
            raise ValueError(f"d={self.d} must be a multiple of n_head={self.n_head}")

    def model_config(self, vocab_size: int, eos: int):
        if self.family == "gpt2":
            from transformers import GPT2Config

            return GPT2Config(
                vocab_size=vocab_size,
                n_positions=self.max_positions,
                n_embd=self.d,
                n_layer=self.n_layer,
                n_head=self.n_head,
                bos_token_id=eos,
                eos_token_id=eos,
            )
        from transformers import GPTNeoXConfig

        return GPTNeoXConfig(
            vocab_size=vocab_size,
            max_position_embeddings=self.max_positions,
            hidden_size=self.d,
            num_hidden_layers=self.n_layer,
            num_attention_heads=self.n_head,
            intermediate_size=4 * self.d,
            bos_token_id=eos,
            eos_token_id=eos,
        )

    def key(self) -> str:
        """The config, this module's source and the transformers version (not the whole package:
        unrelated changes do not retrain the stand-ins)."""
        import transformers

        settings = {**dataclasses.asdict(self), "transformers": transformers.__version__}
        return cache.key(settings, ("companion.llm.standin",), length=16)

    def revisions(self) -> list[str]:
        return [f"step{s}" for s in self.checkpoints]


def build(spec: StandIn = StandIn(), progress: bool = True) -> Path:
    """Train the stand-in (or find it cached); return the folder holding ``step{N}`` checkpoints."""
    out = config.cache_dir() / "llm" / f"standin-{spec.family}-{spec.key()}"
    if (out / "done.json").is_file():
        return out
    from transformers import AutoModelForCausalLM

    tok = gpt2_tokenizer()
    text = sources.fetch("wikitext2_valid").read_text(encoding="utf-8")
    ids = np.asarray(tok.encode(text), dtype=np.int64)
    streams = config.seed_streams(spec.seed, ["standin-init", "standin-data"])
    torch.manual_seed(int(streams["standin-init"].generate_state(1)[0]))
    model = AutoModelForCausalLM.from_config(spec.model_config(len(tok), tok.eos_token_id))
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0)
    rng = np.random.default_rng(streams["standin-data"])
    tmp = Path(tempfile.mkdtemp(dir=out.parent if out.parent.exists() else None))
    out.parent.mkdir(parents=True, exist_ok=True)

    def save(step: int) -> None:
        if step in spec.checkpoints:
            model.save_pretrained(tmp / f"step{step}")
            tok.save_pretrained(tmp / f"step{step}")

    def loss_at(step: int) -> torch.Tensor:
        starts = rng.integers(0, len(ids) - spec.ctx - 1, size=spec.batch)
        batch = torch.as_tensor(np.stack([ids[s : s + spec.ctx] for s in starts]))
        return model(input_ids=batch, labels=batch).loss

    with hub.quiet_loading():  # no transformers bar while the checkpoints are written
        try:
            model.train()
            fitted = train.fit(
                None, opt, spec.steps, loss_at, evaluate=save, eval_at=spec.checkpoints, nonfinite="continue",
                progress=progress, desc=f"stand-in {spec.family}",
            )  # fmt: skip
            losses = fitted.losses.tolist()
            (tmp / "done.json").write_text(
                json.dumps(
                    {
                        "spec": dataclasses.asdict(spec),
                        "losses": losses,
                        "seconds": fitted.seconds,
                        "tokens": int(len(ids)),
                    }
                )
            )
            if not out.exists():
                tmp.rename(out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def info(folder: Path) -> dict:
    return json.loads((Path(folder) / "done.json").read_text())
