"""Learning-rate schedules shared by both heads, as multipliers for ``LambdaLR``.

They are small classes rather than closures so that a scheduler's state dict (and so a
checkpoint) holds only plain numbers. Both are :class:`BudgetedSchedule` s: the run's budget
(``max_epochs``, ``max_steps`` or ``max_time``) sets their ``total_steps`` and caps their warmup
through :meth:`BudgetedSchedule.plan`, which :class:`core.training.plan.budget.TrainingBudget` calls when
training starts and, for a time budget, again as the measured step time refines the plan.
"""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from core.constraints import NON_NEGATIVE_INT, POSITIVE_INT, PROBABILITY, optional


class BudgetedSchedule:
    """A multiplier of the base rate over optimizer steps, laid over ``total_steps`` planned steps.

    ``requested_warmup`` is the configured warmup; ``warmup_steps`` the one in force, at most
    ``max_warmup_fraction`` of the planned steps once a plan is made. ``total_steps`` None means
    the length of the run is not known yet (the decay waits for it).
    """

    def __init__(self, warmup_steps: int, total_steps: int | None = None) -> None:
        NON_NEGATIVE_INT.require(warmup_steps, "warmup_steps")
        optional(POSITIVE_INT).require(total_steps, "total_steps")
        self.requested_warmup = warmup_steps
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps

    def plan(self, total_steps: int, max_warmup_fraction: float, step: int = 0) -> bool:
        """Lay the schedule over ``total_steps`` steps with the warmup capped to
        ``max_warmup_fraction`` of them; returns whether the requested warmup was shortened.

        ``step`` is the step the run is at when a time budget refines its plan: a warmup already
        over stays over, or a longer plan would take the rate back into its warmup."""
        self.total_steps = max(1, int(total_steps))
        warmup = min(self.requested_warmup, math.floor(max_warmup_fraction * self.total_steps))
        over = step + 1 >= self.warmup_steps  # the factor at step is (step + 1) / warmup_steps
        self.warmup_steps = min(warmup, self.warmup_steps) if over else warmup
        return self.warmup_steps < self.requested_warmup

    def warmup(self, step: int) -> float:
        """The linear warmup factor at 0-based ``step``: (step + 1) / warmup, 1 once it is over."""
        return min(1.0, (step + 1) / self.warmup_steps) if self.warmup_steps > 0 else 1.0


class WarmupCosine(BudgetedSchedule):
    """Linear warmup to the base rate over ``warmup_steps``, then a half cosine down to
    ``min_ratio`` times the base rate at ``total_steps`` (the ViT / DeiT recipe)."""

    def __init__(self, warmup_steps: int, total_steps: int | None, min_ratio: float = 0.0) -> None:
        super().__init__(warmup_steps, total_steps)
        self.min_ratio = min_ratio

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps or self.total_steps is None:
            return self.warmup(step)
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps))
        return self.min_ratio + (1.0 - self.min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


class InverseSqrt(BudgetedSchedule):
    """Section 5.3: ``lrate = d^-0.5 * min(step^-0.5, step * warmup^-1.5)``, normalized to peak
    at 1.0: ``min(step / warmup_steps, 1, sqrt(requested_warmup / step))``, which is the paper's
    ``min(step / warmup, sqrt(warmup / step))`` while the warmup is not shortened.

    The paper's absolute rate is recovered with base lr ``(d_model * requested_warmup) ** -0.5``.
    The decay is anchored at the requested warmup: when a short budget shortens the warmup, the
    rate reaches its peak sooner and holds it until the requested warmup step, then decays as it
    would have (``sqrt(requested_warmup / step)``), rather than decaying early from a peak reached
    in a few steps. With ``cooldown_fraction`` > 0 and a known ``total_steps``, the rate also falls
    linearly to 0 over the last ``cooldown_fraction`` of the planned steps, so the decay ends with
    the budget (0, the default, is the paper's schedule).
    """

    def __init__(self, warmup_steps: int, total_steps: int | None = None, cooldown_fraction: float = 0.0) -> None:
        POSITIVE_INT.require(warmup_steps, "warmup_steps")  # the inverse square root divides by it
        PROBABILITY.require(cooldown_fraction, "cooldown_fraction")
        super().__init__(warmup_steps, total_steps)
        self.cooldown_fraction = cooldown_fraction

    def __call__(self, step: int) -> float:
        rate = min(self.warmup(step), 1.0, math.sqrt(self.requested_warmup / (step + 1)))
        if self.total_steps is None or self.cooldown_fraction == 0.0:
            return rate
        cooldown = max(1.0, self.cooldown_fraction * self.total_steps)
        return rate * min(1.0, max(0.0, (self.total_steps - step) / cooldown))


def warmup_cosine(
    optimizer: Optimizer, warmup_steps: int, total_steps: int | None, min_ratio: float = 0.0
) -> LambdaLR:
    """A per-step scheduler following :class:`WarmupCosine`."""
    return LambdaLR(optimizer, WarmupCosine(warmup_steps, total_steps, min_ratio))


def inverse_sqrt(
    optimizer: Optimizer, warmup_steps: int, total_steps: int | None = None, cooldown_fraction: float = 0.0
) -> LambdaLR:
    """A per-step scheduler following :class:`InverseSqrt`."""
    return LambdaLR(optimizer, InverseSqrt(warmup_steps, total_steps, cooldown_fraction))
