"""Any image classification folder: ``root/train/<class>/*``, plus ``root/val/<class>/*`` and/or
``root/test/<class>/*``.

Unreadable images (corrupt or truncated files, text behind an image extension) are found when the
data is set up, not hours into a run: every file is decoded once (JPEGs at 1/8 scale, which still
reads every byte) and converted to RGB, by one loader process per usable CPU. The verdicts are
kept in the data cache (``<cache_dir>/vision/<folder fingerprint>.jsonl``, keyed by each file's path,
size and modification time), so a folder is checked once, by the first process that sets it up
(others wait for its lock), and a later run or another rank decodes only the files that are new or
changed. Up to ``max_unreadable`` of them (1% by default) are skipped with one warning that
counts them and names the first few; more stop the run with an :class:`~core.errors.InputError`.
An image that stops being readable later (a file replaced or a network share gone mid-epoch) is
replaced by the next readable one with a warning naming it, so a long run is not lost to one file;
only a run of unreadable images ends it.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision.datasets import ImageFolder
from torchvision.datasets.folder import IMG_EXTENSIONS

from core.constraints import AUTO, PROBABILITY
from core.files.atomic import atomic_path
from core.files.data_cache import cache_lock, cache_root, file_version
from core.errors import InputError
from vision.constraints import IN_MEMORY, require_pad_crop
from vision.data.datamodule import ImageDataModule, ImageSplits, usable_cpus
from vision.data.in_memory import IN_MEMORY_MAX_BYTES, InMemoryImages, held_bytes
from vision.data.transforms import eval_geometry, square_resize, to_rgb

log = logging.getLogger(__name__)

# What Pillow raises for a file it cannot decode (SyntaxError is its historic "broken file").
UNREADABLE = (OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError)
SHOWN = 5  # unreadable files named in a message
MAX_SUBSTITUTES = 10  # unreadable images in a row replaced mid-epoch before the run is stopped
DECODE_CHUNK = 512  # images a loader process decodes per task (the check, or holding them in memory)


def read_image(path: str | Path | BinaryIO, formats: tuple[str, ...] | None = None) -> Image.Image:
    """An image file decoded as 8-bit RGB (:func:`vision.data.transforms.to_rgb`); ``formats``:
    the Pillow formats it may be (None: any)."""
    with Image.open(path, formats=formats) as image:
        image.load()
        return to_rgb(image)


def error_reason(error: Exception) -> str:
    """An image's read error as the reason a warning or an ``error:`` line gives: its type and
    message."""
    return f"{type(error).__name__}: {error}"


def unreadable_reason(path: str) -> str | None:
    """Why ``path`` cannot be used as an image, or None when it decodes and converts to RGB."""
    try:
        with Image.open(path) as image:
            image.draft("RGB", (1, 1))  # JPEG decodes at 1/8 scale, still through every byte
            image.load()
            to_rgb(image)
    except UNREADABLE as error:
        return error_reason(error)
    return None


class Verdicts(Dataset):
    """Each path's :func:`unreadable_reason`, empty when the image can be used."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> str:
        return unreadable_reason(self.paths[index]) or ""


def in_chunks(dataset: Dataset, collate_fn: Callable[[list[Any]], Any]) -> DataLoader:
    """``dataset`` read in order, :data:`DECODE_CHUNK` items at a time, by loader processes on
    the usable CPUs (processes, not threads: the check of 75,000 small PNGs at the start of a
    training run took 17-18 s on them against 30 s on threads, 2 cores; BENCHMARKS.md)."""
    workers = usable_cpus()
    return DataLoader(
        dataset,
        batch_size=DECODE_CHUNK,
        num_workers=workers if workers > 1 else 0,
        collate_fn=collate_fn,
        generator=torch.Generator(),  # its workers' seeds, not drawn from the run's global generator
    )


def decode_unreadable(paths: list[str]) -> dict[str, str]:
    """The paths that cannot be read, with the reason."""
    if not paths:  # every verdict cached: no loader processes to start
        return {}
    reasons = [reason for chunk in in_chunks(Verdicts(paths), list) for reason in chunk]
    return {path: reason for path, reason in zip(paths, reasons) if reason}


