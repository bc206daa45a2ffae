"""Optuna's log lines in the sweep's own log: a Hydra callback of the ``hparams_search=`` presets.

Optuna prints through a stderr handler of its own, in its own format, from the moment the sweeper
imports it, which is after Hydra has configured logging (``hydra.hydra_logging``); its INFO line
on creating the study repeats what the sweeper logs itself (``Study name``, ``Storage``).
:class:`OptunaLogs` removes that handler and lets Optuna's records propagate to the handlers Hydra
configured, at ``level`` (warnings, such as a trial Optuna could not record, by default).
"""

from __future__ import annotations

import logging
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


class OptunaLogs(Callback):
    """Routes the ``optuna`` logger through Hydra's logging at ``level`` when a multirun starts."""

    def __init__(self, level: str = "WARNING") -> None:
        self.level = logging.getLevelName(level)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        import optuna  # an optional dependency (the sweeps extra), present whenever the sweeper is

        optuna.logging.disable_default_handler()
        optuna.logging.enable_propagation()
        optuna.logging.set_verbosity(self.level)
