"""``data=gettext``: reading compiled catalogs, cleaning messages into sentence pairs, the split
that holds out whole catalogs, and a short training run on a fake locale tree."""

from __future__ import annotations

import gettext as stdlib_gettext
import json
import logging
import shutil
from collections import Counter
from pathlib import Path

import pytest

from core.errors import InputError
from core.training.runner import train
from nlp.data.corpora import load_hf_split
from nlp.data.gettext import DEFAULT_LOCALE_DIR, message_pair, read_catalog, read_gettext_corpus
from tests.nlp.conftest import nlp_config
from tests.nlp.gettext_catalogs import fake_locale_tree, numbered_messages, write_mo

MESSAGES = {
    "Open the file": "Die Datei öffnen",
    "Kernel": "Kernel",  # identical: dropped
    "Untranslated entry": "",  # empty: dropped
    "menu\x04_Save the file": "Datei _speichern",  # context and mnemonic removed
    "%d file was deleted\x00%d files were deleted": "%d Datei wurde gelöscht\x00%d Dateien wurden gelöscht",
    "<b>Bold</b> &amp; <span weight='bold'>strong</span> text": "<b>Fetter</b> &amp; <span>starker</span> Text",
    "Usage: %s [<options>] <path>": "Aufruf: %s [<Optionen>] <Pfad>",
    "%s: %s": "%s: %s ",  # no word outside placeholders: dropped
    "Copy %(name)s to {0}\n  and wait": "%(name)s nach {0} kopieren\n  und warten",
    " ".join(["word"] * 70): " ".join(["Wort"] * 70),  # longer than MAX_WORDS: dropped
}


def test_written_catalogs_read_the_same_with_the_standard_library(tmp_path: Path) -> None:
    path = write_mo(tmp_path / "x.mo", MESSAGES)
    with path.open("rb") as handle:
        catalog = stdlib_gettext.GNUTranslations(handle)
    assert catalog.gettext("Open the file") == "Die Datei öffnen"
    assert catalog.pgettext("menu", "_Save the file") == "Datei _speichern"
    assert catalog.ngettext("%d file was deleted", "%d files were deleted", 2) == "%d Dateien wurden gelöscht"


def test_messages_become_clean_sentence_pairs(tmp_path: Path) -> None:
    pairs = read_catalog(write_mo(tmp_path / "x.mo", MESSAGES))
    assert sorted(pairs) == sorted([
        ("Open the file", "Die Datei öffnen"),
        ("Save the file", "Datei speichern"),
        ("%d file was deleted", "%d Datei wurde gelöscht"),
        ("Bold & strong text", "Fetter & starker Text"),
        ("Usage: %s [<options>] <path>", "Aufruf: %s [<Optionen>] <Pfad>"),
        ("Copy %(name)s to {0} and wait", "%(name)s nach {0} kopieren und warten"),
    ])


@pytest.mark.parametrize(
    ("original", "translation", "expected"),
    [
        ("_File", "ファイル(_F)", ("File", "ファイル")),  # the CJK style: the key in parentheses
        ("_Quit", "_Beenden", ("Quit", "Beenden")),
        ("GIT_DIR is not set", "GIT_DIR ist nicht gesetzt", ("GIT_DIR is not set", "GIT_DIR ist nicht gesetzt")),
        ("%1$s of %2$lu", "%2$lu von %1$s", ("%1$s of %2$lu", "%2$lu von %1$s")),  # placeholders stay
        ("%1$s, %2$lu: %.*s {name}", "%2$lu: %1$s", None),  # placeholders only
        ("Quit", "Beenden (_Q)", ("Quit", "Beenden")),
    ],
)
def test_mnemonics_and_placeholders(original: str, translation: str, expected: tuple[str, str] | None) -> None:
    assert message_pair(original, translation) == expected


def test_catalogs_in_other_charsets_and_byte_orders(tmp_path: Path) -> None:
    latin1 = write_mo(tmp_path / "latin1.mo", {"Close the window": "Fenster schließen"}, charset="ISO-8859-1")
    assert "schließen".encode("latin-1") in latin1.read_bytes()
    assert read_catalog(latin1) == [("Close the window", "Fenster schließen")]
    big_endian = write_mo(tmp_path / "be.mo", {"Close the window": "Fenster schließen"}, byte_order=">")
    assert read_catalog(big_endian) == [("Close the window", "Fenster schließen")]


def test_a_catalog_without_a_header_keeps_its_first_message(tmp_path: Path) -> None:
    messages = {"Close the window": "Fenster schließen", "Open the file": "Datei öffnen"}
    assert read_catalog(write_mo(tmp_path / "bare.mo", messages, header=False)) == list(messages.items())


def test_a_broken_catalog_is_named(tmp_path: Path) -> None:
    broken = tmp_path / "broken.mo"
    broken.write_bytes(b"not a catalog at all, just text")
    with pytest.raises(InputError, match="broken.mo is not a gettext .mo file"):
        read_catalog(broken)
    broken.write_bytes(write_mo(tmp_path / "x.mo", MESSAGES).read_bytes()[:60])
    with pytest.raises(InputError, match="broken.mo is a truncated gettext .mo file"):
        read_catalog(broken)


