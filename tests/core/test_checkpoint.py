"""Checkpoints are data: a pickle that would run code is refused, not executed."""

import os
from pathlib import Path

import pytest
import torch

import core


class Exploit:
    """Unpickling this object would create a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (str(self.marker),))


def write_crafted_checkpoint(path: Path, marker: Path) -> None:
    torch.save({"state_dict": {}, "payload": Exploit(marker)}, path)


def test_crafted_pickle_is_refused_and_not_executed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    write_crafted_checkpoint(tmp_path / "evil.ckpt", marker)
    with pytest.raises(ValueError, match="refused: loading it could execute code"):
        core.load_checkpoint(tmp_path / "evil.ckpt")
    assert not marker.exists()


def test_missing_and_non_checkpoint_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nothing.ckpt does not exist"):
        core.load_checkpoint(tmp_path / "nothing.ckpt")
    (tmp_path / "text.ckpt").write_text("not a checkpoint")
    with pytest.raises(ValueError, match="text.ckpt"):
        core.load_checkpoint(tmp_path / "text.ckpt")
    torch.save({"weights": torch.zeros(1)}, tmp_path / "bare.ckpt")
    with pytest.raises(ValueError, match="lacks"):
        core.load_module(torch.nn.Linear, tmp_path / "bare.ckpt")
