"""``python -m vision.export --format safetensors``: a directory of ``model.safetensors`` and
``config.json`` that the toolkit's loader reads back into the same classifier (logits, classes,
preprocessing), that ``vision.predict`` takes for a checkpoint, and that timm
builds on its own where it has the architecture; a directory that is not one ends in one
``error:`` line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import timm
import torch
from safetensors.torch import load_file

from core.files.model_directory import CONFIG, WEIGHTS
from tests.vision.vision_testdata import tiny_model_kwargs, write_image
from vision import export, predict
from vision.inference import data_config, image_transform, load_classifier, load_image
from vision.module import ImageClassifier

CLASSES = ["cat", "dog", "owl"]


def logits(path: Path, images: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return load_classifier(path).net(images)


def write_checkpoint(path: Path, **model: object) -> Path:
    """An untrained tiny classifier of :data:`CLASSES` with the model settings ``model``, its data
    config at the network's image size."""
    torch.manual_seed(0)
    classifier = ImageClassifier(model=tiny_model_kwargs(**model), num_classes=3, class_names=CLASSES)
    torch.save({"hyper_parameters": dict(classifier.hparams), "state_dict": classifier.state_dict()}, path)
    return path


def exported(checkpoint: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    export.main([str(checkpoint), "--format", "safetensors", "--out", str(out), "--device", "cpu"])
    assert capsys.readouterr().out.startswith(f"wrote {out} (model.safetensors, config.json)")
    return out


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default architecture (convolutional stem, sin-cos positions), with the data config of a
    16px image folder."""
    return write_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny.ckpt")


def test_the_directory_reads_back_into_the_same_classifier(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = exported(checkpoint, tmp_path / "shared", capsys)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["shared"]  # no staging directory left
    assert sorted(path.name for path in out.iterdir()) == [CONFIG, WEIGHTS]
    images = torch.randn(5, 3, 16, 16)
    torch.testing.assert_close(logits(out, images), logits(checkpoint, images))
    original, loaded = load_classifier(checkpoint), load_classifier(out)
    assert loaded.hparams.class_names == original.hparams.class_names == ["cat", "dog", "owl"]
    image = load_image(write_image(tmp_path / "a.png"))
    torch.testing.assert_close(image_transform(loaded)(image), image_transform(original)(image))
    config = json.loads((out / CONFIG).read_text())
    assert {"library": "transformer-toolkit", "head": "vision", "version": 1}.items() <= config.items()
    assert "architecture" not in config  # timm has no convolutional stem
    # Plain safetensors reads the weights under timm's names.
    assert {"blocks.0.attn.qkv.weight", "norm.weight", "patch_embed.stem.0.0.weight"} <= load_file(out / WEIGHTS).keys()


def test_flip_tta_travels_with_the_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A classifier that averages each image with its mirror does so read back from its directory."""
    checkpoint = write_checkpoint(tmp_path / "tta.ckpt")
    saved = torch.load(checkpoint, weights_only=True)
    saved["hyper_parameters"]["flip_tta"] = True
    torch.save(saved, checkpoint)
    out = exported(checkpoint, tmp_path / "shared", capsys)
    assert json.loads((out / CONFIG).read_text())["flip_tta"] is True
    images = torch.randn(4, 3, 16, 16)
    with torch.no_grad():
        original, loaded = load_classifier(checkpoint), load_classifier(out)
        assert loaded.hparams.flip_tta
        torch.testing.assert_close(loaded.classify(images), original.classify(images))
        assert not torch.allclose(loaded.classify(images), loaded.net(images))  # the mirror counts


def test_a_sequence_pooled_network_reads_back_and_the_export_says_timm_cannot_build_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = write_checkpoint(tmp_path / "seq.ckpt", stem="patch", pool="seq", class_token=False)
    export.main([str(checkpoint), "--format", "safetensors", "--out", str(tmp_path / "shared"), "--device", "cpu"])
    assert "timm cannot build sequence pooling" in capsys.readouterr().out
    config = json.loads((tmp_path / "shared" / CONFIG).read_text())
    assert "architecture" not in config and config["model"]["pool"] == "seq"
    assert {"seq_pool.weight", "seq_pool.bias"} <= load_file(tmp_path / "shared" / WEIGHTS).keys()
    images = torch.randn(2, 3, 16, 16)
    torch.testing.assert_close(logits(tmp_path / "shared", images), logits(checkpoint, images))


@pytest.mark.parametrize(
    "model",
    [
        {"stem": "patch"},
        {"stem": "patch", "pos_embed": "learned", "layer_scale": 0.1},
        {"stem": "patch", "pool": "mean", "class_token": False, "fc_norm": True, "drop_path": "auto"},
    ],
    ids=["sincos", "learned + layer scale", "mean pool + fc_norm"],
)
def test_timm_builds_the_directory_with_the_same_logits_and_preprocessing(
    model: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An independent reader: timm's own ``local-dir:`` loader, model and data config."""
    checkpoint = write_checkpoint(tmp_path / "tiny.ckpt", **model)
    out = exported(checkpoint, tmp_path / "shared", capsys)
    net = timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    images = torch.randn(4, 3, 16, 16)
    with torch.no_grad():
        torch.testing.assert_close(net(images), logits(checkpoint, images))
    timm_data = timm.data.resolve_data_config(model=net)
    ours = data_config(load_classifier(checkpoint))
    assert timm_data["input_size"] == (3, 16, 16)
    assert {key: timm_data[key] for key in ("interpolation", "crop_pct", "mean", "std")} == {
        key: ours[key] for key in ("interpolation", "crop_pct", "mean", "std")
    }
    assert net.pretrained_cfg["label_names"] == CLASSES


def test_a_non_square_network_reads_back_with_its_own_position_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A learned table of a 4x8 patch grid is no square: the loaders take it as it is, where
    resampling it from a square grid would fail; timm builds the same network from the directory."""
    checkpoint = write_checkpoint(tmp_path / "wide.ckpt", img_size=[16, 32], stem="patch", pos_embed="learned")
    out = exported(checkpoint, tmp_path / "shared", capsys)
    images = torch.randn(2, 3, 16, 32)
    torch.testing.assert_close(logits(out, images), logits(checkpoint, images))
    net = timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    with torch.no_grad():
        torch.testing.assert_close(net(images), logits(checkpoint, images))


def test_predict_takes_the_directory_for_a_checkpoint(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = exported(checkpoint, tmp_path / "shared", capsys)
    image = str(write_image(tmp_path / "a.png"))
    printed = []
    for model in (checkpoint, out):
        predict.main([str(model), image, "--top-k", "3", "--device", "cpu"])
        printed.append(capsys.readouterr().out)
    assert printed[0] == printed[1] and printed[0].startswith(image)


def test_an_export_replaces_an_earlier_one_but_no_other_files(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = exported(checkpoint, tmp_path / "shared", capsys)
    (out / CONFIG).write_text("{}")
    exported(checkpoint, out, capsys)
    assert json.loads((out / CONFIG).read_text())["head"] == "vision"
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("keep me")
    for target, named in ((notes, "directory of other files"), (notes / "todo.txt", "is a file")):
        with pytest.raises(SystemExit) as exit_info:
            export.main([str(checkpoint), "--format", "safetensors", "--out", str(target)])
        assert exit_info.value.code == 2 and named in capsys.readouterr().err
    assert (notes / "todo.txt").read_text() == "keep me"


def broken(directory: Path, checkpoint: Path, capsys: pytest.CaptureFixture[str], damage: str) -> str:
    """An export at ``directory`` damaged as ``damage`` says; the path the error must name."""
    if damage == "missing directory":
        return str(directory)
    exported(checkpoint, directory, capsys)
    if damage == "no config.json":
        (directory / CONFIG).unlink()
        return str(directory)
    if damage == "config.json not JSON":
        (directory / CONFIG).write_text('{"library": "transformer-toolkit", "head": ')
    elif damage == "config.json of the other head":
        config = json.loads((directory / CONFIG).read_text())
        (directory / CONFIG).write_text(json.dumps({**config, "head": "nlp"}))
    elif damage == "config.json without label_names":
        config = json.loads((directory / CONFIG).read_text())
        (directory / CONFIG).write_text(json.dumps({key: value for key, value in config.items() if key != "label_names"}))
    elif damage == "truncated weights":
        data = (directory / WEIGHTS).read_bytes()
        (directory / WEIGHTS).write_bytes(data[: len(data) // 2])
        return str(directory / WEIGHTS)
    elif damage == "weights of another size":
        config = json.loads((directory / CONFIG).read_text())
        (directory / CONFIG).write_text(json.dumps({**config, "model": {**config["model"], "dim": 64}}))
        return str(directory / WEIGHTS)
    return str(directory / CONFIG)


@pytest.mark.parametrize(
    "damage",
    [
        "missing directory",
        "no config.json",
        "config.json not JSON",
        "config.json of the other head",
        "config.json without label_names",
        "truncated weights",
        "weights of another size",
    ],
)
def test_a_directory_that_is_no_export_ends_in_one_error_line(
    damage: str, checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    named = broken(tmp_path / "shared", checkpoint, capsys, damage)
    image = str(write_image(tmp_path / "a.png"))
    with pytest.raises(SystemExit) as exit_info:
        predict.main([str(tmp_path / "shared"), image, "--device", "cpu"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("error:") and error.count("\n") == 1 and named in error, error
