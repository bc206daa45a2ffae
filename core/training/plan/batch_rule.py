"""The rules that size a training batch from the run's budget (``data.batch_size=auto`` of
vision, ``data.max_tokens=auto`` of nlp). What the budget holds in items (tokens, images) comes
first: the seconds ``max_time`` leaves, the items its epochs train, and the measured pace of
training steps on the run's device and precision (:func:`run_budget`). Each head states its own
rule as a :class:`BatchRule` (its constants, units and words); :func:`choose_batch` measures the
budget, applies the rule, makes every process take the first one's choice and logs it, and
:class:`ChosenBatch` keeps the choice of a run in its checkpoints, so that a resumed run batches
as the interrupted one did.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import torch

from core.constraints import AUTO
from core.training.plan.budget import wall_clock_timer

log = logging.getLogger(__name__)

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
    timed, in the trainer's precision. The random state and the module's buffers (BatchNorm's
    running statistics) are restored and the gradients cleared, so training starts as it would
    have."""
    on_gpu = module.device.type == "cuda"
    buffers = {name: buffer.clone() for name, buffer in module.named_buffers()}
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
    with torch.no_grad():
        for name, buffer in module.named_buffers():
            buffer.copy_(buffers[name])
    return PROBE_STEPS * items / max(seconds, 1e-9)


@dataclass(frozen=True)
class ItemBudget:
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
) -> ItemBudget:
    """The run's :class:`ItemBudget` in items (tokens, images). Under ``max_time`` the pace is
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
    return ItemBudget(by_epochs, by_time, seconds, probe)



@dataclass(frozen=True)
class BatchRule:
    """One head's rule: a batch of ``for_budget(items)`` for a budget that trains ``items``, in
    ``unit``; each process's batch."""

    setting: str
    """The config key whose ``auto`` the rule resolves (``data.max_tokens``)."""

    unit: str
    """What a batch and the budget count (``tokens``, ``images``)."""

    probe: int
    """The batch the pace is measured at first, under ``max_time``."""

    for_budget: Callable[[float], int]
    """The batch for a budget that trains that many items."""

    steps_only: int
    """The batch with neither an epoch nor a time bound (``max_steps`` alone)."""

    formula: Callable[[float, str], str]
    """The rule in words for the log line, from the budget's items and where they come from."""

    pace_words: Callable[[float, int], str]
    """The measured pace in words, from the items per second and the batch it was measured at."""


def choose_batch(rule: BatchRule, trainer: pl.Trainer, epoch_items: int, pace_at: Callable[[int], float]) -> int:
    """The training batch ``rule`` gives for this run: ``epoch_items`` are the items of an epoch,
    ``pace_at(batch)`` the items per second trained at a batch (measured only under
    ``max_time``). Every process uses the first one's choice, which is logged."""
    budget = run_budget(trainer, epoch_items, pace_at, rule.probe, rule.for_budget)
    chosen = rule.steps_only if budget.items is None else rule.for_budget(budget.items)
    chosen = trainer.strategy.broadcast(chosen, src=0)
    if budget.items is None:
        reason = "no epoch or time budget (max_steps alone)"
    else:
        sources = budget.sources(
            f"{trainer.max_epochs} epochs of {epoch_items:,} {rule.unit}", lambda pace: rule.pace_words(pace, budget.probed)
        )
        reason = rule.formula(budget.items, sources)
    world = trainer.world_size
    processes = f" per process ({world} processes)" if world > 1 else ""
    log.info("%s=auto: batches of %d %s%s, %s", rule.setting, chosen, rule.unit, processes, reason)
    return chosen


class ChosenBatch:
    """A datamodule's training batch setting: a number, or ``auto``, resolved once a run by the
    head's rule and kept in the datamodule's state (``state_key`` in checkpoints)."""

    def __init__(self, setting: int | str, state_key: str) -> None:
        self.auto = setting == AUTO
        self.value: int | None = None if self.auto else int(setting)
        self.state_key = state_key

    def resolve(self, trainer: pl.Trainer | None, choose: Callable[[pl.Trainer], int], without_trainer: int) -> int:
        """The batch: the number, or for ``auto`` the one ``choose(trainer)`` makes for the
        attached trainer (once); ``without_trainer`` before a trainer with a module is attached."""
        if self.value is None:
            if trainer is None or trainer.lightning_module is None:
                return without_trainer
            self.value = choose(trainer)
        return self.value

    def state_dict(self) -> dict[str, Any]:
        """The choice of an ``auto`` run, for the datamodule's ``state_dict``."""
        return {self.state_key: self.value} if self.auto else {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take the choice an interrupted ``auto`` run made."""
        if self.auto and state_dict.get(self.state_key):
            self.value = int(state_dict[self.state_key])
