"""The vision config's rules: which constraint each key of ``conf/vision.yaml`` (and its presets)
follows, and the rules between keys. ``core.training.commands.config_check`` applies them, with the rules
every training config shares, before torch is imported."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from core.constraints import (
    AUTO,
    DECAY,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    POSITIVE_INT,
    PROBABILITY,
    optional,
    or_auto,
    require_sincos_width,
)
from core.errors import InputError
from core.training.commands.config_check import Rule
from vision.constraints import (
    STEM,
    AUGMENT_ON,
    IN_MEMORY,
    NUM_CLASSES,
    CROP,
    HOLDOUT,
    POOL,
    POS_EMBED,
    WEIGHT_INIT,
    require_pad_crop,
    require_patch_grid,
)
from vision.recipe import crop_for

RULES: tuple[Rule, ...] = (
    Rule(("model.img_size", "model.patch_size", "model.in_chans", "model.depth", "model.stem_convs"), POSITIVE_INT),
    Rule(("model.mlp_ratio", "model.norm_eps"), POSITIVE),
    Rule(("model.layer_scale",), optional(POSITIVE)),
    Rule(("model.drop_path",), or_auto(FRACTION)),
    Rule(("model.dropout", "module.label_smoothing"), FRACTION),
    Rule(("model.pool",), POOL),
    Rule(("model.pos_embed",), POS_EMBED),
    Rule(("model.weight_init",), WEIGHT_INIT),
    Rule(("model.stem",), STEM),
    Rule(("module.mixup_alpha", "module.cutmix_alpha"), or_auto(NON_NEGATIVE)),
    Rule(("module.warmup_epochs",), NON_NEGATIVE),
    Rule(("module.layer_decay",), optional(DECAY)),
    Rule(("module.min_lr_ratio", "module.mixup_prob", "module.mixup_switch_prob"), PROBABILITY),
    Rule(("data.batch_size",), or_auto(POSITIVE_INT)),  # auto: sized from the budget (vision.data.batch_size)
    Rule(("data.num_classes",), NUM_CLASSES),
    Rule(("data.train_size", "data.test_size"), POSITIVE_INT),
    Rule(("data.val_size",), HOLDOUT),
    Rule(("data.hflip", "data.max_unreadable"), PROBABILITY),
    Rule(("data.re_prob",), or_auto(PROBABILITY)),
    Rule(("data.crop",), CROP),
    Rule(("data.augment_on",), AUGMENT_ON),
    Rule(("data.in_memory",), IN_MEMORY),
)


def image_grid(cfg: DictConfig) -> None:
    """``model.img_size`` is a whole number of ``model.patch_size`` patches."""
    size, patch = OmegaConf.select(cfg, "model.img_size"), OmegaConf.select(cfg, "model.patch_size")
    if size is not None and patch is not None:
        require_patch_grid(size, patch, ("model.img_size", "model.patch_size"))


def image_shape(cfg: DictConfig) -> None:
    """The model takes the images the data gives: RGB (every datamodule converts to it), so
    ``model.in_chans`` is 3, and ``data.img_size`` is ``model.img_size`` unless the model takes any
    size (``model.dynamic_img_size``)."""
    channels = OmegaConf.select(cfg, "model.in_chans")
    if channels is not None and channels != 3:
        raise InputError(
            f"model.in_chans={channels}, but the data gives RGB images (grey and RGBA images are converted to "
            "RGB); set model.in_chans=3"
        )
    size, model_size = OmegaConf.select(cfg, "data.img_size"), OmegaConf.select(cfg, "model.img_size")
    if size is not None and model_size is not None and size != model_size and not OmegaConf.select(cfg, "model.dynamic_img_size"):
        raise InputError(
            f"data.img_size={size} is not model.img_size={model_size}, and the model takes only its own size; "
            "leave data.img_size out (it follows model.img_size) or set model.dynamic_img_size=true"
        )


def sincos_width(cfg: DictConfig) -> None:
    """``model.dim`` is a multiple of 4 under fixed 2D sin-cos positions."""
    dim, heads = OmegaConf.select(cfg, "model.dim"), OmegaConf.select(cfg, "model.num_heads") or 1
    if OmegaConf.select(cfg, "model.pos_embed") == "sincos" and dim is not None:
        require_sincos_width(dim, heads, "model.dim", " or model.pos_embed=learned")


def mixup_pairs(cfg: DictConfig) -> None:
    """Mixup/CutMix pair the images of a batch, so ``data.batch_size`` is even while they are on
    (``auto`` always is)."""
    size = OmegaConf.select(cfg, "data.batch_size")
    alphas = [OmegaConf.select(cfg, f"module.{key}") or 0 for key in ("mixup_alpha", "cutmix_alpha")]
    may_mix = any(alpha == AUTO or alpha > 0 for alpha in alphas)  # auto mixes in runs of 30+ epochs
    if isinstance(size, int) and size % 2 and may_mix and (OmegaConf.select(cfg, "module.mixup_prob") or 0) > 0:
        raise InputError(
            f"data.batch_size={size} must be even while Mixup/CutMix is on (they pair the images of a batch); "
            f"set data.batch_size={size + 1} or module.mixup_prob=0"
        )


def pad_crop(cfg: DictConfig) -> None:
    """Augmentation on the device, and images held in memory, need the pad crop (``data.crop``
    pad, or auto at up to 64 px)."""
    crop, size = OmegaConf.select(cfg, "data.crop"), OmegaConf.select(cfg, "model.img_size")
    if crop == AUTO and isinstance(size, int):
        crop = crop_for(size)
    if crop != AUTO:
        require_pad_crop(crop, OmegaConf.select(cfg, "data.augment_on"), OmegaConf.select(cfg, "data.in_memory"))


def image_folder(cfg: DictConfig) -> None:
    """``data.root`` of an image folder is a directory with a ``train/`` folder in it."""
    if OmegaConf.select(cfg, "data._target_") != "vision.data.folder.ImageFolderDataModule":
        return
    root = OmegaConf.select(cfg, "data.root", throw_on_missing=False)
    fix = "set data.root=DIR, where DIR/train/<class>/ holds the training images"
    if root is None:
        raise InputError(f"data=imagefolder needs data.root; {fix}")
    if not Path(root).is_dir():
        raise InputError(f"data.root={root} is not a directory; {fix}")
    if not (Path(root) / "train").is_dir():
        raise InputError(f"data.root={root} has no train/ folder; {fix}")


RELATIONS: tuple[Callable[[DictConfig], None], ...] = (image_grid, image_shape, sincos_width, mixup_pairs, pad_crop, image_folder)
