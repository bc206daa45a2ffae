"""Faults under DDP and on a shared run directory: a failing rank ends the whole job quickly with
its error, a second run on a directory in use is refused, and a killed write (a checkpoint's or
any file's) leaves nothing behind the next run or the next write of that file."""

from __future__ import annotations

import errno
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest

from core.errors import InputError
from core.files.atomic import atomic_directory, atomic_path, staging_directory, temporary_file
from core.training.callbacks.faults import PREEMPTED_EXIT
from core.training.runner import train
from tests.core.test_runner import tiny_config
from tests.nlp.conftest import SUBPROCESS_ENV, reverse_pairs, write_lines

ROOT = Path(__file__).resolve().parents[2]
NO_PID = 1 << 23  # above Linux's largest pid_max (2**22): no process of this machine has it


class RaiseOnRank(pl.Callback):
    """Fails in process ``rank`` after optimizer step ``step``, as a bad node or a bug would."""

    def __init__(self, rank: int, step: int) -> None:
        self.rank, self.step = rank, step

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_rank == self.rank and trainer.global_step == self.step:
            raise RuntimeError(f"rank {self.rank} failed on purpose at step {self.step}")


def test_a_second_run_on_a_directory_in_use_is_refused(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from filelock import FileLock; "
         "lock = FileLock(sys.argv[1]); lock.acquire(); print('held', flush=True); time.sleep(60)", str(tmp_path / ".run.lock")],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(InputError, match=f"{tmp_path} is in use by another run.*ckpt_path=.*last.ckpt"):
            train(tiny_config(tmp_path, "trainer.max_steps=1"))
    finally:
        holder.kill()
        holder.communicate()  # reaps it and closes the pipe
    train(tiny_config(tmp_path, "trainer.max_steps=1"))  # free again: the run goes ahead
    assert (tmp_path / "metrics.json").is_file()


@contextmanager
def stopped_writer(path: Path, writer: str, write: str) -> Iterator[int]:
    """A process of this machine stopped inside ``with <writer>(path) as out:`` (a writer of
    ``core.files.atomic``) after ``write``; yields its pid, and kills it on exit."""
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        f"from core.files.atomic import {writer}\n"
        f"with {writer}(Path(sys.argv[1])) as out:\n"
        f"    {write}\n"
        "    print('writing', flush=True)\n"
        "    time.sleep(600)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(path)], cwd=ROOT, env=SUBPROCESS_ENV, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == "writing\n"
        yield process.pid
    finally:
        process.kill()
        process.communicate()  # reaps it: a dead process, no longer in the process table


@contextmanager
def writing(path: Path) -> Iterator[Path]:
    """A process of this machine stopped inside an ``atomic_path`` write of ``path``; yields the
    temporary file it has written (``.<stem>.<machine>.<pid>.tmp<suffix>``), and kills it on exit."""
    with stopped_writer(path, "atomic_path", "out.write_bytes(bytes(100_000))") as pid:
        yield temporary_file(path, pid)


def test_a_checkpoint_write_killed_midway_leaves_nothing_behind_the_next_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``kill -9`` during a checkpoint write leaves its hidden temporary file, as large as the
    checkpoint; the next run on the directory removes it once it holds the directory."""
    last = tmp_path / "checkpoints" / "last.ckpt"
    with writing(last) as leftover:
        pass
    assert leftover.is_file() and not last.exists()
    kept = last.with_name("notes.tmp.ckpt")  # not a temporary file's name: the user's
    kept.write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="core.training.callbacks.faults"):
        train(tiny_config(tmp_path, "trainer.max_steps=1"))
    assert not leftover.exists() and kept.exists() and last.is_file()
    assert "removed 1 temporary checkpoint file(s) of 0.1 MB that a killed run left" in caplog.text


def test_a_write_killed_midway_is_cleaned_up_by_the_next_write_of_that_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Any file written through ``atomic_path`` (an export, an averaged checkpoint,
    ``metrics.json``): the next write of it removes what a killed writer of this machine left, and
    keeps a live writer's file and one written from another machine."""
    model = tmp_path / "model.onnx"
    elsewhere = model.with_name(f".model.{socket.gethostname()}-2.{NO_PID}.tmp.onnx")
    elsewhere.write_bytes(b"")  # another machine's writer: its process is not this machine's to look up
    with writing(model) as live:
        with writing(model) as leftover:  # started after the live one, so its start leaves that one's file
            pass
        assert leftover.is_file() and live.is_file()
        with caplog.at_level(logging.WARNING, logger="core.files.atomic"), atomic_path(model) as tmp:
            tmp.write_bytes(b"new")
        assert live.is_file()  # still being written
    assert model.read_bytes() == b"new"
    assert not leftover.exists() and elsewhere.exists()
    assert f"removed 1 temporary file(s) of {model} (0.1 MB) that a killed write of it left" in caplog.text


def test_an_export_killed_midway_is_cleaned_up_by_the_next_export_to_that_directory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A directory written through ``atomic_directory`` (an export): the next write of it removes
    the folder a killed writer of this machine left, and keeps another machine's."""
    out = tmp_path / "export"
    with stopped_writer(out, "atomic_directory", "(out / 'model.bin').write_bytes(bytes(100_000))") as pid:
        pass
    leftover = staging_directory(out, "tmp", pid)
    elsewhere = out.with_name(f".export.{socket.gethostname()}-2.{NO_PID}.old")
    elsewhere.mkdir()
    assert (leftover / "model.bin").is_file() and not out.exists()
    with caplog.at_level(logging.WARNING, logger="core.files.atomic"), atomic_directory(out) as staging:
        (staging / "model.bin").write_bytes(b"new")
    assert (out / "model.bin").read_bytes() == b"new"
    assert not leftover.exists() and elsewhere.exists()
    assert f"removed 1 temporary folder(s) of {out} (0.1 MB) that a killed write of it left" in caplog.text


