"""A tiny sequence-classification task for exercising the shared runner through real Lightning:
is the sum of a random sequence's first feature positive?"""

from __future__ import annotations

import time
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

import core
from core.training.plan.budget import stepping_bound


class TinyClassifier(nn.Module):
    def __init__(self, in_dim: int, dim: int, depth: int, num_heads: int, num_classes: int) -> None:
        super().__init__()
        self.embed = nn.Linear(in_dim, dim)
        self.encoder = core.Encoder(dim, depth, num_heads, norm_first=True, mlp_ratio=2.0)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.encoder(self.embed(x)).mean(dim=1))


class TinyModule(pl.LightningModule):
    throughput_unit = "samples"

    def __init__(
        self, model: dict[str, Any], num_classes: int, lr: float = 3e-3, warmup_steps: int = 2, step_seconds: float = 0.0
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = TinyClassifier(num_classes=num_classes, **model)

    def count_items(self, batch: tuple[Tensor, Tensor]) -> int:
        return batch[0].shape[0]

    def _step(self, batch: tuple[Tensor, Tensor], stage: str) -> Tensor:
        x, y = batch
        logits = self.net(x)
        loss = F.cross_entropy(logits, y)
        self.log(f"{stage}/loss", loss, prog_bar=True, sync_dist=stage != "train")
        self.log(f"{stage}/acc", (logits.argmax(-1) == y).float().mean(), sync_dist=stage != "train")
        return loss

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        time.sleep(self.hparams.step_seconds)  # a steady step time for the time-budget tests
        return self._step(batch, "train")

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._step(batch, "val")

    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._step(batch, "test")

    def configure_optimizers(self) -> dict[str, Any]:
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
        schedule = core.warmup_cosine(optimizer, self.hparams.warmup_steps, stepping_bound(self.trainer))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


class TinyData(pl.LightningDataModule):
    def __init__(self, size: int = 64, length: int = 6, in_dim: int = 4, batch_size: int = 16) -> None:
        super().__init__()
        self.size, self.length, self.in_dim, self.batch_size = size, length, in_dim, batch_size
        self.splits: dict[str, TensorDataset] = {}

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        generator = torch.Generator().manual_seed(0)
        for split in ("train", "val", "test"):
            x = torch.randn(self.size, self.length, self.in_dim, generator=generator)
            self.splits[split] = TensorDataset(x, (x[:, :, 0].sum(dim=1) > 0).long())

    def module_kwargs(self) -> dict[str, Any]:
        return {"num_classes": 2}

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.splits["train"], batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.splits["val"], batch_size=self.batch_size)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.splits["test"], batch_size=self.batch_size)
