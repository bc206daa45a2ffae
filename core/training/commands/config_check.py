"""Config values checked before any work starts: no download, no file read, no model built, no
torch imported.

:func:`validate_config` applies :data:`RULES` and :data:`RELATIONS` (the keys every training
config has: seed, trainer, budget, callbacks, the shared model and module keys) and the rules of
the config's head: the module its top-level key ``config_rules`` names (``config_rules:
vision.config_rules`` in ``conf/vision.yaml`` and ``conf/vision_eval.yaml``), with its own
``RULES`` and ``RELATIONS``; a config without the key (or with ``null``) gets the shared rules
only. The key lives in the config, not in the command, so that a config composed in a test or a
script is checked as the command checks it. A rule names config keys and the check their values
must pass; it applies to the keys the config has. The checks are the objects the constructors
use (``core.constraints``, ``<head>.constraints``), so each rule is stated once. The first broken
rule raises :class:`core.errors.InputError` naming the key, the value and the fix.

``trainer.precision`` is left to Lightning, which refuses an unknown value when the Trainer is
built, before any data is prepared (``core.training.runner``).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from omegaconf import DictConfig, OmegaConf

from core.constraints import (
    ABOVE_ONE,
    ACTIVATION,
    FRACTION,
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE,
    POSITIVE_INT,
    Check,
    is_number,
    optional,
    or_minus_one,
    require_head_width,
    value_text,
    whole,
)
from core.errors import InputError
from core.files.model_directory import is_model_directory

MISSING = object()


def is_duration(value: Any) -> bool:
    """Lightning's ``max_time``: ``"DD:HH:MM:SS"`` or a mapping of ``timedelta`` arguments."""
    if isinstance(value, str):
        return re.fullmatch(r"\s*\d+:\d+:\d+:\d+\s*", value) is not None
    return isinstance(value, dict) and all(is_number(v) and v >= 0 for v in value.values())


BETAS = Check("two numbers in [0, 1), e.g. [0.9, 0.999]", lambda v: isinstance(v, list) and len(v) == 2 and all(FRACTION.test(b) for b in v))
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
    Rule(("budget.max_warmup_fraction",), FRACTION),
    Rule(("budget.epochs",), POSITIVE_INT),
    Rule(("callbacks.periodic_checkpoint.every_n_minutes",), optional(POSITIVE)),
    Rule(("callbacks.progress_bar.every_n_seconds",), NON_NEGATIVE),
    Rule(("callbacks.periodic_checkpoint.every_n_train_steps",), optional(POSITIVE_INT)),
    Rule(("callbacks.divergence.max_rewinds",), NON_NEGATIVE_INT),
    Rule(("callbacks.divergence.every_n_steps", "callbacks.divergence.window"), POSITIVE_INT),
    Rule(("callbacks.divergence.spike_factor",), optional(ABOVE_ONE)),
    Rule(("module.lr",), POSITIVE),
    Rule(("module.weight_decay",), NON_NEGATIVE),
    Rule(("module.betas",), BETAS),
    Rule(("model.dim", "model.num_heads"), POSITIVE_INT),
    Rule(("model.activation_dropout",), optional(FRACTION)),
    Rule(("model.attn_dropout",), FRACTION),  # model.dropout, module.label_smoothing: each head's rules (nlp sizes auto ones)
    Rule(("model.activation",), ACTIVATION),
    Rule(("data.num_workers",), optional(NON_NEGATIVE_INT)),
)


def check_rules(cfg: DictConfig, rules: Sequence[Rule]) -> None:
    """Every rule of ``rules`` on the keys ``cfg`` has."""
    for rule in rules:
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


def head_width(cfg: DictConfig) -> None:
    """``model.dim`` splits evenly over ``model.num_heads`` attention heads."""
    dim, heads = OmegaConf.select(cfg, "model.dim"), OmegaConf.select(cfg, "model.num_heads")
    if dim is not None and heads is not None:
        require_head_width(dim, heads, ("model.dim", "model.num_heads"))


def require_file(cfg: DictConfig, key: str, fix: str) -> None:
    """The path at ``key``, when set, is a file that exists; else :class:`InputError` with ``fix``."""
    path = OmegaConf.select(cfg, key)
    if path is not None and not Path(path).is_file():
        what = "a directory" if Path(path).is_dir() else "not a file" if Path(path).exists() else "missing"
        raise InputError(f"{key}={path} is {what}; {fix}")


def resume_checkpoint(cfg: DictConfig) -> None:
    """A checkpoint to resume from is a file that exists; an evaluation also takes an exported model
    directory (``model.safetensors`` + ``config.json``), which the head's loader reads."""
    path = OmegaConf.select(cfg, "ckpt_path")
    if path is not None and "split" in cfg and is_model_directory(path):
        return
    require_file(
        cfg, "ckpt_path",
        "pass a checkpoint written by a training run, e.g. outputs/.../checkpoints/last.ckpt, or ckpt_path=null",
    )


def start_weights(cfg: DictConfig) -> None:
    """Trained weights to start from (``pretrained``, :mod:`core.training.pretrained`) exist: a
    checkpoint or weights file, or an exported model directory; a run that resumes
    (``ckpt_path``) has them in its checkpoint already."""
    path = OmegaConf.select(cfg, "pretrained")
    if path is not None and OmegaConf.select(cfg, "ckpt_path") is None and not Path(path).exists():
        raise InputError(
            f"pretrained={path} is missing; pass a checkpoint (.ckpt), an exported model directory "
            "(python -m <head>.export) or, for vision, a timm weights file, or pretrained=null"
        )


RELATIONS: tuple[Callable[[DictConfig], None], ...] = (head_width, resume_checkpoint, start_weights)


def head_rules(cfg: DictConfig) -> ModuleType | None:
    """The module the config's ``config_rules`` names, None when it names none."""
    name = cfg.get("config_rules")
    if not name:
        return None
    try:
        return importlib.import_module(str(name))
    except ModuleNotFoundError as error:
        if error.name is None or not f"{name}.".startswith(f"{error.name}."):
            raise  # the rules module exists and imports something missing: a bug, not bad input
        raise InputError(
            f"config_rules={name}: no module {error.name}; name the module of the head's RULES and RELATIONS "
            "(e.g. config_rules=vision.config_rules)"
        ) from None


def validate_config(cfg: DictConfig) -> None:
    """Raise :class:`InputError` for the first config value that cannot work; return otherwise."""
    head = head_rules(cfg)
    check_rules(cfg, (*RULES, *(head.RULES if head else ())))
    try:
        for relation in (*RELATIONS, *(head.RELATIONS if head else ())):
            relation(cfg)
    except ValueError as error:  # a constraint of core.constraints or <head>.constraints
        raise InputError(str(error)) from None
