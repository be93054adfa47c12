"""The FLOP count of companion.cost against torch's own counter (every matmul, forward and backward)."""

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from companion import cost
from companion.data.recall import RecallTask
from companion.models import ModelConfig, Transformer
from companion.train import SPARSE_LOSS, batch_loss


@pytest.mark.parametrize(
    "ff,loss_on",
    [
        (("mlp", "mlp"), "final"),
        (("mlp", "linear"), "triggers"),
        (("none", "mlp", "mlp"), "final"),
        (("linear",), "triggers"),
    ],
)
def test_train_step_flops_match_torch(ff, loss_on):
    task = RecallTask(seq_len=16, alpha=0.5, loss_on=loss_on)
    cfg = ModelConfig(task.vocab_size, d=24, max_len=16, ff=ff)
    model = Transformer(cfg)
    batch = task.sample(np.random.default_rng(0), 8)
    last_only = loss_on == "final"
    counts = batch.loss_mask.sum(1)
    # a loss on trigger occurrences runs the rows that have one, and their last layer at the loss positions only
    rows, queries = (8, None) if last_only else (int((counts > 0).sum()), int(counts.max()))
    assert last_only or queries <= SPARSE_LOSS * 16  # the sparse path is the one measured
    with FlopCounterMode(display=False) as fwd:
        loss = batch_loss(model, batch, torch.device("cpu"))
    with FlopCounterMode(display=False) as bwd:
        loss.backward()
    assert fwd.get_total_flops() == cost.forward_flops(cfg, rows, 16, last_only, queries)
    assert fwd.get_total_flops() + bwd.get_total_flops() == cost.train_step_flops(
        cfg, rows, 16, last_only, queries
    )


def test_bad_input():
    cfg = ModelConfig(66, d=8, max_len=16)
    with pytest.raises(ValueError, match="seq_len \\(T\\)=32 is out of range"):
        cost.forward_flops(cfg, 1, 32, True)
    with pytest.raises(ValueError, match="utilisation=0 is out of range"):
        cost.seconds(1.0, 1.0, 0)


def test_benchmarks_and_measured_run_read_the_committed_results(tmp_path):
    """The committed H100 benchmark has a full run; a device without one is refused by name."""
    import json

    rows = cost.benchmarks()
    assert all(len(r) == len(cost.BENCHMARK_HEADER) for r in rows)
    h100 = cost.measured_run_seconds("NVIDIA H100 80GB HBM3")
    assert [r[-1] for r in rows if r[0] == "NVIDIA H100 80GB HBM3"] == [h100] and 0 < h100 < 3600
    (tmp_path / "x.json").write_text(json.dumps({"device": "dev A", "full_fig3_run_s": 12.5}))
    assert cost.measured_run_seconds("dev A", tmp_path) == 12.5
    with pytest.raises(ValueError, match=r"device 'dev B': recorded on \['dev A'\]"):
        cost.measured_run_seconds("dev B", tmp_path)
    a = cost.achieved(catalog_recall_full(), h100)
    assert a["flops_per_s"] * h100 == pytest.approx(cost.run_flops(catalog_recall_full())["total"])
    with pytest.raises(ValueError, match="seconds"):
        cost.achieved(catalog_recall_full(), 0.0)


def catalog_recall_full():
    from companion.experiments import catalog

    return catalog.recall("full")
