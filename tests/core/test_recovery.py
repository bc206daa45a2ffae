"""Interrupted runs: a training process killed with SIGKILL in the middle of an epoch resumes from
its periodic ``last.ckpt`` and ends after as many optimizer steps as a run never stopped; a
checkpoint write that fails leaves the previous checkpoint whole."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

import core
from core.training.callbacks.checkpoints import AtomicCheckpointIO, periodic_last_checkpoint
from core.training.runner import train
from tests.core.test_runner import CONF, tiny_config

STEPS_PER_EPOCH = 10  # 160 samples / batch 16
RUN = [
    "+data.size=160",
    "trainer.max_epochs=2",
    "callbacks.periodic_checkpoint.every_n_minutes=null",
    "callbacks.periodic_checkpoint.every_n_train_steps=3",
]
CHILD = """
import sys
from hydra import compose, initialize_config_dir
from core.training.runner import train
with initialize_config_dir(config_dir=sys.argv[1], version_base="1.3"):
    train(compose("tiny", overrides=sys.argv[2:]))
"""


class Pace(pl.Callback):
    """Slows training down, so that the test can kill the process while an epoch is under way."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_train_batch_end(self, *args: Any) -> None:
        time.sleep(self.seconds)


def global_step(path: Path) -> int:
    return int(core.load_checkpoint(path)["global_step"])


def kill_in_mid_epoch(output_dir: Path, timeout: float = 240.0) -> int:
    """Start the tiny run in a subprocess, SIGKILL it as soon as a ``last.ckpt`` from the middle
    of an epoch exists, and return that checkpoint's step."""
    command = [sys.executable, "-c", CHILD, str(CONF), f"paths.output_dir={output_dir}", *RUN]
    command += ["+callbacks.pace._target_=tests.core.test_recovery.Pace", "+callbacks.pace.seconds=0.25"]
    last = output_dir / "checkpoints" / "last.ckpt"
    output_dir.mkdir(parents=True)
    log = output_dir / "child.log"
    with log.open("wb") as sink:
        child = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline and child.poll() is None:
                # Written atomically, so whenever the file exists it is a whole checkpoint.
                if last.exists() and global_step(last) % STEPS_PER_EPOCH:
                    child.send_signal(signal.SIGKILL)
                    break
                time.sleep(0.05)
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
    assert child.returncode == -signal.SIGKILL, log.read_text()[-3000:]
    assert not (output_dir / "metrics.json").exists()  # it was stopped before the end
    return global_step(last)


@pytest.mark.slow
def test_resume_after_sigkill_in_mid_epoch_ends_at_the_same_step(tmp_path: Path) -> None:
    killed_at = kill_in_mid_epoch(tmp_path / "killed")
    assert 0 < killed_at < 2 * STEPS_PER_EPOCH and killed_at % STEPS_PER_EPOCH

    last = tmp_path / "killed" / "checkpoints" / "last.ckpt"
    train(tiny_config(tmp_path / "resumed", *RUN, f"ckpt_path={last}"))
    train(tiny_config(tmp_path / "whole", *RUN))
    resumed, whole = (global_step(tmp_path / run / "checkpoints" / "last.ckpt") for run in ("resumed", "whole"))
    assert resumed == whole == 2 * STEPS_PER_EPOCH

    # The resumed run went on from the killed run's step: no step was trained twice.
    logged = (tmp_path / "resumed" / "csv" / "version_0" / "metrics.csv").read_text().splitlines()
    header = logged[0].split(",")
    steps = [int(row.split(",")[header.index("step")]) for row in logged[1:]]
    assert min(steps) >= killed_at


class Unpicklable:
    def __reduce__(self) -> Any:
        raise RuntimeError("serialization failed")


def test_failed_checkpoint_write_leaves_the_previous_checkpoint_whole(tmp_path: Path) -> None:
    io = AtomicCheckpointIO()
    path = tmp_path / "checkpoints" / "last.ckpt"
    io.save_checkpoint({"global_step": 3, "weight": torch.ones(4)}, path)
    with pytest.raises(RuntimeError, match="serialization failed"):
        io.save_checkpoint({"global_step": 6, "weight": torch.zeros(4), "bad": Unpicklable()}, path)
    assert global_step(path) == 3
    assert [p.name for p in path.parent.iterdir()] == ["last.ckpt"]  # no temporary file left behind


def test_the_periodic_checkpoint_waits_for_the_optimizer_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Accumulating 3 micro-batches a step: a save that is due is made after the step, never
    between the micro-batches (whose gradients a resumed run would not have)."""
    offered: list[int] = []
    monkeypatch.setattr(ModelCheckpoint, "on_train_batch_end", lambda self, trainer, *args: offered.append(trainer.global_step))
    periodic = periodic_last_checkpoint(str(tmp_path), every_n_minutes=10)
    trainer = SimpleNamespace(global_step=4)
    periodic.on_train_start(trainer, None)  # type: ignore[arg-type]
    for step in (4, 4, 5, 5, 5, 6):  # the optimizer stepped at the third and the sixth batch
        trainer.global_step = step
        periodic.on_train_batch_end(trainer, None, None, None, 0)  # type: ignore[arg-type]
    assert offered == [5, 6]
