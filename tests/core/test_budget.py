"""The learning-rate schedule laid over the run's budget, through the real runner and Trainer."""

import csv
import json
import logging
from types import SimpleNamespace
from pathlib import Path

import lightning.pytorch as pl
import pytest
from hydra import compose, initialize_config_dir

import core
from core.errors import InputError
from core.training.plan.budget import TrainingBudget, resolve_epochs, stepping_bound
from core.training.runner import train
from tests.core.test_runner import tiny_config
from tests.core.tiny_task import TinyData, TinyModule

CONF = Path(__file__).resolve().parents[2] / "conf"


def logged_rates(output_dir: Path) -> list[tuple[int, float]]:
    """(step, learning rate) rows of the CSV logger's metrics file."""
    (metrics_file,) = output_dir.rglob("metrics.csv")
    with metrics_file.open() as file:
        return [(int(row["step"]), float(row["lr-AdamW"])) for row in csv.DictReader(file) if row.get("lr-AdamW")]


def test_epoch_budget_caps_warmup_and_decays_to_its_end(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="core.training.plan.budget"):
        train(tiny_config(tmp_path, "trainer.max_epochs=5", "+module.warmup_steps=100"))  # 4 steps an epoch
    assert "warmup shortened from 100 to 2 steps" in caplog.text  # 10% of 20 planned steps
    rates = logged_rates(tmp_path)
    assert rates[0] == (0, pytest.approx(3e-3 / 2))
    assert max(rate for _, rate in rates) == pytest.approx(3e-3)
    assert rates[-1][0] == 19 and rates[-1][1] < 3e-3 * 0.01


@pytest.mark.parametrize(
    ("head", "overrides", "chosen", "max_epochs"),
    [
        ("nlp", [], 10, 10),  # no other bound: the head's budget.epochs
        ("vision", [], 100, 100),
        ("nlp", ["trainer.max_time=00:00:30:00"], -1, -1),  # the time alone ends the run
        ("vision", ["trainer.max_steps=500"], -1, -1),
        ("nlp", ["trainer.max_time=00:00:30:00", "trainer.max_epochs=3"], None, 3),  # named: whichever comes first
        ("vision", ["experiment=cifar10_vit", "trainer.max_time=00:00:10:00"], None, 200),  # the preset's epochs
    ],
)
def test_the_epoch_bound_left_null_gives_way_to_a_time_or_step_budget(
    head: str, overrides: list[str], chosen: int | None, max_epochs: int
) -> None:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(head, overrides=overrides)
    assert resolve_epochs(cfg.trainer, cfg.budget.get("epochs")) == chosen
    assert cfg.trainer.max_epochs == max_epochs


def test_a_run_without_any_bound_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no bound.*trainer.max_epochs=10"):
        train(tiny_config(tmp_path, "trainer.max_epochs=null"))


def test_a_step_budget_runs_past_the_default_epochs(tmp_path: Path) -> None:
    train(tiny_config(tmp_path, "trainer.max_epochs=null", "+budget.epochs=1", "trainer.max_steps=10"))  # 4 steps an epoch
    assert core.load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")["global_step"] == 10
    train(tiny_config(tmp_path / "epochs", "trainer.max_epochs=null", "+budget.epochs=1"))
    assert core.load_checkpoint(tmp_path / "epochs" / "checkpoints" / "last.ckpt")["global_step"] == 4


def test_max_steps_inside_an_epoch_validates_and_checkpoints_the_final_weights(tmp_path: Path) -> None:
    train(tiny_config(tmp_path, "trainer.max_epochs=5", "trainer.max_steps=6"))  # stops in epoch 2
    checkpoints = tmp_path / "checkpoints"
    assert core.load_checkpoint(checkpoints / "last.ckpt")["global_step"] == 6
    assert validated_steps(tmp_path)[-1] == 5  # the validation after the 6th optimizer step (0-based step 5)
    assert logged_rates(tmp_path)[-1][1] < 3e-3 * 0.1


def validated_steps(output_dir: Path) -> list[int]:
    """The (0-based) steps of the CSV logger's validation rows."""
    (metrics_file,) = output_dir.rglob("metrics.csv")
    with metrics_file.open() as file:
        return [int(row["step"]) for row in csv.DictReader(file) if row.get("val/acc")]


@pytest.mark.parametrize(
    ("bound", "last_step"),
    [
        (["trainer.max_epochs=3"], 11),  # the third epoch, which check_val_every_n_epoch=2 passes over
        (["trainer.max_epochs=5", "trainer.max_steps=10"], 9),  # stops inside the third epoch
        (["trainer.max_epochs=-1", "trainer.max_time={seconds: 2}", "+module.step_seconds=0.05", "+data.size=4096"], None),
    ],
    ids=["epochs", "steps", "time"],
)
def test_the_epoch_a_budget_ends_in_validates_although_check_val_every_n_epoch_passes_over_it(
    tmp_path: Path, bound: list[str], last_step: int | None
) -> None:
    train(tiny_config(tmp_path, *bound, "trainer.check_val_every_n_epoch=2"))
    steps = core.load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")["global_step"]
    assert last_step is None or steps == last_step + 1
    assert validated_steps(tmp_path)[-1] == steps - 1  # the final weights, validated inside the fit
    assert list((tmp_path / "checkpoints").glob("best-*.ckpt"))  # a best checkpoint, the final weights in the running


