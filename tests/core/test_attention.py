"""MultiHeadAttention against torch.nn.MultiheadAttention, and its masking guarantees."""

import pytest
import torch
from torch import nn

import core
from tests.core.reference import copy_from_torch_mha

DIM, HEADS = 16, 4


@pytest.fixture
def pair() -> tuple[core.MultiHeadAttention, nn.MultiheadAttention]:
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(DIM, HEADS, batch_first=True).eval()
    nn.init.normal_(reference.in_proj_bias)
    nn.init.normal_(reference.out_proj.bias)
    ours = core.MultiHeadAttention(DIM, HEADS).eval()
    copy_from_torch_mha(ours, reference)
    return ours, reference


def test_self_attention_matches_torch(pair) -> None:
    ours, reference = pair
    x = torch.randn(2, 7, DIM)
    expected, expected_weights = reference(x, x, x, average_attn_weights=False)
    out, weights = ours(x, need_weights=True)
    torch.testing.assert_close(ours(x), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, expected_weights, atol=1e-5, rtol=1e-5)


def test_cross_attention_with_padding_matches_torch(pair) -> None:
    ours, reference = pair
    x, memory = torch.randn(3, 5, DIM), torch.randn(3, 9, DIM)
    padding = core.padding_mask(torch.tensor([9, 4, 6]), 9)
    expected, _ = reference(x, memory, memory, key_padding_mask=padding)
    for need_weights in (False, True):
        out = ours(x, context=memory, key_padding_mask=padding, need_weights=need_weights)
        out = out[0] if need_weights else out
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_causal_self_attention_with_padding_matches_torch(pair) -> None:
    ours, reference = pair
    x = torch.randn(2, 6, DIM)
    padding = core.padding_mask(torch.tensor([6, 3]), 6)
    expected, _ = reference(x, x, x, attn_mask=core.causal_mask(6), key_padding_mask=padding)
    torch.testing.assert_close(ours(x, causal=True, key_padding_mask=padding), expected, atol=1e-5, rtol=1e-5)
    out, weights = ours(x, causal=True, key_padding_mask=padding, need_weights=True)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert torch.all(weights.masked_select(core.causal_mask(6)) == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, HEADS, 6))


def test_fast_path_equals_explicit_weights_path(pair) -> None:
    ours, _ = pair
    x, memory = torch.randn(2, 5, DIM), torch.randn(2, 8, DIM)
    padding = core.padding_mask(torch.tensor([8, 2]), 8)
    for kwargs in ({}, {"causal": True}, {"context": memory, "key_padding_mask": padding}):
        fast = ours(x, **kwargs)
        explicit, _ = ours(x, need_weights=True, **kwargs)
        torch.testing.assert_close(fast, explicit, atol=1e-6, rtol=1e-5)


def test_causal_outputs_ignore_the_future() -> None:
    torch.manual_seed(1)
    mha = core.MultiHeadAttention(DIM, HEADS).eval()
    x = torch.randn(1, 8, DIM)
    changed = x.clone()
    changed[:, 5:] = torch.randn(1, 3, DIM)
    before, after = mha(x, causal=True), mha(changed, causal=True)
    torch.testing.assert_close(before[:, :5], after[:, :5])
    assert not torch.allclose(before[:, 5:], after[:, 5:])


def test_padded_keys_do_not_change_real_outputs_and_full_padding_is_finite() -> None:
    torch.manual_seed(2)
    mha = core.MultiHeadAttention(DIM, HEADS).eval()
    x = torch.randn(2, 6, DIM)
    padding = core.padding_mask(torch.tensor([4, 0]), 6)  # second row is all padding
    changed = x.clone()
    changed[0, 4:] = torch.randn(2, DIM)
    before, after = mha(x, key_padding_mask=padding), mha(changed, key_padding_mask=padding)
    torch.testing.assert_close(before[0, :4], after[0, :4])
    for need_weights in (False, True):
        out = mha(x, key_padding_mask=padding, need_weights=need_weights)
        out = out[0] if need_weights else out
        assert torch.isfinite(out).all()


