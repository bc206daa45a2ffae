"""The regularization rule: none for short runs, the full recipe for long ones, applied by a real
Trainer to the module's Mixup/CutMix and stochastic depth and to the datamodule's augmentation."""

from __future__ import annotations

from dataclasses import astuple
from datetime import timedelta
from types import SimpleNamespace

import pytest
from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import Timer

from core.regularization import DropPath
from tests.vision.vision_testdata import tiny_model_kwargs
from vision import recipe
from vision.module import ImageClassifier
from vision.recipe import (
    FULL_CUTMIX_ALPHA,
    FULL_DROP_PATH,
    FULL_MIXUP_ALPHA,
    FULL_RE_PROB,
    crop_for,
    planned_epochs,
    planned_steps,
    ramp,
    regularization,
)
from vision.synthetic import SyntheticDataModule


@pytest.mark.parametrize("epochs", [0.5, 3, 10])
def test_short_runs_are_not_regularized(epochs: float) -> None:
    assert astuple(regularization(epochs)) == (0, 0, 0, 0, 0)


def test_thirty_epochs_augment_lightly_without_mixing() -> None:
    settings = regularization(30)
    assert 0.3 < settings.rand_augment < 0.6 and 0 < settings.drop_path < FULL_DROP_PATH
    assert (settings.re_prob, settings.mixup_alpha, settings.cutmix_alpha) == (0, 0, 0)


def test_runs_of_few_steps_are_not_regularized() -> None:
    assert astuple(regularization(30, steps=570)) == (0, 0, 0, 0, 0)  # 30 epochs of 1,258 digits at batch 64
    assert astuple(regularization(300, steps=2000)) == (0, 0, 0, 0, 0)
    assert regularization(30, steps=30 * 391) == regularization(30)  # CIFAR-10 at batch 128: the epochs decide
    held = regularization(100, steps=2000 * 10**0.5)  # halfway from 2,000 to 20,000 steps in log scale
    assert held.rand_augment == pytest.approx(0.5) and held.mixup_alpha == pytest.approx(0.5 * FULL_MIXUP_ALPHA)
    assert regularization(200, steps=200 * 391) == regularization(200)
    assert astuple(regularization(float("nan"), steps=float("nan"))) == (0, 0, 0, 0, 0)
    assert regularization(60, steps=4000).mixup_alpha < regularization(60).mixup_alpha  # the steps hold mixing back


@pytest.mark.parametrize("epochs", [100, 200, 1000, float("inf")])
def test_long_runs_get_the_full_recipe(epochs: float) -> None:
    full = (1.0, FULL_RE_PROB, FULL_MIXUP_ALPHA, FULL_CUTMIX_ALPHA, FULL_DROP_PATH)
    assert astuple(regularization(epochs)) == full


def test_strength_grows_with_the_length() -> None:
    lengths = [1, 10, 15, 30, 45, 70, 100, 300]
    for shorter, longer in zip(lengths, lengths[1:]):
        assert regularization(shorter).rand_augment <= regularization(longer).rand_augment
        assert regularization(shorter).mixup_alpha <= regularization(longer).mixup_alpha
    assert ramp(31.6227766, 10) == pytest.approx(0.5)


def test_crop_follows_the_image_size() -> None:
    assert [crop_for(size) for size in (8, 32, 64, 96, 224)] == ["pad"] * 3 + ["random_resized"] * 2


def budget_trainer(**values: object) -> SimpleNamespace:
    defaults = dict(
        max_epochs=None, max_steps=-1, num_training_batches=50, accumulate_grad_batches=1, callbacks=[], current_epoch=0
    )
    return SimpleNamespace(**{**defaults, **values})


class StoppedWatch(Timer):
    """A Timer frozen at ``elapsed`` seconds of training with ``remaining`` left."""

    def __init__(self, elapsed: float, remaining: float) -> None:
        super().__init__(duration=timedelta(seconds=elapsed + remaining))
        self.elapsed, self.remaining = elapsed, remaining

    def time_elapsed(self, stage: object = None) -> float:
        return self.elapsed

    def time_remaining(self, stage: object = None) -> float:
        return self.remaining


