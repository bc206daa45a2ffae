"""``python -m nlp.export CKPT --format ctranslate2 [--quantization int8] --out DIR``: the trained
translation model as a CTranslate2 model directory, which ``python -m nlp.translate DIR`` runs as
it runs the checkpoint (C++ decoding, int8 weights on CPUs).

``DIR`` holds the network as a ``ctranslate2.specs.TransformerSpec`` (:mod:`nlp.export.spec`),
the checkpoint's ``tokenizer.json`` and ``translation.json`` with the special token ids, the
length limits and the checkpoint's decoding settings (:mod:`nlp.export.directory`). It is built
beside ``DIR`` and renamed into place after a check: probe sentence pairs are scored by the
written model and by the PyTorch model, whose log-probabilities must agree in float32; a
quantized export reports the largest difference. Needs ``pip install -e ".[ctranslate2]"``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from core.commands.arguments import ArgumentParser
from core.commands.exit import command
from nlp.export.directory import FORMAT, QUANTIZATIONS


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (``sys.argv[1:]`` when ``argv`` is None)."""
    parser = ArgumentParser(prog="python -m nlp.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a .ckpt file written by python -m nlp.train")
    parser.add_argument("--format", choices=[FORMAT], default=FORMAT, help=f"model format (default {FORMAT})")
    parser.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        default="float32",
        help="weight type: int8 for CPUs, float16 or int8_float16 for GPUs (default float32, exact)",
    )
    parser.add_argument("--out", type=Path, required=True, help="directory to write (created; must not hold other files)")
    parser.add_argument("--force", action="store_true", help="replace an earlier export at --out")
    return parser.parse_args(argv)


@command
def main(argv: list[str] | None = None) -> None:
    """Export the checkpoint and print what was written and how it was checked."""
    args = parse_args(argv)
    # torch, Lightning and ctranslate2 load after the arguments are read
    from nlp.module import load_translator
    from nlp.export.directory import require_ctranslate2
    from nlp.export.writer import export_ctranslate2

    require_ctranslate2(f"--format {args.format}")
    translator = load_translator(args.checkpoint)
    difference = export_ctranslate2(translator, args.out, args.quantization, args.force, str(args.checkpoint))
    check = "match the checkpoint's"
    if args.quantization != "float32":
        check = f"differ from the checkpoint's by {args.quantization} rounding"
    print(
        f"wrote {args.out} ({args.format}, {args.quantization}); its log-probabilities {check} "
        f"(max |difference| {difference:.1e} on probe sentences)"
    )

