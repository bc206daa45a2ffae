"""CIFAR files, image folders and synthetic data through the datamodules, and their errors."""

from __future__ import annotations

import logging
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision.datasets.utils

from core.errors import InputError
from tests.vision.vision_testdata import write_cifar, write_image, write_image_folder
from vision.data.cifar import CIFARDataModule
from vision.data.datamodule import holdout_indices
from vision.data.folder import ImageFolderDataModule
from vision.data.synthetic import SyntheticDataModule

PLAIN = {"num_workers": 0, "pin_memory": False, "auto_augment": None, "re_prob": 0.0}


def unnormalize(image: torch.Tensor, mean: list[float], std: list[float]) -> np.ndarray:
    """A normalized [3, H, W] tensor back to uint8 [H, W, 3]."""
    pixels = image * torch.tensor(std)[:, None, None] + torch.tensor(mean)[:, None, None]
    return (pixels.permute(1, 2, 0) * 255).round().clamp(0, 255).to(torch.uint8).numpy()


@pytest.mark.parametrize("protocol", [2, 5])
def test_cifar10_files_load_with_labels_names_and_pixels(tmp_path: Path, protocol: int) -> None:
    written = write_cifar(tmp_path, "cifar10", per_file=4, protocol=protocol)
    data = CIFARDataModule("cifar10", download=False, root=str(tmp_path), batch_size=4, val_size=5, **PLAIN)
    data.prepare_data()
    data.setup("fit")
    assert (len(data.train_set), len(data.val_set), len(data.test_set)) == (15, 5, 4)
    assert data.class_names == written["names"]
    kwargs = data.module_kwargs()
    assert kwargs["num_classes"] == 10 and kwargs["mean"] == pytest.approx([0.4914, 0.4822, 0.4465])
    test_pixels, test_labels = written["test_batch"]
    image, label = data.test_set[2]
    assert label == test_labels[2]
    expected = test_pixels[2].reshape(3, 32, 32).transpose(1, 2, 0)  # the CIFAR row layout: channel planes
    np.testing.assert_array_equal(unnormalize(image, kwargs["mean"], kwargs["std"]), expected)
    images, labels = next(iter(data.train_dataloader()))
    assert images.shape == (4, 3, 32, 32) and labels.dtype == torch.int64


def test_cifar_validation_split_is_disjoint_and_seeded() -> None:
    train, val = holdout_indices(50, 10, seed=0)
    assert len(val) == 10 and sorted(train + val) == list(range(50))
    assert holdout_indices(50, 10, seed=0) == (train, val)
    assert holdout_indices(50, 0.2, seed=1)[1] != val
    with pytest.raises(InputError, match="data.val_size=50 leaves no training"):
        holdout_indices(50, 50, seed=0)


def test_cifar100_files_load_with_fine_labels(tmp_path: Path) -> None:
    written = write_cifar(tmp_path, "cifar100", per_file=6)
    data = CIFARDataModule("cifar100", download=False, root=str(tmp_path), batch_size=2, val_size=2, **PLAIN)
    data.setup("fit")
    assert data.module_kwargs()["num_classes"] == 100
    assert data.class_names[:2] == written["names"][:2]
    assert [data.test_set[i][1] for i in range(6)] == written["test"][1]


def test_missing_cifar_offline_says_where_to_put_it(tmp_path: Path) -> None:
    data = CIFARDataModule("cifar10", download=False, root=str(tmp_path / "data"), **PLAIN)
    with pytest.raises(InputError) as error:
        data.prepare_data()
    message = str(error.value)
    assert "cifar-10-python.tar.gz" in message and str(tmp_path / "data") in message
    with pytest.raises(InputError, match="data_batch_1"):
        data.setup("fit")


