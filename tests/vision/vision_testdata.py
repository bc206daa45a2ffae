"""Tiny data on disk and a tiny ViT configuration shared by the vision tests."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from vision.module import ImageClassifier

CONF = Path(__file__).resolve().parents[2] / "conf"

# A ViT small enough to train in seconds on a CPU: 16px images, patch 4 -> a 4x4 grid.
TINY_MODEL = [
    "model.img_size=16",
    "model.patch_size=4",
    "model.dim=32",
    "model.depth=2",
    "model.num_heads=2",
    "model.drop_path=0.0",
]


def tiny_model_kwargs(**overrides: object) -> dict:
    """The same tiny model as constructor arguments."""
    kwargs = dict(img_size=16, patch_size=4, dim=32, depth=2, num_heads=2, mlp_ratio=2.0, drop_path=0.0)
    kwargs.update(overrides)
    return kwargs


def write_cifar(root: Path, dataset: str, per_file: int = 4, seed: int = 0, protocol: int = 2) -> dict:
    """CIFAR python-format files with random images under ``root``; returns what was written."""
    rng = np.random.default_rng(seed)
    if dataset == "cifar10":
        folder = root / "cifar-10-batches-py"
        train_files, test_files = [f"data_batch_{i}" for i in range(1, 6)], ["test_batch"]
        meta_file, label_key, names_key, num_classes = "batches.meta", "labels", "label_names", 10
    else:
        folder, train_files, test_files = root / "cifar-100-python", ["train"], ["test"]
        meta_file, label_key, names_key, num_classes = "meta", "fine_labels", "fine_label_names", 100
    folder.mkdir(parents=True)
    written = {}
    for name in train_files + test_files:
        data = rng.integers(0, 256, size=(per_file, 3072), dtype=np.uint8)
        labels = rng.integers(0, num_classes, size=per_file).tolist()
        with open(folder / name, "wb") as handle:
            batch = {"data": data, label_key: labels, "filenames": [b"x.png"] * per_file}
            pickle.dump(batch, handle, protocol=protocol)
        written[name] = (data, labels)
    names = [f"{dataset}_class_{i}" for i in range(num_classes)]
    with open(folder / meta_file, "wb") as handle:
        pickle.dump({names_key: names}, handle, protocol=protocol)
    written["names"] = names
    return written


def write_image_folder(root: Path, layout: dict[str, dict[str, int]], size: tuple[int, int] = (20, 24)) -> None:
    """PNG files: ``layout[split][class]`` images of ``size`` (width, height) each."""
    rng = np.random.default_rng(0)
    for split, classes in layout.items():
        for name, count in classes.items():
            directory = root / split / name
            directory.mkdir(parents=True, exist_ok=True)
            for index in range(count):
                pixels = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
                Image.fromarray(pixels).save(directory / f"{index}.png")


def write_image(path: Path, size: tuple[int, int] = (30, 40)) -> Path:
    """A random RGB PNG of ``size`` (width, height)."""
    Image.fromarray(np.random.default_rng(1).integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)).save(path)
    return path


def write_classifier_checkpoint(path: Path) -> Path:
    """An untrained tiny classifier of the classes cat, dog and owl, saved with the keys of a
    Lightning checkpoint (``hyper_parameters``, ``state_dict``) that ``core.load_module`` reads."""
    torch.manual_seed(0)
    classifier = ImageClassifier(model=tiny_model_kwargs(), num_classes=3, class_names=["cat", "dog", "owl"])
    torch.save({"hyper_parameters": dict(classifier.hparams), "state_dict": classifier.state_dict()}, path)
    return path
