"""Preemption of an image run: SIGTERM in the middle of an epoch saves the step, exits with
status 143, and the resumed run trains on exactly the batches the uninterrupted run trained
next, at the same learning rates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
from hydra import compose, initialize_config_dir

import core
from core.training.callbacks.faults import PREEMPTED_EXIT
from core.training.runner import train
from tests.vision.vision_testdata import CONF, TINY_MODEL

STEPS = 14  # 4 batches an epoch: the signal at step 6 lands in the middle of the second epoch


class RecordBatches(pl.Callback):
    """Appends each optimizer step's labels and learning rate to ``path`` (one JSON line each)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int) -> None:
        record = {"step": trainer.global_step, "labels": batch[1].tolist(), "lr": trainer.optimizers[0].param_groups[0]["lr"]}
        with open(self.path, "a") as handle:
            handle.write(json.dumps(record) + "\n")


def config(run_dir: Path, *overrides: str):  # type: ignore[no-untyped-def]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("vision", overrides=[
            f"paths.output_dir={run_dir}", "trainer=cpu", "logger=csv", "callbacks.progress_bar=null",
            "trainer.enable_model_summary=false", "data=synthetic", "data.num_classes=3", "data.train_size=64",
            "data.val_size=16", "data.test_size=16", "data.batch_size=16", *TINY_MODEL, "trainer.max_epochs=-1",
            f"trainer.max_steps={STEPS}", "trainer.num_sanity_val_steps=0", "module.warmup_epochs=1",
            "+callbacks.record._target_=tests.vision.test_preemption.RecordBatches",
            f"+callbacks.record.path={run_dir / 'batches.jsonl'}", *overrides,
        ])


def recorded(run_dir: Path) -> dict[int, dict[str, Any]]:
    lines = (run_dir / "batches.jsonl").read_text().splitlines()
    return {record["step"]: record for record in map(json.loads, lines)}


@pytest.mark.parametrize(
    ("bound", "steps"), [((), STEPS), (("trainer.max_epochs=4", "trainer.max_steps=-1"), 16)], ids=["steps", "epochs"]
)  # an epoch bound's schedule is planned once Lightning has restored the loader's position
def test_sigterm_mid_epoch_resumes_on_the_same_batches_and_rates(tmp_path: Path, bound: tuple[str, ...], steps: int) -> None:
    whole, interrupted = tmp_path / "whole", tmp_path / "interrupted"
    whole.mkdir()
    interrupted.mkdir()
    train(config(whole, *bound))
    with pytest.raises(SystemExit) as stopped:
        train(config(
            interrupted, *bound, "+callbacks.sigterm._target_=tests.core.interrupt.SigtermAt", "+callbacks.sigterm.step=6"
        ))
    assert stopped.value.code == PREEMPTED_EXIT
    last = interrupted / "checkpoints" / "last.ckpt"
    checkpoint = core.load_checkpoint(last)
    assert checkpoint["global_step"] == 6
    assert checkpoint["loops"]["fit_loop"]["state_dict"]["combined_loader"][0].items() >= {"epoch": 1, "batches": 2}.items()

    train(config(interrupted, *bound, f"ckpt_path={last}"))
    expected, resumed = recorded(whole), recorded(interrupted)
    assert sorted(expected) == sorted(resumed) == list(range(steps))
    assert len({tuple(record["labels"]) for record in expected.values()}) > 4  # the epochs are shuffled differently
    for step in range(steps):
        assert resumed[step]["labels"] == expected[step]["labels"], step
        assert resumed[step]["lr"] == pytest.approx(expected[step]["lr"], rel=1e-9), step
