"""Data prepared once: a corpus's tokenizer and encoded splits in a cache, memory-mapped by every
process (after fairseq's ``MMapIndexedDataset`` and nanoGPT's ``prepare.py``).

One directory per fingerprint of the inputs (corpus files by path, size and modification time,
languages, vocabulary settings, ``max_len``, a given tokenizer by content), under
``data.cache_dir`` (:func:`core.files.data_cache.cache_root`)::

    <cache_dir>/nlp/<fingerprint>/
        tokenizer.json        the BPE tokenizer, trained once on the training split
        meta.json             splits, pair counts, truncations, token dtype (written last)
        <split>.src.bin       source ids ``x </s>`` of every pair, back to back (uint16 when the
        <split>.tgt.bin       vocabulary fits, else int32); targets ``<s> y </s>``
        <split>.idx.npy       int64 offsets [pairs + 1, 2] of each pair's source and target

The first process to need a directory builds it under a file lock kept beside it (on shared
storage that also serializes the nodes), streaming the corpus in chunks, so neither the text nor
the ids are ever held whole; it writes to a temporary directory renamed into place when
complete (and removes any such directory that a build killed midway left). Every other process,
and every later run, waits for the lock and then only maps the files: ``np.memmap`` pages are
shared by the processes of a machine, and a pickled split (a DataLoader worker, a spawned rank)
carries its path only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.data import Dataset

from core.files.data_cache import cache_error, cache_lock, file_version
from core.errors import InputError
from nlp.data.corpora import Pair
from nlp.data.encoding import encode_flat
from nlp.data.tokenizer import SubwordTokenizer, train_tokenizer

log = logging.getLogger(__name__)

FORMAT_VERSION = 2  # 2: a special token's string in a text is encoded as its characters
CHUNK_PAIRS = 20_000  # pairs encoded at a time while preparing
STAGING = ".staging-"  # a directory is built in ".<name>.staging-<random>" beside it

Example = tuple[np.ndarray, np.ndarray]


def file_stamp(path: Path) -> list[Any]:
    """A file's resolved path and its version (:func:`core.files.data_cache.file_version`)."""
    return [str(path.resolve()), *file_version(path)]


def content_hash(path: Path) -> str:
    """SHA-1 of a (small) file's bytes."""
    return hashlib.sha1(path.read_bytes()).hexdigest()


