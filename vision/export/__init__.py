"""Export: a trained classifier as ONNX, TorchScript or a ``torch.export`` program
(:mod:`~vision.export.formats`, each checked against the eager model), as the
``model.safetensors`` + ``config.json`` directory others load (:mod:`~vision.export.safetensors_files`),
and the ``python -m vision.export`` command (:mod:`~vision.export.command`)."""

from vision.export.command import main

__all__ = ["main"]
