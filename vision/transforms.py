"""Image preprocessing from timm: training augmentation (crop, flip, RandAugment, random erasing)
and the deterministic evaluation transform."""

from __future__ import annotations

from collections.abc import Sequence

from timm.data.transforms_factory import transforms_imagenet_eval, transforms_imagenet_train
from torchvision import transforms as T

CROPS = ("pad", "random_resized")


def train_transform(
    img_size: int,
    mean: Sequence[float],
    std: Sequence[float],
    crop: str = "pad",
    auto_augment: str | None = "rand-m9-n2-mstd0.5-inc1",
    re_prob: float = 0.25,
    hflip: float = 0.5,
    interpolation: str = "bicubic",
) -> T.Compose:
    """timm's training pipeline, with the crop chosen for the data.

    ``crop="pad"`` is the CIFAR recipe (resize to ``img_size``, pad by 1/8 and crop back, flip);
    ``crop="random_resized"`` is the ImageNet one (Inception-style random resized crop, flip).
    ``auto_augment`` is a timm policy string: ``rand-m9-n2-mstd0.5`` is RandAugment (Cubuk et al.
    2020) with magnitude 9 and 2 ops, ``augmix-...`` AugMix, ``original`` AutoAugment, None off.
    Random erasing (Zhong et al. 2020) with probability ``re_prob`` fills with per-pixel noise.
    """
    if crop not in CROPS:
        raise ValueError(f"unknown crop {crop!r}; choose one of {list(CROPS)}")
    primary, secondary, final = transforms_imagenet_train(
        img_size,
        hflip=hflip,
        color_jitter=0.0,
        auto_augment=auto_augment,
        interpolation=interpolation,
        mean=tuple(mean),
        std=tuple(std),
        re_prob=re_prob,
        re_mode="pixel",
        separate=True,
    )
    if crop == "pad":
        primary = T.Compose(
            [
                T.Resize((img_size, img_size), interpolation=T.InterpolationMode(interpolation)),
                T.RandomCrop(img_size, padding=img_size // 8),
                T.RandomHorizontalFlip(hflip),
            ]
        )
    return T.Compose([primary, secondary, final])


def eval_transform(
    img_size: int | tuple[int, int], mean: Sequence[float], std: Sequence[float], interpolation: str = "bicubic"
) -> T.Compose:
    """Resize the short side to ``img_size`` (an int) or to (height, width), center-crop, normalize."""
    return transforms_imagenet_eval(
        img_size, crop_pct=1.0, interpolation=interpolation, mean=tuple(mean), std=tuple(std)
    )
