"""Writing files so that a reader (or a run resumed after ``kill -9``) never sees half of one."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary file beside ``path`` (hidden, same suffix, which some loaders require) that
    replaces ``path`` when the block succeeds and is removed when it fails.

    The rename is atomic on one file system, so ``path`` holds the previous content or the new
    one, never part of it; the data is flushed to disk before the rename.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        yield tmp
        with tmp.open("rb") as file:
            os.fsync(file.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
