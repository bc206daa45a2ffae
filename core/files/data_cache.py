"""Where both heads keep data they prepare once and reuse in every process and every later run:
the translation head's tokenizer and encoded splits, the vision head's image-check verdicts."""

from __future__ import annotations

import os
from pathlib import Path

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
