"""Encoder and decoder layers against torch.nn.TransformerEncoderLayer / DecoderLayer."""

import pytest
import torch
from torch import nn

import core
from tests.core.reference import copy_from_torch_layer

DIM, HEADS, FFN = 16, 4, 32


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_torch(norm_first: bool) -> None:
    torch.manual_seed(0)
    reference = nn.TransformerEncoderLayer(
        DIM, HEADS, FFN, dropout=0.0, batch_first=True, norm_first=norm_first, layer_norm_eps=1e-6
    ).eval()
    ours = core.EncoderLayer(DIM, HEADS, ffn_dim=FFN, norm_first=norm_first, norm_eps=1e-6).eval()
    copy_from_torch_layer(ours, reference, encoder=True)
    x = torch.randn(3, 7, DIM)
    padding = core.padding_mask(torch.tensor([7, 5, 2]), 7)
    expected = reference(x, src_key_padding_mask=padding)
    got = ours(x, key_padding_mask=padding)
    keep = ~padding  # torch's fast path may zero padded rows; compare the real positions
    torch.testing.assert_close(got[keep], expected[keep], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(norm_first: bool) -> None:
    torch.manual_seed(0)
    reference = nn.TransformerDecoderLayer(
        DIM, HEADS, FFN, dropout=0.0, batch_first=True, norm_first=norm_first
    ).eval()
    ours = core.DecoderLayer(DIM, HEADS, ffn_dim=FFN, norm_first=norm_first).eval()
    copy_from_torch_layer(ours, reference, encoder=False)
    x, memory = torch.randn(2, 5, DIM), torch.randn(2, 8, DIM)
    memory_padding = core.padding_mask(torch.tensor([8, 3]), 8)
    expected = reference(x, memory, tgt_mask=core.causal_mask(5), memory_key_padding_mask=memory_padding)
    got = ours(x, memory, memory_key_padding_mask=memory_padding)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_stacks_chain_layers_and_end_pre_norm_with_a_norm() -> None:
    torch.manual_seed(0)
    encoder = core.Encoder(DIM, 3, HEADS, norm_first=True, drop_path=0.2).eval()
    assert isinstance(encoder.norm, nn.LayerNorm)
    assert [getattr(layer.drop_path1, "p", 0.0) for layer in encoder.layers] == pytest.approx([0.0, 0.1, 0.2])
    x = torch.randn(2, 4, DIM)
    expected = x
    for layer in encoder.layers:
        expected = layer(expected)
    torch.testing.assert_close(encoder(x), encoder.norm(expected))
    assert isinstance(core.Decoder(DIM, 2, HEADS).norm, nn.Identity)


def test_layer_scale_and_drop_path_act_only_where_asked() -> None:
    torch.manual_seed(0)
    layer = core.EncoderLayer(DIM, HEADS, norm_first=True, layer_scale=1e-5, drop_path=0.5, activation="gelu")
    x = torch.randn(64, 3, DIM)
    layer.eval()
    # A LayerScale of 1e-5 keeps each residual branch tiny: the block is nearly the identity.
    torch.testing.assert_close(layer(x), x, atol=1e-3, rtol=0)
    layer.train()
    dropped = (layer(x) == x).all(dim=(1, 2))
    assert 0 < int(dropped.sum()) < 64  # some samples lose both branches, others keep them
    with pytest.raises(ValueError, match="activation must be one of relu, gelu, got 'swish'"):
        core.EncoderLayer(DIM, HEADS, activation="swish")


def test_the_feed_forward_drops_after_its_activation_only_where_asked() -> None:
    torch.manual_seed(0)
    x = torch.randn(4, 6, DIM)
    paper = core.FeedForward(DIM, FFN, dropout=0.5, activation_dropout=0.0)
    timm = core.FeedForward(DIM, FFN, dropout=0.5)
    timm.load_state_dict(paper.state_dict())
    expected = paper.eval()(x)
    # Section 5.4: only the output is dropped, so each element is 0 or twice the evaluated one.
    got = paper.train()(x)
    kept = got != 0
    assert 0 < int(kept.sum()) < got.numel()
    torch.testing.assert_close(got[kept], 2 * expected[kept])
    # timm's Mlp also drops the hidden activations: the kept outputs are other sums.
    got = timm.train()(x)
    kept = got != 0
    assert not torch.allclose(got[kept], 2 * expected[kept])
    assert (timm.drop1.p, timm.drop2.p, paper.drop1.p, paper.drop2.p) == (0.5, 0.5, 0.0, 0.5)
    layer = core.DecoderLayer(DIM, HEADS, ffn_dim=FFN, dropout=0.1, activation_dropout=0.0)
    assert (layer.mlp.drop1.p, layer.mlp.drop2.p) == (0.0, 0.1)
