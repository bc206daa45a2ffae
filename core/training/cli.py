"""What every command of both heads shares: one error convention, argument types, the device.

Bad input raises :class:`core.training.errors.InputError`; commands print it as one line
``error: <what, where, the fix>`` on stderr and exit with status 2, without a traceback. The full
traceback comes back with ``--debug`` (argparse commands) or ``HYDRA_FULL_ERROR=1`` (all
commands). Any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
from datetime import datetime
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from core.training.errors import InputError

T = TypeVar("T")
N = TypeVar("N", int, float)

EXIT_INPUT_ERROR = 2


def full_traceback_wanted(argv: list[str] | None = None) -> bool:
    """Whether the user asked for tracebacks: ``HYDRA_FULL_ERROR=1`` or ``--debug`` in ``argv``."""
    args = sys.argv[1:] if argv is None else argv
    return os.environ.get("HYDRA_FULL_ERROR") == "1" or "--debug" in args


def fail(message: str) -> NoReturn:
    """Print ``error: message`` (one line) on stderr and exit with status 2."""
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_INPUT_ERROR)


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


def add_device_option(parser: argparse.ArgumentParser) -> None:
    """``--device``, defaulting to the GPU when there is one (chosen by
    :meth:`ArgumentParser.parse_args`); a device the machine lacks is a usage error."""
    parser.add_argument(
        "--device", type=torch_device, default=None, help="torch device (default: cuda when present, else cpu)"
    )


def launch_stamp() -> str:
    """One name for a run's output directory that every process of a launch agrees on: the SLURM
    job (``slurm-<job id>``, with ``_<task>`` in an array), the torchrun rendezvous id
    (``torchrun-<id>``, when one is given), else the local time to the second. Resolved in each
    process, so processes started together by SLURM or torchrun write to one directory."""
    job = os.environ.get("SLURM_JOB_ID")
    if job:
        task = os.environ.get("SLURM_ARRAY_TASK_ID")
        return f"slurm-{job}" + (f"_{task}" if task else "")
    rendezvous = os.environ.get("TORCHELASTIC_RUN_ID")
    if rendezvous and rendezvous != "none":
        return f"torchrun-{rendezvous}"
    return datetime.now().strftime("%Y-%m-%d_%H-%M-%S")


def hydra_app(config_name: str) -> Callable[[Callable[[Any], T]], Callable[[], T | None]]:
    """Like ``@hydra.main(version_base="1.3", config_path="../conf", config_name=...)``, with the
    error convention: an :class:`InputError` from the task and Hydra's own errors about the
    command line (unknown key, bad override, missing config) end in one ``error:`` line and
    status 2; ``HYDRA_FULL_ERROR=1`` shows the traceback instead."""
    import hydra
    from hydra.errors import HydraException, InstantiationException, MissingConfigException
    from omegaconf.errors import OmegaConfBaseException

    from omegaconf import OmegaConf

    user_wants_traceback = full_traceback_wanted([])  # read before main() sets HYDRA_FULL_ERROR
    OmegaConf.register_new_resolver("launch_stamp", launch_stamp, replace=True)  # hydra.run.dir of the train configs

    def decorate(task: Callable[[Any], T]) -> Callable[[], T | None]:
        started: list[bool] = []

        @functools.wraps(task)
        def guarded_task(cfg: Any) -> T:
            started.append(True)
            # Caught here, before Hydra adds its "Error executing job" line.
            try:
                return task(cfg)
            except (InputError, FileNotFoundError) as error:
                if user_wants_traceback:
                    raise
                fail(str(error))
            except InstantiationException as error:  # a class built from the config refused its arguments
                cause = error.__cause__
                if user_wants_traceback or not isinstance(cause, (InputError, FileNotFoundError, ValueError)):
                    raise
                if isinstance(cause, (InputError, FileNotFoundError)):
                    fail(str(cause))
                # A constructor's own check of a value: name the config entry it came from.
                entry = re.search(r"full_key: (\S+)", str(error))
                fail(f"{cause} ({'config entry ' + entry.group(1) if entry else 'a config value'}); fix it on the command line")

        app = hydra.main(version_base="1.3", config_path="../conf", config_name=config_name)(guarded_task)

        @functools.wraps(task)
        def main() -> T | None:
            if user_wants_traceback:
                return app()
            # Hydra prints a shortened traceback and exits 1 unless HYDRA_FULL_ERROR is set; set
            # it for this call so a configuration error reaches this function, which prints one line.
            os.environ["HYDRA_FULL_ERROR"] = "1"
            try:
                return app()
            except MissingConfigException as error:
                options = f"; choose one of: {', '.join(error.options)}" if error.options else ""
                fail(f"{str(error).splitlines()[0]}{options}")
            except (HydraException, OmegaConfBaseException) as error:
                cause = error.__cause__ or error.__context__
                detail = f" ({str(cause).splitlines()[0]})" if isinstance(cause, OmegaConfBaseException) else ""
                fail(f"{str(error).splitlines()[0]}{detail}; see --help or --cfg job for the configuration")
            except OSError as error:
                if started:
                    raise
                # Hydra could not make or write the run directory, before the task began.
                fail(
                    f"cannot write the run directory {error.filename or ''}: {error.strerror}; set hydra.run.dir "
                    "to a writable directory with free space"
                )
            finally:
                os.environ.pop("HYDRA_FULL_ERROR", None)

        return main

    return decorate


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
