"""The part every image datamodule shares: transforms, the held-out validation split, loaders and
what the LightningModule needs to know about the data."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader, Dataset, Subset

from vision.transforms import eval_transform, train_transform

log = logging.getLogger(__name__)


@dataclass
class ImageSplits:
    """The datasets a source provides; ``train_plain`` holds the training images with evaluation
    preprocessing, from which a validation split is cut when the source has none."""

    train: Dataset
    train_plain: Dataset
    val: Dataset | None
    test: Dataset | None
    class_names: list[str]


def holdout_indices(length: int, val_size: int | float, seed: int) -> tuple[list[int], list[int]]:
    """A seeded random split of ``range(length)`` into (train, val) indices; ``val_size`` is a
    count or a fraction of ``length``."""
    count = round(val_size * length) if isinstance(val_size, float) else int(val_size)
    if not 0 < count < length:
        raise ValueError(
            f"data.val_size={val_size} leaves no training or no validation images out of {length}; "
            "choose a count between 1 and the training set size, or a fraction in (0, 1)"
        )
    order = torch.randperm(length, generator=torch.Generator().manual_seed(seed)).tolist()
    return order[count:], order[:count]


class ImageDataModule(LightningDataModule):
    """Base class of the image datamodules; subclasses implement :meth:`load_splits`.

    Args:
        root: where the data lives (or is downloaded to).
        img_size: side the images are resized to (the model's ``img_size``).
        batch_size: images per training batch (per device).
        num_workers: loader worker processes.
        pin_memory: page-locked batches for faster host-to-GPU copies.
        persistent_workers: keep workers alive across epochs (when ``num_workers > 0``).
        val_size: validation images held out of the training set when the source has no
            validation split (a count or a fraction).
        split_seed: seed of that split.
        mean, std: normalization statistics; None uses the class's ``MEAN`` / ``STD``
            (ImageNet statistics unless a subclass knows its data's own).
        crop, auto_augment, re_prob, hflip, interpolation: training augmentation, see
            :func:`vision.transforms.train_transform`.
    """

    MEAN: tuple[float, float, float] = (0.485, 0.456, 0.406)
    STD: tuple[float, float, float] = (0.229, 0.224, 0.225)

    def __init__(
        self,
        root: str = "data",
        img_size: int = 32,
        batch_size: int = 128,
        num_workers: int = 4,
        pin_memory: bool = True,
        persistent_workers: bool = True,
        val_size: int | float = 0.1,
        split_seed: int = 0,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        crop: str = "pad",
        auto_augment: str | None = "rand-m9-n2-mstd0.5-inc1",
        re_prob: float = 0.25,
        hflip: float = 0.5,
        interpolation: str = "bicubic",
    ) -> None:
        super().__init__()
        self.root = root
        self.img_size = img_size
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.persistent_workers = persistent_workers and num_workers > 0
        self.val_size = val_size
        self.split_seed = split_seed
        self.mean = [float(v) for v in (self.MEAN if mean is None else mean)]
        self.std = [float(v) for v in (self.STD if std is None else std)]
        self.train_tf = train_transform(
            img_size, self.mean, self.std, crop, auto_augment, re_prob, hflip, interpolation
        )
        self.eval_tf = eval_transform(img_size, self.mean, self.std, interpolation)
        self.train_set: Dataset | None = None
        self.val_set: Dataset | None = None
        self.test_set: Dataset | None = None
        self.class_names: list[str] = []

    def load_splits(self) -> ImageSplits:
        """Build the source's datasets with ``self.train_tf`` / ``self.eval_tf``."""
        raise NotImplementedError

    def setup(self, stage: str | None = None) -> None:
        """Load the splits once (later calls do nothing), holding out ``val_size`` training images
        when the source has no validation split."""
        if self.train_set is not None:
            return
        splits = self.load_splits()
        self.class_names = list(splits.class_names)
        if splits.val is None:
            train_idx, val_idx = holdout_indices(len(splits.train), self.val_size, self.split_seed)
            self.train_set = Subset(splits.train, train_idx)
            self.val_set = Subset(splits.train_plain, val_idx)
        else:
            self.train_set, self.val_set = splits.train, splits.val
        self.test_set = splits.test
        if len(self.train_set) < self.batch_size:
            raise ValueError(
                f"{len(self.train_set)} training images are fewer than data.batch_size={self.batch_size}, "
                "so no full batch can be formed; lower data.batch_size"
            )

    def module_kwargs(self) -> dict[str, Any]:
        """What the classifier needs from the data, as plain types (stored in checkpoints)."""
        return {
            "num_classes": len(self.class_names),
            "class_names": list(self.class_names),
            "mean": list(self.mean),
            "std": list(self.std),
        }

    def loader(self, dataset: Dataset, train: bool) -> DataLoader:
        """A loader over ``dataset``; ``train`` shuffles and drops the last partial batch."""
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            shuffle=train,
            # Full batches only: Mixup/CutMix pairs each image with another of the same batch.
            drop_last=train,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            persistent_workers=self.persistent_workers,
        )

    def train_dataloader(self) -> DataLoader:
        """Shuffled full batches of the training split."""
        return self.loader(self.train_set, train=True)

    def val_dataloader(self) -> DataLoader:
        """The validation split in order."""
        return self.loader(self.val_set, train=False)

    def test_dataloader(self) -> DataLoader:
        """The test split in order, or the validation split (with a warning) when there is none."""
        if self.test_set is None:
            log.warning("%s has no test split; testing on the validation split", type(self).__name__)
            return self.val_dataloader()
        return self.loader(self.test_set, train=False)
