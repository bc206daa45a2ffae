"""The ``logger=`` presets (conf/logger/): a run tracked by MLflow is read back through MLflow's own
API, and the W&B and many-loggers presets build offline. Nothing here reaches the network
(``WANDB_MODE=offline``, conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from lightning.pytorch.loggers import CSVLogger, MLFlowLogger, TensorBoardLogger, WandbLogger

from core.training.runner import build_list
from tests.command_runs import ROOT, TINY_VISION_RUN, run_command


def loggers(preset: str, output_dir: Path, *overrides: str) -> list:
    """The loggers ``logger=preset`` builds, composed as the command would (Hydra's own settings
    included, which the presets name the experiment after)."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("vision", overrides=[f"logger={preset}", f"paths.output_dir={output_dir}", *overrides],
                      return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        try:
            return build_list(cfg.logger, "logger")
        finally:
            HydraConfig.instance().cfg = None  # type: ignore[assignment]  # as outside a command


def test_the_default_loggers_are_csv_and_tensorboard(tmp_path: Path) -> None:
    assert [type(logger) for logger in loggers("default", tmp_path)] == [CSVLogger, TensorBoardLogger]
    assert [type(logger) for logger in loggers("tensorboard", tmp_path)] == [TensorBoardLogger]


def test_wandb_and_many_loggers_build_offline(tmp_path: Path) -> None:
    pytest.importorskip("wandb")
    pytest.importorskip("mlflow")
    (wandb,) = loggers("wandb", tmp_path / "run")
    assert isinstance(wandb, WandbLogger)
    assert wandb._offline and wandb.save_dir == str(tmp_path / "run")  # WANDB_MODE=dryrun when the run starts
    assert wandb._wandb_init["project"] == "transformer-toolkit-vision"
    many = loggers("many_loggers", tmp_path / "run")
    assert [type(logger) for logger in many] == [CSVLogger, TensorBoardLogger, MLFlowLogger, WandbLogger]
    assert [type(logger) for logger in loggers("many_loggers", tmp_path / "run", "~logger.wandb")][-1] is MLFlowLogger


@pytest.mark.slow
def test_a_run_tracked_by_mlflow_is_read_back_through_mlflow(tmp_path: Path) -> None:
    mlflow = pytest.importorskip("mlflow")
    run_command("vision.train", *TINY_VISION_RUN, "trainer.max_steps=5", "logger=mlflow", f"hydra.run.dir={tmp_path / 'run'}")
    # The store sits beside the run directory, for the runs of a head or the trials of a sweep.
    client = mlflow.tracking.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("transformer-toolkit-vision")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    params = run.data.params
    assert (float(params["lr"]), float(params["weight_decay"]), params["model/dim"]) == (2.0e-3, 0.05, "32")
    metrics = run.data.metrics
    assert {"train/loss", "val/acc", "val/loss", "test/acc", "test/acc5"} <= set(metrics)
    history = client.get_metric_history(run.info.run_id, "val/acc")
    assert history and all(0.0 <= point.value <= 1.0 for point in history)


def test_a_tracker_whose_package_is_missing_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``logger=mlflow`` without MLflow installed: one ``error:`` line naming the entry, the
    extra that installs it and how to leave it out; exit status 2, no run directory content."""
    import lightning.pytorch.loggers.mlflow as mlflow_logger
    from lightning_utilities.core.imports import RequirementCache

    from tests.test_bad_inputs import run_command as run_in_process

    monkeypatch.setattr(mlflow_logger, "_MLFLOW_AVAILABLE", RequirementCache("mlflow-not-installed-here>=1.0"))
    status = run_in_process("vision.train", [*TINY_VISION_RUN, "logger=mlflow", f"hydra.run.dir={tmp_path / 'run'}"], monkeypatch)
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error: logger.mlflow needs a package that is not installed (")
    assert '.[trackers]' in lines[0] and "~logger.mlflow" in lines[0]
    assert not (tmp_path / "run" / "checkpoints").exists()
