"""Export: a trained classifier as ONNX, TorchScript or a ``torch.export`` program
(:mod:`~vision.export.formats`, each checked against the eager model), and the
``python -m vision.export`` command (:mod:`~vision.export.command`)."""

from vision.export.command import main

__all__ = ["main"]
