"""Checkpoint averaging: the recent checkpoints a run keeps, ``python -m nlp.average``, and the
averaged checkpoint used for translation and for resuming."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from core.files.checkpoints import load_checkpoint
from core.errors import InputError
from core.training.runner import train
from nlp import average, translate
from nlp.module import TranslationModule, load_translator
from nlp.data.tokenizer import SubwordTokenizer
from tests.nlp.conftest import nlp_config

TINY_MODEL = dict(dim=32, num_heads=4, encoder_depth=1, decoder_depth=1, ffn_dim=64, max_len=64)
TOY = ("data=toy", "model=transformer_tiny", "trainer.num_sanity_val_steps=0")
RECENT = (
    "callbacks.recent_checkpoints.train_time_interval=null",
    "callbacks.recent_checkpoints.every_n_train_steps=2",
    "callbacks.recent_checkpoints.save_top_k=2",
)


@pytest.fixture(scope="module")
def recent(tmp_path_factory: pytest.TempPathFactory, toy_tokenizer: SubwordTokenizer) -> list[Path]:
    """Two checkpoints of one model configuration with different weights, in the layout Lightning
    writes (hyperparameters, state dict, step)."""
    directory = tmp_path_factory.mktemp("checkpoints")
    paths = []
    for step in (4, 6):
        torch.manual_seed(step)
        module = TranslationModule(model=dict(TINY_MODEL), tokenizer=toy_tokenizer.to_json())
        path = directory / f"recent-step{step:07d}.ckpt"
        checkpoint = {"hyper_parameters": dict(module.hparams), "state_dict": module.state_dict(), "global_step": step}
        torch.save(checkpoint, path)
        paths.append(path)
    return paths


def weights(path: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(path)["state_dict"]


def test_averaging_identical_checkpoints_changes_nothing(recent: list[Path]) -> None:
    averaged = average.average_checkpoints([recent[0]] * 3)
    original = weights(recent[0])
    assert averaged["state_dict"].keys() == original.keys()
    for name, tensor in original.items():
        assert torch.equal(averaged["state_dict"][name], tensor), name


def test_averaging_two_checkpoints_gives_their_mean_and_keeps_the_last_ones_state(recent: list[Path]) -> None:
    averaged = average.average_checkpoints(recent)
    first, second = weights(recent[0]), weights(recent[1])
    name = "net.encoder.layers.0.mlp.fc1.weight"
    assert name in first
    differs_from = {"first": False, "second": False}
    for key, tensor in averaged["state_dict"].items():
        torch.testing.assert_close(tensor, (first[key] + second[key]) / 2)
        differs_from["first"] |= not torch.equal(tensor, first[key])
        differs_from["second"] |= not torch.equal(tensor, second[key])
    assert differs_from == {"first": True, "second": True}
    assert averaged["global_step"] == 6


def test_average_command_writes_a_checkpoint_that_loads(
    recent: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "avg.ckpt"
    average.main([*map(str, recent), "--out", str(out)])
    assert "averaged 2 checkpoints" in capsys.readouterr().out
    assert [path.name for path in tmp_path.iterdir()] == ["avg.ckpt"]  # no temporary left behind
    expected = average.average_checkpoints(recent)["state_dict"]
    for name, tensor in load_translator(out).state_dict().items():
        assert torch.equal(tensor, expected[name]), name


@pytest.mark.slow
def test_a_run_keeps_recent_checkpoints_whose_average_translates_and_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train(nlp_config(tmp_path / "run", *TOY, *RECENT, "trainer.max_steps=6"))
    kept = sorted((tmp_path / "run" / "checkpoints").glob("recent-step*.ckpt"))
    assert [path.name for path in kept] == ["recent-step0000004.ckpt", "recent-step0000006.ckpt"]
    out = tmp_path / "avg.ckpt"
    average.main([*map(str, kept), "--out", str(out)])
    assert "optimizer_states" in load_checkpoint(out)  # the last checkpoint's, for resuming
    capsys.readouterr()
    translate.main([str(out), "--text", "winter is coming", "--beam", "2", "--device", "cpu"])
    assert len(capsys.readouterr().out.splitlines()) == 1
    resumed = tmp_path / "resumed"
    train(nlp_config(resumed, *TOY, f"ckpt_path={out}", "trainer.max_steps=8"))
    assert json.loads((resumed / "metrics.json").read_text())["test/loss"] > 0
    assert load_checkpoint(resumed / "checkpoints" / "last.ckpt")["global_step"] == 8


def test_mismatched_checkpoints_are_refused(
    recent: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = load_checkpoint(recent[0])
    other_model = tmp_path / "other_model.ckpt"
    other_hparams = {**checkpoint["hyper_parameters"], "model": {"dim": 32}}
    torch.save({**checkpoint, "hyper_parameters": other_hparams}, other_model)
    with pytest.raises(InputError, match="different 'model' hyperparameters"):
        average.average_checkpoints([recent[0], other_model])
    fewer = tmp_path / "fewer.ckpt"
    state = dict(checkpoint["state_dict"])
    state.pop("net.encoder.layers.0.mlp.fc1.weight")
    torch.save({**checkpoint, "state_dict": state}, fewer)
    with pytest.raises(InputError, match="hold different parameters"):
        average.average_checkpoints([recent[0], fewer])
    resized = tmp_path / "resized.ckpt"
    state = {**checkpoint["state_dict"], "net.encoder.layers.0.mlp.fc1.bias": torch.zeros(3)}
    torch.save({**checkpoint, "state_dict": state}, resized)
    with pytest.raises(InputError, match=r"'net.encoder.layers.0.mlp.fc1.bias' is \(3,\)"):
        average.average_checkpoints([recent[0], resized])
    with pytest.raises(SystemExit) as exit_info:
        average.main([str(recent[0]), str(tmp_path / "missing.ckpt"), "--out", str(tmp_path / "avg.ckpt")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("error: checkpoint") and "missing.ckpt does not exist" in error
    assert len(error.splitlines()) == 1
    assert not (tmp_path / "avg.ckpt").exists()


def test_an_out_that_is_a_directory_is_refused_before_the_averaging(
    recent: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        average.main([str(recent[0]), str(tmp_path / "missing.ckpt"), "--out", str(tmp_path)])
    assert exit_info.value.code == 2  # refused before the missing checkpoint is read
    error = capsys.readouterr().err
    assert error == f"error: --out {tmp_path} is a directory; pass a file name such as {tmp_path / 'averaged.ckpt'}\n"


def test_a_checkpoint_with_non_finite_weights_is_refused_and_nothing_is_written(
    recent: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = load_checkpoint(recent[1])
    state = dict(checkpoint["state_dict"])
    state["net.encoder.layers.0.mlp.fc1.bias"] = state["net.encoder.layers.0.mlp.fc1.bias"].clone()
    state["net.encoder.layers.0.mlp.fc1.bias"][0] = float("nan")
    diverged = tmp_path / "diverged.ckpt"
    torch.save({**checkpoint, "state_dict": state}, diverged)
    with pytest.raises(SystemExit) as exit_info:
        average.main([str(recent[0]), str(diverged), "--out", str(tmp_path / "avg.ckpt")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("error: checkpoint") and "diverged.ckpt holds weights that are not finite" in error
    assert "e.g. net.encoder.layers.0.mlp.fc1.bias" in error and "use an earlier checkpoint" in error
    assert len(error.splitlines()) == 1
    assert not (tmp_path / "avg.ckpt").exists()
