"""Transformer building blocks of "Attention Is All You Need" (Vaswani et al. 2017).

Torch only: importing ``core`` loads neither Lightning nor Hydra. The blocks live here, one file
each (attention, cache, dropout, feedforward, initialization, layers, masks, positional,
regularization, schedules, stacks; constraints and errors: what they accept and how they refuse
it); the training machinery both heads share lives in :mod:`core.training` and is
imported explicitly. The names below load on first use (PEP 562), so a command that only reads
its arguments, or a module of :mod:`core.training`, does not pay for importing torch.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# Public name -> the module that defines it.
_EXPORTS = {
    "AttentionCache": "core.cache",
    "BudgetedSchedule": "core.schedules",
    "CausalDecoder": "core.stacks",
    "Decoder": "core.stacks",
    "DecoderCache": "core.cache",
    "DecoderLayer": "core.layers",
    "DropPath": "core.regularization",
    "Dropout": "core.dropout",
    "Encoder": "core.stacks",
    "EncoderLayer": "core.layers",
    "FeedForward": "core.feedforward",
    "InverseSqrt": "core.schedules",
    "LayerScale": "core.regularization",
    "LearnedPositionalEmbedding": "core.positional",
    "MultiHeadAttention": "core.attention",
    "SinusoidalPositionalEncoding": "core.positional",
    "WarmupCosine": "core.schedules",
    "WordDropout": "core.regularization",
    "add_norm": "core.layers",
    "attention_scores": "core.attention",
    "causal_mask": "core.masks",
    "inverse_sqrt": "core.schedules",
    "load_checkpoint": "core.files.checkpoints",
    "load_module": "core.files.checkpoints",
    "merge_masks": "core.masks",
    "mimetic_init_": "core.initialization",
    "padding_mask": "core.masks",
    "padding_mask_from_ids": "core.masks",
    "recorded_attention_weights": "core.attention",
    "scaled_dot_product": "core.attention",
    "sincos_2d": "core.positional",
    "sinusoidal_table": "core.positional",
    "warmup_cosine": "core.schedules",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """``core.<name>``, imported from its module when first asked for."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'core' has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
