"""The pace probe of the batch rules times training passes and leaves the module as it found it."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch import nn

from core.training.plan.batch_rule import measure_pace


def test_the_pace_probe_leaves_the_statistics_the_random_state_and_the_gradients_as_they_were() -> None:
    module = pl.LightningModule()
    module.net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5))
    module.train()
    inputs = 5 * torch.randn(16, 4) + 3  # far from the fresh statistics (mean 0, variance 1)
    buffers = {name: buffer.clone() for name, buffer in module.named_buffers()}
    random_state = torch.get_rng_state()
    trainer = pl.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False)
    pace = measure_pace(module, trainer, lambda: module.net(inputs).square().mean(), items=16)
    assert pace > 0
    for name, buffer in module.named_buffers():
        assert torch.equal(buffer, buffers[name]), name
    assert torch.equal(torch.get_rng_state(), random_state)
    assert all(parameter.grad is None for parameter in module.parameters())
