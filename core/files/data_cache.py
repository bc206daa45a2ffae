"""Where both heads keep data they prepare once and reuse in every process and every later run:
the translation head's tokenizer and encoded splits, the vision head's image-check verdicts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

from core.errors import InputError
from core.files.atomic import write_error

CACHE_ENV = "TRANSFORMER_TOOLKIT_CACHE"


def cache_root(cache_dir: str | None = None) -> Path:
    """``cache_dir``, else ``$TRANSFORMER_TOOLKIT_CACHE``, else ``~/.cache/transformer-toolkit``.
    On a cluster, point it at storage every node sees, so that one process prepares for all."""
    root = cache_dir or os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "transformer-toolkit"
    return Path(root).expanduser()


def file_version(path: str | Path) -> tuple[int, int]:
    """What tells one version of a file from another without reading it: its size and
    modification time (nanoseconds); the keys of prepared data and of the image-check verdicts."""
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns


def cache_error(path: Path, error: BaseException, written: int = 0) -> BaseException:
    """A failed write of the data cache at ``path`` as one clear :class:`InputError` (a place that
    cannot be written, a full disk), or ``error`` itself when it is not about the place."""
    clear = write_error(path, error, written)
    return error if clear is None else InputError(f"{clear} (the data cache: data.cache_dir)")


@contextmanager
def cache_lock(lock_file: Path) -> Iterator[None]:
    """Hold the lock file ``lock_file`` (its folder made first), so that one process at a time
    writes what it guards; a folder that cannot be made or written is one :class:`InputError`
    naming ``data.cache_dir`` (:func:`cache_error`)."""
    lock = FileLock(str(lock_file))
    try:
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except OSError as error:
        raise cache_error(lock_file.parent, error) from None
    try:
        yield
    finally:
        lock.release()
