"""The encoding rule from sentences to model inputs, shared by training, evaluation and translation.

A source becomes its subwords, cut to ``max_len - 1``, then ``</s>``; a target becomes ``<s>``,
its subwords cut to ``max_len - 1``, then ``</s>`` (teacher forcing feeds all but the last token
and predicts all but the first, so both sides span at most ``max_len`` positions).
:class:`nlp.datamodule.TranslationDataModule` encodes every split with these functions, and
:meth:`nlp.module.TranslationModule.source_batch` encodes new sentences with the same one and the
``max_len`` its checkpoint stores.
"""

from __future__ import annotations

from nlp.tokenizer import SubwordTokenizer

# Ids of each sentence, and whether each was cut to fit.
Encoded = tuple[list[list[int]], list[bool]]


def subword_budget(max_len: int) -> int:
    """Subwords kept of a sentence whose encoding may span ``max_len`` positions: all but one,
    which ``</s>`` takes."""
    if max_len < 2:
        raise ValueError(f"max_len must be at least 2 (one token and </s>), got {max_len}")
    return max_len - 1


def encode_sources(tokenizer: SubwordTokenizer, texts: list[str], max_len: int) -> Encoded:
    """Source ids ``x_1 .. x_n </s>`` of each text, with ``n <= max_len - 1``."""
    keep = subword_budget(max_len)
    encoded = tokenizer.encode_batch(texts)
    return [ids[:keep] + [tokenizer.eos_id] for ids in encoded], [len(ids) > keep for ids in encoded]


def encode_targets(tokenizer: SubwordTokenizer, texts: list[str], max_len: int) -> Encoded:
    """Target ids ``<s> y_1 .. y_m </s>`` of each text, with ``m <= max_len - 1``."""
    keep = subword_budget(max_len)
    encoded = tokenizer.encode_batch(texts)
    bos, eos = tokenizer.bos_id, tokenizer.eos_id
    return [[bos] + ids[:keep] + [eos] for ids in encoded], [len(ids) > keep for ids in encoded]
