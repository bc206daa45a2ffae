"""``python -m vision.evaluate``: the real ``conf/vision_eval.yaml`` composed with Hydra, a tiny
checkpoint and an image folder; metrics against an independent computation, the data fallback,
and bad input ending in one ``error:`` line."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf
from PIL import Image

from core.errors import InputError
from core.training.evaluation import evaluate_checkpoint
from tests.vision.vision_testdata import CONF, tiny_model_kwargs, write_image_folder
from vision import evaluate, export
from vision.head import HEAD
from vision.inference import load_classifier, load_image, preprocess
from vision.module import ImageClassifier

CLASSES = ["cat", "dog", "owl"]
TEST_IMAGES = {"cat": 4, "dog": 3, "owl": 2}
FOLDER = ["data=imagefolder", "data.root={folder}", "data.batch_size=4", "data.num_workers=0"]


def write_checkpoint(path: Path) -> Path:
    """An untrained tiny classifier, its data config that of a 16px image folder."""
    torch.manual_seed(0)
    classifier = ImageClassifier(model=tiny_model_kwargs(), num_classes=3, class_names=CLASSES, img_size=16)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"hyper_parameters": dict(classifier.hparams), "state_dict": classifier.state_dict()}, path)
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("images")
    write_image_folder(root, {"train": {name: 3 for name in CLASSES}, "test": TEST_IMAGES})
    return root


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_checkpoint(tmp_path_factory.mktemp("run") / "checkpoints" / "best.ckpt")


def eval_config(output_dir: Path, *overrides: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(
            "vision_eval",
            overrides=[f"paths.output_dir={output_dir}", "trainer=cpu", "callbacks.progress_bar=null", *overrides],
        )


def test_metrics_match_an_independent_count_and_the_confusion_matrix_is_drawn(
    checkpoint: Path, folder: Path, tmp_path: Path
) -> None:
    cfg = eval_config(tmp_path, f"ckpt_path={checkpoint}", *(override.format(folder=folder) for override in FOLDER))
    metrics = evaluate_checkpoint(cfg, HEAD)
    assert json.loads((tmp_path / "metrics.json").read_text()) == metrics
    classifier = load_classifier(checkpoint)
    correct, total = {name: 0 for name in CLASSES}, 0
    for index, name in enumerate(CLASSES):
        paths = sorted((folder / "test" / name).iterdir())
        with torch.no_grad():
            predicted = classifier.net(preprocess(classifier, [load_image(path) for path in paths])).argmax(dim=-1)
        correct[name] = int((predicted == index).sum())
        total += len(paths)
    assert metrics["test/acc"] == pytest.approx(sum(correct.values()) / total)
    for name in CLASSES:
        assert metrics[f"test/class_acc/{name}"] == pytest.approx(correct[name] / TEST_IMAGES[name])
    assert {"test/acc5", "test/loss"} <= metrics.keys()
    assert metrics["split"] == "test" and metrics["ckpt_path"] == str(checkpoint)
    with Image.open(tmp_path / "confusion_matrix.png") as picture:
        assert picture.format == "PNG" and min(picture.size) > 200


def test_flip_tta_scores_each_image_and_each_class_with_its_mirror(checkpoint: Path, folder: Path, tmp_path: Path) -> None:
    overrides = [f"ckpt_path={checkpoint}", *(override.format(folder=folder) for override in FOLDER)]
    metrics = evaluate_checkpoint(eval_config(tmp_path, *overrides, "module.flip_tta=true"), HEAD)
    classifier = load_classifier(checkpoint)
    paths = [path for name in CLASSES for path in sorted((folder / "test" / name).iterdir())]
    labels = torch.tensor([index for index, name in enumerate(CLASSES) for _ in range(TEST_IMAGES[name])])
    with torch.no_grad():
        batch = preprocess(classifier, [load_image(path) for path in paths])
        logits = (classifier.net(batch) + classifier.net(batch.flip(-1))) / 2
    assert metrics["test/loss"] == pytest.approx(float(torch.nn.functional.cross_entropy(logits, labels)), rel=1e-4)
    assert metrics["test/acc"] == pytest.approx(float((logits.argmax(-1) == labels).float().mean()))
    for index, name in enumerate(CLASSES):  # the confusion matrix counts the averaged logits too
        ours = logits[labels == index].argmax(-1) == index
        assert metrics[f"test/class_acc/{name}"] == pytest.approx(float(ours.float().mean()))


def test_without_data_the_training_runs_data_is_used_and_val_is_a_split(
    checkpoint: Path, folder: Path, tmp_path: Path
) -> None:
    run_config = checkpoint.parent.parent / ".hydra" / "config.yaml"
    run_config.parent.mkdir(parents=True, exist_ok=True)
    training = eval_config(tmp_path / "unused", *(override.format(folder=folder) for override in FOLDER))
    OmegaConf.save(OmegaConf.create({"data": OmegaConf.to_container(training.data)}), run_config)
    try:
        metrics = evaluate_checkpoint(eval_config(tmp_path, f"ckpt_path={checkpoint}", "split=val"), HEAD)
    finally:
        run_config.unlink()
    assert {"val/acc", "val/acc5", "val/loss"} <= metrics.keys()
    assert any(key.startswith("val/class_acc/") for key in metrics)  # the classes the held-out images have
    assert not any(key.startswith("test/") for key in metrics)


def test_only_the_evaluated_folder_is_read(checkpoint: Path, folder: Path, tmp_path: Path) -> None:
    """Scoring ``test/`` checks and reads that folder alone: unreadable training images, which
    stop an evaluation of the training split, leave the test scores as they are."""
    damaged = tmp_path / "images"
    shutil.copytree(folder, damaged)
    for name in ("cat", "dog"):
        (damaged / "train" / name / "0.png").write_bytes(b"not an image")
    clean = evaluate_checkpoint(
        eval_config(tmp_path / "clean", f"ckpt_path={checkpoint}", *(override.format(folder=folder) for override in FOLDER)),
        HEAD,
    )
    overrides = [f"ckpt_path={checkpoint}", *(override.format(folder=damaged) for override in FOLDER)]
    scored = evaluate_checkpoint(eval_config(tmp_path / "test", *overrides), HEAD)
    assert scored["test/acc"] == clean["test/acc"] and scored["test/loss"] == pytest.approx(clean["test/loss"])
    with pytest.raises(InputError, match="cannot be read"):
        evaluate_checkpoint(eval_config(tmp_path / "train", *overrides, "split=train"), HEAD)


def test_train_split_is_scored_without_augmentation(checkpoint: Path, folder: Path, tmp_path: Path) -> None:
    overrides = [f"ckpt_path={checkpoint}", "split=train", *(override.format(folder=folder) for override in FOLDER)]
    first = evaluate_checkpoint(eval_config(tmp_path / "first", *overrides), HEAD)
    second = evaluate_checkpoint(eval_config(tmp_path / "second", *overrides), HEAD)
    assert {"train/acc", "train/acc5", "train/loss"} <= first.keys()
    # Random crops and flips would change the loss from one pass to the next.
    assert first["train/loss"] == second["train/loss"] and first["train/acc"] == second["train/acc"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ([*FOLDER, "split=holdout"], "split=holdout is not offered"),
        ([], "the training run's config"),  # no data= and no .hydra/config.yaml beside the checkpoint
        (["data=imagefolder", "data.root={other}", "data.batch_size=2"], "its num_classes, class_names differ"),
        ([*FOLDER, "data.batch_size=0"], "data.batch_size must be a whole number"),
    ],
)
def test_bad_input_is_an_input_error(
    overrides: list[str], message: str, checkpoint: Path, folder: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    write_image_folder(other, {split: {"cat": 2, "dog": 2} for split in ("train", "val", "test")})
    filled = [override.format(folder=folder, other=other) for override in overrides]
    cfg = eval_config(tmp_path / "out", f"ckpt_path={checkpoint}", *filled)
    with pytest.raises(InputError, match=message):
        evaluate_checkpoint(cfg, HEAD)


@pytest.mark.parametrize("damage", ["truncated", "missing", "directory", "no ckpt_path"])
def test_the_command_reports_a_bad_checkpoint_in_one_line(
    damage: str, checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "model.ckpt"
    if damage == "truncated":
        path.write_bytes(checkpoint.read_bytes()[:-100])
    elif damage == "directory":
        path.mkdir()
    arguments = [] if damage == "no ckpt_path" else [f"ckpt_path={path}"]
    monkeypatch.setattr(sys, "argv", ["vision.evaluate", *arguments, f"hydra.run.dir={tmp_path / 'run'}"])
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main()
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("error:") and error.count("\n") == 1 and "Traceback" not in error, error
    assert ("ckpt_path" if damage == "no ckpt_path" else str(path)) in error


def test_an_exported_directory_evaluates_as_its_checkpoint(checkpoint: Path, folder: Path, tmp_path: Path) -> None:
    """``ckpt_path=DIR`` of ``vision.export --format safetensors``: the same metrics as the checkpoint."""
    directory = tmp_path / "shared"
    export.main([str(checkpoint), "--format", "safetensors", "--out", str(directory), "--device", "cpu"])
    data = [override.format(folder=folder) for override in FOLDER]
    from_checkpoint = evaluate_checkpoint(eval_config(tmp_path / "a", f"ckpt_path={checkpoint}", *data), HEAD)
    from_directory = evaluate_checkpoint(eval_config(tmp_path / "b", f"ckpt_path={directory}", *data), HEAD)
    for key in ("test/acc", "test/acc5", "test/loss"):
        assert from_directory[key] == pytest.approx(from_checkpoint[key], abs=1e-5), key
