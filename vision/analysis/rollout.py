"""Where a ViT looks: per-layer attention weights and attention rollout (Abnar & Zuidema 2020,
"Quantifying Attention Flow in Transformers")."""

from __future__ import annotations

import torch
from torch import Tensor

from core import recorded_attention_weights
from vision.model import VisionTransformer


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


def token_relevance(model: VisionTransformer, matrix: Tensor, weights: Tensor | None = None) -> Tensor:
    """What the model's pooled output draws from each patch, as a grid [B, gh, gw]: the class
    token's row for ``pool="cls"``, the patch rows weighted as the pooling weighs the patches
    (``weights`` [B, N], :meth:`VisionTransformer.pool_weights`) otherwise."""
    prefix = model.num_prefix_tokens
    rows = matrix[:, 0] if model.pool == "cls" else torch.einsum("bn,bnt->bt", weights, matrix[:, prefix:])  # (B, T)
    grid = model.patch_embed.grid_size
    return rows[:, prefix:].reshape(-1, *grid)  # (B, gh, gw)


@torch.no_grad()
def explain(model: VisionTransformer, images: Tensor) -> tuple[Tensor, Tensor, list[Tensor]]:
    """Logits [B, classes], the rollout map [B, gh, gw] and each layer's head-averaged map
    [B, gh, gw] for ``images`` at the model's size."""
    with recorded_attention_weights(layer.attn for layer in model.encoder.layers) as attentions:
        tokens = model.forward_features(images)
    logits = model.forward_head(tokens)
    pooling = None if model.pool == "cls" else model.pool_weights(tokens)
    rollout = token_relevance(model, attention_rollout(attentions), pooling)
    layers = [token_relevance(model, weights.mean(dim=1), pooling) for weights in attentions]
    return logits, rollout, layers
