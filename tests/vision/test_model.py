"""VisionTransformer against timm (same weights -> same logits), positional-embedding resampling,
and the errors on bad input."""

from __future__ import annotations

import numpy as np
import pytest
import timm
import torch
from PIL import Image
from timm.models.vision_transformer import VisionTransformer as TimmViT
from timm.models.vision_transformer import checkpoint_filter_fn

from core import sincos_2d
from vision.model import VisionTransformer
from vision.model.timm_weights import rename_key

ATOL = 1e-4


def timm_cifar(**kwargs: object) -> TimmViT:
    """A timm ViT of the 32px / patch-4 kind the CIFAR recipes use."""
    defaults = dict(img_size=32, patch_size=4, num_classes=10, embed_dim=48, depth=2, num_heads=3, mlp_ratio=2.0)
    defaults.update(kwargs)
    return TimmViT(**defaults).eval()


def randomize(model: torch.nn.Module) -> torch.nn.Module:
    """Non-trivial values everywhere (timm zero-inits some tensors), so equality means something."""
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0, 0.2)
    return model


def test_vit_tiny_patch16_224_matches_timm() -> None:
    torch.manual_seed(0)
    reference = timm.create_model("vit_tiny_patch16_224", pretrained=False).eval()
    ours = VisionTransformer.from_timm(reference).eval()
    assert (ours.patch_embed.grid_size, len(ours.encoder.layers), ours.num_classes) == ((14, 14), 12, 1000)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in reference.parameters())
    images = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        expected = reference(images)
        torch.testing.assert_close(ours(images), expected, atol=ATOL, rtol=0)
        torch.testing.assert_close(ours.forward_features(images), reference.forward_features(images), atol=ATOL, rtol=0)
    assert expected.abs().max() > 1e-2  # the comparison is not between two zero vectors


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"global_pool": "avg", "class_token": False},
        {"global_pool": "avg", "fc_norm": True},
        {"init_values": 0.1},
    ],
    ids=["cls-token", "mean-no-class-token", "mean-fc-norm", "layer-scale"],
)
def test_cifar_sized_vit_matches_timm(kwargs: dict) -> None:
    reference = randomize(timm_cifar(**kwargs))
    ours = VisionTransformer.from_timm(reference).eval()
    images = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(ours(images), reference(images), atol=ATOL, rtol=0)


def test_state_dict_keys_are_timms_renamed() -> None:
    reference = timm_cifar()
    ours = VisionTransformer.from_timm(reference)
    assert set(ours.state_dict()) == {rename_key(key) for key in reference.state_dict()}
    assert rename_key("blocks.1.attn.qkv.weight") == "encoder.layers.1.attn.qkv.weight"
    assert rename_key("norm.weight") == "encoder.norm.weight"


def test_unsupported_timm_model_is_refused() -> None:
    with pytest.raises(ValueError, match="register tokens"):
        VisionTransformer.from_timm(timm_cifar(reg_tokens=2))


def test_pos_embed_resampled_to_a_larger_grid_matches_timm() -> None:
    """A 224px checkpoint at 384px: our bicubic resampling gives timm's own fine-tuning model."""
    torch.manual_seed(0)
    source = randomize(timm.create_model("vit_tiny_patch16_224", pretrained=False, depth=2).eval())
    target = timm.create_model("vit_tiny_patch16_384", pretrained=False, depth=2).eval()
    target.load_state_dict(checkpoint_filter_fn(source.state_dict(), target))
    ours = VisionTransformer.from_timm(source, img_size=384).eval()
    assert ours.pos_embed.shape == (1, 1 + 24 * 24, 192)
    images = torch.randn(1, 3, 384, 384)
    with torch.no_grad():
        torch.testing.assert_close(ours(images), target(images), atol=ATOL, rtol=0)


