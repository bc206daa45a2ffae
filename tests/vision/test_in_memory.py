"""Image folders held decoded in memory (``data.in_memory``) give the items reading the files gives."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from core.errors import InputError
from tests.vision.vision_testdata import write_image_folder
from vision.data import folder
from vision.data.folder import FixedClassImageFolder, ImageFolderDataModule
from vision.data.in_memory import InMemoryImages, held_bytes

PLAIN = {"num_workers": 0, "pin_memory": False, "re_prob": 0.0}
POLICY = "rand-m9-n2-mstd0.5-inc1-mmax9"


def items(dataset: torch.utils.data.Dataset, seed: int = 0) -> list[tuple[torch.Tensor, int]]:
    """Every item of ``dataset``, each drawn after seeding torch's, Python's and NumPy's generators alike."""
    drawn = []
    for index in range(len(dataset)):
        torch.manual_seed(seed + index)
        random.seed(seed + index)
        np.random.seed(seed + index)
        drawn.append(dataset[index])
    return drawn


def assert_same_items(held: torch.utils.data.Dataset, files: torch.utils.data.Dataset) -> None:
    assert len(held) == len(files)
    for (held_image, held_label), (file_image, file_label) in zip(items(held), items(files)):
        assert held_label == file_label
        assert held_image.dtype == file_image.dtype
        torch.testing.assert_close(held_image, file_image, rtol=0, atol=0)


def setups(root: Path, **kwargs: object) -> tuple[ImageFolderDataModule, ImageFolderDataModule]:
    held = ImageFolderDataModule(root=str(root), img_size=16, batch_size=2, in_memory=True, **{**PLAIN, **kwargs})
    files = ImageFolderDataModule(root=str(root), img_size=16, batch_size=2, in_memory=False, **{**PLAIN, **kwargs})
    held.setup("fit")
    files.setup("fit")
    return held, files


@pytest.mark.parametrize(
    ("augment_on", "auto_augment"), [("loader", None), ("loader", POLICY), ("device", None), ("device", POLICY)]
)
def test_held_images_give_the_items_of_the_files(tmp_path: Path, augment_on: str, auto_augment: str | None) -> None:
    # Images of 20 x 24, not square, so the training resize and the evaluation crop differ.
    write_image_folder(tmp_path, {"train": {"a": 3, "b": 3}, "val": {"a": 2, "b": 1}, "test": {"a": 1, "b": 2}})
    held, files = setups(tmp_path, augment_on=augment_on, auto_augment=auto_augment)
    assert isinstance(held.train_set, InMemoryImages) and isinstance(files.train_set, FixedClassImageFolder)
    for split in ("train_set", "val_set", "test_set"):
        assert_same_items(getattr(held, split), getattr(files, split))
    # Used only to evaluate on the training split, the plain training images stay on disk.
    assert isinstance(held.train_plain_set, FixedClassImageFolder)
    assert held.train_set.images.shape == (6, 16, 16, 3)


def test_without_val_the_held_out_images_are_held_at_the_evaluation_geometry(tmp_path: Path) -> None:
    write_image_folder(tmp_path, {"train": {"a": 4, "b": 4}})
    held, files = setups(tmp_path, val_size=0.25)
    assert isinstance(held.val_set.dataset, InMemoryImages)
    for split in ("train_set", "val_set", "train_plain_set"):
        assert_same_items(getattr(held, split), getattr(files, split))
    # Not square: the squashed training images and the center-cropped ones are two arrays.
    assert held.train_set.dataset.images is not held.val_set.dataset.images


def test_images_already_at_the_size_are_held_once(tmp_path: Path) -> None:
    write_image_folder(tmp_path, {"train": {"a": 4, "b": 4}}, size=(16, 16))
    held, files = setups(tmp_path, val_size=0.25)
    assert held.train_set.dataset.images is held.val_set.dataset.images
    assert_same_items(held.val_set, files.val_set)


