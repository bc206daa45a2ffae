"""How much a run regularizes, from how long it trains, and which crop suits the image size.

The regularizers of the from-scratch ViT recipes (RandAugment, random erasing, Mixup/CutMix,
stochastic depth; DeiT, Lee et al. 2021) are sized for 100 to 300 epochs: they trade slower
fitting for less overfitting, which pays only when the run is long enough to overfit, in epochs
(the same images seen again and again), and long enough to fit at all, in optimizer steps (a ViT
from scratch needs thousands of updates). Short of either they hold the model back: 3 epochs on
a 10-class folder of small photos reached 55% with them, 78% without; 30 epochs of the 1,258
scikit-learn digits (570 steps) reached 75% with the light regularization of 30 epochs, 91%
without. So every config value left at ``auto`` follows :func:`regularization`:

- up to ``START_EPOCHS`` (10) planned epochs or ``START_STEPS`` (2,000) planned steps: none;
- RandAugment and stochastic depth grow from 10 epochs, Mixup/CutMix and random erasing (the
  ones that slow fitting most) from ``MIX_START_EPOCHS`` (30), each linearly in log(epochs),
  and all of them no faster than linearly in log(steps) from 2,000 to ``FULL_STEPS`` (20,000);
- from ``FULL_EPOCHS`` (100) and 20,000 steps on: the full recipe (RandAugment m9, random erasing
  0.25, Mixup 0.8, CutMix 1.0, drop path 0.1), the one ``experiment=cifar10_vit`` also sets.

CIFAR-10 at batch 128 takes 391 steps an epoch, so there the epochs decide (30 epochs: 11,700
steps); a small folder is held back by its steps.

The classifier (:meth:`vision.module.ImageClassifier.follow_plan`) reads the run's plan
(:func:`core.training.plan.budget.run_plan`: planned epochs and steps, the same on every process) at
the start of every epoch and hands the result to itself and to the datamodule; a ``max_time`` run
follows its plan from the moment its first steps are timed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.training.plan.lengths import ramp

START_EPOCHS = 10.0
MIX_START_EPOCHS = 30.0
FULL_EPOCHS = 100.0
START_STEPS = 2000.0
FULL_STEPS = 20000.0
# The full-length values, reached at FULL_EPOCHS.
FULL_POLICY = "rand-m9-n2-mstd0.5-inc1-mmax9"  # RandAugment m9, 2 ops; mmax9 keeps posterize >= 1 bit
FULL_RE_PROB = 0.25
FULL_MIXUP_ALPHA = 0.8
FULL_CUTMIX_ALPHA = 1.0
FULL_DROP_PATH = 0.1
# Images up to this side are padded and cropped (the CIFAR recipe); a random resized crop that
# may keep 8% of the area would leave a handful of pixels of them.
PAD_CROP_MAX_SIZE = 64


@dataclass(frozen=True)
class Regularization:
    """Regularization strengths for one run length."""

    rand_augment: float  # fraction of FULL_POLICY's magnitudes; 0 = off
    re_prob: float  # random erasing probability
    mixup_alpha: float  # Mixup Beta(alpha, alpha); 0 = off
    cutmix_alpha: float  # CutMix Beta(alpha, alpha); 0 = off
    drop_path: float  # stochastic depth of the last layer


def regularization(epochs: float, steps: float = math.inf) -> Regularization:
    """The regularization of a run of ``epochs`` planned epochs and ``steps`` planned optimizer
    steps (see the module docstring)."""
    fitted = ramp(steps, START_STEPS, FULL_STEPS)
    augment = min(ramp(epochs, START_EPOCHS, FULL_EPOCHS), fitted)
    mixing = min(ramp(epochs, MIX_START_EPOCHS, FULL_EPOCHS), fitted)
    return Regularization(
        rand_augment=augment,
        re_prob=FULL_RE_PROB * mixing,
        mixup_alpha=FULL_MIXUP_ALPHA * mixing,
        cutmix_alpha=FULL_CUTMIX_ALPHA * mixing,
        drop_path=FULL_DROP_PATH * augment,
    )


def crop_for(img_size: int) -> str:
    """``pad`` for images up to ``PAD_CROP_MAX_SIZE`` pixels, ``random_resized`` above."""
    return "pad" if img_size <= PAD_CROP_MAX_SIZE else "random_resized"
