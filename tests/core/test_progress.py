"""Progress output: the rich bar on a terminal, plain log lines with step, loss, speed and time left
anywhere else, written by a real Trainer run."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from lightning.pytorch.callbacks import RichProgressBar

from core.training.callbacks.progress import LogProgress, progress_bar
from core.training.runner import train
from tests.core.test_runner import tiny_config

LOG_PROGRESS = "callbacks.progress_bar={_target_:core.training.callbacks.progress.LogProgress,every_n_seconds:0}"


def test_rich_bar_only_on_an_interactive_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(progress_bar(interactive=True), RichProgressBar)
    assert isinstance(progress_bar(interactive=False), LogProgress)
    # Otherwise rich decides; TTY_INTERACTIVE is its override of the terminal check.
    monkeypatch.setenv("TTY_INTERACTIVE", "0")
    assert isinstance(progress_bar(every_n_seconds=5), LogProgress)
    assert progress_bar(every_n_seconds=5).every_n_seconds == 5
    monkeypatch.setenv("TTY_INTERACTIVE", "1")
    assert isinstance(progress_bar(), RichProgressBar)


def test_log_lines_carry_step_loss_speed_and_time_left(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="core.training.callbacks.progress"):
        train(tiny_config(tmp_path, LOG_PROGRESS, "trainer.max_epochs=2"))  # 4 steps per epoch
    lines = [r.getMessage() for r in caplog.records if r.name == "core.training.callbacks.progress"]
    train_lines = [line for line in lines if "steps/s" in line]
    assert len(train_lines) == 8 + 2  # every step (every_n_seconds=0) and each epoch end
    pattern = (
        r"epoch (\d) \| step (\d+)/8 \| train/loss \d\.\d+ \| [\d.e+]+ steps/s(, [\d.e+]+ samples/s)? "
        r"\| elapsed \d:\d\d:\d\d \| left \d:\d\d:\d\d"
    )
    matches = [re.fullmatch(pattern, line) for line in train_lines]
    assert all(matches), train_lines
    assert [int(m.group(2)) for m in matches] == [1, 2, 3, 4, 4, 5, 6, 7, 8, 8]  # type: ignore[union-attr]
    # Images or tokens per second: the rate of the last finished epoch, so from the second epoch on.
    assert [bool(m.group(3)) for m in matches] == [False] * 4 + [True] * 6  # type: ignore[union-attr]
    assert train_lines[-1].endswith("left 0:00:00")
    validations = [line for line in lines if "validation" in line]
    assert len(validations) >= 2 and all("val/acc" in line and "val/loss" in line for line in validations)


def test_time_left_follows_max_time_when_it_comes_first(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="core.training.callbacks.progress"):
        train(tiny_config(tmp_path, LOG_PROGRESS, "trainer.max_epochs=1000", "trainer.max_time=00:00:00:03"))
    lines = [r.getMessage() for r in caplog.records if r.name == "core.training.callbacks.progress" and "steps/s" in r.getMessage()]
    # While the pace is measured there is no total yet (the 4,000 steps of max_epochs would mislead),
    # then the planned total of the run's plan, well short of 4,000.
    assert "| step 1 |" in lines[0] and re.search(r"left 0:00:0[0-3]$", lines[0])
    totals = [int(found.group(1)) for line in lines if (found := re.search(r"step \d+/(\d+)", line))]
    assert totals and all(total < 4000 for total in totals)
