"""Incremental decoding with the key/value cache equals the full causal pass."""

import torch

import core


def test_token_by_token_decoding_equals_full_pass() -> None:
    torch.manual_seed(0)
    dim, steps = 16, 7
    decoder = core.Decoder(dim, 2, 4, norm_first=True).eval()
    memory = torch.randn(3, 5, dim)
    memory_padding = core.padding_mask(torch.tensor([5, 2, 4]), 5)
    target = torch.randn(3, steps, dim)
    full = decoder(target, memory, memory_key_padding_mask=memory_padding)

    cache = decoder.new_cache()
    outputs = []
    for t in range(steps):
        assert cache.length == t
        outputs.append(decoder(target[:, t : t + 1], memory, memory_key_padding_mask=memory_padding, cache=cache))
    torch.testing.assert_close(torch.cat(outputs, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.cross_attn[0].length == 5  # memory projected once and kept


def test_cache_accepts_blocks_of_several_tokens() -> None:
    torch.manual_seed(1)
    decoder = core.Decoder(8, 1, 2).eval()
    memory, target = torch.randn(2, 4, 8), torch.randn(2, 6, 8)
    cache = decoder.new_cache()
    first = decoder(target[:, :4], memory, cache=cache)
    second = decoder(target[:, 4:], memory, cache=cache)
    torch.testing.assert_close(torch.cat([first, second], 1), decoder(target, memory), atol=1e-5, rtol=1e-5)


def test_reorder_selects_batch_rows_in_every_layer() -> None:
    torch.manual_seed(2)
    decoder = core.Decoder(8, 2, 2).eval()
    memory, target = torch.randn(3, 4, 8), torch.randn(3, 2, 8)
    memory_padding = core.padding_mask(torch.tensor([4, 1, 3]), 4)
    cache = decoder.new_cache()
    decoder(target, memory, memory_key_padding_mask=memory_padding, cache=cache)
    keys = [c.key.clone() for c in cache.self_attn + cache.cross_attn]
    index = torch.tensor([2, 2, 0])
    cache.reorder(index)
    for before, entry in zip(keys, cache.self_attn + cache.cross_attn):
        torch.testing.assert_close(entry.key, before[index])
    # The cross-attention cache keeps the memory's padding mask, reordered with its rows.
    assert torch.equal(cache.cross_attn[0].mask[:, 0, 0], memory_padding[index])


def test_reorder_within_copies_of_one_source_leaves_the_cross_attention_caches() -> None:
    torch.manual_seed(3)
    decoder = core.Decoder(8, 2, 2).eval()
    memory = torch.randn(2, 4, 8).repeat_interleave(2, dim=0)  # two beams of each of two sources
    cache = decoder.new_cache()
    decoder(torch.randn(4, 2, 8), memory, cache=cache)
    cross = [(entry.key, entry.value, entry.mask) for entry in cache.cross_attn]
    self_keys = [entry.key.clone() for entry in cache.self_attn]
    index = torch.tensor([1, 1, 3, 2])  # each row stays among its source's beams
    cache.reorder(index, cross_attention=False)
    for before, entry in zip(self_keys, cache.self_attn):
        torch.testing.assert_close(entry.key, before[index])
    for (key, value, mask), entry in zip(cross, cache.cross_attn):
        assert entry.key is key and entry.value is value and entry.mask is mask
    # Left as they were, they equal what a reorder would have made of them.
    torch.testing.assert_close(cache.cross_attn[0].key[index], cache.cross_attn[0].key)