def test_failed_download_says_where_to_put_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(*args: object, **kwargs: object) -> None:
        raise OSError("network is unreachable")

    monkeypatch.setattr(torchvision.datasets.cifar, "download_and_extract_archive", offline)
    data = CIFARDataModule("cifar100", download=True, root=str(tmp_path), **PLAIN)
    with pytest.raises(InputError, match=r"downloading it failed \(network is unreachable\).*cifar-100-python"):
        data.prepare_data()


def test_cifar_file_with_code_is_refused(tmp_path: Path) -> None:
    write_cifar(tmp_path, "cifar10")
    marker = tmp_path / "executed"

    class Payload:
        def __reduce__(self) -> tuple:
            return os.system, (f"touch {marker}",)

    with open(tmp_path / "cifar-10-batches-py" / "data_batch_3", "wb") as handle:
        pickle.dump({"data": Payload()}, handle)
    data = CIFARDataModule("cifar10", download=False, root=str(tmp_path), **PLAIN)
    with pytest.raises(InputError, match="refusing to load"):
        data.setup("fit")
    assert not marker.exists()


def test_malformed_cifar_file_is_named(tmp_path: Path) -> None:
    write_cifar(tmp_path, "cifar10")
    with open(tmp_path / "cifar-10-batches-py" / "test_batch", "wb") as handle:
        pickle.dump({"data": np.zeros((2, 100), dtype=np.uint8), "labels": [0, 1]}, handle)
    with pytest.raises(InputError, match=r"test_batch does not hold CIFAR data"):
        CIFARDataModule("cifar10", download=False, root=str(tmp_path), **PLAIN).setup("fit")
    folder = tmp_path / "cifar-10-batches-py"
    with open(folder / "test_batch", "wb") as handle:
        pickle.dump({"data": np.zeros((2, 3072), dtype=np.uint8), "labels": [0, -1]}, handle)  # -1: unlabelled
    with pytest.raises(InputError, match=r"labels under .* go from -1 to \d+ but batches.meta names 10 classes"):
        CIFARDataModule("cifar10", download=False, root=str(tmp_path), **PLAIN).setup("fit")
    with open(folder / "batches.meta", "wb") as handle:
        pickle.dump({"names": ["a", "b"]}, handle)
    with pytest.raises(InputError, match=r"batches.meta has no 'label_names' \(the class names\)"):
        CIFARDataModule("cifar10", download=False, root=str(tmp_path), **PLAIN).setup("fit")
    with open(folder / "batches.meta", "wb") as handle:
        pickle.dump(["a", "b"], handle)
    with pytest.raises(InputError, match=r"batches.meta holds a list, not the dict of a CIFAR python-format file"):
        CIFARDataModule("cifar10", download=False, root=str(tmp_path), **PLAIN).setup("fit")


