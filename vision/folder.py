"""Any image classification folder: ``root/train/<class>/*``, plus ``root/val/<class>/*`` and/or
``root/test/<class>/*``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torchvision.datasets import ImageFolder
from torchvision.datasets.folder import IMG_EXTENSIONS

from vision.datamodule import ImageDataModule, ImageSplits


class FixedClassImageFolder(ImageFolder):
    """``ImageFolder`` with the class list of the training folder, so a label means the same class
    in every split even when a validation folder lacks some class."""

    def __init__(self, root: Path, classes: list[str], transform: Any) -> None:
        self.fixed_classes = classes
        super().__init__(str(root), transform=transform, allow_empty=True)

    def find_classes(self, directory: str) -> tuple[list[str], dict[str, int]]:
        """The fixed class list and its indices, whichever sub-folders ``directory`` holds."""
        return self.fixed_classes, {name: index for index, name in enumerate(self.fixed_classes)}


def is_image(path: Path) -> bool:
    """Whether ``path`` is a file with an image extension torchvision reads."""
    return path.is_file() and path.suffix.lower() in IMG_EXTENSIONS


def training_classes(train_dir: Path) -> list[str]:
    """Class names = the sub-folders of ``train_dir``; each must hold at least one image."""
    if not train_dir.is_dir():
        raise FileNotFoundError(
            f"no training folder {train_dir}; arrange the images as {train_dir}/<class>/<image> "
            "and pass the folder above it as data.root"
        )
    classes = sorted(entry.name for entry in train_dir.iterdir() if entry.is_dir())
    if not classes:
        raise ValueError(f"{train_dir} has no class sub-folders; put each class's images in {train_dir}/<class>/")
    empty = [name for name in classes if not any(is_image(path) for path in (train_dir / name).rglob("*"))]
    if empty:
        raise ValueError(
            f"class folders {empty} under {train_dir} contain no images (extensions {', '.join(IMG_EXTENSIONS)}); "
            "add images or remove the folders"
        )
    return classes


def split_folder(root: Path, split: str, classes: list[str], transform: Any) -> FixedClassImageFolder | None:
    """The ``root/split`` folder as a dataset labelled by ``classes``, or None if it is absent."""
    directory = root / split
    if not directory.is_dir():
        return None
    unknown = sorted(entry.name for entry in directory.iterdir() if entry.is_dir() and entry.name not in classes)
    if unknown:
        raise ValueError(
            f"{directory} has classes {unknown} that {root / 'train'} lacks; the splits must share classes"
        )
    dataset = FixedClassImageFolder(directory, classes, transform)
    if len(dataset) == 0:
        raise ValueError(f"{directory} holds no images; add images to {directory}/<class>/ or remove the folder")
    return dataset


class ImageFolderDataModule(ImageDataModule):
    """Images arranged by class in folders. Without ``val/``, a validation split is held out of
    ``train/`` (``val_size``); without ``test/``, testing uses the validation split.

    Takes the :class:`ImageDataModule` arguments; ``root`` is the folder holding ``train/``.
    """

    def load_splits(self) -> ImageSplits:
        """``train/``, and ``val/`` and ``test/`` where present, labelled by the training classes."""
        root = Path(self.root)
        classes = training_classes(root / "train")
        return ImageSplits(
            train=FixedClassImageFolder(root / "train", classes, self.train_tf),
            train_plain=FixedClassImageFolder(root / "train", classes, self.eval_tf),
            val=split_folder(root, "val", classes, self.eval_tf),
            test=split_folder(root, "test", classes, self.eval_tf),
            class_names=classes,
        )
