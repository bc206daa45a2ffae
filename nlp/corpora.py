"""Readers of parallel corpora: TSV files, plain parallel files and Hugging Face datasets.

Each returns a list of ``(source, target)`` sentence pairs. Unusable lines (empty on a side,
wrong number of fields) are skipped and counted in one warning per file, so a few bad lines in a
large corpus do not stop a run, while a file that yields nothing is an error.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

Pair = tuple[str, str]

log = logging.getLogger(__name__)


def keep_pair(source: str, target: str) -> bool:
    """Whether both sides of a pair hold text."""
    return bool(source.strip()) and bool(target.strip())


def finish(pairs: list[Pair], skipped: int, name: str, fix: str) -> list[Pair]:
    """Warn about skipped lines and refuse a corpus without any pair."""
    if skipped:
        log.warning("%s: skipped %d empty or malformed line(s), kept %d pair(s)", name, skipped, len(pairs))
    if not pairs:
        raise ValueError(f"{name} contains no sentence pairs; {fix}")
    return pairs


def read_tsv(path: str | Path) -> list[Pair]:
    """``source<TAB>target`` per line, UTF-8."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"corpus file {path} does not exist")
    pairs: list[Pair] = []
    skipped = 0
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) == 2 and keep_pair(*fields):
                pairs.append((fields[0].strip(), fields[1].strip()))
            else:
                skipped += 1
    return finish(pairs, skipped, str(path), "expected one 'source<TAB>target' pair per line")


def read_parallel(prefix: str | Path, src_lang: str, tgt_lang: str) -> list[Pair]:
    """Line-aligned files ``PREFIX.SRC_LANG`` and ``PREFIX.TGT_LANG`` (the fairseq/Moses layout)."""
    src_path, tgt_path = Path(f"{prefix}.{src_lang}"), Path(f"{prefix}.{tgt_lang}")
    for path in (src_path, tgt_path):
        if not path.is_file():
            raise FileNotFoundError(
                f"corpus file {path} does not exist; pass a TSV file or a prefix P with files "
                f"P.{src_lang} and P.{tgt_lang} (set data.src_lang / data.tgt_lang)"
            )
    sources = src_path.read_text(encoding="utf-8").splitlines()
    targets = tgt_path.read_text(encoding="utf-8").splitlines()
    if len(sources) != len(targets):
        raise ValueError(
            f"{src_path} has {len(sources)} lines but {tgt_path} has {len(targets)}; parallel files "
            "must be line-aligned"
        )
    pairs = [(s.strip(), t.strip()) for s, t in zip(sources, targets) if keep_pair(s, t)]
    return finish(pairs, len(sources) - len(pairs), f"{src_path} / {tgt_path}", "both files are empty")


def read_corpus(path: str | Path, src_lang: str, tgt_lang: str) -> list[Pair]:
    """A TSV file when ``path`` is a file, otherwise a prefix of two parallel files."""
    return read_tsv(path) if Path(path).is_file() else read_parallel(path, src_lang, tgt_lang)


def load_hf_dataset(dataset: str, config: str | None, split: str | None = None) -> Any:
    """``datasets.load_dataset``, with its download and lookup failures told in terms of the data
    options. Without ``split`` it returns every split (a ``DatasetDict``); either way the download
    cache is filled, and a cached dataset loads without converting anything."""
    from datasets import load_dataset

    try:
        return load_dataset(dataset, config, split=split)
    except (ConnectionError, OSError, FileNotFoundError) as error:
        raise RuntimeError(
            f"could not load Hugging Face dataset {dataset!r} (config {config!r}, split {split!r}): "
            f"{error}. It is downloaded on first use, so the first run needs internet access (or a "
            "filled HF_DATASETS_CACHE); offline, use data=files with local corpus files or data=toy"
        ) from None
    except ValueError as error:
        raise ValueError(f"Hugging Face dataset {dataset!r} has no split {split!r} or config {config!r}: {error}") from None


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
        raise ValueError(
            f"Hugging Face dataset {dataset!r} has columns {columns}, with neither a 'translation' column "
            f"nor columns {src_lang!r} and {tgt_lang!r}; set data.src_lang / data.tgt_lang"
        )
    pairs: list[Pair] = []
    for record in records:
        if src_lang not in record or tgt_lang not in record:
            raise ValueError(
                f"Hugging Face dataset {dataset!r} pairs hold languages {sorted(record)}, not "
                f"{src_lang!r} -> {tgt_lang!r}; set data.src_lang / data.tgt_lang"
            )
        source, target = record[src_lang] or "", record[tgt_lang] or ""
        if keep_pair(source, target):
            pairs.append((source.strip(), target.strip()))
    return finish(pairs, len(records) - len(pairs), f"{dataset} [{split}]", "choose another split or dataset")
