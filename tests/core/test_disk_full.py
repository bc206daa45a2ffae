"""A write that cannot be done (full disk, no permission) ends in one clear error; the previous
file stays whole and no temporary file is left behind."""

from __future__ import annotations

import errno
import re
import shutil
import subprocess
import sys
import uuid
from collections import namedtuple
from pathlib import Path

import pytest
import torch

from core.files import atomic
from core.files.atomic import atomic_path
from core.training.callbacks.checkpoints import AtomicCheckpointIO
from core.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
Usage = namedtuple("Usage", "total used free")


def fill_the_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``torch.save`` fail as it does on a full disk (a partial write, then torch's
    ``unexpected pos`` error) on a file system with 10 kB free."""

    def fills_the_disk(obj: object, file) -> None:  # type: ignore[no-untyped-def]
        file.write(b"x" * 1000)
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1464960 vs 1464912")

    monkeypatch.setattr(torch, "save", fills_the_disk)
    monkeypatch.setattr(atomic.shutil, "disk_usage", lambda path: Usage(2_000_000, 1_990_000, 10_000))


def test_a_full_disk_during_a_checkpoint_keeps_the_last_good_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    io = AtomicCheckpointIO()
    target = tmp_path / "last.ckpt"
    io.save_checkpoint({"step": 1, "w": torch.ones(3)}, target)

    fill_the_disk(monkeypatch)
    with pytest.raises(InputError, match=r"cannot write .*last.ckpt: no space left on its file system \(0.0 MB free"):
        io.save_checkpoint({"step": 2, "w": torch.zeros(3)}, target)
    monkeypatch.undo()
    assert torch.load(target, weights_only=True)["step"] == 1
    assert [path.name for path in tmp_path.iterdir()] == ["last.ckpt"]


@pytest.mark.parametrize(("code", "words"), [(errno.ENOSPC, "no space left"), (errno.EACCES, "Permission denied")])
def test_os_errors_name_the_file_and_the_fix(tmp_path: Path, code: int, words: str) -> None:
    with pytest.raises(InputError, match=f"cannot write {tmp_path / 'metrics.json'}: {words}"):
        with atomic_path(tmp_path / "metrics.json") as tmp:
            tmp.write_text("{")
            raise OSError(code, "simulated")
    assert not list(tmp_path.iterdir())


def test_a_path_that_cannot_be_a_file_names_the_fix(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("")
    for path, words in ((tmp_path / "folder", "Is a directory"), (tmp_path / "file" / "out.png", "File exists")):
        with pytest.raises(InputError, match=re.escape(f"cannot write {path}: {words}; give the path of a file")):
            with atomic_path(path) as tmp:
                tmp.write_text("x")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["file", "folder"] and not list((tmp_path / "folder").iterdir())


def test_other_failures_keep_their_traceback(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="a bug"):
        with atomic_path(tmp_path / "out.bin"):
            raise RuntimeError("a bug")


def mounted_tiny_filesystem(mount: Path) -> bool:
    """Whether a 2 MB tmpfs could be mounted at ``mount`` (it needs root)."""
    mount.mkdir()
    return shutil.which("mount") is not None and not subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True
    ).returncode


@pytest.mark.slow
def test_training_onto_a_full_disk_is_one_error_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.nlp.conftest import SUBPROCESS_ENV

    mount = tmp_path / f"fs-{uuid.uuid4().hex[:8]}"
    run_dir = mount / "run"
    command = [
        sys.executable, "-m", "nlp.train", "data=toy", "model=transformer_mini", "trainer=cpu", "trainer.max_steps=2",
        "trainer.max_epochs=-1", "trainer.num_sanity_val_steps=0", "logger=csv", f"hydra.run.dir={run_dir}",
    ]
    if mounted_tiny_filesystem(mount):  # a real full disk, the command as a user runs it
        try:
            result = subprocess.run(command, cwd=ROOT, env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=300)
        finally:
            subprocess.run(["umount", str(mount)], check=False)
        assert result.returncode == 2, result.stderr[-2000:]
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "no space left on its file system" in errors[0] and "hydra.run.dir" in errors[0]
        assert "Traceback" not in result.stderr
        return
    # Without root: the same run in-process, on a disk that fills during the first checkpoint.
    from core.training.runner import train
    from tests.nlp.conftest import nlp_config

    fill_the_disk(monkeypatch)
    with pytest.raises(InputError, match=r"cannot write .*\.ckpt: no space left on its file system.*hydra.run.dir"):
        train(nlp_config(run_dir, *command[3:-2]))
    assert not list(run_dir.rglob(".*tmp*"))
