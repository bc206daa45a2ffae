"""Proving corpora for translation at a user's size and shape, built offline and deterministically
from the machine's gettext catalogs (each message pair cleaned as :mod:`nlp.data.gettext` does):

- ``many-en``: every language's catalogs translated into English, pooled: a many-to-one corpus of
  program messages (300,000+ pairs on a desktop Linux, median about 5 words);
- ``long-many-en``: passages of ``--join-words`` words or more, each catalog's messages joined in
  order (:func:`nlp.data.gettext.join_messages`), from the languages with the most messages,
  taken in that order until the training passages reach ``--long-pairs`` (30,000 by default).

The split holds out whole programs for every language alike: the catalogs (domains) are ordered by
the hash :mod:`nlp.data.gettext` uses and taken for test, then validation, until each holds its share
of the pooled pairs; a held-out pair whose English side also occurs in training (in any language)
is dropped, so no test reference was ever a training target. ``test.tsv`` holds ``--test-pairs``
(300) pairs drawn with the seed from the test programs: the held-back test, for the final figures
and never for a decision's validation; ``val.tsv`` at most ``--val-pairs`` drawn from the
validation programs.

Each corpus is written to ``OUT/<corpus>/{train,val,test}.tsv`` (``source<TAB>target``, read with
``python -m nlp.train data=files data.train=OUT/<corpus>/train.tsv data.val=... data.test=...``)
with ``build.json`` (languages, held-out programs, counts, median words) written last.

    python -m benchmarks.corpora OUT [--corpora many-en long-many-en] [--locale-dir /usr/share/locale]
        [--join-words 20] [--long-pairs 30000] [--test-pairs 300] [--val-pairs 2000] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from core.files.atomic import atomic_path
from nlp.data.gettext import (
    DEFAULT_LOCALE_DIR,
    Pair,
    catalog_files,
    held_out_domains,
    join_messages,
    languages_present,
    read_catalog,
)

CORPORA = ("many-en", "long-many-en")
SPLITS = ("train", "val", "test")
Catalogs = dict[str, dict[str, list[Pair]]]  # language -> domain -> (English, translation) pairs


def read_catalogs(locale_dir: Path) -> Catalogs:
    """Every language's catalogs but English variants (``en_GB``: English on both sides)."""
    languages = [lang for lang in languages_present(locale_dir) if lang.split("_")[0].split("@")[0] != "en"]
    return {lang: {domain: read_catalog(path) for domain, path in catalog_files(locale_dir, lang).items()} for lang in languages}


Placed = dict[str, dict[str, list[tuple[str, Pair]]]]  # split -> language -> (domain, (English, translation))


def split_catalogs(catalogs: Catalogs) -> tuple[Placed, dict[str, str]]:
    """Per split, per language, its messages as (domain, (English, translation)) in catalog order,
    and the held-out domains. Each language keeps an English message once (its first
    translation); a held-out message whose English occurs in training is dropped (and, in
    validation, one that occurs in test)."""
    sizes: Counter[str] = Counter()
    for domains in catalogs.values():
        for domain, pairs in domains.items():
            sizes[domain] += len(pairs)
    held_out = held_out_domains(dict(sizes))
    by_split: Placed = {split: {} for split in SPLITS}
    for lang, domains in catalogs.items():
        placed: dict[str, set[str]] = {split: set() for split in SPLITS}
        for domain, pairs in domains.items():
            split = held_out.get(domain, "train")
            for english, translation in pairs:
                if english not in placed[split]:
                    placed[split].add(english)
                    by_split[split].setdefault(lang, []).append((domain, (english, translation)))
    seen = {english for pairs in by_split["train"].values() for _, (english, _) in pairs}
    for split in ("test", "val"):
        for lang, pairs in by_split[split].items():
            by_split[split][lang] = [(domain, pair) for domain, pair in pairs if pair[0] not in seen]
        seen |= {english for pairs in by_split[split].values() for _, (english, _) in pairs}
    return by_split, held_out


