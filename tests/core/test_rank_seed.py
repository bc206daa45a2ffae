"""A single process keeps its random state when fitting starts (the DDP case, where each rank is
seeded apart, is tests/vision/test_ddp.py)."""

from __future__ import annotations

import random

import lightning.pytorch as pl
import numpy as np
import torch

from core.training.callbacks.rank_seed import SeedPerRank


def test_one_process_keeps_its_random_state() -> None:
    trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False)
    pl.seed_everything(3, verbose=False)
    torch.rand(5), random.random(), np.random.rand()  # a state other than the seed's
    states = torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy()
    SeedPerRank(seed=3).on_fit_start(trainer, pl.LightningModule())
    assert torch.equal(torch.get_rng_state(), states[0])
    assert random.getstate() == states[1]
    assert np.array_equal(np.random.get_state()[1], states[2])
