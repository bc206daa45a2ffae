"""The argparse half of the commands: a parser that follows the error convention, argument
types that refuse bad values as usage errors, and the ``--device`` option."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from core.commands.exit import fail

N = TypeVar("N", int, float)


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose usage errors follow the convention (one ``error:`` line,
    status 2) and which has ``--debug`` (show tracebacks) built in. A ``--device`` left out
    (:func:`add_device_option`) is chosen after parsing, so ``--help`` and a usage error return
    before torch is imported."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--debug", action="store_true", help="show the full traceback of errors")

    def error(self, message: str) -> NoReturn:
        """One line naming the bad option and pointing to ``--help``, then exit 2."""
        fail(f"{message}; see {self.prog} --help")

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        parsed = super().parse_args(args, namespace)
        if "device" in vars(parsed) and parsed.device is None:
            parsed.device = default_device()
        return parsed


def readable_text(value: str) -> str:
    """``value`` (an argument, a file name) with its bytes that are not UTF-8, which Python keeps
    as lone surrogates, replaced by U+FFFD: text that encodes, and prints on any terminal."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def default_device() -> str:
    """``cuda`` when a GPU is present, else ``cpu``: the default of every ``--device`` option."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def torch_device(text: str) -> str:
    """A device this machine has (``cpu``, ``cuda``, ``cuda:1``, ``mps``), for ``type=`` of an
    argparse option, so a wrong one is a usage error rather than a failure deep inside torch."""
    import torch

    try:
        device = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a torch device; use cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError(f"{text!r} was asked for, but this machine has no usable GPU; use cpu")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise argparse.ArgumentTypeError(f"{text!r} does not exist: this machine has {torch.cuda.device_count()} GPU(s)")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise argparse.ArgumentTypeError(f"{text!r} was asked for, but MPS is not available here; use cpu")
    return text


def add_device_option(parser: argparse.ArgumentParser, kinds: tuple[str, ...] | None = None) -> None:
    """``--device``, defaulting to the GPU when there is one (chosen by
    :meth:`ArgumentParser.parse_args`); a device the machine lacks, or with ``kinds`` one of
    another kind (``cpu``, ``cuda``, ``mps``), is a usage error."""

    def device(text: str) -> str:
        chosen = torch_device(text)
        if kinds is not None and chosen.partition(":")[0] not in kinds:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of the devices this command runs on: {', '.join(kinds)}")
        return chosen

    parser.add_argument("--device", type=device, default=None, help="torch device (default: cuda when present, else cpu)")


def positive(convert: Callable[[str], N], requirement: str) -> Callable[[str], N]:
    """An argparse ``type=`` that converts with ``convert`` and accepts values above 0 only."""

    def parse(text: str) -> N:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {requirement}, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected {requirement}, got {value}")
        return value

    return parse


positive_int = positive(int, "a whole number of at least 1")
positive_float = positive(float, "a number above 0")


def png_path(text: str) -> Path:
    """The PNG file to write, for ``type=`` of an argparse option: ``.png`` is added to a name
    without a suffix; a folder or another suffix is refused, so the path printed is the file
    written."""
    path = Path(text)
    if text.endswith((os.sep, "/")) or path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory; pass a file name such as {path / 'attention.png'}")
    if not path.suffix:
        return path.with_suffix(".png")
    if path.suffix.lower() != ".png":
        raise argparse.ArgumentTypeError(
            f"{text} has the suffix {path.suffix!r}, but the figure is written as PNG; use {path.with_suffix('.png')}"
        )
    return path