class DecodedImages(Dataset):
    """Each image of ``paths`` read (:func:`read_image`) and brought to size by each of
    ``resizes``, as uint8 arrays [H, W, 3], or the reason it cannot be read."""

    def __init__(self, paths: list[str], resizes: Sequence[Callable[[Image.Image], Image.Image]]) -> None:
        self.paths = paths
        self.resizes = resizes

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> list[np.ndarray] | str:
        try:
            image = read_image(self.paths[index])
        except UNREADABLE as error:
            return error_reason(error)
        return [np.asarray(resize(image), dtype=np.uint8) for resize in self.resizes]


def stack_chunk(items: list[list[np.ndarray] | str]) -> tuple[list[np.ndarray], dict[int, str]]:
    """A chunk of :class:`DecodedImages` items as one array [n, H, W, 3] per resize, and the
    reasons of the unreadable ones by their index in the chunk."""
    reasons = {index: item for index, item in enumerate(items) if isinstance(item, str)}
    if reasons:
        return [], reasons
    return [np.stack(images) for images in zip(*items)], {}


def decode_all(paths: list[str], resizes: Sequence[Callable[[Image.Image], Image.Image]]) -> list[np.ndarray]:
    """Every image of ``paths`` read once and brought to size by each of ``resizes``: one uint8
    array [N, H, W, 3] per resize, decoded by loader processes on the usable CPUs. Where two
    resizes give the same pixels (images already at the size), the second array is the first.
    An image that cannot be read stops it with an :class:`InputError` naming the file."""
    loader = in_chunks(DecodedImages(paths, resizes), stack_chunk)
    arrays: list[np.ndarray] = []  # one [N, H, W, 3] per resize, filled chunk by chunk
    for start, (stacked, reasons) in zip(range(0, len(paths), DECODE_CHUNK), loader):
        if reasons:
            index, reason = next(iter(reasons.items()))
            raise InputError(
                f"image {paths[start + index]} cannot be read ({reason}); repair or delete it, or set "
                "data.check_images=true to skip unreadable images"
            )
        if not arrays:
            arrays = [np.empty((len(paths), *part.shape[1:]), dtype=np.uint8) for part in stacked]
        for array, part in zip(arrays, stacked):
            array[start : start + len(part)] = part
    for index in range(1, len(arrays)):
        if arrays[index].shape == arrays[0].shape and np.array_equal(arrays[index], arrays[0]):
            arrays[index] = arrays[0]
    return arrays


def held_split(dataset: FixedClassImageFolder, resize: Callable[[Image.Image], Image.Image], transform: Any) -> InMemoryImages:
    """``dataset``'s images decoded and resized once, held in memory, with ``transform`` per item."""
    return InMemoryImages(decode_all([path for path, _ in dataset.samples], [resize])[0], list(dataset.samples), transform)


def find_unreadable(paths: list[str], cache_file: Path | None = None) -> dict[str, str]:
    """The paths that cannot be read, with the reason. With ``cache_file``, the verdicts of files
    checked before (same path, size and modification time) are read from it, only the others are
    decoded, and the file is rewritten atomically with every verdict, under a lock beside it: one
    JSON list ``[path, version, reason]`` a line, in ASCII, so that any file name (a line break
    in it, bytes that are not UTF-8) is kept; a line that does not read so is checked again."""
    if cache_file is None:
        return decode_unreadable(paths)
    with cache_lock(Path(f"{cache_file}.lock")):
        known: dict[str, tuple[str, str]] = {}
        if cache_file.is_file():
            for line in cache_file.read_text(encoding="ascii", errors="replace").split("\n"):
                with contextlib.suppress(ValueError, TypeError):
                    path, version, reason = json.loads(line)
                    known[path] = (str(version), str(reason))
        versions = {path: ":".join(map(str, file_version(path))) for path in paths}
        fresh = [path for path in paths if known.get(path, ("", ""))[0] != versions[path]]
        decoded = decode_unreadable(fresh)
        if fresh:
            log.info("checked %d new or changed images of %d (%s)", len(fresh), len(paths), cache_file)
        for path in fresh:
            known[path] = (versions[path], decoded.get(path, ""))
        with atomic_path(cache_file) as tmp:
            tmp.write_text("".join(json.dumps([path, *verdict]) + "\n" for path, verdict in known.items()), encoding="ascii")
    return {path: known[path][1] for path in paths if known[path][1]}


