"""Readers of parallel corpora: TSV files, plain parallel files and Hugging Face datasets.

Each returns a list of ``(source, target)`` sentence pairs. Unusable lines (empty on a side,
wrong number of fields) are skipped and counted in one warning per file (given once per process,
however often the file is streamed), so a few bad lines in a large corpus do not stop a run,
while a file that yields nothing is an error.

Text input rule (the same for ``nlp.translate``'s standard input): files are read as bytes and
split at ``\n`` only, like Moses and fairseq do; each line is decoded as UTF-8, a byte sequence
that is not UTF-8 becomes U+FFFD (the replacement character), and the lines that held one are
counted in one warning per file. A bad byte never stops a run nor shifts parallel lines.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from itertools import zip_longest
from pathlib import Path
from typing import Any, BinaryIO

from core.errors import InputError

Pair = tuple[str, str]

log = logging.getLogger(__name__)

# The corpus warnings this process has given: a training split is streamed twice when the
# tokenizer is trained on it (once for the tokenizer, once to encode it), and warns once.
GIVEN_WARNINGS: set[str] = set()


def warn_once(message: str, *args: Any) -> None:
    """Log ``message % args`` as a warning unless this process has given it already."""
    text = message % args
    if text not in GIVEN_WARNINGS:
        GIVEN_WARNINGS.add(text)
        log.warning(text)


def keep_pair(source: str, target: str) -> bool:
    """Whether both sides of a pair hold text."""
    return bool(source.strip()) and bool(target.strip())


class Utf8Lines:
    """The lines of a byte stream as text: split at ``\n`` only (a U+2028 or U+0085 inside a
    sentence does not end it), the trailing ``\n`` or ``\r\n`` and a leading byte-order mark
    removed, decoded as UTF-8 with invalid sequences replaced by U+FFFD; ``replaced`` counts the
    lines that held one."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.replaced = 0

    def __iter__(self) -> Iterator[str]:
        for number, raw in enumerate(self.stream):
            raw = raw.rstrip(b"\r\n")
            if number == 0:
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError:
                self.replaced += 1
                yield raw.decode("utf-8", errors="replace")


def warn_replaced(path: Path, replaced: int) -> None:
    """One warning for the lines of ``path`` that held bytes that are not UTF-8."""
    if replaced:
        warn_once(
            "%s: %d line(s) held bytes that are not UTF-8; each invalid sequence was replaced by U+FFFD "
            "(convert the file to UTF-8, e.g. with iconv, to keep those characters)",
            path,
            replaced,
        )


def iter_lines(path: Path) -> Iterator[str]:
    """The lines of a text file under the text input rule, streamed, warning once at the end if
    any byte was not UTF-8."""
    with path.open("rb") as handle:
        lines = Utf8Lines(handle)
        yield from lines
    warn_replaced(path, lines.replaced)


def read_lines(path: Path) -> list[str]:
    """The lines of a text file under the text input rule (:func:`iter_lines`)."""
    return list(iter_lines(path))


def finish(kept: int, skipped: int, name: str, fix: str) -> None:
    """Warn about skipped lines and refuse a corpus without any pair."""
    if skipped:
        warn_once("%s: skipped %d empty or malformed line(s), kept %d pair(s)", name, skipped, kept)
    if not kept:
        raise InputError(f"{name} contains no sentence pairs; {fix}")


