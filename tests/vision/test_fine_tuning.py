"""Starting a classifier from trained weights on other classes (``pretrained=``): this head's
checkpoints and exported directories, a new classifier layer for new classes, the position table
resampled to another image size, layer-wise rate decay against timm's grouping, and a fine-tuning
run through the real runner."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from timm.layers import resample_abs_pos_embed
from timm.models.vision_transformer import VisionTransformer as TimmViT
from timm.optim import param_groups_layer_decay

from core.errors import InputError
from core.files.checkpoints import load_checkpoint
from core.training.runner import train
from tests.vision.test_module import quiet_trainer
from tests.vision.vision_testdata import CONF, TINY_MODEL, tiny_model_kwargs, write_image_folder
from vision.export.safetensors_files import export_safetensors
from vision.model.timm_weights import timm_key
from vision.module import ImageClassifier

HEAD = ["head.weight", "head.bias"]


def trained_elsewhere(path: Path, class_names: list[str], **model: object) -> ImageClassifier:
    """A classifier of ``class_names`` with random weights, saved as a checkpoint at ``path``."""
    torch.manual_seed(3)
    source = ImageClassifier(model=tiny_model_kwargs(**model), num_classes=len(class_names), class_names=class_names)
    for parameter in source.parameters():  # away from the init a fresh model would also have
        parameter.data.normal_()
    torch.save({"hyper_parameters": dict(source.hparams), "state_dict": source.state_dict()}, path)
    return source


def new_classifier(class_names: list[str], **model: object) -> ImageClassifier:
    torch.manual_seed(4)
    return ImageClassifier(model=tiny_model_kwargs(**model), num_classes=len(class_names), class_names=class_names)


def assert_loaded_but_head(target: ImageClassifier, source: ImageClassifier, head: torch.Tensor) -> None:
    own = target.net.state_dict()
    for name, value in source.net.state_dict().items():
        if name not in HEAD:
            torch.testing.assert_close(own[name], value, rtol=0, atol=0, msg=name)
    torch.testing.assert_close(target.net.head.weight, head, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("names", "fresh"),
    [
        (["ant", "bee"], HEAD),  # another class count
        (["ant", "bee", "eel"], HEAD),  # as many classes, other ones
        (["cat", "dog", "owl"], []),  # the same classes: the head is kept
    ],
)
def test_a_checkpoint_gives_its_weights_and_a_new_head_for_new_classes(
    tmp_path: Path, names: list[str], fresh: list[str]
) -> None:
    source = trained_elsewhere(tmp_path / "source.ckpt", ["cat", "dog", "owl"])
    target = new_classifier(names)
    head = target.net.head.weight.clone()
    assert target.load_pretrained(str(tmp_path / "source.ckpt")) == fresh
    assert_loaded_but_head(target, source, head if fresh else source.net.head.weight)


def test_an_exported_directory_loads_as_its_checkpoint(tmp_path: Path) -> None:
    source = trained_elsewhere(tmp_path / "source.ckpt", ["cat", "dog", "owl"])
    export_safetensors(source, tmp_path / "exported")
    target = new_classifier(["ant", "bee"])
    head = target.net.head.weight.clone()
    assert target.load_pretrained(str(tmp_path / "exported")) == HEAD
    assert_loaded_but_head(target, source, head)


def test_learned_positions_are_resampled_to_the_new_image_size(tmp_path: Path) -> None:
    source = trained_elsewhere(tmp_path / "source.ckpt", ["cat", "dog"], pos_embed="learned")
    target = new_classifier(["ant", "bee"], pos_embed="learned", img_size=24, drop_path=0.1)
    target.load_pretrained(str(tmp_path / "source.ckpt"))
    expected = resample_abs_pos_embed(source.net.pos_embed, [6, 6], [4, 4], num_prefix_tokens=1)
    torch.testing.assert_close(target.net.pos_embed, expected)


def test_another_network_is_refused_naming_the_settings_to_pass(tmp_path: Path) -> None:
    trained_elsewhere(tmp_path / "source.ckpt", ["cat", "dog"])
    with pytest.raises(InputError, match=r"model.dim is 32 there and 48 here.*\(model.dim=32\)"):
        new_classifier(["ant", "bee"], dim=48).load_pretrained(str(tmp_path / "source.ckpt"))


def rates(module: ImageClassifier) -> dict[str, float]:
    """Each parameter's peak rate in the module's optimizer."""
    module.trainer = quiet_trainer(max_epochs=1)
    names = {id(parameter): name for name, parameter in module.net.named_parameters()}
    groups = module.configure_optimizers()["optimizer"].param_groups
    return {names[id(parameter)]: group["lr"] for group in groups for parameter in group["params"]}


def test_layer_decay_gives_each_layer_the_rate_timm_gives_it() -> None:
    module = ImageClassifier(
        model=tiny_model_kwargs(pos_embed="learned", stem="patch"), num_classes=4, lr=1e-3, layer_decay=0.5
    )
    reference = TimmViT(img_size=16, patch_size=4, embed_dim=32, depth=2, num_heads=2, mlp_ratio=2.0, num_classes=4)
    scales = {
        name: group["lr_scale"]
        for group in param_groups_layer_decay(reference, 0.05, reference.no_weight_decay(), layer_decay=0.5)
        for name, parameter in reference.named_parameters()
        if any(parameter is member for member in group["params"])
    }
    ours = rates(module)
    assert ours.keys() == {name for name, _ in module.net.named_parameters()}
    for name, rate in ours.items():
        assert rate == pytest.approx(1e-3 * scales[timm_key(name)]), name
    # BEiT's rule for depth 2: the embedding at 0.5^3, layer i at 0.5^(2 - i), the head at the peak.
    assert ours["patch_embed.proj.weight"] == pytest.approx(1e-3 / 8)
    assert ours["encoder.layers.0.attn.qkv.weight"] == pytest.approx(1e-3 / 4)
    assert ours["encoder.norm.weight"] == pytest.approx(1e-3 / 2)
    assert ours["head.weight"] == pytest.approx(1e-3)


def test_layer_decay_puts_the_convolutional_stem_with_the_embedding() -> None:
    ours = rates(ImageClassifier(model=tiny_model_kwargs(stem="conv"), num_classes=4, lr=1e-3, layer_decay=0.5))
    stem = [name for name in ours if name.startswith("patch_embed.stem.")]
    assert stem and all(ours[name] == pytest.approx(1e-3 / 8) for name in stem)
    assert set(rates(ImageClassifier(model=tiny_model_kwargs(), num_classes=4, lr=1e-3)).values()) == {1e-3}


def test_a_run_fine_tunes_a_checkpoint_on_a_folder_of_other_classes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = trained_elsewhere(tmp_path / "source.ckpt", ["cat", "dog", "owl"])
    write_image_folder(tmp_path / "images", {split: {"ant": 4, "bee": 4} for split in ("train", "val", "test")})
    overrides = [
        *TINY_MODEL, "data=imagefolder", f"data.root={tmp_path / 'images'}", "data.batch_size=4", "data.num_workers=0",
        "data.img_size=16", f"paths.output_dir={tmp_path / 'run'}", "trainer=cpu", "logger=csv",
        "callbacks.progress_bar=null", "trainer.max_steps=1", "trainer.num_sanity_val_steps=0",
        f"pretrained={tmp_path / 'source.ckpt'}", "module.lr=1e-9", "module.warmup_epochs=0", "module.layer_decay=0.75",
    ]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("vision", overrides=overrides)
    with caplog.at_level(logging.INFO):
        train(cfg)
    assert f"started from pretrained={tmp_path / 'source.ckpt'} (new: head.weight, head.bias)" in caplog.text
    last = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.ckpt")
    assert last["hyper_parameters"]["class_names"] == ["ant", "bee"] and last["hyper_parameters"]["layer_decay"] == 0.75
    for name, value in source.net.named_parameters():  # one step at a rate of 1e-9 moves no weight visibly
        if name not in HEAD:
            torch.testing.assert_close(last["state_dict"][f"net.{name}"], value.detach(), rtol=0, atol=1e-6, msg=name)
    assert last["state_dict"]["net.head.weight"].shape == (2, 32)
    assert "test/acc" in json.loads((tmp_path / "run" / "metrics.json").read_text())
