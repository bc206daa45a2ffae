"""CIFAR-10 and CIFAR-100 (Krizhevsky 2009) in their python-pickle release.

torchvision downloads and unpacks the archive (checking its md5). The extracted batch files are
then read by :func:`read_cifar_file` rather than by torchvision's dataset classes, which re-check
every file's md5 and refuse any other copy; this reader instead checks the expected file names
and the array shapes, so a user's own CIFAR-format files load too. The pickles are read with an
unpickler that only rebuilds numpy arrays, so a crafted file cannot run code.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from torch.utils.data import Dataset
from torchvision import datasets

from core.errors import InputError
from vision.data.datamodule import ImageDataModule, ImageSplits

# The only globals a pickled numpy array refers to, across pickle protocols and numpy versions.
SAFE_GLOBALS = {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("_codecs", "encode"),
}


class ArrayUnpickler(pickle.Unpickler):
    """An unpickler that rebuilds numpy arrays, lists, dicts and strings, and nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        """The global ``module.name`` if it is on the allow-list; anything else is refused."""
        if (module, name) not in SAFE_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}: CIFAR files hold only arrays")
        return super().find_class(module, name)


@dataclass(frozen=True)
class CifarLayout:
    """File names and keys of one CIFAR release inside ``root/folder``."""

    folder: str
    train_files: tuple[str, ...]
    test_files: tuple[str, ...]
    meta_file: str
    label_key: str
    names_key: str
    archive_url: str
    downloader: type[datasets.CIFAR10]


LAYOUTS = {
    "cifar10": CifarLayout(
        "cifar-10-batches-py",
        tuple(f"data_batch_{i}" for i in range(1, 6)),
        ("test_batch",),
        "batches.meta",
        "labels",
        "label_names",
        datasets.CIFAR10.url,
        datasets.CIFAR10,
    ),
    "cifar100": CifarLayout(
        "cifar-100-python",
        ("train",),
        ("test",),
        "meta",
        "fine_labels",
        "fine_label_names",
        datasets.CIFAR100.url,
        datasets.CIFAR100,
    ),
}


def read_cifar_file(path: Path) -> dict[str, Any]:
    """One pickled CIFAR file as a dict with string keys."""
    with open(path, "rb") as handle:
        try:
            content = ArrayUnpickler(handle, encoding="latin1").load()
        except (pickle.UnpicklingError, EOFError, ValueError) as error:
            raise InputError(
                f"{path} is not a CIFAR python-format file ({error}); replace it with the file of the release"
            ) from None
    if not isinstance(content, dict):
        raise InputError(
            f"{path} holds a {type(content).__name__}, not the dict of a CIFAR python-format file; replace it with "
            "the file of the release"
        )
    return content


def missing_files(root: Path, layout: CifarLayout) -> list[Path]:
    """The files of the release that are not under ``root``."""
    folder = root / layout.folder
    names = layout.train_files + layout.test_files + (layout.meta_file,)
    return [folder / name for name in names if not (folder / name).is_file()]


def read_cifar(root: Path, layout: CifarLayout, files: tuple[str, ...]) -> tuple[np.ndarray, list[int]]:
    """Images [N, 32, 32, 3] uint8 and labels of the given batch files."""
    images, labels = [], []
    for name in files:
        path = root / layout.folder / name
        batch = read_cifar_file(path)
        data = np.asarray(batch.get("data"))
        batch_labels = list(batch.get(layout.label_key, []))
        if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(batch_labels) != len(data):
            raise InputError(
                f"{path} does not hold CIFAR data: expected 'data' uint8 [N, 3072] and N "
                f"'{layout.label_key}', got {data.dtype} {list(data.shape)} and {len(batch_labels)} labels"
            )
        images.append(data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))  # (N, H, W, C)
        labels.extend(int(label) for label in batch_labels)
    return np.concatenate(images), labels


class ArrayImageDataset(Dataset):
    """Images held in memory as uint8 [N, H, W, C], returned as transformed PIL images."""

    def __init__(self, images: np.ndarray, labels: list[int], transform: Any) -> None:
        self.images = images
        self.labels = labels
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        return self.transform(Image.fromarray(self.images[index])), self.labels[index]


class CIFARDataModule(ImageDataModule):
    """CIFAR-10 or CIFAR-100: train/val split from the 50,000 training images (``val_size``),
    test = the official 10,000 test images.

    Args:
        dataset: ``cifar10`` or ``cifar100``.
        download: fetch the archive into ``root`` when the files are absent.
        **kwargs: :class:`ImageDataModule` arguments.
    """

    STATS = {
        "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
        "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    }

    def __init__(
        self,
        dataset: str = "cifar10",
        download: bool = True,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        **kwargs: Any,
    ) -> None:
        if dataset not in LAYOUTS:
            raise InputError(f"data.dataset={dataset!r} is not a CIFAR release; choose one of {sorted(LAYOUTS)}")
        dataset_mean, dataset_std = self.STATS[dataset]
        super().__init__(mean=dataset_mean if mean is None else mean, std=dataset_std if std is None else std, **kwargs)
        self.dataset = dataset
        self.layout = LAYOUTS[dataset]
        self.download = download

    def where_to_put(self) -> str:
        """How to get the files by hand: the archive URL and the folder to extract it into."""
        root = Path(self.root).resolve()
        return (
            f"download {self.layout.archive_url} and extract it into {root} (giving "
            f"{root / self.layout.folder}/{self.layout.train_files[0]} ...), or run once with internet access"
        )

    def prepare_data(self) -> None:
        """Download and extract the archive into ``root`` when its files are missing (a clear error
        when ``download`` is off or the download fails)."""
        root = Path(self.root)
        if not missing_files(root, self.layout):
            return
        if not self.download:
            raise InputError(
                f"{self.dataset} not found under {root.resolve()} and data.download=false; {self.where_to_put()}"
            )
        try:
            self.layout.downloader(str(root), train=True, download=True)
        except (OSError, RuntimeError) as error:
            raise InputError(
                f"{self.dataset} is not under {root.resolve()} and downloading it failed ({error}); "
                f"{self.where_to_put()}"
            ) from None

    def load_splits(self) -> ImageSplits:
        """The official training set (validation is held out of it) and the official test set."""
        root = Path(self.root)
        missing = missing_files(root, self.layout)
        if missing:
            raise InputError(
                f"{self.dataset} files missing under {root.resolve()}: {[str(p.name) for p in missing]}; "
                f"{self.where_to_put()}"
            )
        meta_path = root / self.layout.folder / self.layout.meta_file
        names = read_cifar_file(meta_path).get(self.layout.names_key)
        if names is None:
            raise InputError(
                f"{meta_path} has no '{self.layout.names_key}' (the class names); replace it with the file of the release"
            )
        class_names = [str(name) for name in names]
        images, labels = read_cifar(root, self.layout, self.layout.train_files)
        test_images, test_labels = read_cifar(root, self.layout, self.layout.test_files)
        low, high = min(labels + test_labels), max(labels + test_labels)
        if low < 0 or high >= len(class_names):
            raise InputError(
                f"{self.dataset} labels under {root.resolve()} go from {low} to {high} but {self.layout.meta_file} "
                f"names {len(class_names)} classes (labels 0 to {len(class_names) - 1}); the files are inconsistent"
            )
        return ImageSplits(
            train=ArrayImageDataset(images, labels, self.train_tf),
            train_plain=ArrayImageDataset(images, labels, self.eval_tf),
            val=None,
            test=ArrayImageDataset(test_images, test_labels, self.eval_tf),
            class_names=class_names,
        )
