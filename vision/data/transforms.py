"""Image preprocessing: any PIL image to 8-bit RGB, timm's training augmentation (crop, flip,
RandAugment, random erasing), the loader's uint8 share of it when the rest runs on the device
(:mod:`vision.data.batch_augment`) and the deterministic evaluation transform.

Augmentation strengths may be fixed numbers or :class:`SharedValue` s, which the training process
sets while the run goes (see :mod:`vision.recipe`) and every loader worker reads per image.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image
from timm.data.auto_augment import (
    AugmentOp,
    augment_and_mix_transform,
    auto_augment_transform,
    rand_augment_transform,
)
from timm.data.random_erasing import RandomErasing
from timm.data.transforms import MaybeToTensor, RandomResizedCropAndInterpolation, str_to_pil_interp
from timm.data.transforms_factory import transforms_imagenet_eval
from torchvision import transforms as T

from core.errors import InputError
from core.constraints import one_of
from vision.constraints import CROPS
from vision.recipe import FULL_POLICY

# Magnitudes of timm's AugmentOp beyond this many standard deviations from the mean (probability
# below 1e-23 per draw) are treated as unreachable when checking a policy.
REACHABLE_STD = 10.0
# Background of transparent pixels: what an image viewer shows on a white page.
ALPHA_BACKGROUND = (255, 255, 255)


def to_rgb(image: Image.Image) -> Image.Image:
    """Any PIL image as 8-bit RGB.

    Transparent images (RGBA, LA, PA, P with a transparent colour, premultiplied RGBa / La) are
    composited over white rather than losing their alpha to whatever colour hides under it;
    integer images (I;16, I;16B, I;16L, and I, the modes Pillow reads 16-bit PNG and TIFF files
    into) are scaled from 0..65535 to 0..255 and float images (F) from 0..1, where Pillow's own
    conversion would clip everything above 255 (or 1) to white; every other mode (L, 1, P, CMYK,
    YCbCr, LAB, HSV) goes through Pillow's ``convert("RGB")``.
    """
    if image.mode == "RGB":
        return image
    if image.mode == "La":  # premultiplied; Pillow converts it only by way of RGBa
        luminance, alpha = image.split()
        image = Image.merge("RGBa", (luminance, luminance, luminance, alpha))
    if image.mode in ("RGBA", "LA", "PA", "RGBa") or (image.mode == "P" and "transparency" in image.info):
        background = Image.new("RGBA", image.size, ALPHA_BACKGROUND + (255,))
        return Image.alpha_composite(background, image.convert("RGBA")).convert("RGB")
    if image.mode.startswith("I") or image.mode == "F":
        top = 1.0 if image.mode == "F" else 65535.0
        pixels = np.nan_to_num(np.asarray(image, dtype=np.float64), nan=0.0, posinf=top, neginf=0.0)
        gray = np.rint(np.clip(pixels, 0.0, top) * (255.0 / top)).astype(np.uint8)
        return Image.fromarray(gray).convert("RGB")
    return image.convert("RGB")


class ToRGB:
    """:func:`to_rgb` as a transform step."""

    def __call__(self, image: Image.Image) -> Image.Image:
        return to_rgb(image)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class SharedValue:
    """A number in shared memory: the training process sets it, and loader workers, forked or
    spawned, read the new value on their next image without being restarted."""

    def __init__(self, value: float = 0.0) -> None:
        self.tensor = torch.tensor(float(value), dtype=torch.float64).share_memory_()

    def get(self) -> float:
        return float(self.tensor)

    def set(self, value: float) -> None:
        self.tensor.fill_(float(value))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.get():g})"


def augment_hparams(img_size: int, mean: Sequence[float], interpolation: str) -> dict[str, Any]:
    """timm's auto-augment parameters for this image size: translations up to 45% of the side,
    the mean colour as fill, the resize interpolation (as ``transforms_imagenet_train`` sets them)."""
    return {
        "translate_const": int(img_size * 0.45),
        "img_mean": tuple(min(255, round(255 * value)) for value in mean),
        "interpolation": str_to_pil_interp(interpolation),
    }


def augment_ops(transform: Any) -> list[AugmentOp]:
    """The :class:`AugmentOp` s of a timm RandAugment, AugMix or AutoAugment transform."""
    if hasattr(transform, "policy"):  # AutoAugment: sub-policies of ops
        return [op for sub_policy in transform.policy for op in sub_policy]
    return list(transform.ops)


def fewest_posterize_bits(op: AugmentOp) -> int:
    """The fewest bits a posterize op can keep over the magnitudes it can draw (the level
    functions are monotone, so the ends of the range decide)."""
    upper = op.magnitude_max or 10.0
    if op.magnitude_std == math.inf:
        low, high = 0.0, op.magnitude
    elif op.magnitude_std > 0:
        low, high = op.magnitude - REACHABLE_STD * op.magnitude_std, op.magnitude + REACHABLE_STD * op.magnitude_std
    else:
        low = high = op.magnitude
    levels = (max(0.0, min(low, upper)), max(0.0, min(high, upper)))
    return min(op.level_fn(level, op.hparams)[0] for level in levels)


def policy_transform(policy: str, hparams: dict[str, Any]) -> Any:
    """timm's transform for an auto-augment policy string (``rand-...`` RandAugment,
    ``augmix-...`` AugMix, else AutoAugment), refused when it can posterize to 0 bits.

    timm maps the top magnitude 10 of its increasing posterize (``inc1``), and the low ones of
    the plain posterize, to 0 bits, which Pillow 13 refuses (and older Pillow turned into a black
    image); with ``mmax9`` the increasing op keeps at least 1 bit.
    """
    if policy.startswith("rand"):
        transform = rand_augment_transform(policy, hparams)
    elif policy.startswith("augmix"):
        transform = augment_and_mix_transform(policy, {**hparams, "translate_pct": 0.3})
    else:
        transform = auto_augment_transform(policy, hparams)
    for op in augment_ops(transform):
        if "Posterize" in op.name and fewest_posterize_bits(op) < 1:
            raise InputError(
                f"data.auto_augment={policy!r} can posterize images to 0 bits ({op!r}), which Pillow refuses; "
                "use a policy whose posterize keeps a bit, e.g. rand-m9-n2-mstd0.5-inc1-mmax9 (increasing ops, "
                "magnitudes capped below 10)"
            )
    return transform


class ScaledAugment:
    """An auto-augment policy whose op magnitudes are its own times a shared strength in [0, 1]
    (0 = off), read on every image."""

    def __init__(self, transform: Any, strength: SharedValue) -> None:
        self.transform = transform
        self.strength = strength
        self.ops = augment_ops(transform)
        self.full_magnitudes = [op.magnitude for op in self.ops]
        self.applied = 1.0

    def __call__(self, image: Image.Image) -> Image.Image:
        strength = self.strength.get()
        if strength <= 0.0:
            return image
        if strength != self.applied:
            for op, full in zip(self.ops, self.full_magnitudes):
                op.magnitude = full * strength
            self.applied = strength
        return self.transform(image)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(strength={self.strength.get():g}, {self.transform!r})"


class SharedErasing(RandomErasing):
    """timm's random erasing with its probability read from a :class:`SharedValue` on every
    image."""

    def __init__(self, probability: SharedValue, **kwargs: Any) -> None:
        super().__init__(probability.get(), **kwargs)
        self.shared_probability = probability

    def __call__(self, input: torch.Tensor) -> torch.Tensor:
        self.probability = self.shared_probability.get()
        return super().__call__(input) if self.probability > 0.0 else input


def policy_steps(
    img_size: int,
    mean: Sequence[float],
    auto_augment: str | None,
    interpolation: str,
    augment_strength: SharedValue | None,
) -> list[Callable]:
    """The auto-augment step of a training pipeline (none when ``auto_augment`` is None), its
    magnitudes scaled by ``augment_strength`` when given."""
    if not auto_augment:
        return []
    augment = policy_transform(auto_augment, augment_hparams(img_size, mean, interpolation))
    return [augment if augment_strength is None else ScaledAugment(augment, augment_strength)]


def train_transform(
    img_size: int,
    mean: Sequence[float],
    std: Sequence[float],
    crop: str = "pad",
    auto_augment: str | None = FULL_POLICY,
    re_prob: float | SharedValue = 0.25,
    hflip: float = 0.5,
    interpolation: str = "bicubic",
    augment_strength: SharedValue | None = None,
) -> T.Compose:
    """The training pipeline: RGB, crop and flip, auto-augment, tensor, normalize, random erasing.

    ``crop="pad"`` is the CIFAR recipe (resize to ``img_size``, pad by 1/8 and crop back, flip);
    ``crop="random_resized"`` is the ImageNet one (Inception-style random resized crop, flip).
    ``auto_augment`` is a timm policy string: ``rand-m9-n2-mstd0.5-inc1-mmax9`` is RandAugment
    (Cubuk et al. 2020), magnitude 9, 2 ops, ``augmix-...`` AugMix, ``original`` AutoAugment,
    None off; ``augment_strength`` scales its magnitudes (0 = off). Random erasing (Zhong et al.
    2020) with probability ``re_prob`` fills with per-pixel noise.
    """
    one_of(CROPS).require(crop, "crop")
    if crop == "pad":
        geometry: list[Callable] = [square_resize(img_size, interpolation), T.RandomCrop(img_size, padding=img_size // 8)]
    else:
        geometry = [RandomResizedCropAndInterpolation(img_size, interpolation=interpolation)]
    steps: list[Callable] = [ToRGB(), *geometry, T.RandomHorizontalFlip(hflip)]
    steps += policy_steps(img_size, mean, auto_augment, interpolation, augment_strength)
    steps += [MaybeToTensor(), T.Normalize(torch.tensor(mean), torch.tensor(std))]
    if isinstance(re_prob, SharedValue):
        steps.append(SharedErasing(re_prob, mode="pixel", device="cpu"))
    elif re_prob > 0:
        steps.append(RandomErasing(re_prob, mode="pixel", device="cpu"))
    return T.Compose(steps)


def uint8_transform(
    img_size: int,
    mean: Sequence[float],
    auto_augment: str | None = None,
    interpolation: str = "bicubic",
    augment_strength: SharedValue | None = None,
) -> T.Compose:
    """The loader's share of the training pipeline when the rest runs on the device
    (:class:`vision.data.batch_augment.BatchAugment`): RGB, resize to ``img_size`` square, the
    auto-augment policy when on, and the image as a uint8 tensor [3, img_size, img_size]."""
    steps: list[Callable] = [ToRGB(), square_resize(img_size, interpolation)]
    steps += policy_steps(img_size, mean, auto_augment, interpolation, augment_strength)
    return T.Compose([*steps, T.PILToTensor()])


def square_resize(img_size: int, interpolation: str = "bicubic") -> T.Resize:
    """The pad-crop recipe's resize: to ``img_size`` x ``img_size``, PIL to PIL (the training
    geometry before the crop; images held in memory are kept at it)."""
    return T.Resize((img_size, img_size), interpolation=T.InterpolationMode(interpolation))


class CropLongSide:
    """Crop the long side of a PIL image about its center to at most ``max_ratio`` times the short
    side. Before the evaluation's resize of the short side and its square center crop, it keeps
    every pixel that crop keeps and the resampling's neighbours (the crop's position can move by
    a fraction of a pixel); an image of extreme aspect (1 x 80M pixels) is not first resized to
    billions of pixels."""

    def __init__(self, max_ratio: float = 4.0) -> None:
        self.max_ratio = max_ratio

    def __call__(self, image: Image.Image) -> Image.Image:
        width, height = image.size
        longest = max(1, math.ceil(self.max_ratio * min(width, height)))
        if max(width, height) <= longest:
            return image
        if width > height:
            left = (width - longest) // 2
            return image.crop((left, 0, left + longest, height))
        top = (height - longest) // 2
        return image.crop((0, top, width, top + longest))


def eval_geometry(img_size: int | Sequence[int], interpolation: str = "bicubic", crop_pct: float = 1.0) -> T.Compose:
    """Resize to cover ``img_size / crop_pct`` keeping the aspect, and center-crop ``img_size`` (an
    int, or a (height, width) pair), PIL to PIL: timm's evaluation geometry, after
    :class:`CropLongSide` (at four times the target's own aspect)."""
    img_size = tuple(img_size) if isinstance(img_size, Sequence) else img_size
    steps = transforms_imagenet_eval(img_size, crop_pct=crop_pct, interpolation=interpolation).transforms
    geometry = [step for step in steps if not isinstance(step, (MaybeToTensor, T.Normalize))]
    sides = img_size if isinstance(img_size, tuple) else (img_size, img_size)
    return T.Compose([CropLongSide(4.0 * max(sides) / min(sides)), *geometry])


def eval_transform(
    img_size: int | Sequence[int],
    mean: Sequence[float],
    std: Sequence[float],
    interpolation: str = "bicubic",
    crop_pct: float = 1.0,
) -> T.Compose:
    """RGB, :func:`eval_geometry`, tensor, normalize (timm's evaluation transform)."""
    geometry = eval_geometry(img_size, interpolation, crop_pct)
    return T.Compose([ToRGB(), *geometry.transforms, MaybeToTensor(), T.Normalize(torch.tensor(mean), torch.tensor(std))])
