"""Faults of a shared cluster: a run told to stop (preemption) saves where it is and says so, and
a process that fails under DDP ends the whole job rather than leave the others waiting.

SLURM, Kubernetes and spot instances send SIGTERM some seconds before they kill a job. Lightning
notes the signal and ends the fit at the next step boundary (on every rank) by raising
``SIGTERMException``; :class:`PreemptionCheckpoint` then writes ``checkpoints/last.ckpt`` at that
step (atomically, the same kind ``ckpt_path=`` resumes from), and the runner ends the process
with :data:`PREEMPTED_EXIT` (143, 128 + SIGTERM, what a shell reports for a job ended by the
signal), so a scheduler that reads the exit status does not take the run for finished. Resuming
continues at that step: the translation batches of the interrupted epoch are not repeated (the
datamodule keeps its position in the epoch in the checkpoint). Under SLURM, Lightning's own
``SLURMEnvironment(auto_requeue=True)`` also answers SIGUSR1 (``#SBATCH --signal=SIGUSR1@90``):
it saves and requeues the job, which resumes from that checkpoint by itself. A SIGTERM in the
evaluation after training (:func:`preempted_after_training`) exits with the same status, naming
the checkpoint to evaluate.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from filelock import FileLock, Timeout
from lightning.pytorch.strategies.launchers.subprocess_script import _SubprocessScriptLauncher
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities.exceptions import SIGTERMException

from core.errors import InputError
from core.files.atomic import megabytes, remove_leftovers
from core.training.callbacks.checkpoints import OptimizerSteps

log = logging.getLogger(__name__)

PREEMPTED_EXIT = 143


class Preempted(SystemExit):
    """The run stopped on SIGTERM after saving ``path``; exits with :data:`PREEMPTED_EXIT`."""

    def __init__(self, path: Path | None, step: int) -> None:
        super().__init__(PREEMPTED_EXIT)
        self.path, self.step = path, step


class PreemptionCheckpoint(pl.Callback):
    """On SIGTERM during ``fit``, save ``last.ckpt`` at the current step in ``dirpath`` (the run's
    checkpoint directory).

    A SIGTERM between the micro-batches of a gradient accumulation (``trainer.accumulate_grad_batches``)
    is held until the optimizer steps, at most that many batches minus one later: Lightning would
    stop after the batch it arrived in, and a run resumed there would start the accumulation
    again without the gradients of the micro-batches before it. The signal is held at this
    callback's batch end, so one that lands in the hooks after it (milliseconds of a batch) still
    stops mid-accumulation.

    A signal still held when training stops between micro-batches (a time budget's end) stays in
    :attr:`held`: Lightning would forget it as the evaluation starts, and the runner stops the
    evaluation with it instead (:func:`preempted_after_training`)."""

    def __init__(self, dirpath: str | Path) -> None:
        self.dirpath = Path(dirpath)
        self.saved: Path | None = None
        self.steps = OptimizerSteps()
        self.held = False  # a SIGTERM that arrived mid-accumulation, not yet passed on to Lightning

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.steps.start(trainer)

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self.steps.stepped(trainer):
            self.release(trainer)
            return
        signals = trainer._signal_connector  # Lightning stops after this hook when its received_sigterm is set
        self.held = self.held or signals.received_sigterm
        signals.received_sigterm = False

    def release(self, trainer: pl.Trainer) -> None:
        """Pass a held SIGTERM on to Lightning."""
        if self.held:
            trainer._signal_connector.received_sigterm, self.held = True, False

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
    """``trainer.fit(**fit_kwargs)``; on SIGTERM, :class:`Preempted` once the checkpoint is saved.

    When the fit fails in the process that launched the others (Lightning's own DDP launcher),
    those are killed before the error is raised: they would otherwise wait in their next
    collective until its timeout (30 minutes by default). A failing child is Lightning's to
    handle (its process observer kills every process), and torchrun's agent ends every worker of
    a job when one fails."""
    try:
        trainer.fit(**fit_kwargs)
    except SIGTERMException:
        raise Preempted(callback.saved, trainer.global_step) from None
    except BaseException:
        launcher = trainer.strategy.launcher
        if isinstance(launcher, _SubprocessScriptLauncher) and launcher.procs:
            log.error("the fit failed in rank 0: stopping the other processes")
            launcher.kill(signal.SIGKILL)
        raise


@contextmanager
def preempted_after_training(
    trainer: pl.Trainer, checkpoint: str, evaluate_command: str, held: bool = False
) -> Iterator[None]:
    """Around the evaluation that follows training (a final validation, the test): a SIGTERM there
    ends the run as one during training does, with :class:`Preempted` (status
    :data:`PREEMPTED_EXIT`, no traceback) and a warning that names ``checkpoint``, the weights the
    test was to evaluate, and how to evaluate them (``evaluate_command``). ``held``: a SIGTERM
    came at the end of training (:attr:`PreemptionCheckpoint.held`); the evaluation does not start."""
    try:
        if held:
            raise SIGTERMException
        yield
    except SIGTERMException:
        if trainer.is_global_zero:
            weights = f"evaluate {checkpoint} with {evaluate_command} ckpt_path={checkpoint}" if checkpoint else "no checkpoint was saved"
            log.warning(
                "preempted (SIGTERM) after training ended at step %d, before its evaluation: %s; exiting with status %d",
                trainer.global_step, weights, PREEMPTED_EXIT,
            )
        raise Preempted(Path(checkpoint) if checkpoint else None, trainer.global_step) from None


def launching_process() -> bool:
    """Whether this process is the first of its job (global rank 0 as the launch environment
    says: torchrun's ``RANK``, SLURM's ``SLURM_PROCID``, Lightning's ``LOCAL_RANK`` / ``NODE_RANK``),
    which alone claims the run directory."""
    return all(os.environ.get(name, "0") == "0" for name in ("RANK", "SLURM_PROCID", "LOCAL_RANK", "NODE_RANK"))


@contextmanager
def run_directory_claimed(output_dir: Path) -> Iterator[None]:
    """Hold ``output_dir/.run.lock`` for the run, so that a second run started on the same
    directory (a job launched twice) is refused at once instead of writing the same
    ``last.ckpt``; the other processes of this job do not claim it. Once the lock is held, the
    temporary files of checkpoint writes in ``output_dir/checkpoints`` can only be those of a run
    killed while writing (each as large as a checkpoint): they are removed."""
    if not launching_process():
        yield
        return
    output_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(output_dir / ".run.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise InputError(
            f"{output_dir} is in use by another run that is still going; wait for it to end (then resume with "
            f"ckpt_path={output_dir / 'checkpoints' / 'last.ckpt'}) or choose another hydra.run.dir"
        ) from None
    if leftovers := remove_leftovers(output_dir / "checkpoints", ".ckpt"):
        log.warning(
            "removed %d temporary checkpoint file(s) of %s that a killed run left in %s",
            len(leftovers), megabytes(sum(leftovers.values())), output_dir / "checkpoints",
        )
    try:
        yield
    finally:
        lock.release()
