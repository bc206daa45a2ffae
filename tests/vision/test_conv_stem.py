"""The convolutional stem (Xiao et al. 2021) against the formula written with torch.nn.functional,
its grid against the patch embedding's, and its refusals."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from vision.model import VisionTransformer
from vision.model.conv_stem import ConvStem
from vision.model.patch_embed import PatchEmbed


def test_conv_stem_is_strided_convs_with_batch_norm_and_relu_then_a_projection() -> None:
    torch.manual_seed(0)
    stem = ConvStem(32, 4, 3, 64).eval()
    for module in stem.modules():  # running statistics other than the defaults, so eval mode uses them
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-1, 1)
            module.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 32, 32)
    expected = x
    for conv, norm, _ in stem.stem:
        expected = F.conv2d(expected, conv.weight, stride=2, padding=1)
        expected = F.batch_norm(expected, norm.running_mean, norm.running_var, norm.weight, norm.bias, eps=norm.eps)
        expected = F.relu(expected)
    expected = F.conv2d(expected, stem.proj.weight, stem.proj.bias)  # (B, D, 8, 8)
    tokens, grid = stem(x)
    assert grid == (8, 8)
    torch.testing.assert_close(tokens, expected.flatten(2).transpose(1, 2))


@pytest.mark.parametrize(("img_size", "patch_size"), [(32, 4), (32, 2), (64, 8), (224, 16)])
def test_conv_stem_gives_the_patch_embeddings_tokens_and_grid(img_size: int, patch_size: int) -> None:
    x = torch.randn(1, 3, img_size, img_size)
    patch_tokens, patch_grid = PatchEmbed(img_size, patch_size, 3, 32)(x)
    stem = ConvStem(img_size, patch_size, 3, 32)
    tokens, grid = stem(x)
    assert grid == patch_grid and tokens.shape == patch_tokens.shape
    assert len(stem.stem) == patch_size.bit_length() - 1  # log2(P) stride-2 convolutions


def test_a_vit_with_a_conv_stem_trains_a_step() -> None:
    torch.manual_seed(0)
    model = VisionTransformer(img_size=16, patch_size=4, dim=32, depth=1, num_heads=2, num_classes=3, stem="conv")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = torch.randn(8, 3, 16, 16), torch.randint(0, 3, (8,))
    first = F.cross_entropy(model(x), y)
    for _ in range(20):
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss < first / 2


def test_bad_stems_are_refused() -> None:
    with pytest.raises(ValueError, match="power of two"):
        ConvStem(30, 6, 3, 32)
    with pytest.raises(ValueError, match="stem"):
        VisionTransformer(img_size=16, patch_size=4, dim=32, depth=1, num_heads=2, stem="resnet")
