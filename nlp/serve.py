"""``python -m nlp.serve CKPT_OR_DIR [--port 8000] [--max-batch-size 16] [--batch-timeout 0.01]``:
a trained translation model over HTTP, on LitServe. ``POST /translate`` takes ``{"text": "..."}``
or ``{"texts": [...]}`` (and optionally ``"beam"``, ``"prefix"``, ``"nbest"``) and answers what
``python -m nlp.translate`` prints for the same sentences and options, with ``"nbest"`` the best
hypotheses and their scores too; ``GET /health`` says whether it is ready.

The model is a checkpoint or a directory written by ``python -m nlp.export`` (CTranslate2, the
fast backend), loaded as ``nlp.translate`` loads it. Requests that arrive together are translated
as one batch (``--max-batch-size`` requests, waiting up to ``--batch-timeout`` seconds), those
with the same beam and prefix together. Each request is checked in the HTTP process before it is
queued: no empty text, at most ``MAX_TEXT_CHARS`` characters per text and ``MAX_TEXTS`` texts per
request, an ``nbest`` within the beam, a prefix of at most ``MAX_PREFIX_CHARS`` characters; the
worker refuses a prefix the model cannot start a translation with (more subwords than its
``max_len`` holds), answering that request alone while the rest of its batch is translated.
Needs ``pip install -e ".[serve]"``.
"""

from __future__ import annotations

import argparse
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.commands.arguments import ArgumentParser
from core.commands.exit import command
from core.errors import InputError
from core.serving.requests import (
    TOO_LARGE,
    UNUSABLE,
    BadRequest,
    item_name,
    known_keys,
    one_or_many,
    text_value,
    whole_number,
)
from core.serving.runner import add_server_options, require_free_port, require_litserve, serve

if TYPE_CHECKING:
    from core.serving.gate import Route
    from nlp.export.translator import CTranslate2Translator
    from nlp.module import TranslationModule
    from nlp.translate import Decoding, Translation

