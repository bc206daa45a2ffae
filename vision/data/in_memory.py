"""Images held decoded in memory (``data.in_memory``): every image of a split is read once at setup,
brought to the model's size by its split's resize (the training resize of the pad-crop recipe, or
the evaluation resize and center crop), and kept as one uint8 array; each item then applies the
split's own transform to that copy, so no file is opened or decoded again while training.

The transforms see the same pixels as when reading the files: Pillow returns a copy for a resize
to the size an image already has, and a center crop to the whole image is the image itself
(tests/vision/test_in_memory.py compares the two item by item). Small images make the loader's
per-image decode its largest cost on a few CPU cores (about 0.3 ms of 0.7 ms per 32 px PNG, resize
and augmentation included, against a few microseconds to copy it out of memory).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from PIL import Image
from torch.utils.data import Dataset

# Largest size of the held arrays of all splits together under data.in_memory=auto, per process:
# 700,000 images at 32 px, 175,000 at 64 px.
IN_MEMORY_MAX_BYTES = 2 * 1024**3


def held_bytes(count: int, img_size: int | Sequence[int]) -> int:
    """Bytes of ``count`` RGB uint8 images of side ``img_size`` (or (height, width))."""
    height, width = (img_size, img_size) if isinstance(img_size, int) else img_size
    return count * height * width * 3


class InMemoryImages(Dataset):
    """Decoded images ``images`` [N, H, W, 3] uint8 and the ``samples`` they were read from
    ((path, target) pairs, as torchvision's ``ImageFolder`` lists them); an item is
    ``transform(image)`` on the held copy as a PIL image, and its target."""

    def __init__(
        self, images: np.ndarray, samples: list[tuple[str, int]], transform: Callable[[Image.Image], Any]
    ) -> None:
        self.images = images
        self.samples = samples
        self.targets = [target for _, target in samples]
        self.transform = transform

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        return self.transform(Image.fromarray(self.images[index])), self.targets[index]
