"""Using a trained checkpoint: rebuild the classifier and preprocess image files the way it was
evaluated."""

from __future__ import annotations

from pathlib import Path

import torch
from PIL import Image, UnidentifiedImageError
from torch import Tensor

from core import load_module
from vision.module import ImageClassifier
from vision.transforms import eval_transform


def load_classifier(checkpoint: str | Path, device: str = "cpu") -> ImageClassifier:
    """The classifier of a training checkpoint (``weights_only=True``), in eval mode."""
    return load_module(ImageClassifier, checkpoint, map_location=device).to(device)


def load_image(path: str | Path) -> Image.Image:
    """An image file as RGB, with an error naming the file when it is missing or unreadable."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image {path} does not exist")
    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except (UnidentifiedImageError, OSError) as error:
        raise ValueError(f"{path} is not a readable image ({error})") from None


def preprocess(classifier: ImageClassifier, images: list[Image.Image]) -> Tensor:
    """Images -> the normalized batch [B, 3, H, W] at the model's size, on its device."""
    hparams = classifier.hparams
    transform = eval_transform(classifier.net.img_size, hparams.mean, hparams.std)
    batch = torch.stack([transform(image) for image in images])
    return batch.to(classifier.device)


@torch.no_grad()
def top_k(classifier: ImageClassifier, batch: Tensor, k: int = 5) -> list[list[tuple[str, float]]]:
    """The ``k`` most probable (class name, probability) pairs of each image in ``batch``; all
    classes when ``k`` exceeds their number."""
    if k < 1:
        raise ValueError(f"top_k needs k >= 1 classes per image, got k={k}")
    probabilities = classifier.net(batch).softmax(dim=-1)
    values, indices = probabilities.topk(min(k, probabilities.shape[-1]), dim=-1)
    names = classifier.hparams.class_names
    return [
        [(names[index], float(value)) for value, index in zip(row_values.tolist(), row_indices.tolist())]
        for row_values, row_indices in zip(values, indices)
    ]
