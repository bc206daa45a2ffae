"""The configs compose, the runner trains and tests with them, and the command lines work end to
end: train -> metrics.json + checkpoints -> predict -> explain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import lightning.pytorch as pl
import pytest
import timm
import torch
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate
from omegaconf import OmegaConf
from core.errors import InputError
from PIL import Image

from core import load_checkpoint, load_module
from core.training.runner import model_kwargs, train
from core.training.commands.config_check import validate_config
from tests.vision.vision_testdata import CONF, TINY_MODEL, write_image
from vision import predict
from vision import explain
from vision.model import VisionTransformer
from vision.module import ImageClassifier
from vision.model.timm_weights import rename_key

ROOT = CONF.parent
TINY_SYNTHETIC = [
    "data=synthetic",
    "data.num_classes=3",
    "data.train_size=64",
    "data.val_size=32",
    "data.test_size=32",
    "data.batch_size=16",
]


def vision_config(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("vision", overrides=overrides, return_hydra_config=False)


def test_default_run_is_the_cifar10_recipe_on_any_accelerator() -> None:
    cfg = vision_config(["paths.output_dir=/unused"])
    assert cfg.data._target_ == "vision.data.cifar.CIFARDataModule" and cfg.data.dataset == "cifar10"
    assert (cfg.model.patch_size, cfg.model.dim, cfg.model.depth, cfg.data.img_size) == (4, 192, 9, 32)
    assert cfg.trainer.accelerator == "auto"
    # Regularization sized to the run's length (vision.recipe): the full recipe at 100 epochs.
    assert (cfg.module.mixup_alpha, cfg.module.cutmix_alpha, cfg.module.label_smoothing) == ("auto", "auto", 0.1)
    assert (cfg.data.auto_augment, cfg.data.re_prob, cfg.model.drop_path) == ("auto", "auto", "auto")
    assert (cfg.optimized_metric, cfg.optimized_mode) == ("val/acc", "max")


@pytest.mark.parametrize("experiment", ["cifar10_vit", "cifar100_vit", "finetune_timm"])
def test_experiments_compose_into_a_module(experiment: str) -> None:
    overrides = [f"experiment={experiment}", "paths.output_dir=/unused"]
    cfg = vision_config(overrides + (["pretrained=vit.pth"] if experiment == "finetune_timm" else []))
    assert cfg.trainer.precision == "auto" and cfg.data.img_size == cfg.model.img_size
    with torch.device("meta"):
        module = instantiate(cfg.module, model=model_kwargs(cfg), num_classes=10, _convert_="all")
    assert isinstance(module.net, VisionTransformer)
    if experiment == "finetune_timm":
        assert module.net.img_size == (224, 224) and module.mixup is None
    else:
        assert cfg.trainer.max_epochs == 200 and module.mixup is not None and cfg.compile is True
        assert cfg.data.dataset == experiment.removesuffix("_vit")


@pytest.mark.parametrize(
    ("budget", "bounds"),
    [
        (["trainer.max_time=00:00:10:00"], (200, "00:00:10:00")),
        (["trainer.max_time=00:00:30:00", "trainer.max_epochs=-1"], (-1, "00:00:30:00")),
        (["data.augment_on=loader"], (200, None)),
    ],
)
def test_the_readmes_cifar10_variants_pass_the_config_checks(budget: list[str], bounds: tuple) -> None:
    cfg = vision_config(["experiment=cifar10_vit", "paths.output_dir=/unused", *budget])
    validate_config(cfg)
    assert (cfg.trainer.max_epochs, cfg.trainer.get("max_time")) == bounds
    assert (cfg.data.auto_augment, cfg.data.re_prob, cfg.module.mixup_alpha, cfg.model.drop_path) == (
        "rand-m9-n2-mstd0.5-inc1-mmax9", 0.25, 0.8, 0.1
    )  # the full recipe, whatever the budget


def test_cifar100_data_is_cifar10_with_its_own_dataset_and_statistics() -> None:
    nodes = {
        name: OmegaConf.to_container(vision_config([f"data={name}", "paths.output_dir=/unused"]).data, resolve=True)
        for name in ("cifar10", "cifar100")
    }
    assert list(nodes["cifar100"]) == list(nodes["cifar10"])
    assert {key for key in nodes["cifar10"] if nodes["cifar10"][key] != nodes["cifar100"][key]} == {"dataset"}
    # Published per-channel statistics of the two training sets.
    published = {
        "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
        "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    }
    for name, node in nodes.items():
        data = instantiate(node)
        assert data.dataset == name
        mean, std = published[name]
        assert list(data.mean) == pytest.approx(mean) and list(data.std) == pytest.approx(std)


def test_finetune_without_a_checkpoint_file_is_a_clear_error() -> None:
    cfg = vision_config(["experiment=finetune_timm", "paths.output_dir=/unused"])
    with pytest.raises(InputError, match="pretrained=PASS_A_TIMM_WEIGHTS_FILE is missing; pass a checkpoint"):
        validate_config(cfg)


def test_unknown_config_key_is_refused() -> None:
    with pytest.raises(ConfigCompositionException, match="model.dimension"):
        vision_config(["model.dimension=64"])


@pytest.mark.parametrize("name", ["vit_tiny_patch16_224", "vit_small_patch16_224", "vit_base_patch16_224"])
def test_224px_presets_have_timms_architecture(name: str) -> None:
    cfg = OmegaConf.to_container(OmegaConf.load(CONF / "model" / f"{name}.yaml").model)
    cfg.pop("_target_")
    with torch.device("meta"):
        ours = VisionTransformer(**cfg, num_classes=1000)
        reference = timm.create_model(name, pretrained=False)
    expected = {rename_key(key): value.shape for key, value in reference.state_dict().items()}
    assert {key: value.shape for key, value in ours.state_dict().items()} == expected


class HeadAtTest(pl.Callback):
    """Saves the classifier layer's weights the test runs with to ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path

    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        torch.save(pl_module.net.head.weight.detach().clone(), self.path)


