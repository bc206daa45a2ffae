"""Transformer building blocks of "Attention Is All You Need" (Vaswani et al. 2017).

Torch only: importing ``core`` loads neither Lightning nor Hydra. The blocks live here, one file
each (attention, cache, feedforward, layers, masks, positional, regularization, schedules,
stacks); the training machinery both heads share lives in :mod:`core.training` and is imported
explicitly.
"""

from core.attention import (
    MultiHeadAttention,
    attention_scores,
    recorded_attention_weights,
    scaled_dot_product,
)
from core.cache import AttentionCache, DecoderCache
from core.training.checkpoint_loading import load_checkpoint, load_module
from core.feedforward import FeedForward
from core.layers import DecoderLayer, EncoderLayer, add_norm
from core.masks import causal_mask, merge_masks, padding_mask, padding_mask_from_ids
from core.positional import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    sincos_2d,
    sinusoidal_table,
)
from core.regularization import DropPath, LayerScale
from core.schedules import BudgetedSchedule, InverseSqrt, WarmupCosine, inverse_sqrt, warmup_cosine
from core.stacks import Decoder, Encoder

__all__ = [
    "AttentionCache",
    "BudgetedSchedule",
    "Decoder",
    "DecoderCache",
    "DecoderLayer",
    "DropPath",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "InverseSqrt",
    "LayerScale",
    "LearnedPositionalEmbedding",
    "MultiHeadAttention",
    "SinusoidalPositionalEncoding",
    "WarmupCosine",
    "add_norm",
    "attention_scores",
    "causal_mask",
    "inverse_sqrt",
    "load_checkpoint",
    "load_module",
    "merge_masks",
    "padding_mask",
    "padding_mask_from_ids",
    "recorded_attention_weights",
    "scaled_dot_product",
    "sincos_2d",
    "sinusoidal_table",
    "warmup_cosine",
]
