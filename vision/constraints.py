"""What the Vision Transformer and its data accept, stated once and without torch.

``VisionTransformer``, ``PatchEmbed`` and the transforms check their arguments with these, and
``python -m vision.train`` checks a composed config with the same ones (``vision.config_rules``)
before torch is imported.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.constraints import AUTO, Check, is_number, one_of, whole

POOLS = ("cls", "mean", "seq")  # vision.model.VisionTransformer.forward_head
POS_EMBEDS = ("learned", "sincos")
POOL, POS_EMBED = one_of(POOLS), one_of(POS_EMBEDS)
WEIGHT_INITS = ("timm", "mimetic")  # vision.model.VisionTransformer.init_weights
WEIGHT_INIT = one_of(WEIGHT_INITS)
STEMS = ("patch", "conv")  # vision.model.VisionTransformer's token embedding
STEM = one_of(STEMS)
NUM_CLASSES = whole(2)  # a classifier tells at least two classes apart
CROPS = ("pad", "random_resized")  # vision.data.transforms.train_transform
CROP = one_of((*CROPS, AUTO))  # auto: chosen by the image size (vision.recipe)
AUGMENT_PLACES = ("loader", "device")  # vision.data.datamodule.ImageDataModule's augment_on
AUGMENT_ON = one_of((*AUGMENT_PLACES, AUTO))  # auto: device with the pad crop (augment_place)
IN_MEMORY = one_of((AUTO, True, False))  # vision.data.folder.ImageFolderDataModule's in_memory
HOLDOUT = Check(
    "a fraction in (0, 1) or a count of at least 1",
    lambda v: is_number(v) and (0 < v < 1 or (v >= 1 and float(v).is_integer())),
)


def require_patch_grid(
    img_size: int | Sequence[int], patch_size: int, names: tuple[str, str] = ("img_size", "patch_size")
) -> None:
    """Each side of ``img_size`` is a whole number of ``patch_size`` patches (the patch grid of
    Dosovitskiy et al. 2021, Eq. 1: N = HW / P^2)."""
    for side in (img_size, img_size) if isinstance(img_size, int) else img_size:
        if side % patch_size:
            raise ValueError(
                f"{names[0]}={side} is not a multiple of {names[1]}={patch_size}, so the image does not split "
                f"into whole patches; set {names[0]}={max(patch_size, round(side / patch_size) * patch_size)} "
                f"or a patch size that divides {side}"
            )


def augment_place(augment_on: str, crop: str) -> str:
    """Where the training augmentation runs: ``augment_on``, or for ``auto`` the device when
    ``crop`` (resolved) is ``pad``, whose crop, flip, normalization and erasing have a batched
    form (vision.data.batch_augment), and the loader workers for any other crop."""
    if augment_on != AUTO:
        return augment_on
    return "device" if crop == "pad" else "loader"


def require_pad_crop(crop: str, augment_on: str = "loader", in_memory: str | bool = AUTO, error: type[ValueError] = ValueError) -> None:
    """``crop`` (resolved from ``auto``) is ``pad``, the CIFAR recipe, when ``augment_on`` is
    ``device`` (the device pads and crops) or ``in_memory`` is true (the held images are resized
    to the model's size before any crop)."""
    if crop == "pad":
        return
    if augment_on == "device":
        raise error(
            f"data.augment_on=device pads and crops (the CIFAR recipe), not data.crop={crop}; "
            "set data.crop=pad or data.augment_on=loader"
        )
    if in_memory is True:
        raise error(
            f"data.in_memory=true holds images at the model's size, which data.crop={crop} would crop from the "
            "full image; set data.crop=pad or data.in_memory=auto (files are read for other crops)"
        )


def require_pool(pool: str, pos_embed: str, class_token: bool) -> None:
    """``pool`` and ``pos_embed`` are known names; ``cls`` pooling has a class token to read."""
    POOL.require(pool, "pool")
    POS_EMBED.require(pos_embed, "pos_embed")
    if pool == "cls" and not class_token:
        raise ValueError("pool='cls' needs class_token=True; use pool='mean' without a class token")