def test_resampled_pos_embed_is_the_bicubic_interpolation_of_the_grid() -> None:
    """Checked against Pillow's bicubic resize of each channel of the 8x8 grid to 16x16."""
    source = randomize(timm_cifar())
    ours = VisionTransformer.from_timm(source, img_size=64)
    grid = source.pos_embed.detach()[0, 1:].reshape(8, 8, -1).numpy()  # (8, 8, D)
    channels = [
        Image.fromarray(np.ascontiguousarray(grid[:, :, c])).resize((16, 16), Image.BICUBIC) for c in range(grid.shape[2])
    ]
    expected = torch.from_numpy(np.stack([np.asarray(c) for c in channels], axis=-1)).reshape(1, 256, -1)  # (1, 256, D)
    torch.testing.assert_close(ours.pos_embed[:, 1:].detach(), expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(ours.pos_embed[:, :1], source.pos_embed[:, :1])


def test_resampling_keeps_the_function_on_the_original_grid() -> None:
    reference = randomize(timm_cifar())
    fixed = VisionTransformer.from_timm(reference).eval()
    dynamic = VisionTransformer.from_timm(reference, dynamic_img_size=True).eval()
    rebuilt = VisionTransformer.from_timm(reference, img_size=64).eval()
    rebuilt.load_pretrained_state_dict(reference.state_dict())
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(dynamic(images), fixed(images), atol=0, rtol=0)
        large = torch.randn(2, 3, 64, 64)
        # On-the-fly resampling for 64px inputs equals a model built for 64px from the same weights.
        torch.testing.assert_close(dynamic(large), rebuilt(large), atol=ATOL, rtol=0)


def test_sincos_positions_are_fixed_and_not_saved() -> None:
    model = VisionTransformer(img_size=16, patch_size=4, dim=32, depth=1, num_heads=2, pos_embed="sincos")
    assert "pos_embed" not in model.state_dict()
    assert all(name != "pos_embed" for name, _ in model.named_parameters())
    torch.testing.assert_close(model.pos_embed[0, 1:], sincos_2d(4, 4, 32))
    assert torch.equal(model.pos_embed[0, 0], torch.zeros(32))
    with pytest.raises(ValueError, match="pos_embed='learned'"):
        model.load_pretrained_state_dict({"pos_embed": torch.zeros(1, 17, 32)})


def test_head_of_another_class_count_is_left_fresh() -> None:
    reference = randomize(timm_cifar(num_classes=1000))
    ours = VisionTransformer(img_size=32, patch_size=4, num_classes=7, dim=48, depth=2, num_heads=3, pos_embed="learned", stem="patch")
    head_before = ours.head.weight.clone()
    assert ours.load_pretrained_state_dict(reference.state_dict()) == ["head.weight", "head.bias"]
    assert torch.equal(ours.head.weight, head_before)
    torch.testing.assert_close(ours.encoder.layers[1].mlp.fc2.weight, reference.blocks[1].mlp.fc2.weight)


def test_weights_without_a_head_load_and_leave_the_head_fresh() -> None:
    """timm's num_classes=0 (self-supervised weights such as MAE's) have no classifier layer."""
    reference = randomize(timm_cifar(num_classes=0))
    assert not any(name.startswith("head.") for name in reference.state_dict())
    ours = VisionTransformer(img_size=32, patch_size=4, num_classes=7, dim=48, depth=2, num_heads=3, pos_embed="learned", stem="patch")
    head_before = ours.head.weight.clone()
    assert ours.load_pretrained_state_dict(reference.state_dict()) == ["head.weight", "head.bias"]
    assert torch.equal(ours.head.weight, head_before)
    torch.testing.assert_close(ours.encoder.layers[1].mlp.fc2.weight, reference.blocks[1].mlp.fc2.weight)


def test_mismatched_architecture_is_refused() -> None:
    shallower = VisionTransformer(img_size=32, patch_size=4, dim=48, depth=1, num_heads=3, pos_embed="learned", stem="patch")
    with pytest.raises(ValueError, match=r"does not fit.*unexpected \['encoder.layers.1.attn.proj.bias'"):
        shallower.load_pretrained_state_dict(timm_cifar().state_dict())
    narrower = VisionTransformer(img_size=32, patch_size=4, dim=24, depth=2, num_heads=3, pos_embed="learned", stem="patch")
    with pytest.raises(ValueError, match=r"does not fit.*other shapes \['cls_token'"):
        narrower.load_pretrained_state_dict(timm_cifar().state_dict())


def test_pooling_and_features() -> None:
    model = VisionTransformer(img_size=16, patch_size=4, num_classes=5, dim=32, depth=1, num_heads=2, pool="mean")
    model.eval()
    images = torch.randn(3, 3, 16, 16)
    with torch.no_grad():
        tokens = model.forward_features(images)
        assert tokens.shape == (3, 1 + 16, 32)
        torch.testing.assert_close(model.forward_head(tokens, pre_logits=True), tokens[:, 1:].mean(dim=1))
        assert model(images).shape == (3, 5)
    features = VisionTransformer(img_size=16, patch_size=4, num_classes=0, dim=32, depth=1, num_heads=2)
    assert features(images).shape == (3, 32)
    assert VisionTransformer().no_weight_decay() == {"pos_embed", "cls_token"}


def test_sequence_pooling_weighs_the_patch_tokens_by_a_softmax_of_their_scores() -> None:
    """CCT's SeqPool (Hassani et al. 2021): z = softmax(g(x_L)^T) x_L over the patch tokens, g a
    linear score; the class token, when there is one, takes no part."""
    torch.manual_seed(0)
    for class_token in (False, True):
        model = VisionTransformer(
            img_size=16, patch_size=4, num_classes=5, dim=32, depth=1, num_heads=2, pool="seq", class_token=class_token
        ).eval()
        with torch.no_grad():
            tokens = model.forward_features(torch.randn(3, 3, 16, 16))
            patches = tokens[:, int(class_token) :]  # (3, 16, 32)
            scores = patches @ model.seq_pool.weight[0] + model.seq_pool.bias  # (3, 16)
            expected = (torch.exp(scores - scores.amax(1, keepdim=True)) / torch.exp(scores - scores.amax(1, keepdim=True)).sum(1, keepdim=True))
            torch.testing.assert_close(model.pool_weights(tokens), expected)
            torch.testing.assert_close(model.forward_head(tokens, pre_logits=True), (expected[..., None] * patches).sum(1))
    gradients = torch.autograd.grad(model(torch.randn(2, 3, 16, 16)).sum(), model.seq_pool.weight)
    assert gradients[0].abs().sum() > 0  # the scores are learned
    assert VisionTransformer(pool="mean").seq_pool is None


@pytest.mark.parametrize(
    "shape, message",
    [
        ((2, 3, 30, 30), "image size 30 is not divisible by patch size 4"),
        ((2, 3, 64, 64), "differs from the model's img_size 32x32"),
        ((2, 1, 32, 32), "1 channels but the model expects in_chans=3"),
        ((3, 32, 32), r"expected images \[batch, channels, height, width\]"),
    ],
)
def test_bad_input_raises_a_clear_error(shape: tuple[int, ...], message: str) -> None:
    model = VisionTransformer(dim=32, depth=1, num_heads=2)
    with pytest.raises(ValueError, match=message):
        model(torch.randn(*shape))


def test_bad_construction_raises_a_clear_error() -> None:
    with pytest.raises(ValueError, match="img_size=30 is not a multiple of patch_size=4.*set img_size=32"):
        VisionTransformer(img_size=30)
    with pytest.raises(ValueError, match="pool='cls' needs class_token=True"):
        VisionTransformer(class_token=False)
    with pytest.raises(ValueError, match="pos_embed must be one of learned, sincos, got 'rope'"):
        VisionTransformer(pos_embed="rope")
    with pytest.raises(ValueError, match="pool must be one of cls, mean, seq, got 'max'"):
        VisionTransformer(pool="max")
    with pytest.raises(ValueError, match="timm's ViT pools by class token or average; build the model with pool='cls'"):
        VisionTransformer(img_size=32, patch_size=4, dim=48, depth=2, num_heads=3, pos_embed="learned", stem="patch", pool="seq").load_pretrained_state_dict(timm_cifar().state_dict())
