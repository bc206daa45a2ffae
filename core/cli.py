"""Argument types shared by the command lines of both heads: a bad value ends in argparse's usage
error naming the option, not in a traceback."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """A whole number of at least 1, for ``type=`` of an argparse option."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    """A number above 0, for ``type=`` of an argparse option."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {value}")
    return value
