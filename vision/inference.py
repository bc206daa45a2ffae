"""Using a trained checkpoint: read the classifier (:func:`vision.module.load_classifier`) and preprocess image files exactly as its
datamodule preprocessed the validation and test images (timm keeps the data config with the
weights; so do our checkpoints)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from PIL import Image
from torch import Tensor
from torchvision import transforms as T

from core.errors import InputError
from vision.data.folder import UNREADABLE, error_reason, read_image, unreadable_reason
from vision.module import ImageClassifier, load_classifier
from vision.data.transforms import eval_transform

# The evaluation data config: the arguments of eval_transform, stored as classifier hyperparameters.
DATA_CONFIG_KEYS = ("img_size", "interpolation", "crop_pct", "mean", "std")

# load_classifier lives beside the module it reads, as nlp.module.load_translator does; scripts import it from here too.
__all__ = ["DATA_CONFIG_KEYS", "data_config", "image_transform", "load_classifier", "load_image", "preprocess", "top_k"]


def load_image(path: str | Path) -> Image.Image:
    """An image file decoded as the image-folder datamodule decodes its files
    (:func:`vision.data.folder.read_image`: 8-bit RGB, transparency over white), with an error naming
    the file when it is missing or unreadable."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image {path} does not exist")
    try:
        return read_image(path)
    except UNREADABLE as error:
        raise unreadable_image(path, error_reason(error)) from None


def require_readable(paths: list[str]) -> None:
    """Refuse the first of ``paths`` that does not decode as an image, before any is classified (a
    JPEG is decoded at an eighth of its size: :func:`vision.data.folder.unreadable_reason`)."""
    for path in paths:
        if (reason := unreadable_reason(path)) is not None:
            raise unreadable_image(path, reason)


def unreadable_image(path: str | Path, reason: str) -> InputError:
    """The error of an image file Pillow cannot decode, ``reason`` its read error
    (:func:`vision.data.folder.error_reason`)."""
    return InputError(f"{path} is not a readable image ({reason}); pass a file Pillow can open")


def data_config(classifier: ImageClassifier) -> dict[str, Any]:
    """The evaluation data config stored with the classifier (image size, interpolation, crop
    fraction, mean and std): what its datamodule's
    :meth:`~vision.data.datamodule.ImageDataModule.eval_data_config` returned at training time."""
    return {key: classifier.hparams[key] for key in DATA_CONFIG_KEYS}


def image_transform(classifier: ImageClassifier) -> T.Compose:
    """PIL image -> normalized tensor [3, H, W]: the datamodule's evaluation transform, rebuilt
    from the checkpoint's data config."""
    return eval_transform(**data_config(classifier))


def preprocess(classifier: ImageClassifier, images: list[Image.Image]) -> Tensor:
    """Images -> the normalized batch [B, 3, H, W] the classifier was evaluated on, on its device."""
    transform = image_transform(classifier)
    batch = torch.stack([transform(image) for image in images])
    return batch.to(classifier.device)


@torch.no_grad()
def top_k(classifier: ImageClassifier, batch: Tensor, k: int = 5) -> list[list[tuple[str, float]]]:
    """The ``k`` most probable (class name, probability) pairs of each image in ``batch``; all
    classes when ``k`` exceeds their number."""
    if k < 1:
        raise ValueError(f"top_k needs k >= 1 classes per image, got k={k}")
    probabilities = classifier.classify(batch).softmax(dim=-1)
    values, indices = probabilities.topk(min(k, probabilities.shape[-1]), dim=-1)
    names = classifier.hparams.class_names
    return [
        [(names[index], float(value)) for value, index in zip(row_values.tolist(), row_indices.tolist())]
        for row_values, row_indices in zip(values, indices)
    ]
