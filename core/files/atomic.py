"""Writing files and directories so that a reader (or a run resumed after ``kill -9``) never sees
half of one, and a write that cannot be done (a full disk, a read-only or foreign directory) ends in
one clear error rather than a traceback from deep inside the serializer."""

from __future__ import annotations

import errno
import glob
import logging
import os
import re
import shutil
import socket
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from core.errors import InputError

NO_SPACE = {errno.ENOSPC, errno.EDQUOT}
NOT_WRITABLE = {errno.EACCES, errno.EPERM, errno.EROFS}
NOT_A_FILE_PATH = {errno.EISDIR, errno.ENOTDIR, errno.EEXIST}  # a directory at the path, or a file among its folders
FULL_BELOW = 1 << 20  # bytes free under which a serializer's failure is taken for a full disk

log = logging.getLogger(__name__)


def megabytes(count: int) -> str:
    return f"{count / 1e6:.1f} MB"


def write_error(path: Path, error: BaseException, written: int) -> InputError | None:
    """The one-line error for a failed write of ``path`` (``written`` bytes of it were written),
    or None when the failure is not about the place written to. torch's zip writer reports a full
    disk as a ``RuntimeError`` ("unexpected pos"), so any failure with less than 1 MiB left on the
    file system counts as one."""
    directory = next((parent for parent in (path.parent, *path.parents) if parent.exists()), Path("/"))
    code = getattr(error, "errno", None)
    if code in NOT_WRITABLE:
        return InputError(
            f"cannot write {path}: {os.strerror(code)}; choose a writable directory (e.g. hydra.run.dir=...) "
            "or fix its permissions"
        )
    if code in NOT_A_FILE_PATH:
        return InputError(
            f"cannot write {path}: {os.strerror(code)}; give the path of a file, in a folder that is not a file"
        )
    free = shutil.disk_usage(directory).free
    if code in NO_SPACE or (isinstance(error, (OSError, RuntimeError)) and free < FULL_BELOW):
        return InputError(
            f"cannot write {path}: no space left on its file system ({megabytes(free)} free, the write had reached "
            f"{megabytes(written)}); free some space there or write elsewhere (e.g. hydra.run.dir=... on a larger disk)"
        )
    return None


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary file beside ``path`` (hidden, same suffix, which some loaders require) that
    replaces ``path`` when the block succeeds and is removed when it fails.

    The rename is atomic on one file system, so ``path`` holds the previous content or the new
    one, never part of it; the data is flushed to disk before the rename. A write that fails for
    want of space or permission raises :class:`InputError` saying which (:func:`write_error`);
    the previous ``path`` is left as it was. The temporary files of ``path`` that earlier writes
    on this machine left when their process was killed are removed first
    (:func:`remove_dead_writers`).
    """
    path = Path(path)
    tmp = temporary_file(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if leftovers := remove_dead_writers(path):
            log.warning(
                "removed %d temporary file(s) of %s (%s) that a killed write of it left",
                len(leftovers), path, megabytes(sum(leftovers.values())),
            )
        yield tmp
        with tmp.open("rb") as file:
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as error:
        # Measured before the temporary file is removed, which frees its space again.
        clear = write_error(path, error, tmp.stat().st_size if tmp.exists() else 0)
        remove(tmp)
        if clear is None:
            raise
        raise clear from None
    finally:
        remove(tmp)


def machine_name() -> str:
    """The name of the machine whose process table this process sees: the host name, and on Linux
    its process-ID namespace too (``<host>-pidns<inode>``), since containers sharing a host name
    each have their own processes, and their pids repeat."""
    try:
        return f"{socket.gethostname()}-pidns{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:  # no /proc: one namespace
        return socket.gethostname()


def temporary_file(path: Path, pid: int | None = None) -> Path:
    """Where :func:`atomic_path` writes ``path`` first (in process ``pid``, this one by default):
    beside it, hidden, with the same suffix and named for the machine and the process that write
    it, ``.<stem>.<machine>.<pid>.tmp<suffix>`` (:func:`machine_name`)."""
    return path.with_name(f".{path.stem}.{machine_name()}.{os.getpid() if pid is None else pid}.tmp{path.suffix}")


def remove_dead_writers(path: Path) -> dict[Path, int]:
    """Remove the temporary files of ``path`` (:func:`temporary_file`) whose writer ran on this
    machine and is no longer running (``kill -9``, an out-of-memory kill: nothing ran to remove
    them); returns each one's size in bytes. A live writer's file, and any file written from
    another machine or container sharing the directory, is kept: only this machine's process table
    can tell a dead writer from a live one."""
    writer = re.escape(f"{path.stem}.{machine_name()}")
    return unlink(file for file, pid in temporary_files(path.parent, path.suffix, writer) if not running(pid))


def running(pid: int) -> bool:
    """Whether process ``pid`` of this machine is running (this one included); True where the
    platform cannot tell without harm (``os.kill`` ends a process on Windows)."""
    if pid == os.getpid() or os.name != "posix":
        return True
    try:
        os.kill(pid, 0)  # signal 0: only checks that the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_leftovers(directory: Path, suffix: str) -> dict[Path, int]:
    """Remove the temporary files that writes of ``*<suffix>`` files into ``directory`` by
    :func:`atomic_path` left when their process was killed (``kill -9``, a lost node: nothing ran
    to remove them), from any machine; returns each one's size in bytes. Only for a directory the caller writes alone
    (a run's checkpoints under its lock, :func:`core.training.callbacks.faults.run_directory_claimed`):
    a write still going there would lose its file."""
    return unlink(file for file, _ in temporary_files(directory, suffix))


def temporary_files(directory: Path, suffix: str, writer: str = ".+") -> Iterator[tuple[Path, int]]:
    """The files in ``directory`` named as :func:`temporary_file` names those of ``*<suffix>``
    files, ``.<writer>.<pid>.tmp<suffix>`` (``writer``, a pattern, covers ``<stem>.<machine>``), each
    with the pid of the process that wrote it."""
    name = re.compile(rf"\.{writer}\.(\d+)\.tmp{re.escape(suffix)}")
    for file in directory.glob(f".*.tmp{glob.escape(suffix)}"):
        if (match := name.fullmatch(file.name)) and file.is_file():
            yield file, int(match[1])


def unlink(files: Iterable[Path]) -> dict[Path, int]:
    """Remove ``files``; returns each one's size in bytes, taken before it went."""
    removed = {file: file.stat().st_size for file in files}
    for file in removed:
        file.unlink(missing_ok=True)
    return removed


def remove(tmp: Path) -> None:
    """Remove the temporary file ``tmp`` if it was made (its folder may be no folder at all)."""
    if tmp.is_file():
        tmp.unlink()


def staging_directory(path: Path, kind: str, pid: int | None = None) -> Path:
    """Where :func:`atomic_directory` builds ``path`` (``kind`` tmp) or moves the previous one aside
    (``kind`` old) in process ``pid`` (this one by default): beside it, hidden, named for the
    machine and the process, ``.<name>.<machine>.<pid>.<kind>`` (:func:`machine_name`)."""
    return path.with_name(f".{path.name}.{machine_name()}.{os.getpid() if pid is None else pid}.{kind}")


def remove_dead_directories(path: Path) -> dict[Path, int]:
    """Remove the directories of :func:`staging_directory` that a write of ``path`` on this machine
    left when its process was killed (``kill -9``, an out-of-memory kill); returns each one's size
    in bytes. A live writer's, and any from another machine or container, are kept."""
    name = re.compile(rf"\.{re.escape(path.name)}\.{re.escape(machine_name())}\.(\d+)\.(?:tmp|old)")
    dead = [
        entry for entry in path.parent.glob(f".{glob.escape(path.name)}.*")
        if (match := name.fullmatch(entry.name)) and entry.is_dir() and not running(int(match[1]))
    ]
    removed = {entry: sum(file.stat().st_size for file in entry.rglob("*") if file.is_file()) for entry in dead}
    for entry in dead:
        shutil.rmtree(entry, ignore_errors=True)
    return removed


@contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """An empty directory beside ``path`` (hidden, :func:`staging_directory`) that replaces ``path``
    when the block succeeds and is removed when it fails, so ``path`` holds all of the previous
    files or all of the new ones, never a mix; its files are flushed to disk before the rename.

    A previous ``path`` (a directory; the caller decides whether it may go) is moved aside, the new
    one renamed into place and the previous one removed; should that rename fail, the previous one
    is put back. A write that fails for want of space or permission raises :class:`InputError`
    saying which (:func:`write_error`). The directories that writes of ``path`` on this machine left
    when their process was killed are removed first (:func:`remove_dead_directories`).
    """
    path = Path(path)
    staging, previous = staging_directory(path, "tmp"), staging_directory(path, "old")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if leftovers := remove_dead_directories(path):
            log.warning(
                "removed %d temporary folder(s) of %s (%s) that a killed write of it left",
                len(leftovers), path, megabytes(sum(leftovers.values())),
            )
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        yield staging
        for file in (file for file in staging.rglob("*") if file.is_file()):
            with file.open("rb") as handle:
                os.fsync(handle.fileno())
        if path.exists():
            os.replace(path, previous)
        try:
            os.replace(staging, path)
        except OSError:
            if previous.exists():
                os.replace(previous, path)
            raise
    except (OSError, RuntimeError) as error:
        written = sum(file.stat().st_size for file in staging.rglob("*") if file.is_file()) if staging.exists() else 0
        clear = write_error(path, error, written)
        if clear is None:
            raise
        raise clear from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(previous, ignore_errors=True)
