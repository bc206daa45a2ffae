"""Mimetic initialization of self-attention ("Mimetic Initialization of Self-Attention Layers",
Trockman and Kolter 2023): start the attention weights with the structure that trained
Transformers' weights show, instead of independent noise.

Trained layers have ``W_q^T W_k`` close to ``alpha_1 Z_1 + beta_1 I`` (a query attends to keys
like itself, so with positions added a token first looks at its neighbours) and ``W_v^T W_o^T``
close to ``alpha_2 Z_2 - beta_2 I``, with ``Z`` random [D, D] of entries ``N(0, 1 / D)``. Each
target is factored through its SVD, ``A = U S V^T -> (U S^1/2)(S^1/2 V^T)``: per head, the
first ``d_k`` factors give ``W_q`` and ``W_k`` (the best rank-``d_k`` product); all heads
together give ``W_v`` and ``W_o``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from core.attention import MultiHeadAttention
from core.constraints import NON_NEGATIVE

# The paper's values for ViTs trained from scratch on small data (CIFAR, Tiny ImageNet).
QK_NOISE = 0.7
QK_IDENTITY = 0.7
VO_NOISE = 0.4
VO_IDENTITY = 0.4


def factor_pair(dim: int, noise: float, identity: float, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """``(L, R)`` with ``L @ R = noise * Z + identity * I`` ([D, D] each; ``Z`` has entries
    N(0, 1/D)); ``L = U S^1/2`` and ``R = S^1/2 V^T``, so the first ``r`` columns of ``L`` and rows
    of ``R`` give the best rank-``r`` approximation."""
    target = noise * torch.randn(dim, dim, generator=generator) / dim**0.5 + identity * torch.eye(dim)
    u, s, vh = torch.linalg.svd(target)
    root = s.sqrt()
    return u * root, root[:, None] * vh  # (D, D), (D, D)


@torch.no_grad()
def mimetic_init_(
    attention: MultiHeadAttention,
    qk_noise: float = QK_NOISE,
    qk_identity: float = QK_IDENTITY,
    vo_noise: float = VO_NOISE,
    vo_identity: float = VO_IDENTITY,
    generator: torch.Generator | None = None,
) -> MultiHeadAttention:
    """Set ``attention``'s Q, K, V and output weights in place so that, per head,
    ``W_q^T W_k ~ qk_noise Z + qk_identity I`` and, over all heads,
    ``W_v^T W_o^T ~ vo_noise Z - vo_identity I`` (biases are left as they are). Needs
    ``d_k <= D`` per head and ``H d_k <= D`` for the values; returns the module."""
    for value, name in ((qk_noise, "qk_noise"), (qk_identity, "qk_identity"), (vo_noise, "vo_noise"), (vo_identity, "vo_identity")):
        NON_NEGATIVE.require(value, name)
    dim = attention.qkv.in_features
    heads, head_dim, inner = attention.num_heads, attention.head_dim, attention.inner_dim
    if inner > dim:
        raise ValueError(
            f"mimetic init needs num_heads * head_dim <= dim (W_v W_o is at most rank dim), got {inner} > {dim}"
        )
    weight = attention.qkv.weight  # rows: [W^Q; W^K; W^V], each (H * d_k, D), head h at rows h*d_k:(h+1)*d_k
    for head in range(heads):
        left, right = factor_pair(dim, qk_noise, qk_identity, generator)
        rows = slice(head * head_dim, (head + 1) * head_dim)
        weight[rows] = left[:, :head_dim].T.to(weight)  # W_q,h: (d_k, D); q = x W_q,h^T
        weight[inner:][rows] = right[:head_dim].to(weight)  # W_k,h: (d_k, D); q k^T = x W_q,h^T W_k,h x^T
    left, right = factor_pair(dim, vo_noise, -vo_identity, generator)
    weight[2 * inner :] = left[:, :inner].T.to(weight)  # W_v: (H d_k, D)
    attention.proj.weight.copy_(right[:inner].T)  # W_o: (D, H d_k); out = x W_v^T W_o^T
    return attention
