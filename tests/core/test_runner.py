"""The shared runner through the real Hydra compose API and a real Lightning Trainer."""

import json
import subprocess
import sys
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

import core
from core.errors import InputError
from core.training.runner import train
from tests.core.test_checkpoint import write_crafted_checkpoint
from tests.core.tiny_task import TinyModule

CONF = Path(__file__).parent / "conf"


def tiny_config(output_dir: Path, *overrides: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("tiny", overrides=[f"paths.output_dir={output_dir}", *overrides])


def test_core_imports_neither_lightning_nor_hydra() -> None:
    code = "import sys, core; print(any(m.split('.')[0] in ('lightning', 'hydra') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_run_writes_metrics_and_checkpoints(tmp_path: Path) -> None:
    result = train(tiny_config(tmp_path))
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert result == metrics["val/acc"]
    for key in ("val/acc", "test/acc", "test/loss", "fit_seconds", "train_samples_per_second"):
        assert isinstance(metrics[key], float), key
    assert metrics["train_samples_per_second"] > 0
    checkpoints = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert "last.ckpt" in checkpoints and any(name.startswith("best-") for name in checkpoints)
    # The checkpoint alone rebuilds the module, loaded as plain data.
    module = core.load_module(TinyModule, tmp_path / "checkpoints" / "last.ckpt")
    assert module.hparams["model"] == {"in_dim": 4, "dim": 16, "depth": 1, "num_heads": 2}
    assert module.net(torch.randn(1, 6, 4)).shape == (1, 2)


def test_testing_uses_the_best_checkpoint_by_the_optimized_metric(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A checkpoint callback monitoring `step` (the recent checkpoints) listed before the one
    # monitoring val/acc must not be taken for the best.
    tested: list[str | None] = []
    original_test = pl.Trainer.test

    def recording_test(self: pl.Trainer, *args: object, **kwargs: object) -> object:
        tested.append(kwargs.get("ckpt_path"))
        return original_test(self, *args, **kwargs)

    monkeypatch.setattr(pl.Trainer, "test", recording_test)
    train(tiny_config(
        tmp_path,
        "callbacks.recent_checkpoints.every_n_train_steps=1",
        "callbacks.recent_checkpoints.train_time_interval=null",
        "~callbacks.model_checkpoint",
        "+callbacks.best._target_=lightning.pytorch.callbacks.ModelCheckpoint",
        f"+callbacks.best.dirpath={tmp_path}/checkpoints",
        "+callbacks.best.filename=best",
        "+callbacks.best.monitor=val/acc",
        "+callbacks.best.mode=max",
    ))
    assert any(p.name.startswith("recent-") for p in (tmp_path / "checkpoints").iterdir())
    assert len(tested) == 1 and tested[0] is not None and Path(tested[0]).name == "best.ckpt"


def test_run_stopped_before_any_validation_still_reports_validation(tmp_path: Path) -> None:
    train(tiny_config(tmp_path, "trainer.max_steps=2"))  # the epoch has 4 steps
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert {"val/acc", "test/acc", "fit_seconds", "train_samples_per_second"} <= metrics.keys()
    assert all(key.startswith(("train", "val/", "test/", "fit_", "optimizer_steps")) for key in metrics)
    assert core.load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")["global_step"] == 2


def test_resume_from_last_checkpoint_continues_at_its_step(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    train(tiny_config(first, "trainer.max_epochs=1"))  # 64 samples / 16 = 4 steps
    last = first / "checkpoints" / "last.ckpt"
    assert core.load_checkpoint(last)["global_step"] == 4
    train(tiny_config(second, "trainer.max_epochs=3", f"ckpt_path={last}"))
    assert core.load_checkpoint(second / "checkpoints" / "last.ckpt")["global_step"] == 12
    logged = (second / "csv" / "version_0" / "metrics.csv").read_text().splitlines()
    header = logged[0].split(",")
    steps = [int(row.split(",")[header.index("step")]) for row in logged[1:]]
    assert min(steps) >= 4  # nothing was trained again from step 0


def test_crafted_resume_checkpoint_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    write_crafted_checkpoint(tmp_path / "evil.ckpt", marker)
    with pytest.raises(ValueError, match="could execute code"):
        train(tiny_config(tmp_path / "run", f"ckpt_path={tmp_path / 'evil.ckpt'}"))
    assert not marker.exists()


def test_unknown_config_key_is_reported(tmp_path: Path) -> None:
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="trainer.max_epoch"):
        tiny_config(tmp_path, "trainer.max_epoch=3")


def test_compile_option_compiles_the_network_in_place(tmp_path: Path) -> None:
    import torch._dynamo

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    train(tiny_config(tmp_path, "compile=true", "+compile_options.backend=eager", "trainer.max_epochs=1"))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > 0
    state = core.load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")["state_dict"]
    assert "net.embed.weight" in state and not any("_orig_mod" in key for key in state)


@pytest.mark.slow
def test_ddp_spawn_on_two_cpu_processes(tmp_path: Path) -> None:
    train(tiny_config(tmp_path, "trainer.devices=2", "trainer.strategy=ddp_spawn", "trainer.max_epochs=1"))
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert 0.0 <= metrics["test/acc"] <= 1.0
    # Two processes with a distributed sampler: 64 samples / (2 x 16) = 2 steps per epoch.
    assert core.load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")["global_step"] == 2


def test_an_optimized_metric_the_run_does_not_log_is_bad_input_naming_those_it_does(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"optimized_metric=val/accuracy is not among the metrics this validation logged \(.*val/acc.*\)"):
        train(tiny_config(tmp_path, "optimized_metric=val/accuracy", "trainer.max_epochs=1"))
