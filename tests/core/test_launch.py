"""The run directory every process of one launch agrees on (``hydra.run.dir``)."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from core.training.commands import hydra_app
from core.training.commands.hydra_app import launch_stamp, register_launch_stamp

CONF = Path(__file__).resolve().parents[2] / "conf"


def test_slurm_and_torchrun_launches_name_one_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SLURM_JOB_ID", "SLURM_ARRAY_TASK_ID", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", launch_stamp())
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")  # torchrun without --rdzv-id: the time
    assert re.fullmatch(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", launch_stamp())
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job7")
    assert launch_stamp() == "torchrun-job7"
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    assert launch_stamp() == "slurm-4242"
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    assert launch_stamp() == "slurm-4242_3"


@pytest.mark.parametrize("head", ["nlp", "vision"])
def test_training_configs_use_the_launch_stamp(head: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "99")
    register_launch_stamp()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(head, return_hydra_config=True)
    assert cfg.hydra.run.dir == f"outputs/{head}/slurm-99"


def test_the_run_directory_stays_the_one_first_read_as_the_clock_moves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lightning reads ``hydra.run.dir`` again when it starts a DDP run's other processes: they
    must get the directory the first process writes to, not one named for a later second."""
    for name in ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    seconds = iter(range(60))

    class Clock:
        @staticmethod
        def now() -> datetime:
            return datetime(2026, 1, 1, 12, 0, next(seconds))

    monkeypatch.setattr(hydra_app, "datetime", Clock)
    register_launch_stamp()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("nlp", return_hydra_config=True)
    first = cfg.hydra.run.dir
    assert first == "outputs/nlp/2026-01-01_12-00-00"
    assert cfg.hydra.run.dir == first and OmegaConf.to_container(cfg.hydra.run, resolve=True)["dir"] == first
