"""Training throughput (images or tokens per second of training time, loading included) as a Lightning callback."""

from __future__ import annotations

from time import perf_counter
from typing import Any

import lightning.pytorch as pl
import torch

# Batches of a fit left out of the rate once later ones are timed (one-off costs).
SKIP_BATCHES = 3


class TrainThroughput(pl.Callback):
    """Measures items per second over the wall time of training batches, loading included: each
    batch is timed from the end of the one before (or from the start of the epoch, or the end of
    a validation) to its own end, so a loader that cannot keep up lowers the rate as it lowers a
    plain loop's; validation and the time between epochs are left out. Checkpoint writes are
    counted: Lightning runs the checkpoint callbacks after every other callback's hook, so no
    hook marks their end.

    The LightningModule names its unit in ``throughput_unit`` (``"samples"`` or ``"tokens"``)
    and counts a batch with ``count_items(batch)``. The first ``skip_batches`` batches of a fit
    carry one-off costs (``torch.compile``, cuDNN autotuning, allocator growth, the loader's
    workers starting) and are left out once later batches have been timed. The running rate,
    multiplied by the number of processes, is logged as ``train/<unit>_per_second`` at the end of
    each training epoch.
    """

    def __init__(self, skip_batches: int = SKIP_BATCHES) -> None:
        self.skip_batches = skip_batches
        self.batches = 0
        self.items = [0, 0]  # [skipped batches, steady batches]
        self.seconds = [0.0, 0.0]
        self._start = 0.0

    def _sync(self, pl_module: pl.LightningModule) -> None:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)

    def _restart(self, pl_module: pl.LightningModule) -> None:
        self._sync(pl_module)
        self._start = perf_counter()

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._restart(pl_module)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._restart(pl_module)

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self._sync(pl_module)
        now = perf_counter()
        steady = int(self.batches >= self.skip_batches)
        self.seconds[steady] += now - self._start
        self.items[steady] += int(pl_module.count_items(batch))
        self.batches += 1
        self._start = now

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        steady = self.seconds[1] > 0
        items = self.items[1] if steady else sum(self.items)
        seconds = self.seconds[1] if steady else sum(self.seconds)
        if seconds > 0:
            rate = items * trainer.world_size / seconds
            pl_module.log(f"train/{pl_module.throughput_unit}_per_second", rate, rank_zero_only=True)
