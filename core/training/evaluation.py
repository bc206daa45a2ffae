"""Evaluating a trained checkpoint: the training composition (config -> datamodule -> module ->
Trainer -> ``metrics.json``) with the module read from the checkpoint and ``fit`` left out, as
lightning-hydra-template's ``eval.py``.

The evaluate command of every head (:func:`core.training.commands.apps.evaluation_app`) runs
:func:`evaluate_checkpoint`, which loads the module as the head's :class:`~core.training.head.Head`
says and calls :func:`evaluate` with what only the head knows: the data settings the checkpoint
fixes (preprocessing, tokenizer) and reports that add entries to ``metrics.json`` (a confusion
matrix, sacreBLEU signatures).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from hydra.utils import get_method, instantiate
from lightning.pytorch.callbacks import Callback
from omegaconf import DictConfig, OmegaConf, open_dict

from core.errors import InputError
from core.training.plan.precision import resolve_precision
from core.training.head import EvaluationSplits, Head, HeadData, HeadModule, SplitSelection, require_members
from core.training.runner import build_list, prepare_once, scalar_metrics, write_json_atomically
from core.training.commands.config_check import validate_config

log = logging.getLogger(__name__)

SPLITS = ("test", "val", "train")

Metrics = dict[str, float | str]


class EvaluationReport(Callback):
    """A callback of the evaluation Trainer whose :meth:`report` adds entries to ``metrics.json``
    (keys without the split prefix, which :func:`evaluate` adds) and may write files beside it."""

    def report(self, module: pl.LightningModule, output_dir: Path) -> Metrics:
        """Entries for ``metrics.json``, once the split has been evaluated."""
        return {}


def checkpoint_path(cfg: DictConfig) -> str:
    """``cfg.ckpt_path``, required: the checkpoint to evaluate."""
    path = cfg.get("ckpt_path")
    if not path:
        raise InputError("ckpt_path is required: pass ckpt_path=outputs/<run>/checkpoints/<name>.ckpt")
    return str(path)


def training_data_config(ckpt_path: str, package: str) -> DictConfig:
    """The ``data`` section of the training run that wrote ``ckpt_path``
    (``<run>/.hydra/config.yaml`` beside ``<run>/checkpoints/``), used when no ``data=`` is given.
    Only datamodules of the head's own ``package`` are accepted from it."""
    run_config = Path(ckpt_path).resolve().parent.parent / ".hydra" / "config.yaml"
    fix = "pass data=NAME (and its settings) to choose the data to evaluate on"
    if not run_config.is_file():
        raise InputError(f"no data= was given and {run_config} (the training run's config) does not exist; {fix}")
    data = OmegaConf.load(run_config).get("data")
    target = str(data.get("_target_", "")) if isinstance(data, DictConfig) else ""
    if not target.startswith(f"{package}."):
        raise InputError(f"{run_config} has no {package} data section (data._target_={target or None}); {fix}")
    log.info("no data= given: evaluating on the training run's data (%s)", run_config)
    return data


def compose(cfg: DictConfig, module: pl.LightningModule, package: str, data_overrides: dict[str, Any]) -> None:
    """Complete ``cfg`` from the checkpoint, in place: ``model`` is the checkpoint's, each
    ``module`` entry left null takes the checkpoint's value (the others override it in the
    module), ``data`` defaults to the training run's (a datamodule of the head's ``package``) and
    takes ``data_overrides``; then the
    values are validated as a training config's are."""
    hparams = module.hparams
    with open_dict(cfg):
        cfg.model = hparams["model"]
        for key, value in (cfg.get("module") or {}).items():
            if key not in hparams:
                raise InputError(f"module.{key} is not a setting of this checkpoint's {type(module).__name__}")
            if value is None:
                cfg.module[key] = hparams[key]
        if cfg.get("data") is None:
            cfg.data = training_data_config(cfg.ckpt_path, package)
        for key, value in data_overrides.items():
            cfg.data[key] = value
    validate_config(cfg)
    hparams.update(OmegaConf.to_container(cfg.get("module") or DictConfig({}), resolve=True))


