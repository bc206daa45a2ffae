"""Translate with a trained checkpoint: ``python -m nlp.translate CKPT [--beam 4] [--text "..."]``.

Without ``--text`` it reads sentences from stdin, one per line, and writes exactly one translation
per line to stdout, ``--batch-size`` lines at a time (empty lines stay empty). Input follows the
text input rule of :mod:`nlp.data.corpora`: bytes split at ``\n``, decoded as UTF-8, a byte sequence
that is not UTF-8 replaced by U+FFFD; the number of lines that held one is reported on stderr.
``--attention FILE.png`` also draws the cross-attention of the ``--text`` sentence's translation.
The checkpoint alone is enough: the tokenizer and the model configuration travel inside it.
A directory written by ``python -m nlp.export --format ctranslate2`` translates the same way with
CTranslate2 (same flags and defaults; ``--attention`` needs the checkpoint).

``--prefix TEXT`` makes every translation start with ``TEXT`` (tokenized with the model's target
tokenizer, forced during decoding, after which decoding continues freely). ``--nbest N`` (at most
the beam size) prints the N best hypotheses of each input line instead of its translation, best
first, one per line: the line's number (from 0), the score the beam ranks by (the log-probability
of the tokens after the prefix divided by the GNMT length penalty of their number, ``</s>``
included) and the text, tab-separated; a blank input line has no hypotheses and prints nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, NamedTuple

from core.commands.arguments import ArgumentParser, add_device_option, png_path, positive_int, readable_text
from core.commands.exit import command
from core.errors import InputError
from nlp.data.corpora import Utf8Lines
from nlp.export.directory import is_exported_model

if TYPE_CHECKING:
    from nlp.decoding import Vocabulary
    from nlp.module import TranslationModule
    from nlp.export.translator import CTranslate2Translator

    Translator = TranslationModule | CTranslate2Translator


class Translation(NamedTuple):
    """One hypothesis of a sentence: its text (on one line) and the score the beam ranks it by."""

    text: str
    score: float


@dataclass(frozen=True)
class Decoding:
    """How sentences are decoded: the beam size (1: greedy), the length limit (None: the model's
    rule) and the target ids every translation starts with (:func:`prefix_ids`)."""

    beam_size: int
    max_len: int | None = None
    prefix: tuple[int, ...] = ()


def one_line(text: str) -> str:
    """``text`` with any line break turned into a space, so one input line gives one output line."""
    return " ".join(text.splitlines()) if text else text


def is_exported(translator: Translator) -> bool:
    """Whether ``translator`` is an exported CTranslate2 directory rather than a checkpoint."""
    from nlp.export.translator import CTranslate2Translator

    return isinstance(translator, CTranslate2Translator)


def prefix_ids(translator: Translator, text: str, name: str) -> tuple[int, ...]:
    """``text`` as target subword ids of ``translator``'s tokenizer, refused with an
    :class:`InputError` naming ``name`` (``--prefix``) where it cannot start a translation: more
    subwords than the model's ``max_len`` leaves room for."""
    from nlp.decoding import check_prefix

    ids = tuple(translator.tokenizer.encode(text))
    model: Vocabulary = translator if is_exported(translator) else translator.net
    check_prefix(model, [ids], 1, name)
    return ids


def hypotheses(translator: Translator, sentences: list[str], decoding: Decoding) -> list[list[Translation]]:
    """The hypotheses of each sentence, best first, from the checkpoint or the exported directory."""
    sources = translator.encode(sentences) if is_exported(translator) else translator.source_batch(sentences)
    prefix = [decoding.prefix] * len(sentences)
    found = translator.scored_hypotheses(sources, decoding.beam_size, decoding.max_len, prefix)
    decode = translator.tokenizer.decode
    return [[Translation(one_line(decode(tokens)), score) for tokens, score in ranked] for ranked in found]


def translate_lines(
    translator: Translator, lines: Iterable[str], decoding: Decoding, batch_size: int
) -> Iterator[list[Translation]]:
    """The hypotheses of each line of ``lines``, best first, in order, decoded ``batch_size``
    lines at a time; a blank line has none."""
    iterator = iter(lines)
    while chunk := list(islice(iterator, batch_size)):
        filled = [line for line in chunk if line.strip()]
        found = iter(hypotheses(translator, filled, decoding) if filled else [])
        yield from (next(found) if line.strip() else [] for line in chunk)


def print_translations(found: Iterable[list[Translation]], nbest: int | None) -> None:
    """Each line's best translation (an empty line for none), or with ``nbest`` its ``nbest`` best
    hypotheses as ``line number<TAB>score<TAB>text``."""
    for index, ranked in enumerate(found):
        if nbest is None:
            print(ranked[0].text if ranked else "", flush=True)
            continue
        for translation in ranked[:nbest]:
            print(f"{index}\t{translation.score:.4f}\t{translation.text}", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line of ``python -m nlp.translate``."""
    parser = ArgumentParser(prog="python -m nlp.translate", description=__doc__.splitlines()[0])
    parser.add_argument(
        "checkpoint", help="a .ckpt file written by python -m nlp.train, or a directory written by python -m nlp.export"
    )
    parser.add_argument(
        "--text", action="append", type=readable_text, help="a sentence to translate (repeatable); default: stdin lines"
    )
    parser.add_argument(
        "--beam", type=positive_int, default=None, help="beam size; 1 decodes greedily (default: the checkpoint's beam_size)"
    )
    parser.add_argument(
        "--max-len",
        type=positive_int,
        default=None,
        help="most tokens per translation after any --prefix (default: the checkpoint's rule)",
    )
    parser.add_argument("--batch-size", type=positive_int, default=64, help="sentences decoded together (default: 64)")
    parser.add_argument(
        "--nbest",
        type=positive_int,
        metavar="N",
        help="print the N best hypotheses of each line (N at most the beam size), one per line: line number from 0, "
        "score, text, tab-separated",
    )
    parser.add_argument(
        "--prefix",
        default="",
        type=readable_text,
        metavar="TEXT",
        help="text every translation starts with; decoding continues after it",
    )
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
    if args.attention is not None and (args.nbest is not None or args.prefix):
        parser.error("--attention draws the best translation without a prefix; leave out --nbest and --prefix")
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
    """Translate ``--text`` sentences or stdin lines with a checkpoint, one line each to stdout (or
    ``--nbest`` lines of hypotheses)."""
    args = parse_args(argv)
    if is_exported_model(args.checkpoint):
        translator: Translator = load_exported(args)
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
    if args.nbest is not None and args.nbest > args.beam:
        raise InputError(
            f"--nbest {args.nbest} is more than the beam size {args.beam}: beam search keeps {args.beam} hypotheses "
            f"per sentence; pass --beam {args.nbest} (or more), or a smaller --nbest"
        )
    if args.attention is not None:
        write_attention(translator, args)
        return
    decoding = Decoding(args.beam, args.max_len, prefix_ids(translator, args.prefix, "--prefix"))
    lines: Iterable[str] = args.text if args.text else Utf8Lines(sys.stdin.buffer)
    print_translations(translate_lines(translator, lines, decoding, args.batch_size), args.nbest)
    if isinstance(lines, Utf8Lines) and lines.replaced:
        print(
            f"warning: {lines.replaced} input line(s) held bytes that are not UTF-8; each invalid "
            "sequence was replaced by U+FFFD before translating",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
