"""The joint byte-level BPE tokenizer: exact round trips, special tokens, serialization."""

from __future__ import annotations

import pytest

from nlp.data.tokenizer import SubwordTokenizer, train_tokenizer
from nlp.data.toy_corpus import TOY_PAIRS


def test_special_tokens_have_fixed_ids(toy_tokenizer: SubwordTokenizer) -> None:
    assert (toy_tokenizer.pad_id, toy_tokenizer.bos_id, toy_tokenizer.eos_id, toy_tokenizer.unk_id) == (0, 1, 2, 3)


@pytest.mark.parametrize(
    "text",
    [
        "when you play the game of thrones",
        "Zwei  Männer\tstehen am Herd, 100% sicher!",
        " leading and trailing spaces ",
        "日本語 и кириллица — ok",
        "",
    ],
)
def test_detokenization_is_exact_even_for_unseen_characters(toy_tokenizer: SubwordTokenizer, text: str) -> None:
    ids = toy_tokenizer.encode(text)
    assert toy_tokenizer.unk_id not in ids
    assert toy_tokenizer.decode(ids) == text


def test_merges_on_the_toy_corpus_reach_whole_words(toy_tokenizer: SubwordTokenizer) -> None:
    # BPE runs out of pairs to merge before 400 entries: every toy word is one token, the
    # ones after a space carrying it as "Ġ".
    assert toy_tokenizer.vocab_size < 400
    assert toy_tokenizer.tokens("you win or you die") == ["you", "Ġwin", "Ġor", "Ġyou", "Ġdie"]
    assert len(toy_tokenizer.tokens("you wine")) > 2  # an unseen word falls back to pieces


def test_the_special_tokens_strings_in_a_text_are_text(toy_tokenizer: SubwordTokenizer) -> None:
    """HTML's ``<s>`` and a literal ``</s>`` are characters: no control id, an exact round trip,
    also through the tokenizer's JSON (what a checkpoint holds)."""
    text = "a <s>struck</s> word, <pad> and <unk>"
    ids = toy_tokenizer.encode(text)
    controls = {toy_tokenizer.pad_id, toy_tokenizer.bos_id, toy_tokenizer.eos_id, toy_tokenizer.unk_id}
    assert not set(ids) & controls
    assert toy_tokenizer.decode(ids) == text
    assert toy_tokenizer.encode_batch([text]) == [ids]
    assert SubwordTokenizer.from_json(toy_tokenizer.to_json()).encode(text) == ids


def test_decode_stops_at_eos_and_drops_bos_and_padding(toy_tokenizer: SubwordTokenizer) -> None:
    ids = toy_tokenizer.encode("winter is coming")
    extra = toy_tokenizer.encode("the north")
    framed = [toy_tokenizer.bos_id, *ids, toy_tokenizer.eos_id, *extra, toy_tokenizer.pad_id]
    assert toy_tokenizer.decode(framed) == "winter is coming"


def test_json_and_file_round_trips_keep_the_vocabulary(toy_tokenizer: SubwordTokenizer, tmp_path) -> None:
    text = " ".join(source for source, _ in TOY_PAIRS)
    restored = SubwordTokenizer.from_json(toy_tokenizer.to_json())
    toy_tokenizer.save(tmp_path / "tokenizer.json")
    loaded = SubwordTokenizer.from_file(tmp_path / "tokenizer.json")
    for other in (restored, loaded):
        assert other.vocab_size == toy_tokenizer.vocab_size
        assert other.encode(text) == toy_tokenizer.encode(text)


def test_vocabulary_below_the_byte_alphabet_is_refused() -> None:
    with pytest.raises(ValueError, match="vocab_size must be a whole number of at least 260, got 100"):
        train_tokenizer(["a b c"], vocab_size=100)


def test_the_smallest_vocabulary_holds_the_byte_alphabet_and_the_special_tokens() -> None:
    """The floor of ``nlp.constraints.VOCAB_SIZE`` is what byte-level BPE cannot do without."""
    from tokenizers import pre_tokenizers

    from nlp.data.tokenizer import SPECIAL_TOKENS

    smallest = train_tokenizer(["a b c"], vocab_size=260, min_frequency=1)
    assert smallest.vocab_size == len(SPECIAL_TOKENS) + len(pre_tokenizers.ByteLevel.alphabet()) == 260
    with pytest.raises(ValueError, match="got 259"):
        train_tokenizer(["a b c"], vocab_size=259)
