"""The LightningModule: it learns, its optimizer and schedule follow the recipe, and it starts from
timm weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from lightning.pytorch import Trainer
from timm.models.vision_transformer import VisionTransformer as TimmViT
from torch.utils.data import DataLoader, TensorDataset

from core.errors import InputError
from vision.analysis.confusion import ConfusionReport
from vision.module import ImageClassifier
from tests.vision.vision_testdata import tiny_model_kwargs


def classifier(**kwargs: object) -> ImageClassifier:
    settings = {"model": tiny_model_kwargs(), "num_classes": 4, "label_smoothing": 0.0, "warmup_epochs": 0}
    settings.update(kwargs)
    return ImageClassifier(**settings)


def quiet_trainer(**kwargs: object) -> Trainer:
    settings = dict(
        accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0,
    )
    settings.update(kwargs)
    return Trainer(**settings)


def test_tiny_vit_overfits_a_fixed_batch() -> None:
    torch.manual_seed(0)
    images, labels = torch.randn(16, 3, 16, 16), torch.arange(16) % 4
    module = classifier(lr=3e-3, weight_decay=0.0)
    loader = DataLoader(TensorDataset(images, labels), batch_size=16)
    with torch.no_grad():
        initial = torch.nn.functional.cross_entropy(module(images), labels).item()
    quiet_trainer(max_epochs=120).fit(module, loader)
    module.eval()
    with torch.no_grad():
        logits = module(images)
    final = torch.nn.functional.cross_entropy(logits, labels).item()
    assert initial > 1.0 and final < 0.05
    assert torch.equal(logits.argmax(dim=-1), labels)


def test_weight_decay_spares_norms_biases_positions_and_class_token() -> None:
    module = classifier(weight_decay=0.05, model=tiny_model_kwargs(pos_embed="learned"))
    module.trainer = quiet_trainer(max_epochs=1)
    names = {id(p): name for name, p in module.net.named_parameters()}
    groups = module.configure_optimizers()["optimizer"].param_groups
    decayed = {names[id(p)] for g in groups if g["weight_decay"] > 0 for p in g["params"]}
    exempt = {names[id(p)] for g in groups if g["weight_decay"] == 0 for p in g["params"]}
    assert {"pos_embed", "cls_token", "encoder.norm.weight", "head.bias", "encoder.layers.0.attn.qkv.bias"} <= exempt
    assert {"patch_embed.proj.weight", "encoder.layers.0.attn.qkv.weight", "head.weight"} <= decayed
    assert exempt.isdisjoint(decayed) and exempt | decayed == set(names.values())


def test_warmup_is_counted_in_epochs_and_followed_by_cosine() -> None:
    module = classifier(lr=1e-3, warmup_epochs=1, min_lr_ratio=0.1)
    loader = DataLoader(TensorDataset(torch.randn(16, 3, 16, 16), torch.arange(16) % 4), batch_size=4)
    trainer = quiet_trainer(max_epochs=3)
    trainer.fit(module, loader)
    schedule = trainer.lr_scheduler_configs[0].scheduler.lr_lambdas[0]
    assert (schedule.warmup_steps, schedule.total_steps, schedule.min_ratio) == (4, 12, 0.1)
    assert trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(1e-4)


def test_mixup_trains_on_soft_targets_and_needs_an_even_batch() -> None:
    module = classifier(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1)
    assert module.mixup.mixup_alpha == 0.8 and module.mixup.cutmix_alpha == 1.0
    loss = module.training_step((torch.randn(4, 3, 16, 16), torch.tensor([0, 1, 2, 3])), 0)
    assert loss.ndim == 0 and loss.item() > 0
    with pytest.raises(ValueError, match="data.batch_size must be even"):
        module.training_step((torch.randn(3, 3, 16, 16), torch.tensor([0, 1, 2])), 0)


def test_flip_tta_averages_the_logits_of_an_image_and_its_mirror() -> None:
    torch.manual_seed(0)
    images, labels = torch.randn(4, 3, 16, 16), torch.tensor([0, 1, 2, 3])
    module = classifier(flip_tta=True).eval()
    with torch.no_grad():
        expected = (module.net(images) + module.net(torch.flip(images, dims=[3]))) / 2
        torch.testing.assert_close(module.classify(images), expected)
        plain = classifier().eval()
        torch.testing.assert_close(plain.classify(images), plain.net(images))
    (tested,) = quiet_trainer().test(module, DataLoader(TensorDataset(images, labels), batch_size=4))
    assert tested["test/acc"] == pytest.approx(float((expected.argmax(-1) == labels).float().mean()))
    assert tested["test/loss"] == pytest.approx(float(torch.nn.functional.cross_entropy(expected, labels)), rel=1e-5)


def test_the_confusion_matrix_counts_the_logits_flip_tta_averages(tmp_path: Path) -> None:
    """Each class's accuracy from the logits the test step scores (image and mirror averaged),
    not from the network's last call (the mirror alone)."""
    torch.manual_seed(0)
    images, labels = torch.randn(64, 3, 16, 16), torch.arange(64) % 4
    module = classifier(flip_tta=True, class_names=["a", "b", "c", "d"]).eval()
    module.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 4))  # an untrained ViT answers one class
    with torch.no_grad():
        averaged = module.classify(images).argmax(-1)
        mirrored = module.net(images.flip(-1)).argmax(-1)

    def per_class(predicted: torch.Tensor) -> dict[str, float]:
        return {f"class_acc/{name}": float((predicted[labels == k] == k).float().mean()) for k, name in enumerate("abcd")}

    assert per_class(averaged) != per_class(mirrored)  # the two readings differ on these images
    report = ConfusionReport(["a", "b", "c", "d"])
    quiet_trainer(callbacks=[report]).test(module, DataLoader(TensorDataset(images, labels), batch_size=16))
    assert report.report(module, tmp_path) == pytest.approx(per_class(averaged))
    report, kept = ConfusionReport(["a", "b", "c", "d"]), labels != 3  # a split without an image of "d"
    quiet_trainer(callbacks=[report]).test(module, DataLoader(TensorDataset(images[kept], labels[kept]), batch_size=16))
    expected = per_class(averaged)
    del expected["class_acc/d"]
    assert report.report(module, tmp_path) == pytest.approx(expected)