def test_auto_holds_what_fits_with_the_pad_crop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_image_folder(tmp_path, {"train": {"a": 3, "b": 3}, "test": {"a": 1, "b": 1}})
    auto = {"root": str(tmp_path), "img_size": 16, "batch_size": 2, **PLAIN}
    data = ImageFolderDataModule(**auto)
    data.setup("fit")
    assert isinstance(data.train_set.dataset, InMemoryImages)  # 6 training images held twice, 2 test
    monkeypatch.setattr(folder, "IN_MEMORY_MAX_BYTES", held_bytes(6 * 2 + 2, 16) - 1)
    data = ImageFolderDataModule(**auto)
    data.setup("fit")
    assert isinstance(data.train_set.dataset, FixedClassImageFolder)
    monkeypatch.undo()
    data = ImageFolderDataModule(**{**auto, "crop": "random_resized"})
    data.setup("fit")
    assert isinstance(data.train_set.dataset, FixedClassImageFolder)
    assert ImageFolderDataModule(**{**auto, "in_memory": False}).holds_in_memory(1) is False


def test_an_evaluation_of_one_split_holds_it_where_it_fits(tmp_path: Path) -> None:
    """An evaluation of ``test/`` alone holds that folder under ``auto``, decoded before the first
    batch, and reads its files under ``false``: the same items."""
    write_image_folder(tmp_path, {"train": {"a": 3, "b": 3}, "test": {"a": 2, "b": 1}})
    evaluations = []
    for in_memory in ("auto", False):
        data = ImageFolderDataModule(root=str(tmp_path), img_size=16, batch_size=2, in_memory=in_memory, **PLAIN)
        data.select_split("test")
        data.setup("test")
        evaluations.append(data.test_set)
    held, files = evaluations
    assert isinstance(held, InMemoryImages) and isinstance(files, FixedClassImageFolder)
    assert held.images.shape == (3, 16, 16, 3)
    assert_same_items(held, files)


def test_in_memory_true_needs_the_pad_crop_and_a_known_value(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"data.in_memory=true holds images .* set data.crop=pad"):
        ImageFolderDataModule(root=str(tmp_path), img_size=16, crop="random_resized", in_memory=True, **PLAIN)
    with pytest.raises(InputError, match=r"data.in_memory must be one of auto, True, False, got 'yes'"):
        ImageFolderDataModule(root=str(tmp_path), img_size=16, in_memory="yes", **PLAIN)


def test_an_unreadable_image_without_the_check_is_named(tmp_path: Path) -> None:
    write_image_folder(tmp_path, {"train": {"a": 3, "b": 3}})
    (tmp_path / "train" / "b" / "1.png").write_bytes(b"not a png")
    data = ImageFolderDataModule(
        root=str(tmp_path), img_size=16, batch_size=2, check_images=False, in_memory=True, **PLAIN
    )
    with pytest.raises(InputError, match=r"image .*b/1.png cannot be read \(.*\); .*data.check_images=true"):
        data.setup("fit")


def test_decoding_on_one_cpu_and_on_loader_processes_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_image_folder(tmp_path, {"train": {"a": 5, "b": 4}})
    paths = sorted(str(path) for path in (tmp_path / "train").rglob("*.png"))
    resize = folder.square_resize(8)
    monkeypatch.setattr(folder, "DECODE_CHUNK", 2)  # several chunks, the last one short
    monkeypatch.setattr(folder, "usable_cpus", lambda: 2)
    (spread,) = folder.decode_all(paths, [resize])
    monkeypatch.setattr(folder, "usable_cpus", lambda: 1)
    (single,) = folder.decode_all(paths, [resize])
    expected = np.stack([np.asarray(resize(Image.open(path).convert("RGB"))) for path in paths])
    assert spread.shape == (9, 8, 8, 3)
    np.testing.assert_array_equal(spread, expected)
    np.testing.assert_array_equal(single, expected)


def test_holding_the_images_leaves_the_run_s_random_numbers_alone(tmp_path: Path) -> None:
    write_image_folder(tmp_path, {"train": {"a": 3, "b": 3}, "val": {"a": 1, "b": 1}})
    data = ImageFolderDataModule(root=str(tmp_path), img_size=16, batch_size=2, in_memory=True, **PLAIN)
    torch.manual_seed(0)
    state = torch.get_rng_state()
    data.setup("fit")
    assert isinstance(data.train_set, InMemoryImages)
    assert torch.equal(torch.get_rng_state(), state)  # the model's initialization is the files run's
