"""``python -m nlp.export --format safetensors``: a directory of ``model.safetensors``,
``config.json`` and ``tokenizer.json`` that ``nlp.module.load_translator`` reads back into the same
model (logits, translations, decoding settings), that ``nlp.translate`` runs as the checkpoint and
that plain safetensors loads into a :class:`~nlp.model.Seq2SeqTransformer`; a directory that is not
one ends in one ``error:`` line."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_model

from core.files.model_directory import CONFIG, WEIGHTS
from nlp import export, translate
from nlp.data.batching import pad_batch
from nlp.data.encoding import encode_sources
from nlp.data.tokenizer import SubwordTokenizer
from nlp.data.toy_corpus import TOY_PAIRS
from nlp.export.directory import DECODING_KEYS, METADATA, TOKENIZER, is_exported_model
from nlp.model import Seq2SeqTransformer
from nlp.module import load_translator
from tests.nlp.translator_testdata import write_translator_checkpoint
from tests.vision.vision_testdata import write_classifier_checkpoint

SOURCES = [source for source, _ in TOY_PAIRS]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory, toy_tokenizer: SubwordTokenizer) -> Path:
    return write_translator_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny.ckpt", toy_tokenizer)


def exported(checkpoint: Path, out: Path, capsys: pytest.CaptureFixture[str], *options: str) -> Path:
    export.main([str(checkpoint), "--format", "safetensors", "--out", str(out), *options])
    assert capsys.readouterr().out.startswith(f"wrote {out} (safetensors: model.safetensors, config.json, tokenizer.json)")
    return out


def teacher_forced_logits(net: Seq2SeqTransformer, tokenizer: SubwordTokenizer) -> torch.Tensor:
    """Logits of the toy sources, each with its own first subwords as the target prefix."""
    encoded, _ = encode_sources(tokenizer, SOURCES, net.max_len)
    source = pad_batch(encoded, tokenizer.pad_id)
    target = torch.cat([torch.full((len(SOURCES), 1), tokenizer.bos_id), source[:, :4]], dim=1)
    with torch.no_grad():
        return net.eval()(source, target)


def test_the_directory_reads_back_into_the_same_translator(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = exported(checkpoint, tmp_path / "shared", capsys)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["shared"]  # no staging directory left
    assert sorted(path.name for path in out.iterdir()) == [CONFIG, WEIGHTS, TOKENIZER]
    assert not is_exported_model(out)  # nlp.translate and nlp.serve do not take it for a CTranslate2 model
    original, loaded = load_translator(checkpoint), load_translator(out)
    assert loaded.tokenizer.to_json() == original.tokenizer.to_json()
    torch.testing.assert_close(
        teacher_forced_logits(loaded.net, loaded.tokenizer), teacher_forced_logits(original.net, original.tokenizer)
    )
    assert {key: loaded.hparams[key] for key in DECODING_KEYS} == {key: original.hparams[key] for key in DECODING_KEYS}
    for beam in (1, 3):
        assert loaded.translate(SOURCES, beam) == original.translate(SOURCES, beam)
    config = json.loads((out / CONFIG).read_text())
    assert {"library": "transformer-toolkit", "head": "nlp", "version": 1}.items() <= config.items()


@pytest.mark.parametrize("smoothing", [0.0, "auto"])
def test_the_label_smoothing_of_the_evaluation_loss_travels_with_the_directory(
    smoothing: float | str, tmp_path: Path, toy_tokenizer: SubwordTokenizer, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = write_translator_checkpoint(tmp_path / "tiny.ckpt", toy_tokenizer)
    saved = torch.load(checkpoint, weights_only=True)
    saved["hyper_parameters"]["label_smoothing"] = smoothing
    torch.save(saved, checkpoint)
    loaded = load_translator(exported(checkpoint, tmp_path / "shared", capsys))
    assert loaded.hparams.label_smoothing == smoothing
    assert loaded.smoothing(training=False) == load_translator(checkpoint).smoothing(training=False)


def test_plain_safetensors_loads_the_weights_into_the_network_config_json_describes(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What docs/sharing.md tells a user without this toolkit's loader: build the network from
    ``config.json``'s ``model``, load the tied weights with ``safetensors.torch.load_model``."""
    out = exported(checkpoint, tmp_path / "shared", capsys)
    net = Seq2SeqTransformer(**json.loads((out / CONFIG).read_text())["model"])
    load_model(net, out / WEIGHTS)
    tokenizer = SubwordTokenizer.from_file(out / TOKENIZER)
    original = load_translator(checkpoint)
    torch.testing.assert_close(teacher_forced_logits(net, tokenizer), teacher_forced_logits(original.net, original.tokenizer))


