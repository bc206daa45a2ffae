"""The command lines' argument checks and outputs, on an untrained tiny checkpoint."""

from __future__ import annotations

import importlib
import io
import json
import os
import sys
from pathlib import Path

import matplotlib
import pytest
import torch
from PIL import Image

from core import load_module
from tests.vision.vision_testdata import write_classifier_checkpoint, write_image
from vision import explain, inference, predict
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


def test_predict_prints_a_file_name_whose_bytes_are_not_utf8(
    checkpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = str(write_image(tmp_path / os.fsdecode(b"caf\xe9.png")))
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # strict, as on a UTF-8 terminal
    monkeypatch.setattr(sys, "stdout", out)
    predict.main([checkpoint, image, "--top-k", "1"])
    out.flush()
    assert out.buffer.getvalue().decode("utf-8").splitlines()[0] == str(tmp_path / "caf\ufffd.png")


def test_predict_with_flip_tta_averages_each_image_with_its_mirror(
    checkpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    image = str(write_image(tmp_path / "a.png"))
    classifier = load_module(ImageClassifier, checkpoint)
    batch = inference.preprocess(classifier, [inference.load_image(image)])
    with torch.no_grad():
        expected = ((classifier.net(batch) + classifier.net(batch.flip(-1))) / 2).softmax(-1)[0]
        plain = classifier.net(batch).softmax(-1)[0]
    outputs = {}
    for flags in ([], ["--flip-tta"]):
        predict.main([checkpoint, image, "--top-k", "3", "--json", *flags])
        ranked = json.loads(capsys.readouterr().out)["results"][0]["predictions"]
        outputs[bool(flags)] = {entry["class"]: entry["probability"] for entry in ranked}
    names = classifier.hparams.class_names
    assert outputs[True] == pytest.approx({name: float(expected[i]) for i, name in enumerate(names)}, abs=1e-6)
    assert outputs[False] == pytest.approx({name: float(plain[i]) for i, name in enumerate(names)}, abs=1e-6)
    assert outputs[True] != pytest.approx(outputs[False], abs=1e-6)


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


def test_explain_names_the_class_vision_predict_gives_with_and_without_flip_tta(
    checkpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vision.analysis import rollout_figure

    image = str(write_image(tmp_path / "a.png"))
    titles: list[str] = []
    monkeypatch.setattr(rollout_figure, "draw", lambda image, rollout, layers, title, out: titles.append(title))
    for flags in ([], ["--flip-tta"]):
        predict.main([checkpoint, image, "--top-k", "1", "--json", *flags])
        (best,) = json.loads(capsys.readouterr().out)["results"][0]["predictions"]
        explain.main([checkpoint, image, "--out", str(tmp_path / "map.png"), *flags])
        capsys.readouterr()
        assert titles[-1].startswith(f"a.png: {best['class']} ({best['probability']:.1%})"), (titles[-1], best)


def test_importing_explain_keeps_the_plotting_backend() -> None:
    before = matplotlib.get_backend()
    try:
        matplotlib.use("svg")
        importlib.reload(explain)
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(before)


def test_predict_streams_the_images_in_batches_in_order(
    checkpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    images = [str(write_image(tmp_path / f"{index}.png", size=(20 + index, 30))) for index in range(5)]
    batches: list[int] = []
    real_preprocess = inference.preprocess

    def recording_preprocess(classifier: ImageClassifier, loaded: list) -> torch.Tensor:
        batches.append(len(loaded))
        return real_preprocess(classifier, loaded)

    monkeypatch.setattr(inference, "preprocess", recording_preprocess)
    predict.main([checkpoint, *images, "--batch-size", "2", "--json", "--top-k", "2", "--device", "cpu"])
    assert batches == [2, 2, 1]
    report = json.loads(capsys.readouterr().out)
    assert report["checkpoint"] == checkpoint and [result["image"] for result in report["results"]] == images
    one_by_one = []
    for image in images:
        predict.main([checkpoint, image, "--json", "--top-k", "2", "--device", "cpu"])
        one_by_one += json.loads(capsys.readouterr().out)["results"]
    for streamed, alone in zip(report["results"], one_by_one):
        assert [p["class"] for p in streamed["predictions"]] == [p["class"] for p in alone["predictions"]]
        for a, b in zip(streamed["predictions"], alone["predictions"]):
            assert a["probability"] == pytest.approx(b["probability"], abs=1e-6)


def test_predict_json_refuses_an_unreadable_image_before_printing_any_result(
    checkpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    good, cut = tmp_path / "good.png", tmp_path / "cut.png"
    write_image(good)
    cut.write_bytes(good.read_bytes()[:-40])  # its header reads, its pixels do not
    with pytest.raises(SystemExit) as exit_info:
        predict.main([checkpoint, str(good), str(cut), "--batch-size", "1", "--json", "--device", "cpu"])
    captured = capsys.readouterr()
    assert exit_info.value.code == 2 and captured.out == ""  # not half an object
    assert captured.err.startswith(f"error: {cut} is not a readable image"), captured.err


@pytest.mark.parametrize("command", [predict, explain])
@pytest.mark.parametrize("bad", ["truncated checkpoint", "garbage checkpoint", "missing image", "text as image"])
def test_bad_input_is_one_error_line_naming_it(
    command: object, bad: str, checkpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    image, ckpt = tmp_path / "a.png", Path(checkpoint)
    write_image(image)
    named = ckpt
    if bad == "truncated checkpoint":
        named = tmp_path / "cut.ckpt"
        named.write_bytes(ckpt.read_bytes()[:-64])
        ckpt = named
    elif bad == "garbage checkpoint":
        named = tmp_path / "noise.ckpt"
        named.write_bytes(bytes(range(256)) * 4)
        ckpt = named
    elif bad == "missing image":
        named = image = tmp_path / "missing.png"
    else:
        named = image = tmp_path / "notes.png"
        image.write_text("not an image\n")
    arguments = [str(ckpt), str(image), "--device", "cpu"]
    with pytest.raises(SystemExit) as exit_info:
        command.main([*arguments, "--json"] if command is predict else [*arguments, "--out", str(tmp_path / "map.png")])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error:") and captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert str(named) in captured.err, captured.err
