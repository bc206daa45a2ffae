"""The two Hydra commands every head has, built from its :class:`~core.training.head.Head`:
``python -m <head>.train`` (:func:`training_app`) and ``python -m <head>.evaluate``
(:func:`evaluation_app`). A head's ``train.py`` is ``main = training_app(HEAD)``.

Lightning and the head's models are imported after Hydra has read the command line and the
config check has passed, so ``--help`` and a refused value cost neither.
"""

from __future__ import annotations

from collections.abc import Callable

from omegaconf import DictConfig

from core.training.head import Head
from core.training.commands.hydra_app import hydra_app
from core.commands.logs import route_library_logs
from core.training.commands.config_check import validate_config


def training_app(head: Head) -> Callable[[], float | None]:
    """The training command of ``head`` (config ``head.train_config``): train and test with the
    composed config (:func:`core.training.runner.train`); returns ``optimized_metric`` for sweeps."""

    def train(cfg: DictConfig) -> float | None:
        """Train and test with the composed config; returns ``optimized_metric`` for sweeps."""
        validate_config(cfg)  # a refused value costs no import of Lightning or the head's models
        from core.training.runner import train as run

        route_library_logs()  # each Lightning line once, on the console and in the run's log file
        return run(cfg)

    return hydra_app(head.train_config, head.config_path, f"{head.package}.train")(train)


def evaluation_app(head: Head) -> Callable[[], float | None]:
    """The evaluation command of ``head`` (config ``head.eval_config``): score the checkpoint
    ``ckpt_path`` on ``split`` without training (:func:`core.training.evaluation.evaluate_checkpoint`);
    returns ``<split>/<head.eval_metric>`` for sweeps."""

    def evaluate(cfg: DictConfig) -> float:
        """Evaluate the checkpoint; returns the split's ``eval_metric`` for sweeps."""
        from core.training.evaluation import evaluate_checkpoint

        route_library_logs()
        return float(evaluate_checkpoint(cfg, head)[f"{cfg.split}/{head.eval_metric}"])

    return hydra_app(head.eval_config, head.config_path, f"{head.package}.evaluate")(evaluate)
