"""The convolutional stem (Xiao et al. 2021) against the formula written with torch.nn.functional,
its grid against the patch embedding's, and its refusals."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from vision.model import VisionTransformer
from vision.model.conv_stem import ConvStem
from vision.model.patch_embed import PatchEmbed


@pytest.mark.parametrize(("convs_per_stage", "strides"), [(1, [2, 2]), (2, [2, 1, 2, 1]), (3, [2, 1, 1, 2, 1, 1])])
def test_conv_stem_is_strided_convs_with_batch_norm_and_relu_then_a_projection(
    convs_per_stage: int, strides: list[int]
) -> None:
    torch.manual_seed(0)
    stem = ConvStem(32, 4, 3, 64, convs_per_stage=convs_per_stage).eval()
    for module in stem.modules():  # running statistics other than the defaults, so eval mode uses them
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-1, 1)
            module.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 32, 32)
    expected = x
    assert len(stem.stem) == len(strides)
    for (conv, norm, _), stride in zip(stem.stem, strides):
        expected = F.conv2d(expected, conv.weight, stride=stride, padding=1)
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
    with pytest.raises(ValueError, match="model.stem_convs"):
        ConvStem(32, 4, 3, 32, convs_per_stage=0)
    with pytest.raises(ValueError, match="stem"):
        VisionTransformer(img_size=16, patch_size=4, dim=32, depth=1, num_heads=2, stem="resnet")


def test_timm_weights_are_refused_by_a_conv_stem() -> None:
    timm = pytest.importorskip("timm")
    reference = timm.models.vision_transformer.VisionTransformer(
        img_size=16, patch_size=4, embed_dim=32, depth=1, num_heads=2, num_classes=3
    )
    shape = dict(img_size=16, patch_size=4, dim=32, depth=1, num_heads=2, mlp_ratio=4.0, num_classes=3, pos_embed="learned")
    with pytest.raises(ValueError, match="stem='patch'"):
        VisionTransformer(**shape, stem="conv").load_pretrained_state_dict(reference.state_dict())
    assert VisionTransformer(**shape, stem="patch").load_pretrained_state_dict(reference.state_dict()) == []


def test_from_scratch_presets_have_the_conv_stem_and_timm_presets_the_patch_embedding() -> None:
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="conf", version_base=None):
        stems = {
            preset: compose(config_name="vision", overrides=[f"model={preset}"]).model.stem
            for preset in ("vit_tiny", "vit_small", "vit_base", "vit_tiny_patch16_224", "vit_small_patch16_224")
        }
        cifar = compose(config_name="vision", overrides=["experiment=cifar10_vit"]).model.stem
    assert stems == {
        "vit_tiny": "conv", "vit_small": "conv", "vit_base": "conv",
        "vit_tiny_patch16_224": "patch", "vit_small_patch16_224": "patch",
    }
    assert cifar == "patch"  # Lee et al.'s recipe keeps its linear patch embedding


def test_a_checkpoint_from_before_the_stem_option_rebuilds_its_patch_embedding(tmp_path) -> None:
    """A checkpoint whose model settings predate ``stem`` (the default then: the linear patch
    embedding) loads with that embedding, and resuming it into today's default names the stem."""
    from core.errors import InputError
    from core.files.checkpoints import load_module, require_fit
    from tests.vision.vision_testdata import tiny_model_kwargs
    from vision.module import ImageClassifier

    old = ImageClassifier(model=tiny_model_kwargs(stem="patch"), num_classes=3)
    hparams = dict(old.hparams)
    hparams["model"] = {key: value for key, value in hparams["model"].items() if key != "stem"}
    checkpoint = {"hyper_parameters": hparams, "state_dict": old.state_dict()}
    torch.save(checkpoint, tmp_path / "old.ckpt")
    loaded = load_module(ImageClassifier, tmp_path / "old.ckpt")
    assert type(loaded.net.patch_embed) is PatchEmbed
    images = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        torch.testing.assert_close(loaded(images), old.eval()(images))
    today = ImageClassifier(model=tiny_model_kwargs(), num_classes=3)
    assert isinstance(today.net.patch_embed, ConvStem)
    with pytest.raises(InputError, match="model.stem is 'patch' there and 'conv' here.*model.stem='patch'"):
        require_fit(checkpoint, tmp_path / "old.ckpt", today, tiny_model_kwargs())


def test_the_defaults_stem_has_a_stride_1_convolution_after_each_stride_2_one() -> None:
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="conf", version_base=None):
        presets = {
            preset: compose(config_name="vision", overrides=[f"model={preset}"]).model.stem_convs
            for preset in ("vit_tiny", "vit_small", "vit_base")
        }
    assert presets == {"vit_tiny": 2, "vit_small": 2, "vit_base": 2}
    stem = VisionTransformer().patch_embed.stem
    assert [layer[0].stride for layer in stem] == [(2, 2), (1, 1), (2, 2), (1, 1)]


def test_a_checkpoint_and_an_export_from_before_stem_convs_rebuild_their_one_convolution_per_stage(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Model settings that predate ``stem_convs`` (the stem then: one convolution per stage) load
    with that stem, from a checkpoint and from an exported directory."""
    import json

    from core.files.checkpoints import load_module
    from core.files.model_directory import CONFIG
    from tests.vision.vision_testdata import tiny_model_kwargs
    from vision import export
    from vision.module import ImageClassifier, load_classifier

    torch.manual_seed(0)
    old = ImageClassifier(model=tiny_model_kwargs(stem_convs=1), num_classes=3).eval()
    hparams = dict(old.hparams)
    hparams["model"] = {key: value for key, value in hparams["model"].items() if key != "stem_convs"}
    torch.save({"hyper_parameters": hparams, "state_dict": old.state_dict()}, tmp_path / "old.ckpt")
    images = torch.randn(2, 3, 16, 16)
    loaded = load_module(ImageClassifier, tmp_path / "old.ckpt")
    assert len(loaded.net.patch_embed.stem) == 2
    with torch.no_grad():
        torch.testing.assert_close(loaded(images), old(images))
    export.main([str(tmp_path / "old.ckpt"), "--format", "safetensors", "--out", str(tmp_path / "old"), "--device", "cpu"])
    capsys.readouterr()
    config = json.loads((tmp_path / "old" / CONFIG).read_text())
    assert config["model"]["stem_convs"] == 1  # an export today records it
    del config["model"]["stem_convs"]
    (tmp_path / "old" / CONFIG).write_text(json.dumps(config))
    with torch.no_grad():
        torch.testing.assert_close(load_classifier(tmp_path / "old").net(images), old.net(images))
