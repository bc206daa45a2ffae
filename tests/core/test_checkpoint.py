"""Checkpoints are data: a pickle that would run code is refused, not executed."""

import os
import random
from pathlib import Path

import pytest
import torch

import core
from core.errors import InputError


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


def test_a_file_that_is_not_a_checkpoint_is_not_called_dangerous(tmp_path: Path) -> None:
    (tmp_path / "image.ckpt").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    with pytest.raises(ValueError, match="is not a readable checkpoint") as error:
        core.load_checkpoint(tmp_path / "image.ckpt")
    assert "execute code" not in str(error.value)


def test_checkpoint_of_another_model_is_named(tmp_path: Path) -> None:
    torch.save({"hyper_parameters": {"num_classes": 3}, "state_dict": {}}, tmp_path / "other.ckpt")
    with pytest.raises(ValueError, match="was not written by a Linear"):
        core.load_module(torch.nn.Linear, tmp_path / "other.ckpt")


def test_random_bytes_are_always_one_clear_error(tmp_path: Path, recwarn: pytest.WarningsRecorder) -> None:
    # About 1 in 100 random files reads as a pickle that fails while decoding a string.
    rng = random.Random(0)
    path = tmp_path / "garbage.ckpt"
    for _ in range(400):
        path.write_bytes(rng.randbytes(4096))
        with pytest.raises(InputError, match="is not a readable checkpoint"):
            core.load_checkpoint(path)
    assert not [warning for warning in recwarn if "pickle protocol" in str(warning.message)]
