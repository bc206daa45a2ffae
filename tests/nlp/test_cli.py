"""The command lines end to end: ``python -m nlp.train data=toy`` then ``python -m nlp.translate``."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

import core
from nlp import translate
from nlp.data.tokenizer import SubwordTokenizer
from nlp.data.toy_corpus import TOY_PAIRS
from tests.nlp.conftest import SUBPROCESS_ENV

ROOT = Path(__file__).resolve().parents[2]
# Sources on stdin, with an empty line that must stay empty in the output.
STDIN = "\n".join([TOY_PAIRS[0][0], "", *(source for source, _ in TOY_PAIRS[1:])]) + "\n"
EXPECTED = [TOY_PAIRS[0][1], "", *(target for _, target in TOY_PAIRS[1:])]


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, input=stdin, capture_output=True, text=True, env=SUBPROCESS_ENV
    )


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("toy_run")
    result = run(
        "nlp.train", "data=toy", "model=transformer_tiny", "trainer=cpu", "logger=csv", f"hydra.run.dir={run_dir}"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


@pytest.mark.slow
def test_toy_training_writes_metrics_checkpoints_and_tokenizer(toy_run: Path) -> None:
    metrics = json.loads((toy_run / "metrics.json").read_text())
    for key in ("val/bleu", "test/bleu", "test/loss", "val/loss", "val/nll", "test/ppl", "fit_seconds", "train_tokens_per_second"):
        assert isinstance(metrics[key], float), key
    assert metrics["test/ppl"] == pytest.approx(math.exp(metrics["test/nll"]), rel=1e-5)
    assert metrics["test/bleu"] == 100.0
    checkpoints = toy_run / "checkpoints"
    best = next(checkpoints.glob("best-*.ckpt"))
    hparams = core.load_checkpoint(best)["hyper_parameters"]  # plain data, weights_only=True
    beside = SubwordTokenizer.from_file(checkpoints / "tokenizer.json")
    assert hparams["tokenizer"] == beside.to_json()
    assert hparams["model"]["dim"] == 64


@pytest.mark.slow
def test_translate_command_reproduces_the_toy_targets_from_stdin(toy_run: Path) -> None:
    best = next((toy_run / "checkpoints").glob("best-*.ckpt"))
    result = run("nlp.translate", str(best), "--beam", "4", stdin=STDIN)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == EXPECTED


@pytest.mark.slow
def test_translate_options_and_errors(toy_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    best = str(next((toy_run / "checkpoints").glob("best-*.ckpt")))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(STDIN.encode())))
    translate.main([best, "--beam", "1"])
    assert capsys.readouterr().out.splitlines() == EXPECTED
    # Greedy with a cap of 3 tokens (</s> included) keeps the first two words of a longer target.
    translate.main([best, "--beam", "1", "--text", TOY_PAIRS[1][0], "--text", TOY_PAIRS[2][0], "--max-len", "3"])
    assert capsys.readouterr().out.splitlines() == [" ".join(target.split()[:2]) for _, target in TOY_PAIRS[1:]]
    for arguments, message in [
        ([str(tmp_path / "nothing.ckpt"), "--text", "winter is coming"], "nothing.ckpt does not exist"),
        ([best, "--text", "winter", "--max-len", "1000"], "--max-len must be in 1..128"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            translate.main(arguments)
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--batch-size", "--beam", "--max-len"])
@pytest.mark.parametrize("value", ["0", "-3"])
def test_translate_refuses_non_positive_counts_naming_the_option(
    option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        translate.main([str(tmp_path / "model.ckpt"), "--text", "winter is coming", option, value])
    assert exit_info.value.code == 2
    assert f"argument {option}: expected a whole number of at least 1, got {value}" in capsys.readouterr().err
