"""``python -m vision.export CKPT --format onnx|torchscript|exported --out FILE``: the trained
Vision Transformer as a file that runs without this package.

The exported network maps normalized images [batch, 3, H, W] at the checkpoint's image size to
logits [batch, classes]; the batch dimension is dynamic. Preprocessing (resize, crop, mean/std)
and the class names travel with the file as JSON (``data_config`` and ``class_names``: ONNX
metadata properties; extra files ``data_config.json`` / ``class_names.json`` of the TorchScript
or ``torch.export`` archive). Before the file is moved into place, it is loaded back and its logits
are compared with the eager model's at several batch sizes.

Formats:
    onnx: ``torch.onnx.export`` (the ``torch.export``-based exporter); needs ``onnx`` and
        ``onnxscript``, and ``onnxruntime`` for the check (skipped, with a note, without it).
    torchscript: ``torch.jit.trace``; loads with ``torch.jit.load``.
    exported: ``torch.export.export`` saved with ``torch.export.save`` (a ``.pt2`` archive);
        loads with ``torch.export.load``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from core.training.atomic import atomic_path
from core.training.cli import ArgumentParser, add_device_option, command
from core.training.errors import InputError
from vision.inference import data_config, load_classifier
from vision.model import VisionTransformer
from vision.module import ImageClassifier

SUFFIXES = {"onnx": ".onnx", "torchscript": ".pt", "exported": ".pt2"}
EXAMPLE_BATCH = 2  # torch.export specializes sizes 0 and 1, so the traced example has 2 images
CHECK_BATCHES = (1, 3, 8)
TOLERANCE = 1e-4  # relative and absolute, on logits


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (``sys.argv[1:]`` when ``argv`` is None)."""
    parser = ArgumentParser(prog="python -m vision.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a checkpoint written by vision.train")
    parser.add_argument("--format", choices=sorted(SUFFIXES), default="onnx", help="file format (default onnx)")
    parser.add_argument(
        "--out", type=Path, required=True, help="file to write (.onnx, .pt for torchscript, .pt2 for exported)"
    )
    add_device_option(parser)
    return parser.parse_args(argv)


def check_request(path: Path, export_format: str) -> None:
    """Refuse, before any work, an output path that is a directory, a ``.pt2``-less name for
    ``exported`` (which ``torch.export.load`` reads only from ``.pt2`` files), and ``onnx``
    without the packages its exporter needs."""
    missing = [name for name in ("onnx", "onnxscript") if importlib.util.find_spec(name) is None]
    if export_format == "onnx" and missing:
        raise InputError(
            f"--format onnx needs the packages {', '.join(missing)}: pip install -e \".[export]\" "
            "(or choose --format exported)"
        )
    if path.is_dir():
        raise InputError(f"--out {path} is a directory; pass a file name such as {path / 'model'}{SUFFIXES[export_format]}")
    if export_format == "exported" and path.suffix != ".pt2":
        raise InputError(f"--out {path}: torch.export archives must end in .pt2; use {path.with_suffix('.pt2')}")


def metadata(classifier: ImageClassifier) -> dict[str, str]:
    """What a user of the exported file needs besides the network, as JSON strings: the
    checkpoint's evaluation data config (the arguments of :func:`vision.transforms.eval_transform`)
    and the class names in logit order."""
    return {
        "data_config": json.dumps(data_config(classifier)),
        "class_names": json.dumps(list(classifier.hparams.class_names)),
    }


def example_images(net: VisionTransformer, batch: int, device: torch.device | str) -> Tensor:
    """Random normalized images [batch, 3, H, W] at the network's size."""
    generator = torch.Generator().manual_seed(batch)
    return torch.randn(batch, net.patch_embed.in_chans, *net.img_size, generator=generator).to(device)


def write_onnx(net: VisionTransformer, example: Tensor, path: Path, extra: dict[str, str]) -> Callable[[Tensor], Tensor] | None:
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


def write_torchscript(net: VisionTransformer, example: Tensor, path: Path, extra: dict[str, str]) -> Callable[[Tensor], Tensor]:
    """A traced TorchScript module. The image size is fixed, so the tracer's warnings about shape
    checks that became constants are expected; torch's notice that TorchScript is deprecated (in
    favour of ``exported``) is known to whoever picks this format. Both are silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", FutureWarning)
        traced = torch.jit.trace(net, example)
        torch.jit.save(traced, str(path), _extra_files={f"{key}.json": value for key, value in extra.items()})
        return torch.jit.load(str(path), map_location=example.device)


def write_exported(net: VisionTransformer, example: Tensor, path: Path, extra: dict[str, str]) -> Callable[[Tensor], Tensor]:
    """A ``torch.export`` program with a dynamic batch dimension, saved as a ``.pt2`` archive."""
    batch = torch.export.Dim("batch", min=1)
    program = torch.export.export(net, (example,), dynamic_shapes=({0: batch},))
    torch.export.save(program, path, extra_files={f"{key}.json": value for key, value in extra.items()})
    return torch.export.load(path).module()


WRITERS = {"onnx": write_onnx, "torchscript": write_torchscript, "exported": write_exported}


@torch.no_grad()
def export(classifier: ImageClassifier, export_format: str, out: Path) -> float | None:
    """Write ``classifier.net`` to ``out`` in ``export_format`` (atomically) after checking the
    written file against the eager logits at :data:`CHECK_BATCHES` images; returns the largest
    absolute difference, or None when the ONNX check could not run (no onnxruntime)."""
    net = classifier.net.eval()
    device = classifier.device
    with atomic_path(out) as tmp:
        run = WRITERS[export_format](net, example_images(net, EXAMPLE_BATCH, device), tmp, metadata(classifier))
        if run is None:
            return None
        worst = 0.0
        for batch in CHECK_BATCHES:
            images = example_images(net, batch, device)
            expected, actual = net(images).cpu(), run(images).cpu()
            torch.testing.assert_close(actual, expected, rtol=TOLERANCE, atol=TOLERANCE)
            worst = max(worst, float((actual - expected).abs().max()))
    return worst


@command
def main(argv: list[str] | None = None) -> None:
    """Export the checkpoint's network and print what was written and how it was checked."""
    args = parse_args(argv)
    check_request(args.out, args.format)
    classifier = load_classifier(args.checkpoint, args.device)
    worst = export(classifier, args.format, args.out)
    if worst is None:
        print(f"wrote {args.out} (not checked: install onnxruntime to compare it with the eager model)")
    else:
        sizes = ", ".join(map(str, CHECK_BATCHES))
        print(f"wrote {args.out}; logits match the eager model at batch sizes {sizes} (max |difference| {worst:.1e})")


if __name__ == "__main__":
    main()
