"""``data.batch_size=auto``: the images of a training batch, sized from the run's budget.

The rule: all data-parallel processes together take ``B = sqrt(I / 8)`` images a step, rounded
down to a power of two and at least :data:`MIN_BATCH`, where ``I`` is the number of images the
budget will train, so the run takes ``I / B`` optimizer steps, about ``8 B``: batch and updates
grow together, each as the square root of the budget (the rule of ``data.max_tokens=auto``,
:mod:`nlp.data.batch_size`, in images). Each process takes ``B / world_size`` (a power of two, at
least 2), at most :data:`MAX_PER_PROCESS` (timm's default batch, and the CIFAR ViT recipe's of
Lee et al. 2021) and at most its share of the training images. ``I`` is the smaller of
``max_epochs`` times the training images and, for ``max_time``, the measured pace (images per
second of forward and backward passes on the run's device and precision) times the seconds; with
neither bound (``max_steps`` alone) each process takes :data:`MAX_PER_PROCESS`.

Why: a ViT trained from scratch needs many updates, so a short run is spent best on small
batches, a long one on larger, less noisy ones (the critical batch grows as training goes,
McCandlish et al. 2018). Measured on 2 CPU cores with a 0.55M-parameter ViT (BENCHMARKS.md): at 3
epochs of 3,500 MNIST digits (10,500 images, ``B`` 32) batches of 32 reached 50.5% test accuracy
over 3 seeds where 64 reached 40.2%, and at 10 epochs of the 1,258 scikit-learn digits (``B`` 32)
68.9% where a plain loop at 64 reached 36.6%; 10 and 30 epochs of MNIST and 30 and 100 of the
digits (``B`` 64) keep the 64 that was measured there. CIFAR-10's
45,000 images reach 128 from 3 epochs on, on one device; on 8, 30 epochs give 32 images a process
and 100 give 64. The peak rate (``module.lr``) is not scaled with the batch. The choice is logged,
and kept in checkpoints so that a resumed run batches as the interrupted one did.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import lightning.pytorch as pl
import torch
import torch.nn.functional as F

from core.training.plan.batch_rule import BatchRule, choose_batch, measure_pace

MIN_BATCH = 32  # of all processes together
MAX_PER_PROCESS = 128
STEPS_PER_IMAGE = 8  # above the floor, a run takes about 8 optimizer steps per image of its batch
EVAL_BATCH = 128  # evaluation batches of an auto run (they do not change the results)
PROBE_BATCH = MIN_BATCH  # the pace is measured here first, and again at a larger choice


def power_of_two_below(value: float) -> int:
    """The largest power of two at most ``value`` (1 below 2)."""
    return 1 << max(0, int(math.floor(math.log2(value)))) if value >= 1 else 1


def batch_for_budget(budget_images: float) -> int:
    """The batch of all processes together: ``sqrt(budget_images / STEPS_PER_IMAGE)`` rounded
    down to a power of two, at least :data:`MIN_BATCH`."""
    return max(MIN_BATCH, power_of_two_below(math.sqrt(max(budget_images, 0.0) / STEPS_PER_IMAGE)))


def per_process(batch: int, world_size: int, train_images: int) -> int:
    """Each data-parallel process's share of a ``batch``: a power of two, at least 2, at most
    :data:`MAX_PER_PROCESS` and at most its share of the ``train_images``."""
    share = min(MAX_PER_PROCESS, power_of_two_below(batch / world_size))
    return max(2, min(share, power_of_two_below(train_images / world_size)))


def measure_image_pace(module: pl.LightningModule, trainer: pl.Trainer, img_size: int | Sequence[int], batch: int) -> float:
    """Training images per second of the classifier on ``batch`` random images of ``img_size``
    (the pace does not depend on what the pixels show)."""
    height, width = (img_size, img_size) if isinstance(img_size, int) else img_size
    noise = torch.Generator(module.device).manual_seed(0)  # leaves the training random state alone
    images = torch.randn(batch, 3, height, width, generator=noise, device=module.device)  # [B, 3, H, W]
    targets = torch.zeros(batch, dtype=torch.long, device=module.device)
    return measure_pace(module, trainer, lambda: F.cross_entropy(module(images), targets), batch)


def auto_batch_size(trainer: pl.Trainer, module: pl.LightningModule, train_images: int, img_size: int | Sequence[int]) -> int:
    """Each process's training batch for this run (the rule of the module docstring, through
    :func:`core.training.plan.batch_rule.choose_batch`); every process uses the first one's choice."""
    world = trainer.world_size
    rule = BatchRule(
        setting="data.batch_size",
        unit="images",
        probe=PROBE_BATCH,
        for_budget=lambda images: per_process(batch_for_budget(images), world, train_images),
        steps_only=per_process(MAX_PER_PROCESS * world, world, train_images),
        formula=lambda images, sources: (
            f"the power of two below sqrt({images:,.0f} images the budget trains / {STEPS_PER_IMAGE}), "
            f"at least {MIN_BATCH}, at most {MAX_PER_PROCESS} a process: {sources}"
        ),
        pace_words=lambda pace, probed: f"{pace / world:,.0f} images/s a process (measured on batches of {probed})",
    )
    return choose_batch(rule, trainer, train_images, lambda batch: world * measure_image_pace(module, trainer, img_size, batch))
