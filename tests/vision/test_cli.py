"""The command lines' argument checks and outputs, on an untrained tiny checkpoint."""

from __future__ import annotations

import importlib
from pathlib import Path

import matplotlib
import pytest
import torch
from PIL import Image

from core import load_module
from tests.vision.vision_testdata import write_classifier_checkpoint, write_image
from vision import explain, predict
from vision.inference import top_k
from vision.module import ImageClassifier


@pytest.fixture
def checkpoint(tmp_path: Path) -> str:
    return str(write_classifier_checkpoint(tmp_path / "tiny.ckpt"))


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_predict_refuses_a_top_k_below_one(
    value: str, checkpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    image = str(write_image(tmp_path / "a.png"))
    with pytest.raises(SystemExit) as exit_info:
        predict.main([checkpoint, image, "--top-k", value])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "--top-k" in error and "at least 1" in error, error


def test_top_k_below_one_is_a_value_error(checkpoint: str) -> None:
    with pytest.raises(ValueError, match="k >= 1"):
        top_k(load_module(ImageClassifier, checkpoint), torch.zeros(1, 3, 16, 16), 0)


def test_predict_top_k_beyond_the_classes_lists_them_all(
    checkpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    image = str(write_image(tmp_path / "a.png"))
    predict.main([checkpoint, image, "--top-k", "10"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == image and sorted(line.split()[-1] for line in lines[1:]) == ["cat", "dog", "owl"]


def test_explain_refuses_a_directory_or_another_suffix(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    image = str(write_image(tmp_path / "a.png"))
    for out, message in [
        (str(tmp_path), "is a directory"),
        (f"{tmp_path / 'new'}/", "is a directory"),
        (str(tmp_path / "map.jpg"), "map.png"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            explain.main([str(tmp_path / "missing.ckpt"), image, "--out", out])
        assert exit_info.value.code == 2
        error = capsys.readouterr().err
        assert "--out" in error and message in error, error
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("name", ["map", "map.png"])
def test_explain_prints_the_png_it_wrote(
    name: str, checkpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    image = str(write_image(tmp_path / "a.png"))
    explain.main([checkpoint, image, "--out", str(tmp_path / "maps" / name)])
    written = tmp_path / "maps" / "map.png"
    assert capsys.readouterr().out.strip() == f"wrote {written}"
    assert sorted(path.name for path in (tmp_path / "maps").iterdir()) == ["map.png"]
    with Image.open(written) as picture:
        assert picture.format == "PNG" and picture.size[0] > 500 and picture.size[1] > 300


def test_importing_explain_keeps_the_plotting_backend() -> None:
    before = matplotlib.get_backend()
    try:
        matplotlib.use("svg")
        importlib.reload(explain)
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(before)
