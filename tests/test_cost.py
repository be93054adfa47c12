"""The FLOP count of companion.cost against torch's own counter (every matmul, forward and backward)."""

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from companion import cost
from companion.data.recall import RecallTask
from companion.models import ModelConfig, Transformer
from companion.train import batch_loss


@pytest.mark.parametrize("ff,loss_on", [(("mlp", "mlp"), "final"), (("mlp", "linear"), "triggers"),
                                        (("none", "mlp", "mlp"), "final"), (("linear",), "triggers")])
def test_train_step_flops_match_torch(ff, loss_on):
    task = RecallTask(seq_len=16, alpha=0.5, loss_on=loss_on)
    cfg = ModelConfig(task.vocab_size, d=24, max_len=16, ff=ff)
    model = Transformer(cfg)
    batch = task.sample(np.random.default_rng(0), 8)
    last_only = loss_on == "final"
    with FlopCounterMode(display=False) as fwd:
        loss = batch_loss(model, batch, torch.device("cpu"))
    with FlopCounterMode(display=False) as bwd:
        loss.backward()
    assert fwd.get_total_flops() == cost.forward_flops(cfg, 8, 16, last_only)
    assert fwd.get_total_flops() + bwd.get_total_flops() == cost.train_step_flops(cfg, 8, 16, last_only)


def test_bad_input():
    cfg = ModelConfig(66, d=8, max_len=16)
    with pytest.raises(ValueError, match="seq_len \\(T\\)=32 is out of range"):
        cost.forward_flops(cfg, 1, 32, True)
    with pytest.raises(ValueError, match="utilisation=0 is out of range"):
        cost.seconds(1.0, 1.0, 0)
