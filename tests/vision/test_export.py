"""``python -m vision.export``: each format loads in its own runtime, takes any batch size and gives
the eager model's logits; bad input ends in one ``error:`` line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import torch

from tests.vision.vision_testdata import write_classifier_checkpoint
from vision import export
from vision.export import formats as exporters
from vision.inference import data_config, load_classifier


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_classifier_checkpoint(tmp_path_factory.mktemp("export") / "tiny.ckpt")


def eager_logits(checkpoint: Path, images: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return load_classifier(checkpoint).net(images)


def test_onnx_file_runs_in_onnxruntime_at_any_batch_size(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "vit.onnx"
    export.main([str(checkpoint), "--format", "onnx", "--out", str(out), "--device", "cpu"])
    assert capsys.readouterr().out.startswith(f"wrote {out}; logits match")
    assert [path.name for path in tmp_path.iterdir()] == ["vit.onnx"]  # no temporary file left
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].shape[0] == "batch"
    for batch in (1, 2, 5, 16):
        images = torch.randn(batch, 3, 16, 16)
        (logits,) = session.run(None, {"images": images.numpy()})
        np.testing.assert_allclose(logits, eager_logits(checkpoint, images).numpy(), rtol=1e-4, atol=1e-5)
    properties = {prop.key: prop.value for prop in onnx.load(str(out)).metadata_props}
    assert json.loads(properties["class_names"]) == ["cat", "dog", "owl"]
    assert json.loads(properties["data_config"]) == data_config(load_classifier(checkpoint))


@pytest.mark.parametrize(("export_format", "name"), [("torchscript", "vit.pt"), ("exported", "vit.pt2")])
def test_torch_formats_load_and_match_the_eager_model(
    export_format: str, name: str, checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / name
    export.main([str(checkpoint), "--format", export_format, "--out", str(out), "--device", "cpu"])
    assert capsys.readouterr().out.startswith(f"wrote {out}")
    extra = {"class_names.json": "", "data_config.json": ""}
    if export_format == "torchscript":
        run = torch.jit.load(str(out), _extra_files=extra)
    else:
        run = torch.export.load(out, extra_files=extra).module()
    assert json.loads(extra["class_names.json"]) == ["cat", "dog", "owl"]
    for batch in (1, 4, 9):
        images = torch.randn(batch, 3, 16, 16)
        torch.testing.assert_close(run(images), eager_logits(checkpoint, images))


def test_a_checkpoint_with_flip_tta_exports_the_logits_vision_predict_gives(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from core import load_checkpoint

    saved = load_checkpoint(checkpoint)
    saved["hyper_parameters"]["flip_tta"] = True
    flipped = tmp_path / "flip.ckpt"
    torch.save(saved, flipped)
    out = tmp_path / "vit.pt"
    export.main([str(flipped), "--format", "torchscript", "--out", str(out), "--device", "cpu"])
    capsys.readouterr()
    extra = {"flip_tta.json": ""}
    run = torch.jit.load(str(out), _extra_files=extra)
    assert json.loads(extra["flip_tta.json"]) is True
    images = torch.randn(3, 3, 16, 16)
    averaged = (eager_logits(checkpoint, images) + eager_logits(checkpoint, images.flip(-1))) / 2
    torch.testing.assert_close(run(images), averaged)
    assert not torch.allclose(run(images), eager_logits(checkpoint, images))


def test_a_failed_export_leaves_no_file(checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "vit.pt2"
    out.write_bytes(b"the previous export")

    def broken(*args: object) -> None:
        raise RuntimeError("export failed")

    monkeypatch.setitem(exporters.WRITERS, "exported", broken)
    with pytest.raises(RuntimeError, match="export failed"):
        export.main([str(checkpoint), "--format", "exported", "--out", str(out), "--device", "cpu"])
    assert [path.name for path in tmp_path.iterdir()] == ["vit.pt2"] and out.read_bytes() == b"the previous export"


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["--format", "exported", "--out", "{tmp}/vit.onnx"], "vit.onnx"),
        (["--format", "onnx", "--out", "{tmp}"], "is a directory"),
        (["--format", "coreml", "--out", "{tmp}/vit.onnx"], "--format"),
        (["--out", "{tmp}/vit.onnx", "--device", "nonsense"], "--device"),
    ],
)
def test_bad_options_end_in_one_error_line(
    arguments: list[str], named: str, checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        export.main([str(checkpoint), *(argument.format(tmp=tmp_path) for argument in arguments)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("error:") and error.count("\n") == 1 and named in error, error
    assert not list(tmp_path.iterdir())
