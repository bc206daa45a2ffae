"""Learning-rate schedules shared by both heads, as multipliers for ``LambdaLR``.

They are small classes rather than closures so that a scheduler's state dict (and so a
checkpoint) holds only plain numbers.
"""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


class WarmupCosine:
    """Linear warmup to the base rate over ``warmup_steps``, then a half cosine down to
    ``min_ratio`` times the base rate at ``total_steps`` (the ViT / DeiT recipe)."""

    def __init__(self, warmup_steps: int, total_steps: int, min_ratio: float = 0.0) -> None:
        if total_steps <= 0:
            raise ValueError(f"total_steps must be positive, got {total_steps}")
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.min_ratio = min_ratio

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps))
        return self.min_ratio + (1.0 - self.min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


class InverseSqrt:
    """Section 5.3: ``lrate = d^-0.5 * min(step^-0.5, step * warmup^-1.5)``, normalized to peak
    at 1.0 after ``warmup_steps``: ``min(step / warmup, sqrt(warmup / step))``.

    The paper's absolute rate is recovered with base lr ``(d_model * warmup_steps) ** -0.5``.
    """

    def __init__(self, warmup_steps: int) -> None:
        if warmup_steps <= 0:
            raise ValueError(f"warmup_steps must be positive, got {warmup_steps}")
        self.warmup_steps = warmup_steps

    def __call__(self, step: int) -> float:
        step = step + 1
        return min(step / self.warmup_steps, math.sqrt(self.warmup_steps / step))


def warmup_cosine(optimizer: Optimizer, warmup_steps: int, total_steps: int, min_ratio: float = 0.0) -> LambdaLR:
    """A per-step scheduler following :class:`WarmupCosine`."""
    return LambdaLR(optimizer, WarmupCosine(warmup_steps, total_steps, min_ratio))


def inverse_sqrt(optimizer: Optimizer, warmup_steps: int) -> LambdaLR:
    """A per-step scheduler following :class:`InverseSqrt`."""
    return LambdaLR(optimizer, InverseSqrt(warmup_steps))
