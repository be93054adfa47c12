"""Benchmarks of the LLM pipeline (issue: speed of companion.llm), on a model built from a config.

Times, on the current machine, with the real GPT-2 tokenizer and 100 IOI prompts:
  1. next-token log-probabilities: one padded batch vs one prompt at a time;
  2. a 14-value rho sweep of one MLP input matrix: one SVD reused vs one SVD per rho.
The model is a GPT-2-architecture model (``--layers``, ``--d``; default 12 layers, d = 768, the
sizes of GPT-2 Small, randomly initialised: the timings do not depend on the weights).

Writes benchmarks/results/llm_<machine>.json (atomically) and prints it.
Usage: python benchmarks/bench_llm.py [--device cuda] [--layers 12 --d 768]
"""

from __future__ import annotations

import argparse
import json
import time

# the same timing rule as the recall benchmark (scripts run from benchmarks/)
import results_file
import torch
from bench_recall import best_of

from companion import config
from companion.data import tokenizer
from companion.llm import laser, measure, prompts
from companion.truncation import LowRank


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default=None)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    from transformers import GPT2Config, GPT2LMHeadModel

    device = config.get_device(args.device)
    tok = tokenizer.gpt2_tokenizer()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=args.layers, n_embd=args.d, n_head=max(1, args.d // 64))).to(
        device
    )
    model.eval()
    texts = [p.prompt for p in prompts.ioi_prompts(tok, n=100)]
    enc = measure.encode(tok, texts)
    out = {
        "device": config.device_name(device),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "model": f"GPT-2 architecture, {args.layers} layers, d = {args.d} (random weights)",
        "prompts": len(texts),
    }

    out["batched_100_prompts_s"] = best_of(
        lambda: measure.next_token_logprobs(model, encoded=enc, batch_size=100), args.repeats
    )
    out["one_by_one_100_prompts_s"] = best_of(
        lambda: [measure.next_token_logprobs(model, tok, [t]) for t in texts], 1
    )
    out["batched_speedup"] = out["one_by_one_100_prompts_s"] / out["batched_100_prompts_s"]

    rhos = [0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    layer = args.layers
    one_svd = best_of(lambda: [None for _ in laser.sweep(model, layer, "mlp_in", rhos)], args.repeats)
    target = laser.resolve(model, layer, "mlp_in")
    per_rho = best_of(lambda: [LowRank(target.param.detach().float()).approx(r) for r in rhos], args.repeats)
    out["sweep_one_svd_s"] = one_svd
    out["sweep_svd_per_rho_s"] = per_rho
    print(json.dumps(out, indent=1))
    path = results_file.path(out["device"], prefix="llm_")
    results_file.write(path, out)
    print(path)


if __name__ == "__main__":
    main()