def test_planned_epochs_from_every_kind_of_budget() -> None:
    assert planned_epochs(budget_trainer(max_epochs=30)) == 30
    assert planned_epochs(budget_trainer(max_epochs=-1)) == float("inf")
    assert planned_epochs(budget_trainer(max_epochs=30, max_steps=500)) == 10  # 50 steps an epoch
    assert planned_epochs(budget_trainer(max_epochs=30, max_steps=500, accumulate_grad_batches=2)) == 20
    # A time budget: unknown (so nothing) before an epoch is timed, then the pace so far.
    assert planned_epochs(budget_trainer(max_epochs=100, callbacks=[StoppedWatch(0.0, 600.0)])) == 0
    timed = budget_trainer(max_epochs=100, current_epoch=2, callbacks=[StoppedWatch(60.0, 600.0)])
    assert planned_epochs(timed) == pytest.approx(22)
    assert planned_epochs(budget_trainer(max_epochs=5, current_epoch=2, callbacks=[StoppedWatch(60.0, 600.0)])) == 5


def test_planned_steps_follow_the_loader_and_max_steps() -> None:
    assert planned_steps(budget_trainer(), 30) == 1500  # 50 batches an epoch
    assert planned_steps(budget_trainer(accumulate_grad_batches=2), 30) == 750
    assert planned_steps(budget_trainer(), 0) == 0  # a time budget before its first epoch is timed
    unknown_length = budget_trainer(num_training_batches=float("inf"))
    assert planned_steps(unknown_length, 3) == float("inf")
    assert planned_steps(budget_trainer(num_training_batches=float("inf"), max_steps=500), 3) == 500


def auto_classifier() -> ImageClassifier:
    return ImageClassifier(
        model=tiny_model_kwargs(drop_path="auto", depth=3), num_classes=3, mixup_alpha="auto", cutmix_alpha="auto"
    )


def test_a_real_run_sizes_the_auto_values_to_its_epochs_and_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recipe, "START_STEPS", 4.0)  # 40 planned steps: halfway from 4 to 400
    monkeypatch.setattr(recipe, "FULL_STEPS", 400.0)
    data = SyntheticDataModule(
        num_classes=3, train_size=8, val_size=4, test_size=4, img_size=16, batch_size=4, num_workers=0
    )
    module = auto_classifier()
    assert not module.mixing  # nothing is mixed before the length is known
    trainer = Trainer(
        max_epochs=40, limit_train_batches=1, limit_val_batches=0, accelerator="cpu", logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )
    trainer.fit(module, datamodule=data)
    expected = regularization(40, steps=40)
    assert expected.rand_augment == pytest.approx(0.5)  # the steps hold it back (40 epochs alone: 0.6)
    assert module.mixing and module.mixup.mixup_alpha == pytest.approx(expected.mixup_alpha)
    assert module.mixup.cutmix_alpha == pytest.approx(expected.cutmix_alpha)
    rates = [layer.p for layer in module.net.modules() if isinstance(layer, DropPath)]
    last = expected.drop_path
    assert rates == pytest.approx([last / 2, last / 2, last, last])  # linear over depth 3: 0, 1/2, 1 (attention, MLP)
    assert data.augment_strength.get() == pytest.approx(expected.rand_augment)
    assert data.erasing.get() == pytest.approx(expected.re_prob)


def test_explicit_values_are_kept() -> None:
    module = ImageClassifier(
        model=tiny_model_kwargs(drop_path=0.2, depth=2), num_classes=3, mixup_alpha=0.8, cutmix_alpha=0.0
    )
    module.apply_regularization(regularization(3))
    assert module.mixing and module.mixup.mixup_alpha == 0.8
    assert [layer.p for layer in module.net.modules() if isinstance(layer, DropPath)] == [0.2, 0.2]
    data = SyntheticDataModule(img_size=16, auto_augment="rand-m9-n2-mstd0.5-inc1-mmax9", re_prob=0.1, num_workers=0)
    data.apply_regularization(regularization(3))
    assert data.augment_strength is None and data.erasing is None
    assert "ScaledAugment" not in repr(data.train_tf) and "RandomErasing(p=0.1" in repr(data.train_tf)