def check_data_fits(datamodule: pl.LightningDataModule, module: pl.LightningModule) -> None:
    """Refuse data whose classes, tokenizer or preprocessing differ from the checkpoint's (a
    setting the checkpoint leaves at None, i.e. unrecorded, is not compared)."""
    differing = [
        key
        for key, value in datamodule.module_kwargs().items()
        if module.hparams.get(key) is not None and module.hparams[key] != value
    ]
    if differing:
        key = differing[0]
        raise InputError(
            f"the data does not fit the checkpoint: its {', '.join(differing)} differ from the checkpoint's "
            f"(data: {str(datamodule.module_kwargs()[key])[:80]}; checkpoint: {str(module.hparams[key])[:80]}); "
            "evaluate on data of the classes and preprocessing the model was trained with"
        )


def evaluate(
    cfg: DictConfig,
    module: pl.LightningModule,
    package: str,
    data_overrides: dict[str, Any] | None = None,
    reports: Sequence[EvaluationReport] = (),
    splits: Sequence[str] = SPLITS,
) -> Metrics:
    """Evaluate ``module`` (read from ``cfg.ckpt_path``, of the head ``package``) on ``cfg.split``
    and write ``metrics.json``.

    Steps: complete and validate the config (:func:`compose`); seed; instantiate the datamodule,
    tell it the split where it can prepare one alone (:class:`~core.training.head.SplitSelection`),
    prepare it and check that it fits the checkpoint; run the module's test loop over the split
    with the Trainer of ``cfg.trainer``; write the logged metrics, renamed from ``test/`` to the
    split's prefix, and the reports' entries to ``metrics.json`` in ``cfg.paths.output_dir``.
    """
    split = cfg.get("split", "test")
    if split not in splits:
        raise InputError(f"split={split} is not offered; choose one of {', '.join(splits)}")
    compose(cfg, module, package, data_overrides or {})
    output_dir = Path(cfg.paths.output_dir)
    pl.seed_everything(cfg.seed, workers=True)

    datamodule: pl.LightningDataModule = instantiate(cfg.data, _convert_="all")
    require_members(datamodule, HeadData, f"data._target_={cfg.data._target_}")
    if isinstance(datamodule, SplitSelection):
        datamodule.select_split(split)
    prepare_once(datamodule, cfg.data)
    datamodule.setup("test")
    check_data_fits(datamodule, module)
    # A datamodule whose training loader augments offers the plain split through evaluation_dataloader.
    if isinstance(datamodule, EvaluationSplits):
        loader = datamodule.evaluation_dataloader(split)
    else:
        loader = getattr(datamodule, f"{split}_dataloader")()

    resolve_precision(cfg.trainer)
    trainer: pl.Trainer = instantiate(
        cfg.trainer,
        callbacks=[*build_list(cfg.get("callbacks"), "callbacks"), *reports],
        logger=build_list(cfg.get("logger"), "logger") or False,
        _convert_="all",
    )
    metrics: Metrics = {}
    for results in trainer.test(module, dataloaders=loader):
        metrics.update(scalar_metrics(results))
    metrics = {f"{split}/{key.removeprefix('test/')}": value for key, value in metrics.items()}
    for report in reports:
        metrics.update({f"{split}/{key}": value for key, value in report.report(module, output_dir).items()})
    metrics.update({"ckpt_path": cfg.ckpt_path, "split": split})
    if trainer.is_global_zero:
        write_json_atomically(output_dir / "metrics.json", metrics)
        log.info("metrics written to %s", output_dir / "metrics.json")
    return metrics


def evaluate_checkpoint(cfg: DictConfig, head: Head) -> Metrics:
    """Evaluate the checkpoint ``cfg.ckpt_path`` of ``head`` as ``cfg`` says (:func:`evaluate`):
    the module is read by ``head.load_checkpoint``, the data takes ``head.checkpoint_data`` and
    the reports of ``head.evaluation_reports``. Returns what ``metrics.json`` holds."""
    path = checkpoint_path(cfg)
    module = get_method(head.load_checkpoint)(path)
    require_members(module, HeadModule, f"{head.load_checkpoint}({path})")
    output_dir = Path(cfg.paths.output_dir)
    data = get_method(head.checkpoint_data)(module, output_dir) if head.checkpoint_data else {}
    reports = get_method(head.evaluation_reports)(module) if head.evaluation_reports else []
    return evaluate(cfg, module, head.package, data, reports)
