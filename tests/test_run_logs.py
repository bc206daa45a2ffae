"""What a training command prints and keeps: each log line once on the console and in the run
directory's log file, and no advertisement (core.commands.logs)."""

from __future__ import annotations

import logging
import warnings
from collections import Counter
from pathlib import Path

import pytest

from core.commands.logs import route_library_logs
from tests.command_runs import TINY_VISION_RUN, run_command


@pytest.mark.slow
def test_training_prints_each_line_once_and_keeps_them_in_the_log_file(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    output = run_command("vision.train", *TINY_VISION_RUN, "trainer.max_steps=5", f"hydra.run.dir={run_dir}")
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    repeated = {line: count for line, count in Counter(lines).items() if count > 1}
    assert not repeated, repeated
    assert not [line for line in lines if "litlogger" in line or "litmodels" in line or "Tip:" in line]
    assert not [line for line in lines if line.startswith("INFO: ")]  # Lightning's own console handler

    log_lines = [line for line in (run_dir / "train.log").read_text().splitlines() if line.strip()]
    assert sum("GPU available" in line for line in log_lines) == 1  # Lightning's lines reach the file
    assert any("metrics written to" in line for line in log_lines)
    assert set(log_lines) <= set(lines)  # and every line of the file was on the console, once


def test_lightning_handlers_give_way_only_to_configured_handlers() -> None:
    import lightning.pytorch  # noqa: F401  (adds Lightning's console handler)

    root, lightning_logger = logging.getLogger(), logging.getLogger("lightning")
    saved = (list(root.handlers), list(lightning_logger.handlers), lightning_logger.propagate)
    own = logging.StreamHandler()
    try:
        root.handlers[:] = []
        lightning_logger.handlers[:] = [own]
        with warnings.catch_warnings():
            route_library_logs()  # a program that configured no logging keeps Lightning's handler
        assert lightning_logger.handlers == [own]

        root.handlers[:] = [logging.NullHandler()]
        with warnings.catch_warnings():
            route_library_logs()
        assert lightning_logger.handlers == [] and lightning_logger.propagate
        tips = logging.getLogger("lightning.pytorch.utilities.rank_zero")
        assert not tips.filter(tips.makeRecord(tips.name, logging.INFO, "x", 1, "💡 Tip: try our cloud", (), None))
        assert tips.filter(tips.makeRecord(tips.name, logging.INFO, "x", 1, "GPU available: False", (), None))
    finally:
        logging.captureWarnings(False)
        root.handlers[:], lightning_logger.handlers[:], lightning_logger.propagate = saved
