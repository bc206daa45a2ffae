"""The one training routine both heads run: config -> datamodule -> module -> Trainer -> metrics.

Every head's ``train`` command (:func:`core.training.commands.apps.training_app`) calls :func:`train` with
its composed config; what the runner uses of the head's datamodule and module is the contract of
:mod:`core.training.head`, checked when they are built. Lightning and Hydra are imported here,
not by ``import core``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from filelock import FileLock
from hydra.errors import InstantiationException
from hydra.utils import get_class, instantiate
from lightning.pytorch.callbacks import WeightAveraging
from omegaconf import DictConfig, OmegaConf

from core.files.atomic import atomic_path
from core.training.plan.budget import TrainingBudget, after_the_timer, resolve_epochs
from core.training.plan.precision import resolve_precision
from core.files.checkpoints import load_checkpoint, outline, require_finite_weights, require_fit
from core.training.callbacks.checkpoints import AtomicCheckpointIO
from core.errors import InputError, TrainingDiverged
from core.training.callbacks.faults import (
    PreemptionCheckpoint,
    fit_or_preempt,
    preempted_after_training,
    run_directory_claimed,
)
from core.training.head import HeadData, HeadModule, require_members
from core.training.pretrained import require_pretrained
from core.training.callbacks.rank_seed import SeedPerRank
from core.training.commands.config_check import validate_config

log = logging.getLogger(__name__)


def model_kwargs(cfg: DictConfig) -> dict[str, Any]:
    """The model section as plain keyword arguments. Its ``_target_`` names the network class
    the LightningModule builds (checked by :func:`check_model_target`) and is left out, so a
    checkpoint never names code to import."""
    kwargs = OmegaConf.to_container(cfg.model, resolve=True)
    assert isinstance(kwargs, dict)
    kwargs.pop("_target_", None)
    return kwargs


def check_model_target(cfg: DictConfig, network: torch.nn.Module) -> None:
    """Refuse a ``model._target_`` other than the class of the network the module built, rather
    than ignore the override."""
    target = cfg.model.get("_target_")
    built = f"{type(network).__module__}.{type(network).__qualname__}"
    if target is not None and target != built and not names_class(target, type(network)):
        raise InputError(
            f"model._target_={target}, but {cfg.module._target_} builds a {built}: the module fixes the "
            f"network class; drop the model._target_ override (or set it to {built})"
        )


def names_class(path: str, cls: type) -> bool:
    """Whether the dotted ``path`` imports ``cls`` (a class may be re-exported from its package,
    as ``vision.model.VisionTransformer``)."""
    try:
        return get_class(path) is cls
    except (ImportError, ValueError, AttributeError):
        return False


# Where the packages of a group's optional entries come from (pyproject.toml's extras).
EXTRAS = {"logger": "pip install -e \".[trackers]\" (MLflow, W&B)"}


def build_list(group: DictConfig | None, name: str) -> list[Any]:
    """Instantiate every ``_target_`` entry of the config group ``name`` given as a mapping. An
    entry whose package is not installed (``logger=mlflow`` without MLflow) is an
    :class:`InputError` naming the entry and how to install it or leave it out."""
    if not group:
        return []
    built = []
    for key, entry in group.items():
        if entry is None or "_target_" not in entry:
            continue
        try:
            built.append(instantiate(entry))
        except InstantiationException as error:
            missing = error.__cause__
            if not isinstance(missing, ImportError):
                raise
            install = EXTRAS.get(name, "install the package it names")
            raise InputError(
                f"{name}.{key} needs a package that is not installed ({str(missing).splitlines()[0]}); "
                f"{install}, or leave the entry out with ~{name}.{key}"
            ) from None
    return built


def scalar_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """The logged ``train/``, ``val/`` and ``test/`` metrics as plain floats."""
    return {
        key: float(value)
        for key, value in metrics.items()
        if key.startswith(("train/", "val/", "test/"))
        and (isinstance(value, (int, float)) or (isinstance(value, torch.Tensor) and value.numel() == 1))
    }


def best_checkpoint(trainer: pl.Trainer, metric: str) -> str:
    """The path of the best checkpoint by ``metric`` (the config's ``optimized_metric``), or ""
    when no checkpoint callback monitors it or none was saved. Other monitored checkpoints (e.g.
    the recent ones, monitoring ``step``) are not candidates, nor a best whose score is NaN or inf."""
    paths = (
        c.best_model_path
        for c in trainer.checkpoint_callbacks
        if getattr(c, "monitor", None) == metric and c.best_model_score is not None and bool(torch.isfinite(c.best_model_score))
    )
    return next((path for path in paths if path), "")


def prepare_once(datamodule: pl.LightningDataModule, data_cfg: DictConfig) -> None:
    """Run ``prepare_data`` (downloads) one process at a time on this machine.

    Under torchrun or SLURM every process starts this function together, before any process
    group exists; a file lock per data config lets the first one download while the others wait
    and then find the files in place.
    """
    key = hashlib.sha1(OmegaConf.to_yaml(data_cfg).encode()).hexdigest()[:16]
    with FileLock(Path(tempfile.gettempdir()) / f"transformer-toolkit-prepare-{key}.lock"):
        datamodule.prepare_data()


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` through a temporary file, so readers never see half a file."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True))


def train(cfg: DictConfig) -> float | None:
    """Fit, test on the best checkpoint, write ``metrics.json``; return ``cfg.optimized_metric``.

    Hyperparameters reach the module and datamodule as plain dicts and lists (``_convert_``), so
    checkpoints hold no OmegaConf objects and load with ``weights_only=True``.

    Steps: claim the run directory (a second run started on it while this one goes is refused);
    seed everything; give ``trainer.max_epochs=null`` its value (the head's ``budget.epochs``, or no
    epoch bound beside ``max_time`` / ``max_steps``); instantiate callbacks, loggers and the Trainer from ``cfg.callbacks``,
    ``cfg.logger`` and ``cfg.trainer`` (so Lightning refuses a bad setting before any data work), with
    :class:`core.training.plan.budget.TrainingBudget` (``cfg.budget``) laying the learning-rate schedule over
    the run's budget and validating the final weights when a budget ends it, and
    :class:`core.training.callbacks.faults.PreemptionCheckpoint` saving the current step on SIGTERM (the process
    then exits with status 143); instantiate the datamodule (with the data settings that
    ``cfg.pretrained``'s weights fix, a tokenizer) and prepare it, so that the module can be built
    from what the data defines (classes, tokenizer); start the network from ``cfg.pretrained``'s
    weights unless the run resumes (:mod:`core.training.pretrained`); optionally compile the
    network (``compile: true``, ``torch.compile`` keyword arguments in ``compile_options``); fit
    (resuming from ``cfg.ckpt_path``); validate once more if training stopped before any
    validation; test the best checkpoint, or the final weights when none was saved.
    """
    validate_config(cfg)
    ckpt_path = cfg.get("ckpt_path")
    resumed = None
    if ckpt_path:
        # Read once here: refuses a checkpoint that is not plain data, or whose weights are not
        # finite, with a clear error; its outline is what fit_and_test checks the model against.
        checkpoint = load_checkpoint(ckpt_path)
        require_finite_weights(checkpoint, ckpt_path)
        resumed = outline(checkpoint)
        del checkpoint  # Lightning reads the weights again when it resumes
    output_dir = Path(cfg.paths.output_dir)
    with run_directory_claimed(output_dir):  # one run at a time in a directory
        return fit_and_test(cfg, output_dir, ckpt_path, resumed)


def fit_and_test(
    cfg: DictConfig, output_dir: Path, ckpt_path: str | None, resumed: dict[str, Any] | None
) -> float | None:
    """The steps of :func:`train` after the config is checked and the run directory claimed;
    ``resumed`` is the outline of the checkpoint at ``ckpt_path`` (:func:`core.files.checkpoints.outline`)."""
    pl.seed_everything(cfg.seed, workers=True, verbose=False)

    if OmegaConf.select(cfg, "budget.max_warmup_fraction") is None:
        raise InputError("the config has no budget.max_warmup_fraction: state the warmup cap in the head's primary config")
    settings = OmegaConf.to_container(cfg.budget, resolve=True)
    assert isinstance(settings, dict)
    if (epochs := resolve_epochs(cfg.trainer, settings.pop("epochs", None))) is not None:
        log.info("trainer.max_epochs=null: %s", f"{epochs} (budget.epochs)" if epochs > 0 else "no epoch bound beside max_time / max_steps")
    budget = TrainingBudget(**settings)
    preemption = PreemptionCheckpoint(output_dir / "checkpoints")
    # The Trainer first: Lightning checks its settings (precision, devices, strategy) before any data work.
    if chosen := resolve_precision(cfg.trainer):
        log.info("trainer.precision=auto: %s on this hardware", chosen)
    trainer: pl.Trainer = instantiate(
        cfg.trainer,
        callbacks=[*build_list(cfg.get("callbacks"), "callbacks"), budget, preemption, SeedPerRank(cfg.seed)],
        logger=build_list(cfg.get("logger"), "logger") or False,
        plugins=[AtomicCheckpointIO()],
        _convert_="all",  # plain dicts for Lightning, e.g. trainer.max_time={minutes: 10}
    )
    after_the_timer(trainer)
    pretrained = cfg.get("pretrained")
    data_settings = {}
    if pretrained:
        module_class = get_class(cfg.module._target_)
        require_pretrained(module_class, pretrained)
        source = ckpt_path or pretrained  # a resumed run holds what the weights fixed
        data_settings = module_class.pretrained_data(str(source), output_dir)
        if data_settings:
            log.info("data settings of %s: %s", source, ", ".join(f"{key}={value}" for key, value in data_settings.items()))
    datamodule: pl.LightningDataModule = instantiate(cfg.data, **data_settings, _convert_="all")
    require_members(datamodule, HeadData, f"data._target_={cfg.data._target_}")
    prepare_once(datamodule, cfg.data)
    datamodule.setup("fit")
    module: pl.LightningModule = instantiate(
        cfg.module, model=model_kwargs(cfg), **datamodule.module_kwargs(), _convert_="all"
    )
    require_members(module, HeadModule, f"module._target_={cfg.module._target_}")
    check_model_target(cfg, module.net)
    if resumed is not None:
        require_fit(resumed, ckpt_path, module, model_kwargs(cfg))  # before Lightning's long shape error
    elif pretrained:
        fresh = module.load_pretrained(str(pretrained))
        log.info("started from pretrained=%s%s", pretrained, f" (new: {', '.join(fresh)})" if fresh else "")
    if cfg.get("compile"):
        module.net.compile(**(cfg.get("compile_options") or {}))  # in place: state-dict keys unchanged

    start = time.perf_counter()
    try:
        fit_or_preempt(trainer, preemption, model=module, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)
    except TrainingDiverged as diverged:  # no test of diverged weights: the run says so and names its last good checkpoint
        if trainer.is_global_zero:
            record = {"fit_seconds": time.perf_counter() - start, "optimizer_steps": trainer.global_step}
            write_json_atomically(output_dir / "metrics.json", {**record, **diverged.metrics()})
        raise
    metrics = scalar_metrics(trainer.callback_metrics)
    metrics["fit_seconds"] = time.perf_counter() - start
    metrics["optimizer_steps"] = trainer.global_step
    # The module and the checkpoints now hold a weight-averaging callback's average (EMA); left in
    # place, the callback would load a checkpoint's raw weights back into the module for the test.
    trainer.callbacks = [callback for callback in trainer.callbacks if not isinstance(callback, WeightAveraging)]
    best = best_checkpoint(trainer, cfg.optimized_metric)
    last = output_dir / "checkpoints" / "last.ckpt"
    evaluate_command = f"python -m {cfg.module._target_.split('.')[0]}.evaluate"
    with preempted_after_training(trainer, best or (str(last) if last.is_file() else ""), evaluate_command, preemption.held):
        if cfg.optimized_metric not in metrics:  # training stopped (max_steps) before any validation
            for results in trainer.validate(module, datamodule=datamodule):
                metrics.update(scalar_metrics(results))
        if not best:
            log.warning("no best checkpoint was saved; testing the weights at the end of training")
        for results in trainer.test(module, datamodule=datamodule, ckpt_path=best or None, weights_only=True):
            metrics.update(scalar_metrics(results))
    rate_key = f"train/{module.throughput_unit}_per_second"
    if rate_key in metrics:
        metrics[f"train_{module.throughput_unit}_per_second"] = metrics.pop(rate_key)

    if trainer.is_global_zero:
        write_json_atomically(output_dir / "metrics.json", metrics)
        log.info("metrics written to %s", output_dir / "metrics.json")
    return metrics.get(cfg.optimized_metric)
