"""The writers behind ``python -m vision.export``: the network of a classifier as ONNX,
TorchScript or a ``torch.export`` archive, with the data config and class names inside, checked
against the eager logits before the file is moved into place. A checkpoint that evaluates with
flip test-time augmentation (``flip_tta``) exports the network averaged with its mirror
(:class:`vision.model.flip.FlipAveraged`), so the file's logits are those of ``vision.predict``."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from core.files.atomic import atomic_path
from vision.inference import data_config
from vision.model import VisionTransformer
from vision.model.flip import FlipAveraged
from vision.module import ImageClassifier

EXAMPLE_BATCH = 2  # torch.export specializes sizes 0 and 1, so the traced example has 2 images
CHECK_BATCHES = (1, 3, 8)
TOLERANCE = 1e-4  # relative and absolute, on logits


def metadata(classifier: ImageClassifier) -> dict[str, str]:
    """What a user of the exported file needs besides the network, as JSON strings: the
    checkpoint's evaluation data config (the arguments of :func:`vision.data.transforms.eval_transform`),
    the class names in logit order, and whether the logits average each image with its mirror."""
    return {
        "data_config": json.dumps(data_config(classifier)),
        "class_names": json.dumps(list(classifier.hparams.class_names)),
        "flip_tta": json.dumps(bool(classifier.hparams.flip_tta)),
    }


def example_images(net: VisionTransformer, batch: int, device: torch.device | str) -> Tensor:
    """Random normalized images [batch, 3, H, W] at the network's size."""
    generator = torch.Generator().manual_seed(batch)
    return torch.randn(batch, net.patch_embed.in_chans, *net.img_size, generator=generator).to(device)


def write_onnx(net: nn.Module, example: Tensor, path: Path, extra: dict[str, str]) -> Callable[[Tensor], Tensor] | None:
    """ONNX with a dynamic ``batch`` axis; returns an onnxruntime runner, or None without it."""
    batch = torch.export.Dim("batch", min=1)
    program = torch.onnx.export(
        net,
        (example,),
        input_names=["images"],
        output_names=["logits"],
        dynamic_shapes=({0: batch},),
        dynamo=True,
        verbose=False,
    )
    program.model.metadata_props.update(extra)
    program.save(path, external_data=False)
    try:
        import onnxruntime
    except ImportError:
        return None
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return lambda images: torch.from_numpy(np.asarray(session.run(None, {"images": images.cpu().numpy()})[0]))


def write_torchscript(net: nn.Module, example: Tensor, path: Path, extra: dict[str, str]) -> Callable[[Tensor], Tensor]:
    """A traced TorchScript module. The image size is fixed, so the tracer's warnings about shape
    checks that became constants are expected; torch's notice that TorchScript is deprecated (in
    favour of ``exported``) is known to whoever picks this format. Both are silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", FutureWarning)
        traced = torch.jit.trace(net, example)
        torch.jit.save(traced, str(path), _extra_files={f"{key}.json": value for key, value in extra.items()})
        return torch.jit.load(str(path), map_location=example.device)


def write_exported(net: nn.Module, example: Tensor, path: Path, extra: dict[str, str]) -> Callable[[Tensor], Tensor]:
    """A ``torch.export`` program with a dynamic batch dimension, saved as a ``.pt2`` archive."""
    batch = torch.export.Dim("batch", min=1)
    program = torch.export.export(net, (example,), dynamic_shapes=({0: batch},))
    torch.export.save(program, path, extra_files={f"{key}.json": value for key, value in extra.items()})
    return torch.export.load(path).module()


WRITERS = {"onnx": write_onnx, "torchscript": write_torchscript, "exported": write_exported}


@torch.no_grad()
def export(classifier: ImageClassifier, export_format: str, out: Path) -> float | None:
    """Write the logits of ``classifier`` (its network, averaged with the mirror under
    ``flip_tta``) to ``out`` in ``export_format`` (atomically) after checking the written file
    against :meth:`~vision.module.ImageClassifier.classify` at :data:`CHECK_BATCHES` images;
    returns the largest absolute difference, or None when the ONNX check could not run (no
    onnxruntime)."""
    net = classifier.net.eval()
    model = FlipAveraged(net).eval() if classifier.hparams.flip_tta else net
    device = classifier.device
    with atomic_path(out) as tmp:
        run = WRITERS[export_format](model, example_images(net, EXAMPLE_BATCH, device), tmp, metadata(classifier))
        if run is None:
            return None
        # No TF32 in cuDNN's convolutions on a GPU (on by default there): the ONNX file runs in
        # float32 on the CPU, and TF32's rounding alone would exceed the tolerance.
        with torch.backends.cudnn.flags(enabled=torch.backends.cudnn.enabled, allow_tf32=False):
            worst = check(classifier, run, device)
    return worst


def check(classifier: ImageClassifier, run: Callable[[Tensor], Tensor], device: torch.device) -> float:
    """The largest absolute difference between ``run``'s logits and the classifier's at
    :data:`CHECK_BATCHES` images, refused above :data:`TOLERANCE`."""
    worst = 0.0
    for batch in CHECK_BATCHES:
        images = example_images(classifier.net, batch, device)
        expected, actual = classifier.classify(images).cpu(), run(images).cpu()
        torch.testing.assert_close(actual, expected, rtol=TOLERANCE, atol=TOLERANCE)
        worst = max(worst, float((actual - expected).abs().max()))
    return worst
