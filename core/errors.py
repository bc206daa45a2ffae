"""The project's error types. :class:`InputError` is bad input: a file, a config value, a
checkpoint or data that cannot be used as given; every command prints it as one line
``error: ...`` and exits with status 2 (see :mod:`core.commands.exit`). :class:`TrainingDiverged`
is a training run that stopped because it diverged: one line too, and status 3. Anything else is
a bug and keeps its traceback."""

from __future__ import annotations

from typing import Any


class InputError(ValueError):
    """Bad input, with a message that names what is wrong, where, and the fix.

    A ``ValueError`` so that library callers catching that keep working.
    """


class TrainingDiverged(Exception):
    """Training stopped at optimizer step ``step`` because its loss or weights stopped being finite
    (or its loss kept spiking after the rewinds it was allowed), with a message that names the
    step, ``checkpoint`` (the last one with finite weights, None when none was saved) and the fixes.

    Raised on every process of a job at the same step (:mod:`core.training.callbacks.divergence`).
    """

    def __init__(self, message: str, step: int, reason: str, checkpoint: str | None, rewinds: int) -> None:
        super().__init__(message)
        self.step, self.reason, self.checkpoint, self.rewinds = step, reason, checkpoint, rewinds

    def metrics(self) -> dict[str, Any]:
        """What ``metrics.json`` of the run says about it."""
        return {
            "diverged": True,
            "diverged_at_step": self.step,
            "diverged_reason": self.reason,
            "last_good_checkpoint": self.checkpoint,
            "rewinds": self.rewinds,
        }
