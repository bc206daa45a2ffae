"""The translation proving corpora of ``benchmarks.corpora``, built from fake gettext catalogs:
languages pooled into English, whole programs held out for every language alike, no test
reference among the training targets, long passages, and the same files on every build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import corpora
from tests.nlp.gettext_catalogs import numbered_messages, write_mo


@pytest.fixture(scope="module")
def locale_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """German, French and British English catalogs of one big program and twelve small ones; the
    French translations are the German ones marked ``fr:``."""
    root = tmp_path_factory.mktemp("locale")
    for lang, mark in (("de", ""), ("fr", "fr: "), ("en_GB", "uk: ")):
        for domain, count in {"bigtool": 150, **{f"tool{i:02d}": 3 for i in range(12)}}.items():
            messages = {english: mark + german for english, german in numbered_messages(domain, count).items()}
            write_mo(root / lang / "LC_MESSAGES" / f"{domain}.mo", messages)
    return root


def build(locale_dir: Path, out: Path, *extra: str) -> dict[str, dict]:
    records = corpora.main([str(out), "--locale-dir", str(locale_dir), "--test-pairs", "5", *extra])
    return {record["corpus"]: record for record in records}


def read_pairs(path: Path) -> list[tuple[str, str]]:
    return [tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines()]


def test_many_en_pools_the_languages_into_english_and_holds_out_whole_programs(locale_dir: Path, tmp_path: Path) -> None:
    record = build(locale_dir, tmp_path, "--corpora", "many-en")["many-en"]
    assert record["languages"] == ["de", "fr"]  # English variants left out
    splits = {split: read_pairs(tmp_path / "many-en" / f"{split}.tsv") for split in corpora.SPLITS}
    assert record["counts"] == {split: len(pairs) for split, pairs in splits.items()} and record["counts"]["test"] == 5
    sources = [source for source, _ in splits["train"]]
    assert any(source.startswith("fr: ") for source in sources) and any(not source.startswith("fr: ") for source in sources)
    assert not any(source.startswith("uk: ") for pairs in splits.values() for source, _ in pairs)
    held = record["held_out"]["test"] + record["held_out"]["val"]
    assert held and "bigtool" not in held
    for split in ("test", "val"):
        programs = {target.split()[-2] for _, target in splits[split]}  # numbered messages end "<program> <i>"
        assert programs <= set(record["held_out"][split])
    train_targets = {target for _, target in splits["train"]}
    assert not train_targets & {target for split in ("test", "val") for _, target in splits[split]}
    assert all(target.split()[-2] not in held for target in train_targets)


def test_long_passages_reach_the_words_asked_from_the_largest_languages_first(locale_dir: Path, tmp_path: Path) -> None:
    record = build(locale_dir, tmp_path, "--corpora", "long-many-en", "--join-words", "12", "--long-pairs", "10")
    assert len(record["long-many-en"]["languages"]) == 1  # one language's passages already reach 10
    train = read_pairs(tmp_path / "long-many-en" / "train.tsv")
    assert len(train) >= 10 and all(len(target.split()) >= 12 for _, target in train)
    assert record["long-many-en"]["median_words"]["target"] >= 12


def test_a_build_is_the_same_every_time(locale_dir: Path, tmp_path: Path) -> None:
    build(locale_dir, tmp_path / "one")
    build(locale_dir, tmp_path / "two")
    for corpus in corpora.CORPORA:
        for name in ("train.tsv", "val.tsv", "test.tsv", "build.json"):
            assert (tmp_path / "one" / corpus / name).read_bytes() == (tmp_path / "two" / corpus / name).read_bytes()
    assert json.loads((tmp_path / "one" / "many-en" / "build.json").read_text())["settings"]["seed"] == 0