def check_cache_file(root: Path, cache_dir: str | None) -> Path:
    """Where the verdicts of the images under ``root`` are kept."""
    key = hashlib.sha1(os.fsencode(root.resolve())).hexdigest()[:20]
    return cache_root(cache_dir) / "vision" / f"{key}.jsonl"


class FixedClassImageFolder(ImageFolder):
    """``ImageFolder`` with the class list of the training folder, so a label means the same class
    in every split even when a validation folder lacks some class; images are read with
    :func:`read_image`, and one that fails mid-epoch is replaced by the next readable one."""

    def __init__(self, root: Path, classes: list[str], transform: Any) -> None:
        self.fixed_classes = classes
        super().__init__(str(root), transform=transform, loader=read_image, allow_empty=True)

    def find_classes(self, directory: str) -> tuple[list[str], dict[str, int]]:
        """The fixed class list and its indices, whichever sub-folders ``directory`` holds."""
        return self.fixed_classes, {name: index for index, name in enumerate(self.fixed_classes)}

    def drop(self, paths: Iterable[str]) -> None:
        """Leave out the images at ``paths``."""
        dropped = set(paths)
        self.samples = [sample for sample in self.samples if sample[0] not in dropped]
        self.imgs = self.samples
        self.targets = [target for _, target in self.samples]

    def with_transform(self, transform: Any) -> FixedClassImageFolder:
        """The same images with another transform (no second scan of the folder)."""
        twin = copy.copy(self)
        twin.transform = transform
        return twin

    def __getitem__(self, index: int) -> tuple[Any, int]:
        first = self.samples[index][0]  # IndexError past the end, as iteration expects
        for offset in range(MAX_SUBSTITUTES + 1):
            path, target = self.samples[(index + offset) % len(self.samples)]
            try:
                image = read_image(path)
            except UNREADABLE as error:
                log.warning("image %s cannot be read (%s); the next image takes its place", path, error_reason(error))
                continue
            return self.transform(image), target
        raise InputError(
            f"{MAX_SUBSTITUTES + 1} images in a row under {self.root} cannot be read (from {first}); "
            "check that the folder is still there and readable"
        )


def is_image(path: Path) -> bool:
    """Whether ``path`` is a file with an image extension torchvision reads."""
    return path.is_file() and path.suffix.lower() in IMG_EXTENSIONS


