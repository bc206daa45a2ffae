"""Corpus readers, token-budget batching and the datamodule, on tiny files in tmp_path."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from core.errors import InputError
from nlp.data.batching import Collator, TokenBudgetBatchSampler, token_budget_batches
from nlp.data.corpora import load_hf_split, read_corpus
from nlp.data.datamodule import TranslationDataModule
from nlp.data.tokenizer import SubwordTokenizer
from nlp.data.toy_corpus import TOY_PAIRS
from tests.nlp.conftest import write_lines


def test_toy_corpus_starts_with_the_worked_example() -> None:
    assert TOY_PAIRS[0] == ("when you play the game of thrones", "you win or you die")
    assert len(TOY_PAIRS) == 3


def test_tsv_skips_and_counts_malformed_lines(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write_lines(
        tmp_path / "train.tsv",
        ["ein Haus\ta house", "", "nur eine Seite", "\tno source", "drei\tfelder\tzu viel", "  zwei Hunde \t two dogs "],
    )
    with caplog.at_level(logging.WARNING):
        pairs = read_corpus(path, "de", "en")
    assert pairs == [("ein Haus", "a house"), ("zwei Hunde", "two dogs")]
    assert f"{path}: skipped 4 empty or malformed line(s), kept 2 pair(s)" in caplog.text


def test_a_training_files_bad_lines_are_warned_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The training split is streamed twice when the tokenizer is trained on it (once to train it,
    once to encode it); its skipped lines and non-UTF-8 bytes are each reported once."""
    data = files_datamodule(tmp_path, cache_dir=str(tmp_path / "cache"))
    with (tmp_path / "train.tsv").open("ab") as train:
        train.write(b"no tab here\nzwei \xff Hunde\ttwo dogs\n")
    with caplog.at_level(logging.WARNING):
        data.setup("fit")
    assert caplog.text.count("skipped 1 empty or malformed line(s)") == 1
    assert caplog.text.count("held bytes that are not UTF-8") == 1


def test_file_without_pairs_is_an_error_naming_it(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "empty.tsv", ["", "no tab here"])
    with pytest.raises(ValueError, match=f"{path} contains no sentence pairs"):
        read_corpus(path, "de", "en")


