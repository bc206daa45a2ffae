"""Encoder and decoder layers (Figure 1) with the paper's Add&Norm (Section 3.1)."""

from __future__ import annotations

from typing import Callable

from torch import Tensor, nn

from core.attention import MultiHeadAttention
from core.cache import AttentionCache
from core.feedforward import FeedForward
from core.regularization import DropPath, LayerScale


def add_norm(
    x: Tensor,
    sublayer: Callable[[Tensor], Tensor],
    norm: nn.Module,
    scale: nn.Module,
    drop_path: nn.Module,
    norm_first: bool,
) -> Tensor:
    """Residual connection around ``sublayer`` with layer normalization.

    Post-norm is the paper's ``LayerNorm(x + Sublayer(x))``; pre-norm (``norm_first``, used by
    ViT and most deep models) is ``x + Sublayer(LayerNorm(x))``. ``scale`` (LayerScale) and
    ``drop_path`` (stochastic depth) act on the branch and are identities by default.
    """
    if norm_first:
        return x + drop_path(scale(sublayer(norm(x))))
    return norm(x + drop_path(scale(sublayer(x))))


def branch_parts(
    dim: int, norm_eps: float, layer_scale: float | None, drop_path: float
) -> tuple[nn.LayerNorm, nn.Module, nn.Module]:
    """The LayerNorm, LayerScale and DropPath around one residual branch (absent ones are
    ``nn.Identity``)."""
    return (
        nn.LayerNorm(dim, eps=norm_eps),
        LayerScale(dim, layer_scale) if layer_scale else nn.Identity(),
        DropPath(drop_path) if drop_path > 0 else nn.Identity(),
    )


def ffn_width(dim: int, ffn_dim: int | None, mlp_ratio: float) -> int:
    """Inner width d_ff: ``ffn_dim`` if given, else ``mlp_ratio * dim``."""
    return ffn_dim if ffn_dim is not None else int(dim * mlp_ratio)


class ResidualLayer(nn.Module):
    """Attention sublayers followed by the feed-forward sublayer, each with Add&Norm.

    Subclasses name their attention sublayers in ``attention_names``; sublayer ``i`` (from 1)
    gets ``norm{i}``, ``ls{i}`` and ``drop_path{i}``, the feed-forward network is ``mlp``.

    Args:
        dim: model width d_model.
        num_heads: attention heads h.
        ffn_dim: feed-forward width d_ff; ``mlp_ratio * dim`` when None.
        mlp_ratio: d_ff / d_model when ``ffn_dim`` is None.
        dropout: residual dropout P_drop on each sublayer output (and after the FFN's activation
            unless ``activation_dropout`` is set).
        attn_dropout: dropout on attention weights.
        activation_dropout: dropout after the FFN's activation; None: ``dropout``
            (:class:`core.feedforward.FeedForward`).
        activation: ``relu`` (the paper) or ``gelu`` (ViT).
        norm_first: pre-norm if True, the paper's post-norm if False.
        drop_path: stochastic depth probability of each residual branch.
        layer_scale: LayerScale initial value, or None for none.
        norm_eps: LayerNorm epsilon.
        bias: biases in the linear layers.
        head_dim: per-head width d_k; ``dim // num_heads`` when None.
        locality: Locality Self-Attention in the attention sublayers (a learned temperature per
            head; in self-attention the diagonal masked), :class:`core.attention.MultiHeadAttention`.
    """

    attention_names: tuple[str, ...] = ()

    def __init__(
        self,
        dim: int,
        num_heads: int,
        ffn_dim: int | None = None,
        mlp_ratio: float = 4.0,
        dropout: float = 0.0,
        attn_dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        drop_path: float = 0.0,
        layer_scale: float | None = None,
        norm_eps: float = 1e-5,
        bias: bool = True,
        head_dim: int | None = None,
        locality: bool = False,
        activation_dropout: float | None = None,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        for index, name in enumerate((*self.attention_names, "mlp"), start=1):
            norm, scale, path = branch_parts(dim, norm_eps, layer_scale, drop_path)
            self.add_module(f"norm{index}", norm)
            if name == "mlp":
                width = ffn_width(dim, ffn_dim, mlp_ratio)
                sublayer: nn.Module = FeedForward(dim, width, activation, dropout, bias, activation_dropout)
            else:
                sublayer = MultiHeadAttention(
                    dim, num_heads, attn_dropout, bias, head_dim, proj_dropout=dropout, locality=locality
                )
            self.add_module(name, sublayer)
            self.add_module(f"ls{index}", scale)
            self.add_module(f"drop_path{index}", path)

    def residual(self, index: int, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        """Sublayer ``index`` (from 1) with its Add&Norm."""
        return add_norm(
            x,
            sublayer,
            getattr(self, f"norm{index}"),
            getattr(self, f"ls{index}"),
            getattr(self, f"drop_path{index}"),
            self.norm_first,
        )


class EncoderLayer(ResidualLayer):
    """Figure 1, left: multi-head self-attention (``attn``), then the feed-forward network
    (``mlp``), each with Add&Norm. Submodule names follow timm's ViT ``Block`` (``norm1``,
    ``attn``, ``ls1``, ``drop_path1``, ``norm2``, ``mlp``, ``ls2``, ``drop_path2``).
    Arguments as in :class:`ResidualLayer`.

    With ``causal=True`` it is the block of a decoder-only (GPT) model: the decoder layer of
    Figure 1 without the encoder-decoder attention, as nanoGPT's ``Block``.
    """

    attention_names = ("attn",)
    attn: MultiHeadAttention
    mlp: FeedForward

    def forward(
        self,
        x: Tensor,
        key_padding_mask: Tensor | None = None,
        attn_mask: Tensor | None = None,
        causal: bool = False,
        cache: AttentionCache | None = None,
    ) -> Tensor:
        """``x`` [B, S, dim] -> [B, S, dim]; ``key_padding_mask`` bool [B, S], True = padding.

        ``causal`` blocks each position from the later ones; ``cache`` (incremental decoding)
        holds the keys and values of the positions before ``x``, and ``key_padding_mask`` then
        covers those positions too.
        """
        x = self.residual(
            1,
            x,
            lambda h: self.attn(h, causal=causal, key_padding_mask=key_padding_mask, attn_mask=attn_mask, cache=cache),
        )
        return self.residual(2, x, self.mlp)


class DecoderLayer(ResidualLayer):
    """Figure 1, right: masked multi-head self-attention (``self_attn``), multi-head attention
    over the encoder output (``cross_attn``), then the feed-forward network (``mlp``), each with
    Add&Norm (``norm1`` .. ``norm3``). Arguments as in :class:`ResidualLayer`.
    """

    attention_names = ("self_attn", "cross_attn")
    self_attn: MultiHeadAttention
    cross_attn: MultiHeadAttention
    mlp: FeedForward

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        self_cache: AttentionCache | None = None,
        cross_cache: AttentionCache | None = None,
    ) -> Tensor:
        """``x`` [B, T, dim] (only the new positions when caching), ``memory`` [B, S, dim]."""
        x = self.residual(
            1, x, lambda h: self.self_attn(h, causal=True, key_padding_mask=tgt_key_padding_mask, cache=self_cache)
        )
        x = self.residual(
            2, x, lambda h: self.cross_attn(h, memory, key_padding_mask=memory_key_padding_mask, cache=cross_cache)
        )
        return self.residual(3, x, self.mlp)
