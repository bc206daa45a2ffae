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


def fail(message: str, status: int = EXIT_INPUT_ERROR) -> NoReturn:
    """Print ``error: message`` (one line) on stderr and exit with ``status`` (2: bad input)."""
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr, flush=True)
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