def test_parallel_files_by_prefix(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_lines(tmp_path / "train.de", ["ein Haus", "", "zwei Hunde"])
    write_lines(tmp_path / "train.en", ["a house", "lost line", "two dogs"])
    with caplog.at_level(logging.WARNING):
        pairs = read_corpus(tmp_path / "train", "de", "en")
    assert pairs == [("ein Haus", "a house"), ("zwei Hunde", "two dogs")]
    assert "skipped 1 empty or malformed line(s)" in caplog.text


def test_invalid_utf8_is_replaced_and_counted_once_per_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "train.tsv"
    path.write_bytes(b"\xef\xbb\xbfein Haus\ta house\r\nzwei \xff\xfe Hunde\ttwo dogs\nGr\xfc\xdfe\tgreetings \xc3\n")
    with caplog.at_level(logging.WARNING):
        pairs = read_corpus(path, "de", "en")
    assert pairs == [("ein Haus", "a house"), ("zwei \ufffd\ufffd Hunde", "two dogs"), ("Gr\ufffd\ufffde", "greetings \ufffd")]
    assert caplog.text.count("not UTF-8") == 1
    assert f"{path}: 2 line(s) held bytes that are not UTF-8" in caplog.text


def test_parallel_files_stay_aligned_through_bad_bytes_and_unicode_line_breaks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # U+2028 (LINE SEPARATOR) and U+0085 (NEXT LINE) end a line for str.splitlines(), not for the
    # corpus: only "\n" does, as in Moses and fairseq.
    (tmp_path / "train.de").write_bytes("ein\u2028Haus\nzwei\x85Hunde\ndrei \xe4pfel\n".encode())
    (tmp_path / "train.en").write_bytes(b"a house\ntwo \x80dogs\nthree apples\n")
    with caplog.at_level(logging.WARNING):
        pairs = read_corpus(tmp_path / "train", "de", "en")
    assert pairs == [("ein\u2028Haus", "a house"), ("zwei\x85Hunde", "two \ufffddogs"), ("drei \xe4pfel", "three apples")]
    assert "train.en: 1 line(s) held bytes that are not UTF-8" in caplog.text
    assert "train.de:" not in caplog.text


def test_parallel_files_must_be_aligned_and_present(tmp_path: Path) -> None:
    write_lines(tmp_path / "train.de", ["ein Haus", "zwei Hunde"])
    with pytest.raises(FileNotFoundError, match="train.en does not exist"):
        read_corpus(tmp_path / "train", "de", "en")
    write_lines(tmp_path / "train.en", ["a house"])
    with pytest.raises(ValueError, match=r"train.de and .*train.en differ in length \(one ends at line 1\)"):
        read_corpus(tmp_path / "train", "de", "en")


@pytest.mark.parametrize("layout", ["columns", "translation"])
def test_hugging_face_splits_in_both_layouts(tmp_path: Path, layout: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")
    rows = [("ein Haus", "a house"), ("", "dropped"), ("zwei Hunde", "two dogs")]
    for split in ("train", "validation"):
        records = [
            {"de": de, "en": en} if layout == "columns" else {"translation": {"de": de, "en": en}} for de, en in rows
        ]
        write_lines(tmp_path / "corpus" / f"{split}.jsonl", [json.dumps(record) for record in records])
    pairs = load_hf_split(str(tmp_path / "corpus"), None, "validation", "de", "en")
    assert pairs == [("ein Haus", "a house"), ("zwei Hunde", "two dogs")]
    assert not list(Path.home().glob(".cache/huggingface/datasets/corpus*"))
    with pytest.raises(ValueError, match="'fr'"):
        load_hf_split(str(tmp_path / "corpus"), None, "train", "fr", "en")


def test_prepare_data_downloads_and_encodes_once_and_setup_reads_no_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    from nlp.data import datamodule

    cache = tmp_path / "cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    for split in ("train", "validation", "test"):
        write_lines(tmp_path / "corpus" / f"{split}.jsonl", [json.dumps({"de": "ein Haus", "en": "a house"})])
    options = dict(corpus="hf", dataset=str(tmp_path / "corpus"), vocab_size=300, min_frequency=1)
    data = TranslationDataModule(**options, cache_dir=str(tmp_path / "prepared"))
    built: list[str] = []
    load_split = datamodule.load_hf_split
    monkeypatch.setattr(datamodule, "load_hf_split", lambda *args: built.append(args[2]) or load_split(*args))
    data.prepare_data()
    assert list(cache.rglob("*.arrow")) and {"validation", "test"} <= set(built)
    read = len(built)
    data.prepare_data()  # prepared: idempotent
    again = TranslationDataModule(**options, cache_dir=str(tmp_path / "prepared"))
    again.setup("fit")  # another process, or the next run: maps the prepared splits
    assert len(built) == read
    assert again.tokenizer is not None and [again.tokenizer.decode(s) for s in again.examples["test"][0]] == [
        "ein Haus", "a house"
    ]
    # A machine without the Hugging Face cache prepares nothing from it: the data cache is complete.
    monkeypatch.setattr(datamodule, "load_hf_dataset", lambda *args: pytest.fail("loaded the Hugging Face dataset"))
    TranslationDataModule(**options, cache_dir=str(tmp_path / "prepared")).prepare_data()


def test_each_selected_split_of_a_hugging_face_dataset_is_a_cache_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")
    for split in ("train", "validation", "test"):
        write_lines(tmp_path / "corpus" / f"{split}.jsonl", [json.dumps({"de": f"ein Haus {split}", "en": f"a house {split}"})])
    options = dict(corpus="hf", dataset=str(tmp_path / "corpus"), vocab_size=300, min_frequency=1, cache_dir=str(tmp_path / "prepared"))
    trained = TranslationDataModule(**options)
    trained.setup("fit")
    tokenizer = tmp_path / "tokenizer.json"
    trained.tokenizer.save(tokenizer)
    for split in ("test", "val", "train"):  # as nlp.evaluate split=... runs one after another
        data = TranslationDataModule(**options, tokenizer_path=str(tokenizer))
        data.select_split(split)
        data.setup("test")
        assert list(data.examples) == [split]
        assert data.tokenizer.decode(data.examples[split][0][1]).endswith({"val": "validation"}.get(split, split))


def test_missing_hugging_face_dataset_offline_is_a_clear_error() -> None:
    # tests/conftest.py puts the Hugging Face libraries in offline mode.
    with pytest.raises(InputError, match="downloaded on first use.*data=files"):
        load_hf_split("bentrevett/multi30k", None, "train", "de", "en")


def test_batches_respect_the_token_budget_and_cover_every_example() -> None:
    lengths = [3, 17, 5, 9, 9, 2, 30, 4, 8, 12, 6, 50]
    batches = token_budget_batches(lengths, max_tokens=40, order=sorted(range(12), key=lengths.__getitem__))
    assert sorted(i for batch in batches for i in batch) == list(range(12))
    for batch in batches:
        assert len(batch) * max(lengths[i] for i in batch) <= 40 or len(batch) == 1
    # Sorted by length, neighbours share a batch: five short ones (5 x 6 tokens), three of
    # length 8-9, ..., and 50 tokens, over the budget, alone.
    assert [batch.tolist() for batch in batches] == [[5, 0, 7, 2, 10], [8, 3, 4], [9, 1], [6], [11]]


def test_sampler_shuffles_per_epoch_and_shards_over_ranks() -> None:
    lengths = [(i * 7) % 23 + 1 for i in range(200)]
    single = TokenBudgetBatchSampler(lengths, max_tokens=64, shuffle=True, seed=1)
    epoch0 = list(single)
    single.set_epoch(1)
    assert list(single) != epoch0
    single.set_epoch(0)
    assert list(single) == epoch0
    ranks = [TokenBudgetBatchSampler(lengths, 64, shuffle=True, seed=1, num_replicas=3, rank=r) for r in range(3)]
    shards = [list(sampler) for sampler in ranks]
    assert len({len(shard) for shard in shards}) == 1 == len({len(sampler) for sampler in ranks})
    seen = [i for shard in shards for batch in shard for i in batch]
    assert set(seen) == set(range(200))  # everything, a few examples twice to even the ranks out
    assert len(seen) - 200 < 3 * max(len(batch) for shard in shards for batch in shard)


def test_collator_pads_sources_and_targets() -> None:
    batch = Collator(pad_id=0)([([5, 6, 2], [1, 7, 2]), ([5, 2], [1, 7, 8, 9, 2])])
    assert batch["source"].tolist() == [[5, 6, 2], [5, 2, 0]]
    assert batch["target"].tolist() == [[1, 7, 2, 0, 0], [1, 7, 8, 9, 2]]


def files_datamodule(tmp_path: Path, **kwargs: object) -> TranslationDataModule:
    write_lines(tmp_path / "train.tsv", [f"{s}\t{t}" for s, t in TOY_PAIRS])
    write_lines(tmp_path / "val.tsv", [f"{s}\t{t}" for s, t in TOY_PAIRS[:2]])
    options = dict(vocab_size=400, min_frequency=1, max_tokens=64, max_len=32)
    return TranslationDataModule(
        corpus="files", train=str(tmp_path / "train.tsv"), val=str(tmp_path / "val.tsv"), **{**options, **kwargs}
    )


def test_evaluation_scores_each_training_pair_once(tmp_path: Path) -> None:
    """``repeat`` makes a training epoch go over a tiny corpus several times; evaluation
    (``nlp.evaluate split=train``) reads each pair once, in order of length."""
    data = files_datamodule(tmp_path, repeat=3)
    data.setup("fit")
    assert sum(len(batch["source"]) for batch in data.train_dataloader()) == 3 * len(TOY_PAIRS)
    batches = list(data.evaluation_dataloader("train"))
    assert sum(len(batch["source"]) for batch in batches) == len(TOY_PAIRS)
    assert list(data.evaluation_dataloader("val"))[0]["source"].shape[0] == 2


def test_a_selected_split_is_prepared_alone(tmp_path: Path) -> None:
    """Evaluation's split selection: with a tokenizer given, only the selected split is encoded
    (the validation split for a test split the corpus lacks); without one every split stays, as
    the tokenizer is trained on the training split."""
    trained = files_datamodule(tmp_path, cache_dir=str(tmp_path / "cache"))
    trained.select_split("test")
    trained.setup("test")
    assert set(trained.examples) == {"train", "val"}
    tokenizer = tmp_path / "tokenizer.json"
    trained.tokenizer.save(tokenizer)
    for split, encoded in [("test", "val"), ("val", "val"), ("train", "train")]:
        data = files_datamodule(tmp_path, cache_dir=str(tmp_path / "cache"), tokenizer_path=str(tokenizer))
        data.select_split(split)
        data.setup("test")
        assert list(data.examples) == [encoded]
        assert data.meta["splits"][encoded]["pairs"] == len(TOY_PAIRS[: 2 if encoded == "val" else 3])


def test_datamodule_frames_sentences_and_exports_its_tokenizer(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = files_datamodule(tmp_path)
    data.setup("fit")
    tokenizer = SubwordTokenizer.from_json(data.module_kwargs()["tokenizer"])
    assert data.module_kwargs()["tgt_lang"] == data.tgt_lang  # how the module's BLEU splits words
    data.setup("fit")  # idempotent: the same tokenizer, not a retrained one
    assert data.module_kwargs()["tokenizer"] == tokenizer.to_json()
    batch = next(iter(data.val_dataloader()))
    assert batch["source"].shape[0] == 2
    for source, target, (text_source, text_target) in zip(batch["source"], batch["target"], TOY_PAIRS):
        source, target = source[source.ne(0)].tolist(), target[target.ne(0)].tolist()
        assert source[-1] == tokenizer.eos_id and tokenizer.decode(source) == text_source
        assert target[0] == tokenizer.bos_id and target[-1] == tokenizer.eos_id
        assert tokenizer.decode(target) == text_target
    with caplog.at_level(logging.WARNING):
        test_batches = list(data.test_dataloader())
    assert "testing on the validation split" in caplog.text
    assert sum(len(b["source"]) for b in test_batches) == 2


def test_long_sentences_are_truncated_with_a_counted_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = files_datamodule(tmp_path, max_len=5)
    with caplog.at_level(logging.WARNING):
        data.setup("fit")
    assert "train split: truncated 3 of 3 sentence pairs longer than 4 subwords (max_len 5)" in caplog.text
    for batch in data.train_dataloader():
        assert batch["source"].shape[1] <= 5 and batch["target"].shape[1] <= 6  # <s> + 4 + </s>
        for row in (*batch["source"], *batch["target"]):
            assert row[row.ne(0)][-1] == 2  # truncation keeps </s>


def test_repeat_multiplies_the_training_epoch(tmp_path: Path) -> None:
    data = files_datamodule(tmp_path, repeat=4)
    data.setup("fit")
    assert sum(len(batch["source"]) for batch in data.train_dataloader()) == 12


def test_configuration_mistakes_are_named() -> None:
    with pytest.raises(ValueError, match="data.corpus must be one of"):
        TranslationDataModule(corpus="wmt")
    with pytest.raises(ValueError, match="data=files needs data.train=PATH and data.val=PATH"):
        TranslationDataModule(corpus="files", train="x.tsv")
    with pytest.raises(ValueError, match="data=hf needs data.dataset"):
        TranslationDataModule(corpus="hf")
