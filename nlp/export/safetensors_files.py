"""``python -m nlp.export CKPT --format safetensors --out DIR``: the translation model as plain
files others load (:mod:`core.files.model_directory`), read back by
:func:`nlp.module.load_translator`, so ``nlp.translate DIR``, ``nlp.evaluate ckpt_path=DIR`` and
``nlp.serve DIR`` run it as they run the checkpoint.

``DIR`` holds ``model.safetensors`` (the network's state dict, the weight that the embeddings and
the output projection share stored once), ``tokenizer.json`` (the checkpoint's subword tokenizer,
the Hugging Face ``tokenizers`` file for source and target alike) and ``config.json`` with, besides
the fields every export has:

- ``model``: every argument of :class:`~nlp.model.Seq2SeqTransformer`, the vocabulary sizes and
  special token ids (the tokenizer's) included;
- ``source_max_len``: the length sources are encoded to (:mod:`nlp.data.encoding`);
- ``decoding``: the checkpoint's decoding settings (beam, length penalty, length limit, n-gram
  blocking).

A directory of ``python -m nlp.export --format ctranslate2`` has a ``translation.json``
(:mod:`nlp.export.directory`); this one has none, which is how the commands tell them apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from core.errors import InputError
from core.files.checkpoints import constructor_defaults
from core.files.model_directory import (
    CONFIG,
    export_again,
    load_weights,
    new_model_directory,
    read_config,
    read_weights,
    unique_weights,
    write_model_files,
)
from nlp.data.tokenizer import SubwordTokenizer
from nlp.export.directory import DECODING_KEYS, TOKENIZER, is_exported_model, read_tokenizer
from nlp.export.writer import probe_pairs
from nlp.model import Seq2SeqTransformer
from nlp.module import TranslationModule

HEAD = "nlp"
REQUIRED = ("model", "source_max_len", "decoding")
# Arguments of Seq2SeqTransformer that TranslationModule takes from the tokenizer.
FROM_TOKENIZER = ("src_vocab_size", "tgt_vocab_size", "pad_id", "bos_id", "eos_id")
TOLERANCE = 1e-5  # on the logits of the check: the same float32 weights, read back


def tokenizer_arguments(tokenizer: SubwordTokenizer) -> dict[str, int]:
    """The :data:`FROM_TOKENIZER` arguments of the network that ``tokenizer`` fixes."""
    size = tokenizer.vocab_size
    return {"src_vocab_size": size, "tgt_vocab_size": size, "pad_id": tokenizer.pad_id, "bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id}


def directory_config(translator: TranslationModule) -> dict[str, Any]:
    """What ``config.json`` records of ``translator`` besides the common fields."""
    hparams = translator.hparams
    return {
        # every setting, its default included, so a default changed later does not change the network
        "model": {**constructor_defaults(Seq2SeqTransformer), **hparams.model, **tokenizer_arguments(translator.tokenizer)},
        "source_max_len": hparams.source_max_len,
        "decoding": {key: hparams[key] for key in DECODING_KEYS},
        "label_smoothing": hparams.label_smoothing,  # of the evaluation's loss (nlp.evaluate's loss)
    }


def read_translator(directory: str | Path) -> TranslationModule:
    """The translation module of a directory written by :func:`export_safetensors`, in eval mode
    on the CPU."""
    directory = Path(directory)
    if is_exported_model(directory):
        raise InputError(
            f"{directory} is a CTranslate2 model (python -m nlp.export --format ctranslate2), which nlp.translate and "
            "nlp.serve run; here pass the .ckpt it was exported from or a --format safetensors export"
        )
    path = directory / CONFIG
    config = read_config(directory, HEAD, REQUIRED)
    tokenizer = read_tokenizer(directory, export_again(HEAD))
    model, decoding = config["model"], config["decoding"]
    if not isinstance(model, dict) or not isinstance(decoding, dict):
        raise InputError(f"{path}: model and decoding must be JSON objects; {export_again(HEAD)}")
    differing = [key for key, value in tokenizer_arguments(tokenizer).items() if model.get(key) != value]
    if differing:
        raise InputError(f"{path} and {directory / TOKENIZER} disagree on {', '.join(differing)}; {export_again(HEAD)}")
    try:
        translator = TranslationModule(
            model={key: value for key, value in model.items() if key not in FROM_TOKENIZER},
            tokenizer=tokenizer.to_json(),
            source_max_len=config["source_max_len"],
            label_smoothing=config.get("label_smoothing", 0.1),  # an earlier export's: the module's default
            **decoding,
        )
    except (TypeError, ValueError) as error:
        raise InputError(f"{path} does not describe a model this toolkit builds ({error}); {export_again(HEAD)}") from None
    load_weights(translator.net, read_weights(directory, HEAD), directory, HEAD)
    return translator.eval()


@torch.no_grad()
def largest_difference(translator: TranslationModule, loaded: TranslationModule) -> float:
    """The largest |difference| of the two models' teacher-forced logits on the probe sentence
    pairs of the CTranslate2 check (:func:`nlp.export.writer.probe_pairs`), refused above
    :data:`TOLERANCE`."""
    bos, eos, device = translator.tokenizer.bos_id, translator.tokenizer.eos_id, translator.device
    worst = 0.0
    for source, target in probe_pairs(translator):
        src, tgt = torch.tensor([[*source, eos]], device=device), torch.tensor([[bos, *target]], device=device)
        expected, actual = translator.net(src, tgt).float().cpu(), loaded.net.to(device)(src, tgt).float().cpu()
        torch.testing.assert_close(actual, expected, rtol=TOLERANCE, atol=TOLERANCE)
        worst = max(worst, float((actual - expected).abs().max()))
    return worst


def export_safetensors(translator: TranslationModule, out: Path, force: bool = False) -> float:
    """Write ``translator`` to the directory ``out`` (an earlier export there only with
    ``force``), after reading it back with :func:`read_translator` and comparing the logits on
    probe sentences; returns their largest absolute difference."""
    translator.eval()
    with new_model_directory(out, replace=force) as staging:
        write_model_files(staging, HEAD, unique_weights(translator.net), directory_config(translator))
        translator.tokenizer.save(staging / TOKENIZER)
        difference = largest_difference(translator, read_translator(staging))
    return difference
