"""Config values checked before any work starts: no download, no file read, no model built.

:func:`validate_config` runs the table :data:`RULES` over a composed training config. A rule
names config keys and what their values must be; it applies to the keys the config has (the
heads and data choices have different ones). Relations between keys (``img_size`` a multiple
of ``patch_size``, ``dim`` divisible by ``num_heads``, ...) and paths that must exist follow in
:data:`RELATIONS`. The first broken rule raises :class:`core.training.errors.InputError` naming the key,
the value and the fix.

The valid choices in :data:`CHOICES` and :data:`PRECISIONS` are copies of the names the code
accepts (``vision.model.POOLS``, Lightning's precision flags, ...), so that a refused value costs
no import of the heads or of Lightning; ``tests/core/test_validation.py`` checks each copy
against its source.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from core.training.errors import InputError

MISSING = object()


@dataclass(frozen=True)
class Check:
    """A test of one value and the words for what it requires."""

    requirement: str
    test: Callable[[Any], bool]


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def whole(least: int) -> Check:
    """An integer of at least ``least``."""
    return Check(f"a whole number of at least {least}", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= least)


def optional(check: Check) -> Check:
    """``check``, or null."""
    return Check(f"{check.requirement} or null", lambda v: v is None or check.test(v))


def or_auto(check: Check) -> Check:
    """``check``, or ``auto`` (sized by the head, e.g. to the run's length)."""
    return Check(f"{check.requirement}, or auto", lambda v: v == "auto" or check.test(v))


def or_minus_one(check: Check) -> Check:
    """``check``, or -1 for no limit."""
    return Check(f"{check.requirement}, or -1 for no limit", lambda v: v == -1 or check.test(v))


def one_of(names: tuple[Any, ...]) -> Check:
    """One of ``names``."""
    return Check(f"one of {', '.join(map(str, names))}", lambda v: v in names)


# Config key -> the names its code accepts (the source of each in its comment).
CHOICES: dict[str, tuple[str, ...]] = {
    "model.pool": ("cls", "mean"),  # vision.model.POOLS
    "model.pos_embed": ("learned", "sincos"),  # vision.model.POS_EMBEDS
    "model.activation": ("relu", "gelu"),  # core.feedforward.ACTIVATIONS
    "data.crop": ("pad", "random_resized", "auto"),  # vision.transforms.CROPS, or auto (vision.recipe)
    "data.corpus": ("toy", "files", "hf", "gettext"),  # nlp.datamodule.CORPORA
}
# Every `precision` the installed Lightning accepts (lightning.fabric.connector._PRECISION_INPUT).
PRECISIONS: tuple[Any, ...] = (
    "transformer-engine", "transformer-engine-float16", "16-true", "16-mixed", "bf16-true", "bf16-mixed",
    "32-true", "64-true", "64", "32", "16", "bf16", 64, 32, 16,
)


def is_duration(value: Any) -> bool:
    """Lightning's ``max_time``: ``"DD:HH:MM:SS"`` or a mapping of ``timedelta`` arguments."""
    if isinstance(value, str):
        return re.fullmatch(r"\s*\d+:\d+:\d+:\d+\s*", value) is not None
    return isinstance(value, dict) and all(is_number(v) and v >= 0 for v in value.values())


POSITIVE_INT = whole(1)
NON_NEGATIVE_INT = whole(0)
POSITIVE = Check("a number above 0", lambda v: is_number(v) and v > 0)
NON_NEGATIVE = Check("a number of at least 0", lambda v: is_number(v) and v >= 0)
FRACTION = Check("a number in [0, 1)", lambda v: is_number(v) and 0 <= v < 1)
PROBABILITY = Check("a number in [0, 1]", lambda v: is_number(v) and 0 <= v <= 1)
BETAS = Check("two numbers in [0, 1), e.g. [0.9, 0.999]", lambda v: isinstance(v, list) and len(v) == 2 and all(FRACTION.test(b) for b in v))
HOLDOUT = Check("a fraction in (0, 1) or a count of at least 1", lambda v: is_number(v) and (0 < v < 1 or (v >= 1 and float(v).is_integer())))
PRECISION = Check("a precision Lightning knows, e.g. 32-true, bf16-mixed or 16-mixed", lambda v: v in PRECISIONS)
DURATION = Check('null or a duration "DD:HH:MM:SS", e.g. "00:02:00:00"', lambda v: v is None or is_duration(v))


@dataclass(frozen=True)
class Rule:
    """``check`` on each of ``keys`` present in the config."""

    keys: Sequence[str]
    check: Check


RULES: tuple[Rule, ...] = (
    Rule(("seed",), whole(0)),
    Rule(("trainer.max_epochs", "trainer.max_steps"), or_minus_one(optional(POSITIVE_INT))),
    Rule(("trainer.min_epochs", "trainer.min_steps"), optional(NON_NEGATIVE_INT)),
    Rule(("trainer.max_time",), DURATION),
    Rule(("trainer.accumulate_grad_batches", "trainer.log_every_n_steps", "trainer.num_nodes"), POSITIVE_INT),
    Rule(("trainer.check_val_every_n_epoch",), optional(POSITIVE_INT)),
    Rule(("trainer.gradient_clip_val",), optional(NON_NEGATIVE)),
    Rule(("trainer.precision",), PRECISION),
    Rule(("budget.max_warmup_fraction",), PROBABILITY),
    Rule(("callbacks.periodic_checkpoint.every_n_minutes",), optional(POSITIVE)),
    Rule(("callbacks.progress_bar.every_n_seconds",), NON_NEGATIVE),
    Rule(("callbacks.periodic_checkpoint.every_n_train_steps",), optional(POSITIVE_INT)),
    Rule(("module.lr", "module.eps"), POSITIVE),
    Rule(("module.weight_decay", "module.length_penalty"), NON_NEGATIVE),
    Rule(("module.mixup_alpha", "module.cutmix_alpha"), or_auto(NON_NEGATIVE)),
    Rule(("module.warmup_steps",), POSITIVE_INT),  # the inverse square root divides by it
    Rule(("module.warmup_epochs",), NON_NEGATIVE),
    Rule(("module.label_smoothing",), FRACTION),
    Rule(("module.min_lr_ratio", "module.cooldown_fraction", "module.mixup_prob", "module.mixup_switch_prob"), PROBABILITY),
    Rule(("module.betas",), BETAS),
    Rule(("module.beam_size", "module.bleu_every_n_epochs"), POSITIVE_INT),
    Rule(("module.max_decode_len",), optional(POSITIVE_INT)),
    Rule(
        ("model.img_size", "model.patch_size", "model.in_chans", "model.dim", "model.depth", "model.num_heads",
         "model.encoder_depth", "model.decoder_depth", "model.ffn_dim"),
        POSITIVE_INT,
    ),
    Rule(("model.max_len",), whole(2)),
    Rule(("model.mlp_ratio", "model.norm_eps"), POSITIVE),
    Rule(("model.layer_scale",), optional(POSITIVE)),
    Rule(("model.dropout", "model.attn_dropout"), FRACTION),
    Rule(("model.drop_path",), or_auto(FRACTION)),
    Rule(
        ("data.batch_size", "data.repeat", "data.num_classes",
         "data.train_size", "data.test_size"),
        POSITIVE_INT,
    ),
    Rule(("data.max_tokens", "data.pad_to_multiple"), or_auto(POSITIVE_INT)),
    Rule(("data.vocab_size",), whole(260)),  # byte-level BPE: 256 byte symbols and 4 special tokens
    Rule(("data.min_frequency", "data.join_words"), NON_NEGATIVE_INT),
    Rule(("data.num_workers",), optional(NON_NEGATIVE_INT)),
    Rule(("data.max_train_pairs",), optional(POSITIVE_INT)),
    Rule(("data.val_size",), HOLDOUT),
    Rule(("data.hflip", "data.max_unreadable"), PROBABILITY),
    Rule(("data.re_prob",), or_auto(PROBABILITY)),
    *(Rule((key,), one_of(names)) for key, names in CHOICES.items()),
)


def value_text(value: Any) -> str:
    return "null" if value is None else repr(value) if isinstance(value, str) else str(value)


def check_rules(cfg: DictConfig) -> None:
    """Every rule of :data:`RULES` on the keys ``cfg`` has."""
    for rule in RULES:
        for key in rule.keys:
            value = plain(OmegaConf.select(cfg, key, default=MISSING, throw_on_missing=False))
            if value is not MISSING and not rule.check.test(value):
                raise InputError(
                    f"{key} must be {rule.check.requirement}, got {value_text(value)}; "
                    f"override it on the command line ({key}=...)"
                )


def plain(value: Any) -> Any:
    """OmegaConf lists and mappings as Python ones."""
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def image_grid(cfg: DictConfig) -> None:
    """``model.img_size`` is a whole number of ``model.patch_size`` patches (the patch grid)."""
    size, patch = OmegaConf.select(cfg, "model.img_size"), OmegaConf.select(cfg, "model.patch_size")
    if size is not None and patch is not None and size % patch:
        raise InputError(
            f"model.img_size={size} is not a multiple of model.patch_size={patch}, so the image does not split "
            f"into whole patches; set model.img_size={max(patch, round(size / patch) * patch)} or a patch size "
            f"that divides {size}"
        )


def head_width(cfg: DictConfig) -> None:
    """``model.dim`` splits evenly over ``model.num_heads`` attention heads."""
    dim, heads = OmegaConf.select(cfg, "model.dim"), OmegaConf.select(cfg, "model.num_heads")
    if dim is not None and heads is not None and dim % heads:
        divisors = [h for h in range(1, dim + 1) if dim % h == 0]
        nearest = min(divisors, key=lambda h: abs(h - heads))
        raise InputError(
            f"model.dim={dim} is not divisible by model.num_heads={heads}, so the heads cannot share the width "
            f"evenly; set model.num_heads={nearest} or model.dim={max(heads, round(dim / heads) * heads)}"
        )


def sincos_width(cfg: DictConfig) -> None:
    """``model.dim`` is a multiple of 4 under fixed 2D sin-cos positions (``core.sincos_2d``:
    sin and cos of the column and of the row, a quarter of the width each)."""
    dim, heads = OmegaConf.select(cfg, "model.dim"), OmegaConf.select(cfg, "model.num_heads") or 1
    if OmegaConf.select(cfg, "model.pos_embed") == "sincos" and dim is not None and dim % 4:
        step = math.lcm(4, heads)  # the suggested width also splits over the heads
        raise InputError(
            f"model.dim={dim} is not a multiple of 4, which the fixed 2D sin-cos positions (model.pos_embed=sincos) "
            f"need; set model.dim={max(step, round(dim / step) * step)} or model.pos_embed=learned"
        )


def mixup_pairs(cfg: DictConfig) -> None:
    """Mixup/CutMix pair the images of a batch, so ``data.batch_size`` is even while they are on."""
    size = OmegaConf.select(cfg, "data.batch_size")
    alphas = [OmegaConf.select(cfg, f"module.{key}") or 0 for key in ("mixup_alpha", "cutmix_alpha")]
    may_mix = any(alpha == "auto" or alpha > 0 for alpha in alphas)  # auto mixes in runs of 30+ epochs
    if size and size % 2 and may_mix and (OmegaConf.select(cfg, "module.mixup_prob") or 0) > 0:
        raise InputError(
            f"data.batch_size={size} must be even while Mixup/CutMix is on (they pair the images of a batch); "
            f"set data.batch_size={size + 1} or module.mixup_prob=0"
        )


def image_folder(cfg: DictConfig) -> None:
    """``data.root`` of an image folder is a directory with a ``train/`` folder in it."""
    if OmegaConf.select(cfg, "data._target_") != "vision.folder.ImageFolderDataModule":
        return
    root = OmegaConf.select(cfg, "data.root", throw_on_missing=False)
    fix = "set data.root=DIR, where DIR/train/<class>/ holds the training images"
    if root is None:
        raise InputError(f"data=imagefolder needs data.root; {fix}")
    if not Path(root).is_dir():
        raise InputError(f"data.root={root} is not a directory; {fix}")
    if not (Path(root) / "train").is_dir():
        raise InputError(f"data.root={root} has no train/ folder; {fix}")


def corpus_files(cfg: DictConfig) -> None:
    """The corpus paths of ``data=files`` exist: a TSV file, or a prefix P with files P.SRC and P.TGT."""
    if OmegaConf.select(cfg, "data.corpus") != "files":
        return
    src, tgt = OmegaConf.select(cfg, "data.src_lang"), OmegaConf.select(cfg, "data.tgt_lang")
    for split in ("train", "val", "test"):
        path = OmegaConf.select(cfg, f"data.{split}", throw_on_missing=False)
        if path is None:
            if split != "test":
                raise InputError(f"data=files needs data.{split}=PATH (a TSV file or a prefix P of files P.{src} and P.{tgt})")
            continue
        if not Path(path).is_file() and not all(Path(f"{path}.{lang}").is_file() for lang in (src, tgt)):
            raise InputError(
                f"data.{split}={path} is neither a file nor a prefix of files {path}.{src} and {path}.{tgt}; "
                f"pass an existing TSV file or prefix (languages from data.src_lang / data.tgt_lang)"
            )


def existing_files(cfg: DictConfig) -> None:
    """A checkpoint to resume from and a tokenizer to reuse are files that exist."""
    for key, fix in (
        ("ckpt_path", "pass a checkpoint written by a training run, e.g. outputs/.../checkpoints/last.ckpt, or ckpt_path=null"),
        ("data.tokenizer_path", "pass a tokenizer.json, or data.tokenizer_path=null to train one"),
    ):
        path = OmegaConf.select(cfg, key)
        if path is not None and not Path(path).is_file():
            what = "a directory" if Path(path).is_dir() else "not a file" if Path(path).exists() else "missing"
            raise InputError(f"{key}={path} is {what}; {fix}")


RELATIONS: tuple[Callable[[DictConfig], None], ...] = (image_grid, head_width, sincos_width, mixup_pairs, image_folder, corpus_files, existing_files)


def validate_config(cfg: DictConfig) -> None:
    """Raise :class:`InputError` for the first config value that cannot work; return otherwise."""
    check_rules(cfg)
    for relation in RELATIONS:
        relation(cfg)
