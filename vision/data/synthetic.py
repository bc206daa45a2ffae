"""Random images with random labels (torchvision ``FakeData``), for smoke runs without any
download."""

from __future__ import annotations

from typing import Any

from torchvision.datasets import FakeData

from vision.data.datamodule import ImageDataModule, ImageSplits


class SyntheticDataModule(ImageDataModule):
    """Deterministic noise images: the same index always gives the same image and label.

    Args:
        num_classes: number of classes.
        train_size, val_size, test_size: images per split.
        **kwargs: :class:`ImageDataModule` arguments (``root`` is unused).
    """

    MEAN = (0.5, 0.5, 0.5)
    STD = (0.5, 0.5, 0.5)

    def __init__(
        self, num_classes: int = 10, train_size: int = 512, val_size: int = 128, test_size: int = 128, **kwargs: Any
    ) -> None:
        super().__init__(val_size=val_size, **kwargs)
        self.num_classes = num_classes
        self.sizes = {"train": train_size, "val": val_size, "test": test_size}

    def fake(self, split: str, transform: Any) -> FakeData:
        """The noise images of ``split``; each split draws from its own seed range."""
        offsets = {"train": 0, "val": 1_000_000, "test": 2_000_000}
        return FakeData(
            size=self.sizes[split],
            image_size=(3, self.img_size, self.img_size),
            num_classes=self.num_classes,
            transform=transform,
            random_offset=offsets[split],
        )

    def load_splits(self) -> ImageSplits:
        """Train, validation and test noise images, classes named ``class_<i>``."""
        return ImageSplits(
            train=self.fake("train", self.train_tf),
            train_plain=self.fake("train", self.eval_tf),
            val=self.fake("val", self.eval_tf),
            test=self.fake("test", self.eval_tf),
            class_names=[f"class_{index}" for index in range(self.num_classes)],
        )
