"""The skeleton of the rules that size a training batch from the run's budget
(``data.batch_size=auto`` of vision, ``data.max_tokens=auto`` of nlp): each head states its own
rule as a :class:`BatchRule` (its constants, units and words); :func:`choose_batch` measures the
budget (:func:`core.training.pace.run_budget`), applies the rule, makes every process take the
first one's choice and logs it, and :class:`ChosenBatch` keeps the choice of a run in its
checkpoints, so that a resumed run batches as the interrupted one did.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl

from core.constraints import AUTO
from core.training.pace import run_budget

log = logging.getLogger(__name__)


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
