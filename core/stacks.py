"""The encoder and decoder stacks of Figure 1, N identical layers each, and the decoder-only
(GPT) stack built from the encoder's layers made causal."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from core.cache import DecoderCache
from core.layers import DecoderLayer, EncoderLayer, ResidualLayer


def drop_path_rates(drop_path: float, depth: int) -> list[float]:
    """Stochastic depth rising linearly from 0 at the first layer to ``drop_path`` at the last."""
    return [drop_path * i / max(depth - 1, 1) for i in range(depth)]


class Stack(nn.Module):
    """``depth`` identical layers of type ``layer_class`` and, for pre-norm, a final LayerNorm.

    Args:
        dim: model width d_model.
        depth: number of layers N (6 in the paper).
        num_heads: attention heads h.
        norm_first: pre-norm layers plus a final LayerNorm, or the paper's post-norm.
        drop_path: stochastic depth of the last layer (rising linearly from 0).
        norm_eps: LayerNorm epsilon.
        **layer_kwargs: the other layer arguments (``ffn_dim``, ``mlp_ratio``, ``dropout``,
            ``attn_dropout``, ``activation_dropout``, ``activation``, ``layer_scale``, ``bias``,
            ``head_dim``, ``locality``).
    """

    layer_class: type[ResidualLayer]

    def __init__(
        self,
        dim: int,
        depth: int,
        num_heads: int,
        norm_first: bool = False,
        drop_path: float = 0.0,
        norm_eps: float = 1e-5,
        **layer_kwargs: Any,
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            self.layer_class(
                dim, num_heads, norm_first=norm_first, drop_path=rate, norm_eps=norm_eps, **layer_kwargs
            )
            for rate in drop_path_rates(drop_path, depth)
        )
        # Pre-norm layers leave the residual stream unnormalized, so such a stack ends in a norm.
        self.norm = nn.LayerNorm(dim, eps=norm_eps) if norm_first else nn.Identity()


class Encoder(Stack):
    """Figure 1, left: the encoder stack of :class:`EncoderLayer` (arguments as in :class:`Stack`)."""

    layer_class = EncoderLayer

    def forward(
        self,
        x: Tensor,
        key_padding_mask: Tensor | None = None,
        attn_mask: Tensor | None = None,
    ) -> Tensor:
        """``x`` [B, S, dim] -> memory [B, S, dim]; ``key_padding_mask`` bool [B, S]."""
        for layer in self.layers:
            x = layer(x, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        return self.norm(x)


class Decoder(Stack):
    """Figure 1, right: the decoder stack of :class:`DecoderLayer` attending to the encoder
    output (arguments as in :class:`Stack`).

    For incremental decoding create ``cache = decoder.new_cache()`` and feed only the new
    positions; the cache keeps every layer's past keys and values.
    """

    layer_class = DecoderLayer

    def new_cache(self) -> DecoderCache:
        """An empty key/value cache for this decoder."""
        return DecoderCache.empty(len(self.layers))

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        """``x`` [B, T, dim] target positions (only the new ones with a cache), ``memory``
        [B, S, dim] -> [B, T, dim]."""
        for index, layer in enumerate(self.layers):
            x = layer(
                x,
                memory,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                self_cache=None if cache is None else cache.self_attn[index],
                cross_cache=None if cache is None else cache.cross_attn[index],
            )
        return self.norm(x)


class CausalDecoder(Stack):
    """The stack of a decoder-only (GPT-style) language model: Figure 1's decoder without the
    encoder-decoder attention, i.e. :class:`EncoderLayer` blocks with masked (causal)
    self-attention (arguments as in :class:`Stack`).

    Its layers have no cross-attention parameters, and its state-dict keys are those of an
    :class:`Encoder` of the same size. For incremental decoding create
    ``cache = stack.new_cache()`` and feed only the new positions; ``cache.length`` is the
    position of the next one.
    """

    layer_class = EncoderLayer

    def new_cache(self) -> DecoderCache:
        """An empty key/value cache for this stack (self-attention only)."""
        return DecoderCache.empty(len(self.layers), cross_attention=False)

    def forward(
        self,
        x: Tensor,
        key_padding_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        """``x`` [B, T, dim] (only the new positions with a cache) -> [B, T, dim]; position t
        sees positions 0..t. ``key_padding_mask`` bool [B, S] over every position so far
        (cached and new), True = padding."""
        for index, layer in enumerate(self.layers):
            x = layer(
                x,
                key_padding_mask=key_padding_mask,
                causal=True,
                cache=None if cache is None else cache.self_attn[index],
            )
        return self.norm(x)
