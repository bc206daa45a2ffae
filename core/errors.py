"""The project's error type for bad input: a file, a config value, a checkpoint or data that
cannot be used as given. Every command prints it as one line ``error: ...`` and exits with
status 2 (see :mod:`core.commands.exit`); anything else is a bug and keeps its traceback."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input, with a message that names what is wrong, where, and the fix.

    A ``ValueError`` so that library callers catching that keep working.
    """
