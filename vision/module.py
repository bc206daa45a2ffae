"""Training a :class:`vision.model.VisionTransformer` classifier with Lightning: AdamW with
warmup + cosine, label smoothing or Mixup/CutMix soft targets, top-1 / top-5 accuracy."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from lightning.pytorch import LightningModule
from timm.data import Mixup
from timm.loss import LabelSmoothingCrossEntropy, SoftTargetCrossEntropy
from timm.optim import param_groups_layer_decay, param_groups_weight_decay
from torch import Tensor, nn
from torchmetrics import MetricCollection
from torchmetrics.classification import MulticlassAccuracy

from core import warmup_cosine
from core.constraints import AUTO
from core.training.pretrained import require_same_network
from core.training.plan.budget import FollowsThePlan, run_plan, stepping_bound, steps_per_epoch
from core.errors import InputError
from core.files.checkpoints import constructor_defaults, load_module
from core.regularization import DropPath
from vision.model import VisionTransformer
from vision.recipe import (
    FULL_CUTMIX_ALPHA,
    FULL_DROP_PATH,
    FULL_MIXUP_ALPHA,
    Regularization,
    regularization,
)
from vision.model.flip import flip_averaged
from vision.model.timm_weights import read_timm_checkpoint

log = logging.getLogger(__name__)

# The network settings a model saved before each of them existed was built with.
EARLIER_NETWORK = {"stem": "patch", "stem_convs": 1}
# VisionTransformer's settings with defaults, but the head's class count (the module's own argument).
NETWORK_DEFAULTS = {name: value for name, value in constructor_defaults(VisionTransformer).items() if name != "num_classes"}
# The network settings trained weights do not fix: the grid the positions are resampled to, the
# regularization, the init of what is not loaded.
FREE_SETTINGS = ("img_size", "drop_path", "dropout", "attn_dropout", "weight_init", "dynamic_img_size")


def accuracy_metrics(num_classes: int) -> MetricCollection:
    """Top-1 and top-5 accuracy over the whole split (top-k capped at the class count)."""
    return MetricCollection(
        {
            "acc": MulticlassAccuracy(num_classes, top_k=1, average="micro"),
            "acc5": MulticlassAccuracy(num_classes, top_k=min(5, num_classes), average="micro"),
        }
    )


class ImageClassifier(FollowsThePlan, LightningModule):
    """A ViT image classifier.

    The defaults are the recipe of ``conf/vision.yaml`` (its ``module`` section) with the peak
    rate and warmup of the ``vit_tiny`` preset (``conf/model/vit_tiny.yaml``), except that Mixup
    and CutMix stay off unless asked for.

    Args:
        model: :class:`VisionTransformer` arguments (the ``model`` config group); ``num_classes``
            comes from the data.
        num_classes: classes of the dataset.
        class_names: their names, kept in the checkpoint for prediction.
        mean, std, img_size, interpolation, crop_pct: the evaluation data config
            (:meth:`vision.data.datamodule.ImageDataModule.eval_data_config`, the arguments of
            :func:`vision.data.transforms.eval_transform`), kept in the checkpoint so that prediction
            preprocesses images as validation did; ``img_size`` None is the model's.
        lr: peak AdamW learning rate (after warmup).
        weight_decay: AdamW decoupled weight decay; norms, biases, ``pos_embed`` and
            ``cls_token`` are exempt.
        betas: AdamW betas (beta2 0.99: a memory of about 100 steps, which short runs need).
        warmup_epochs: linear warmup length in epochs (fractions allowed).
        min_lr_ratio: final learning rate of the cosine decay, relative to ``lr``.
        label_smoothing: target smoothing epsilon (Szegedy et al. 2016).
        mixup_alpha: Mixup (Zhang et al. 2018) Beta(alpha, alpha) parameter; 0 = off; ``auto``
            sized to the run's length by :func:`vision.recipe.regularization`, as is
            ``model["drop_path"]`` when ``auto``.
        cutmix_alpha: CutMix (Yun et al. 2019) Beta parameter; 0 = off; ``auto`` as above.
        mixup_prob: probability of mixing a batch at all.
        mixup_switch_prob: probability of CutMix instead of Mixup when both are on.
        flip_tta: evaluation and prediction average the logits of each image and of its mirror
            image (horizontal flip test-time augmentation); for classes a mirror does not change
            (photos, not digits or letters).
        layer_decay: layer-wise rate decay for fine-tuning (BEiT, Bao et al. 2022; timm's
            ``--layer-decay``): encoder layer ``i`` of ``L`` trains at ``lr * layer_decay ** (L -
            i)``, the embedding at ``layer_decay ** (L + 1)``, the head at ``lr``; None = one rate.
    """

    throughput_unit = "samples"

    def __init__(
        self,
        model: dict[str, Any],
        num_classes: int,
        class_names: Sequence[str] | None = None,
        mean: Sequence[float] = (0.5, 0.5, 0.5),
        std: Sequence[float] = (0.5, 0.5, 0.5),
        img_size: int | Sequence[int] | None = None,
        interpolation: str = "bicubic",
        crop_pct: float = 1.0,
        lr: float = 2e-3,
        weight_decay: float = 0.05,
        betas: Sequence[float] = (0.9, 0.99),
        warmup_epochs: float = 10.0,
        min_lr_ratio: float = 0.01,
        label_smoothing: float = 0.1,
        mixup_alpha: float | str = 0.0,
        cutmix_alpha: float | str = 0.0,
        mixup_prob: float = 1.0,
        mixup_switch_prob: float = 0.5,
        flip_tta: bool = False,
        layer_decay: float | None = None,
    ) -> None:
        super().__init__()
        # Checkpoints are read with weights_only=True, so hyperparameters must be plain types.
        class_names = [str(name) for name in class_names] if class_names else [str(i) for i in range(num_classes)]
        mean, std, betas = [float(v) for v in mean], [float(v) for v in std], [float(v) for v in betas]
        # Every network setting is recorded, its default included, so that a default changed later
        # (upgrade_hyperparameters) does not change what an existing checkpoint rebuilds.
        model = {**NETWORK_DEFAULTS, **model}
        # An auto drop path builds the stochastic-depth layers at the full rate; the rule scales them.
        full_depth = {"drop_path": FULL_DROP_PATH} if model.get("drop_path") == AUTO else {}
        self.net = VisionTransformer(**{**model, "num_classes": num_classes, **full_depth})
        self.full_drop_rates = {
            name: layer.p for name, layer in self.net.named_modules() if isinstance(layer, DropPath)
        }
        if img_size is None:  # the network's, one side when square as the datamodules record it
            height, width = self.net.img_size
            img_size = height if height == width else [height, width]
        img_size = [int(side) for side in img_size] if isinstance(img_size, Sequence) else int(img_size)
        self.save_hyperparameters()
        alphas = (
            FULL_MIXUP_ALPHA if mixup_alpha == AUTO else mixup_alpha,
            FULL_CUTMIX_ALPHA if cutmix_alpha == AUTO else cutmix_alpha,
        )
        self.mixup = (
            Mixup(
                mixup_alpha=alphas[0],
                cutmix_alpha=alphas[1],
                prob=mixup_prob,
                switch_prob=mixup_switch_prob,
                label_smoothing=label_smoothing,
                num_classes=num_classes,
            )
            if max(alphas) > 0
            else None
        )
        # Auto mixing waits for apply_regularization, at the start of the first epoch.
        self.mixing = self.mixup is not None and AUTO not in (mixup_alpha, cutmix_alpha)
        self.regularization: Regularization | None = None
        self.mix_loss = SoftTargetCrossEntropy()
        if label_smoothing > 0:
            self.train_loss = LabelSmoothingCrossEntropy(label_smoothing)
        else:
            self.train_loss = nn.CrossEntropyLoss()
        self.val_metrics = accuracy_metrics(num_classes).clone(prefix="val/")
        self.test_metrics = accuracy_metrics(num_classes).clone(prefix="test/")

    @staticmethod
    def upgrade_hyperparameters(hparams: dict[str, Any]) -> dict[str, Any]:
        """A checkpoint's hyper-parameters in today's terms: a model saved before ``stem``
        existed has the linear patch embedding (``stem="patch"``; the default is ``conv`` since),
        one saved before ``stem_convs`` existed has one convolution per stage of its stem (the
        default is 2 since); the timm weights a run started from (``pretrained``, a setting of the
        module then, of the run now) do not rebuild it."""
        model = hparams.get("model")
        if isinstance(model, dict):
            hparams = {**hparams, "model": {**EARLIER_NETWORK, **model}}
        return {key: value for key, value in hparams.items() if key != "pretrained"}

    def forward(self, images: Tensor) -> Tensor:
        """Images [B, 3, H, W] -> logits [B, num_classes]."""
        return self.net(images)

    def classify(self, images: Tensor) -> Tensor:
        """The logits [B, num_classes] evaluation and prediction use: the network's, averaged with
        those of the mirrored images [B, 3, H, W] (flipped along the width) under ``flip_tta``."""
        return flip_averaged(self.net, images) if self.hparams.flip_tta else self.net(images)

    @classmethod
    def pretrained_data(cls, path: str, output_dir: Path) -> dict[str, Any]:
        """The data settings trained weights fix (:mod:`core.training.pretrained`): none, a
        classifier's weights serve any classes and, the positions resampled, any image size."""
        return {}

    def load_pretrained(self, path: str) -> list[str]:
        """Start from trained weights (``pretrained=PATH``, :mod:`core.training.pretrained`): a
        checkpoint (``.ckpt``) or exported directory of this head, whose network settings must
        be this run's but for the image size and the dropout rates, or a timm weights file
        (``.safetensors``, ``.pth``, ``.bin``; EMA weights preferred). ``pos_embed`` is resampled to
        this run's grid; the classifier layer starts fresh when the classes differ (another count,
        or, for this head's files, other names). Returns the names of the fresh parameters."""
        if Path(path).is_dir() or Path(path).suffix == ".ckpt":
            source = load_classifier(path)
            require_same_network(path, source.hparams.model, self.hparams.model, VisionTransformer, FREE_SETTINGS)
            state, new_head = source.net.state_dict(), source.hparams.class_names != self.hparams.class_names
        else:
            state, new_head = read_timm_checkpoint(path), False
        try:
            return self.net.load_pretrained_state_dict(state, new_head=new_head)
        except ValueError as error:
            raise InputError(f"pretrained={path}: {error}") from None

    def follow_plan(self) -> None:
        """Size the ``auto`` regularization, here and in the datamodule, to the planned epochs and
        steps of :func:`core.training.plan.budget.run_plan` (the same on every process; none while a
        time budget is being measured) by :func:`vision.recipe.regularization`; log it when it
        changes."""
        plan = self.followed_plan = run_plan(self.trainer)
        epochs, steps = (plan.epochs, plan.steps) if plan is not None else (0.0, 0.0)
        settings = regularization(epochs, steps)
        self.apply_regularization(settings)
        if hasattr(self.trainer.datamodule, "apply_regularization"):
            self.trainer.datamodule.apply_regularization(settings)
        if settings != self.regularization:
            values = ", ".join(f"{key} {value:.3g}" for key, value in asdict(settings).items())
            log.info(
                "regularization for %.3g planned epochs, %.0f steps (values left at auto follow it): %s",
                epochs, steps, values,
            )
            self.regularization = settings

    def apply_regularization(self, settings: Regularization) -> None:
        """Take the Mixup/CutMix alphas and the drop path of ``settings`` for the values that
        are ``auto`` (stochastic depth keeps its linear rise over the layers)."""
        if self.hparams.model.get("drop_path") == AUTO:
            for name, layer in self.net.named_modules():
                if isinstance(layer, DropPath):
                    layer.p = self.full_drop_rates[name] * settings.drop_path / FULL_DROP_PATH
        if self.mixup is None or AUTO not in (self.hparams.mixup_alpha, self.hparams.cutmix_alpha):
            return
        if self.hparams.mixup_alpha == AUTO:
            self.mixup.mixup_alpha = settings.mixup_alpha
        if self.hparams.cutmix_alpha == AUTO:
            self.mixup.cutmix_alpha = settings.cutmix_alpha
        self.mixing = self.mixup.mixup_alpha > 0 or self.mixup.cutmix_alpha > 0

    def count_items(self, batch: tuple[Tensor, Tensor]) -> int:
        """Images in a training batch (the throughput unit)."""
        return batch[0].shape[0]

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        """Cross-entropy on the batch, after Mixup/CutMix when enabled (soft targets)."""
        images, targets = batch
        if self.mixing:
            if images.shape[0] % 2:
                raise InputError(f"Mixup/CutMix pairs images, so data.batch_size must be even, got {images.shape[0]}")
            images, targets = self.mixup(images, targets)  # targets: soft [B, num_classes]
            loss = self.mix_loss(self.net(images), targets)
        else:
            loss = self.train_loss(self.net(images), targets)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def evaluate(self, batch: tuple[Tensor, Tensor], metrics: MetricCollection, prefix: str) -> Tensor:
        """Log ``{prefix}/loss`` and update and log the accuracy metrics on hard labels; returns the
        logits [B, num_classes] (:meth:`classify`)."""
        images, targets = batch
        logits = self.classify(images)
        metrics.update(logits, targets)
        self.log(f"{prefix}/loss", F.cross_entropy(logits, targets), sync_dist=True)
        self.log_dict(metrics, prog_bar=prefix == "val")
        return logits

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        """Log ``val/loss``, ``val/acc`` and ``val/acc5``."""
        self.evaluate(batch, self.val_metrics, "val")

    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        """Log ``test/loss``, ``test/acc`` and ``test/acc5``; returns the logits, which the
        evaluation reports read (:class:`vision.analysis.confusion.ConfusionReport`)."""
        return self.evaluate(batch, self.test_metrics, "test")

    def configure_optimizers(self) -> dict[str, Any]:
        """AdamW (no weight decay on biases, norms, the class token and position embeddings) with a
        per-step linear warmup and cosine decay, laid over the run's budget by
        :class:`core.training.plan.budget.TrainingBudget` (which also caps the warmup)."""
        if self.hparams.layer_decay is None:
            groups = param_groups_weight_decay(
                self.net, self.hparams.weight_decay, no_weight_decay_list=self.net.no_weight_decay()
            )
        else:
            groups = param_groups_layer_decay(
                self.net, self.hparams.weight_decay, self.net.no_weight_decay(), layer_decay=self.hparams.layer_decay
            )
            for group in groups:  # the schedule scales each group's own peak
                group["lr"] = self.hparams.lr * group.pop("lr_scale")
        optimizer = torch.optim.AdamW(groups, lr=self.hparams.lr, betas=tuple(self.hparams.betas))
        total_steps = stepping_bound(self.trainer)  # None until the budget callback plans it (max_time, max_epochs)
        per_epoch = steps_per_epoch(self.trainer)
        if not math.isfinite(per_epoch) and self.trainer.datamodule is not None:
            # Lightning has not sized its loader yet (sizing it here would keep a resumed run from
            # restoring the loader's position): the datamodule's own loader has the same length
            per_epoch = len(self.trainer.datamodule.train_dataloader()) / self.trainer.accumulate_grad_batches
        warmup_steps = round(self.hparams.warmup_epochs * per_epoch) if math.isfinite(per_epoch) else 0
        scheduler = warmup_cosine(optimizer, warmup_steps, total_steps, self.hparams.min_lr_ratio)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def load_classifier(checkpoint: str | Path, device: str = "cpu") -> ImageClassifier:
    """The classifier of a training checkpoint (``weights_only=True``) or of a directory written by
    ``python -m vision.export --format safetensors`` (:mod:`vision.export.safetensors_files`), in
    eval mode."""
    if Path(checkpoint).is_dir():
        from vision.export.safetensors_files import read_classifier  # it builds this module's classifier

        return read_classifier(checkpoint, device)
    return load_module(ImageClassifier, checkpoint, map_location=device).to(device)
