"""Two data-parallel processes (gloo on CPU) split each epoch's images between them and follow
one plan of a time-bounded run, so they size the regularization alike; they start from the same
weights and then draw their own random numbers (augmentation, dropout)."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from hydra import compose, initialize_config_dir

from core.training.plan.budget import run_plan
from core.training.runner import train
from tests.vision.vision_testdata import CONF, TINY_MODEL


class RecordRank(pl.Callback):
    """Writes, per process, its first epoch's batches, its plan and its regularization, and
    where its first epoch starts: a digest of the weights and the next draws of torch's and
    Python's global generators (read without consuming them)."""

    def __init__(self, directory: str) -> None:
        self.directory = Path(directory)
        self.batches: list[list[int]] = []
        self.start: dict[str, Any] = {}

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.current_epoch == 0:
            self.batches = [batch.tolist() for batch in trainer.train_dataloader.batch_sampler.batches()]
            weights = hashlib.sha256()
            for tensor in pl_module.state_dict().values():
                weights.update(tensor.detach().cpu().numpy().tobytes())
            with torch.random.fork_rng(devices=[]):
                torch_draws = torch.rand(4).tolist()
            python_state = random.getstate()
            python_draws = [random.random() for _ in range(4)]
            random.setstate(python_state)
            self.start = {"weights": weights.hexdigest(), "torch": torch_draws, "python": python_draws}

    def on_train_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        plan = run_plan(trainer)
        record = {
            "batches": self.batches,
            "plan": [plan.steps, plan.steps_per_epoch] if plan else None,
            "regularization": asdict(pl_module.regularization),
            "start": self.start,
        }
        (self.directory / f"rank{trainer.global_rank}.json").write_text(json.dumps(record))


@pytest.mark.slow
def test_two_processes_split_the_images_share_the_plan_and_draw_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # read by the spawned processes
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("vision", overrides=[
            f"paths.output_dir={tmp_path}", "trainer=cpu", "logger=csv", "callbacks.progress_bar=null",
            "trainer.enable_model_summary=false", "data=synthetic", "data.num_classes=3", "data.train_size=64",
            "data.val_size=16", "data.test_size=16", "data.batch_size=8", *TINY_MODEL, "trainer.devices=2",
            "trainer.strategy=ddp_spawn", "trainer.max_epochs=1000", "++trainer.max_time=00:00:00:05",
            "trainer.num_sanity_val_steps=0", "+callbacks.record._target_=tests.vision.test_ddp.RecordRank",
            f"+callbacks.record.directory={tmp_path}",
        ])
    train(cfg)
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    images = [sorted(i for batch in rank["batches"] for i in batch) for rank in ranks]
    assert [len(rank["batches"]) for rank in ranks] == [4, 4]  # 64 images, batches of 8, two processes
    assert sorted(images[0] + images[1]) == list(range(64))  # every image once per epoch, on one process
    assert ranks[0]["plan"] == ranks[1]["plan"] and ranks[0]["plan"][1] == 4
    assert ranks[0]["regularization"] == ranks[1]["regularization"]
    first, second = ranks[0]["start"], ranks[1]["start"]
    assert first["weights"] == second["weights"]  # one model
    assert first["torch"] != second["torch"] and first["python"] != second["python"]  # its own draws
