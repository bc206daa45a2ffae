"""Mask helpers share one convention: True = may not attend."""

import torch

import core


def test_causal_mask_blocks_the_future_with_and_without_cached_prefix() -> None:
    assert core.causal_mask(3).tolist() == [[False, True, True], [False, False, True], [False, False, False]]
    # Two queries at positions 3 and 4 of a 5-key sequence.
    assert core.causal_mask(2, 5).tolist() == [[False] * 4 + [True], [False] * 5]


def test_padding_masks_from_lengths_and_ids_agree() -> None:
    ids = torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0]])
    from_ids = core.padding_mask_from_ids(ids, pad_id=0)
    assert torch.equal(from_ids, core.padding_mask(torch.tensor([2, 1]), 4))


def test_merge_masks_combines_and_opens_fully_blocked_rows() -> None:
    padding = torch.tensor([[False, False, True], [True, True, True]])
    mask = core.merge_masks(2, 3, 3, key_padding_mask=padding, causal=True)
    assert mask.shape == (2, 1, 3, 3)
    assert mask[0, 0].tolist() == [[False, True, True], [False, False, True], [False, False, True]]
    assert not mask[1].any()  # nothing to attend to: opened so the softmax stays finite
    assert core.merge_masks(2, 3, 3) is None


def test_a_padding_mask_that_is_not_bool_is_refused_naming_the_convention() -> None:
    import pytest

    keep = torch.tensor([[1, 1, 0]])  # a Hugging Face attention_mask: 1 = keep
    with pytest.raises(TypeError, match=r"key_padding_mask must be bool \(True = padding.*attention_mask == 0"):
        core.merge_masks(1, 3, 3, key_padding_mask=keep)
