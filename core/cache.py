"""Key/value cache for incremental (token-by-token) decoding.

At step t the decoder's self-attention needs the keys and values of positions 0..t. Computing
them again each step costs O(t^2) over a sentence; keeping them makes a step cost O(t).
Cross-attention keys and values depend only on the encoder output, so they are projected once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class AttentionCache:
    """Keys and values one attention module has computed so far, each [B, H, S, head_dim].

    A cross-attention cache also keeps the memory's padding mask in the merged form attention
    uses ([B, 1, 1, S], True = may not attend), so later steps need not rebuild it.
    """

    key: Tensor | None = None
    value: Tensor | None = None
    mask: Tensor | None = None

    @property
    def length(self) -> int:
        """Number of cached key positions S."""
        return 0 if self.key is None else self.key.shape[-2]

    def append(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Add new positions [B, H, T, head_dim] and return all keys and values so far."""
        if self.key is not None and self.value is not None:
            key = torch.cat([self.key, key], dim=-2)  # (B, H, S + T, head_dim)
            value = torch.cat([self.value, value], dim=-2)
        self.key, self.value = key, value
        return key, value

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` [B'] (beam search after pruning hypotheses)."""
        if self.key is not None and self.value is not None:
            self.key = self.key.index_select(0, index)
            self.value = self.value.index_select(0, index)
        if self.mask is not None:
            self.mask = self.mask.index_select(0, index)


@dataclass
class DecoderCache:
    """One self-attention and one cross-attention cache per decoder layer; a decoder-only stack
    has no cross-attention, so its ``cross_attn`` list is empty."""

    self_attn: list[AttentionCache] = field(default_factory=list)
    cross_attn: list[AttentionCache] = field(default_factory=list)

    @classmethod
    def empty(cls, num_layers: int, cross_attention: bool = True) -> "DecoderCache":
        """A cache with nothing in it for a decoder of ``num_layers`` layers, with or without
        cross-attention."""
        return cls(
            self_attn=[AttentionCache() for _ in range(num_layers)],
            cross_attn=[AttentionCache() for _ in range(num_layers if cross_attention else 0)],
        )

    @property
    def length(self) -> int:
        """Number of target positions already decoded (the offset of the next one)."""
        return self.self_attn[0].length if self.self_attn else 0

    def reorder(self, index: Tensor, cross_attention: bool = True) -> None:
        """Keep batch rows ``index`` in every layer's caches.

        ``cross_attention=False`` leaves the cross-attention caches as they are: right where
        ``index`` only moves rows among copies of one source, as beam search's does (every beam of
        a sentence attends to the same memory, so its cross-attention keys and values are the same
        in each of the sentence's rows, and copying them each step changes nothing).
        """
        for cache in (*self.self_attn, *(self.cross_attn if cross_attention else ())):
            cache.reorder(index)
