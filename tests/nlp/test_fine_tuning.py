"""Continuing a trained translator on a new corpus (``pretrained=``, domain adaptation): the run
encodes the new corpus with the translator's tokenizer and starts from its weights, from a
checkpoint or an exported directory; another network is refused; a resumed run needs the
weights file no more."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from core.errors import InputError
from core.files.checkpoints import load_checkpoint
from core.training.runner import train
from nlp.export.safetensors_files import export_safetensors
from nlp.module import load_translator
from tests.nlp.conftest import nlp_config, reverse_pairs, write_lines

TINY = ("model=transformer_tiny", "model.dim=32", "model.ffn_dim=64", "model.encoder_depth=1", "model.decoder_depth=1")


def corpus(directory: Path, seed: int, count: int) -> list[str]:
    """The data overrides of a reverse-task corpus of ``count`` pairs written to ``directory``."""
    lines = [f"{source}\t{target}" for source, target in reverse_pairs(count, seed)]
    write_lines(directory / "pairs.tsv", lines)
    files = [f"data.{split}={directory / 'pairs.tsv'}" for split in ("train", "val", "test")]
    return ["data=files", *files, "data.min_frequency=1", f"data.cache_dir={directory / 'cache'}"]


def run(output_dir: Path, *overrides: str) -> Path:
    """A few quiet steps of ``nlp.train`` through the real runner; returns its run directory."""
    quiet = (
        "trainer.num_sanity_val_steps=0", "trainer.limit_val_batches=1", "trainer.limit_test_batches=1",
        "module.beam_size=1", "module.warmup_steps=1", "data.max_tokens=256",
    )
    train(nlp_config(output_dir, *TINY, *quiet, *overrides))
    return output_dir


@pytest.fixture(scope="module")
def translator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint trained for 3 steps on one corpus, with a tokenizer of 400 subwords."""
    root = tmp_path_factory.mktemp("first")
    run(root / "run", *corpus(root / "corpus", seed=0, count=200), "data.vocab_size=400", "trainer.max_steps=3")
    return root / "run" / "checkpoints" / "last.ckpt"


@pytest.mark.parametrize("form", ["checkpoint", "exported directory"])
def test_a_run_continues_a_translator_on_a_new_corpus_with_its_tokenizer(
    tmp_path: Path, translator: Path, form: str, caplog: pytest.LogCaptureFixture
) -> None:
    source = load_translator(translator)
    pretrained = translator
    if form == "exported directory":
        export_safetensors(source, tmp_path / "exported")
        pretrained = tmp_path / "exported"
    new_corpus = corpus(tmp_path / "corpus", seed=7, count=120)
    with caplog.at_level(logging.INFO):  # a tokenizer of its own would have 280 subwords
        run(tmp_path / "run", *new_corpus, "data.vocab_size=280", f"pretrained={pretrained}", "module.lr=1e-9", "trainer.max_steps=1")
    assert f"started from pretrained={pretrained}" in caplog.text
    last = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.ckpt")
    assert last["hyper_parameters"]["tokenizer"] == source.hparams.tokenizer
    for name, value in source.net.named_parameters():  # one step at a rate of 1e-9 moves no weight visibly
        torch.testing.assert_close(last["state_dict"][f"net.{name}"], value.detach(), rtol=0, atol=1e-6, msg=name)
    assert "test/bleu" in json.loads((tmp_path / "run" / "metrics.json").read_text())


def test_a_resumed_run_needs_the_weights_file_no_more(tmp_path: Path, translator: Path) -> None:
    weights = tmp_path / "translator.ckpt"
    weights.write_bytes(translator.read_bytes())
    new_corpus = corpus(tmp_path / "corpus", seed=7, count=120)
    first = run(tmp_path / "run", *new_corpus, "data.vocab_size=280", f"pretrained={weights}", "trainer.max_steps=1")
    weights.unlink()
    resumed = run(
        tmp_path / "resumed", *new_corpus, "data.vocab_size=280", f"pretrained={weights}", "trainer.max_steps=2",
        f"ckpt_path={first / 'checkpoints' / 'last.ckpt'}",
    )
    last = load_checkpoint(resumed / "checkpoints" / "last.ckpt")
    assert last["global_step"] == 2
    assert last["hyper_parameters"]["tokenizer"] == load_translator(translator).hparams.tokenizer


def test_another_network_is_refused_naming_the_settings_to_pass(tmp_path: Path, translator: Path) -> None:
    with pytest.raises(InputError, match=r"model.dim is 32 there and 64 here.*\(model.dim=32\)"):
        run(tmp_path / "run", *corpus(tmp_path / "corpus", seed=7, count=60), f"pretrained={translator}", "model.dim=64")


def test_weights_that_are_missing_are_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="pretrained=.*nowhere.ckpt is missing"):
        run(tmp_path / "run", *corpus(tmp_path / "corpus", seed=7, count=60), f"pretrained={tmp_path / 'nowhere.ckpt'}")
