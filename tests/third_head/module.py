"""The third head's LightningModule: the members of ``core.training.head.HeadModule`` and the
usual Lightning steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor

import core
from tests.third_head.model import SentenceClassifier

Batch = tuple[Tensor, Tensor]


class SentenceModule(pl.LightningModule):
    """Cross-entropy training of a :class:`SentenceClassifier` with AdamW; logs loss and accuracy."""

    throughput_unit = "sentences"

    def __init__(self, model: dict[str, Any], vocab: list[str], num_classes: int, lr: float = 3e-3) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = SentenceClassifier(vocab_size=len(vocab) + 2, num_classes=num_classes, **model)

    def count_items(self, batch: Batch) -> int:
        """Sentences of a batch."""
        return batch[0].shape[0]

    def step(self, batch: Batch, stage: str) -> Tensor:
        """Loss and accuracy of a batch, logged as ``<stage>/loss`` and ``<stage>/acc``."""
        ids, labels = batch
        logits = self.net(ids)
        loss = F.cross_entropy(logits, labels)
        self.log(f"{stage}/loss", loss)
        self.log(f"{stage}/acc", (logits.argmax(-1) == labels).float().mean())
        return loss

    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        return self.step(batch, "train")

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        self.step(batch, "val")

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        self.step(batch, "test")

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)


def load_sentence_classifier(path: str | Path) -> SentenceModule:
    """The module of a training checkpoint, read as plain data."""
    return core.load_module(SentenceModule, path)
