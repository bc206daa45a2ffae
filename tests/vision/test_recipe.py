"""The regularization rule: none for short runs, the full recipe for long ones, applied by a real
Trainer to the module's Mixup/CutMix and stochastic depth and to the datamodule's augmentation."""

from __future__ import annotations

from dataclasses import astuple
from types import SimpleNamespace

import pytest
from lightning.pytorch import Callback, LightningModule, Trainer

from core.regularization import DropPath
from core.training.plan.budget import RunPlan, TrainingBudget, run_plan
from tests.vision.vision_testdata import tiny_model_kwargs
from vision import recipe
from vision.module import ImageClassifier
from vision.recipe import (
    FULL_CUTMIX_ALPHA,
    FULL_DROP_PATH,
    FULL_MIXUP_ALPHA,
    FULL_RE_PROB,
    crop_for,
    regularization,
)
from core.training.plan.lengths import ramp
from vision.data.synthetic import SyntheticDataModule


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
    assert ramp(31.6227766, 10, 100) == pytest.approx(0.5)


def test_crop_follows_the_image_size() -> None:
    assert [crop_for(size) for size in (8, 32, 64, 96, 224)] == ["pad"] * 3 + ["random_resized"] * 2


class PlanWatch(Callback):
    """Records, after every step, the epoch, the plan the module's regularization follows, the
    budget's published plan and what :func:`run_plan` (the progress lines' source) returns."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, RunPlan | None, RunPlan | None, RunPlan | None]] = []

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, *args: object) -> None:
        budget = next(callback for callback in trainer.callbacks if isinstance(callback, TrainingBudget))
        self.seen.append((trainer.current_epoch, pl_module.followed_plan, budget.plan, run_plan(trainer)))


def test_a_time_budget_regularizes_from_its_first_plan_and_every_reader_sees_that_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Any plan regularizes, whatever this machine's pace: from 0.01 epochs and 1 step on.
    monkeypatch.setattr(recipe, "START_EPOCHS", 0.01)
    monkeypatch.setattr(recipe, "START_STEPS", 1.0)
    data = SyntheticDataModule(
        num_classes=3, train_size=64, val_size=4, test_size=4, img_size=16, batch_size=4, num_workers=0
    )
    module, watch = auto_classifier(), PlanWatch()
    trainer = Trainer(
        max_time={"seconds": 4}, max_epochs=1000, limit_val_batches=0, accelerator="cpu", logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        callbacks=[TrainingBudget(max_warmup_fraction=0.3, measure_steps=2, refine_every_n_steps=5), watch],
    )
    trainer.fit(module, datamodule=data)
    planned = [(epoch, followed, published) for epoch, followed, published, read in watch.seen if published is not None]
    assert planned and planned[0][0] == 0  # planned inside the first epoch, after two timed steps
    for epoch, followed, published, read in watch.seen:
        assert read is published  # the progress lines read the published plan itself
        assert followed is None or followed.steps_per_epoch == 16
    first_plan = planned[0][2]
    assert first_plan.estimated and first_plan.steps_per_epoch == 16 and first_plan.steps >= 3
    # From the step after the first plan, the module's regularization follows a published plan.
    followed_at = [followed for epoch, followed, published, read in watch.seen if followed is not None]
    assert followed_at and followed_at[0] is first_plan
    assert module.regularization == regularization(module.followed_plan.epochs, module.followed_plan.steps)
    assert module.regularization.rand_augment > 0 and data.augment_strength.get() > 0


def test_the_plan_of_epoch_and_step_budgets() -> None:
    def plan(**values: object) -> RunPlan:
        defaults = dict(
            num_training_batches=50, accumulate_grad_batches=1, callbacks=[], estimated_stepping_batches=1500, training=False
        )
        found = run_plan(SimpleNamespace(**{**defaults, **values}))
        assert found is not None
        return found

    assert (plan().steps, plan().steps_per_epoch, plan().epochs) == (1500, 50, 30)
    assert plan(accumulate_grad_batches=2, estimated_stepping_batches=750).epochs == 30
    # 51 batches accumulated 2 by 2 step 26 times an epoch (the last step on one batch), as Lightning does.
    assert plan(num_training_batches=51, accumulate_grad_batches=2, estimated_stepping_batches=780).epochs == 30
    assert plan(estimated_stepping_batches=float("inf")).epochs == float("inf")  # no bound at all
    assert plan(num_training_batches=float("inf"), estimated_stepping_batches=500).epochs == 0  # unknown length


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
    policy = "rand-m9-n2-mstd0.5-inc1-mmax9"
    data = SyntheticDataModule(img_size=16, auto_augment=policy, re_prob=0.1, num_workers=0, augment_on="loader")
    data.apply_regularization(regularization(3))
    assert data.augment_strength is None and data.erasing is None
    assert "ScaledAugment" not in repr(data.train_tf) and "RandomErasing(p=0.1" in repr(data.train_tf)
    on_device = SyntheticDataModule(img_size=16, auto_augment=policy, re_prob=0.1, num_workers=0)
    on_device.apply_regularization(regularization(3))
    assert "ScaledAugment" not in repr(on_device.train_tf) and "RandAugment" in repr(on_device.train_tf)
    assert on_device.batch_augment.erasing.shared_probability.get() == 0.1
