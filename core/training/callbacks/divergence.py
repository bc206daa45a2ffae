"""Runs that diverge stop and say so, and a loss spike can be survived.

A training loss that is not finite, or weights that are not, means the run has diverged: every
step after it would train on NaN. :class:`DivergenceGuard` checks the loss of each optimizer step
and the weights it left, reduced over the processes of a DDP job, so that every rank takes the
same decision at the same step. With ``spike_factor`` set, a loss above that many times the
median of the last ``window`` steps is a spike and counts as a fault too. A validation whose
metrics are not finite stops the run at once.

On a fault the run rewinds, as large runs do (PaLM, Chowdhery et al. 2022, section 5.1, restarted
from a checkpoint about 100 steps before a spike and skipped the 200-500 batches around it): the
weights and the optimizer's state go back to a copy of the last good step, kept in host memory
every ``every_n_steps`` steps, and training goes on with the batches after the one that failed,
so the batches since the copy are skipped. The learning-rate schedule is not rewound: it follows
the optimizer steps taken, which ``trainer.max_steps`` counts, rewound ones included, so a
budget's schedule still ends with the budget. After ``max_rewinds`` rewinds the next fault stops
the run with :class:`core.errors.TrainingDiverged`: the step, the last checkpoint with finite
weights and the fixes, in one line, exit status 3 (:mod:`core.training.runner` writes
``metrics.json`` first).

Nothing diverged is saved: the check runs before the checkpoint callbacks of the same step
(Lightning calls those last), a fault either restores good weights before they run or stops the
fit with an exception, on which no checkpoint of this project's configs is saved, and each check
covers the weights that a validation or epoch-end save after it would write.
"""

from __future__ import annotations

import copy
import logging
import math
import statistics
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.trainer.states import TrainerFn
from torch import Tensor, nn

from core.constraints import ABOVE_ONE, NON_NEGATIVE_INT, POSITIVE_INT, optional
from core.errors import InputError, TrainingDiverged

log = logging.getLogger(__name__)


class Stored(NamedTuple):
    """A tensor copied to host memory, and the device it goes back to."""

    tensor: Tensor
    device: torch.device


@dataclass
class GoodState:
    """The training state after optimizer step ``step``, whose loss and weights were finite."""

    step: int
    tensors: list[Tensor] = field(default_factory=list)  # the module's weights and float buffers, in order
    optimizers: list[dict[Tensor, dict[str, Any]]] = field(default_factory=list)  # per optimizer, per parameter


def state_tensors(module: nn.Module) -> list[Tensor]:
    """What a rewind restores of ``module``: its parameters and floating-point buffers."""
    return [*module.parameters(), *(buffer for buffer in module.buffers() if buffer.is_floating_point())]


def all_finite(tensors: list[Tensor]) -> Tensor:
    """Whether every element of ``tensors`` is finite, as a bool tensor left on their device (no
    wait for it here). A norm carries a NaN or an inf; it is taken in one fused pass per dtype (the
    kernel of ``torch.nn.utils.clip_grad_norm_``): the 2-norm, the fast one on CPUs, whose square
    overflows only for weights far beyond any trained model's, and in half precision the max norm,
    which cannot overflow."""
    groups: dict[tuple[torch.device, torch.dtype], list[Tensor]] = {}
    for tensor in tensors:
        groups.setdefault((tensor.device, tensor.dtype), []).append(tensor.detach())
    if not groups:
        return torch.tensor(True)
    device = tensors[0].device
    verdicts = [
        torch.stack(torch._foreach_norm(group, 2.0 if torch.finfo(dtype).bits >= 32 else math.inf)).isfinite().all().to(device)
        for (_, dtype), group in groups.items()
    ]
    return torch.stack(verdicts).all()


def host_copy(value: Any) -> Any:
    """``value`` with a tensor copied to host memory (:class:`Stored`); other values deep-copied."""
    if isinstance(value, Tensor):
        return Stored(value.detach().to("cpu", copy=True), value.device)
    return copy.deepcopy(value)


def step_loss(outputs: Any) -> Tensor | None:
    """The loss of a training batch from what ``training_step`` returned (a tensor or a mapping
    with ``loss``), None when the step returned none."""
    loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
    return loss.detach() if isinstance(loss, Tensor) else None


