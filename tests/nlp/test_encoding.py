"""Translation encodes a sentence exactly as the datamodule encoded it for training and
evaluation: the same function (:mod:`nlp.data.encoding`), with the ``max_len`` the checkpoint stores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hydra.utils import instantiate

from core.training.runner import model_kwargs
from nlp.data.batching import pad_batch
from nlp.data.encoding import encode_flat, encode_sources, encode_targets
from nlp.module import load_translator
from nlp.data.toy_corpus import TOY_PAIRS
from tests.nlp.conftest import nlp_config

MODEL_MAX_LEN = 16


@pytest.mark.parametrize("data_max_len", [None, 5], ids=["model_max_len", "shorter_data_max_len"])
def test_translate_time_sources_equal_the_datamodules(tmp_path: Path, data_max_len: int | None) -> None:
    overrides = ["data=toy", "model=transformer_tiny", f"model.max_len={MODEL_MAX_LEN}"]
    if data_max_len is not None:
        overrides.append(f"data.max_len={data_max_len}")
    cfg = nlp_config(tmp_path, *overrides)
    datamodule = instantiate(cfg.data, _convert_="all")
    datamodule.setup("fit")
    module = instantiate(cfg.module, model=model_kwargs(cfg), **datamodule.module_kwargs(), _convert_="all")
    checkpoint = tmp_path / "translator.ckpt"
    torch.save({"hyper_parameters": dict(module.hparams), "state_dict": module.state_dict()}, checkpoint)
    translator = load_translator(checkpoint)

    sentences = [source for source, _ in TOY_PAIRS]  # data=toy: every split is the toy pairs
    expected = pad_batch([datamodule.examples["val"][i][0] for i in range(len(TOY_PAIRS))], translator.tokenizer.pad_id)
    torch.testing.assert_close(translator.source_batch(sentences), expected, rtol=0, atol=0)
    longest = max(len(translator.tokenizer.encode(sentence)) for sentence in sentences)
    max_len = data_max_len or MODEL_MAX_LEN
    assert translator.hparams.source_max_len == max_len
    assert expected.shape[1] == min(longest, max_len - 1) + 1  # truncated only by the shorter data max_len
    assert (longest >= max_len) == (data_max_len is not None)


def test_sources_and_targets_are_cut_to_max_len_minus_one_subwords(toy_tokenizer) -> None:
    text = "when you play the game of thrones"
    subwords = toy_tokenizer.encode(text)
    eos, bos = toy_tokenizer.eos_id, toy_tokenizer.bos_id
    assert encode_sources(toy_tokenizer, [text], 4) == ([subwords[:3] + [eos]], [True])
    assert encode_targets(toy_tokenizer, [text], 4) == ([[bos, *subwords[:3], eos]], [True])
    whole = len(subwords) + 1
    assert encode_sources(toy_tokenizer, [text], whole) == ([subwords + [eos]], [False])
    with pytest.raises(ValueError, match="max_len must be a whole number of at least 2, got 1"):
        encode_sources(toy_tokenizer, [text], 1)
    assert encode_sources(toy_tokenizer, [], 4) == ([], [])  # no texts, no encodings


def test_back_to_back_encoding_frames_every_text_by_the_rule(toy_tokenizer) -> None:
    texts = ["when you play the game of thrones", "", "you win", "or you die and the game goes on"]
    max_len = 5
    eos, bos = toy_tokenizer.eos_id, toy_tokenizer.bos_id
    subwords = [toy_tokenizer.encode(text) for text in texts]
    for with_bos in (False, True):
        ids, lengths, cut = encode_flat(toy_tokenizer, texts, max_len, bos=with_bos, dtype=np.dtype(np.uint16))
        expected = [[bos] * with_bos + words[: max_len - 1] + [eos] for words in subwords]
        assert ids.dtype == np.uint16
        assert ids.tolist() == [i for framed in expected for i in framed]
        assert lengths.tolist() == [len(framed) for framed in expected]
        assert cut.tolist() == [len(words) > max_len - 1 for words in subwords]
    assert any(cut) and not all(cut)


def test_a_source_is_encoded_without_its_surrounding_whitespace(toy_tokenizer) -> None:
    """Byte-level BPE gives a leading or trailing space its own subwords; the corpora are stripped."""
    padded, _ = encode_sources(toy_tokenizer, ["  winter is coming \n", "\tthe north"], 64)
    plain, _ = encode_sources(toy_tokenizer, ["winter is coming", "the north"], 64)
    assert padded == plain and toy_tokenizer.encode(" winter") != toy_tokenizer.encode("winter")
