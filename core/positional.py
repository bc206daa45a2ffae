"""Positional encodings: the paper's sinusoids (Section 3.5), learned embeddings, 2D sin-cos."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from core.constraints import require_sincos_width
from core.dropout import Dropout


def sinusoidal_table(length: int, dim: int) -> Tensor:
    """Section 3.5: ``PE(pos, 2i) = sin(pos / 10000^(2i/d))``, ``PE(pos, 2i+1) = cos(...)``.

    Returns [length, dim]; row 0 is [0, 1, 0, 1, ...].
    """
    position = torch.arange(length, dtype=torch.float64).unsqueeze(1)  # (L, 1)
    inv_freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float64) * (-math.log(10000.0) / dim))
    angles = position * inv_freq  # (L, ceil(d / 2))
    table = torch.zeros(length, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : dim // 2])
    return table.float()


def check_length(offset: int, length: int, max_len: int) -> None:
    """Refuse positions past a table's end with an error that says what to change."""
    if offset + length > max_len:
        raise ValueError(
            f"sequence positions {offset}..{offset + length - 1} exceed max_len {max_len}; "
            "shorten the input or build the model with a larger max_len"
        )


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table to token embeddings [B, T, dim], then dropout.

    ``offset`` is the position of the first token (the number already decoded when decoding
    incrementally).
    """

    def __init__(self, dim: int, max_len: int = 5000, dropout: float = 0.0) -> None:
        super().__init__()
        self.max_len = max_len
        self.register_buffer("table", sinusoidal_table(max_len, dim), persistent=False)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        check_length(offset, x.shape[1], self.max_len)
        return self.dropout(x + self.table[offset : offset + x.shape[1]].to(x.dtype))


class LearnedPositionalEmbedding(nn.Module):
    """A learned vector per position (BERT, GPT, ViT) added to embeddings [B, T, dim]."""

    def __init__(self, num_positions: int, dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(num_positions, dim))
        nn.init.trunc_normal_(self.weight, std=0.02)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        check_length(offset, x.shape[1], self.weight.shape[0])
        return self.dropout(x + self.weight[offset : offset + x.shape[1]])


def sincos_2d(grid_h: int, grid_w: int, dim: int, temperature: float = 10000.0) -> Tensor:
    """Fixed 2D sin-cos positions for a patch grid (as in MAE / "Better plain ViT baselines").

    A quarter of the channels each holds sin(x), cos(x), sin(y), cos(y) of the column x and row y
    at geometric frequencies. Returns [grid_h * grid_w, dim] in row-major patch order.
    """
    require_sincos_width(dim)
    y, x = torch.meshgrid(
        torch.arange(grid_h, dtype=torch.float64), torch.arange(grid_w, dtype=torch.float64), indexing="ij"
    )
    omega = 1.0 / temperature ** (torch.arange(dim // 4, dtype=torch.float64) / (dim // 4))
    x = x.flatten()[:, None] * omega[None, :]  # (N, d / 4)
    y = y.flatten()[:, None] * omega[None, :]  # (N, d / 4)
    return torch.cat([x.sin(), x.cos(), y.sin(), y.cos()], dim=1).float()
