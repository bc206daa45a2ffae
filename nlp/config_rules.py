"""The translation config's rules: which constraint each key of ``conf/nlp.yaml`` (and its
presets) follows, and the rules between keys. ``core.training.commands.config_check`` applies them, with the
rules every training config shares, before torch is imported."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from core.constraints import FRACTION, NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT, PROBABILITY, optional, or_auto
from core.errors import InputError
from core.training.commands.config_check import Rule, require_file
from nlp.constraints import CORPUS, JOIN_WORDS, MAX_LEN, MAX_TOKENS, PAD_TO_MULTIPLE, VOCAB_SIZE

RULES: tuple[Rule, ...] = (
    Rule(("model.encoder_depth", "model.decoder_depth", "model.ffn_dim"), POSITIVE_INT),
    Rule(("model.max_len",), MAX_LEN),
    Rule(("model.dropout",), or_auto(FRACTION)),  # auto: sized to the planned passes (nlp.recipe)
    Rule(("model.word_dropout",), FRACTION),
    Rule(("module.label_smoothing",), or_auto(FRACTION)),  # auto: sized to the planned passes (nlp.recipe)
    Rule(("module.eps",), POSITIVE),
    Rule(("module.length_penalty",), NON_NEGATIVE),
    Rule(("module.warmup_steps",), POSITIVE_INT),  # the inverse square root divides by it
    Rule(("module.cooldown_fraction",), PROBABILITY),
    Rule(("module.beam_size", "module.bleu_every_n_epochs"), POSITIVE_INT),
    Rule(("module.max_decode_len",), optional(POSITIVE_INT)),
    Rule(("module.max_len_a",), NON_NEGATIVE),  # decoding checks these only at its first validation
    Rule(("module.max_len_b",), POSITIVE_INT),
    Rule(("module.no_repeat_ngram_size",), NON_NEGATIVE_INT),
    Rule(("data.corpus",), CORPUS),
    Rule(("data.max_tokens",), MAX_TOKENS),
    Rule(("data.pad_to_multiple",), PAD_TO_MULTIPLE),
    Rule(("data.vocab_size",), VOCAB_SIZE),
    Rule(("data.repeat",), POSITIVE_INT),
    Rule(("data.min_frequency",), NON_NEGATIVE_INT),
    Rule(("data.join_words",), JOIN_WORDS),
    Rule(("data.max_train_pairs",), optional(POSITIVE_INT)),
)


def corpus_files(cfg: DictConfig) -> None:
    """The corpus paths of ``data=files`` exist: a TSV file, or a prefix P with files P.SRC and P.TGT."""
    if OmegaConf.select(cfg, "data.corpus") != "files":
        return
    src, tgt = OmegaConf.select(cfg, "data.src_lang"), OmegaConf.select(cfg, "data.tgt_lang")
    for split in ("train", "val", "test"):
        path = OmegaConf.select(cfg, f"data.{split}", throw_on_missing=False)
        if path is None:
            if split != "test":
                raise InputError(f"data=files needs data.{split}=PATH (a TSV file or a prefix P of files P.{src} and P.{tgt})")
            continue
        if not Path(path).is_file() and not all(Path(f"{path}.{lang}").is_file() for lang in (src, tgt)):
            raise InputError(
                f"data.{split}={path} is neither a file nor a prefix of files {path}.{src} and {path}.{tgt}; "
                f"pass an existing TSV file or prefix (languages from data.src_lang / data.tgt_lang)"
            )


def tokenizer_file(cfg: DictConfig) -> None:
    """A tokenizer to reuse is a file that exists."""
    require_file(cfg, "data.tokenizer_path", "pass a tokenizer.json, or data.tokenizer_path=null to train one")


def model_positions(cfg: DictConfig) -> None:
    """``module.max_decode_len`` (the tokens a translation may have) and ``data.max_len`` (the
    subwords a sentence is cut to) fit the model's positions (``model.max_len``): a longer sequence
    would reach positions the model has no encoding for."""
    positions = OmegaConf.select(cfg, "model.max_len")
    for key in ("module.max_decode_len", "data.max_len"):
        limit = OmegaConf.select(cfg, key)
        if limit is not None and positions is not None and limit > positions:
            raise InputError(
                f"{key}={limit} is more than model.max_len={positions}, the most positions the model has; "
                f"lower {key} or raise model.max_len"
            )


def bleu_monitored(cfg: DictConfig) -> None:
    """``optimized_metric=val/bleu`` needs BLEU at every validation: the best checkpoint is chosen
    at each one (``module.bleu_every_n_epochs`` 1)."""
    every = OmegaConf.select(cfg, "module.bleu_every_n_epochs")
    if OmegaConf.select(cfg, "optimized_metric") == "val/bleu" and isinstance(every, int) and every > 1:
        raise InputError(
            f"optimized_metric=val/bleu needs BLEU at every validation, but module.bleu_every_n_epochs={every}; "
            "set module.bleu_every_n_epochs=1, or optimize val/loss"
        )


RELATIONS: tuple[Callable[[DictConfig], None], ...] = (corpus_files, tokenizer_file, model_positions, bleu_monitored)
