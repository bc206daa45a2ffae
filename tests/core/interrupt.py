"""A scheduler's SIGTERM at a chosen step, between accumulated micro-batches (as a time budget
ends, too) or in the test, and the logged loss curve to compare runs by."""

from __future__ import annotations

import csv
import os
import signal
from pathlib import Path
from typing import Any

import lightning.pytorch as pl


class SigtermAt(pl.Callback):
    """Sends this process SIGTERM after optimizer step ``step``, as a scheduler would."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


class SigtermMidAccumulation(pl.Callback):
    """Sends this process SIGTERM as the first batch after optimizer step ``step`` starts: with
    ``trainer.accumulate_grad_batches`` above 1, while that batch's gradient is accumulated."""

    def __init__(self, step: int) -> None:
        self.step = step
        self.sent = False

    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step == self.step and not self.sent:
            self.sent = True
            os.kill(os.getpid(), signal.SIGTERM)


class SigtermAsBudgetEnds(SigtermMidAccumulation):
    """As :class:`SigtermMidAccumulation`, and training stops after that batch, as the end of a
    time budget stops it (Lightning's ``Timer``): between accumulated micro-batches."""

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if self.sent:
            trainer.should_stop = True


class SigtermInTest(pl.Callback):
    """Sends this process SIGTERM as the test after training starts, as a scheduler would."""

    def on_test_start(self, trainer: pl.Trainer, *args: Any) -> None:
        os.kill(os.getpid(), signal.SIGTERM)


def logged_losses(run_dir: Path) -> dict[int, float]:
    """Training loss by optimizer step, from every CSV log of the run directory."""
    logged: dict[int, float] = {}
    for path in sorted(run_dir.glob("csv/version_*/metrics.csv")):
        with path.open() as handle:
            for row in csv.DictReader(handle):
                if row.get("train/loss"):
                    logged[int(row["step"])] = float(row["train/loss"])
    return logged
