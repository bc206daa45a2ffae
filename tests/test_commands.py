"""Every command answers ``--help`` and refuses a bad argument before it imports torch,
Lightning, timm or matplotlib, and each is also an installed script (``[project.scripts]``)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from benchmarks.commands import ARGPARSE, HYDRA, bad_argument
from tests.test_bad_inputs import ENV, ROOT

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

HEAVY = {"torch", "lightning", "timm", "matplotlib"}


def run_importing(command: str, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``python -m command args`` and the top-level packages it imported (``-X importtime``)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", command, *args],
        cwd=ROOT, capture_output=True, text=True, env=ENV, timeout=300,
    )
    imported = {
        line.rsplit("|", 1)[-1].strip().split(".")[0] for line in result.stderr.splitlines() if line.startswith("import time:")
    }
    return result, imported


@pytest.mark.parametrize("command", ARGPARSE + HYDRA)
def test_help_and_a_bad_argument_come_before_the_heavy_imports(command: str) -> None:
    shown, imported = run_importing(command, "--help")
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert ("usage: python -m" in shown.stdout) if command in ARGPARSE else ("Powered by Hydra" in shown.stdout)
    assert not imported & HEAVY, imported & HEAVY
    refused, imported = run_importing(command, *bad_argument(command))
    errors = [line for line in refused.stderr.splitlines() if not line.startswith("import time:")]
    assert refused.returncode == 2 and len(errors) == 1 and errors[0].startswith("error: "), refused.stderr[-2000:]
    assert not imported & HEAVY, imported & HEAVY


def test_every_command_is_an_installed_script() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert sorted(target.split(":")[0] for target in scripts.values()) == sorted(
        f"{name}.cli" if name == "nlp.walkthrough" else name for name in ARGPARSE + HYDRA
    )
    for name, target in scripts.items():
        module, function = target.split(":")
        assert name == module.split(".cli")[0].replace(".", "-")
        assert callable(getattr(importlib.import_module(module), function))