ROUTE = "/translate"
MAX_TEXTS = 64  # per request; nlp.translate decodes 64 lines together by default
MAX_TEXT_CHARS = 10_000  # per text; a model reads a few hundred subwords of it at most
MAX_BEAM = 32
MAX_PREFIX_CHARS = 1_000  # a model's translations hold a few hundred subwords at most
ROWS = 256  # hypotheses decoded together (sentences x beam): nlp.translate's 64 sentences at beam 4
EXAMPLE = '{"text": "winter is coming", "beam": 4}'
ONE, MANY = "text", "texts"
KEYS = (ONE, MANY, "beam", "nbest", "prefix")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (``sys.argv[1:]`` when ``argv`` is None)."""
    parser = ArgumentParser(prog="python -m nlp.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "checkpoint", help="a .ckpt file written by python -m nlp.train, or a directory written by python -m nlp.export"
    )
    add_server_options(parser)
    return parser.parse_args(argv)


def check_request(payload: dict[str, Any], default_beam: int) -> dict[str, Any]:
    """A request's JSON object, checked; returned as it came. ``default_beam`` is the beam of a
    request that sends none (the checkpoint's), which bounds its ``nbest``."""
    known_keys(payload, KEYS, EXAMPLE)
    texts, single = one_or_many(payload, ONE, MANY, MAX_TEXTS, EXAMPLE)
    for index, text in enumerate(texts):
        name = item_name(ONE, MANY, index, single)
        text_value(text, name, EXAMPLE)
        if not text.strip():
            raise BadRequest(UNUSABLE, f"{name} is empty; send a sentence to translate")
        if len(text) > MAX_TEXT_CHARS:
            raise BadRequest(
                TOO_LARGE, f"{name} has {len(text):,} characters, more than the {MAX_TEXT_CHARS:,} a text may have; "
                           "send it sentence by sentence"
            )
    beam = whole_number(payload, "beam", default_beam, MAX_BEAM)
    nbest = whole_number(payload, "nbest", 1, MAX_BEAM)
    if nbest > beam:
        raise BadRequest(
            UNUSABLE, f"'nbest' {nbest} is more than the beam {beam}, which keeps {beam} hypotheses per text; "
                      f"send 'beam': {nbest} (or more) with it, or a smaller 'nbest'"
        )
    check_prefix_text(payload.get("prefix", ""))
    return payload


def check_prefix_text(prefix: Any) -> None:
    """Refuse a ``prefix`` that is not a string of text or is over :data:`MAX_PREFIX_CHARS` characters."""
    text_value(prefix, "'prefix'", '{"text": "winter is coming", "prefix": "l\'hiver"}')
    if len(prefix) > MAX_PREFIX_CHARS:
        raise BadRequest(TOO_LARGE, f"'prefix' has {len(prefix):,} characters, more than the {MAX_PREFIX_CHARS:,} a "
                                    "prefix may have; send a shorter one")


@dataclass
class TextRequest:
    """A decoded request: its texts, how to decode them, the hypotheses wanted of each (None: the
    translation only) and whether it sent one text."""

    texts: list[str]
    decoding: Decoding
    nbest: int | None
    single: bool


def sentences_at_once(decoding: Decoding) -> int:
    """The sentences decoded together at ``decoding``'s beam: :data:`ROWS` hypotheses, at least one sentence."""
    return max(1, ROWS // decoding.beam_size)


class TranslatorHandler:
    """Translates batches of requests with the checkpoint or the exported directory
    (:class:`core.serving.api.Handler`)."""

    def __init__(self, checkpoint: str) -> None:
        self.checkpoint = checkpoint
        self.translator: Any = None
        self.beam_size = 1

    def setup(self, device: str) -> None:
        self.translator, self.beam_size = load(self.checkpoint, device)

    def decode(self, payload: dict[str, Any]) -> TextRequest:
        """The request's texts and decoding; a prefix the model cannot start a translation with is
        refused here (422), and the request answered apart from its batch (:mod:`core.serving.api`)."""
        from nlp.translate import Decoding, prefix_ids

        texts, single = ([payload[ONE]], True) if ONE in payload else (payload[MANY], False)
        try:
            prefix = prefix_ids(self.translator, payload.get("prefix", ""), "'prefix'")
        except InputError as error:
            raise BadRequest(UNUSABLE, str(error)) from None
        decoding = Decoding(payload.get("beam", self.beam_size), None, prefix)
        return TextRequest(texts, decoding, payload.get("nbest"), single)

    def predict(self, requests: list[TextRequest]) -> list[tuple[list[list[Translation]], TextRequest]]:
        """The hypotheses of every text of every request, the requests of one beam and prefix
        decoded together by :func:`nlp.translate.translate_lines`, :data:`ROWS` hypotheses at a
        time (the sentences x the beam), so that a wide beam holds the memory a narrow one does."""
        from nlp.translate import translate_lines

        groups: dict[Decoding, list[int]] = {}
        for index, request in enumerate(requests):
            groups.setdefault(request.decoding, []).append(index)
        found: dict[int, list[list[Translation]]] = {}
        for decoding, indices in groups.items():
            lines = [text for index in indices for text in requests[index].texts]
            translated = translate_lines(self.translator, lines, decoding, sentences_at_once(decoding))
            for index in indices:
                found[index] = [next(translated) for _ in requests[index].texts]
        return [(found[index], request) for index, request in enumerate(requests)]

    def encode(self, output: tuple[list[list[Translation]], TextRequest]) -> dict[str, Any]:
        """``{"translation": ...}`` or ``{"translations": [...]}``, and with ``nbest`` the best
        hypotheses of each text under ``"hypotheses"``."""
        found, request = output
        translations = [ranked[0].text for ranked in found]
        answer: dict[str, Any] = {"translation": translations[0]} if request.single else {"translations": translations}
        if request.nbest is not None:
            best = [
                [{"translation": text, "score": score} for text, score in ranked[: request.nbest]] for ranked in found
            ]
            answer["hypotheses"] = best[0] if request.single else best
        return answer


def load(checkpoint: str, device: str) -> tuple[TranslationModule | CTranslate2Translator, int]:
    """The translator of a checkpoint or an exported directory on ``device``, loaded as
    ``nlp.translate`` loads it, and its default beam size (the checkpoint's ``beam_size``)."""
    from nlp.export.directory import is_exported_model
    from nlp.translate import load_exported

    if is_exported_model(checkpoint):
        exported = load_exported(argparse.Namespace(checkpoint=checkpoint, device=device, attention=None))
        return exported, exported.beam_size
    from nlp.module import load_translator

    translator = load_translator(checkpoint, map_location=device).to(device)
    return translator, translator.hparams.beam_size


def route(beam_size: int) -> Route:
    """The gate's checks of ``POST /translate`` (JSON only); ``beam_size`` is the model's default beam."""
    from core.serving.gate import Route

    return Route(EXAMPLE, functools.partial(check_request, default_beam=beam_size))


@command
def main(argv: list[str] | None = None) -> None:
    """Serve the checkpoint or exported directory until SIGTERM or Ctrl-C."""
    args = parse_args(argv)
    if not Path(args.checkpoint).exists():  # before the heavy imports
        raise FileNotFoundError(
            f"{args.checkpoint} does not exist; pass a .ckpt file or a directory written by python -m nlp.export"
        )
    from nlp.export.directory import is_exported_model
    from nlp.export.translator import ctranslate2_device

    exported = is_exported_model(args.checkpoint)
    if exported:
        ctranslate2_device(args.device)  # mps is refused here, not by the worker that loads it
    require_litserve()
    require_free_port(args.host, args.port)
    translator, beam_size = load(args.checkpoint, "cpu")  # a bad model ends here, with one error: line
    backend = "ctranslate2" if exported else "pytorch"
    metadata = {"checkpoint": str(args.checkpoint), "backend": backend, "beam_size": beam_size}
    del translator
    serve(TranslatorHandler(args.checkpoint), ROUTE, route(beam_size), args, metadata)


if __name__ == "__main__":
    main()
