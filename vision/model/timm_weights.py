"""Reading timm ``VisionTransformer`` models and checkpoints into :class:`vision.model.VisionTransformer`.

timm names the encoder layers ``blocks.{i}`` and the final norm ``norm``; ours are
``encoder.layers.{i}`` and ``encoder.norm``. Every other key (``cls_token``, ``pos_embed``,
``patch_embed.proj``, ``attn.qkv``, ``attn.proj``, ``mlp.fc1``, ``mlp.fc2``, ``ls1.gamma``,
``fc_norm``, ``head``) is the same in both.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import timm.models
from timm.layers import resample_abs_pos_embed
from torch import Tensor, nn

from core.errors import InputError

RENAMES = (("blocks.", "encoder.layers."), ("norm.", "encoder.norm."))
POOL_NAMES = {"token": "cls", "avg": "mean"}


def rename_key(key: str) -> str:
    """timm key -> our key (``blocks.3.attn.qkv.weight`` -> ``encoder.layers.3.attn.qkv.weight``)."""
    for prefix, replacement in RENAMES:
        if key.startswith(prefix):
            return replacement + key[len(prefix) :]
    return key


def timm_key(key: str) -> str:
    """Our key -> timm's, the inverse of :func:`rename_key` (``encoder.layers.3.attn.qkv.weight``
    -> ``blocks.3.attn.qkv.weight``)."""
    for timm_prefix, prefix in RENAMES:
        if key.startswith(prefix):
            return timm_prefix + key[len(prefix) :]
    return key


def resample_pos_embed(pos_embed: Tensor, grid: tuple[int, int], num_prefix_tokens: int) -> Tensor:
    """A learned table [1, prefix + positions, D] fitted to ``grid``: kept as it is when it holds
    one position per cell of ``grid`` (as timm's ``checkpoint_filter_fn`` decides, so a non-square
    model's own table reads back), else resampled bicubically from a square grid, so a 224px
    checkpoint serves 32px or 384px inputs; the class token's row is kept as is."""
    patches = pos_embed.shape[1] - num_prefix_tokens
    if patches == grid[0] * grid[1]:
        return pos_embed
    side = math.isqrt(patches)
    if side * side != patches:
        raise ValueError(
            f"pos_embed has {patches} patch positions, neither the {grid[0]}x{grid[1]} grid nor a square "
            "one; pass a checkpoint of a square-image model or of this image size"
        )
    return resample_abs_pos_embed(pos_embed, list(grid), [side, side], num_prefix_tokens)


def convert_timm_state_dict(
    state_dict: dict[str, Tensor], grid: tuple[int, int], num_prefix_tokens: int
) -> dict[str, Tensor]:
    """A timm ViT state dict with our key names and ``pos_embed`` fitted to ``grid``."""
    converted = {rename_key(key): value for key, value in state_dict.items()}
    if "pos_embed" in converted:
        converted["pos_embed"] = resample_pos_embed(converted["pos_embed"], grid, num_prefix_tokens)
    return converted


def unsupported_features(model: nn.Module) -> list[str]:
    """The parts of a timm ViT that :class:`VisionTransformer` does not implement."""
    block = model.blocks[0]
    checks = {
        "register tokens": getattr(model, "reg_token", None) is not None,
        "position embedding without class token (no_embed_class)": getattr(model, "no_embed_class", False),
        "pre-norm before the blocks (pre_norm)": not isinstance(getattr(model, "norm_pre", nn.Identity()), nn.Identity),
        "attention pooling": getattr(model, "attn_pool", None) is not None,
        f"global_pool={model.global_pool!r}": model.global_pool not in POOL_NAMES,
        "patch-embedding norm": not isinstance(model.patch_embed.norm, nn.Identity),
        "q/k norm": not isinstance(block.attn.q_norm, nn.Identity),
        "attention without qkv bias": block.attn.qkv.bias is None,
        "MLP other than Linear-GELU-Linear": not isinstance(getattr(block.mlp, "act", None), nn.GELU),
        "no positional embedding": model.pos_embed is None,
    }
    return [name for name, present in checks.items() if present]


def timm_config(model: nn.Module) -> dict[str, Any]:
    """Constructor arguments of :class:`VisionTransformer` matching a timm ``VisionTransformer``."""
    problems = unsupported_features(model)
    if problems:
        raise ValueError(
            f"this timm model uses {', '.join(problems)}, which vision.VisionTransformer does not "
            "implement; choose a plain ViT/DeiT (e.g. vit_tiny_patch16_224, deit_small_patch16_224)"
        )
    block = model.blocks[0]
    dim = model.embed_dim
    layer_scale = getattr(block.ls1, "gamma", None)
    return {
        "img_size": tuple(model.patch_embed.img_size),
        "patch_size": model.patch_embed.patch_size[0],
        "in_chans": model.patch_embed.proj.in_channels,
        "num_classes": model.num_classes,
        "dim": dim,
        "depth": len(model.blocks),
        "num_heads": block.attn.num_heads,
        "mlp_ratio": block.mlp.fc1.out_features / dim,
        "pool": POOL_NAMES[model.global_pool],
        "pos_embed": "learned",
        "class_token": model.cls_token is not None,
        "fc_norm": not isinstance(model.fc_norm, nn.Identity),
        # Only the presence of LayerScale matters here: its gamma is loaded from the weights.
        "layer_scale": None if layer_scale is None else 1.0,
        "norm_eps": block.norm1.eps,
        "drop_path": 0.0,
        "dynamic_img_size": model.dynamic_img_size,
        "stem": "patch",
    }


def timm_model_args(model: dict[str, Any], num_classes: int) -> dict[str, Any]:
    """Arguments of timm's ``VisionTransformer`` for the settings ``model`` (the inverse of
    :func:`timm_config`)."""
    return {
        "img_size": model["img_size"],
        "patch_size": model["patch_size"],
        "in_chans": model["in_chans"],
        "num_classes": num_classes,
        "embed_dim": model["dim"],
        "depth": model["depth"],
        "num_heads": model["num_heads"],
        "mlp_ratio": model["mlp_ratio"],
        "global_pool": {ours: theirs for theirs, ours in POOL_NAMES.items()}[model["pool"]],
        "class_token": model["class_token"],
        "fc_norm": model["fc_norm"],
        "init_values": model["layer_scale"],
        "dynamic_img_size": model["dynamic_img_size"],
    }


def read_timm_checkpoint(path: str | Path) -> dict[str, Tensor]:
    """A timm checkpoint file (``.safetensors``, ``.pth``, ``.bin``; EMA weights preferred) as a
    state dict, read with ``weights_only=True``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"timm checkpoint {path} does not exist; save one with "
            "`torch.save(timm.create_model(NAME, pretrained=True).state_dict(), PATH)` or pass the "
            "model.safetensors file of the model's Hugging Face Hub repository"
        )
    try:
        return timm.models.load_state_dict(str(path), use_ema=True, weights_only=True)
    except Exception as error:  # noqa: BLE001 - any failure to parse the bytes is a bad file
        # A whole model saved with torch.save (not its state dict) fails the weights-only load with
        # UnpicklingError; a truncated or damaged file fails in many ways (OSError, RuntimeError,
        # SafetensorError, EOFError, ...).
        detail = str(error).splitlines()[0] if str(error) else "no detail"
        raise InputError(
            f"pretrained={path} is not a weights file that can be read ({type(error).__name__}: {detail}); pass a "
            "state dict saved with `torch.save(model.state_dict(), PATH)`, or a whole .safetensors file"
        ) from None
