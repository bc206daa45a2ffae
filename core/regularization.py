"""Regularizers that drop whole slices of a tensor: stochastic depth of the residual branches (ViT
recipes) and word dropout of the token embeddings (translation); and LayerScale."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from core.constraints import FRACTION


class SliceDropout(nn.Module):
    """Inverted dropout of whole slices of ``x``: in training, one draw per index of its first
    :meth:`leading` dimensions zeroes that slice with probability ``p`` and scales the kept ones by
    1 / (1 - p)."""

    what = "slice dropout probability"  # the argument's name in the error of a bad ``p``

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        FRACTION.require(p, self.what)
        self.p = p

    def leading(self, x: Tensor) -> int:
        """How many leading dimensions of ``x`` index the slices."""
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = 1.0 - self.p
        leading = self.leading(x)
        shape = x.shape[:leading] + (1,) * (x.dim() - leading)  # the draws broadcast over the rest
        return x * torch.empty(shape, dtype=x.dtype, device=x.device).bernoulli_(keep) / keep

    def extra_repr(self) -> str:
        return f"p={self.p}"


class DropPath(SliceDropout):
    """Stochastic depth (Huang et al. 2016): drop a sample's whole residual branch with
    probability ``p`` during training and scale the kept ones by 1 / (1 - p)."""

    what = "drop path probability"

    def leading(self, x: Tensor) -> int:
        return 1  # one draw per sample


class WordDropout(SliceDropout):
    """Word dropout (Gal and Ghahramani 2016; Sennrich et al. 2016, on both sides of a translation
    model): during training, zero a token's whole embedding in ``x`` [..., T, D] with probability
    ``p`` and scale the kept ones by 1 / (1 - p), so the model learns to translate with words
    missing from its input. Applied before the positional encoding, a dropped token keeps its position."""

    what = "word dropout probability"

    def leading(self, x: Tensor) -> int:
        return x.dim() - 1  # one draw per token


class LayerScale(nn.Module):
    """Per-channel learned scale of a residual branch (Touvron et al. 2021, CaiT), started at
    ``init_values``; the parameter is named ``gamma`` as in timm."""

    def __init__(self, dim: int, init_values: float = 1e-5) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), float(init_values)))

    def forward(self, x: Tensor) -> Tensor:
        return x * self.gamma
