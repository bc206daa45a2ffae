"""The decoder-only (GPT-style) stack: causal self-attention and no cross-attention, against
torch.nn.TransformerEncoder with a causal mask, with the KV cache and without."""

import pytest
import torch
from torch import nn

import core
from tests.core.reference import copy_from_torch_stack

DIM, HEADS, FFN, DEPTH = 16, 4, 32, 2


def left_padding(pads: list[int], length: int) -> torch.Tensor:
    """Bool [B, length], True on the first ``pads[b]`` positions of row b (prompts padded on the left)."""
    return torch.arange(length)[None, :] < torch.tensor(pads)[:, None]


def size(module: nn.Module) -> int:
    """Number of parameters of ``module``."""
    return sum(parameter.numel() for parameter in module.parameters())


@pytest.mark.parametrize("norm_first", [False, True])
def test_matches_torch_encoder_with_a_causal_mask(norm_first: bool) -> None:
    torch.manual_seed(0)
    reference = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(DIM, HEADS, FFN, dropout=0.0, batch_first=True, norm_first=norm_first),
        DEPTH,
        norm=nn.LayerNorm(DIM) if norm_first else None,
        enable_nested_tensor=False,
    ).double().eval()
    with torch.no_grad():  # torch copies one layer DEPTH times; make the layers (and norms) differ
        for parameter in reference.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    ours = core.CausalDecoder(DIM, DEPTH, HEADS, ffn_dim=FFN, norm_first=norm_first).double().eval()
    copy_from_torch_stack(ours, reference, encoder=True)

    x = torch.randn(3, 6, DIM, dtype=torch.float64)
    torch.testing.assert_close(ours(x), reference(x, mask=core.causal_mask(6)))

    padding = left_padding([0, 2, 5], 6)
    expected = reference(x, mask=core.causal_mask(6), src_key_padding_mask=padding)
    got = ours(x, key_padding_mask=padding)
    keep = ~padding  # a pad position sees no key at all: torch gives NaN there, core something finite
    torch.testing.assert_close(got[keep], expected[keep])
    assert got.isfinite().all()


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_decoding_equals_the_full_pass(norm_first: bool) -> None:
    torch.manual_seed(1)
    stack = core.CausalDecoder(DIM, DEPTH, HEADS, norm_first=norm_first).double().eval()
    steps, prompt = 7, 3
    x = torch.randn(2, steps, DIM, dtype=torch.float64)
    padding = left_padding([0, 2], steps)
    full = stack(x, key_padding_mask=padding)

    cache = stack.new_cache()
    outputs = [stack(x[:, :prompt], key_padding_mask=padding[:, :prompt], cache=cache)]
    for t in range(prompt, steps):
        assert cache.length == t
        outputs.append(stack(x[:, t : t + 1], key_padding_mask=padding[:, : t + 1], cache=cache))
    assert cache.length == steps and cache.cross_attn == []
    keep = ~padding
    torch.testing.assert_close(torch.cat(outputs, dim=1)[keep], full[keep])

    cache = stack.new_cache()
    one_by_one = [stack(x[:1, t : t + 1], cache=cache) for t in range(steps)]
    torch.testing.assert_close(torch.cat(one_by_one, dim=1), stack(x[:1]))


def test_has_no_cross_attention_parameters_and_uses_every_one() -> None:
    stack = core.CausalDecoder(DIM, DEPTH, HEADS, ffn_dim=FFN)
    names = [name for name, _ in stack.named_parameters()]
    assert not [name for name in names if "cross" in name]
    assert sum(isinstance(module, core.MultiHeadAttention) for module in stack.modules()) == DEPTH
    # The same keys as an encoder of the same size, which has no cross-attention either.
    assert stack.state_dict().keys() == core.Encoder(DIM, DEPTH, HEADS, ffn_dim=FFN).state_dict().keys()
    decoder = core.Decoder(DIM, DEPTH, HEADS, ffn_dim=FFN)
    cross_sublayers = [module for layer in decoder.layers for module in (layer.cross_attn, layer.norm2)]
    assert size(stack) == size(decoder) - sum(size(module) for module in cross_sublayers)

    stack(torch.randn(2, 5, DIM)).square().sum().backward()
    assert [name for name, p in stack.named_parameters() if p.grad is None or not p.grad.any()] == []


def test_a_position_cannot_see_the_future() -> None:
    torch.manual_seed(2)
    stack = core.CausalDecoder(DIM, DEPTH, HEADS, norm_first=True).double().eval()
    x = torch.randn(2, 8, DIM, dtype=torch.float64)
    changed = x.clone()
    changed[:, 5] = torch.randn(2, DIM, dtype=torch.float64)
    before, after = stack(x), stack(changed)
    torch.testing.assert_close(after[:, :5], before[:, :5], rtol=0, atol=1e-12)
    assert (after[:, 5:] - before[:, 5:]).abs().amax(dim=-1).gt(1e-3).all()

    # The control: the same weights without the causal mask let every position see position 5.
    encoder = core.Encoder(DIM, DEPTH, HEADS, norm_first=True).double().eval()
    encoder.load_state_dict(stack.state_dict())
    assert (encoder(changed)[:, :5] - encoder(x)[:, :5]).abs().amax(dim=-1).gt(1e-3).all()