def joined(pairs: list[tuple[str, Pair]], join_words: int) -> list[Pair]:
    """One language's messages of a split joined into passages, catalog by catalog."""
    domains: dict[str, list[Pair]] = {}
    for domain, pair in pairs:
        domains.setdefault(domain, []).append(pair)
    return [passage for messages in domains.values() for passage in join_messages(messages, join_words)]


def build(corpus: str, splits: Placed, args: argparse.Namespace) -> dict[str, Any]:
    """The corpus's splits as (source, English) pairs and the languages it draws from."""
    if corpus == "many-en":
        languages = sorted(splits["train"])
        parts = {split: [pair for lang in languages for _, pair in splits[split].get(lang, [])] for split in SPLITS}
    else:
        by_size = sorted(splits["train"], key=lambda lang: (-len(splits["train"][lang]), lang))
        languages, parts = [], {split: [] for split in SPLITS}
        for lang in by_size:
            if len(parts["train"]) >= args.long_pairs:
                break
            languages.append(lang)
            for split in SPLITS:
                parts[split] += joined(splits[split].get(lang, []), args.join_words)
    rng = random.Random(args.seed)
    parts["test"] = rng.sample(parts["test"], min(args.test_pairs, len(parts["test"])))
    parts["val"] = rng.sample(parts["val"], min(args.val_pairs, len(parts["val"])))
    pairs = {split: [(translation, english) for english, translation in items] for split, items in parts.items()}
    return {"languages": languages, "pairs": pairs}


def write_splits(directory: Path, splits: dict[str, list[Pair]]) -> dict[str, Path]:
    """Each split as ``directory/<split>.tsv`` (``source<TAB>target``), written atomically; their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, pairs in splits.items():
        with atomic_path(directory / f"{split}.tsv") as path:
            path.write_text("".join(f"{source}\t{target}\n" for source, target in pairs), encoding="utf-8")
        paths[split] = directory / f"{split}.tsv"
    return paths


def write_corpus(out: Path, corpus: str, built: dict[str, Any], held_out: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    """The TSV files, then ``build.json``; each written atomically."""
    directory = out / corpus
    write_splits(directory, built["pairs"])
    train = built["pairs"]["train"]
    record = {
        "corpus": corpus,
        "languages": built["languages"],
        "counts": {split: len(pairs) for split, pairs in built["pairs"].items()},
        "median_words": {
            "source": statistics.median(len(source.split()) for source, _ in train),
            "target": statistics.median(len(target.split()) for _, target in train),
        },
        "held_out": {split: sorted(domain for domain, where in held_out.items() if where == split) for split in ("test", "val")},
        "settings": {key: getattr(args, key) for key in ("join_words", "long_pairs", "test_pairs", "val_pairs", "seed")},
    }
    with atomic_path(directory / "build.json") as path:
        path.write_text(json.dumps(record, indent=2) + "\n")
    return record


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="folder the corpora are written into")
    parser.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=CORPORA)
    parser.add_argument("--locale-dir", type=Path, default=Path(DEFAULT_LOCALE_DIR))
    parser.add_argument("--join-words", type=int, default=20, help="long-many-en: English words a passage reaches")
    parser.add_argument("--long-pairs", type=int, default=30_000, help="long-many-en: training passages to reach")
    parser.add_argument("--test-pairs", type=int, default=300, help="the held-back test pairs of each corpus")
    parser.add_argument("--val-pairs", type=int, default=2000, help="most validation pairs of each corpus")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    splits, held_out = split_catalogs(read_catalogs(args.locale_dir))
    records = []
    for corpus in args.corpora:
        record = write_corpus(args.out, corpus, build(corpus, splits, args), held_out, args)
        print(f"{corpus}: {record['counts']} pairs, {len(record['languages'])} languages, median words {record['median_words']}")
        records.append(record)
    return records


if __name__ == "__main__":
    main()
