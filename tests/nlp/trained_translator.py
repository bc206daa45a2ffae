"""A small translation checkpoint trained for seconds on the reverse task (letters -> the same
letters reversed), good enough that its scores mean something: the export and evaluation tests
compare translations and BLEU of a model that translates, not of one that babbles."""

from __future__ import annotations

import random
from pathlib import Path

import torch

from nlp.data.batching import pad_batch
from nlp.data.encoding import encode_sources, encode_targets
from nlp.data.tokenizer import train_tokenizer
from nlp.module import TranslationModule
from tests.nlp.conftest import reverse_pairs

MODEL = dict(dim=64, num_heads=4, encoder_depth=2, decoder_depth=2, ffn_dim=128, dropout=0.0, max_len=32)
TRAIN_PAIRS = reverse_pairs(2000, seed=0)
TEST_PAIRS = reverse_pairs(600, seed=1)


def train_reverse_translator(path: Path, norm_first: bool = True, steps: int = 300, seed: int = 0) -> Path:
    """Train a 2+2-layer model (pre-norm or post-norm) on :data:`TRAIN_PAIRS` with Adam for
    ``steps`` batches of 64 pairs and save it with the keys of a Lightning checkpoint."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the suite's tests (tests/conftest.py): module fixtures run before that fixture
    try:
        return train(path, norm_first, steps, seed)
    finally:
        torch.set_num_threads(threads)


def train(path: Path, norm_first: bool, steps: int, seed: int) -> Path:
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tokenizer = train_tokenizer((text for pair in TRAIN_PAIRS for text in pair), vocab_size=300, min_frequency=1)
    module = TranslationModule(model={**MODEL, "norm_first": norm_first}, tokenizer=tokenizer.to_json(), beam_size=4)
    optimizer = torch.optim.Adam(module.net.parameters(), lr=2e-3, betas=(0.9, 0.98))
    module.train()
    for _ in range(steps):
        pairs = rng.sample(TRAIN_PAIRS, 64)
        sources, _ = encode_sources(tokenizer, [source for source, _ in pairs], MODEL["max_len"])
        targets, _ = encode_targets(tokenizer, [target for _, target in pairs], MODEL["max_len"])
        batch = {"source": pad_batch(sources, tokenizer.pad_id), "target": pad_batch(targets, tokenizer.pad_id)}
        loss, _ = module.loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    module.eval()
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"hyper_parameters": dict(module.hparams), "state_dict": module.state_dict()}, path)
    return path
