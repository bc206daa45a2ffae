"""The ``serve`` commands follow the convention of every command: ``--help`` and a bad option answer
before torch is imported, and bad input (a missing or wrong checkpoint, a port in use, no
LitServe) ends in one ``error:`` line and status 2, before any server starts, as do workers that
cannot load the model."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from core.errors import InputError
from core.serving.runner import require_litserve, serve
from tests.serve.server import free_port
from tests.test_bad_inputs import ENV, ROOT
from tests.test_commands import HEAVY, run_importing

pytest.importorskip("litserve", reason='serving needs litserve: pip install -e ".[serve]"')

COMMANDS = ["vision.serve", "nlp.serve"]


def error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if not line.startswith("import time:")]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_comes_before_the_heavy_imports(command: str) -> None:
    shown, imported = run_importing(command, "--help")
    assert shown.returncode == 0 and f"usage: python -m {command}" in shown.stdout, shown.stderr[-2000:]
    for name in ("--host", "--port", "--workers", "--max-batch-size", "--batch-timeout", "--max-body-bytes", "--device"):
        assert name in shown.stdout
    assert not imported & HEAVY, imported & HEAVY


BAD_OPTIONS = {
    "port 80": (["--port", "80"], "--port: expected a port from 1024 to 65535"),
    "batch timeout 60": (["--batch-timeout", "60"], "--batch-timeout: expected seconds from 0.001 to 10"),
    "batch timeout 0, a busy loop": (["--batch-timeout", "0"], "--batch-timeout: expected seconds from 0.001 to 10, got 0"),
    "a host that is no address to bind": (["--host", "example.org"], "--host: invalid choice"),
    "no workers": (["--workers", "0"], "--workers: expected a whole number of at least 1"),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", BAD_OPTIONS, ids=str)
def test_a_bad_option_is_one_error_line_before_the_heavy_imports(command: str, case: str) -> None:
    option, reason = BAD_OPTIONS[case]
    refused, imported = run_importing(command, "model.ckpt", *option)
    errors = error_lines(refused)
    assert refused.returncode == 2 and len(errors) == 1 and errors[0].startswith("error: ") and reason in errors[0], errors
    assert not imported & HEAVY, imported & HEAVY


def run(command: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", command, *args, "--device", "cpu"], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_missing_checkpoint_is_one_error_line(command: str, tmp_path: Path) -> None:
    result = run(command, str(tmp_path / "missing.ckpt"), "--port", str(free_port()))
    assert result.returncode == 2 and error_lines(result) == [
        line for line in result.stderr.splitlines() if line.startswith("error: ") and "missing.ckpt does not exist" in line
    ], result.stderr


@pytest.mark.slow  # loads both heads' checkpoints in a process of their own
@pytest.mark.parametrize("command", COMMANDS)
def test_a_checkpoint_of_the_other_head_is_one_error_line(
    command: str, classifier_checkpoint: Path, translator_checkpoint: Path
) -> None:
    checkpoint, reason = {
        "vision.serve": (translator_checkpoint, "was not written by a ImageClassifier"),
        "nlp.serve": (classifier_checkpoint, "was not written by a TranslationModule"),
    }[command]
    result = run(command, str(checkpoint), "--port", str(free_port()))
    lines = result.stderr.splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and reason in lines[0], result.stderr


def test_a_port_in_use_is_one_error_line(classifier_checkpoint: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("vision.serve", str(classifier_checkpoint), "--port", str(port))
    lines = result.stderr.splitlines()
    assert result.returncode == 2 and len(lines) == 1 and f"cannot listen on 127.0.0.1 port {port}" in lines[0], result.stderr


def test_without_litserve_the_fix_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "litserve", None)  # import litserve raises ImportError
    with pytest.raises(InputError, match=r'pip install -e "\.\[serve\]"'):
        require_litserve()


def test_an_export_on_a_device_ctranslate2_lacks_is_one_error_line_before_any_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    from nlp import serve
    from nlp.export.directory import METADATA

    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)  # a Mac's GPU
    (tmp_path / METADATA).write_text("{}")  # what marks an exported directory
    with pytest.raises(SystemExit) as stopped:
        serve.main([str(tmp_path), "--device", "mps"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err == "error: --device mps: a CTranslate2 model runs on cpu or cuda\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_device_the_server_has_no_accelerator_for_is_a_usage_error(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib

    with pytest.raises(SystemExit) as stopped:
        importlib.import_module(command).main(["model.ckpt", "--device", "meta"])
    assert stopped.value.code == 2
    assert "--device: 'meta' is not one of the devices this command runs on: cpu, cuda, mps" in capsys.readouterr().err


class WorkerThatCannotLoad:
    """A handler whose model fails to load in the inference worker: it raises, or the worker is
    killed loading it (as the kernel kills a process out of memory)."""

    def __init__(self, killed: bool) -> None:
        self.killed = killed

    def setup(self, device: str) -> None:
        if self.killed:
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError("CUDA out of memory")


@pytest.mark.slow  # starts an inference worker process
@pytest.mark.parametrize("killed", [False, True], ids=["raises", "killed"])
def test_workers_that_cannot_load_the_model_end_the_command_with_one_error_line(killed: bool) -> None:
    from vision import serve as vision_serve

    args = argparse.Namespace(
        host="127.0.0.1", port=free_port(), workers=1, max_batch_size=1, batch_timeout=0.01,
        max_body_bytes=1000, log_level="warning", device="cpu",
    )
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}  # serve() sets its own
    try:
        with pytest.raises(InputError, match="the inference workers could not load the model on cpu"):
            serve(WorkerThatCannotLoad(killed), vision_serve.ROUTE, vision_serve.route(), args, {})
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
