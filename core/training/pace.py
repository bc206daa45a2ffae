"""What a run's budget holds, for rules that size the batch from it (``data.max_tokens=auto``,
``data.batch_size=auto``): the seconds ``max_time`` leaves, the items its epochs train, and the
measured pace of training steps on the run's device and precision."""

from __future__ import annotations

import time
from collections.abc import Callable

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
