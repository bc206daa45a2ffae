"""What ``python -m vision.evaluate`` adds to the shared evaluation (see that command for the options
and outputs): the preprocessing the checkpoint fixes and the confusion matrix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from matplotlib.figure import Figure
from torch import Tensor, nn
from torchmetrics.classification import MulticlassConfusionMatrix

from core.training.evaluation import EvaluationReport, Metrics
from vision.inference import data_config
from vision.module import ImageClassifier

# The eval transform's arguments a datamodule takes; crop_pct is the datamodule's own and is checked.
PREPROCESSING_KEYS = ("img_size", "interpolation", "mean", "std")
ANNOTATE_UP_TO = 20  # classes; larger matrices are drawn without the counts
LABEL_UP_TO = 40  # classes; larger matrices are drawn without the class names


def draw_confusion(matrix: Tensor, names: list[str], title: str, out: Path) -> None:
    """Rows: true class, columns: predicted class; colour = share of the row, text = count."""
    counts = matrix.cpu()
    shares = counts / counts.sum(dim=1, keepdim=True).clamp(min=1)
    side = min(24.0, 2.5 + 0.45 * len(names))
    figure = Figure(figsize=(side + 1.5, side), layout="constrained")
    axis = figure.subplots()
    image = axis.imshow(shares.numpy(), cmap="Blues", vmin=0, vmax=1)
    ticks = range(len(names))
    labels = names if len(names) <= LABEL_UP_TO else [""] * len(names)
    axis.set_xticks(ticks, labels=labels, rotation=90)
    axis.set_yticks(ticks, labels=labels)
    axis.set_xlabel("predicted class")
    axis.set_ylabel("true class")
    if len(names) <= ANNOTATE_UP_TO:
        for row, row_counts in enumerate(counts.tolist()):
            for column, count in enumerate(row_counts):
                color = "white" if shares[row, column] > 0.5 else "black"
                axis.text(column, row, str(int(count)), ha="center", va="center", fontsize=8, color=color)
    figure.colorbar(image, ax=axis, fraction=0.046, pad=0.04, label="share of the true class")
    axis.set_title(title)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110, format="png")


class ConfusionReport(EvaluationReport):
    """The confusion matrix of the evaluated split (torchmetrics), from the logits the test loop
    computes anyway (a forward hook on the network); reports each class's accuracy (the
    diagonal over the row: recall) and draws ``confusion_matrix.png``."""

    def __init__(self, class_names: list[str]) -> None:
        self.class_names = class_names
        self.matrix = MulticlassConfusionMatrix(len(class_names))
        self.logits: Tensor | None = None
        self.hook: torch.utils.hooks.RemovableHandle | None = None

    def keep_logits(self, net: nn.Module, args: Any, output: Tensor) -> None:
        self.logits = output

    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.matrix = self.matrix.to(pl_module.device)
        self.hook = pl_module.net.register_forward_hook(self.keep_logits)

    def on_test_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        assert self.logits is not None
        self.matrix.update(self.logits, batch[1])

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.hook is not None:
            self.hook.remove()

    def report(self, module: pl.LightningModule, output_dir: Path) -> Metrics:
        matrix = self.matrix.compute()  # (C, C): rows true, columns predicted; summed over processes
        accuracy = matrix.diag() / matrix.sum(dim=1).clamp(min=1)
        total = int(matrix.sum())
        title = f"{total} images, top-1 accuracy {float(matrix.diag().sum()) / max(total, 1):.1%}"
        draw_confusion(matrix, self.class_names, title, output_dir / "confusion_matrix.png")
        return {f"class_acc/{name}": float(value) for name, value in zip(self.class_names, accuracy)}


def preprocessing(classifier: ImageClassifier, output_dir: Path) -> dict[str, Any]:
    """The data settings the checkpoint fixes (``checkpoint_data`` of :data:`vision.head.HEAD`):
    its evaluation preprocessing; nothing is written to ``output_dir``."""
    config = data_config(classifier)
    return {key: config[key] for key in PREPROCESSING_KEYS}


def reports(classifier: ImageClassifier) -> list[EvaluationReport]:
    """The evaluation's reports (``evaluation_reports`` of :data:`vision.head.HEAD`): the
    confusion matrix over the checkpoint's classes."""
    return [ConfusionReport(list(classifier.hparams.class_names))]
