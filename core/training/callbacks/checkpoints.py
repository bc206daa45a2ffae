"""Checkpoints that survive a killed run: atomic writes, and ``last.ckpt`` written during epochs.

Lightning's ``TorchCheckpointIO`` serializes into a temporary file under the system temp
directory and moves it over the target. When that directory is on another file system than the
run (node-local ``/tmp``, a network run directory), the move is a copy in place, and a job killed
during it leaves a truncated ``last.ckpt`` behind; the full checkpoint also has to fit in
``/tmp``. :class:`AtomicCheckpointIO` writes beside the target and renames, which is atomic on
one file system: a reader sees the previous checkpoint or the new one, never half of one.

:func:`periodic_last_checkpoint` adds the second half of "lose at most a set interval": the
epoch-end ``last.ckpt`` is also rewritten every few minutes or steps, so a run killed in the
middle of a long epoch resumes from there (``ckpt_path=.../checkpoints/last.ckpt``).

:class:`BestCheckpoint` keeps the best checkpoint by the optimized metric and never takes a value
that is not finite for a candidate.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.fabric.utilities.types import _PATH
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO
from torch import Tensor

from core.files.atomic import atomic_path
from core.errors import InputError


class AtomicCheckpointIO(TorchCheckpointIO):
    """``TorchCheckpointIO`` whose local writes go to a hidden temporary file in the checkpoint's
    own directory, flushed to disk, then renamed over the target (:func:`core.files.atomic.atomic_path`). Remote paths
    (``s3://...``) keep Lightning's own writer."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: _PATH, storage_options: Any | None = None) -> None:
        if storage_options is not None or "://" in str(path):
            super().save_checkpoint(checkpoint, path, storage_options)
            return
        with atomic_path(path) as temporary, temporary.open("wb") as file:
            torch.save(checkpoint, file)


class BestCheckpoint(ModelCheckpoint):
    """A ``ModelCheckpoint`` for which a monitored value that is not finite (NaN, inf) is never a
    candidate. Lightning's own keeps the first value it sees (it files NaN as the worst score), so
    a run whose validations gave NaN would keep such a checkpoint as its best and test it.

    A monitored metric (``optimized_metric``) that a validation of the fit did not log is bad
    input, named with the metrics it did log (Lightning raises a configuration error there, which
    a command would show as a traceback)."""

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        fitting = trainer.state.fn == "fit" and not trainer.sanity_checking
        if fitting and self.monitor is not None and self.monitor not in trainer.callback_metrics:
            logged = sorted(name for name in trainer.callback_metrics if name.startswith("val/"))
            raise InputError(
                f"optimized_metric={self.monitor} is not among the metrics this validation logged ({', '.join(logged)}); "
                "set optimized_metric to one of them (and optimized_mode to max or min)"
            )
        super().on_validation_end(trainer, pl_module)

    def check_monitor_top_k(self, trainer: pl.Trainer, current: Tensor | None = None) -> bool:
        if current is not None:
            finite = bool(torch.isfinite(torch.as_tensor(current)).all())
            if not trainer.strategy.reduce_boolean_decision(finite, all=True):  # the same answer on every rank
                return False
        return super().check_monitor_top_k(trainer, current)


class OptimizerSteps:
    """Whether the optimizer stepped in the training batch that just ended: with gradient
    accumulation (``trainer.accumulate_grad_batches``) it steps once every that many batches."""

    def __init__(self) -> None:
        self.stepped_at = 0  # the optimizer steps at the last batch seen

    def start(self, trainer: pl.Trainer) -> None:
        self.stepped_at = trainer.global_step

    def stepped(self, trainer: pl.Trainer) -> bool:
        """Call once per batch end; False while gradients are still accumulating."""
        if trainer.global_step == self.stepped_at:
            return False
        self.stepped_at = trainer.global_step
        return True


class StepCheckpoint(ModelCheckpoint):
    """A ``ModelCheckpoint`` whose saves inside an epoch come after an optimizer step only: with
    gradient accumulation (``trainer.accumulate_grad_batches``), a checkpoint written between
    micro-batches would resume without their gradients."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.steps = OptimizerSteps()

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_train_start(trainer, pl_module)
        self.steps.start(trainer)

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self.steps.stepped(trainer):
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)


def periodic_last_checkpoint(
    dirpath: str,
    every_n_minutes: float | None = 10.0,
    every_n_train_steps: int | None = None,
    filename: str = "last",
) -> ModelCheckpoint:
    """A ``ModelCheckpoint`` that rewrites ``{dirpath}/{filename}.ckpt`` every ``every_n_train_steps``
    optimizer steps when that is set, else every ``every_n_minutes`` of training.

    It complements the epoch-end ``last.ckpt`` (a separate callback, since Lightning takes one
    trigger per ``ModelCheckpoint``): with short epochs it only adds a write per interval, with
    long ones it bounds the work a killed run loses. The checkpoint holds the loop's position in the
    epoch, so resuming from it ends after the same number of optimizer steps as a run that was
    never stopped; it is written after an optimizer step (:class:`StepCheckpoint`), never in the
    middle of a gradient accumulation.
    """
    if every_n_train_steps is not None:
        trigger: dict[str, Any] = {"every_n_train_steps": every_n_train_steps}
    elif every_n_minutes is not None:
        trigger = {"train_time_interval": timedelta(minutes=every_n_minutes)}
    else:
        raise InputError(
            "callbacks.periodic_checkpoint needs every_n_minutes or every_n_train_steps; "
            "use callbacks.periodic_checkpoint=null to turn periodic checkpoints off"
        )
    return StepCheckpoint(
        dirpath=dirpath, filename=filename, monitor=None, save_top_k=1, enable_version_counter=False, **trigger
    )
