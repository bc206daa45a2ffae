"""``data.batch_size=auto``: the training batch follows the run's budget (epochs or wall-clock time)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from lightning.pytorch import Trainer

from core.files.checkpoints import load_checkpoint
from core.errors import InputError
from core.training.runner import train
from core.training.commands.config_check import validate_config
from tests.vision.test_train import vision_config
from tests.vision.vision_testdata import TINY_MODEL
from vision.data import batch_size
from vision.data.batch_size import MAX_PER_PROCESS, MIN_BATCH, auto_batch_size, batch_for_budget, per_process


def test_the_rule_is_the_power_of_two_below_the_square_root_of_an_eighth_of_the_budget() -> None:
    for images in (5e4, 3.5e5, 4.5e6, 3.84e8):
        batch = batch_for_budget(images)
        assert batch & (batch - 1) == 0 and math.sqrt(images / 8) / 2 < batch <= math.sqrt(images / 8)
        assert 8 * batch <= images / batch < 32 * batch  # about 8 steps per image of the batch
    # The proving grounds: 3 epochs of 3,500 MNIST digits and 3 or 10 of 1,258 digits -> 32;
    # 10 and 30 epochs of MNIST and 30 and 100 of the digits -> 64.
    assert [batch_for_budget(e * n) for e, n in ((3, 3500), (3, 1258), (10, 1258))] == [32, 32, 32]
    assert [batch_for_budget(e * n) for e, n in ((10, 3500), (30, 3500), (30, 1258), (100, 1258))] == [64] * 4
    assert batch_for_budget(0) == batch_for_budget(1e3) == MIN_BATCH == 32
    assert batch_for_budget(4.5e6) == 512 and batch_for_budget(3.84e8) == 4096  # CIFAR-10 100 epochs, ImageNet 300


def test_each_process_takes_its_share_within_bounds() -> None:
    assert per_process(512, 1, 45_000) == MAX_PER_PROCESS == 128  # one device: timm's default at most
    assert per_process(512, 8, 45_000) == 64  # CIFAR-10 100 epochs on 8 devices: 512 in all
    assert per_process(32, 6, 45_000) == 4  # a power of two of the share
    assert per_process(32, 1, 40) == 32 and per_process(64, 1, 40) == 32  # never more than the images
    assert per_process(32, 64, 45_000) == 2  # Mixup/CutMix pair images: at least 2


@pytest.mark.parametrize(("epochs", "expected"), [(3, 32), (10, 64), (100, 128)])
def test_the_epochs_of_a_real_trainer_size_the_batch(epochs: int, expected: int, caplog: pytest.LogCaptureFixture) -> None:
    trainer = Trainer(max_epochs=epochs, accelerator="cpu", logger=False, enable_checkpointing=False)
    with caplog.at_level("INFO"):
        assert auto_batch_size(trainer, None, 3500, 32) == expected  # type: ignore[arg-type]
    assert f"data.batch_size=auto: batches of {expected} images, the power of two below sqrt(" in caplog.text
    assert f"{epochs} epochs of 3,500 images" in caplog.text


def synthetic(tmp_path: Path, *overrides: str):
    return vision_config(
        [
            "data=synthetic", "data.num_classes=3", "data.train_size=64", "data.val_size=8", "data.test_size=8",
            "data.batch_size=auto", "data.num_workers=0", *TINY_MODEL, f"paths.output_dir={tmp_path}",
            "trainer=cpu", "logger=csv", "callbacks.progress_bar=null", "trainer.num_sanity_val_steps=0",
            *overrides,
        ]
    )


def test_a_run_sizes_its_batches_from_the_epochs_and_keeps_the_choice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = synthetic(tmp_path, "trainer.max_epochs=2")
    validate_config(cfg)
    with caplog.at_level("INFO"):
        train(cfg)
    # 2 epochs of 64 images: sqrt(128 / 8) is below the floor of 32.
    assert "data.batch_size=auto: batches of 32 images" in caplog.text and "2 epochs of 64 images" in caplog.text
    checkpoint = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    assert checkpoint["SyntheticDataModule"] == {"train_batch_size": 32}
    assert checkpoint["global_step"] == 4  # 2 epochs of 2 full batches of 32


def test_a_time_budget_measures_the_pace_and_a_resumed_run_keeps_the_choice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    paces: list[float] = []
    measure = batch_size.measure_image_pace

    def recorded(module, trainer, img_size, batch):  # type: ignore[no-untyped-def]
        before = torch.random.get_rng_state()
        pace = measure(module, trainer, img_size, batch)
        assert torch.equal(before, torch.random.get_rng_state())  # training randomness untouched
        assert all(p.grad is None for p in module.parameters())
        assert batch == MIN_BATCH  # below twice the probe: measured once
        paces.append(pace)
        return pace

    monkeypatch.setattr(batch_size, "measure_image_pace", recorded)
    first = tmp_path / "a"
    with caplog.at_level("INFO"):
        train(synthetic(first, "trainer.max_epochs=1000", "++trainer.max_time=00:00:00:03"))
    assert len(paces) == 1 and paces[0] > 0
    expected = per_process(batch_for_budget(min(3 * paces[0], 1000 * 64)), 1, 64)
    assert f"data.batch_size=auto: batches of {expected} images" in caplog.text
    assert "images/s a process (measured on batches of 32)" in caplog.text

    paces.clear()
    resumed = tmp_path / "b"
    train(synthetic(resumed, "trainer.max_epochs=1000", "++trainer.max_time=00:00:00:05", f"ckpt_path={first / 'checkpoints' / 'last.ckpt'}"))
    assert not paces  # the interrupted run's choice is taken from its checkpoint
    assert load_checkpoint(resumed / "checkpoints" / "last.ckpt")["SyntheticDataModule"] == {"train_batch_size": expected}


def test_max_steps_alone_takes_timms_default_batch_within_the_data(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO"):
        train(synthetic(tmp_path, "trainer.max_epochs=-1", "trainer.max_steps=1"))
    # 128 a process, but never more than the 64 training images.
    assert "data.batch_size=auto: batches of 64 images, no epoch or time budget (max_steps alone)" in caplog.text


def test_the_presets_follow_the_budget_and_a_bad_word_is_refused(tmp_path: Path) -> None:
    for data in ("imagefolder", "cifar10", "cifar100"):
        assert vision_config([f"data={data}", "data.root=/unused", "paths.output_dir=/unused"]).data.batch_size == "auto"
    assert vision_config(["experiment=cifar10_vit", "paths.output_dir=/unused"]).data.batch_size == 128  # its recipe
    with pytest.raises(InputError, match="data.batch_size must be a whole number of at least 1, or auto, got 'big'"):
        validate_config(synthetic(tmp_path, "data.batch_size=big"))
