"""Translate with a trained checkpoint: ``python -m nlp.translate CKPT [--beam 4] [--text "..."]``.

Without ``--text`` it reads sentences from stdin, one per line, and writes one translation per
line to stdout (empty lines stay empty). The checkpoint alone is enough: the tokenizer and the
model configuration travel inside it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator

import torch

from core.cli import positive_int
from nlp.module import TranslationModule, load_translator


def translate_lines(
    translator: TranslationModule,
    lines: list[str],
    beam_size: int,
    max_len: int | None,
    batch_size: int,
) -> Iterator[str]:
    """Translations of ``lines`` in order, decoded ``batch_size`` sentences at a time."""
    for start in range(0, len(lines), batch_size):
        chunk = lines[start : start + batch_size]
        filled = [line for line in chunk if line.strip()]
        translations = iter(translator.translate(filled, beam_size, max_len) if filled else [])
        yield from (next(translations) if line.strip() else "" for line in chunk)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line of ``python -m nlp.translate``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a .ckpt file written by python -m nlp.train")
    parser.add_argument("--text", action="append", help="a sentence to translate (repeatable); default: stdin lines")
    parser.add_argument("--beam", type=positive_int, default=4, help="beam size; 1 decodes greedily (default: 4)")
    parser.add_argument(
        "--max-len", type=positive_int, default=None, help="most tokens per translation (default: source length + 50)"
    )
    parser.add_argument("--batch-size", type=positive_int, default=64, help="sentences decoded together (default: 64)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="torch device")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Translate ``--text`` sentences or stdin lines with a checkpoint, one line each to stdout."""
    args = parse_args(argv)
    try:
        translator = load_translator(args.checkpoint, map_location=args.device).to(args.device)
    except (FileNotFoundError, ValueError) as error:
        sys.exit(f"error: {error}")
    if args.max_len is not None and args.max_len > translator.net.max_len:
        sys.exit(f"--max-len must be in 1..{translator.net.max_len} (the model's max_len), got {args.max_len}")
    lines = args.text if args.text else [line.rstrip("\n") for line in sys.stdin]
    for translation in translate_lines(translator, lines, args.beam, args.max_len, args.batch_size):
        print(translation, flush=True)


if __name__ == "__main__":
    main()