def last_good_checkpoint(trainer: pl.Trainer) -> str | None:
    """The newest checkpoint file of the run whose weights and monitored value are finite: the
    files the checkpoint callbacks wrote (the guard checked the weights of every step before them;
    a best checkpoint with a non-finite score is left out) or the checkpoint the run resumed from."""
    candidates = {trainer.ckpt_path} if trainer.ckpt_path else set()
    for callback in trainer.checkpoint_callbacks:
        if not isinstance(callback, ModelCheckpoint):
            continue
        candidates.update(path for path, score in callback.best_k_models.items() if bool(torch.isfinite(torch.as_tensor(score))))
        candidates.add(callback.last_model_path)
        if callback.monitor is None:
            candidates.add(callback.best_model_path)  # the one file such a callback rewrites
    existing = [Path(path) for path in candidates if path and Path(path).is_file()]
    return str(max(existing, key=lambda path: path.stat().st_mtime)) if existing else None


def fixes(trainer: pl.Trainer, pl_module: pl.LightningModule) -> str:
    """What to change before training again: the rate, the clipping, the precision."""
    lr = pl_module.hparams.get("lr")
    advice = [f"a lower module.lr (now {lr:g})" if isinstance(lr, (int, float)) else "a lower learning rate"]
    clip = trainer.gradient_clip_val
    advice.append(f"a lower trainer.gradient_clip_val (now {clip:g})" if clip else "clipped gradients (trainer.gradient_clip_val=1.0)")
    precision = str(trainer.precision)
    if precision not in ("32-true", "64-true"):
        other = "bf16-mixed or 32-true" if precision.startswith("16") else "32-true"
        advice.append(f"trainer.precision={other} (now {precision})")
    return ", ".join(advice[:-1]) + " or " + advice[-1]


