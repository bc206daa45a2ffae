"""Shared pieces of the translation tests: a toy tokenizer, tiny models, corpus files, configs."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from nlp.decoding import beam_search, greedy_decode
from nlp.model import Seq2SeqTransformer
from nlp.data.tokenizer import SubwordTokenizer, train_tokenizer
from nlp.data.toy_corpus import TOY_PAIRS

CONF = Path(__file__).resolve().parents[2] / "conf"

# Subprocesses get the suite's one intra-op thread (tests/conftest.py) through the environment.
SUBPROCESS_ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="session")
def toy_tokenizer() -> SubwordTokenizer:
    return train_tokenizer((sentence for pair in TOY_PAIRS for sentence in pair), vocab_size=400, min_frequency=1)


def tiny_model(vocab_size: int = 40, seed: int = 0, **overrides: object) -> Seq2SeqTransformer:
    """A randomly initialized 2+2-layer model in eval mode (pad 0, <s> 1, </s> 2)."""
    torch.manual_seed(seed)
    kwargs = dict(dim=32, num_heads=4, encoder_depth=2, decoder_depth=2, ffn_dim=64, dropout=0.0, max_len=64)
    return Seq2SeqTransformer(vocab_size, vocab_size, **{**kwargs, **overrides}).eval()


def ending_model() -> Seq2SeqTransformer:
    """:func:`tiny_model` with a larger ``</s>`` output row, so that a random model ends its
    hypotheses at different steps and finished rows and padding after ``</s>`` take part in every
    decoding test."""
    model = tiny_model(vocab_size=40, seed=0)
    with torch.no_grad():
        model.output.weight[2].mul_(6.0)  # </s>
    return model


def mixed_length_sources() -> torch.Tensor:
    """Four random sources [4, 9] of 9, 4, 9 and 6 ids (``</s>``-terminated, then padded)."""
    torch.manual_seed(5)
    src = torch.randint(3, 40, (4, 9))
    src[:, -1] = 2  # </s>
    for row, length in ((1, 4), (3, 6)):
        src[row, length - 1] = 2
        src[row, length:] = 0  # <pad>
    return src


@pytest.fixture(scope="module")
def model() -> Seq2SeqTransformer:
    """The decoding tests' model: :func:`ending_model`."""
    return ending_model()


@pytest.fixture(scope="module")
def sources() -> torch.Tensor:
    """The decoding tests' sources: :func:`mixed_length_sources`."""
    return mixed_length_sources()


def decode(model: Seq2SeqTransformer, src: torch.Tensor, beam: int, **kwargs: object) -> torch.Tensor:
    """Greedy decoding for ``beam`` 0, beam search of that width otherwise."""
    return greedy_decode(model, src, **kwargs) if beam == 0 else beam_search(model, src, beam_size=beam, **kwargs)


def write_lines(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def reverse_pairs(count: int, seed: int) -> list[tuple[str, str]]:
    """Sequences of 3-7 letters and the same letters reversed."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        letters = [rng.choice("abcdefgh") for _ in range(rng.randint(3, 7))]
        pairs.append((" ".join(letters), " ".join(reversed(letters))))
    return pairs


def nlp_config(output_dir: Path, *overrides: str) -> DictConfig:
    """The real ``conf/nlp.yaml``, composed with the Hydra API, for a quiet CPU run."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(
            "nlp",
            overrides=[
                f"paths.output_dir={output_dir}",
                "trainer=cpu",
                "logger=csv",
                "callbacks.progress_bar=null",
                "trainer.enable_model_summary=false",
                *overrides,
            ],
        )