def test_a_catalog_that_cannot_be_read_is_skipped_with_a_warning_naming_it(
    tree: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    whole = read_gettext_corpus(tree, "en", "de")
    copy = tmp_path / "locale"
    shutil.copytree(tree, copy)
    broken = copy / "de" / "LC_MESSAGES" / "aaa-broken.mo"
    broken.write_bytes(b"not a catalog at all, just text")
    with caplog.at_level(logging.WARNING, logger="nlp.data.gettext"):
        assert read_gettext_corpus(copy, "en", "de") == whole
    assert f"skipped a catalog that cannot be read: {broken} is not a gettext .mo file" in caplog.text


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fake_locale_tree(tmp_path_factory.mktemp("locale"))


def test_split_holds_out_whole_catalogs_deterministically(tree: Path) -> None:
    corpus = read_gettext_corpus(tree, "en", "de")
    assert corpus == read_gettext_corpus(tree, "en", "de")
    splits_of: dict[str, set[str]] = {}
    sizes: Counter[str] = Counter()
    for split, pairs in corpus.items():
        for source, _ in pairs:
            domain = source.split()[-2]  # numbered_messages end with "<domain> <i>"
            splits_of.setdefault(domain, set()).add(split)
            sizes[domain] += 1
    assert sizes == {"bigtool": 120, **{f"tool{i:02d}": 2 for i in range(12)}}  # every message kept
    assert all(len(splits) == 1 for splits in splits_of.values())  # each catalog whole in one split
    assert splits_of["bigtool"] == {"train"}  # larger than a held-out share
    held_out = {split: sum(splits == {split} for splits in splits_of.values()) for split in ("val", "test")}
    assert held_out["val"] >= 1 and held_out["test"] >= 1


def test_held_out_messages_seen_in_training_are_dropped_and_duplicates_kept_once(tmp_path: Path) -> None:
    root = fake_locale_tree(tmp_path)
    held_out = read_gettext_corpus(root, "en", "de")["test"]
    repeated_source, _ = held_out[0]
    bigtool = {**numbered_messages("bigtool", 120), repeated_source: "anders"}
    write_mo(root / "de" / "LC_MESSAGES" / "bigtool.mo", bigtool)
    write_mo(root / "de" / "LC_MESSAGES" / "aaa-first.mo", {"Open the file": "Datei öffnen"})
    write_mo(root / "de" / "LC_MESSAGES" / "zzz-last.mo", {"Open the file": "Die Datei öffnen"})
    corpus = read_gettext_corpus(root, "en", "de")
    assert repeated_source not in {source for source, _ in corpus["test"]}
    train_pairs = dict(corpus["train"])
    assert train_pairs[repeated_source] == "anders"
    assert sum(source == "Open the file" for pairs in corpus.values() for source, _ in pairs) == 1


def test_direction_and_language_errors(tree: Path) -> None:
    forward = read_gettext_corpus(tree, "en", "de")
    backward = read_gettext_corpus(tree, "de", "en")
    assert backward["train"] == [(target, source) for source, target in forward["train"]]
    with pytest.raises(InputError, match=r"no gettext catalogs for language 'xx'.*languages present: de, fr"):
        read_gettext_corpus(tree, "en", "xx")
    with pytest.raises(InputError, match="set data.src_lang=en"):
        read_gettext_corpus(tree, "fr", "de")
    with pytest.raises(InputError, match="does not exist; set data.locale_dir"):
        read_gettext_corpus(tree / "missing", "en", "de")


def test_training_on_gettext_catalogs_reports_bleu_chrf_and_repetition(tree: Path, tmp_path: Path) -> None:
    cfg = nlp_config(
        tmp_path,
        "data=gettext",
        f"data.locale_dir={tree}",
        "data.vocab_size=300",
        "model=transformer_tiny",
        "trainer.max_steps=3",
        "trainer.num_sanity_val_steps=0",
        "module.beam_size=2",
        "module.no_repeat_ngram_size=3",
        "callbacks.recent_checkpoints=null",
    )
    assert cfg.data.src_lang == "en" and cfg.data.tgt_lang == "de" and cfg.data.locale_dir == str(tree)
    train(cfg)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    for key in ("val/bleu", "val/chrf", "test/bleu", "test/chrf", "test/rep4", "test/rep4_ref"):
        assert isinstance(metrics[key], float), key
    assert 0.0 <= metrics["test/rep4"] <= 1.0 and metrics["test/rep4_ref"] == 0.0


@pytest.mark.slow
def test_the_machines_german_catalogs_give_a_real_corpus() -> None:
    corpus = read_gettext_corpus(DEFAULT_LOCALE_DIR, "en", "de")
    assert len(corpus["train"]) > 30_000
    assert 500 < len(corpus["val"]) < 3_000 and 500 < len(corpus["test"]) < 4_000
    train_sources = {source for source, _ in corpus["train"]}
    assert not any(source in train_sources for source, _ in corpus["test"] + corpus["val"])
    assert all(source != target and "\n" not in source for source, target in corpus["train"])


def test_the_offline_error_of_hugging_face_corpora_points_to_gettext() -> None:
    # tests/conftest.py puts the Hugging Face libraries in offline mode.
    with pytest.raises(InputError, match="offline, use data=gettext"):
        load_hf_split("bentrevett/multi30k", None, "train", "de", "en")
