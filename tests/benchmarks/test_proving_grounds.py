"""The large offline proving grounds at tiny sizes: image folders of the right classes, sizes and
modes, byte-identical for identical arguments whatever the number of processes, test sources
(digits, fonts) disjoint from training, a complete build left alone, and the CIFAR-format copy
holding the same images."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.datasets import ImageFolder

from benchmarks import proving_grounds
from vision.data.cifar import CIFARDataModule

pytest.importorskip("sklearn")
pytest.importorskip("mlxtend")
COUNTS = {"train": 40, "val": 10, "test": 20}
ARGS = ["--train", "40", "--val", "10", "--test", "20"]


def pixels(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image)


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by its relative path, with its bytes."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.fixture(scope="module")
def grounds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("grounds")
    built = proving_grounds.main([str(out), *ARGS, "--workers", "1", "--sheets", str(out / "sheets")])
    assert all(not result.skipped for result in built.values())
    return out


def test_both_sets_are_image_folders_of_32px_images(grounds: Path) -> None:
    for name, mode in (("cluttered-digits", "L"), ("glyphs", "RGB")):
        folder = grounds / name
        for split_name, count in COUNTS.items():
            classes = sorted(entry.name for entry in (folder / split_name).iterdir())
            assert classes == proving_grounds.CLASSES[name]
            per_class = [len(list((folder / split_name / class_name).glob("*.png"))) for class_name in classes]
            assert per_class == [count // 10] * 10  # balanced
            dataset = ImageFolder(str(folder / split_name))  # as the plain loop reads them
            assert dataset.classes == classes and len(dataset) == count
        for path in sorted((folder / "test").rglob("*.png"))[:20]:
            with Image.open(path) as image:
                assert (image.size, image.mode) == ((32, 32), mode)
        stack = np.stack([pixels(path) for path in sorted((folder / "train").rglob("*.png"))])
        assert stack.std() > 20  # not blank
        assert len({image.tobytes() for image in stack}) == len(stack)  # every image drawn anew
        build = json.loads((folder / "build.json").read_text())
        assert build["counts"] == COUNTS and build["seed"] == 0 and build["set"] == name
        assert "seed 0" in (folder / "README.txt").read_text()
        with Image.open(grounds / "sheets" / f"grounds_{name}.png") as sheet:
            assert sheet.size == (10 * (3 * 32 + 2), 10 * (3 * 32 + 2))


def test_test_sources_were_never_trained_on(grounds: Path) -> None:
    digits = json.loads((grounds / "cluttered-digits" / "build.json").read_text())["sources"]
    (ids,) = digits.values()
    train, val, test = (set(ids[split_name]["ids"]) for split_name in proving_grounds.SPLITS)
    assert len(test) > 1000 and len(train) > 4000 and not train & test and not train & val and not val & test
    assert {source.split(":")[0] for source in test} == {"mnist", "digits"}
    fonts = json.loads((grounds / "glyphs" / "build.json").read_text())["sources"]["fonts"]
    train, val, test = ({font["name"] for font in fonts[split_name]} for split_name in proving_grounds.SPLITS)
    assert test and val and len(train) >= 3 and not train & test and not train & val and not val & test
    # The workers draw test images from the test fonts' glyphs alone.
    context, _ = proving_grounds.sources_of("glyphs", 0)
    train_masks = {mask.tobytes() for masks in context["train"] for mask in masks}
    assert not any(mask.tobytes() in train_masks for masks in context["test"] for mask in masks)


def test_fonts_are_letters_in_name_order() -> None:
    fonts = proving_grounds.usable_fonts()
    names = [font.name for font in fonts]
    assert names == sorted(names) and len(set(names)) == len(names)
    for font in fonts:
        assert len({mask.tobytes() for mask in font.masks}) == 10 and all(mask.max() >= 128 for mask in font.masks)
    parts = proving_grounds.font_splits(fonts)
    assert [font.name for font in parts["test"]] == names[4::5] and [font.name for font in parts["val"]] == names[2::5]


def test_identical_arguments_give_identical_bytes_with_any_number_of_processes(grounds: Path, tmp_path: Path) -> None:
    proving_grounds.main([str(tmp_path), *ARGS, "--workers", "2"])
    for name in proving_grounds.SETS:
        assert tree(tmp_path / name) == tree(grounds / name)
    again = proving_grounds.build(tmp_path, "glyphs", {"train": 40, "val": 10, "test": 20}, seed=1)
    assert not again.skipped and tree(tmp_path / "glyphs") != tree(grounds / "glyphs")


def test_a_complete_build_is_skipped_and_an_incomplete_one_redone(grounds: Path, tmp_path: Path) -> None:
    before = tree(grounds / "glyphs")
    stamp = (grounds / "glyphs" / proving_grounds.MARKER).stat().st_mtime_ns
    again = proving_grounds.build(grounds, "glyphs", COUNTS)
    assert again.skipped and tree(grounds / "glyphs") == before
    assert (grounds / "glyphs" / proving_grounds.MARKER).stat().st_mtime_ns == stamp
    # Different counts: built again, the old images gone.
    smaller = proving_grounds.build(tmp_path, "glyphs", {"train": 20, "val": 10, "test": 10})
    assert not smaller.skipped
    larger = proving_grounds.build(tmp_path, "glyphs", COUNTS)
    assert not larger.skipped and tree(tmp_path / "glyphs") == before
    # Without the marker (an interrupted build): built again.
    (tmp_path / "glyphs" / proving_grounds.MARKER).unlink()
    next((tmp_path / "glyphs" / "test" / "A").glob("*.png")).write_bytes(b"half an image")
    redone = proving_grounds.build(tmp_path, "glyphs", COUNTS)
    assert not redone.skipped and tree(tmp_path / "glyphs") == before


def test_cifar_files_hold_the_same_images_for_the_in_memory_loader(tmp_path: Path) -> None:
    built = proving_grounds.main([str(tmp_path), *ARGS, "--sets", "glyphs", "--workers", "1", "--cifar"])["glyphs"]
    root = built.folder / "cifar"
    data = CIFARDataModule(
        "cifar10", download=False, root=str(root), batch_size=4, val_size=COUNTS["val"], num_workers=0,
        pin_memory=False, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0),
    )
    data.prepare_data()
    data.setup("fit")
    data.setup("test")
    assert (len(data.train_set), len(data.val_set), len(data.test_set)) == (COUNTS["train"], COUNTS["val"], COUNTS["test"])
    assert data.class_names == proving_grounds.CLASSES["glyphs"]
    image, label = data.test_set[COUNTS["test"] - 1]  # the last test image: class J, its highest index
    last = max((built.folder / "test" / "J").glob("*.png"), key=lambda path: int(path.stem))
    assert label == 9
    np.testing.assert_array_equal((image.permute(1, 2, 0) * 255).round().to(torch.uint8).numpy(), pixels(last))
    # Written once per build: a second call leaves the files as they are.
    stamp = (root / "cifar-10-batches-py" / "test_batch").stat().st_mtime_ns
    assert proving_grounds.write_cifar(built.folder, "glyphs") == root
    assert (root / "cifar-10-batches-py" / "test_batch").stat().st_mtime_ns == stamp
    assert not list(built.folder.glob(".cifar.*"))  # nothing half-written left beside it