def iter_tsv(path: str | Path) -> Iterator[Pair]:
    """``source<TAB>target`` per line, UTF-8 (see the text input rule above), streamed: a corpus
    of any size passes through in constant memory."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"corpus file {path} does not exist")
    kept = skipped = 0
    for line in iter_lines(path):
        fields = line.split("\t")
        if len(fields) == 2 and keep_pair(*fields):
            kept += 1
            yield fields[0].strip(), fields[1].strip()
        else:
            skipped += 1
    finish(kept, skipped, str(path), "expected one 'source<TAB>target' pair per line")


def iter_parallel(prefix: str | Path, src_lang: str, tgt_lang: str) -> Iterator[Pair]:
    """Line-aligned files ``PREFIX.SRC_LANG`` and ``PREFIX.TGT_LANG`` (the fairseq/Moses layout),
    streamed side by side."""
    src_path, tgt_path = Path(f"{prefix}.{src_lang}"), Path(f"{prefix}.{tgt_lang}")
    for path in (src_path, tgt_path):
        if not path.is_file():
            raise FileNotFoundError(
                f"corpus file {path} does not exist; pass a TSV file or a prefix P with files "
                f"P.{src_lang} and P.{tgt_lang} (set data.src_lang / data.tgt_lang)"
            )
    kept = lines = 0
    for lines, (source, target) in enumerate(zip_longest(iter_lines(src_path), iter_lines(tgt_path)), start=1):
        if source is None or target is None:
            raise InputError(
                f"{src_path} and {tgt_path} differ in length (one ends at line {lines - 1}); parallel files "
                "must be line-aligned"
            )
        if keep_pair(source, target):
            kept += 1
            yield source.strip(), target.strip()
    finish(kept, lines - kept, f"{src_path} / {tgt_path}", "each line needs text on both sides (the files are empty, or one side's lines are blank)")


def iter_corpus(path: str | Path, src_lang: str, tgt_lang: str) -> Iterator[Pair]:
    """A TSV file when ``path`` is a file, otherwise a prefix of two parallel files; streamed."""
    return iter_tsv(path) if Path(path).is_file() else iter_parallel(path, src_lang, tgt_lang)


def read_corpus(path: str | Path, src_lang: str, tgt_lang: str) -> list[Pair]:
    """The pairs of :func:`iter_corpus` as a list."""
    return list(iter_corpus(path, src_lang, tgt_lang))


def load_hf_dataset(dataset: str, config: str | None, split: str | None = None) -> Any:
    """``datasets.load_dataset``, with its download and lookup failures told in terms of the data
    options. Without ``split`` it returns every split (a ``DatasetDict``); either way the download
    cache is filled, and a cached dataset loads without converting anything."""
    from datasets import load_dataset

    try:
        return load_dataset(dataset, config, split=split)
    except (ConnectionError, OSError, FileNotFoundError) as error:
        raise InputError(
            f"could not load Hugging Face dataset {dataset!r} (config {config!r}, split {split!r}): "
            f"{error}. It is downloaded on first use, so the first run needs internet access (or a "
            "filled HF_DATASETS_CACHE); offline, use data=gettext (the machine's own gettext "
            "catalogs, English -> data.tgt_lang) or data=files with local corpus files"
        ) from None
    except ValueError as error:
        raise InputError(f"Hugging Face dataset {dataset!r} has no split {split!r} or config {config!r}: {error}") from None


def load_hf_split(
    dataset: str,
    config: str | None,
    split: str,
    src_lang: str,
    tgt_lang: str,
    limit: int | None = None,
) -> list[Pair]:
    """One split of a Hugging Face parallel dataset, downloaded and cached on first use.

    Two layouts are understood: one column per language (``bentrevett/multi30k``: ``de``,
    ``en``) and a ``translation`` column of ``{lang: sentence}`` dicts (``wmt/wmt14``, ``iwslt2017``).
    """
    selection = split if limit is None else f"{split}[:{limit}]"
    rows = load_hf_dataset(dataset, config, selection)
    columns = rows.column_names
    if "translation" in columns:
        records: list[dict[str, Any]] = rows["translation"]
    elif src_lang in columns and tgt_lang in columns:
        records = rows.select_columns([src_lang, tgt_lang]).to_list()
    else:
        raise InputError(
            f"Hugging Face dataset {dataset!r} has columns {columns}, with neither a 'translation' column "
            f"nor columns {src_lang!r} and {tgt_lang!r}; set data.src_lang / data.tgt_lang"
        )
    pairs: list[Pair] = []
    for record in records:
        if src_lang not in record or tgt_lang not in record:
            raise InputError(
                f"Hugging Face dataset {dataset!r} pairs hold languages {sorted(record)}, not "
                f"{src_lang!r} -> {tgt_lang!r}; set data.src_lang / data.tgt_lang"
            )
        source, target = record[src_lang] or "", record[tgt_lang] or ""
        if keep_pair(source, target):
            pairs.append((source.strip(), target.strip()))
    finish(len(pairs), len(records) - len(pairs), f"{dataset} [{split}]", "choose another split or dataset")
    return pairs
