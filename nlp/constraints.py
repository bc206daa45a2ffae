"""What the translation model, its tokenizer and its data accept, stated once and without torch.

The tokenizer, the encoder of the splits and the datamodule check their arguments with these,
and ``python -m nlp.train`` checks a composed config with the same ones (``nlp.config_rules``)
before torch is imported.
"""

from __future__ import annotations

from core.constraints import AUTO, NON_NEGATIVE_INT, POSITIVE_INT, Check, one_of, or_auto, whole

CORPORA = ("toy", "files", "hf", "gettext")  # nlp.data.datamodule.TranslationDataModule
CORPUS = one_of(CORPORA)
# Byte-level BPE keeps the 256 byte symbols and the 4 special tokens <pad> <s> </s> <unk>.
VOCAB_SIZE = whole(256 + 4)
MAX_LEN = whole(2)  # one subword and </s>
MAX_TOKENS = or_auto(POSITIVE_INT)  # data.max_tokens: tokens of a training batch
PAD_TO_MULTIPLE = or_auto(POSITIVE_INT)
# ``data.pad_to_multiple=auto``: lengths rounded up to 8 give an epoch a few dozen batch shapes
# instead of hundreds, so a CPU's bf16 kernels (oneDNN builds and caches one per shape) and a GPU's
# (tensor cores; ``compile=true``) keep reusing the ones they have.
AUTO_PAD_MULTIPLE = 8
MAX_WORDS = 64  # the most words a side of a gettext pair may have (nlp.data.gettext)
JOIN_WORDS = Check(
    f"a whole number in 0..{MAX_WORDS} (0: one message per pair)",
    lambda v: NON_NEGATIVE_INT.test(v) and v <= MAX_WORDS,
)


def pad_multiple(pad_to_multiple: int | str) -> int:
    """The multiple that ``data.pad_to_multiple`` pads to: ``auto`` is :data:`AUTO_PAD_MULTIPLE`."""
    return AUTO_PAD_MULTIPLE if pad_to_multiple == AUTO else int(pad_to_multiple)
