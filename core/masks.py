"""Attention masks with one boolean convention everywhere: ``True`` = may not attend.

The paper masks illegal connections by setting their scores to -inf before the softmax
(Section 3.2.3). Two kinds of mask exist: the causal mask of the decoder's self-attention
(position t may not see positions > t) and the padding mask (no query may attend a pad key).
"""

from __future__ import annotations

import torch
from torch import Tensor


def causal_mask(
    query_len: int,
    key_len: int | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    """Bool [T, S] mask that blocks future keys; True = may not attend.

    With ``key_len > query_len`` the queries are the *last* ``query_len`` positions of the
    sequence (incremental decoding with ``key_len - query_len`` cached positions), so query ``i``
    may see keys ``0 .. key_len - query_len + i``.
    """
    key_len = query_len if key_len is None else key_len
    if key_len < query_len:
        raise ValueError(f"causal_mask: key_len {key_len} is shorter than query_len {query_len}")
    offset = key_len - query_len
    return torch.ones(query_len, key_len, dtype=torch.bool, device=device).triu(offset + 1)


def padding_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """Bool [B, S] mask from sequence lengths [B]; True marks padding positions."""
    max_len = int(lengths.max()) if max_len is None else max_len
    positions = torch.arange(max_len, device=lengths.device)
    return positions.unsqueeze(0) >= lengths.unsqueeze(1)


def padding_mask_from_ids(ids: Tensor, pad_id: int) -> Tensor:
    """Bool [B, S] mask from token ids [B, S]; True where ``ids == pad_id``."""
    return ids.eq(pad_id)


def merge_masks(
    batch_size: int,
    query_len: int,
    key_len: int,
    attn_mask: Tensor | None = None,
    key_padding_mask: Tensor | None = None,
    causal: bool = False,
    device: torch.device | str | None = None,
) -> Tensor | None:
    """Combine causal, explicit and key-padding masks into one bool [B, 1|H, T, S] mask.

    ``attn_mask`` may be [T, S], [B, T, S] or [B, H, T, S]; ``key_padding_mask`` is [B, S].
    Returns ``None`` when nothing is masked. Rows in which every key is blocked (the queries of a
    sequence that is all padding, or a query whose ``attn_mask`` row blocks every key) are opened
    to every key again, padding included: their output is meaningless but finite, instead of the
    NaN a softmax over nothing gives.
    """
    masks: list[Tensor] = []
    if causal:
        masks.append(causal_mask(query_len, key_len, device=device)[None, None])  # (1, 1, T, S)
    if attn_mask is not None:
        if attn_mask.dtype != torch.bool:
            raise TypeError(f"attn_mask must be bool (True = may not attend), got {attn_mask.dtype}")
        if attn_mask.dim() == 2:
            attn_mask = attn_mask[None, None]  # (T, S) -> (1, 1, T, S)
        elif attn_mask.dim() == 3:
            attn_mask = attn_mask[:, None]  # (B, T, S) -> (B, 1, T, S)
        masks.append(attn_mask)
    if key_padding_mask is not None:
        if key_padding_mask.dtype != torch.bool:
            raise TypeError(
                f"key_padding_mask must be bool (True = padding, a key no query may attend to), got "
                f"{key_padding_mask.dtype}; a Hugging Face attention_mask (1 = keep) is its negation: attention_mask == 0"
            )
        if key_padding_mask.shape != (batch_size, key_len):
            raise ValueError(
                f"key_padding_mask has shape {tuple(key_padding_mask.shape)}, expected "
                f"(batch, keys) = ({batch_size}, {key_len})"
            )
        masks.append(key_padding_mask[:, None, None, :])  # (B, S) -> (B, 1, 1, S)
    if not masks:
        return None
    mask = masks[0]
    for other in masks[1:]:
        mask = mask | other
    fully_blocked = mask.all(dim=-1, keepdim=True)
    return mask & ~fully_blocked
