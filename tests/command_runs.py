"""Running the commands as a user does, in a subprocess from the project root, on tiny settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A ViT of two layers on 64 synthetic 16px images of 3 classes: a training command in seconds.
TINY_VISION_RUN = [
    "data=synthetic", "data.num_classes=3", "data.train_size=64", "data.val_size=32", "data.test_size=32",
    "data.batch_size=16", "model.img_size=16", "model.patch_size=4", "model.dim=32", "model.depth=2",
    "model.num_heads=2", "model.drop_path=0.0", "trainer=cpu",
]


def run_command(module: str, *overrides: str) -> str:
    """``python -m module overrides`` from the project root; its stdout and stderr together."""
    completed = subprocess.run(
        [sys.executable, "-m", module, *overrides], cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return completed.stdout + completed.stderr
