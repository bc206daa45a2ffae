"""Training throughput (images or tokens per second of training-step time) as a Lightning callback."""

from __future__ import annotations

import time
from typing import Any

import lightning.pytorch as pl
import torch


class TrainThroughput(pl.Callback):
    """Measures items per second over the wall time of training batches only (no validation).

    The LightningModule names its unit in ``throughput_unit`` (``"samples"`` or ``"tokens"``)
    and counts a batch with ``count_items(batch)``. The running rate, multiplied by the number
    of processes, is logged as ``train/<unit>_per_second`` at the end of each training epoch.
    """

    def __init__(self) -> None:
        self.items = 0
        self.seconds = 0.0
        self._start = 0.0

    def _sync(self, pl_module: pl.LightningModule) -> None:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int) -> None:
        self._sync(pl_module)
        self._start = time.perf_counter()

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self._sync(pl_module)
        self.seconds += time.perf_counter() - self._start
        self.items += int(pl_module.count_items(batch))

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.seconds > 0:
            rate = self.items * trainer.world_size / self.seconds
            pl_module.log(f"train/{pl_module.throughput_unit}_per_second", rate, rank_zero_only=True)
