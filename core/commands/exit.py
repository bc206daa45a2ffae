"""The error convention of every command: bad input ends in one line and status 2.

Bad input raises :class:`core.errors.InputError`; commands print it as one line
``error: <what, where, the fix>`` on stderr and exit with status 2, without a traceback (a
training run that diverged, :class:`core.errors.TrainingDiverged`, likewise with status 3). The full
traceback comes back with ``--debug`` (argparse commands) or ``HYDRA_FULL_ERROR=1`` (all
commands). Any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

from core.errors import InputError

T = TypeVar("T")

EXIT_INPUT_ERROR = 2
EXIT_DIVERGED = 3


def full_traceback_wanted(argv: list[str] | None = None) -> bool:
    """Whether the user asked for tracebacks: ``HYDRA_FULL_ERROR=1`` or ``--debug`` in ``argv``."""
    args = sys.argv[1:] if argv is None else argv
    return os.environ.get("HYDRA_FULL_ERROR") == "1" or "--debug" in args


# How torch re-raises in the main process an error raised in a DataLoader worker: a message of the
# worker's whole traceback, which ends with the original error's line.
WORKER_ERROR = re.compile(r"Caught (\w+) in DataLoader worker process \d+\.\nOriginal Traceback.*\n(?:[\w.]+\.)?\1: (.*)", re.S)


def original_message(message: str) -> str:
    """``message``, or for an error re-raised from a DataLoader worker the original error's own."""
    match = WORKER_ERROR.match(message)
    return match.group(2) if match else message


def fail(message: str, status: int = EXIT_INPUT_ERROR) -> NoReturn:
    """Print ``error: message`` (one line; an error from a loader worker without the worker's
    traceback) on stderr and exit with ``status`` (2: bad input)."""
    print(f"error: {' '.join(original_message(str(message)).split())}", file=sys.stderr, flush=True)
    raise SystemExit(status)


def command(main: Callable[..., T]) -> Callable[..., T]:
    """Decorate an argparse command's ``main(argv=None)``: an :class:`InputError` (or a missing
    file) ends the command with one ``error:`` line and status 2, unless ``--debug`` is given."""

    @functools.wraps(main)
    def guarded(argv: list[str] | None = None) -> T:
        try:
            return main(argv)
        except (InputError, FileNotFoundError) as error:
            if full_traceback_wanted(argv):
                raise
            fail(str(error))

    return guarded
