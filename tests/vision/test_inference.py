"""Prediction sees an image exactly as validation and testing saw it: the checkpoint keeps the
datamodule's evaluation data config, and :mod:`vision.inference` rebuilds the datamodule's own
transform from it. Checked for every data preset of ``conf/data``, at both interpolations."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import DictConfig
from PIL import Image
from torch.utils.data import Dataset

from core.training.runner import model_kwargs
from tests.vision.vision_testdata import CONF, TINY_MODEL, write_cifar, write_image, write_image_folder
from vision.inference import data_config, image_transform, load_classifier, load_image, preprocess
from vision.data.transforms import eval_transform


def cifar(dataset: str) -> Callable[[Path], list[str]]:
    def write(root: Path) -> list[str]:
        write_cifar(root, dataset, per_file=4)  # CIFAR-100 has one training file: 4 images
        return [f"data.root={root}", "data.download=false", "data.val_size=2", "data.batch_size=2"]

    return write


def image_folder(root: Path) -> list[str]:
    write_image_folder(root, {"train": {"cat": 3, "dog": 3}, "test": {"cat": 2, "dog": 1}}, size=(20, 24))
    transparent = np.random.default_rng(2).integers(0, 256, size=(18, 26, 4), dtype=np.uint8)
    Image.fromarray(transparent, mode="RGBA").save(root / "test" / "dog" / "transparent.png")
    return [f"data.root={root}", "data.batch_size=2", "data.val_size=2"]


def synthetic(root: Path) -> list[str]:
    return ["data.train_size=8", "data.val_size=4", "data.test_size=4", "data.batch_size=4"]


SOURCES = {
    "cifar10": cifar("cifar10"),
    "cifar100": cifar("cifar100"),
    "imagefolder": image_folder,
    "synthetic": synthetic,
}


def vision_config(*overrides: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("vision", overrides=list(overrides))


def test_every_image_data_preset_is_covered() -> None:
    presets = [path.stem for path in (CONF / "data").glob("*.yaml")]
    image_presets = {name for name in presets if vision_config(f"data={name}").data._target_.startswith("vision.")}
    assert image_presets == set(SOURCES)


def image_files(dataset: Dataset, directory: Path) -> list[Path]:
    """The test split's images as files: an image folder's own, or each in-memory image (CIFAR
    arrays, synthetic noise) saved losslessly as PNG."""
    if hasattr(dataset, "samples"):
        return [Path(path) for path, _ in dataset.samples]
    transform = dataset.transform
    dataset.transform = lambda image: image  # the raw PIL image, as the datamodule decodes it
    try:
        images = [dataset[index][0] for index in range(len(dataset))]
    finally:
        dataset.transform = transform
    directory.mkdir()
    return [write_png(image, directory / f"{index}.png") for index, image in enumerate(images)]


def write_png(image: Image.Image, path: Path) -> Path:
    image.save(path)
    return path


@pytest.mark.parametrize("interpolation", ["bicubic", "bilinear"])
@pytest.mark.parametrize("source", sorted(SOURCES))
def test_prediction_tensors_equal_the_datamodules(tmp_path: Path, source: str, interpolation: str) -> None:
    overrides = SOURCES[source](tmp_path / "data")
    cfg = vision_config(f"data={source}", *TINY_MODEL, *overrides, f"data.interpolation={interpolation}")
    datamodule = instantiate(cfg.data, _convert_="all")
    datamodule.setup("fit")
    module = instantiate(cfg.module, model=model_kwargs(cfg), **datamodule.module_kwargs(), _convert_="all")
    checkpoint = tmp_path / "classifier.ckpt"
    torch.save({"hyper_parameters": dict(module.hparams), "state_dict": module.state_dict()}, checkpoint)
    classifier = load_classifier(checkpoint)  # weights_only: the data config is plain data

    config = data_config(classifier)
    assert config == datamodule.eval_data_config()
    assert config["interpolation"] == interpolation and config["img_size"] == 16
    test_set = datamodule.test_set
    paths = image_files(test_set, tmp_path / "images")
    batch = preprocess(classifier, [load_image(path) for path in paths])
    expected = torch.stack([test_set[index][0] for index in range(len(test_set))])
    assert batch.shape == (len(paths), 3, 16, 16)
    torch.testing.assert_close(batch, expected, rtol=0, atol=0)

    if source != "synthetic":  # its images are made at the model's size, so nothing is resized
        other = "bilinear" if interpolation == "bicubic" else "bicubic"
        resampled = eval_transform(**{**config, "interpolation": other})(load_image(paths[0]))
        assert not torch.equal(resampled, batch[0]), "the images are resized, so the interpolation matters"


def test_old_checkpoints_without_a_data_config_use_the_defaults(tmp_path: Path) -> None:
    from tests.vision.vision_testdata import write_classifier_checkpoint

    checkpoint = torch.load(write_classifier_checkpoint(tmp_path / "new.ckpt"), weights_only=True)
    for key in ("img_size", "interpolation", "crop_pct"):
        del checkpoint["hyper_parameters"][key]
    torch.save(checkpoint, tmp_path / "old.ckpt")
    classifier = load_classifier(tmp_path / "old.ckpt")
    assert data_config(classifier) == {
        "img_size": 16, "interpolation": "bicubic", "crop_pct": 1.0, "mean": [0.5] * 3, "std": [0.5] * 3
    }
    image = load_image(write_image(tmp_path / "photo.png", size=(30, 40)))
    assert image_transform(classifier)(image).shape == (3, 16, 16)
