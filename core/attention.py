"""Scaled dot-product attention (Eq. 1) and multi-head attention (Section 3.2.2, Figure 2)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from core.cache import AttentionCache
from core.constraints import require_head_width
from core.dropout import Dropout
from core.masks import merge_masks


# On a CPU, the fused kernel's bfloat16 backward is slower than the math kernel's up to about two
# hundred keys and faster beyond (benchmarks/attention_kernels.py, results/attention_kernels.jsonl).
MATH_KERNEL_MAX_KEYS = 192


def attention_kernel(query: Tensor, key: Tensor) -> AbstractContextManager:
    """The kernel of :func:`F.scaled_dot_product_attention` for these tensors: the math kernel
    for a CPU training step in bfloat16 over at most :data:`MATH_KERNEL_MAX_KEYS` keys (the same
    Eq. 1, faster there), PyTorch's own choice elsewhere."""
    cpu_bf16_training = query.device.type == "cpu" and query.dtype == torch.bfloat16 and torch.is_grad_enabled()
    if cpu_bf16_training and query.requires_grad and key.shape[-2] <= MATH_KERNEL_MAX_KEYS:
        return sdpa_kernel(SDPBackend.MATH)
    return nullcontext()


def attention_scores(query: Tensor, key: Tensor) -> Tensor:
    """Raw compatibility scores Q K^T: [B, H, T, d_k] x [B, H, S, d_k] -> [B, H, T, S]."""
    return query @ key.transpose(-2, -1)


