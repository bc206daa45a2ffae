"""Regularizers that drop whole slices of a tensor: stochastic depth of the residual branches (ViT
recipes) and word dropout of the token embeddings (translation); and LayerScale."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from core.constraints import FRACTION


def drop_slices(x: Tensor, p: float, leading: int) -> Tensor:
    """Inverted dropout of whole slices: one draw per index of the first ``leading`` dimensions of
    ``x``, which zeroes that slice with probability ``p`` and scales the kept ones by 1 / (1 - p)."""
    keep = 1.0 - p
    shape = x.shape[:leading] + (1,) * (x.dim() - leading)  # the draws broadcast over the rest
    return x * torch.empty(shape, dtype=x.dtype, device=x.device).bernoulli_(keep) / keep


class DropPath(nn.Module):
    """Stochastic depth (Huang et al. 2016): drop a sample's whole residual branch with
    probability ``p`` during training and scale the kept ones by 1 / (1 - p)."""

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        FRACTION.require(p, "drop path probability")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        return drop_slices(x, self.p, 1)  # one draw per sample

    def extra_repr(self) -> str:
        return f"p={self.p}"


class WordDropout(nn.Module):
    """Word dropout (Gal and Ghahramani 2016; Sennrich et al. 2016, on both sides of a translation
    model): during training, zero a token's whole embedding in ``x`` [..., T, D] with probability
    ``p`` and scale the kept ones by 1 / (1 - p), so the model learns to translate with words
    missing from its input. Applied before the positional encoding, a dropped token keeps its position."""

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        FRACTION.require(p, "word dropout probability")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        return drop_slices(x, self.p, x.dim() - 1)  # one draw per token

    def extra_repr(self) -> str:
        return f"p={self.p}"


class LayerScale(nn.Module):
    """Per-channel learned scale of a residual branch (Touvron et al. 2021, CaiT), started at
    ``init_values``; the parameter is named ``gamma`` as in timm."""

    def __init__(self, dim: int, init_values: float = 1e-5) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), float(init_values)))

    def forward(self, x: Tensor) -> Tensor:
        return x * self.gamma
