"""``python -m vision.export CKPT --format onnx|torchscript|exported --out FILE`` (or ``--format
safetensors --out DIR``): the trained Vision Transformer as a file that runs without this package,
or as weights others load.

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
    safetensors: the directory ``DIR`` with ``model.safetensors`` (timm's key names) and
        ``config.json`` (the architecture, classes and preprocessing), the way to share a model:
        ``vision.predict DIR``, ``vision.evaluate ckpt_path=DIR`` and, for the architectures timm
        has, ``timm.create_model("local-dir:DIR", pretrained=True)`` load it
        (:mod:`vision.export.safetensors_files`); an earlier export at ``DIR`` is replaced.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from core.commands.arguments import ArgumentParser, add_device_option
from core.commands.exit import command
from core.errors import InputError
from core.files.model_directory import FORMAT as DIRECTORY_FORMAT
from core.files.model_directory import check_output

SUFFIXES = {"onnx": ".onnx", "torchscript": ".pt", "exported": ".pt2"}
FORMATS = sorted([*SUFFIXES, DIRECTORY_FORMAT])

if TYPE_CHECKING:
    from vision.module import ImageClassifier


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (``sys.argv[1:]`` when ``argv`` is None)."""
    parser = ArgumentParser(prog="python -m vision.export", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "checkpoint", help="a checkpoint written by vision.train, or a directory written with --format safetensors"
    )
    parser.add_argument("--format", choices=FORMATS, default="onnx", help="file format (default onnx)")
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        help="file to write (.onnx, .pt for torchscript, .pt2 for exported), or the directory for safetensors",
    )
    add_device_option(parser)
    return parser.parse_args(argv)


def check_request(path: Path, export_format: str) -> None:
    """Refuse, before any work, an output path that is a directory (for safetensors: a file or a
    directory of other files), a ``.pt2``-less name for ``exported`` (which ``torch.export.load``
    reads only from ``.pt2`` files), and ``onnx`` without the packages its exporter needs."""
    if export_format == DIRECTORY_FORMAT:
        check_output(path, replace=True)
        return
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


def export_directory(classifier: ImageClassifier, out: Path) -> None:
    """Write the safetensors directory and say how it was checked and whether timm builds it."""
    from vision.export.formats import CHECK_BATCHES
    from vision.export.safetensors_files import export_safetensors, network_settings, timm_obstacle

    worst = export_safetensors(classifier, out)
    sizes = ", ".join(map(str, CHECK_BATCHES))
    obstacle = timm_obstacle(network_settings(classifier))
    timm = f"timm cannot build {obstacle}" if obstacle else f'timm.create_model("local-dir:{out}", pretrained=True) builds it'
    print(
        f"wrote {out} (model.safetensors, config.json); read back by vision.module.load_classifier, its logits match "
        f"the eager model at batch sizes {sizes} (max |difference| {worst:.1e}); {timm}"
    )


@command
def main(argv: list[str] | None = None) -> None:
    """Export the checkpoint's network and print what was written and how it was checked."""
    args = parse_args(argv)
    check_request(args.out, args.format)
    # torch, timm and Lightning load after the arguments are read
    from vision.export.formats import CHECK_BATCHES, export
    from vision.module import load_classifier

    classifier = load_classifier(args.checkpoint, args.device)
    if args.format == DIRECTORY_FORMAT:
        export_directory(classifier, args.out)
        return
    worst = export(classifier, args.format, args.out)
    if worst is None:
        print(f"wrote {args.out} (not checked: install onnxruntime to compare it with the eager model)")
    else:
        sizes = ", ".join(map(str, CHECK_BATCHES))
        print(f"wrote {args.out}; logits match the eager model at batch sizes {sizes} (max |difference| {worst:.1e})")
