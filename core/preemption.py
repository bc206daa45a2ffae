"""Preemption: a run told to stop saves where it is and says so.

SLURM, Kubernetes and spot instances send SIGTERM some seconds before they kill a job. Lightning
notes the signal and ends the fit at the next step boundary (on every rank) by raising
``SIGTERMException``; :class:`PreemptionCheckpoint` then writes ``checkpoints/last.ckpt`` at that
step (atomically, the same kind ``ckpt_path=`` resumes from), and the runner ends the process
with :data:`PREEMPTED_EXIT` (143, 128 + SIGTERM, what a shell reports for a job ended by the
signal), so a scheduler that reads the exit status does not take the run for finished. Resuming
continues at that step: the translation batches of the interrupted epoch are not repeated (the
datamodule keeps its position in the epoch in the checkpoint). Under SLURM, Lightning's own
``SLURMEnvironment(auto_requeue=True)`` also answers SIGUSR1 (``#SBATCH --signal=SIGUSR1@90``):
it saves and requeues the job, which resumes from that checkpoint by itself.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities.exceptions import SIGTERMException

log = logging.getLogger(__name__)

PREEMPTED_EXIT = 143


class Preempted(SystemExit):
    """The run stopped on SIGTERM after saving ``path``; exits with :data:`PREEMPTED_EXIT`."""

    def __init__(self, path: Path | None, step: int) -> None:
        super().__init__(PREEMPTED_EXIT)
        self.path, self.step = path, step


class PreemptionCheckpoint(pl.Callback):
    """On SIGTERM during ``fit``, save ``last.ckpt`` at the current step in ``dirpath`` (the run's
    checkpoint directory)."""

    def __init__(self, dirpath: str | Path) -> None:
        self.dirpath = Path(dirpath)
        self.saved: Path | None = None

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if not isinstance(exception, SIGTERMException) or trainer.state.fn != TrainerFn.FITTING:
            return
        path = self.dirpath / "last.ckpt"
        trainer.save_checkpoint(path)
        self.saved = path
        if trainer.is_global_zero:
            log.warning(
                "preempted (SIGTERM) at step %d: saved %s; resume with ckpt_path=%s; exiting with status %d",
                trainer.global_step, path, path, PREEMPTED_EXIT,
            )


def fit_or_preempt(trainer: pl.Trainer, callback: PreemptionCheckpoint, **fit_kwargs: Any) -> None:
    """``trainer.fit(**fit_kwargs)``; on SIGTERM, :class:`Preempted` once the checkpoint is saved."""
    try:
        trainer.fit(**fit_kwargs)
    except SIGTERMException:
        raise Preempted(callback.saved, trainer.global_step) from None
