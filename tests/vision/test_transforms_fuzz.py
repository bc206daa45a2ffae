"""Every image a user can have goes through the real training transform of every vision data
config without an exception: all PIL modes, sizes from 1x1 to 4000x3000, RandAugment at full
strength (where timm's posterize once reached 0 bits, which Pillow 13 refuses)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from PIL import Image
from timm.data.transforms_factory import transforms_imagenet_eval
from torchvision import transforms as T

from core.errors import InputError
from tests.vision.vision_testdata import CONF
from vision.data.datamodule import ImageDataModule, usable_cpus
from vision.recipe import FULL_POLICY, regularization
from vision.data.transforms import augment_hparams, eval_geometry, policy_transform, to_rgb

# The common image modes, then rarer ones Pillow decodes files into (LAB last: converting it
# builds a colour-management transform, 30 ms a time).
MODES = ["RGB", "L", "LA", "RGBA", "P", "P+transparency", "I;16", "CMYK", "1"]
MORE_MODES = ["PA", "I;16B", "I", "F", "YCbCr", "HSV", "RGBX", "RGBa", "La", "LAB"]
HUGE = [(4000, 3000), (3000, 4000), (4000, 1), (1, 3000)]
BYTES_PER_PIXEL = {"I;16": 2, "I;16B": 2, "I": 4, "F": 4}


def vision_data_configs() -> list[str]:
    """Every data config of conf/ whose datamodule is a vision one."""
    names = []
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for path in sorted((CONF / "data").glob("*.yaml")):
            cfg = compose("vision", overrides=[f"data={path.stem}"])
            if str(cfg.data.get("_target_", "")).startswith("vision."):
                names.append(path.stem)
    return names


DATA_CONFIGS = vision_data_configs()


def training_datamodule(name: str, overrides: tuple[str, ...] = ()) -> ImageDataModule:
    """The datamodule of ``data=name`` as composed from conf/, with the regularization its default
    run length gives (the full recipe at the default 100 epochs, budget.epochs)."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("vision", overrides=[f"data={name}", "++data.root=/unused", *overrides])
    datamodule = instantiate(cfg.data, _convert_="all")
    datamodule.apply_regularization(regularization(cfg.budget.epochs))
    return datamodule


