"""The Hydra entry of every Hydra command (``train``, ``evaluate`` of both heads): the run
directory's name and the error convention of :mod:`core.commands.exit` applied to Hydra's own
errors."""

from __future__ import annotations

import functools
import os
import re
from datetime import datetime
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from core.commands.exit import EXIT_DIVERGED, fail, full_traceback_wanted
from core.errors import InputError, TrainingDiverged

T = TypeVar("T")

# Set beside HYDRA_FULL_ERROR=1 when a command sets that for Hydra itself: the processes it starts
# (Lightning's DDP workers run the command again) inherit both, and know the user did not ask.
SET_BY_COMMAND = "CORE_HYDRA_FULL_ERROR_SET_BY_COMMAND"
NO_TRIAL_COMPLETED = "No trials are completed yet"  # Optuna's error when the sweeper asks for the best of none
FAILED_TRIAL = "Failed experiment"  # how the Optuna sweeper logs a trial that raised


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


def register_launch_stamp() -> None:
    """Make ``${launch_stamp:}`` (``hydra.run.dir`` of the training configs) resolve to
    :func:`launch_stamp`, once per config, as Hydra's ``${now:}``: Lightning reads the run
    directory again when it starts the other processes of a DDP run, seconds or minutes later, and
    they must get the directory of the first."""
    from omegaconf import OmegaConf

    OmegaConf.register_new_resolver("launch_stamp", launch_stamp, replace=True, use_cache=True)


