"""Mimetic initialization against its formula (Trockman and Kolter 2023), and what it is for."""

import pytest
import torch

import core
from core.initialization import mimetic_init_
from vision.model import VisionTransformer

DIM = 16


def targets(seed: int, heads: int, qk: tuple[float, float], vo: tuple[float, float]) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The matrices the init factors, redrawn from the same generator: one ``a Z / sqrt(D) + b I``
    per head for Q K, then ``a Z / sqrt(D) - b I`` for V O."""
    generator = torch.Generator().manual_seed(seed)
    eye = torch.eye(DIM)
    per_head = [qk[0] * torch.randn(DIM, DIM, generator=generator) / DIM**0.5 + qk[1] * eye for _ in range(heads)]
    return per_head, vo[0] * torch.randn(DIM, DIM, generator=generator) / DIM**0.5 - vo[1] * eye


def test_one_full_width_head_gets_exactly_the_target_products() -> None:
    attention = core.MultiHeadAttention(DIM, 1)
    mimetic_init_(attention, 0.7, 0.7, 0.4, 0.4, generator=torch.Generator().manual_seed(3))
    (qk_target,), vo_target = targets(3, 1, (0.7, 0.7), (0.4, 0.4))
    w_q, w_k, w_v = attention.qkv.weight.detach().chunk(3)
    torch.testing.assert_close(w_q.T @ w_k, qk_target, atol=1e-5, rtol=1e-5)  # q k^T = x W_q^T W_k x^T
    torch.testing.assert_close(w_v.T @ attention.proj.weight.detach().T, vo_target, atol=1e-5, rtol=1e-5)


def test_each_narrow_head_gets_the_best_low_rank_product() -> None:
    heads, head_dim = 4, DIM // 4
    attention = mimetic_init_(core.MultiHeadAttention(DIM, heads), generator=torch.Generator().manual_seed(5))
    qk_targets, vo_target = targets(5, heads, (0.7, 0.7), (0.4, 0.4))
    w_q, w_k, w_v = attention.qkv.weight.detach().chunk(3)
    for head, target in enumerate(qk_targets):
        rows = slice(head * head_dim, (head + 1) * head_dim)
        u, s, vh = torch.linalg.svd(target)
        best = u[:, :head_dim] @ torch.diag(s[:head_dim]) @ vh[:head_dim]  # Eckart-Young
        torch.testing.assert_close(w_q[rows].T @ w_k[rows], best, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w_v.T @ attention.proj.weight.detach().T, vo_target, atol=1e-5, rtol=1e-5)


def test_a_patch_starts_by_attending_to_itself_and_its_neighbours() -> None:
    """With fixed 2D positions, the ``+ I`` of ``W_q^T W_k`` makes the first layer's attention
    peak on each patch's own position, where the default init spreads it evenly. The linear patch
    embedding keeps the image's content from adding a similarity of its own (a convolutional stem
    mixes neighbouring pixels into every token), so the positions alone decide."""

    def own_position_weight(weight_init: str) -> float:
        torch.manual_seed(0)
        model = VisionTransformer(
            img_size=32, patch_size=4, dim=64, depth=1, num_heads=4, weight_init=weight_init, stem="patch"
        ).eval()
        tokens = model.encoder.layers[0].norm1(model.embed(torch.randn(2, 3, 32, 32)))
        _, weights = model.encoder.layers[0].attn(tokens, need_weights=True)  # (B, H, 65, 65)
        return weights[:, :, 1:, 1:].diagonal(dim1=-2, dim2=-1).mean().item()

    uniform = 1 / 65
    assert own_position_weight("timm") < 1.5 * uniform
    assert own_position_weight("mimetic") > 3 * uniform


def test_values_wider_than_the_model_are_refused() -> None:
    with pytest.raises(ValueError, match="num_heads \\* head_dim <= dim"):
        mimetic_init_(core.MultiHeadAttention(DIM, 4, head_dim=8))
    with pytest.raises(ValueError, match="weight_init must be one of"):
        VisionTransformer(dim=64, depth=1, num_heads=4, weight_init="xavier")
