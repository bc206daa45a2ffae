"""Runs that diverge stop and say so; a NaN is never the best model; a spike can be survived.
The real runner and Trainer on the tiny task (tests/core/conf/tiny.yaml): 64 training samples,
batches of 16, so 4 optimizer steps an epoch."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import Tensor

import core
from core.errors import InputError, TrainingDiverged
from core.training.callbacks.divergence import DivergenceGuard
from core.training.runner import train
from tests.core.test_runner import tiny_config
from tests.core.tiny_task import TinyData, TinyModule

STEPS_PER_EPOCH = 4


class PoisonedData(TinyData):
    """The tiny task with one training sample whose values overflow float32 arithmetic (3e38):
    the batch that holds it makes the loss NaN, once per epoch."""

    def __init__(self, poison: int = 5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.poison = poison

    def setup(self, stage: str | None = None) -> None:
        super().setup(stage)
        self.splits["train"].tensors[0][self.poison] = 3e38


class SpikyModule(TinyModule):
    """The tiny module whose training loss is multiplied by ``factor`` (finite) at optimizer step
    ``spike_step``, on process ``rank`` only (None: every process)."""

    def __init__(self, spike_step: int = 6, factor: float = 1000.0, rank: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        loss = super().training_step(batch, batch_idx)
        spiking = self.trainer.global_step == self.hparams.spike_step
        if spiking and self.hparams.rank in (None, self.trainer.global_rank):
            return loss * self.hparams.factor
        return loss


class SteadyLoss(TinyModule):
    """The tiny module whose training loss reads 2 at every step but optimizer step 6, where it
    reads 2000 (its gradients are the tiny task's)."""

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        loss = super().training_step(batch, batch_idx)
        return loss - loss.detach() + (2000.0 if self.trainer.global_step == 6 else 2.0)


class NaNValidation(TinyModule):
    """The tiny module whose validation accuracy is NaN (its weights and losses stay finite)."""

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        super().validation_step(batch, batch_idx)
        self.log("val/acc", float("nan"))


class RecordRewinds(pl.Callback):
    """Writes, per process, the rewinds of its guard and a sum of its final weights."""

    def __init__(self, directory: str) -> None:
        self.directory = Path(directory)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        guard = next(callback for callback in trainer.callbacks if isinstance(callback, DivergenceGuard))
        weights = sum(float(param.double().sum()) for param in pl_module.parameters())
        record = {"rewinds": guard.rewinds, "step": trainer.global_step, "weights": weights}
        (self.directory / f"rank{trainer.global_rank}.json").write_text(json.dumps(record))


def weights_finite(path: str | Path) -> bool:
    state = core.load_checkpoint(path)["state_dict"]
    return all(bool(value.isfinite().all()) for value in state.values() if value.is_floating_point())


def test_a_diverging_run_stops_at_once_naming_its_last_good_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(TrainingDiverged) as raised:
        train(tiny_config(
            tmp_path, "+module.lr=1e5", "trainer.max_epochs=50", "callbacks.divergence.max_rewinds=0",
            "callbacks.periodic_checkpoint.every_n_train_steps=1",  # last.ckpt after every step
        ))
    diverged = raised.value
    assert diverged.step < 2 * STEPS_PER_EPOCH  # within a few steps, not 50 epochs on NaN
    message = str(diverged)
    assert message.startswith(f"training diverged at step {diverged.step}: the ")
    assert "module.lr (now 100000)" in message and "trainer.gradient_clip_val" in message
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert diverged.checkpoint == str(last) and f"the last checkpoint with finite weights is {last}" in message
    # Nothing after the fault was saved over the good state: last.ckpt is the step before it.
    assert core.load_checkpoint(last)["global_step"] == diverged.step - 1 and weights_finite(last)
    assert all(weights_finite(path) for path in (tmp_path / "checkpoints").glob("*.ckpt"))
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["diverged"] is True and metrics["diverged_at_step"] == diverged.step
    assert metrics["last_good_checkpoint"] == str(last) and metrics["optimizer_steps"] == diverged.step
    assert not list(tmp_path.glob(".*metrics*"))  # written atomically: no temporary file left


def test_a_poisoned_batch_is_rewound_and_skipped_and_the_run_finishes(tmp_path: Path) -> None:
    train(tiny_config(
        tmp_path, "data._target_=tests.core.test_divergence.PoisonedData", "+data.poison=5",
        "callbacks.divergence.every_n_steps=2",
    ))
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["train/rewinds"] == 2.0  # the poisoned batch of each of the 2 epochs
    assert "diverged" not in metrics
    # The validations and the test ran on finite weights (the last logged train/loss may be the
    # skipped batch's NaN).
    assert all(math.isfinite(value) for key, value in metrics.items() if key.startswith(("val/", "test/")))
    for path in (tmp_path / "checkpoints").glob("*.ckpt"):
        assert weights_finite(path), path
    assert core.load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")["global_step"] == 2 * STEPS_PER_EPOCH


def test_the_steps_after_a_rewind_leave_the_good_state_as_it_was() -> None:
    """Adam's moments put back by a rewind are copies: the steps after it (and a second fault
    before the next copy) do not change what the next rewind restores."""
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(net.parameters(), lr=0.1)

    def step() -> None:
        optimizer.zero_grad()
        net(torch.randn(8, 4)).square().mean().backward()
        optimizer.step()

    step()  # the optimizer has state to keep
    trainer = SimpleNamespace(optimizers=[optimizer], global_step=1, is_global_zero=True)
    guard = DivergenceGuard()
    guard.good = guard.snapshot(trainer, net)
    kept = {name: value.tensor.clone() for name, value in guard.good.optimizers[0][net.weight].items()}
    guard.rewind(trainer, net, "a fault")
    step()
    step()
    for name, value in guard.good.optimizers[0][net.weight].items():
        torch.testing.assert_close(value.tensor, kept[name])


def test_the_fault_after_the_last_allowed_rewind_stops_the_run(tmp_path: Path) -> None:
    with pytest.raises(TrainingDiverged, match=r"the training loss is nan, after 1 rewind .*; the last checkpoint") as raised:
        train(tiny_config(
            tmp_path, "data._target_=tests.core.test_divergence.PoisonedData", "+data.poison=5",
            "callbacks.divergence.max_rewinds=1",
        ))
    assert STEPS_PER_EPOCH < raised.value.step <= 2 * STEPS_PER_EPOCH  # the poisoned batch of the second epoch
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["diverged"] is True and metrics["rewinds"] == 1


def test_a_loss_spike_rewinds_to_the_last_copy(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    spiky = ["module._target_=tests.core.test_divergence.SpikyModule", "+module.spike_step=6", "trainer.max_epochs=3"]
    guard = ["callbacks.divergence.spike_factor=4", "callbacks.divergence.window=3", "callbacks.divergence.every_n_steps=2"]
    train(tiny_config(tmp_path / "survived", *spiky, *guard))
    assert json.loads((tmp_path / "survived" / "metrics.json").read_text())["train/rewinds"] == 1.0
    assert "the training loss spiked to" in caplog.text and "rewound to the good state of step 6" in caplog.text
    with pytest.raises(TrainingDiverged, match=r"at step 7: the training loss spiked to .*x the median"):
        train(tiny_config(tmp_path / "stopped", *spiky, *guard, "callbacks.divergence.max_rewinds=0"))


def test_the_spike_is_told_in_the_loss_of_the_step_under_gradient_accumulation(tmp_path: Path) -> None:
    # Lightning hands the callbacks each micro-batch's loss divided by accumulate_grad_batches.
    overrides = [
        "module._target_=tests.core.test_divergence.SteadyLoss", "trainer.max_epochs=5", "trainer.accumulate_grad_batches=2",
        "callbacks.divergence.spike_factor=4", "callbacks.divergence.window=3", "callbacks.divergence.max_rewinds=0",
    ]
    with pytest.raises(TrainingDiverged, match=r"the training loss spiked to 2000, 1000.0x the median 2 of the last 3 steps"):
        train(tiny_config(tmp_path, *overrides))


def test_a_nan_validation_is_never_the_best_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(TrainingDiverged, match="the validation gave val/acc=nan"):
        train(tiny_config(tmp_path / "guarded", "module._target_=tests.core.test_divergence.NaNValidation"))
    assert not list((tmp_path / "guarded" / "checkpoints").glob("best-*"))
    # Without the guard, the best checkpoint still never takes a NaN, and the test runs on the
    # final weights.
    train(tiny_config(tmp_path / "unguarded", "module._target_=tests.core.test_divergence.NaNValidation", "callbacks.divergence=null"))
    assert not list((tmp_path / "unguarded" / "checkpoints").glob("best-*"))
    assert "test/acc" in json.loads((tmp_path / "unguarded" / "metrics.json").read_text())


def test_a_resumed_run_with_another_model_shape_is_refused_naming_the_settings(tmp_path: Path) -> None:
    train(tiny_config(tmp_path / "first", "trainer.max_steps=1"))
    last = tmp_path / "first" / "checkpoints" / "last.ckpt"
    with pytest.raises(InputError, match=r"model.dim is 16 there and 32 here, model.depth is 1 there and 2 here; resume with the checkpoint's settings \(model.dim=16 model.depth=1\)"):
        train(tiny_config(tmp_path / "second", f"ckpt_path={last}", "model.dim=32", "model.depth=2"))
    assert not (tmp_path / "second" / "metrics.json").exists()


def test_a_checkpoint_with_non_finite_weights_is_refused(tmp_path: Path) -> None:
    train(tiny_config(tmp_path / "run", "trainer.max_steps=1"))
    checkpoint = core.load_checkpoint(tmp_path / "run" / "checkpoints" / "last.ckpt")
    checkpoint["state_dict"]["net.head.weight"][0, 0] = float("nan")
    torch.save(checkpoint, tmp_path / "nan.ckpt")
    with pytest.raises(InputError, match=r"nan.ckpt holds weights that are not finite \(NaN or inf in 1 of \d+ tensors, e.g. net.head.weight\)"):
        core.load_module(TinyModule, tmp_path / "nan.ckpt")
    with pytest.raises(InputError, match="holds weights that are not finite"):
        train(tiny_config(tmp_path / "resumed", f"ckpt_path={tmp_path / 'nan.ckpt'}"))


def test_guard_settings_are_checked() -> None:
    with pytest.raises(InputError, match="callbacks.divergence.spike_factor must be a number above 1 or null, got 0.5"):
        DivergenceGuard(spike_factor=0.5)
    with pytest.raises(InputError, match="callbacks.divergence.max_rewinds must be a whole number of at least 0"):
        DivergenceGuard(max_rewinds=-1)


@pytest.mark.slow
def test_under_ddp_a_spike_on_one_process_rewinds_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # read by the spawned processes
    train(tiny_config(
        tmp_path, "trainer.devices=2", "trainer.strategy=ddp_spawn", "trainer.max_epochs=3",
        "module._target_=tests.core.test_divergence.SpikyModule", "+module.spike_step=3", "+module.rank=1",
        "callbacks.divergence.spike_factor=4", "callbacks.divergence.window=2", "callbacks.divergence.every_n_steps=1",
        "+callbacks.record._target_=tests.core.test_divergence.RecordRewinds", f"+callbacks.record.directory={tmp_path}",
    ))
    records = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    # Both took the decision that only process 1's loss called for, so their weights stay equal.
    assert records[0] == records[1] and records[0]["rewinds"] == 1 and records[0]["step"] == 6


def test_the_rewinds_before_a_resume_count_toward_max_rewinds(tmp_path: Path) -> None:
    poisoned = ["data._target_=tests.core.test_divergence.PoisonedData", "+data.poison=5", "callbacks.divergence.max_rewinds=1"]
    train(tiny_config(tmp_path, *poisoned, "trainer.max_epochs=1"))
    assert json.loads((tmp_path / "metrics.json").read_text())["train/rewinds"] == 1.0
    last = tmp_path / "checkpoints" / "last.ckpt"
    with pytest.raises(TrainingDiverged, match=r"after 1 rewind"):  # the second epoch's poisoned batch
        train(tiny_config(tmp_path, *poisoned, "trainer.max_epochs=2", f"ckpt_path={last}"))
