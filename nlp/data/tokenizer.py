"""Joint source+target subword tokenizer: byte-level BPE (Sennrich et al. 2016) from Hugging Face
``tokenizers``.

Byte-level pre-tokenization (as in GPT-2) makes detokenization exact: ``decode(encode(text)) ==
text`` for any string, so BLEU is computed on the same text a user would read, and no character
is ever ``<unk>``. The special tokens' strings in a text (``<s>`` of HTML, say) are text, encoded
as their characters: only the data pipeline puts the control tokens in. The tokenizer travels with a checkpoint as its JSON string.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from core.files.atomic import atomic_path
from nlp.constraints import VOCAB_SIZE

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK]


class SubwordTokenizer:
    """Text <-> token ids, with the special tokens a seq2seq model needs.

    ``encode`` returns bare subword ids; the data pipeline adds ``</s>`` to sources and
    ``<s> ... </s>`` around targets.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        missing = [token for token in SPECIAL_TOKENS if tokenizer.token_to_id(token) is None]
        if missing:
            raise ValueError(f"tokenizer lacks the special tokens {missing}; train it with train_tokenizer()")
        tokenizer.encode_special_tokens = True  # "</s>" in a text is its characters, not the end of it
        self.tokenizer = tokenizer
        self.pad_id = tokenizer.token_to_id(PAD)
        self.bos_id = tokenizer.token_to_id(BOS)
        self.eos_id = tokenizer.token_to_id(EOS)
        self.unk_id = tokenizer.token_to_id(UNK)

    @classmethod
    def from_json(cls, json_string: str) -> SubwordTokenizer:
        """Rebuild from :meth:`to_json` output (what a checkpoint stores)."""
        return cls(Tokenizer.from_str(json_string))

    @classmethod
    def from_file(cls, path: str | Path) -> SubwordTokenizer:
        """Load a ``tokenizer.json`` written by :meth:`save`."""
        return cls(Tokenizer.from_file(str(path)))

    def to_json(self) -> str:
        """The whole tokenizer (vocabulary, merges, special tokens) as a JSON string."""
        return self.tokenizer.to_str()

    def save(self, path: str | Path) -> None:
        """Write the tokenizer as ``tokenizer.json``, readable by :meth:`from_file` (atomically: a
        reader never sees half of it, and a full disk is one clear error)."""
        with atomic_path(path) as tmp:
            self.tokenizer.save(str(tmp))

    @property
    def vocab_size(self) -> int:
        """Number of tokens, special tokens included."""
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        """Subword ids of ``text``, without ``<s>`` or ``</s>``."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Subword ids of each text (as :meth:`encode`), encoded in parallel."""
        return [encoding.ids for encoding in self.tokenizer.encode_batch_fast(texts, add_special_tokens=False)]

    def tokens(self, text: str) -> list[str]:
        """The subword strings of ``text`` (for inspection)."""
        return self.tokenizer.encode(text, add_special_tokens=False).tokens

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text, stopping at the first ``</s>`` and dropping ``<s>`` and ``<pad>``."""
        kept: list[int] = []
        for token_id in ids:
            if token_id == self.eos_id:
                break
            if token_id not in (self.bos_id, self.pad_id):
                kept.append(int(token_id))
        return self.tokenizer.decode(kept, skip_special_tokens=False)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 8000, min_frequency: int = 2) -> SubwordTokenizer:
    """Learn a byte-level BPE vocabulary of at most ``vocab_size`` entries from ``texts``.

    The 256 byte symbols and the 4 special tokens are always in the vocabulary, so
    ``vocab_size`` must be at least 260; merges stop early when no pair occurs
    ``min_frequency`` times.
    """
    VOCAB_SIZE.require(vocab_size, "vocab_size")
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    return SubwordTokenizer(tokenizer)