def test_head_dim_decouples_width_from_heads() -> None:
    mha = core.MultiHeadAttention(6, 2, head_dim=4)
    out, weights = mha(torch.randn(1, 3, 6), need_weights=True)
    assert mha.qkv.weight.shape == (24, 6) and out.shape == (1, 3, 6) and weights.shape == (1, 2, 3, 3)


def test_bad_shapes_are_reported() -> None:
    with pytest.raises(ValueError, match="dim=16 is not divisible by num_heads=5.*set num_heads=4 or dim=15"):
        core.MultiHeadAttention(16, 5)
    mha = core.MultiHeadAttention(DIM, HEADS)
    with pytest.raises(ValueError, match="key_padding_mask has shape"):
        mha(torch.randn(2, 3, DIM), key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\[batch, length, dim\]"):
        mha(torch.randn(3, DIM))


def test_recorded_attention_weights_reads_a_whole_stack_without_changing_it() -> None:
    torch.manual_seed(3)
    encoder = core.Encoder(DIM, 2, HEADS, norm_first=True).eval()
    x = torch.randn(2, 5, DIM)
    expected = encoder(x)
    with core.recorded_attention_weights(layer.attn for layer in encoder.layers) as weights:
        got = encoder(x)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
    assert [w.shape for w in weights] == [(2, HEADS, 5, 5)] * 2
    first_input = encoder.layers[0].norm1(x)
    _, reference = encoder.layers[0].attn(first_input, need_weights=True)
    torch.testing.assert_close(weights[0], reference)
    encoder(x)
    assert len(weights) == 2  # hooks are gone after the block


def test_recorded_attention_weights_give_a_caller_that_asks_for_weights_its_pair() -> None:
    mha = core.MultiHeadAttention(DIM, HEADS).eval()
    x = torch.randn(2, 5, DIM)
    with core.recorded_attention_weights([mha]) as weights:
        out, own = mha(x, need_weights=True)
        plain = mha(x)
    assert out.shape == plain.shape == (2, 5, DIM) and own.shape == (2, HEADS, 5, 5)
    assert len(weights) == 2 and torch.equal(weights[0], own)


def test_cpu_bf16_training_takes_the_math_kernel_up_to_its_key_limit() -> None:
    limit = core.attention.MATH_KERNEL_MAX_KEYS
    query = torch.randn(1, 1, 4, 8, dtype=torch.bfloat16, requires_grad=True)
    short, long = torch.randn(1, 1, limit, 8, dtype=torch.bfloat16), torch.randn(1, 1, limit + 1, 8, dtype=torch.bfloat16)

    def math_only(query: torch.Tensor, key: torch.Tensor) -> bool:
        with core.attention.attention_kernel(query, key):
            return torch.backends.cuda.math_sdp_enabled() and not torch.backends.cuda.flash_sdp_enabled()

    assert math_only(query, short)
    assert not math_only(query, long)  # the fused kernel is faster over many keys
    assert not math_only(query.float(), short.float())  # float32: PyTorch's own choice
    assert not math_only(query.detach(), short)  # inference
    with torch.no_grad():
        assert not math_only(query, short)


def test_bf16_training_gradients_equal_the_explicit_equation() -> None:
    torch.manual_seed(0)
    ours = core.MultiHeadAttention(DIM, HEADS)
    x = torch.randn(3, 6, DIM)
    padding = core.padding_mask(torch.tensor([6, 4, 2]), 6)
    grads = []
    for need_weights in (False, True):  # the kernel of F.scaled_dot_product_attention; Eq. 1 by hand
        ours.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = ours(x, key_padding_mask=padding, need_weights=need_weights)
        (out[0] if need_weights else out).float().square().sum().backward()
        grads.append(ours.qkv.weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1], atol=0.05, rtol=0.02)