def in_sweep() -> bool:
    """Whether this process runs one job of a Hydra multirun (``-m``, ``hparams_search=...``)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def about_its_arguments(error: BaseException | None) -> bool:
    """Whether a class built from the config failed on its arguments (bad input, not a bug): an
    :class:`InputError`, a missing file, a value it refuses (``ValueError``, Lightning's
    ``MisconfigurationException``: a GPU on a machine without one), a key it does not take
    (``TypeError``)."""
    if isinstance(error, (InputError, FileNotFoundError, ValueError, TypeError)):
        return True
    from lightning.fabric.utilities.exceptions import MisconfigurationException  # imported with Lightning, by then

    return isinstance(error, MisconfigurationException)


def hydra_app(config_name: str, config_path: str, command: str) -> Callable[[Callable[[Any], T]], Callable[[], T | None]]:
    """Like ``@hydra.main(version_base="1.3", config_path=..., config_name=...)``, with the
    error convention: an :class:`InputError` from the task, arguments that a class built from the
    config refuses (``ValueError``, ``TypeError`` for a key it does not take, Lightning's
    ``MisconfigurationException``) and Hydra's own
    errors about the command line (unknown key, bad override, missing config) end in one
    ``error:`` line and status 2, a :class:`TrainingDiverged` in one line and status 3; any other
    failure of a constructor is a bug and keeps its traceback (status 1); ``HYDRA_FULL_ERROR=1``
    shows the traceback of every error. In a sweep (``-m``, ``hparams_search=``) a trial refused
    or diverged raises instead, and the sweeper records it as failed and goes on.

    ``command`` is the module of the command (``vision.train``): Hydra names the job, and so the
    run's log file (``train.log``), after the module of the task function, which is built
    elsewhere (:mod:`core.training.commands.apps`) and takes the command's name."""
    import hydra
    from hydra.errors import HydraException, InstantiationException, MissingConfigException
    from omegaconf.errors import OmegaConfBaseException

    from omegaconf import OmegaConf

    user_wants_traceback = [False]  # read by main() as it starts, before it sets HYDRA_FULL_ERROR
    register_launch_stamp()

    def refuse(message: str) -> NoReturn:
        """One ``error:`` line and status 2; in a sweep's trial an :class:`InputError`, which the
        sweeper records as the trial's failure."""
        if in_sweep():
            raise InputError(message) from None
        fail(message)

    def decorate(task: Callable[[Any], T]) -> Callable[[], T | None]:
        task.__module__ = command
        started: list[bool] = []

        @functools.wraps(task)
        def guarded_task(cfg: Any) -> T:
            started.append(True)
            # Caught here, before Hydra adds its "Error executing job" line.
            try:
                return task(cfg)
            except (InputError, FileNotFoundError) as error:
                if user_wants_traceback[0] or in_sweep():
                    raise  # a sweep's trial: the sweeper records it as failed and the sweep goes on
                fail(str(error))
            except TrainingDiverged as error:
                if user_wants_traceback[0] or in_sweep():
                    raise  # a sweep's trial: the sweeper records it as failed (Optuna's search goes on)
                fail(str(error), EXIT_DIVERGED)
            except InstantiationException as error:  # a class built from the config refused its arguments
                cause = error.__cause__
                if user_wants_traceback[0]:
                    raise
                entry = re.search(r"full_key: (\S+)", str(error))
                target = re.search(r"Error locating target '([^']+)'", str(error))
                if target and entry and isinstance(cause, ImportError):  # a _target_ that names no class
                    refuse(
                        f"{entry.group(1)}._target_={target.group(1)} cannot be imported ({str(cause).splitlines()[0]}); "
                        "check the dotted path of the class"
                    )
                if not about_its_arguments(cause):
                    raise (cause or error) from None  # a bug in a constructor: its own traceback, status 1
                if isinstance(cause, (InputError, FileNotFoundError)):
                    refuse(str(cause))
                # A constructor's own check of a value (Lightning's of the Trainer's settings, e.g.
                # a GPU on a machine without one), or a key it does not take: name the config entry.
                refuse(f"{cause} ({'config entry ' + entry.group(1) if entry else 'a config value'}); fix it on the command line")

        app = hydra.main(version_base="1.3", config_path=config_path, config_name=config_name)(guarded_task)

        @functools.wraps(task)
        def main() -> T | None:
            user_wants_traceback[0] = full_traceback_wanted([]) and os.environ.get(SET_BY_COMMAND) != "1"
            if user_wants_traceback[0]:
                return app()
            # Hydra prints a shortened traceback and exits 1 unless HYDRA_FULL_ERROR is set; set
            # it for this call so a configuration error reaches this function, which prints one line.
            os.environ["HYDRA_FULL_ERROR"] = os.environ[SET_BY_COMMAND] = "1"
            try:
                return app()
            except MissingConfigException as error:
                options = f"; choose one of: {', '.join(error.options)}" if error.options else ""
                fail(f"{str(error).splitlines()[0]}{options}")
            except TrainingDiverged as error:  # a diverged job ended Hydra's basic sweep
                fail(str(error), EXIT_DIVERGED)
            except InputError as error:  # a refused job ended Hydra's basic sweep
                fail(str(error))
            except ValueError as error:
                if NO_TRIAL_COMPLETED not in str(error):
                    raise
                fail(f"no trial of the search completed: each was refused or failed (the log's '{FAILED_TRIAL}' lines say why)")
            except (HydraException, OmegaConfBaseException) as error:
                cause = error.__cause__ or error.__context__
                detail = f" ({str(cause).splitlines()[0]})" if isinstance(cause, OmegaConfBaseException) else ""
                fail(f"{str(error).splitlines()[0]}{detail}; see --help or --cfg job for the configuration")
            except OSError as error:
                if started and isinstance(error, FileNotFoundError):  # a job's missing file ended Hydra's basic sweep
                    fail(str(error))
                if started:
                    raise
                # Hydra could not make or write the run directory, before the task began.
                fail(
                    f"cannot write the run directory {error.filename or ''}: {error.strerror}; set hydra.run.dir "
                    "to a writable directory with free space"
                )
            finally:
                os.environ.pop("HYDRA_FULL_ERROR", None)
                os.environ.pop(SET_BY_COMMAND, None)

        return main

    return decorate