def test_time_budget_ends_mid_epoch_and_anneals_over_its_time(tmp_path: Path) -> None:
    overrides = [
        "trainer.max_epochs=-1",
        "trainer.max_time={seconds: 4}",
        "+module.step_seconds=0.1",
        "+module.warmup_steps=1000",
        "+data.size=4096",  # 256 steps an epoch: the budget ends inside the first epoch
    ]
    train(tiny_config(tmp_path, *overrides))
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert {"val/acc", "test/acc"} <= metrics.keys()
    steps = core.load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")["global_step"]
    assert 10 <= steps < 256
    rates = logged_rates(tmp_path)
    assert max(rate for _, rate in rates) > 0.9 * 3e-3  # the warmup of 1000 steps cut to fit the time
    assert rates[-1][1] < 0.3 * 3e-3  # annealed by the end of the time budget


def test_a_resumed_time_budget_follows_its_last_plan_while_it_measures_its_pace(tmp_path: Path) -> None:
    """The plan is kept in the checkpoint: a resumed time budget has one from its first batch (what
    each head sizes to it is sized from then on), before it has timed its steps again."""
    quiet = dict(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                 enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0)
    model, data = dict(in_dim=4, dim=8, depth=1, num_heads=2), TinyData(size=256)
    first_budget = TrainingBudget(max_warmup_fraction=0.1, measure_steps=2)
    first = pl.Trainer(max_time={"seconds": 1}, max_epochs=-1, callbacks=[first_budget], **quiet)
    first.fit(TinyModule(model, num_classes=2, step_seconds=0.01), data)
    assert first_budget.plan is not None and first_budget.plan.estimated
    first.save_checkpoint(tmp_path / "last.ckpt")

    budget, seen = TrainingBudget(max_warmup_fraction=0.1, measure_steps=2), []

    class Watch(pl.Callback):
        def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: object) -> None:
            seen.append(budget.plan)

    resumed = pl.Trainer(max_time={"seconds": 2}, max_epochs=-1, callbacks=[budget, Watch()], **quiet)
    resumed.fit(TinyModule(model, num_classes=2, step_seconds=0.01), data, ckpt_path=tmp_path / "last.ckpt")
    assert seen[0] == first_budget.plan  # the first batch, before any step is timed
    assert seen[-1] != first_budget.plan  # planned again from this run's pace


def test_a_run_resumed_inside_its_last_epoch_validates_its_final_weights(tmp_path: Path) -> None:
    # Lightning does not start again the epoch a run resumed inside: its on_train_epoch_start is not called.
    steps_every_10 = [
        "callbacks.recent_checkpoints.train_time_interval=null", "callbacks.recent_checkpoints.every_n_train_steps=10",
    ]
    bound = ["trainer.max_epochs=3", "trainer.check_val_every_n_epoch=2"]  # 4 steps an epoch
    train(tiny_config(tmp_path / "first", *bound, *steps_every_10))
    inside_the_last_epoch = tmp_path / "first" / "checkpoints" / "recent-step0000010.ckpt"
    train(tiny_config(tmp_path / "resumed", *bound, f"ckpt_path={inside_the_last_epoch}"))
    assert validated_steps(tmp_path / "resumed") == [11]  # the final weights, validated inside the fit


@pytest.mark.parametrize(("estimate", "bound"), [(20, 20), (-1, None), (float("inf"), None)])
def test_the_stepping_bound_of_epochs_without_a_length_is_none(estimate: float, bound: int | None) -> None:
    # Lightning estimates the steps of epochs over a loader without a length as max_steps, -1 when unset.
    trainer = SimpleNamespace(callbacks=[TrainingBudget(0.1)], max_epochs=3, train_dataloader=object(),
                              estimated_stepping_batches=estimate)
    assert stepping_bound(trainer) == bound


@pytest.mark.parametrize("fraction", [1.0, -0.1])
def test_a_warmup_cap_that_leaves_no_decay_is_refused(tmp_path: Path, fraction: float) -> None:
    # A warmup as long as the plan would never decay: the rate would end the run at its peak.
    with pytest.raises(InputError, match=r"budget.max_warmup_fraction must be a number in \[0, 1\)"):
        train(tiny_config(tmp_path, f"budget.max_warmup_fraction={fraction}"))
    with pytest.raises(ValueError, match=r"budget.max_warmup_fraction must be a number in \[0, 1\)"):
        TrainingBudget(max_warmup_fraction=fraction)
