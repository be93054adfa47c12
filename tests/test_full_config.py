"""The paper-scale code path runs: every experiment's ``full`` configuration, one step and one evaluation on
the CPU, so that a crash, a shape error or a memory blow-up at paper scale shows here and not on a user's GPU.

Slow (half a minute to three minutes per configuration on 2 cores); CI runs it. Configurations that differ
only in the learning rate, the number of steps or the depth share one entry.
"""

import math

import numpy as np
import pytest
import torch

from companion.data.recall import BigramTask
from companion.experiments import catalog, noisy_recall
from companion.models import Transformer
from companion.train import TrainConfig, batch_loss, train

pytestmark = pytest.mark.slow
FULL = catalog.experiments("full")
# Synthetic IOI at the shallowest depth of each optimiser: deeper models repeat the same layer code (one
# evaluation of L = 7 takes six minutes on 2 cores; its memory grows linearly in L).
IOI_DEPTHS = {opt: min(L for (o, L) in catalog.ioi("full") if o == opt) for opt in ("sgd", "adam")}
SMOKE = [name for name in FULL if not name.startswith("synthetic_ioi/")] + \
        [f"synthetic_ioi/{opt} L={L}" for opt, L in IOI_DEPTHS.items()]


@pytest.mark.parametrize("name", SMOKE)
def test_full_recall_configuration_runs(name):
    exp = FULL[name]
    cpu = torch.device("cpu")
    model = Transformer(exp.model_config(), seed=exp.seed)
    evaluate = noisy_recall.Evaluator(exp, model, cpu)
    task = exp.task(alpha=0.0) if exp.schedule == "finetune" else exp.task()
    logs = train(model, task, exp.train_config(1), np.random.default_rng(0), progress=False)
    assert math.isfinite(logs[-1]["loss"])
    model.eval()
    row = evaluate(1)
    assert np.isfinite(row["clean_full_loss"]) and np.isfinite(row["noisy_loss"])
    if exp.truncate:
        assert row["clean_p_correct"].shape == (len(exp.rhos),)


def test_full_allocation_configuration_runs():
    exp = catalog.allocation_experiment("full")
    task = BigramTask(exp.seq_len)
    test_batch = task.sample(np.random.default_rng(1), exp.n_test)
    budget = max(exp.budgets)
    for f in (min(exp.mlp_fracs), max(exp.mlp_fracs)):  # the widest MLP and the widest attention
        model = Transformer(exp.model_config(budget, f), seed=exp.seed)
        tcfg = TrainConfig(steps=1, batch=exp.batch, lr=exp.lrs[0], momentum=exp.momentum)
        logs = train(model, task, tcfg, np.random.default_rng(0), progress=False)
        with torch.no_grad():
            assert math.isfinite(logs[-1]["loss"]) and math.isfinite(batch_loss(model.eval(), test_batch,
                                                                                torch.device("cpu")).item())
