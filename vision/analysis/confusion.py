"""The confusion matrix that ``python -m vision.evaluate`` draws and adds to ``metrics.json`` as
per-class accuracies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from matplotlib.figure import Figure
from torch import Tensor
from torchmetrics.classification import MulticlassConfusionMatrix

from core.figures.heatmap import heatmap, save_figure
from core.training.evaluation import EvaluationReport, Metrics

ANNOTATE_UP_TO = 20  # classes; larger matrices are drawn without the counts
LABEL_UP_TO = 40  # classes; larger matrices are drawn without the class names


def draw_confusion(matrix: Tensor, names: list[str], title: str, out: Path) -> None:
    """Rows: true class, columns: predicted class; colour = share of the row, text = count."""
    counts = matrix.cpu()
    shares = counts / counts.sum(dim=1, keepdim=True).clamp(min=1)
    side = min(24.0, 2.5 + 0.45 * len(names))
    figure = Figure(figsize=(side + 1.5, side), layout="constrained")
    axis = figure.subplots()
    labels = names if len(names) <= LABEL_UP_TO else [""] * len(names)
    heatmap(
        axis, shares, labels, labels, title,
        texts=[[str(int(count)) for count in row] for row in counts.tolist()],
        annotate_up_to=ANNOTATE_UP_TO**2, cmap="Blues", value_range=(0.0, 1.0),
        colorbar_label="share of the true class", column_rotation=90, aspect="equal",
    )
    axis.set_xlabel("predicted class")
    axis.set_ylabel("true class")
    save_figure(figure, out)


class ConfusionReport(EvaluationReport):
    """The confusion matrix of the evaluated split (torchmetrics), from the logits each test step
    returns (:meth:`vision.module.ImageClassifier.classify`'s, so averaged with the mirror's under
    ``flip_tta`` as the accuracy is); reports each class's accuracy (the diagonal over the row:
    recall; none for a class the split has no image of) and draws ``confusion_matrix.png``."""

    def __init__(self, class_names: list[str]) -> None:
        self.class_names = class_names
        self.matrix = MulticlassConfusionMatrix(len(class_names))

    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.matrix = self.matrix.to(pl_module.device)

    def on_test_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        self.matrix.update(outputs, batch[1])  # outputs: the step's logits [B, num_classes]

    def report(self, module: pl.LightningModule, output_dir: Path) -> Metrics:
        matrix = self.matrix.compute()  # (C, C): rows true, columns predicted; summed over processes
        images = matrix.sum(dim=1)  # (C,): the split's images of each class
        accuracy = matrix.diag() / images.clamp(min=1)
        total = int(matrix.sum())
        title = f"{total} images, top-1 accuracy {float(matrix.diag().sum()) / max(total, 1):.1%}"
        draw_confusion(matrix, self.class_names, title, output_dir / "confusion_matrix.png")
        # A class the split has no image of has no accuracy: it gets no entry (0 would read as always wrong).
        return {
            f"class_acc/{name}": float(value) for name, value, count in zip(self.class_names, accuracy, images) if count > 0
        }