def test_translate_prints_the_same_for_the_directory_as_for_the_checkpoint(
    checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = exported(checkpoint, tmp_path / "shared", capsys)
    printed = []
    for model in (checkpoint, out):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join([SOURCES[0], "", *SOURCES[1:]]).encode())))
        translate.main([str(model), "--device", "cpu"])
        printed.append(capsys.readouterr().out.splitlines())
    assert printed[0] == printed[1] and len(printed[0]) == len(SOURCES) + 1


def test_an_earlier_export_is_replaced_with_force_only(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = exported(checkpoint, tmp_path / "shared", capsys)
    with pytest.raises(SystemExit) as exit_info:
        export.main([str(checkpoint), "--format", "safetensors", "--out", str(out)])
    assert exit_info.value.code == 2 and "--force" in capsys.readouterr().err
    exported(checkpoint, out, capsys, "--force")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["shared"]


def broken(directory: Path, checkpoint: Path, capsys: pytest.CaptureFixture[str], damage: str) -> str:
    """An export at ``directory`` damaged as ``damage`` says; the path the error must name."""
    if damage == "missing directory":
        return str(directory)
    if damage == "a vision export":
        vision = write_classifier_checkpoint(directory.parent / "classifier.ckpt")
        from vision import export as vision_export

        vision_export.main([str(vision), "--format", "safetensors", "--out", str(directory), "--device", "cpu"])
        capsys.readouterr()
        return str(directory / CONFIG)
    exported(checkpoint, directory, capsys)
    if damage == "no tokenizer.json":
        (directory / TOKENIZER).unlink()
        return str(directory / TOKENIZER)
    if damage == "config.json not JSON":
        (directory / CONFIG).write_text("not json")
        return str(directory / CONFIG)
    if damage == "config.json without decoding":
        config = json.loads((directory / CONFIG).read_text())
        (directory / CONFIG).write_text(json.dumps({key: value for key, value in config.items() if key != "decoding"}))
        return str(directory / CONFIG)
    if damage == "another vocabulary":
        config = json.loads((directory / CONFIG).read_text())
        (directory / CONFIG).write_text(json.dumps({**config, "model": {**config["model"], "src_vocab_size": 7}}))
        return str(directory / CONFIG)
    assert damage == "no weights"
    (directory / WEIGHTS).unlink()
    return str(directory / WEIGHTS)


@pytest.mark.parametrize(
    "damage",
    [
        "missing directory",
        "a vision export",
        "no tokenizer.json",
        "config.json not JSON",
        "config.json without decoding",
        "another vocabulary",
        "no weights",
    ],
)
def test_a_directory_that_is_no_export_ends_in_one_error_line(
    damage: str, checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    named = broken(tmp_path / "shared", checkpoint, capsys, damage)
    with pytest.raises(SystemExit) as exit_info:
        translate.main([str(tmp_path / "shared"), "--text", SOURCES[0], "--device", "cpu"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("error:") and error.count("\n") == 1 and named in error, error


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["--quantization", "int8"], "--quantization applies to --format ctranslate2"),
        (["--format", "onnx"], "--format"),
    ],
)
def test_bad_options_end_in_one_error_line(
    arguments: list[str], named: str, checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        export.main([str(checkpoint), "--format", "safetensors", *arguments, "--out", str(tmp_path / "shared")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("error:") and error.count("\n") == 1 and named in error, error
    assert not list(tmp_path.iterdir())


def test_a_ctranslate2_directory_is_named_for_what_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Commands that need the PyTorch model (here the export itself) say what the directory is."""
    ctranslate2_dir = tmp_path / "ct2"
    ctranslate2_dir.mkdir()
    (ctranslate2_dir / METADATA).write_text("{}")
    with pytest.raises(SystemExit) as exit_info:
        export.main([str(ctranslate2_dir), "--format", "safetensors", "--out", str(tmp_path / "shared")])
    assert exit_info.value.code == 2
    assert "is a CTranslate2 model" in capsys.readouterr().err
