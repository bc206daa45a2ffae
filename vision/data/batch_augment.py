"""Training augmentation of a whole batch on the batch's device (``data.augment_on=device``).

The loader hands over uint8 images of the model's size (:func:`vision.data.transforms.uint8_transform`:
RGB, resize, and RandAugment when it is on, whose PIL ops have no batched form here); on the
device, per image but as batched tensor ops: the CIFAR recipe's pad-and-crop and horizontal flip,
``/ 255`` and normalization, then timm's random erasing. Mixup/CutMix follow in the classifier's
training step as before. The outputs have the distribution of
:func:`vision.data.transforms.train_transform` with ``crop="pad"``
(tests/vision/test_batch_augment.py compares the two); with RandAugment on, its ops come before
the crop instead of after it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from vision.data.transforms import SharedErasing, SharedValue


class PadCropFlip:
    """torchvision's ``RandomCrop(size, padding)`` (zero fill) followed by
    ``RandomHorizontalFlip(hflip)``, drawn independently for every image and applied as one
    gather: each image is shifted by an offset uniform in ``[0, 2 * padding]`` along each axis of
    its zero-padded copy, and mirrored with probability ``hflip``."""

    def __init__(self, padding: int, hflip: float = 0.5) -> None:
        self.padding = padding
        self.hflip = hflip

    def __call__(self, images: Tensor) -> Tensor:
        """Images [B, C, H, W] (any dtype) -> cropped and flipped images [B, C, H, W]."""
        batch, channels, height, width = images.shape
        pad, device = self.padding, images.device
        padded = F.pad(images, (pad, pad, pad, pad))  # [B, C, H + 2p, W + 2p]
        top = torch.randint(0, 2 * pad + 1, (batch, 1), device=device)
        left = torch.randint(0, 2 * pad + 1, (batch, 1), device=device)
        flip = torch.rand(batch, 1, device=device) < self.hflip
        rows = top + torch.arange(height, device=device)  # [B, H]
        columns = torch.arange(width, device=device)
        columns = left + torch.where(flip, width - 1 - columns, columns)  # [B, W], mirrored where flipped
        image_index = torch.arange(batch, device=device)[:, None, None, None]
        channel_index = torch.arange(channels, device=device)[None, :, None, None]
        return padded[image_index, channel_index, rows[:, None, :, None], columns[:, None, None, :]]


class BatchAugment:
    """The device's share of the training augmentation: uint8 images [B, C, H, W] -> pad-crop and
    flip (:class:`PadCropFlip`, padding ``img_size // 8`` as in the CIFAR recipe), float in [0, 1],
    normalized by ``mean`` / ``std``, then random erasing (Zhong et al. 2020; timm's, per-pixel
    normal noise) with probability ``re_prob``, which a :class:`SharedValue` may change while the
    run goes."""

    def __init__(
        self,
        img_size: int,
        mean: Sequence[float],
        std: Sequence[float],
        hflip: float = 0.5,
        re_prob: float | SharedValue = 0.0,
    ) -> None:
        self.crop_flip = PadCropFlip(img_size // 8, hflip)
        self.mean = torch.tensor(mean)[:, None, None]  # [C, 1, 1]
        self.std = torch.tensor(std)[:, None, None]
        probability = re_prob if isinstance(re_prob, SharedValue) else SharedValue(re_prob)
        self.erasing = SharedErasing(probability, mode="pixel", device="cpu")

    def __call__(self, images: Tensor) -> Tensor:
        """uint8 images [B, C, H, W] -> augmented, normalized float32 images [B, C, H, W]."""
        if self.mean.device != images.device:  # moved once, not copied to the device every batch
            self.mean, self.std = self.mean.to(images.device), self.std.to(images.device)
        images = self.crop_flip(images).float().div(255)
        images = images.sub(self.mean).div(self.std)
        self.erasing.device = images.device  # the noise is drawn where the batch is
        return self.erasing(images)
