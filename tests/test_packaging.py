"""The installed project: a wheel built from the checkout holds only the project's own packages
(``core``, ``nlp``, ``vision`` and the configs as the package ``conf``; no ``benchmarks``, no
``tests``), and once installed in a fresh environment both training commands run from a
directory outside the checkout.

How the environment is made, and why: the wheel is installed without downloading anything, so
torch and the other dependencies must come from this interpreter's site-packages. A venv made
with ``--system-site-packages`` would also run the ``.pth`` files there, among them the finder
of this project's editable install (``pip install -e``), which maps ``benchmarks`` (and every
package) to the checkout: ``import benchmarks`` would then succeed whatever the wheel holds. So
the venv is made without the system site-packages, and a ``.pth`` file in it lists this
interpreter's site-packages directories as plain paths: their modules are importable, but the
``.pth`` files inside them (the editable finder) are not run, since Python runs the ``.pth``
files of site directories only. The venv's own site-packages come first on ``sys.path``, so the
wheel's ``vision`` is the one imported, which the test checks. pip too comes from those paths
(``--without-pip`` spares the venv a copy) and installs into the venv.

The checkout is copied (tracked and untracked files, not the ignored ones) before the build, so
that the build's ``build/`` and ``*.egg-info`` do not land in the working tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.vision.vision_testdata import TINY_MODEL

ROOT = Path(__file__).resolve().parents[1]
# Top-level entries of the checkout that git ignores (.gitignore) or that are not the project's.
NOT_COPIED = {".git", "build", "dist", "outputs", "multirun", "data", "site", "lightning_logs", ".pytest_cache"}
PACKAGES = {"core", "nlp", "vision", "conf"}


def copy_checkout(target: Path) -> Path:
    """The checkout's files under ``target``, without build outputs and caches."""

    def ignored(directory: str, names: list[str]) -> set[str]:
        top = NOT_COPIED if Path(directory) == ROOT else set()
        return {name for name in names if name in top or name == "__pycache__" or name.endswith(".egg-info")}

    return Path(shutil.copytree(ROOT, target, ignore=ignored))


def site_directories() -> list[str]:
    """This interpreter's site-packages directories, where torch and the other dependencies are."""
    return [path for path in sys.path if Path(path).name in ("site-packages", "dist-packages") and Path(path).is_dir()]


def run(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.mark.slow
def test_the_wheel_installs_only_the_project_and_its_commands_run_outside_the_checkout(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "HYDRA_FULL_ERROR")}
    env.update(OMP_NUM_THREADS="1", PIP_DISABLE_PIP_VERSION_CHECK="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    source = copy_checkout(tmp_path / "checkout")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), "."], source, env)
    (wheel,) = tmp_path.glob("transformer_toolkit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")} == PACKAGES
    assert {"conf/vision.yaml", "conf/nlp_eval.yaml", "conf/model/vit_tiny.yaml", "conf/trainer/cpu.yaml"} <= set(names)

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    python = str(venv / "bin" / "python")
    purelib = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path, env).stdout.strip())
    (purelib / "dependencies.pth").write_text("".join(f"{path}\n" for path in site_directories()))
    run([python, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "-q", str(wheel)], tmp_path, env)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    located = run([python, "-c", "import conf, core, nlp, vision; print(vision.__file__, conf.__file__)"], elsewhere, env)
    assert all(Path(path).is_relative_to(purelib) for path in located.stdout.split()), located.stdout
    refused = subprocess.run([python, "-c", "import benchmarks"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert refused.returncode != 0 and "No module named 'benchmarks'" in refused.stderr, refused.stderr
    assert "Powered by Hydra" in run([str(venv / "bin" / "vision-train"), "--help"], elsewhere, env).stdout

    commands = {
        "vision": ["vision.train", "data=synthetic", "data.num_classes=3", "data.train_size=32", "data.val_size=8",
                   "data.test_size=8", "data.batch_size=16", *TINY_MODEL],
        "nlp": ["nlp.train", "data=toy", "model=transformer_tiny"],
    }
    for head, arguments in commands.items():
        run_dir = elsewhere / head
        run([python, "-m", *arguments, "trainer=cpu", "logger=csv", "trainer.max_steps=2", "callbacks.progress_bar=null",
             f"hydra.run.dir={run_dir}"], elsewhere, env)
        assert (run_dir / "checkpoints" / "last.ckpt").is_file(), head
        assert "fit_seconds" in json.loads((run_dir / "metrics.json").read_text()), head
