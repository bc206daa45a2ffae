"""The toy corpus's sentences labelled by side (0: source, 1: target), as word ids."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from nlp.data.toy_corpus import TOY_PAIRS

PAD, UNKNOWN = 0, 1  # word ids 2, 3, ... are the vocabulary's words


def encode(sentences: list[str], vocab: list[str]) -> torch.Tensor:
    """Word ids [N, longest sentence], padded with :data:`PAD`."""
    index = {word: position + 2 for position, word in enumerate(vocab)}
    rows = [[index.get(word, UNKNOWN) for word in sentence.split()] for sentence in sentences]
    ids = torch.full((len(rows), max(map(len, rows))), PAD)
    for row, words in enumerate(rows):
        ids[row, : len(words)] = torch.tensor(words)
    return ids


class SentenceData(pl.LightningDataModule):
    """Every toy sentence with its side: ``repeat`` times shuffled for training, once for
    validation and test."""

    def __init__(self, repeat: int = 8, batch_size: int = 8) -> None:
        super().__init__()
        self.repeat, self.batch_size = repeat, batch_size
        sentences = [sentence for pair in TOY_PAIRS for sentence in pair]
        self.vocab = sorted({word for sentence in sentences for word in sentence.split()})
        self.splits = TensorDataset(encode(sentences, self.vocab), torch.tensor([0, 1] * len(TOY_PAIRS)))

    def module_kwargs(self) -> dict[str, Any]:
        """The vocabulary and the number of classes, which the checkpoint keeps."""
        return {"vocab": self.vocab, "num_classes": 2}

    def train_dataloader(self) -> DataLoader:
        return DataLoader(torch.utils.data.ConcatDataset([self.splits] * self.repeat), batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.splits, batch_size=self.batch_size)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.splits, batch_size=self.batch_size)
