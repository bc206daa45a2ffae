"""A seed per process of a data-parallel run, once the model is built and synchronized."""

from __future__ import annotations

import lightning.pytorch as pl


class SeedPerRank(pl.Callback):
    """Seeds Python's, NumPy's and torch's global generators of each process from
    ``seed + global_rank`` when fitting starts, as timm's ``train.py`` does.

    The runner seeds every process alike, so that each builds the same initial weights. Fitting
    starts after the strategy has synchronized the model (DDP broadcasts rank 0's weights, FSDP
    shards them), and from then on the draws of each process should be its own: augmentation on
    the batch (crop offsets, flips, erased boxes, Mixup/CutMix), dropout and drop path would
    otherwise repeat the same draws on every rank for different samples. A single process keeps
    its random state untouched. Samplers and data splits take their own seeded generators and are
    not affected.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.world_size > 1:
            pl.seed_everything(self.seed + trainer.global_rank, workers=True, verbose=False)
