"""What the shared evaluation asks of the vision head (``checkpoint_data`` and
``evaluation_reports`` of :data:`vision.head.HEAD`, see :class:`core.training.head.Head`): the
preprocessing the checkpoint fixes and the confusion matrix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.training.evaluation import EvaluationReport
from vision.analysis.confusion import ConfusionReport
from vision.inference import data_config
from vision.module import ImageClassifier

# The eval transform's arguments a datamodule takes; crop_pct is the datamodule's own and is checked.
PREPROCESSING_KEYS = ("img_size", "interpolation", "mean", "std")


def checkpoint_data(classifier: ImageClassifier, output_dir: Path) -> dict[str, Any]:
    """The data settings the checkpoint fixes (``checkpoint_data`` of :data:`vision.head.HEAD`):
    its evaluation preprocessing; nothing is written to ``output_dir``."""
    config = data_config(classifier)
    return {key: config[key] for key in PREPROCESSING_KEYS}


def evaluation_reports(classifier: ImageClassifier) -> list[EvaluationReport]:
    """The evaluation's reports (``evaluation_reports`` of :data:`vision.head.HEAD`): the
    confusion matrix over the checkpoint's classes."""
    return [ConfusionReport(list(classifier.hparams.class_names))]
