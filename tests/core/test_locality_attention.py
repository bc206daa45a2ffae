"""Locality Self-Attention (Lee, Lee and Song 2021) against its equations computed by hand: a
learned temperature per head in place of 1/sqrt(d_k), and each token's own key masked."""

import pytest
import torch

import core
from vision.export.safetensors_files import timm_obstacle
from vision.model import VisionTransformer

DIM, HEADS = 16, 4


def by_hand(attention: core.MultiHeadAttention, x: torch.Tensor, padding: torch.Tensor | None) -> torch.Tensor:
    """Eq. 5-7 of Lee et al.: softmax(R^M(x) / tau) V per head, with R^M the scores Q K^T whose
    diagonal (and padded keys) are -inf, then the heads concatenated and projected."""
    batch, length, _ = x.shape
    q, k, v = (x @ attention.qkv.weight.T + attention.qkv.bias).split(DIM, dim=-1)
    q, k, v = (t.reshape(batch, length, HEADS, DIM // HEADS).permute(0, 2, 1, 3) for t in (q, k, v))
    scores = torch.einsum("bhtd,bhsd->bhts", q, k) * attention.temperature.view(1, HEADS, 1, 1)
    blocked = torch.eye(length, dtype=torch.bool).expand(batch, HEADS, length, length)
    if padding is not None:
        blocked = blocked | padding[:, None, None, :]
    weights = scores.masked_fill(blocked, float("-inf")).softmax(-1)
    heads = torch.einsum("bhts,bhsd->bthd", weights, v).reshape(batch, length, DIM)
    return heads @ attention.proj.weight.T + attention.proj.bias


@pytest.fixture
def attention() -> core.MultiHeadAttention:
    torch.manual_seed(0)
    module = core.MultiHeadAttention(DIM, HEADS, locality=True).eval()
    with torch.no_grad():
        module.temperature.copy_(torch.tensor([0.1, 0.5, 1.0, 2.0]))  # a different temperature per head
        module.qkv.bias.normal_()
        module.proj.bias.normal_()
    return module


@pytest.mark.parametrize("padded", [False, True])
def test_outputs_equal_the_equations_by_hand(attention: core.MultiHeadAttention, padded: bool) -> None:
    x = torch.randn(3, 6, DIM)
    padding = core.padding_mask(torch.tensor([6, 4, 3]), 6) if padded else None
    expected = by_hand(attention, x, padding)
    out, weights = attention(x, key_padding_mask=padding, need_weights=True)
    torch.testing.assert_close(attention(x, key_padding_mask=padding), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert torch.all(weights.diagonal(dim1=-2, dim2=-1) == 0)  # no token attends to itself


def test_the_temperature_starts_at_the_paper_scale_and_is_learned() -> None:
    attention = core.MultiHeadAttention(DIM, HEADS, locality=True)
    torch.testing.assert_close(attention.temperature.detach(), torch.full((HEADS,), (DIM // HEADS) ** -0.5))
    assert "temperature" in attention.state_dict()
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the training precision of a CPU with bf16
        out = attention(torch.randn(2, 5, DIM))
    out.float().square().sum().backward()
    assert attention.temperature.grad is not None and torch.all(attention.temperature.grad != 0)
    assert "temperature" not in core.MultiHeadAttention(DIM, HEADS).state_dict()


def test_causal_attention_refuses_the_diagonal_mask(attention: core.MultiHeadAttention) -> None:
    with pytest.raises(ValueError, match="would leave the first position no key"):
        attention(torch.randn(1, 4, DIM), causal=True)


def test_cross_attention_keeps_every_key_and_uses_the_temperature(attention: core.MultiHeadAttention) -> None:
    x, memory = torch.randn(2, 3, DIM), torch.randn(2, 3, DIM)
    _, weights = attention(x, context=memory, need_weights=True)
    assert torch.all(weights > 0)
    plain = core.MultiHeadAttention(DIM, HEADS).eval()
    plain.load_state_dict({k: v for k, v in attention.state_dict().items() if k != "temperature"})
    with torch.no_grad():
        attention.temperature.fill_(plain.scale)
    torch.testing.assert_close(attention(x, context=memory), plain(x, context=memory))


def test_a_vision_transformer_with_locality_attention_trains_in_every_layer() -> None:
    torch.manual_seed(0)
    net = VisionTransformer(img_size=16, patch_size=4, num_classes=3, dim=32, depth=2, num_heads=4, locality=True)
    assert all(layer.attn.temperature is not None for layer in net.encoder.layers)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = net(torch.randn(2, 3, 16, 16)).float().logsumexp(-1).sum()
    loss.backward()
    assert all(torch.isfinite(layer.attn.temperature.grad).all() for layer in net.encoder.layers)
    assert "Locality Self-Attention" in timm_obstacle({"stem": "patch", "norm_eps": 1e-6, "locality": True})
    assert timm_obstacle({"stem": "patch", "norm_eps": 1e-6}) is None  # the settings of older checkpoints


def test_a_vision_transformer_with_locality_attention_traces_and_exports() -> None:
    torch.manual_seed(0)
    net = VisionTransformer(img_size=16, patch_size=4, num_classes=3, dim=32, depth=1, num_heads=4, locality=True).eval()
    images = torch.randn(2, 3, 16, 16)
    expected = net(images)
    torch.testing.assert_close(torch.jit.trace(net, images)(images), expected)
    torch.testing.assert_close(torch.export.export(net, (images,)).module()(images), expected)
