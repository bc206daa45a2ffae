"""The encoding rule from sentences to model inputs, shared by training, evaluation and translation.

A source becomes its subwords, cut to ``max_len - 1``, then ``</s>``; a target becomes ``<s>``,
its subwords cut to ``max_len - 1``, then ``</s>`` (teacher forcing feeds all but the last token
and predicts all but the first, so both sides span at most ``max_len`` positions).
:class:`nlp.data.datamodule.TranslationDataModule` encodes every split with these functions, and
:meth:`nlp.module.TranslationModule.source_batch` encodes new sentences with the same one and the
``max_len`` its checkpoint stores.
"""

from __future__ import annotations

from itertools import chain

import numpy as np

from nlp.constraints import MAX_LEN
from nlp.data.tokenizer import SubwordTokenizer

# Ids of each sentence, and whether each was cut to fit.
Encoded = tuple[list[list[int]], list[bool]]
# The same back to back: ids [total], lengths [texts], cut [texts].
Flat = tuple[np.ndarray, np.ndarray, np.ndarray]


def subword_budget(max_len: int) -> int:
    """Subwords kept of a sentence whose encoding may span ``max_len`` positions: all but one,
    which ``</s>`` takes."""
    MAX_LEN.require(max_len, "max_len")
    return max_len - 1


def encode_flat(
    tokenizer: SubwordTokenizer, texts: list[str], max_len: int, bos: bool, dtype: np.dtype = np.dtype(np.int64)
) -> Flat:
    """``[<s>] x_1 .. x_n </s>`` of each text (``<s>`` when ``bos``), with ``n <= max_len - 1``,
    back to back in one array, with each encoding's length and whether it was cut."""
    keep = subword_budget(max_len)
    encoded = tokenizer.encode_batch(texts)
    lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
    ids = np.fromiter(chain.from_iterable(encoded), dtype, int(lengths.sum()))
    cut = lengths > keep
    kept = np.minimum(lengths, keep)
    if cut.any():
        # position of every id within its sentence, [total]
        within = np.arange(ids.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        ids = ids[within < keep]
    framed = kept + 1 + bos
    starts = np.cumsum(framed) - framed
    out = np.full(int(framed.sum()), tokenizer.eos_id, dtype)
    if bos:
        out[starts] = tokenizer.bos_id
    # each kept id moves from its offset among the kept ids to its sentence's start (after <s>)
    out[np.arange(ids.size) + np.repeat(starts + bos - (np.cumsum(kept) - kept), kept)] = ids
    return out, framed, cut


def split_flat(flat: Flat) -> Encoded:
    """:func:`encode_flat`'s result as one list of ids per text."""
    ids, lengths, cut = flat
    if not lengths.size:  # np.split would give one empty part
        return [], []
    return [part.tolist() for part in np.split(ids, np.cumsum(lengths)[:-1])], cut.tolist()


def encode_sources(tokenizer: SubwordTokenizer, texts: list[str], max_len: int) -> Encoded:
    """Source ids ``x_1 .. x_n </s>`` of each text stripped of its surrounding whitespace (as
    every corpus reader strips its sentences, so a line read with its indentation or trailing
    space encodes as in training), with ``n <= max_len - 1``."""
    return split_flat(encode_flat(tokenizer, [text.strip() for text in texts], max_len, bos=False))


def encode_targets(tokenizer: SubwordTokenizer, texts: list[str], max_len: int) -> Encoded:
    """Target ids ``<s> y_1 .. y_m </s>`` of each text, with ``m <= max_len - 1``."""
    return split_flat(encode_flat(tokenizer, texts, max_len, bos=True))