def test_image_folder_with_val_and_without_test(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_image_folder(tmp_path, {"train": {"cat": 3, "dog": 2, "owl": 3}, "val": {"dog": 1, "owl": 2}})
    data = ImageFolderDataModule(root=str(tmp_path), img_size=16, batch_size=2, crop="random_resized", **PLAIN)
    data.setup("fit")
    data.setup("fit")  # idempotent
    assert data.class_names == ["cat", "dog", "owl"]
    assert (len(data.train_set), len(data.val_set)) == (8, 3)
    # val/ lacks "cat", yet its labels keep the training folder's numbering.
    assert sorted(label for _, label in data.val_set) == [1, 2, 2]
    image, _ = data.val_set[0]
    assert image.shape == (3, 16, 16)
    with caplog.at_level(logging.WARNING):
        loader = data.test_dataloader()
    assert loader.dataset is data.val_set and "no test split" in caplog.text


def test_image_folder_without_val_holds_out_part_of_train(tmp_path: Path) -> None:
    write_image_folder(tmp_path, {"train": {"a": 5, "b": 5}, "test": {"a": 1, "b": 1}})
    data = ImageFolderDataModule(root=str(tmp_path), img_size=16, batch_size=2, val_size=0.2, **PLAIN)
    data.setup("fit")
    assert (len(data.train_set), len(data.val_set), len(data.test_set)) == (8, 2, 2)
    assert set(data.train_set.indices).isdisjoint(data.val_set.indices)


def test_empty_class_folder_is_named(tmp_path: Path) -> None:
    write_image_folder(tmp_path, {"train": {"cat": 2}})
    (tmp_path / "train" / "dog").mkdir()
    (tmp_path / "train" / "dog" / "notes.txt").write_text("not an image")
    data = ImageFolderDataModule(root=str(tmp_path), img_size=16, batch_size=1, **PLAIN)
    with pytest.raises(InputError, match=r"class folders \['dog'\] under .*train contain no images"):
        data.setup("fit")


def test_image_folder_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no training folder"):
        ImageFolderDataModule(root=str(tmp_path), img_size=16, **PLAIN).setup("fit")
    write_image_folder(tmp_path / "one", {"train": {"cat": 2}})
    with pytest.raises(InputError, match=r"train has one class folder \(cat\); a classifier tells at least two"):
        ImageFolderDataModule(root=str(tmp_path / "one"), img_size=16, **PLAIN).setup("fit")
    write_image_folder(tmp_path, {"train": {"cat": 2, "dog": 2}, "val": {"cow": 1}})
    with pytest.raises(InputError, match=r"classes \['cow'\] that .*train lacks"):
        ImageFolderDataModule(root=str(tmp_path), img_size=16, batch_size=1, **PLAIN).setup("fit")


def test_batch_larger_than_training_set_is_refused() -> None:
    data = SyntheticDataModule(train_size=8, img_size=16, batch_size=16, **PLAIN)
    with pytest.raises(InputError, match="lower data.batch_size"):
        data.setup("fit")


def test_synthetic_data_is_deterministic() -> None:
    data = SyntheticDataModule(num_classes=3, train_size=8, val_size=4, test_size=4, img_size=16, batch_size=4, **PLAIN)
    data.setup("fit")
    first, label = data.val_set[1]
    again, label_again = data.val_set[1]
    assert torch.equal(first, again) and label == label_again
    assert not torch.equal(data.val_set[1][0], data.test_set[1][0])
    assert data.module_kwargs()["class_names"] == ["class_0", "class_1", "class_2"]


def corrupt_folder(root: Path, good: int, bad: dict[str, bytes]) -> None:
    """An image folder with ``good`` readable PNGs per class (a, b) and the ``bad`` files in a/."""
    write_image_folder(root, {"train": {"a": good, "b": good}})
    for name, content in bad.items():
        (root / "train" / "a" / name).write_bytes(content)


def broken_files(tmp_path: Path) -> dict[str, bytes]:
    """A truncated JPEG, a PNG whose pixel data is overwritten, and text behind an image extension."""
    from PIL import Image

    pixels = np.random.default_rng(0).integers(0, 256, size=(40, 50, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "whole.jpg")
    Image.fromarray(pixels).save(tmp_path / "whole.png")
    jpeg, png = (tmp_path / "whole.jpg").read_bytes(), bytearray((tmp_path / "whole.png").read_bytes())
    png[60:200] = bytes(140)
    return {"truncated.jpg": jpeg[: len(jpeg) // 2], "scrambled.png": bytes(png), "notes.jpeg": b"not an image\n"}


def test_a_few_unreadable_images_are_skipped_with_one_counted_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    corrupt_folder(tmp_path / "data", good=150, bad=broken_files(tmp_path))
    data = ImageFolderDataModule(root=str(tmp_path / "data"), img_size=16, batch_size=4, val_size=10, **PLAIN)
    with caplog.at_level(logging.WARNING):
        data.setup("fit")
    assert len(data.train_set) + len(data.val_set) == 300
    warnings = [record.getMessage() for record in caplog.records if "cannot be read" in record.getMessage()]
    assert len(warnings) == 1
    assert "3 of 303 images" in warnings[0]
    assert all(name in warnings[0] for name in ("truncated.jpg", "scrambled.png", "notes.jpeg"))
    images, _ = next(iter(data.train_dataloader()))
    assert images.shape == (4, 3, 16, 16)


def test_a_folder_is_decoded_once_and_a_changed_file_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vision.data import folder

    corrupt_folder(tmp_path / "data", good=20, bad=broken_files(tmp_path))
    decoded: list[str] = []
    real = folder.decode_unreadable
    monkeypatch.setattr(folder, "decode_unreadable", lambda paths: decoded.extend(paths) or real(paths))

    def setup() -> ImageFolderDataModule:
        data = ImageFolderDataModule(
            root=str(tmp_path / "data"), img_size=16, batch_size=4, val_size=4, max_unreadable=0.09,
            cache_dir=str(tmp_path / "cache"), **PLAIN,
        )
        data.setup("fit")
        return data

    first = setup()
    assert len(decoded) == 43
    second = setup()  # a later run, or another rank: the verdicts come from the cache
    assert len(decoded) == 43 and len(second.train_set) + len(second.val_set) == len(first.train_set) + len(first.val_set)
    changed = next((tmp_path / "data" / "train" / "b").glob("*.png"))
    changed.write_bytes(b"not an image any more")
    with pytest.raises(InputError, match="4 of 43 images"):  # 9.3% unreadable now, over the 9% allowed
        setup()
    assert decoded[43:] == [str(changed)]


def test_the_verdicts_keep_file_names_with_line_breaks_and_bytes_that_are_not_utf8(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vision.data import folder

    names = [os.fsdecode(b"caf\xe9.png"), "two\nlines.png", "tab\there.png", "plain.png"]
    paths = [str(write_image(tmp_path / name)) for name in names]
    (tmp_path / "notes.png").write_text("not an image")
    paths.append(str(tmp_path / "notes.png"))
    cache = tmp_path / "cache" / "verdicts.jsonl"
    assert list(folder.find_unreadable(paths, cache)) == [paths[-1]]
    decoded: list[str] = []
    monkeypatch.setattr(folder, "decode_unreadable", lambda fresh: decoded.extend(fresh) or {})
    assert list(folder.find_unreadable(paths, cache)) == [paths[-1]]  # every verdict read back
    assert decoded == []


def test_a_cache_folder_that_cannot_be_made_is_one_clear_error(tmp_path: Path) -> None:
    write_image_folder(tmp_path / "data", {"train": {"cat": 2, "dog": 2}})
    (tmp_path / "a-file").write_text("not a folder")
    data = ImageFolderDataModule(
        root=str(tmp_path / "data"), img_size=16, batch_size=2, val_size=2, cache_dir=str(tmp_path / "a-file" / "cache"),
        **PLAIN,
    )
    with pytest.raises(InputError, match=r"cannot write .*a-file.*\(the data cache: data.cache_dir\)"):
        data.setup("fit")


def test_more_unreadable_images_than_allowed_stop_the_setup(tmp_path: Path) -> None:
    corrupt_folder(tmp_path, good=5, bad=broken_files(tmp_path.parent))
    data = ImageFolderDataModule(root=str(tmp_path), img_size=16, batch_size=2, **PLAIN)
    refused = r"3 of 13 images .* cannot be read, more than data.max_unreadable=0.01: .*truncated.jpg"
    with pytest.raises(InputError, match=refused):
        data.setup("fit")
    lenient = ImageFolderDataModule(root=str(tmp_path), img_size=16, batch_size=2, max_unreadable=0.5, **PLAIN)
    lenient.setup("fit")
    assert len(lenient.train_set) + len(lenient.val_set) == 10


def test_an_image_broken_mid_run_is_replaced_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_image_folder(tmp_path, {"train": {"a": 3, "b": 3}, "val": {"a": 1, "b": 1}})
    data = ImageFolderDataModule(root=str(tmp_path), img_size=16, batch_size=2, in_memory=False, **PLAIN)
    data.setup("fit")
    (tmp_path / "train" / "a" / "0.png").write_bytes(b"overwritten")
    with caplog.at_level(logging.WARNING):
        image, label = data.train_set[0]
    assert image.shape == (3, 16, 16) and label == 0  # a/1.png took its place
    assert "0.png cannot be read" in caplog.text
    for path in (tmp_path / "train").rglob("*.png"):
        path.write_bytes(b"gone")
    with pytest.raises(InputError, match="images in a row .* cannot be read"):
        data.train_set[0]


def test_folder_images_of_any_mode_are_read_as_rgb(tmp_path: Path) -> None:
    from PIL import Image

    from vision.data.folder import read_image

    write_image_folder(tmp_path, {"train": {"a": 1}})
    Image.fromarray(np.full((4, 4), 65535 // 2, dtype=np.uint16)).save(tmp_path / "train" / "a" / "deep.png")
    Image.new("LA", (4, 4), (0, 0)).save(tmp_path / "train" / "a" / "clear.png")
    assert read_image(tmp_path / "train" / "a" / "deep.png").getpixel((0, 0)) == (127, 127, 127)
    assert read_image(tmp_path / "train" / "a" / "clear.png").getpixel((0, 0)) == (255, 255, 255)


def test_workers_default_to_the_usable_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    data = SyntheticDataModule(img_size=16, batch_size=4, auto_augment=None, re_prob=0.0)
    for cpus, workers in [(1, 1), (2, 2), (6, 6), (64, 8)]:
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, cpus=cpus: set(range(cpus)))
        assert data.workers() == workers
    assert not data.pins_memory() or torch.cuda.is_available()
    assert SyntheticDataModule(num_workers=0, img_size=16).workers() == 0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"batch_size": 0}, "data.batch_size must be a whole number of at least 1, or auto, got 0"),
        ({"num_workers": -1}, "data.num_workers must be a whole number of at least 0 or null, got -1"),
        ({"crop": "center"}, "crop must be one of pad, random_resized, got 'center'"),
        ({"auto_augment": "rand-m9-n2-mstd0.5-inc1"}, "can posterize images to 0 bits"),
    ],
)
def test_bad_data_settings_are_named(arguments: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SyntheticDataModule(img_size=16, **{**PLAIN, **arguments})


def read_strength(strength: object) -> float:
    return strength.get()  # type: ignore[attr-defined]


class StrengthSeen(torch.utils.data.Dataset):
    """Returns the shared value as a worker sees it."""

    def __init__(self, strength: object) -> None:
        self.strength = strength

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> float:
        return read_strength(self.strength)


def test_running_loader_workers_follow_the_regularization_of_the_datamodule() -> None:
    from vision.recipe import regularization

    data = SyntheticDataModule(img_size=16, batch_size=4, num_workers=0, augment_on="loader")
    assert "ScaledAugment(strength=0" in repr(data.train_tf) and "SharedErasing(p=0" in repr(data.train_tf)
    loader = torch.utils.data.DataLoader(StrengthSeen(data.augment_strength), num_workers=1, persistent_workers=True)
    assert next(iter(loader)).item() == 0.0
    data.apply_regularization(regularization(100))
    assert next(iter(loader)).item() == 1.0  # the same worker process, a new value
    assert data.erasing.get() == 0.25
    on_device = SyntheticDataModule(img_size=16, batch_size=4, num_workers=0)  # auto: the device's erasing
    assert "ScaledAugment(strength=0" in repr(on_device.train_tf) and "Erasing" not in repr(on_device.train_tf)
    on_device.apply_regularization(regularization(100))
    assert on_device.batch_augment.erasing.shared_probability.get() == 0.25
