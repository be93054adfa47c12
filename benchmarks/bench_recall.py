"""Benchmarks of the core experiment (issue: speed targets of the noisy-recall chapter).

Times, on the current machine:
  1. data generation, tokens per second on one CPU core (target >= 5e6);
  2. one training step at the full configuration (d = T = 256, batch 512);
  3. a 20-value rho sweep on U_in of F2 relative to one evaluation (target <= 3x);
  4. one evaluation (the full profile's test sets) against one training step, and the share of a
     full-profile run's time spent evaluating (target <= 20%), at d = T = 128 and at the full sizes;
  5. optionally (--full-run) the full-profile Fig. 3 run: 2000 steps with the rho grid
     evaluated every 50 steps (target < 3 minutes on one H100).

Writes benchmarks/results/<machine>.json (atomically) and prints it.
Usage: python benchmarks/bench_recall.py [--device cuda] [--full-run]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import results_file
import torch

from companion import config, probes
from companion.data.recall import RecallTask
from companion.experiments import noisy_recall
from companion.models import ModelConfig, Transformer
from companion.train import TrainConfig, batch_loss, eval_schedule, make_optimizer


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default=None)
    ap.add_argument("--full-run", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    device = config.get_device(args.device)
    name = config.device_name(device)
    out = {"device": name, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d")}

    task = RecallTask(seq_len=256, alpha=0.5)
    rng = np.random.default_rng(0)
    task.sample(rng, 512)
    dt = best_of(lambda: task.sample(rng, 512), args.repeats + 2)
    out["data_tokens_per_s_one_core"] = 512 * 256 / dt

    model = Transformer(ModelConfig(task.vocab_size, d=256, max_len=256)).to(device)
    opt = make_optimizer(model, TrainConfig(steps=1))
    batch = task.sample(rng, 512)

    def step():
        loss = batch_loss(model, batch, device)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sync(device)

    step()
    out["train_step_s_full_config"] = best_of(step, args.repeats)

    clean = task.with_alpha(0.0).sample(rng, 512)
    tokens = torch.as_tensor(clean.inputs, device=device)
    correct = torch.as_tensor(clean.final_ybar, device=device)
    rhos = list(np.linspace(0, 1, 20))

    def one_eval():
        with torch.no_grad():
            probes.final_position_metrics(model(tokens, last_only=True), correct, task.noise_token)
        sync(device)

    def sweep():
        probes.rho_sweep(model, tokens, correct, task.noise_token, "F2.U_in", rhos)
        sync(device)

    one_eval(), sweep()
    t_eval, t_sweep = best_of(one_eval, args.repeats), best_of(sweep, args.repeats)
    out["eval_s_512_sequences"] = t_eval
    out["rho_sweep_20_s"] = t_sweep
    out["rho_sweep_over_eval"] = t_sweep / t_eval

    # Evaluation overhead of a full-profile run: one evaluation (noisy_recall.Evaluator, the full profile's
    # 2048 clean + 2048 noisy test sequences) against one training step, at d = T = 128 and at the full sizes.
    for label, exp in (
        ("d128_T128", noisy_recall.RecallExperiment.full(d=128, seq_len=128)),
        ("full", noisy_recall.RecallExperiment.full()),
    ):
        m = Transformer(exp.model_config()).to(device)
        o = make_optimizer(m, exp.train_config(1))
        b = exp.task().sample(rng, exp.batch)
        ev = noisy_recall.Evaluator(exp, m, device)

        def train_step():
            loss = batch_loss(m, b, device)
            o.zero_grad()
            loss.backward()
            o.step()
            sync(device)

        def evaluation():
            ev(0)
            sync(device)

        train_step(), evaluation()
        t_step, t_ev = best_of(train_step, args.repeats), best_of(evaluation, args.repeats)
        n_evals = len(eval_schedule(exp.steps, exp.eval_every, exp.dense_until)) + 1
        out[f"eval_over_train_step_{label}"] = t_ev / t_step
        out[f"eval_share_of_full_run_{label}"] = n_evals * t_ev / (n_evals * t_ev + exp.steps * t_step)

    if args.full_run:
        exp = noisy_recall.RecallExperiment.full()
        t0 = time.perf_counter()
        noisy_recall.run(exp, device=device, progress=True, use_cache=False)
        out["full_fig3_run_s"] = time.perf_counter() - t0

    results_file.write(results_file.path(name), out)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
