"""The run directory every process of one launch agrees on (``hydra.run.dir``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from core.training.commands.hydra_app import launch_stamp

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
    OmegaConf.register_new_resolver("launch_stamp", launch_stamp, replace=True)
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(head, return_hydra_config=True)
    assert cfg.hydra.run.dir == f"outputs/{head}/slurm-99"