def fingerprint(inputs: dict[str, Any]) -> str:
    """A short key of the JSON of ``inputs`` and the cache format."""
    text = json.dumps({"format": FORMAT_VERSION, **inputs}, sort_keys=True, default=str)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:20]


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits (as fairseq chooses), else int32."""
    return np.dtype(np.uint16) if vocab_size <= np.iinfo(np.uint16).max + 1 else np.dtype(np.int32)


def chunks(pairs: Iterable[Pair], size: int) -> Iterator[list[Pair]]:
    """``pairs`` in lists of at most ``size``."""
    iterator = iter(pairs)
    while chunk := list(islice(iterator, size)):
        yield chunk


def write_split(
    directory: Path, split: str, pairs: Iterable[Pair], tokenizer: SubwordTokenizer, max_len: int, dtype: np.dtype
) -> dict[str, int]:
    """Encode ``pairs`` chunk by chunk into ``<split>.src.bin``, ``<split>.tgt.bin`` and
    ``<split>.idx.npy``; the pair count and how many were truncated to ``max_len``."""
    ends = np.zeros((1, 2), dtype=np.int64)
    offsets = [ends]
    count = truncated = 0
    with open(directory / f"{split}.src.bin", "wb") as src_file, open(directory / f"{split}.tgt.bin", "wb") as tgt_file:
        for chunk in chunks(pairs, CHUNK_PAIRS):
            sources, source_lengths, source_cut = encode_flat(tokenizer, [s for s, _ in chunk], max_len, False, dtype)
            targets, target_lengths, target_cut = encode_flat(tokenizer, [t for _, t in chunk], max_len, True, dtype)
            sources.tofile(src_file)
            targets.tofile(tgt_file)
            ends = ends[-1] + np.cumsum(np.stack([source_lengths, target_lengths], axis=1), axis=0)  # [chunk, 2]
            offsets.append(ends)
            count += len(chunk)
            truncated += int((source_cut | target_cut).sum())
    np.save(directory / f"{split}.idx.npy", np.concatenate(offsets))
    return {"pairs": count, "truncated": truncated}


def reused_tokenizer(path: str) -> SubwordTokenizer:
    """The tokenizer of ``data.tokenizer_path``; a file that is not one (or lacks the special
    tokens) is refused naming the setting."""
    try:
        return SubwordTokenizer.from_file(path)
    except Exception as error:  # tokenizers raises a bare Exception for a file it cannot parse
        raise InputError(
            f"data.tokenizer_path={path} is not a usable tokenizer ({str(error).splitlines()[0]}); pass a "
            "tokenizer.json written by SubwordTokenizer.save or found in the data cache, or "
            "data.tokenizer_path=null to train one"
        ) from None


def remove_leftovers(directory: Path) -> None:
    """Remove the temporary directories of ``directory`` that builds killed midway (``kill -9``, a
    lost node) left beside it. :func:`build` runs under the directory's lock, so none of them is
    being written."""
    for leftover in directory.parent.glob(f".{directory.name}{STAGING}*"):
        log.info("removing %s, left by a preparation that was killed", leftover)
        shutil.rmtree(leftover, ignore_errors=True)


def build(
    directory: Path,
    splits: dict[str, Callable[[], Iterable[Pair]]],
    tokenizer_path: str | None,
    vocab_size: int,
    min_frequency: int,
    max_len: int,
) -> None:
    """Train (or copy) the tokenizer and encode every split into ``directory``, through a
    temporary directory beside it that is renamed into place when complete. ``splits`` maps a
    split name to a function that streams its pairs anew."""
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        remove_leftovers(directory)
        staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}{STAGING}", dir=directory.parent))
    except OSError as error:
        raise cache_error(directory.parent, error) from None
    try:
        if tokenizer_path is not None:
            tokenizer = reused_tokenizer(tokenizer_path)
        else:
            log.info("training the BPE tokenizer on the training split (vocabulary %d)", vocab_size)
            sentences = (sentence for pair in splits["train"]() for sentence in pair)
            tokenizer = train_tokenizer(sentences, vocab_size, min_frequency)
        tokenizer.save(staging / "tokenizer.json")
        dtype = token_dtype(tokenizer.vocab_size)
        meta: dict[str, Any] = {"dtype": dtype.name, "max_len": max_len, "splits": {}}
        for split, pairs in splits.items():
            log.info("encoding the %s split into %s", split, directory)
            meta["splits"][split] = write_split(staging, split, pairs(), tokenizer, max_len, dtype)
        (staging / "meta.json").write_text(json.dumps(meta, indent=2))
        os.replace(staging, directory)
    except (OSError, RuntimeError) as error:
        read = getattr(error, "filename", None)
        if read is not None and staging not in (Path(read), *Path(read).parents):  # a corpus file, not the cache
            raise InputError(f"cannot read {read}: {error.strerror}; check the data settings' paths and their permissions") from None
        written = sum(f.stat().st_size for f in staging.iterdir()) if staging.is_dir() else 0
        problem = cache_error(staging, error, written)
        if problem is error:
            raise
        raise problem from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def prepared(directory: Path, builder: Callable[[Path], None]) -> dict[str, Any]:
    """The meta data of the prepared ``directory``, built first by ``builder`` unless a complete
    one is there; one process at a time (a lock file beside the directory)."""
    meta_path = directory / "meta.json"
    if not meta_path.is_file():
        with cache_lock(Path(f"{directory}.lock")):
            if not meta_path.is_file():
                builder(directory)
    return json.loads(meta_path.read_text())


class EncodedSplit(Dataset[Example]):
    """One encoded split, memory-mapped: item ``i`` is (source ids, target ids) as numpy arrays.

    Args:
        directory: a prepared directory (:func:`prepared`).
        split: ``train``, ``val`` or ``test``.
        dtype: the token dtype named in ``meta.json``.
        repeat: how many times the split is gone over (item ``i`` is pair ``i % pairs``).
    """

    def __init__(self, directory: Path, split: str, dtype: str, repeat: int = 1) -> None:
        self.directory, self.split, self.dtype, self.repeat = Path(directory), split, dtype, repeat
        self.offsets = np.load(self.directory / f"{split}.idx.npy", mmap_mode="r")  # [pairs + 1, 2]
        self.pairs = len(self.offsets) - 1
        self.tokens: tuple[np.ndarray, np.ndarray] | None = None

    def mapped(self) -> tuple[np.ndarray, np.ndarray]:
        """The source and target token files, mapped on first use in each process."""
        if self.tokens is None:
            self.tokens = tuple(  # type: ignore[assignment]
                np.memmap(self.directory / f"{self.split}.{side}.bin", dtype=self.dtype, mode="r")
                if (self.directory / f"{self.split}.{side}.bin").stat().st_size
                else np.zeros(0, dtype=self.dtype)
                for side in ("src", "tgt")
            )
        assert self.tokens is not None
        return self.tokens

    def __len__(self) -> int:
        return self.pairs * self.repeat

    def __getitem__(self, index: int) -> Example:
        if not -len(self) <= index < len(self):
            raise IndexError(f"item {index} of a split of {len(self)}")
        index = int(index) % self.pairs
        (src_start, tgt_start), (src_end, tgt_end) = self.offsets[index], self.offsets[index + 1]
        sources, targets = self.mapped()
        return sources[src_start:src_end], targets[tgt_start:tgt_end]

    def lengths(self) -> np.ndarray:
        """Each item's size as a token budget counts it: the longer of the source and the
        teacher-forced target (all but one of ``<s> y </s>``)."""
        sizes = np.diff(np.asarray(self.offsets), axis=0)  # [pairs, 2]
        return np.tile(np.maximum(sizes[:, 0], sizes[:, 1] - 1), self.repeat)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with its path only: a worker or a spawned process maps the files itself."""
        return {"directory": self.directory, "split": self.split, "dtype": self.dtype, "repeat": self.repeat}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]