@pytest.mark.parametrize("kind", ["whole model", "truncated", "damaged safetensors"])
def test_a_weights_file_that_cannot_be_read_is_one_clear_error(tmp_path: Path, kind: str) -> None:
    timm_model = TimmViT(img_size=16, patch_size=4, embed_dim=32, depth=2, num_heads=2, mlp_ratio=2.0, num_classes=4)
    path = tmp_path / ("weights.safetensors" if kind == "damaged safetensors" else "weights.pth")
    if kind == "whole model":
        torch.save(timm_model, path)  # the model object, not its state dict
    else:
        torch.save(timm_model.state_dict(), path)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2] if kind == "truncated" else b"\x10" * 64)
    with pytest.raises(InputError, match=f"pretrained={path} is not a weights file that can be read .*state_dict"):
        classifier(model=tiny_model_kwargs(pos_embed="learned", stem="patch")).load_pretrained(str(path))


def test_the_image_size_defaults_to_the_networks_one_side_when_square() -> None:
    """As the datamodules record it, so ``vision.evaluate`` takes the checkpoint's data settings."""
    assert classifier().hparams.img_size == 16
    assert classifier(model=tiny_model_kwargs(img_size=[16, 24])).hparams.img_size == [16, 24]


def test_a_timm_weights_file_is_loaded_with_a_new_head_for_other_classes(tmp_path: Path) -> None:
    timm_model = TimmViT(img_size=16, patch_size=4, embed_dim=32, depth=2, num_heads=2, mlp_ratio=2.0, num_classes=1000)
    path = tmp_path / "timm_vit.pth"
    torch.save({"state_dict": timm_model.state_dict()}, path)
    module = classifier(model=tiny_model_kwargs(pos_embed="learned", stem="patch"))
    assert module.load_pretrained(str(path)) == ["head.weight", "head.bias"]
    torch.testing.assert_close(module.net.pos_embed, timm_model.pos_embed)
    torch.testing.assert_close(module.net.encoder.layers[1].attn.qkv.weight, timm_model.blocks[1].attn.qkv.weight)
    assert module.net.head.out_features == 4
    with pytest.raises(InputError, match="stem='patch'"):
        classifier(model=tiny_model_kwargs(pos_embed="learned", stem="conv")).load_pretrained(str(path))