class DivergenceGuard(pl.Callback):
    """Stops a diverging run at once and rewinds past loss spikes (see the module's text).

    Args:
        max_rewinds: faults survived by going back to the last good copy; the next one stops the
            run (0: the first fault stops it, and no copies are kept).
        every_n_steps: optimizer steps between copies of the good state (weights and optimizer
            state, in host memory); a rewind skips the batches since the copy.
        spike_factor: a loss above this multiple of the median of the last ``window`` steps is a
            spike (null, the default: only a non-finite loss or weights are faults). Healthy runs
            on real data stay below 1.4x the median of 50 steps, but a model that fits its data
            to a loss near 0 sees batches at 50x it (docs/errors.md, Diverging runs), so no factor
            is safe for every run; 4 suits long runs whose loss stays well above 0.
        window: steps in that median; no spike is judged before it is full.
    """

    def __init__(
        self, max_rewinds: int = 3, every_n_steps: int = 100, spike_factor: float | None = None, window: int = 50
    ) -> None:
        NON_NEGATIVE_INT.require(max_rewinds, "callbacks.divergence.max_rewinds", InputError)
        POSITIVE_INT.require(every_n_steps, "callbacks.divergence.every_n_steps", InputError)
        optional(ABOVE_ONE).require(spike_factor, "callbacks.divergence.spike_factor", InputError)
        POSITIVE_INT.require(window, "callbacks.divergence.window", InputError)
        self.max_rewinds, self.every_n_steps = max_rewinds, every_n_steps
        self.spike_factor, self.window = spike_factor, window
        self.rewinds = 0
        self.good: GoodState | None = None
        self.checked_step = 0
        self.losses: list[Tensor] = []  # of the batches since the last optimizer step
        self.history: deque[float] = deque(maxlen=window)

    def state_dict(self) -> dict[str, Any]:
        """The rewinds so far, kept in checkpoints: ``max_rewinds`` is per run, resumes included."""
        return {"rewinds": self.rewinds}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """The rewinds of the run before this resume."""
        self.rewinds = int(state_dict.get("rewinds", 0))

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """The state the run starts from (fresh or resumed) is the first good one."""
        self.checked_step, self.losses, self.history = trainer.global_step, [], deque(maxlen=self.window)
        self.good = self.snapshot(trainer, pl_module) if self.max_rewinds else None

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """After each optimizer step: keep a copy when one is due, rewind or stop on a fault."""
        loss = step_loss(outputs)
        if loss is not None:  # Lightning hands over the loss divided by accumulate_grad_batches
            self.losses.append(loss * trainer.accumulate_grad_batches)
        if trainer.global_step == self.checked_step:
            return  # gradients are still accumulating: the optimizer has not stepped
        self.checked_step = trainer.global_step
        losses, self.losses = self.losses, []
        fault = self.fault(trainer, pl_module, losses)
        if fault is not None:
            self.survive_or_stop(trainer, pl_module, fault)
        elif self.good is not None and trainer.global_step - self.good.step >= self.every_n_steps:
            self.good = self.snapshot(trainer, pl_module)
        pl_module.log("train/rewinds", float(self.rewinds))

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """A validation metric that is not finite (weights finite, but so large that the outputs
        overflow) stops the run before the checkpoints of this validation are saved. It does not
        rewind: those checkpoints would file the restored weights under this validation's values."""
        if trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING:
            return
        metrics = {key: value for key, value in trainer.callback_metrics.items() if key.startswith("val/")}
        broken = [f"{key}={float(value)}" for key, value in metrics.items() if not bool(torch.isfinite(value).all())]
        if trainer.strategy.reduce_boolean_decision(bool(broken), all=False):  # any rank
            self.stop(trainer, pl_module, f"the validation gave {', '.join(broken) or 'non-finite values on another process'}")

    def survive_or_stop(self, trainer: pl.Trainer, pl_module: pl.LightningModule, fault: str) -> None:
        """Rewind while rewinds are left, else stop the run."""
        if self.good is not None and self.rewinds < self.max_rewinds:
            self.rewind(trainer, pl_module, fault)
        else:
            self.stop(trainer, pl_module, fault)

    def fault(self, trainer: pl.Trainer, pl_module: pl.LightningModule, losses: list[Tensor]) -> str | None:
        """What is wrong with the step just taken, None when nothing is. One value crosses the
        processes (mean loss, share of ranks with non-finite weights) and leaves the device."""
        device = pl_module.device
        loss = torch.stack(losses).float().mean().to(device) if losses else torch.zeros((), device=device)
        bad_weights = (~all_finite(state_tensors(pl_module))).float().to(device)
        loss_value, bad_share = trainer.strategy.reduce(torch.stack([loss, bad_weights]), reduce_op="mean").tolist()
        if not math.isfinite(loss_value):
            return f"the training loss is {loss_value}"
        if bad_share > 0:
            return "the weights hold NaN or inf values"
        if not losses:
            return None
        median = statistics.median(self.history) if len(self.history) == self.window else 0.0
        if self.spike_factor is not None and median > 0 and loss_value > self.spike_factor * median:
            return (
                f"the training loss spiked to {loss_value:.4g}, {loss_value / median:.1f}x the median {median:.4g} of "
                f"the last {self.window} steps (callbacks.divergence.spike_factor={self.spike_factor:g})"
            )
        self.history.append(loss_value)
        return None

    def snapshot(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> GoodState:
        """The current state, in host memory."""
        return GoodState(
            trainer.global_step,
            [host_copy(tensor).tensor for tensor in state_tensors(pl_module)],
            [
                {param: {key: host_copy(value) for key, value in entries.items()} for param, entries in optimizer.state.items()}
                for optimizer in trainer.optimizers
            ],
        )

    @torch.no_grad()
    def rewind(self, trainer: pl.Trainer, pl_module: pl.LightningModule, fault: str) -> None:
        """Put the good state back in place (the same tensors, so DDP and the optimizers keep
        their references; the optimizer state as copies, so the steps after it leave the good state
        as it was for the next rewind); the loop goes on with the next batch."""
        assert self.good is not None
        self.rewinds += 1
        for tensor, saved in zip(state_tensors(pl_module), self.good.tensors, strict=True):
            tensor.copy_(saved)
        for optimizer, saved in zip(trainer.optimizers, self.good.optimizers, strict=True):
            optimizer.zero_grad(set_to_none=True)
            optimizer.state.clear()
            for param, entries in saved.items():
                optimizer.state[param] = {
                    key: value.tensor.to(value.device, copy=True) if isinstance(value, Stored) else copy.deepcopy(value)
                    for key, value in entries.items()
                }
        if trainer.is_global_zero:
            log.warning(
                "step %d: %s; rewound to the good state of step %d and skipped the batches of the %d steps since "
                "(rewind %d of %d, callbacks.divergence.max_rewinds)",
                trainer.global_step, fault, self.good.step, trainer.global_step - self.good.step,
                self.rewinds, self.max_rewinds,
            )

    def stop(self, trainer: pl.Trainer, pl_module: pl.LightningModule, fault: str) -> None:
        """Raise :class:`TrainingDiverged` on every process (they all found the fault)."""
        step = trainer.global_step
        checkpoint = last_good_checkpoint(trainer)
        plural = "s" if self.rewinds > 1 else ""
        after = f", after {self.rewinds} rewind{plural} to earlier good states (callbacks.divergence.max_rewinds)" if self.rewinds else ""
        where = (
            f"the last checkpoint with finite weights is {checkpoint}"
            if checkpoint
            else "no checkpoint with finite weights was saved"
        )
        raise TrainingDiverged(
            f"training diverged at step {step}: {fault}{after}; {where}; train again with {fixes(trainer, pl_module)}",
            step, fault, checkpoint, self.rewinds,
        )