def test_runner_trains_with_ema_and_writes_loadable_checkpoints(tmp_path: Path) -> None:
    cfg = vision_config(
        [
            *TINY_SYNTHETIC,
            *TINY_MODEL,
            f"paths.output_dir={tmp_path}",
            "trainer=cpu",
            "logger=csv",
            "callbacks.progress_bar=null",
            "trainer.max_epochs=2",
            "+callbacks.ema={_target_:lightning.pytorch.callbacks.EMAWeightAveraging,decay:0.9}",
            "+callbacks.tested._target_=tests.vision.test_train.HeadAtTest",
            f"+callbacks.tested.path={tmp_path / 'tested_head.pt'}",
        ]
    )
    result = train(cfg)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert result == metrics["val/acc"] and 0.0 <= result <= 1.0
    last = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    averaged, current = last["state_dict"], last["current_model_state"]
    assert not torch.equal(averaged["net.head.weight"], current["net.head.weight"])
    module = load_module(ImageClassifier, tmp_path / "checkpoints" / "last.ckpt")
    torch.testing.assert_close(module.net.head.weight, averaged["net.head.weight"])
    assert module.hparams.class_names == ["class_0", "class_1", "class_2"]
    (best,) = (tmp_path / "checkpoints").glob("best-*.ckpt")  # what test/acc is of: the best checkpoint's average
    tested, saved = torch.load(tmp_path / "tested_head.pt"), load_checkpoint(best)
    assert torch.equal(tested, saved["state_dict"]["net.head.weight"])
    assert not torch.equal(tested, saved["current_model_state"]["net.head.weight"])


