"""Regularizers of the residual branches used by ViT recipes: stochastic depth and LayerScale."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from core.constraints import FRACTION


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
        keep = 1.0 - self.p
        shape = (x.shape[0],) + (1,) * (x.dim() - 1)  # one draw per sample
        return x * torch.empty(shape, dtype=x.dtype, device=x.device).bernoulli_(keep) / keep

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
