"""Where a ViT looks: per-layer attention weights and attention rollout (Abnar & Zuidema 2020,
"Quantifying Attention Flow in Transformers")."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn

from vision.model import VisionTransformer


@contextmanager
def recorded_attention(model: VisionTransformer) -> Iterator[list[Tensor]]:
    """Within the block, every encoder layer's self-attention also records its weights
    [B, H, T, T] (the explicit Eq. 1 path of ``need_weights``) into the yielded list, in layer
    order; the layers' outputs are unchanged."""
    weights: list[Tensor] = []

    def ask_for_weights(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple:
        return args, {**kwargs, "need_weights": True}

    def keep_weights(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: tuple) -> Tensor:
        out, attention = output
        weights.append(attention.detach())
        return out

    handles = []
    for layer in model.encoder.layers:
        handles.append(layer.attn.register_forward_pre_hook(ask_for_weights, with_kwargs=True))
        handles.append(layer.attn.register_forward_hook(keep_weights, with_kwargs=True))
    try:
        yield weights
    finally:
        for handle in handles:
            handle.remove()


def attention_rollout(attentions: list[Tensor]) -> Tensor:
    """Attention rollout: average the heads, add the identity for the residual connection and
    renormalize, ``A_l = 0.5 W_l + 0.5 I``, then multiply through the layers,
    ``R = A_L ... A_2 A_1``. Row i of R [B, T, T] is how much each input token flows into token i."""
    rollout = None
    for weights in attentions:
        mixed = weights.mean(dim=1)  # (B, T, T)
        mixed = 0.5 * mixed + 0.5 * torch.eye(mixed.shape[-1], dtype=mixed.dtype, device=mixed.device)
        mixed = mixed / mixed.sum(dim=-1, keepdim=True)
        rollout = mixed if rollout is None else mixed @ rollout
    if rollout is None:
        raise ValueError("no attention weights were recorded; the model has no encoder layers")
    return rollout


def token_relevance(model: VisionTransformer, matrix: Tensor) -> Tensor:
    """What the model's pooled output draws from each patch, as a grid [B, gh, gw]: the class
    token's row for ``pool="cls"``, the mean of the patch rows for ``pool="mean"``."""
    prefix = model.num_prefix_tokens
    rows = matrix[:, 0] if model.pool == "cls" else matrix[:, prefix:].mean(dim=1)  # (B, T)
    grid = model.patch_embed.grid_size
    return rows[:, prefix:].reshape(-1, *grid)  # (B, gh, gw)


@torch.no_grad()
def explain(model: VisionTransformer, images: Tensor) -> tuple[Tensor, Tensor, list[Tensor]]:
    """Logits [B, classes], the rollout map [B, gh, gw] and each layer's head-averaged map
    [B, gh, gw] for ``images`` at the model's size."""
    with recorded_attention(model) as attentions:
        logits = model(images)
    rollout = token_relevance(model, attention_rollout(attentions))
    layers = [token_relevance(model, weights.mean(dim=1)) for weights in attentions]
    return logits, rollout, layers
