"""Augmentation on the device (``data.augment_on=device``) against the loader's own pipeline: the
same distribution of outputs, image by image, and wired into a real Trainer."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from PIL import Image
from scipy.stats import chi2_contingency, ks_2samp

from core.errors import InputError
from tests.vision.vision_testdata import tiny_model_kwargs
from vision.data.batch_augment import BatchAugment
from vision.module import ImageClassifier
from vision.data.synthetic import SyntheticDataModule
from vision.data.transforms import train_transform, uint8_transform

SIZE = 16  # padding SIZE // 8 = 2: 5 x 5 offsets, flipped or not
MEAN, STD = (0.49, 0.48, 0.45), (0.25, 0.24, 0.26)
DRAWS = 5000
P_FLOOR = 1e-3  # the seeded draws of two samplers of one distribution fall below this 1 time in 1,000


def coded_image() -> Image.Image:
    """Every pixel tells its row (red) and column (green); none is black like the padding."""
    rows, columns = np.meshgrid(np.arange(SIZE), np.arange(SIZE), indexing="ij")
    pixels = np.stack([8 + 15 * rows, 8 + 15 * columns, np.full_like(rows, 100)], axis=-1)
    return Image.fromarray(pixels.astype(np.uint8))


def loader_outputs(image: Image.Image, re_prob: float, hflip: float) -> torch.Tensor:
    """``DRAWS`` outputs [N, 3, SIZE, SIZE] of the loader's training transform, one image at a time."""
    torch.manual_seed(0)
    random.seed(0)
    transform = train_transform(SIZE, MEAN, STD, crop="pad", auto_augment=None, re_prob=re_prob, hflip=hflip)
    return torch.stack([transform(image) for _ in range(DRAWS)])


def device_outputs(image: Image.Image, re_prob: float, hflip: float) -> torch.Tensor:
    """``DRAWS`` outputs of the loader's uint8 share and the device's share, as one batch."""
    torch.manual_seed(1)
    random.seed(1)
    batch = uint8_transform(SIZE, MEAN)(image).expand(DRAWS, -1, -1, -1)  # [N, 3, SIZE, SIZE] uint8
    return BatchAugment(SIZE, MEAN, STD, hflip, re_prob)(batch)


def test_crops_and_flips_have_the_loaders_distribution() -> None:
    image = coded_image()
    loader = Counter(output.numpy().tobytes() for output in loader_outputs(image, 0.0, 0.5))
    device = Counter(output.numpy().tobytes() for output in device_outputs(image, 0.0, 0.5))
    assert len(loader) == 50  # every offset in [0, 4] x [0, 4], flipped and not, bit for bit the loader's
    assert set(device) == set(loader)
    outcomes = sorted(loader)
    table = [[loader[key] for key in outcomes], [device[key] for key in outcomes]]
    assert chi2_contingency(table).pvalue > P_FLOOR


def noise_mask(outputs: torch.Tensor, plain: torch.Tensor) -> torch.Tensor:
    """[N, H, W]: the pixels of outputs [N, 3, H, W] that match neither the plain image nor the
    padding (the erasing's noise)."""
    padding = (-torch.tensor(MEAN) / torch.tensor(STD))[:, None, None]
    return (outputs != plain[None]).any(dim=1) & (outputs != padding[None]).any(dim=1)


def erased_boxes(mask: torch.Tensor) -> np.ndarray:
    """(erased, top, left, height, width) of each image's noise mask [N, H, W]."""
    boxes = []
    for image_mask in mask:  # [H, W]
        rows, columns = image_mask.any(dim=1).nonzero().flatten(), image_mask.any(dim=0).nonzero().flatten()
        if len(rows) == 0:
            boxes.append((0, -1, -1, 0, 0))
            continue
        top, left = int(rows[0]), int(columns[0])
        height, width = int(rows[-1]) - top + 1, int(columns[-1]) - left + 1
        assert int(image_mask.sum()) == height * width  # one rectangle
        boxes.append((1, top, left, height, width))
    return np.array(boxes)


