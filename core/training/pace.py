"""What a run's budget holds, for rules that size the batch from it (``data.max_tokens=auto``,
``data.batch_size=auto``): the seconds ``max_time`` leaves, the items its epochs train, and the
measured pace of training steps on the run's device and precision."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import lightning.pytorch as pl
import torch

from core.training.budget import wall_clock_timer

PROBE_STEPS = 3  # timed forward/backward passes, after one untimed warm-up pass


def time_budget(trainer: pl.Trainer) -> float | None:
    """The seconds of training ``trainer.max_time`` leaves, None without a time bound."""
    timer = wall_clock_timer(trainer)
    return None if timer is None else timer.time_remaining("train")


def epoch_budget(trainer: pl.Trainer, epoch_items: float) -> float | None:
    """Items (tokens, images) of the epochs ``trainer.max_epochs`` has left, None without an
    epoch bound."""
    epochs = trainer.max_epochs
    if epochs is None or epochs < 0:
        return None
    return max(0, epochs - trainer.current_epoch) * float(epoch_items)


def measure_pace(module: pl.LightningModule, trainer: pl.Trainer, loss: Callable[[], torch.Tensor], items: int) -> float:
    """Items per second of forward and backward passes of ``loss()`` (which computes the loss of
    one batch of ``items`` items with ``module``): one warm-up pass, then :data:`PROBE_STEPS`
    timed, in the trainer's precision. The random state is restored and the gradients cleared,
    so training starts as it would have."""
    on_gpu = module.device.type == "cuda"
    with torch.random.fork_rng(devices=[module.device] if on_gpu else []):
        start = 0.0
        for step in range(PROBE_STEPS + 1):
            if step == 1:
                if on_gpu:
                    torch.cuda.synchronize(module.device)
                start = time.perf_counter()
            with trainer.precision_plugin.train_step_context():
                value = loss()
            value.backward()
        if on_gpu:
            torch.cuda.synchronize(module.device)
        seconds = time.perf_counter() - start
    module.zero_grad(set_to_none=True)
    return PROBE_STEPS * items / max(seconds, 1e-9)


@dataclass(frozen=True)
class Budget:
    """What a run's bounds allow: ``by_epochs`` items the remaining epochs train, ``by_time`` items
    the remaining seconds train at the measured pace (None without that bound), ``seconds`` left,
    and the batch size ``probed`` the pace was measured at."""

    by_epochs: float | None
    by_time: float | None
    seconds: float | None
    probed: int

    @property
    def items(self) -> float | None:
        """The smaller of the two, None when neither bounds the run (``max_steps`` alone)."""
        bounds = [items for items in (self.by_epochs, self.by_time) if items is not None]
        return min(bounds) if bounds else None

    def sources(self, epochs: str, pace: Callable[[float], str]) -> str:
        """Where the budget comes from, for the log line: ``epochs`` (e.g. "2 epochs of 4,200
        tokens") when the epochs bound it, and ``pace(items per second)`` after the seconds (e.g.
        "2,600 tokens/s (measured on 2048-token batches)") when the time does."""
        parts = []
        if self.by_epochs is not None:
            parts.append(epochs)
        if self.by_time is not None and self.seconds is not None:
            parts.append(f"{self.seconds:.0f} s at {pace(self.by_time / self.seconds)}")
        return " or ".join(parts)


def run_budget(
    trainer: pl.Trainer, epoch_items: float, pace_at: Callable[[int], float], probe: int, choose: Callable[[float], int]
) -> Budget:
    """The run's :class:`Budget` in items (tokens, images). Under ``max_time`` the pace is
    ``pace_at(batch)`` items per second, measured at ``probe`` and again at the batch ``choose``
    picks for the budget when that is more than twice the probe (a device that is faster on
    larger batches)."""
    by_epochs, seconds = epoch_budget(trainer, epoch_items), time_budget(trainer)
    by_time = None
    if seconds is not None:
        by_time = seconds * pace_at(probe)
        candidate = choose(min(by_time, by_epochs if by_epochs is not None else math.inf))
        if candidate > 2 * probe:
            probe = candidate
            by_time = seconds * pace_at(probe)
    return Budget(by_epochs, by_time, seconds, probe)
