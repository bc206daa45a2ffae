"""The part every image datamodule shares: transforms, the held-out validation split, loaders and
what the LightningModule needs to know about the data."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from lightning.pytorch import Trainer
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Subset

from core.constraints import AUTO, NON_NEGATIVE_INT, POSITIVE_INT, optional, or_auto
from core.errors import InputError
from core.data.resumable import ShuffledBatchSampler
from core.training.data.budgeted import BudgetedDataModule
from vision.data.batch_augment import BatchAugment
from vision.data.batch_size import EVAL_BATCH, MAX_PER_PROCESS, auto_batch_size
from vision.constraints import AUGMENT_ON, augment_place, require_pad_crop
from vision.recipe import FULL_POLICY, Regularization, crop_for
from vision.data.transforms import SharedValue, eval_transform, train_transform, uint8_transform

log = logging.getLogger(__name__)

MAX_WORKERS = 8  # loader processes started by default: enough to feed one GPU with small images


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask under taskset, cgroups or SLURM)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


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
        raise InputError(
            f"data.val_size={val_size} leaves no training or no validation images out of {length}; "
            "choose a count between 1 and the training set size, or a fraction in (0, 1)"
        )
    order = torch.randperm(length, generator=torch.Generator().manual_seed(seed)).tolist()
    return order[count:], order[:count]


class ImageDataModule(BudgetedDataModule):
    """Base class of the image datamodules; subclasses implement :meth:`load_splits`.

    Args:
        root: where the data lives (or is downloaded to).
        img_size: side the images are resized to (the model's ``img_size``).
        batch_size: images per training batch (per device), or ``auto``: sized from the run's
            budget by :func:`vision.data.batch_size.auto_batch_size` (evaluation then uses
            :data:`vision.data.batch_size.EVAL_BATCH`).
        num_workers: loader worker processes; None: the usable CPUs (shared by the processes of
            one machine, at most ``MAX_WORKERS``).
        pin_memory: page-locked batches for faster host-to-GPU copies; None: when training on a
            GPU.
        persistent_workers: keep workers alive across epochs (when ``num_workers > 0``).
        val_size: validation images held out of the training set when the source has no
            validation split (a count or a fraction).
        split_seed: seed of that split.
        seed: seed of the training order (each epoch's shuffling; the run's ``seed``).
        mean, std: normalization statistics; None uses the class's ``MEAN`` / ``STD``
            (ImageNet statistics unless a subclass knows its data's own).
        crop, auto_augment, re_prob, hflip, interpolation: training augmentation, see
            :func:`vision.data.transforms.train_transform`. ``auto`` (the default) takes the crop
            from the image size and sizes RandAugment (:data:`vision.recipe.FULL_POLICY` scaled)
            and random erasing to the run's length (:mod:`vision.recipe`).
        augment_on: where the training augmentation runs. ``loader``: every step in the loader
            workers (:func:`vision.data.transforms.train_transform`). ``device``: the workers only
            resize (and apply RandAugment when on) and hand over uint8 images; crop, flip,
            normalization and random erasing run on the whole batch where it trains
            (:class:`vision.data.batch_augment.BatchAugment`, in :meth:`on_after_batch_transfer`),
            which takes that work off the loader (Pad-and-crop only). ``auto`` (the default): the
            device with the pad crop, the loader with the random resized crop. A training loop
            of one's own applies ``batch_augment`` to the batches of ``train_dataloader()`` when
            it is set.
    """

    MEAN: tuple[float, float, float] = (0.485, 0.456, 0.406)
    STD: tuple[float, float, float] = (0.229, 0.224, 0.225)
    EVAL_CROP_PCT = 1.0  # evaluation sees the whole image: the crop only trims the longer side

    def __init__(
        self,
        root: str = "data",
        img_size: int = 32,
        batch_size: int | str = 128,
        num_workers: int | None = None,
        pin_memory: bool | None = None,
        persistent_workers: bool = True,
        val_size: int | float = 0.1,
        split_seed: int = 0,
        seed: int = 0,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        crop: str = AUTO,
        auto_augment: str | None = AUTO,
        re_prob: float | str = AUTO,
        hflip: float = 0.5,
        interpolation: str = "bicubic",
        augment_on: str = AUTO,
    ) -> None:
        or_auto(POSITIVE_INT).require(batch_size, "data.batch_size")
        AUGMENT_ON.require(augment_on, "data.augment_on", InputError)
        optional(NON_NEGATIVE_INT).require(num_workers, "data.num_workers")  # null: the usable CPUs
        self.root = root
        self.img_size = img_size
        super().__init__(batch_size, "train_batch_size", MAX_PER_PROCESS)
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.persistent_workers = persistent_workers
        self.val_size = val_size
        self.split_seed = split_seed
        self.seed = seed
        self.mean = [float(v) for v in (self.MEAN if mean is None else mean)]
        self.std = [float(v) for v in (self.STD if std is None else std)]
        self.interpolation = interpolation
        # Auto strengths live in shared memory, so loader workers follow apply_regularization.
        self.augment_strength = SharedValue() if auto_augment == AUTO else None
        self.erasing = SharedValue() if re_prob == AUTO else None
        crop = crop_for(img_size) if crop == AUTO else crop
        policy = FULL_POLICY if auto_augment == AUTO else auto_augment
        erasing = re_prob if self.erasing is None else self.erasing
        augment_on = augment_place(augment_on, crop)  # auto -> device with the pad crop
        self.batch_augment: BatchAugment | None = None  # the device's share, when it augments
        require_pad_crop(crop, augment_on, error=InputError)
        self.crop = crop
        if augment_on == "device":
            self.train_tf = uint8_transform(img_size, self.mean, policy, interpolation, self.augment_strength)
            self.batch_augment = BatchAugment(img_size, self.mean, self.std, hflip, erasing)
        else:
            self.train_tf = train_transform(
                img_size, self.mean, self.std, crop, policy, erasing, hflip, interpolation, self.augment_strength
            )
        self.eval_tf = eval_transform(**self.eval_data_config())
        self.train_set: Dataset | None = None
        self.train_plain_set: Dataset | None = None  # the training images with evaluation preprocessing
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
            self.train_plain_set = Subset(splits.train_plain, train_idx)
            self.val_set = Subset(splits.train_plain, val_idx)
        else:
            self.train_set, self.train_plain_set, self.val_set = splits.train, splits.train_plain, splits.val
        self.test_set = splits.test
        if self.batch_size != AUTO and len(self.train_set) < self.batch_size:
            raise InputError(
                f"{len(self.train_set)} training images are fewer than data.batch_size={self.batch_size}, "
                "so no full batch can be formed; lower data.batch_size"
            )

    def eval_data_config(self) -> dict[str, Any]:
        """The evaluation preprocessing as plain data: the arguments of
        :func:`vision.data.transforms.eval_transform` that build ``self.eval_tf``. Checkpoints keep it,
        so prediction, evaluation and export preprocess exactly as validation and testing did."""
        size = self.img_size
        return {
            "img_size": [int(side) for side in size] if isinstance(size, Sequence) else int(size),
            "interpolation": self.interpolation,
            "crop_pct": self.EVAL_CROP_PCT,
            "mean": list(self.mean),
            "std": list(self.std),
        }

    def module_kwargs(self) -> dict[str, Any]:
        """What the classifier needs from the data, as plain types (stored in checkpoints): the
        classes and the evaluation data config."""
        return {"num_classes": len(self.class_names), "class_names": list(self.class_names), **self.eval_data_config()}

    def apply_regularization(self, settings: Regularization) -> None:
        """Take the RandAugment strength and random-erasing probability of ``settings`` for the
        values that are ``auto``; running loader workers see them on their next image."""
        if self.augment_strength is not None:
            self.augment_strength.set(settings.rand_augment)
        if self.erasing is not None:
            self.erasing.set(settings.re_prob)

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """When the device augments (``augment_on`` device, or auto with the pad crop), augment each
        training batch where it arrived (uint8 images -> augmented, normalized float images) in the
        trainer's input precision; evaluation batches pass unchanged."""
        if self.batch_augment is None or self.trainer is None or not self.trainer.training:
            return batch
        images, targets = batch
        # The trainer converted floating inputs to its precision before the transfer, when the
        # images were still uint8.
        return self.trainer.precision_plugin.convert_input((self.batch_augment(images), targets))

    def workers(self) -> int:
        """Loader processes: ``num_workers``, or the usable CPUs shared by this machine's training
        processes (at most ``MAX_WORKERS``)."""
        if self.num_workers is not None:
            return self.num_workers
        processes = self.trainer.num_devices if self.trainer is not None else 1
        return max(1, min(MAX_WORKERS, usable_cpus() // processes))

    def pins_memory(self) -> bool:
        """``pin_memory``, or whether the batches go to a GPU."""
        if self.pin_memory is not None:
            return self.pin_memory
        if self.trainer is not None:
            return self.trainer.strategy.root_device.type == "cuda"
        return torch.cuda.is_available()

    def loader(self, dataset: Dataset, train: bool) -> DataLoader:
        """A loader over ``dataset``, sharded over the data-parallel processes. ``train``: a
        seeded shuffle of full batches per epoch that a run resumed mid-epoch continues exactly
        (:mod:`core.data.resumable`); otherwise in order (``DistributedSampler`` under DDP,
        which pads the last shard by repeating images, as Lightning does)."""
        world_size, rank = self.shards()
        workers = self.workers()
        options: dict[str, Any] = dict(
            num_workers=workers,
            pin_memory=self.pins_memory(),
            persistent_workers=self.persistent_workers and workers > 0,
        )
        if train:
            # Full batches only: Mixup/CutMix pairs each image with another of the same batch.
            batches = ShuffledBatchSampler(
                len(dataset), self.train_batch_size(), drop_last=True, seed=self.seed, num_replicas=world_size, rank=rank
            )
            return self.training_loader(dataset, batch_sampler=batches, **options)
        sampler = DistributedSampler(dataset, world_size, rank, shuffle=False) if world_size > 1 else None
        eval_batch = EVAL_BATCH if self.batch_size == AUTO else self.batch_size
        return DataLoader(dataset, batch_size=eval_batch, sampler=sampler, **options)

    def choose_train_batch(self, trainer: Trainer) -> int:
        """The choice of :func:`vision.data.batch_size.auto_batch_size` for ``trainer``'s budget."""
        assert self.train_set is not None
        return auto_batch_size(trainer, trainer.lightning_module, len(self.train_set), self.img_size)

    def train_dataloader(self) -> DataLoader:
        """Shuffled full batches of the training split."""
        return self.loader(self.train_set, train=True)

    def evaluation_dataloader(self, split: str) -> DataLoader:
        """``split`` (``train``, ``val`` or ``test``) in order with evaluation preprocessing: the
        training images without augmentation for ``train``."""
        if split == "train":
            return self.loader(self.train_plain_set, train=False)
        return getattr(self, f"{split}_dataloader")()

    def val_dataloader(self) -> DataLoader:
        """The validation split in order."""
        return self.loader(self.val_set, train=False)

    def test_dataloader(self) -> DataLoader:
        """The test split in order, or the validation split (with a warning) when there is none."""
        if self.test_set is None:
            log.warning("%s has no test split; testing on the validation split", type(self).__name__)
            return self.val_dataloader()
        return self.loader(self.test_set, train=False)
