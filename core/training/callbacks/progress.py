"""Training progress for people and for log files: the rich bar on a terminal, plain lines elsewhere.

A bar redrawn in place is unreadable in a SLURM output file, a CI log or ``> run.log``, and rich
prints nothing at all until the end when its output is not a terminal. :func:`progress_bar`
(the ``progress_bar`` entry of ``conf/callbacks/default.yaml``) picks the rich bar when rich
sees an interactive terminal or a notebook, and :class:`LogProgress` otherwise: every
``every_n_seconds`` one log line with the step, the loss, the speed and the time left, e.g.

    epoch 3 | step 1200/50000 | train/loss 2.314 | 4.1 steps/s, 524 samples/s | elapsed 0:04:52 | left 3:18:20
"""

from __future__ import annotations

import datetime
import logging
import math
import time
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import ProgressBar, RichProgressBar, Timer
from rich.console import Console

from core.training.plan.budget import run_plan

log = logging.getLogger(__name__)


def progress_bar(every_n_seconds: float = 30.0, interactive: bool | None = None) -> ProgressBar:
    """:class:`RichProgressBar` when the output is an interactive terminal or a notebook (as
    rich judges it, so ``TTY_INTERACTIVE=0|1`` overrides), else :class:`LogProgress`."""
    if interactive is None:
        console = Console()
        interactive = console.is_interactive or console.is_jupyter
    return RichProgressBar() if interactive else LogProgress(every_n_seconds)


def clock(seconds: float) -> str:
    """``H:MM:SS`` of a duration in seconds."""
    return str(datetime.timedelta(seconds=round(seconds)))


class LogProgress(ProgressBar):
    """Plain progress lines through :mod:`logging` (Hydra sends them to the console and the run's
    log file): one every ``every_n_seconds`` of training, one at the end of each training epoch,
    and one with the metrics of each validation. Speed is measured over the wall time since this
    process started training, so it includes validation, and the time left is the shorter of the
    remaining steps at that speed and what ``trainer.max_time`` leaves."""

    def __init__(self, every_n_seconds: float = 30.0) -> None:
        super().__init__()
        self.every_n_seconds = every_n_seconds
        self.enabled = True
        self._start_time = 0.0
        self._start_step = 0
        self._last_line = 0.0

    def disable(self) -> None:
        """Stop writing lines (Lightning disables the bar on every process but the first)."""
        self.enabled = False

    def enable(self) -> None:
        """Write lines again."""
        self.enabled = True

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start_time = self._last_line = time.monotonic()
        self._start_step = trainer.global_step

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self.enabled and time.monotonic() - self._last_line >= self.every_n_seconds:
            self.write_train_line(trainer, pl_module)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.enabled:
            self.write_train_line(trainer, pl_module)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.enabled and not trainer.sanity_checking:
            metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/") and v.numel() == 1}
            log.info("epoch %d | step %d | validation | %s", trainer.current_epoch, trainer.global_step, format_metrics(metrics))

    def write_train_line(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """One line: epoch, step of the planned total (:func:`core.training.plan.budget.run_plan`),
        training metrics, speed, elapsed and remaining time."""
        now = time.monotonic()
        self._last_line = now
        elapsed = now - self._start_time
        plan = run_plan(trainer)
        step, total = trainer.global_step, plan.steps if plan is not None else math.inf
        steps_per_second = (step - self._start_step) / elapsed if elapsed > 0 else 0.0
        parts = [f"epoch {trainer.current_epoch}", f"step {step}/{total:.0f}" if math.isfinite(total) else f"step {step}"]
        metrics = {k: v for k, v in self.get_metrics(trainer, pl_module).items() if k.startswith("train/")}
        if metrics:
            parts.append(format_metrics(metrics))
        rate = item_rate(trainer, pl_module)
        parts.append(f"{steps_per_second:.3g} steps/s" + (f", {rate}" if rate else ""))
        parts.append(f"elapsed {clock(elapsed)}")
        left = time_left(trainer, total - step, steps_per_second)
        if left is not None:
            parts.append(f"left {clock(left)}")
        log.info(" | ".join(parts))


def format_metrics(metrics: dict[str, Any]) -> str:
    """``name value`` pairs, numbers to four significant digits."""
    return " ".join(f"{name} {value:.4g}" if isinstance(value, float) else f"{name} {value}" for name, value in metrics.items())


def item_rate(trainer: pl.Trainer, pl_module: pl.LightningModule) -> str | None:
    """``"524 samples/s"``: the rate :class:`core.training.callbacks.throughput.TrainThroughput` logged at the last
    epoch end (all processes, training batches only); None before the first epoch end."""
    unit = getattr(pl_module, "throughput_unit", None)
    rate = trainer.callback_metrics.get(f"train/{unit}_per_second")
    return None if rate is None else f"{float(rate):.4g} {unit}/s"


def time_left(trainer: pl.Trainer, steps_left: float, steps_per_second: float) -> float | None:
    """Seconds until the run ends: the remaining steps at the current speed, or the remaining
    ``max_time`` when that comes first; None while neither is known."""
    estimates = []
    if math.isfinite(steps_left) and steps_per_second > 0:
        estimates.append(max(steps_left, 0) / steps_per_second)
    for callback in trainer.callbacks:  # type: ignore[attr-defined]
        if isinstance(callback, Timer) and (remaining := callback.time_remaining()) is not None:
            estimates.append(max(remaining, 0.0))
    return min(estimates) if estimates else None
