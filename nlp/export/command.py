"""``python -m nlp.export CKPT --format ctranslate2 [--quantization int8] --out DIR`` (or ``--format
safetensors --out DIR``): the trained translation model as a directory that ``python -m
nlp.translate DIR`` runs as it runs the checkpoint: a CTranslate2 model (C++ decoding, int8
weights on CPUs) or the weights as others load them.

ctranslate2: ``DIR`` holds the network as a ``ctranslate2.specs.TransformerSpec``
(:mod:`nlp.export.spec`), the checkpoint's ``tokenizer.json`` and ``translation.json`` with the
special token ids, the length limits and the checkpoint's decoding settings
(:mod:`nlp.export.directory`). The check scores probe sentence pairs with the written model and
with the PyTorch model, whose log-probabilities must agree in float32; a quantized export reports
the largest difference. Needs ``pip install -e ".[ctranslate2]"``.

safetensors: ``DIR`` holds ``model.safetensors``, ``config.json`` and ``tokenizer.json``
(:mod:`nlp.export.safetensors_files`), the way to share a model: ``nlp.module.load_translator``
reads it back, and so ``nlp.translate``, ``nlp.evaluate`` and ``nlp.serve``. The check reads it
back and compares the logits on probe sentences.

Either directory is built beside ``DIR`` and renamed into place after its check.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from core.commands.arguments import ArgumentParser
from core.commands.exit import command
from core.errors import InputError
from core.files.model_directory import FORMAT as SAFETENSORS
from core.files.model_directory import check_output
from nlp.export.directory import FORMAT, QUANTIZATIONS


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (``sys.argv[1:]`` when ``argv`` is None)."""
    parser = ArgumentParser(prog="python -m nlp.export", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "checkpoint", help="a .ckpt file written by python -m nlp.train, or a directory written with --format safetensors"
    )
    parser.add_argument("--format", choices=[FORMAT, SAFETENSORS], default=FORMAT, help=f"model format (default {FORMAT})")
    parser.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        help="ctranslate2's weight type: int8 for CPUs, float16 or int8_float16 for GPUs (default float32, exact)",
    )
    parser.add_argument("--out", type=Path, required=True, help="directory to write (created; must not hold other files)")
    parser.add_argument("--force", action="store_true", help="replace an earlier export at --out")
    return parser.parse_args(argv)


def export_directory(checkpoint: str, out: Path, force: bool) -> None:
    """Write the safetensors directory of ``checkpoint`` and say how it was checked."""
    from nlp.export.safetensors_files import export_safetensors
    from nlp.module import load_translator

    difference = export_safetensors(load_translator(checkpoint), out, force)
    print(
        f"wrote {out} ({SAFETENSORS}: model.safetensors, config.json, tokenizer.json); read back by "
        f"nlp.module.load_translator, its logits match the checkpoint's (max |difference| {difference:.1e} on probe sentences)"
    )


@command
def main(argv: list[str] | None = None) -> None:
    """Export the checkpoint and print what was written and how it was checked."""
    args = parse_args(argv)
    if args.format == SAFETENSORS:
        if args.quantization is not None:
            raise InputError(f"--quantization applies to --format {FORMAT}; {SAFETENSORS} keeps the float32 weights")
        check_output(args.out, args.force)
        export_directory(args.checkpoint, args.out, args.force)
        return
    # torch, Lightning and ctranslate2 load after the arguments are read
    from nlp.module import load_translator
    from nlp.export.directory import require_ctranslate2
    from nlp.export.writer import export_ctranslate2

    quantization = args.quantization or "float32"
    require_ctranslate2(f"--format {args.format}")
    translator = load_translator(args.checkpoint)
    difference = export_ctranslate2(translator, args.out, quantization, args.force, str(args.checkpoint))
    check = "match the checkpoint's"
    if quantization != "float32":
        check = f"differ from the checkpoint's by {quantization} rounding"
    print(
        f"wrote {args.out} ({args.format}, {quantization}); its log-probabilities {check} "
        f"(max |difference| {difference:.1e} on probe sentences)"
    )