def test_random_erasing_has_the_loaders_distribution() -> None:
    image = Image.new("RGB", (SIZE, SIZE), (128, 128, 128))
    plain = (torch.full((3, 1, 1), 128 / 255) - torch.tensor(MEAN)[:, None, None]) / torch.tensor(STD)[:, None, None]
    loader_run, device_run = loader_outputs(image, 0.5, 0.0), device_outputs(image, 0.5, 0.0)
    device_mask = noise_mask(device_run, plain)
    loader, device = erased_boxes(noise_mask(loader_run, plain)), erased_boxes(device_mask)
    counts = [[int(boxes[:, 0].sum()), DRAWS - int(boxes[:, 0].sum())] for boxes in (loader, device)]
    assert 0.45 < counts[1][0] / DRAWS < 0.55 and chi2_contingency(counts).pvalue > P_FLOOR
    for column, name in enumerate(("top", "left", "height", "width"), start=1):
        shown = ks_2samp(loader[loader[:, 0] == 1, column], device[device[:, 0] == 1, column])
        assert shown.pvalue > P_FLOOR, name
    noise = device_run.permute(0, 2, 3, 1)[device_mask]  # [erased pixels, 3]
    assert abs(float(noise.mean())) < 0.05 and abs(float(noise.std()) - 1) < 0.05  # standard normal, as timm's


class BatchWatch(Callback):
    """The batches the training and validation steps receive."""

    def __init__(self) -> None:
        self.train: list[torch.Tensor] = []
        self.val: list[torch.Tensor] = []

    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: tuple, batch_idx: int) -> None:
        self.train.append(batch[0])

    def on_validation_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: tuple, *args: int) -> None:
        self.val.append(batch[0])


def test_a_trainer_augments_training_batches_on_the_device_and_leaves_validation_alone() -> None:
    data = SyntheticDataModule(
        img_size=SIZE, batch_size=8, train_size=32, val_size=8, num_workers=0, augment_on="device",
        auto_augment="rand-m9-n2-mstd0.5-inc1-mmax9", re_prob=0.5,
    )
    data.setup("fit")
    images, _ = next(iter(data.train_dataloader()))
    assert images.dtype == torch.uint8 and images.shape == (8, 3, SIZE, SIZE)  # the workers' share
    watch = BatchWatch()
    module = ImageClassifier(model=tiny_model_kwargs(), num_classes=10, mean=data.mean, std=data.std)
    trainer = Trainer(
        max_epochs=1, limit_train_batches=2, limit_val_batches=1, num_sanity_val_steps=0, accelerator="cpu", logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, callbacks=[watch],
    )
    trainer.fit(module, datamodule=data)
    assert len(watch.train) == 2
    for batch in watch.train:
        assert batch.dtype == torch.float32 and batch.shape == (8, 3, SIZE, SIZE) and batch.min() < 0
    expected = torch.stack([data.val_set[index][0] for index in range(8)])
    torch.testing.assert_close(watch.val[0], expected)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"augment_on": "gpu"}, "data.augment_on must be one of"),
        ({"augment_on": "device", "crop": "random_resized"}, "data.crop=random_resized"),
        ({"augment_on": "device", "img_size": 96}, "data.crop=random_resized"),  # auto: a random resized crop above 64 px
    ],
)
def test_device_augmentation_refuses_what_it_does_not_do(settings: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        SyntheticDataModule(**settings)


@pytest.mark.parametrize(
    ("settings", "on_device"),
    [
        ({}, True),  # auto at 16 px: the pad crop, augmented on the device
        ({"crop": "pad"}, True),
        ({"crop": "random_resized"}, False),
        ({"img_size": 96}, False),  # auto: a random resized crop above 64 px
        ({"augment_on": "loader"}, False),
    ],
)
def test_auto_augments_on_the_device_with_the_pad_crop(settings: dict, on_device: bool) -> None:
    data = SyntheticDataModule(**{"img_size": SIZE, "batch_size": 4, "train_size": 8, "val_size": 4, "num_workers": 0, **settings})
    data.setup("fit")
    image, _ = data.train_set[0]
    assert (data.batch_augment is not None) == on_device
    assert image.dtype == (torch.uint8 if on_device else torch.float32)


def test_batches_augmented_on_the_device_take_a_true_precision() -> None:
    data = SyntheticDataModule(img_size=SIZE, batch_size=8, train_size=16, val_size=8, num_workers=0)
    watch = BatchWatch()
    module = ImageClassifier(model=tiny_model_kwargs(), num_classes=10, mean=data.mean, std=data.std)
    trainer = Trainer(
        max_epochs=1, limit_train_batches=1, limit_val_batches=0, accelerator="cpu", precision="bf16-true", logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, callbacks=[watch],
    )
    trainer.fit(module, datamodule=data)  # float32 images against bf16 weights would stop the step
    assert [batch.dtype for batch in watch.train] == [torch.bfloat16]
