"""A tiny untrained translation checkpoint on the toy corpus's tokenizer, for the command tests."""

from __future__ import annotations

from pathlib import Path

import torch

from nlp.module import TranslationModule
from nlp.data.tokenizer import SubwordTokenizer

TINY = dict(dim=32, num_heads=4, encoder_depth=2, decoder_depth=2, ffn_dim=64, dropout=0.0, max_len=64)


def write_translator_checkpoint(path: Path, tokenizer: SubwordTokenizer, seed: int = 18) -> Path:
    """An untrained model saved with the keys of a Lightning checkpoint. With the default seed its
    translations of the toy sentences repeat a word ("lannister lannister ..."), with greedy and
    beam search alike: n-gram blocking is off, so decoding is the plain argmax the tests compare
    with."""
    torch.manual_seed(seed)
    module = TranslationModule(model=TINY, tokenizer=tokenizer.to_json(), no_repeat_ngram_size=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"hyper_parameters": dict(module.hparams), "state_dict": module.state_dict()}, path)
    return path