def test_an_export_whose_rename_fails_keeps_the_previous_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "export"
    out.mkdir()
    (out / "model.bin").write_bytes(b"old")
    real = os.replace

    def failing(source: object, target: object) -> None:
        if Path(str(source)).name.endswith(".tmp"):
            raise OSError(errno.EIO, "Input/output error")
        real(source, target)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises((OSError, InputError)), atomic_directory(out) as staging:
        (staging / "model.bin").write_bytes(b"new")
    assert (out / "model.bin").read_bytes() == b"old"
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["export"]


def test_a_container_under_the_same_host_name_names_its_temporary_files_apart(tmp_path: Path) -> None:
    """Containers that share a host name (``--network host``) each have their own process table,
    so a pid dead here may be a live writer there: a writer in another pid namespace names its
    temporary files apart from this one's, and a write of the same file here leaves them alone.
    Where this machine allows no pid namespace of our own (no ``unshare``), the other writer's
    name is the one :func:`core.files.atomic.machine_name` gives in another namespace."""
    model = tmp_path / "model.onnx"
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from core.files.atomic import temporary_file\n"
        "print(temporary_file(Path(sys.argv[1]), int(sys.argv[2])))\n"
    )
    command = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", sys.executable, "-c", script]
    other_namespace = os.stat("/proc/self/ns/pid").st_ino + 1
    theirs = model.with_name(f".{model.stem}.{socket.gethostname()}-pidns{other_namespace}.{NO_PID}.tmp{model.suffix}")
    try:
        container = subprocess.run(
            [*command, str(model), str(NO_PID)], cwd=ROOT, env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=120
        )
    except FileNotFoundError:  # no unshare(1)
        container = None
    if container is not None and not (container.returncode != 0 and container.stderr.startswith("unshare:")):
        theirs = Path(container.stdout.strip())  # a pid namespace of its own: its writer's real name
        assert container.returncode == 0 and theirs.parent == tmp_path, container.stderr
    assert theirs != temporary_file(model, NO_PID)
    theirs.write_bytes(b"")  # their writer's pid is not this machine's to look up
    with atomic_path(model) as tmp:
        tmp.write_bytes(b"new")
    assert theirs.exists() and model.read_bytes() == b"new"


@pytest.mark.slow
@pytest.mark.parametrize("rank", [0, 1])
def test_a_failing_rank_ends_the_ddp_job_with_its_error(tmp_path: Path, rank: int) -> None:
    corpus = write_lines(tmp_path / "pairs.tsv", [f"{s}\t{t}" for s, t in reverse_pairs(200, seed=0)])
    command = [
        sys.executable, "-m", "nlp.train", "data=files", f"data.train={corpus}", f"data.val={corpus}",
        "data.vocab_size=300", "data.max_tokens=64", "model=transformer_tiny", "trainer=ddp", "trainer.accelerator=cpu",
        "trainer.max_epochs=1000", "trainer.num_sanity_val_steps=0", "logger=csv", f"hydra.run.dir={tmp_path / 'run'}",
        "+callbacks.fail._target_=tests.core.test_faults.RaiseOnRank", f"+callbacks.fail.rank={rank}",
        "+callbacks.fail.step=3",
    ]
    start = time.monotonic()
    result = subprocess.run(command, cwd=ROOT, env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=300)
    elapsed = time.monotonic() - start
    assert result.returncode != 0
    assert f"rank {rank} failed on purpose at step 3" in result.stdout + result.stderr
    assert elapsed < 120  # not the 30-minute collective timeout


def test_sigterm_in_the_test_after_training_exits_143_and_names_the_checkpoint_to_evaluate(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="core.training.callbacks.faults"), pytest.raises(SystemExit) as stopped:
        train(tiny_config(tmp_path, "+callbacks.sigterm._target_=tests.core.interrupt.SigtermInTest"))
    assert stopped.value.code == PREEMPTED_EXIT
    (best,) = (tmp_path / "checkpoints").glob("best-*.ckpt")
    assert stopped.value.path == best  # Preempted, for a caller of train()
    assert f"before its evaluation: evaluate {best} with python -m tests.evaluate ckpt_path={best}" in caplog.text
    assert not (tmp_path / "metrics.json").exists()  # no figures of a test that did not finish


def test_sigterm_held_as_a_budget_ends_mid_accumulation_stops_the_evaluation_after_training(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A SIGTERM held between accumulated micro-batches when training stops there (a time budget's
    end) does not reach Lightning, which forgets its flag as the test starts: the run must not go
    on to evaluate as if no SIGTERM had come."""
    with caplog.at_level(logging.WARNING, logger="core.training.callbacks.faults"), pytest.raises(SystemExit) as stopped:
        train(tiny_config(
            tmp_path, "trainer.accumulate_grad_batches=2", "+callbacks.sigterm._target_=tests.core.interrupt.SigtermAsBudgetEnds",
            "+callbacks.sigterm.step=1",  # as the third batch starts; training stops after it
        ))
    assert stopped.value.code == PREEMPTED_EXIT
    assert "preempted (SIGTERM) after training ended at step 1, before its evaluation" in caplog.text
    assert not (tmp_path / "metrics.json").exists()