def training_classes(train_dir: Path) -> list[str]:
    """Class names = the sub-folders of ``train_dir``; each must hold at least one image."""
    if not train_dir.is_dir():
        raise InputError(
            f"no training folder {train_dir}; arrange the images as {train_dir}/<class>/<image> "
            "and pass the folder above it as data.root"
        )
    classes = sorted(entry.name for entry in train_dir.iterdir() if entry.is_dir())
    if len(classes) < 2:
        found = f"one class folder ({classes[0]})" if classes else "no class sub-folders"
        raise InputError(
            f"{train_dir} has {found}; a classifier tells at least two classes apart: put each class's images in "
            f"{train_dir}/<class>/"
        )
    empty = [name for name in classes if not any(is_image(path) for path in (train_dir / name).rglob("*"))]
    if empty:
        raise InputError(
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
        raise InputError(
            f"{directory} has classes {unknown} that {root / 'train'} lacks; the splits must share classes"
        )
    dataset = FixedClassImageFolder(directory, classes, transform)
    if len(dataset) == 0:
        raise InputError(f"{directory} holds no images; add images to {directory}/<class>/ or remove the folder")
    return dataset


def skip_unreadable(
    datasets: list[FixedClassImageFolder], root: Path, max_unreadable: float, cache_file: Path | None = None
) -> None:
    """Decode every image of ``datasets`` not checked before (``cache_file``); drop the unreadable
    ones with a warning, or raise :class:`InputError` when they are more than ``max_unreadable``
    of all."""
    paths = [path for dataset in datasets for path, _ in dataset.samples]
    unreadable = find_unreadable(paths, cache_file)
    if not unreadable:
        return
    named = "; ".join(f"{path} ({reason})" for path, reason in list(unreadable.items())[:SHOWN])
    share = len(unreadable) / len(paths)
    counted = f"{len(unreadable)} of {len(paths)} images under {root} ({share:.2%}) cannot be read"
    if share > max_unreadable:
        raise InputError(
            f"{counted}, more than data.max_unreadable={max_unreadable:g}: {named}; "
            "repair or delete them, or raise data.max_unreadable to skip them"
        )
    log.warning("%s and are skipped (data.max_unreadable=%g): %s", counted, max_unreadable, named)
    for dataset in datasets:
        dataset.drop(unreadable)
        if len(dataset) == 0:
            raise InputError(f"{dataset.root} holds no readable image; add images or remove the folder")


class ImageFolderDataModule(ImageDataModule):
    """Images arranged by class in folders. Without ``val/``, a validation split is held out of
    ``train/`` (``val_size``); without ``test/``, testing uses the validation split.

    Args:
        check_images: decode every image at setup and skip the unreadable ones (see the module
            docstring); off, a file is first read when a batch needs it.
        max_unreadable: the largest fraction of unreadable images that is skipped rather than
            refused.
        cache_dir: where the check's verdicts are kept; default ``$TRANSFORMER_TOOLKIT_CACHE``
            or ``~/.cache/transformer-toolkit``.
        in_memory: hold the images decoded at the model's size in memory
            (:mod:`vision.data.in_memory`), read once at setup instead of every epoch. ``auto``:
            with the pad crop, when all splits (in an evaluation, the evaluated one:
            :meth:`select_split`) take at most
            :data:`vision.data.in_memory.IN_MEMORY_MAX_BYTES`; ``true``: always (pad crop only);
            ``false``: read the files every epoch.
        **kwargs: :class:`ImageDataModule` arguments; ``root`` is the folder holding ``train/``.
    """

    def __init__(
        self,
        check_images: bool = True,
        max_unreadable: float = 0.01,
        cache_dir: str | None = None,
        in_memory: str | bool = AUTO,
        **kwargs: Any,
    ) -> None:
        PROBABILITY.require(max_unreadable, "data.max_unreadable")
        IN_MEMORY.require(in_memory, "data.in_memory", InputError)
        super().__init__(**kwargs)
        require_pad_crop(self.crop, in_memory=in_memory, error=InputError)
        self.check_images = check_images
        self.max_unreadable = max_unreadable
        self.cache_dir = cache_dir
        self.in_memory = in_memory
        self.selected_split: str | None = None

    def select_split(self, split: str) -> None:
        """Check and hold in memory the evaluated folder alone (:class:`core.training.head.SplitSelection`):
        ``test/``, or ``val/`` for ``val`` and for a ``test`` without ``test/``; ``train/`` is then
        only listed, for its classes. Evaluating ``train``, or a validation split held out of
        ``train/``, loads every split as training does."""
        self.selected_split = split

    def load_splits(self) -> ImageSplits:
        """``train/``, and ``val/`` and ``test/`` where present, labelled by the training classes."""
        root = Path(self.root)
        classes = training_classes(root / "train")
        train = FixedClassImageFolder(root / "train", classes, self.train_tf)
        val = split_folder(root, "val", classes, self.eval_tf)
        test = split_folder(root, "test", classes, self.eval_tf)
        evaluated = self.evaluated_alone(val, test)
        if evaluated is not None:
            return self.alone_split(train, val, test, evaluated, classes)
        if self.check_images:
            present = [dataset for dataset in (train, val, test) if dataset is not None]
            skip_unreadable(present, root, self.max_unreadable, check_cache_file(root, self.cache_dir))
            lost = sorted(set(classes) - {classes[target] for target in train.targets})
            if lost:
                raise InputError(
                    f"class folders {lost} under {root / 'train'} hold no readable image; "
                    "add images or remove the folders"
                )
        if self.holds_in_memory(len(train) * (2 if val is None else 1) + len(val or ()) + len(test or ())):
            return self.held_splits(train, val, test, classes)
        return ImageSplits(
            train=train,
            train_plain=train.with_transform(self.eval_tf),
            val=val,
            test=test,
            class_names=classes,
        )

    def evaluated_alone(
        self, val: FixedClassImageFolder | None, test: FixedClassImageFolder | None
    ) -> FixedClassImageFolder | None:
        """The folder an evaluation of the selected split reads, where it is a folder of its own
        (:meth:`select_split`); None where every split is loaded."""
        if self.selected_split == "test":
            return test if test is not None else val
        return val if self.selected_split == "val" else None

    def alone_split(
        self,
        train: FixedClassImageFolder,
        val: FixedClassImageFolder | None,
        test: FixedClassImageFolder | None,
        evaluated: FixedClassImageFolder,
        classes: list[str],
    ) -> ImageSplits:
        """The splits of an evaluation that reads ``evaluated`` alone (:meth:`evaluated_alone`): it
        is checked and, where it fits (:meth:`holds_in_memory`), held in memory; the other
        folders stay unread files."""
        root = Path(self.root)
        if self.check_images:
            skip_unreadable([evaluated], root, self.max_unreadable, check_cache_file(root, self.cache_dir))
        scored: Dataset = evaluated
        if self.holds_in_memory(len(evaluated)):
            scored = held_split(evaluated, eval_geometry(self.img_size, self.interpolation, self.EVAL_CROP_PCT), self.eval_tf)
        return ImageSplits(
            train=train,
            train_plain=train.with_transform(self.eval_tf),
            val=scored if evaluated is val else val,
            test=scored if evaluated is test else test,
            class_names=classes,
        )

    def holds_in_memory(self, count: int) -> bool:
        """Whether ``count`` images are held decoded in memory: ``in_memory``, or for ``auto``
        with the pad crop, whether they take at most :data:`IN_MEMORY_MAX_BYTES`."""
        if self.in_memory == AUTO:
            return self.crop == "pad" and held_bytes(count, self.img_size) <= IN_MEMORY_MAX_BYTES
        return bool(self.in_memory)

    def held_splits(
        self,
        train: FixedClassImageFolder,
        val: FixedClassImageFolder | None,
        test: FixedClassImageFolder | None,
        classes: list[str],
    ) -> ImageSplits:
        """The splits with their images held decoded in memory: the training images at the
        pad-crop resize, the evaluated ones at the evaluation geometry. The training images with
        evaluation preprocessing are held too where they are the validation source (no ``val/``);
        otherwise, used only to evaluate on the training split, they are read from the files."""
        started = time.perf_counter()
        square = square_resize(self.img_size, self.interpolation)
        evaluated = eval_geometry(self.img_size, self.interpolation, self.EVAL_CROP_PCT)
        arrays = decode_all([path for path, _ in train.samples], [square] if val is not None else [square, evaluated])
        held = InMemoryImages(arrays[0], list(train.samples), self.train_tf)
        if val is None:
            plain: Dataset = InMemoryImages(arrays[1], list(train.samples), self.eval_tf)
        else:
            plain = train.with_transform(self.eval_tf)
        val_held, test_held = (split and held_split(split, evaluated, self.eval_tf) for split in (val, test))
        kept = {id(data.images): data.images for data in (held, plain, val_held, test_held) if isinstance(data, InMemoryImages)}
        log.info(
            "holding %d images decoded in memory (%.0f MB, read in %.1f s; data.in_memory=false reads the files instead)",
            sum(len(array) for array in kept.values()),
            sum(array.nbytes for array in kept.values()) / 1e6,
            time.perf_counter() - started,
        )
        return ImageSplits(train=held, train_plain=plain, val=val_held, test=test_held, class_names=classes)