def scaled_dot_product(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Eq. 1, computed explicitly: ``softmax(Q K^T / sqrt(d_k)) V``.

    ``mask`` is bool, broadcastable to [B, H, T, S], True = may not attend; masked scores become
    -inf, so their weights are exactly 0; a row whose every key is masked gives NaN (the blocks
    reopen such rows first, :func:`core.masks.merge_masks`). Returns the output [B, H, T, d_v] and
    the attention weights [B, H, T, S] (before dropout).
    """
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    scores = attention_scores(query, key) * scale
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    output = F.dropout(weights, p=dropout_p) @ value
    return output, weights


class MultiHeadAttention(nn.Module):
    """Multi-head attention (Section 3.2.2): ``Concat(head_1..head_h) W^O`` with
    ``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``.

    One module serves the paper's three uses: encoder self-attention ``mha(x)``,
    encoder-decoder (cross) attention ``mha(x, context=memory)`` and masked decoder
    self-attention ``mha(x, causal=True)``. The Q, K and V projections of all heads are one fused
    ``qkv`` linear layer ([W^Q; W^K; W^V] stacked, as in timm); cross-attention applies the Q rows
    to ``x`` and the K, V rows to ``context``.

    Args:
        dim: model width d_model of the input and output.
        num_heads: number of heads h.
        dropout: dropout on the attention weights.
        bias: whether the projections have biases.
        head_dim: width d_k = d_v of one head; ``dim // num_heads`` by default.
        proj_dropout: dropout on the output projection (the sublayer's residual dropout).
        locality: Locality Self-Attention (Lee, Lee and Song 2021, Eq. 5-7): the scale 1/sqrt(d_k)
            becomes a learned temperature per head (``temperature``, initialised to it), and in
            self-attention each token's own key is masked, so a token attends to the others.
            Not for causal attention, where the first position would see no key.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        head_dim: int | None = None,
        proj_dropout: float = 0.0,
        locality: bool = False,
    ) -> None:
        super().__init__()
        if head_dim is None:
            require_head_width(dim, num_heads)
            head_dim = dim // num_heads
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.inner_dim = num_heads * head_dim
        self.scale = head_dim**-0.5
        self.temperature = nn.Parameter(torch.full((num_heads,), self.scale)) if locality else None
        self.dropout = dropout
        self.qkv = nn.Linear(dim, 3 * self.inner_dim, bias=bias)
        self.proj = nn.Linear(self.inner_dim, dim, bias=bias)
        self.proj_drop = Dropout(proj_dropout)

    def _split_heads(self, x: Tensor) -> Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, L, d_k)

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention projections of ``x`` [B, T, dim]: Q, K, V, each [B, H, T, d_k]."""
        batch, length, _ = x.shape
        qkv = self.qkv(x).view(batch, length, 3, self.num_heads, self.head_dim)
        query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, H, T, d_k)
        return query, key, value

    def project_query(self, x: Tensor) -> Tensor:
        """Q = x W^Q for cross-attention, [B, H, T, d_k]."""
        bias = None if self.qkv.bias is None else self.qkv.bias[: self.inner_dim]
        return self._split_heads(F.linear(x, self.qkv.weight[: self.inner_dim], bias))

    def project_key_value(self, context: Tensor) -> tuple[Tensor, Tensor]:
        """K = context W^K, V = context W^V for cross-attention, each [B, H, S, d_k]."""
        batch, length, _ = context.shape
        bias = None if self.qkv.bias is None else self.qkv.bias[self.inner_dim :]
        kv = F.linear(context, self.qkv.weight[self.inner_dim :], bias)
        kv = kv.view(batch, length, 2, self.num_heads, self.head_dim)
        key, value = kv.permute(2, 0, 3, 1, 4).unbind(0)  # 2 x (B, H, S, d_k)
        return key, value

    def forward(
        self,
        x: Tensor,
        context: Tensor | None = None,
        *,
        causal: bool = False,
        key_padding_mask: Tensor | None = None,
        attn_mask: Tensor | None = None,
        need_weights: bool = False,
        cache: AttentionCache | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attend from ``x`` [B, T, dim] to itself, or to ``context`` [B, S, dim].

        Four steps: project Q, K, V (:meth:`project`), build the mask (:meth:`attention_mask`),
        apply Eq. 1 per head (:meth:`attend`), concatenate the heads and project them back
        (:meth:`project_output`).

        Args:
            causal: block keys after each query (masked self-attention of the decoder).
            key_padding_mask: bool [B, S], True = padding key.
            attn_mask: bool [T, S], [B, T, S] or [B, H, T, S], True = may not attend.
            need_weights: also return the attention weights [B, H, T, S], computed by the
                explicit Eq. 1 path instead of the fused kernel.
            cache: for incremental decoding. Self-attention appends this call's keys and values
                to it; cross-attention projects ``context`` (and merges ``key_padding_mask``)
                into it on the first call and reuses both afterwards.
        """
        if x.dim() != 3:
            raise ValueError(f"attention input must be [batch, length, dim], got shape {tuple(x.shape)}")
        query, key, value = self.project(x, context, key_padding_mask, cache)
        if self.temperature is not None and context is None:
            attn_mask = self.locality_mask(query, key, causal, cache, attn_mask)
        if context is not None and cache is not None and attn_mask is None:
            # The memory's padding mask does not change from step to step.
            mask, fused_causal = cache.mask, False
        else:
            mask, fused_causal = self.attention_mask(
                query, key, causal, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=need_weights
            )
        out, weights = self.attend(query, key, value, mask, fused_causal, need_weights)
        out = self.project_output(out)
        return (out, weights) if need_weights else out

    def project(
        self, x: Tensor, context: Tensor | None, key_padding_mask: Tensor | None, cache: AttentionCache | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Q from ``x``; K and V from ``x`` (self-attention, after the cached positions) or from
        ``context`` (cross-attention). Each [B, H, length, d_k]."""
        if context is None:
            query, key, value = self.project_qkv(x)
            if cache is not None:
                key, value = cache.append(key, value)
            return query, key, value
        key, value = self.memory_key_value(context, key_padding_mask, cache)
        return self.project_query(x), key, value

    def memory_key_value(
        self, context: Tensor, key_padding_mask: Tensor | None, cache: AttentionCache | None
    ) -> tuple[Tensor, Tensor]:
        """Cross-attention K, V of ``context``: projected once per sentence when a cache is given,
        which also keeps the memory's merged padding mask; read back from it afterwards."""
        if cache is not None and cache.key is not None and cache.value is not None:
            return cache.key, cache.value
        key, value = self.project_key_value(context)
        if cache is not None:
            cache.key, cache.value = key, value
            batch, keys = context.shape[0], key.shape[-2]
            cache.mask = merge_masks(batch, 1, keys, key_padding_mask=key_padding_mask, device=context.device)
        return key, value

    def locality_mask(
        self, query: Tensor, key: Tensor, causal: bool, cache: AttentionCache | None, attn_mask: Tensor | None
    ) -> Tensor:
        """``attn_mask`` with the diagonal also masked (Locality Self-Attention's mask, Eq. 6):
        bool [T, T] or broadcast with ``attn_mask``'s shape, True = may not attend."""
        if causal or cache is not None:
            raise ValueError(
                "Locality Self-Attention masks each token's own key, so causal attention would leave the "
                "first position no key; build the attention with locality=False"
            )
        length = query.shape[-2]
        diagonal = torch.eye(length, key.shape[-2], dtype=torch.bool, device=query.device)
        return diagonal if attn_mask is None else attn_mask | diagonal

    def attention_mask(
        self,
        query: Tensor,
        key: Tensor,
        causal: bool,
        *,
        attn_mask: Tensor | None,
        key_padding_mask: Tensor | None,
        need_weights: bool,
    ) -> tuple[Tensor | None, bool]:
        """The merged boolean mask (broadcastable to [B, H, T, S], True = may not attend, None when
        nothing is masked) and whether the fused kernel's own ``is_causal`` applies instead of a
        causal mask."""
        batch, _, length, _ = query.shape
        key_len = key.shape[-2]
        # A causal query block that spans all keys is the fused kernel's own is_causal case; a
        # single new token with a cache may see every key, so it needs no mask at all.
        fused_causal = (
            causal
            and not need_weights
            and attn_mask is None
            and key_padding_mask is None
            and key_len == length > 1
        )
        mask = merge_masks(
            batch,
            length,
            key_len,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            causal=causal and length > 1 and not fused_causal,
            device=query.device,
        )
        return mask, fused_causal

    def attend(
        self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, fused_causal: bool, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """Eq. 1 for all heads at once: [B, H, T, d_k] -> [B, H, T, d_v], with the weights
        [B, H, T, S] from the explicit path when ``need_weights``, else through the fused kernel."""
        dropout_p = self.dropout if self.training else 0.0
        scale = self.scale
        if self.temperature is not None:
            # Locality Self-Attention's learned temperature per head scales Q K^T in place of 1/sqrt(d_k).
            query = query * self.temperature.to(query.dtype).view(1, -1, 1, 1)  # (B, H, T, d_k)
            scale = 1.0
        if need_weights:
            return scaled_dot_product(query, key, value, mask, dropout_p, scale)
        with attention_kernel(query, key):
            out = F.scaled_dot_product_attention(
                query,
                key,
                value,
                attn_mask=None if mask is None else ~mask,
                dropout_p=dropout_p,
                is_causal=fused_causal,
                scale=scale,
            )
        return out, None

    def project_output(self, heads: Tensor) -> Tensor:
        """``Concat(head_1..head_h) W^O``: [B, H, T, d_v] -> [B, T, dim], then the residual dropout."""
        batch, _, length, _ = heads.shape
        out = heads.transpose(1, 2).reshape(batch, length, self.inner_dim)  # (B, T, H * d_v)
        return self.proj_drop(self.proj(out))


@contextmanager
def recorded_attention_weights(modules: Iterable[MultiHeadAttention]) -> Iterator[list[Tensor]]:
    """Within the block, every call of the given attention modules also computes its weights
    [B, H, T, S] (the explicit Eq. 1 path of ``need_weights``) and appends them, detached, to the
    yielded list in call order. Callers receive what they asked for (the plain output, or the
    output and the weights under their own ``need_weights=True``), so a whole model can be
    inspected without changing its code; the hooks are removed on exit."""
    weights: list[Tensor] = []
    asked: list[bool] = []  # per call in flight: whether the caller asked for the weights itself

    def ask_for_weights(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple:
        asked.append(bool(kwargs.get("need_weights", False)))
        return args, {**kwargs, "need_weights": True}

    def keep_weights(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: tuple) -> Any:
        out, attention = output
        weights.append(attention.detach())
        return output if asked.pop() else out

    handles = []
    for module in modules:
        handles.append(module.register_forward_pre_hook(ask_for_weights, with_kwargs=True))
        handles.append(module.register_forward_hook(keep_weights, with_kwargs=True))
    try:
        yield weights
    finally:
        for handle in handles:
            handle.remove()