def run_train_cli(tmp_path: Path, *overrides: str) -> Path:
    """``python -m vision.train`` on tiny synthetic data in a subprocess; returns its run dir."""
    run_dir = tmp_path / "run"
    command = [
        sys.executable, "-m", "vision.train", *TINY_SYNTHETIC, *TINY_MODEL,
        "trainer=cpu", "logger=csv", *overrides, f"hydra.run.dir={run_dir}",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    completed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return run_dir


@pytest.mark.slow
def test_cli_train_then_predict_then_explain(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run_dir = run_train_cli(tmp_path, "trainer.max_steps=8")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    for key in ("val/acc", "test/acc", "test/acc5", "fit_seconds", "train_samples_per_second"):
        assert key in metrics, key
    assert metrics["test/acc5"] >= metrics["test/acc"]
    checkpoints = sorted(path.name for path in (run_dir / "checkpoints").iterdir())
    assert "last.ckpt" in checkpoints and any(name.startswith("best-") for name in checkpoints)
    checkpoint = str(run_dir / "checkpoints" / "last.ckpt")

    images = [str(write_image(tmp_path / "a.png", (30, 40))), str(write_image(tmp_path / "b.jpg", (16, 16)))]
    predict.main([checkpoint, *images, "--json"])
    output = json.loads(capsys.readouterr().out)
    assert [result["image"] for result in output["results"]] == images
    for result in output["results"]:
        probabilities = [entry["probability"] for entry in result["predictions"]]
        assert len(probabilities) == 3 and probabilities == sorted(probabilities, reverse=True)
        assert sum(probabilities) == pytest.approx(1.0, abs=1e-5)
        assert {entry["class"] for entry in result["predictions"]} == {"class_0", "class_1", "class_2"}
    predict.main([checkpoint, images[0], "--top-k", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == images[0] and len(lines) == 3 and lines[1].strip().endswith(("class_0", "class_1", "class_2"))

    out = tmp_path / "maps" / "map.png"
    explain.main([checkpoint, images[0], "--out", str(out)])
    with Image.open(out) as picture:
        assert picture.format == "PNG" and picture.size[0] > 500 and picture.size[1] > 300


@pytest.mark.slow
def test_cli_run_stopped_by_max_steps_before_any_validation_still_reports_all_metrics(tmp_path: Path) -> None:
    # 64 training images in batches of 16: 4 steps per epoch, so max_steps=2 ends fit mid-epoch,
    # before the epoch's validation; the budget's end validates and checkpoints the final weights.
    run_dir = run_train_cli(tmp_path, "trainer.max_steps=2")
    assert sorted(path.name for path in (run_dir / "checkpoints").iterdir()) == ["best-epoch000-step2.ckpt", "last.ckpt"]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    for key in ("val/acc", "test/acc", "test/acc5", "fit_seconds", "train_samples_per_second"):
        assert key in metrics, key
    assert 0.0 <= metrics["val/acc"] <= 1.0 and metrics["test/acc5"] >= metrics["test/acc"]


def test_cli_errors_name_the_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    not_a_checkpoint = tmp_path / "model.ckpt"
    not_a_checkpoint.write_text("hello")
    image = str(write_image(tmp_path / "a.png"))
    for command, args, message in (
        (predict.main, [str(not_a_checkpoint), image], "not a readable checkpoint"),
        (explain.main, [str(tmp_path / "missing.ckpt"), image], "does not exist"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            command(args)
        assert exit_info.value.code == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith("error: ") and message in line


SEEN: list[tuple[int, list[int]]] = []  # (epoch, labels of a training batch), by TrainingBatches


class TrainingBatches(pl.Callback):
    """Records the labels of every training batch with its epoch in :data:`SEEN`."""

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: object, batch_idx: int) -> None:
        SEEN.append((trainer.current_epoch, batch[1].tolist()))  # type: ignore[index]


def test_debug_overfit_trains_the_same_batches_every_epoch(tmp_path: Path) -> None:
    SEEN.clear()
    cfg = vision_config([
        *TINY_SYNTHETIC, *TINY_MODEL, "debug=overfit", f"paths.output_dir={tmp_path}", "trainer=cpu", "logger=csv",
        "callbacks.progress_bar=null", "trainer.max_epochs=3", "module.mixup_alpha=0", "module.cutmix_alpha=0",
        "+callbacks.batches._target_=tests.vision.test_train.TrainingBatches",
    ])
    train(cfg)
    epochs = [[labels for epoch, labels in SEEN if epoch == number] for number in range(3)]
    assert len(epochs[0]) == 2 and epochs[0] == epochs[1] == epochs[2]
