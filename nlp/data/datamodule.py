"""The translation ``LightningDataModule``: corpus -> joint BPE tokenizer -> token-budget batches."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from torch.utils.data import DataLoader

from core.constraints import AUTO
from core.files.data_cache import cache_root
from core.errors import InputError
from core.training.data.budgeted import BudgetedDataModule
from nlp.data.batch_size import STEPS_ONLY_TOKENS, auto_max_tokens
from nlp.constraints import CORPUS, MAX_LEN, MAX_TOKENS, PAD_TO_MULTIPLE, pad_multiple
from nlp.data.batching import Collator, TokenBudgetBatchSampler, round_up
from nlp.data.corpora import Pair, iter_corpus, load_hf_dataset, load_hf_split
from nlp.data.gettext import DEFAULT_LOCALE_DIR, read_gettext_corpus
from nlp.data.prepared import EncodedSplit, build, content_hash, file_stamp, fingerprint, prepared
from nlp.data.tokenizer import SubwordTokenizer
from nlp.data.toy_corpus import TOY_PAIRS

log = logging.getLogger(__name__)


class TranslationDataModule(BudgetedDataModule):
    """Parallel sentences from one of four sources, tokenized with a BPE learned on the
    training split.

    Args:
        corpus: ``toy`` (the three sentences of the worked example, used for every split),
            ``files`` (``train``/``val``/``test`` paths), ``hf`` (a Hugging Face dataset) or
            ``gettext`` (the machine's gettext catalogs, English <-> one language:
            :mod:`nlp.data.gettext`).
        train: TSV file or parallel-file prefix of the training split (``files``).
        val: the same for the validation split (``files``).
        test: the same for the test split (``files``, optional: the validation split otherwise).
        src_lang: source language code (file suffix, dataset column or translation key).
        tgt_lang: target language code.
        dataset: Hugging Face dataset name (``hf``), e.g. ``bentrevett/multi30k`` or ``wmt/wmt14``.
        dataset_config: its configuration name, e.g. ``de-en`` for ``wmt/wmt14``.
        splits: names of the train/val/test splits in the dataset (``test`` may be null).
        max_train_pairs: use only the first pairs of the training split (large WMT corpora).
        locale_dir: the directory of ``<lang>/LC_MESSAGES/*.mo`` catalogs (``gettext``).
        join_words: join each catalog's messages into sentences of at least this many English
            words (``gettext``; 0 keeps one message per pair).
        repeat: how many times one epoch goes over the training pairs (tiny corpora).
        vocab_size: size of the joint BPE vocabulary.
        min_frequency: least count of a pair of symbols for a BPE merge.
        tokenizer_path: a ``tokenizer.json`` to reuse instead of training one.
        max_tokens: padded-token budget of a batch, or ``auto``: sized from the run's budget
            (:mod:`nlp.data.batch_size`; evaluation batches then hold 4096 tokens).
        pad_to_multiple: pad sources and teacher-forced targets to a multiple of this; ``auto``:
            :data:`nlp.constraints.AUTO_PAD_MULTIPLE` (8) on every device.
        max_len: the model's longest sequence; longer sentences are truncated with a warning.
        num_workers: DataLoader worker processes.
        seed: seed of the batch shuffling.
        cache_dir: where the prepared data (tokenizer, encoded splits) is kept; default
            ``$TRANSFORMER_TOOLKIT_CACHE`` or ``~/.cache/transformer-toolkit`` (:mod:`nlp.data.prepared`).
    """

    def __init__(
        self,
        corpus: str = "toy",
        train: str | None = None,
        val: str | None = None,
        test: str | None = None,
        src_lang: str = "de",
        tgt_lang: str = "en",
        dataset: str | None = None,
        dataset_config: str | None = None,
        splits: dict[str, str | None] | None = None,
        max_train_pairs: int | None = None,
        locale_dir: str = DEFAULT_LOCALE_DIR,
        join_words: int = 0,
        repeat: int = 1,
        vocab_size: int = 8000,
        min_frequency: int = 2,
        tokenizer_path: str | None = None,
        max_tokens: int | str = 4096,
        pad_to_multiple: int | str = AUTO,
        max_len: int = 1024,
        num_workers: int = 0,
        seed: int = 0,
        cache_dir: str | None = None,
    ) -> None:
        CORPUS.require(corpus, "data.corpus")
        if corpus == "files" and (train is None or val is None):
            raise InputError("data=files needs data.train=PATH and data.val=PATH (TSV files or parallel-file prefixes)")
        if corpus == "hf" and not dataset:
            raise InputError("data=hf needs data.dataset=NAME (e.g. bentrevett/multi30k or wmt/wmt14)")
        MAX_TOKENS.require(max_tokens, "data.max_tokens")
        super().__init__(max_tokens, "train_max_tokens", STEPS_ONLY_TOKENS)
        MAX_LEN.require(max_len, "data.max_len")
        self.corpus = corpus
        self.paths = {"train": train, "val": val, "test": test}
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.dataset, self.dataset_config = dataset, dataset_config
        self.splits = {"train": "train", "val": "validation", "test": "test", **(splits or {})}
        self.max_train_pairs = max_train_pairs
        self.locale_dir = locale_dir
        self.join_words = join_words
        self.gettext_splits: dict[str, list[Pair]] | None = None
        self.repeat = repeat
        self.vocab_size, self.min_frequency = vocab_size, min_frequency
        self.tokenizer_path = tokenizer_path
        self.max_tokens, self.max_len = max_tokens, max_len
        PAD_TO_MULTIPLE.require(pad_to_multiple, "data.pad_to_multiple")
        self.pad_multiple = pad_multiple(pad_to_multiple)  # auto resolved: the same on every device
        self.num_workers, self.seed = num_workers, seed
        self.tokenizer: SubwordTokenizer | None = None
        self.cache_dir = cache_dir
        self.meta: dict[str, Any] = {}
        self.examples: dict[str, EncodedSplit] = {}
        self.selected_split: str | None = None

    def select_split(self, split: str) -> None:
        """Prepare and load ``split`` alone (:class:`core.training.head.SplitSelection`: evaluation
        encodes the test pairs, not the training pairs too), or the validation split where
        ``split`` is a test split the corpus lacks (:meth:`test_dataloader` falls back to it).
        Without ``tokenizer_path`` every split stays: the tokenizer is trained on the training one."""
        if self.tokenizer_path is not None:
            self.selected_split = split

    def split_names(self) -> list[str]:
        """The splits this corpus has: train, val and, where given, test; only the selected one
        (:meth:`select_split`), or val for a missing test split, once one is selected."""
        if self.corpus == "files":
            names = [split for split, path in self.paths.items() if path is not None]
        elif self.corpus == "hf":
            if self.splits.get("val") is None:
                raise InputError(f"dataset {self.dataset!r} needs a validation split: set data.splits.val")
            names = [split for split in ("train", "val", "test") if self.splits.get(split) is not None]
        else:
            names = ["train", "val", "test"]
        if self.selected_split is None:
            return names
        return [self.selected_split] if self.selected_split in names else ["val"]

    def iter_split(self, split: str) -> Iterable[Pair]:
        """The sentence pairs of ``split``, streamed from files where the corpus is files."""
        if self.corpus == "toy":
            return list(TOY_PAIRS)
        if self.corpus == "files":
            return iter_corpus(self.paths[split], self.src_lang, self.tgt_lang)  # type: ignore[arg-type]
        if self.corpus == "gettext":
            if self.gettext_splits is None:
                self.gettext_splits = read_gettext_corpus(self.locale_dir, self.src_lang, self.tgt_lang, self.join_words)
            return self.gettext_splits[split]
        limit = self.max_train_pairs if split == "train" else None
        return load_hf_split(self.dataset, self.dataset_config, self.splits[split], self.src_lang, self.tgt_lang, limit)

    def fingerprint_inputs(self) -> dict[str, Any]:
        """Everything the prepared data depends on (:mod:`nlp.data.prepared`): corpus files by path,
        size and modification time, a given tokenizer by content, the encoding settings, and the
        splits where one is selected."""
        inputs: dict[str, Any] = {
            "corpus": self.corpus, "src_lang": self.src_lang, "tgt_lang": self.tgt_lang, "max_len": self.max_len,
            "vocab_size": self.vocab_size, "min_frequency": self.min_frequency,
            "tokenizer": None if self.tokenizer_path is None else content_hash(Path(self.tokenizer_path)),
        }
        if self.selected_split is not None:
            inputs["splits"] = self.split_names()
        if self.corpus == "files":
            inputs["files"] = {split: self.corpus_files(self.paths[split]) for split in self.split_names()}
        elif self.corpus == "gettext":
            lang = self.tgt_lang if self.src_lang == "en" else self.src_lang
            catalogs = sorted((Path(self.locale_dir) / lang / "LC_MESSAGES").glob("*.mo"))
            inputs.update(locale_dir=self.locale_dir, join_words=self.join_words, catalogs=[file_stamp(c) for c in catalogs])
        elif self.corpus == "hf":
            # Its own key: "splits" names the selected ones (evaluation), and each selection is a cache of its own.
            inputs.update(dataset=self.dataset, config=self.dataset_config, hf_splits=self.splits, limit=self.max_train_pairs)
        else:
            inputs["pairs"] = TOY_PAIRS
        return inputs

    def corpus_files(self, path: str) -> list[list[Any]]:
        """The stamps of the file(s) a ``files`` split reads: a TSV file, or a prefix's two files."""
        if Path(path).is_file():
            return [file_stamp(Path(path))]
        files = [Path(f"{path}.{self.src_lang}"), Path(f"{path}.{self.tgt_lang}")]
        return [file_stamp(file) if file.is_file() else [str(file), None] for file in files]

    def cache_directory(self) -> Path:
        """Where this data's prepared form is kept (complete once it holds ``meta.json``)."""
        return cache_root(self.cache_dir) / "nlp" / fingerprint(self.fingerprint_inputs())

    def prepared_directory(self) -> Path:
        """The cache directory of this data, built by the first process that needs it (the
        tokenizer trained and every split encoded once; :mod:`nlp.data.prepared`)."""
        directory = self.cache_directory()
        splits = {split: (lambda split=split: self.iter_split(split)) for split in self.split_names()}
        self.meta = prepared(
            directory,
            lambda target: build(target, splits, self.tokenizer_path, self.vocab_size, self.min_frequency, self.max_len),
        )
        self.gettext_splits = None
        return directory

    def prepare_data(self) -> None:
        """Download (Hugging Face corpora), train the tokenizer and encode every split (or the
        selected one, :meth:`select_split`) into the data cache, unless it is there already:
        Lightning runs this on one process per machine, and the shared runner in each process one
        at a time, so the work is done once and the others find it done (a Hugging Face corpus
        whose prepared form is complete is not loaded: a machine without the Hugging Face cache
        trains on the shared data cache alone)."""
        if self.corpus == "hf" and not (self.cache_directory() / "meta.json").is_file():
            load_hf_dataset(self.dataset, self.dataset_config)
        self.prepared_directory()

    def setup(self, stage: str | None = None) -> None:
        """Map the prepared splits and load the tokenizer (preparing them first if no process
        has); the text is not read again. Once only."""
        if self.tokenizer is not None:
            return
        directory = self.prepared_directory()
        self.tokenizer = SubwordTokenizer.from_file(directory / "tokenizer.json")
        for split, counts in self.meta["splits"].items():
            if counts["truncated"]:
                log.warning(
                    "%s split: truncated %d of %d sentence pairs longer than %d subwords (max_len %d)",
                    split, counts["truncated"], counts["pairs"], self.max_len - 1, self.max_len,
                )
        self.examples = {
            split: EncodedSplit(directory, split, self.meta["dtype"], self.repeat if split == "train" else 1)
            for split in self.meta["splits"]
        }
        log.info(
            "prepared data %s: %s pairs", directory, {split: counts["pairs"] for split, counts in self.meta["splits"].items()}
        )

    def module_kwargs(self) -> dict[str, Any]:
        """What the LightningModule needs from the data, as plain types (stored in checkpoints):
        the tokenizer as its JSON string, the ``max_len`` sources were encoded to and the target
        language (how BLEU splits words)."""
        if self.tokenizer is None:
            raise RuntimeError("call setup('fit') before module_kwargs()")
        return {"tokenizer": self.tokenizer.to_json(), "source_max_len": self.max_len, "tgt_lang": self.tgt_lang}

    def dataloader(self, examples: EncodedSplit, train: bool, max_tokens: int) -> DataLoader:
        """Token-budget batches of ``examples``: shuffled and sharded over ranks for training."""
        # Training batches are sharded over data-parallel processes here (Lightning's own sampler
        # injection is off for nlp); evaluation runs the whole split on every process.
        world_size, rank = self.shards() if train else (1, 0)
        sampler = TokenBudgetBatchSampler(
            examples.lengths(),
            max_tokens,
            shuffle=train,
            seed=self.seed,
            num_replicas=world_size,
            rank=rank,
            multiple=self.pad_multiple,
        )
        options: dict[str, Any] = dict(
            batch_sampler=sampler,
            collate_fn=self.collator(),
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )
        return self.training_loader(examples, **options) if train else DataLoader(examples, **options)

    def collator(self) -> Collator:
        """The collator of every batch: padded with the tokenizer's pad id to multiples of
        ``pad_multiple``, within ``max_len``; the batch-size probe collates as training does."""
        assert self.tokenizer is not None
        return Collator(self.tokenizer.pad_id, self.pad_multiple, self.max_len)

    def choose_train_batch(self, trainer: pl.Trainer) -> int:
        """The choice of :func:`nlp.data.batch_size.auto_max_tokens` for ``trainer``'s budget, on
        the lengths as the batch sampler counts them (padded to multiples of ``pad_multiple``)."""
        examples = self.examples["train"]
        collate = self.collator()
        lengths = round_up(examples.lengths(), self.pad_multiple)
        return auto_max_tokens(trainer, trainer.lightning_module, lengths, lambda indices: collate([examples[i] for i in indices]))

    def eval_max_tokens(self) -> int:
        """The token budget of evaluation batches: ``max_tokens``, or 4096 for ``auto``."""
        return STEPS_ONLY_TOKENS if self.max_tokens == AUTO else int(self.max_tokens)

    def train_dataloader(self) -> DataLoader:
        """The training split, ``repeat`` times over, in shuffled token-budget batches."""
        return self.dataloader(self.examples["train"], train=True, max_tokens=self.train_batch_size())

    def evaluation_dataloader(self, split: str) -> DataLoader:
        """``split`` as evaluation scores it (:class:`core.training.head.EvaluationSplits`): each
        pair once, in length-sorted token-budget batches; the training split without ``repeat``
        and unshuffled."""
        if split != "train":
            return getattr(self, f"{split}_dataloader")()
        train = self.examples["train"]
        once = EncodedSplit(train.directory, "train", train.dtype)
        return self.dataloader(once, train=False, max_tokens=self.eval_max_tokens())

    def val_dataloader(self) -> DataLoader:
        """The validation split in length-sorted token-budget batches."""
        return self.dataloader(self.examples["val"], train=False, max_tokens=self.eval_max_tokens())

    def test_dataloader(self) -> DataLoader:
        """The test split, or the validation split (with a warning) when there is none."""
        if "test" not in self.examples:
            log.warning("no test split given (data.test / data.splits.test); testing on the validation split")
            return self.val_dataloader()
        return self.dataloader(self.examples["test"], train=False, max_tokens=self.eval_max_tokens())