def make_image(mode: str, size: tuple[int, int], rng: np.random.Generator) -> Image.Image:
    """An image of random content in ``mode`` (``P+transparency``: a palette with a transparent
    entry), ``size`` = (width, height)."""
    width, height = size
    if mode == "F":  # floats in and around [0, 1], with some NaN and infinities
        pixels = rng.uniform(-0.5, 1.5, size=(height, width)).astype(np.float32)
        odd = rng.integers(0, pixels.size, size=max(1, pixels.size // 50))
        pixels.flat[odd] = rng.choice([np.nan, np.inf, -np.inf])
        return Image.fromarray(pixels)
    base = "P" if mode == "P+transparency" else mode
    if base == "1":
        data = rng.bytes((width + 7) // 8 * height)
    else:
        data = rng.bytes(width * height * BYTES_PER_PIXEL.get(base, len(Image.new(base, (1, 1)).getbands())))
    image = Image.frombytes(base, size, data)
    if base in ("P", "PA"):
        image.putpalette(rng.bytes(768))
    if mode == "P+transparency":
        image.info["transparency"] = int(rng.integers(0, 256))
    return image


def fuzz_image(index: int, seed: int) -> Image.Image:
    """Image ``index`` of a fuzz set: the huge sizes first, then one in fifty between 65 and 640
    pixels a side and the rest between 1 and 64 (sides drawn independently); modes cycle
    through MODES, every tenth image through MORE_MODES instead (seven LAB images in 20,000)."""
    rng = np.random.default_rng([seed, index])
    mode = MORE_MODES[index // 10 % len(MORE_MODES)] if index % 10 == 9 else MODES[index % len(MODES)]
    if index < len(HUGE):
        size = HUGE[index]
    elif index % 50 == 0:
        size = (int(rng.integers(65, 641)), int(rng.integers(65, 641)))
    else:
        size = (int(rng.integers(1, 65)), int(rng.integers(1, 65)))
    return make_image(mode, size, rng)


class FuzzImages(torch.utils.data.Dataset):
    """``count`` fuzz images through ``transform``, made in the loader workers."""

    def __init__(self, count: int, seed: int, transform: object) -> None:
        self.count, self.seed, self.transform = count, seed, transform

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.transform(fuzz_image(index, self.seed))


def push_through(datamodule: ImageDataModule, count: int, seed: int) -> int:
    """Run the training transform on ``count`` fuzz images in a loader process per usable CPU;
    check every output; return how many came out."""
    side = datamodule.img_size
    dataset = FuzzImages(count, seed, datamodule.train_tf)
    done = 0
    for batch in torch.utils.data.DataLoader(dataset, batch_size=250, num_workers=usable_cpus()):
        if datamodule.batch_augment is not None:  # the device's share of the pipeline
            batch = datamodule.batch_augment(batch)
        assert batch.shape[1:] == (3, side, side) and bool(torch.isfinite(batch).all())
        done += len(batch)
    return done


def test_every_vision_data_config_is_fuzzed() -> None:
    assert {"cifar10", "cifar100", "imagefolder", "synthetic"} <= set(DATA_CONFIGS)


# Where the augmentation runs: the default (auto: on the batch with the pad crop) and every step
# per image in the loader workers.
PLACES = ((), ("data.augment_on=loader",))


def distinct_pipelines(names: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    """The first (config, overrides) of ``names`` x :data:`PLACES` for each training pipeline,
    normalization constants aside (``cifar10`` and ``cifar100`` differ in their mean and std only)."""
    kept: dict[str, tuple[str, tuple[str, ...]]] = {}
    for name in names:
        for overrides in PLACES:
            datamodule = training_datamodule(name, overrides)
            key = re.sub(r"Normalize\(.*", "Normalize", repr((datamodule.train_tf, datamodule.batch_augment is None)))
            kept.setdefault(key, (name, overrides))
    return list(kept.values())


@pytest.mark.slow
@pytest.mark.parametrize(("name", "overrides"), distinct_pipelines(DATA_CONFIGS))
def test_twenty_thousand_images_of_every_mode_and_size_pass_the_training_transform(name: str, overrides: tuple[str, ...]) -> None:
    datamodule = training_datamodule(name, overrides)
    assert push_through(datamodule, 20_000, seed=len(name)) == 20_000


@pytest.mark.parametrize("name", DATA_CONFIGS)
def test_each_mode_at_extreme_sizes_passes_training_and_evaluation(name: str) -> None:
    datamodule = training_datamodule(name)
    for mode in MODES + MORE_MODES:
        for size in [(1, 1), (1, 37), (640, 3), (33, 31)]:
            image = make_image(mode, size, np.random.default_rng(0))
            assert datamodule.train_tf(image).shape == datamodule.eval_tf(image).shape == (3, 32, 32)


def test_the_evaluation_crops_an_extreme_long_side_before_it_resizes_and_keeps_timms_pixels() -> None:
    """1 x 1M pixels reach the resize as 1 x 4 (not 32 x 32M); a 10 x 500 image gives the pixels
    of timm's evaluation geometry."""
    image = Image.new("RGB", (1, 1_000_000), (200, 10, 10))
    for step in eval_geometry(32).transforms:
        if isinstance(step, T.Resize):
            assert max(image.size) <= 4 * min(image.size)
        image = step(image)
    assert image.size == (32, 32) and image.getpixel((16, 16)) == (200, 10, 10)
    long = make_image("RGB", (500, 10), np.random.default_rng(0))
    timm_steps = transforms_imagenet_eval(32, crop_pct=1.0, interpolation="bicubic").transforms[:2]  # resize, crop
    assert np.array_equal(np.asarray(eval_geometry(32)(long)), np.asarray(T.Compose(timm_steps)(long)))


def test_large_images_take_the_random_resized_crop() -> None:
    datamodule = training_datamodule("imagefolder", ("model=vit_tiny_patch16_224",))
    assert "RandomResizedCrop" in repr(datamodule.train_tf)
    assert push_through(datamodule, 200, seed=1) == 200


def test_full_strength_posterize_keeps_at_least_one_bit() -> None:
    """The recipe's policy at the largest magnitude it can draw, on every image."""
    hparams = augment_hparams(32, (0.5, 0.5, 0.5), "bicubic")
    augment = policy_transform(FULL_POLICY, hparams)
    posterize = next(op for op in augment.ops if op.name == "PosterizeIncreasing")
    posterize.prob, posterize.magnitude_std, posterize.magnitude = 1.0, 0.0, 100.0  # clipped to mmax 9
    image = make_image("RGB", (8, 8), np.random.default_rng(0))
    assert set(np.unique(np.asarray(posterize(image)))) <= {0, 128}  # 1 bit kept


@pytest.mark.parametrize("policy", ["rand-m9-n2-mstd0.5-inc1", "rand-m2-n2-mstd0.5", "v0", "rand-m9-mstd101"])
def test_policies_that_reach_zero_bits_are_refused_before_training(policy: str) -> None:
    with pytest.raises(InputError, match=r"data.auto_augment=.* can posterize images to 0 bits"):
        policy_transform(policy, augment_hparams(32, (0.5, 0.5, 0.5), "bicubic"))


def test_sixteen_bit_images_are_scaled_not_clipped() -> None:
    ramp = np.array([[0, 257 * 64, 257 * 128, 65535]], dtype=np.uint16)
    assert np.asarray(to_rgb(Image.fromarray(ramp)))[0, :, 0].tolist() == [0, 64, 128, 255]
    assert Image.fromarray(ramp).convert("RGB").getpixel((1, 0)) == (255, 255, 255)  # what Pillow alone does


def test_transparent_pixels_become_white_and_opaque_ones_keep_their_colour() -> None:
    rgba = Image.new("RGBA", (2, 1))
    rgba.putpixel((0, 0), (10, 20, 30, 0))
    rgba.putpixel((1, 0), (10, 20, 30, 255))
    assert [to_rgb(rgba).getpixel((x, 0)) for x in range(2)] == [(255, 255, 255), (10, 20, 30)]
    gray = Image.new("LA", (1, 1), (0, 128))
    assert to_rgb(gray).getpixel((0, 0)) == (127, 127, 127)


def test_cmyk_palette_and_one_bit_images_convert_as_pillow_does() -> None:
    for mode in ("CMYK", "P", "1", "L"):
        image = make_image(mode, (5, 4), np.random.default_rng(2))
        assert to_rgb(image).tobytes() == image.convert("RGB").tobytes()
