"""Translate with a trained checkpoint: ``python -m nlp.translate CKPT [--beam 4] [--text "..."]``.

Without ``--text`` it reads sentences from stdin, one per line, and writes exactly one translation
per line to stdout, ``--batch-size`` lines at a time (empty lines stay empty). Input follows the
text input rule of :mod:`nlp.data.corpora`: bytes split at ``\n``, decoded as UTF-8, a byte sequence
that is not UTF-8 replaced by U+FFFD; the number of lines that held one is reported on stderr.
``--attention FILE.png`` also draws the cross-attention of the ``--text`` sentence's translation.
The checkpoint alone is enough: the tokenizer and the model configuration travel inside it.
A directory written by ``python -m nlp.export --format ctranslate2`` translates the same way with
CTranslate2 (same flags and defaults; ``--attention`` needs the checkpoint).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TYPE_CHECKING

from core.commands.arguments import ArgumentParser, add_device_option, png_path, positive_int
from core.commands.exit import command
from core.errors import InputError
from nlp.data.corpora import Utf8Lines
from nlp.export.directory import is_exported_model

if TYPE_CHECKING:
    from nlp.module import TranslationModule
    from nlp.export.translator import CTranslate2Translator


def one_line(text: str) -> str:
    """``text`` with any line break turned into a space, so one input line gives one output line."""
    return " ".join(text.splitlines()) if text else text


def translate_lines(
    translator: TranslationModule | CTranslate2Translator,
    lines: Iterable[str],
    beam_size: int,
    max_len: int | None,
    batch_size: int,
) -> Iterator[str]:
    """One translation per line of ``lines``, in order, decoded ``batch_size`` lines at a time;
    blank lines give empty translations."""
    iterator = iter(lines)
    while chunk := list(islice(iterator, batch_size)):
        filled = [line for line in chunk if line.strip()]
        translations = iter(translator.translate(filled, beam_size, max_len) if filled else [])
        yield from (one_line(next(translations)) if line.strip() else "" for line in chunk)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line of ``python -m nlp.translate``."""
    parser = ArgumentParser(prog="python -m nlp.translate", description=__doc__.splitlines()[0])
    parser.add_argument(
        "checkpoint", help="a .ckpt file written by python -m nlp.train, or a directory written by python -m nlp.export"
    )
    parser.add_argument("--text", action="append", help="a sentence to translate (repeatable); default: stdin lines")
    parser.add_argument(
        "--beam", type=positive_int, default=None, help="beam size; 1 decodes greedily (default: the checkpoint's beam_size)"
    )
    parser.add_argument(
        "--max-len", type=positive_int, default=None, help="most tokens per translation (default: the checkpoint's rule)"
    )
    parser.add_argument("--batch-size", type=positive_int, default=64, help="sentences decoded together (default: 64)")
    parser.add_argument(
        "--attention",
        type=png_path,
        metavar="FILE.png",
        help="also draw the cross-attention of the --text sentence's translation (source x target subwords)",
    )
    parser.add_argument(
        "--attention-layer",
        type=positive_int,
        metavar="N",
        help="draw only decoder layer N (from 1) instead of every layer",
    )
    add_device_option(parser)
    args = parser.parse_args(argv)
    if args.attention is not None and (not args.text or len(args.text) != 1):
        parser.error("--attention draws one sentence: give exactly one --text")
    if args.attention_layer is not None and args.attention is None:
        parser.error("--attention-layer chooses a layer of the --attention figure; give --attention FILE.png too")
    return args


def write_attention(translator: TranslationModule, args: argparse.Namespace) -> None:
    """Translate the one ``--text`` sentence, print it, and draw its cross-attention."""
    from nlp.analysis.alignment import cross_attention, draw_alignment

    alignment = cross_attention(translator, args.text[0], args.beam, args.max_len)
    print(one_line(alignment.translation), flush=True)
    written = draw_alignment(alignment, args.attention, args.attention_layer)
    print(f"wrote {written}", file=sys.stderr)


def load_exported(args: argparse.Namespace) -> CTranslate2Translator:
    """The exported directory ``args.checkpoint``, which cannot draw ``--attention``."""
    if args.attention is not None:
        raise InputError(
            f"--attention draws the PyTorch model's cross-attention, and {args.checkpoint} is an exported CTranslate2 "
            "model; pass the .ckpt it was exported from"
        )
    from nlp.export.translator import CTranslate2Translator

    return CTranslate2Translator(args.checkpoint, args.device)


@command
def main(argv: list[str] | None = None) -> None:
    """Translate ``--text`` sentences or stdin lines with a checkpoint, one line each to stdout."""
    args = parse_args(argv)
    if is_exported_model(args.checkpoint):
        translator: TranslationModule | CTranslate2Translator = load_exported(args)
        model_max_len, beam_size = translator.max_len, translator.beam_size
    else:
        # torch, Lightning and the model load after the arguments are read
        from nlp.analysis.alignment import check_layer
        from nlp.module import load_translator

        translator = load_translator(args.checkpoint, map_location=args.device).to(args.device)
        model_max_len, beam_size = translator.net.max_len, translator.hparams.beam_size
        check_layer(translator, args.attention_layer)
    if args.max_len is not None and args.max_len > model_max_len:
        raise InputError(f"--max-len must be in 1..{model_max_len} (the model's max_len), got {args.max_len}")
    if args.beam is None:
        args.beam = beam_size  # as nlp.evaluate: the decoding the run was tested with
    if args.attention is not None:
        write_attention(translator, args)
        return
    lines: Iterable[str] = args.text if args.text else Utf8Lines(sys.stdin.buffer)
    for translation in translate_lines(translator, lines, args.beam, args.max_len, args.batch_size):
        print(translation, flush=True)
    if isinstance(lines, Utf8Lines) and lines.replaced:
        print(
            f"warning: {lines.replaced} input line(s) held bytes that are not UTF-8; each invalid "
            "sequence was replaced by U+FFFD before translating",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
