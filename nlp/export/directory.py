"""The directory ``python -m nlp.export`` writes: its files, and reading its ``translation.json``.
Imports neither torch nor ctranslate2, so commands can recognize such a directory before any
heavy import.

``DIR`` holds CTranslate2's own files (``model.bin``, ``config.json``, the vocabulary), the
checkpoint's ``tokenizer.json`` and ``translation.json``: what translating needs besides the
network, i.e. the special token ids, the model's ``max_len``, the ``max_len`` sources are
encoded to, the checkpoint's decoding settings (beam, length penalty, length limit, n-gram
blocking) and the weight type.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import InputError

if TYPE_CHECKING:
    from nlp.data.tokenizer import SubwordTokenizer

FORMAT = "ctranslate2"
METADATA = "translation.json"
TOKENIZER = "tokenizer.json"
VERSION = 1  # of translation.json's layout
# ctranslate2.specs.model_spec.ACCEPTED_MODEL_TYPES, kept here so that --help needs no import of
# ctranslate2 (tests/nlp/test_export_ctranslate2.py compares the two).
QUANTIZATIONS = ("float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16")
DECODING_KEYS = ("beam_size", "length_penalty", "max_decode_len", "max_len_a", "max_len_b", "no_repeat_ngram_size")
EXPORT_AGAIN = "export the checkpoint again with python -m nlp.export"


def require_ctranslate2(what: str) -> None:
    """Refuse, naming the fix, when the optional package is missing."""
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        raise InputError(f"{what} needs the package ctranslate2: pip install -e \".[ctranslate2]\"") from None


def is_exported_model(path: str | Path) -> bool:
    """Whether ``path`` is a directory written by ``python -m nlp.export``."""
    return (Path(path) / METADATA).is_file()


def read_metadata(directory: str | Path) -> dict[str, Any]:
    """``translation.json`` of an exported directory, checked to be one this code reads."""
    path = Path(directory) / METADATA
    try:
        metadata = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{path} is not readable JSON ({error}); {EXPORT_AGAIN}") from None
    if not isinstance(metadata, dict) or metadata.get("format") != FORMAT or metadata.get("version") != VERSION:
        raise InputError(f"{path} does not describe a {FORMAT} export of version {VERSION}; {EXPORT_AGAIN}")
    missing = [key for key in ("max_len", "source_max_len", "quantization", "special_ids", "decoding") if key not in metadata]
    missing += [f"decoding.{key}" for key in DECODING_KEYS if key not in metadata.get("decoding", {})]
    if missing:
        raise InputError(f"{path} lacks {', '.join(missing)}; {EXPORT_AGAIN}")
    return metadata


def read_tokenizer(directory: Path, again: str) -> SubwordTokenizer:
    """``tokenizer.json`` of an exported directory, with one error naming it and ``again`` (how
    to export anew) when it is missing or unreadable."""
    from nlp.data.tokenizer import SubwordTokenizer

    path = directory / TOKENIZER
    if not path.is_file():
        raise InputError(f"{path} does not exist; {again}")
    try:
        return SubwordTokenizer.from_file(path)
    except Exception as error:  # noqa: BLE001 - tokenizers raises plain Exceptions for a file it cannot parse
        raise InputError(f"{path} is not a tokenizer this toolkit reads ({str(error)[:200]}); {again}") from None
