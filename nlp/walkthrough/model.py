"""The worked example's model: a word-level vocabulary and a one-layer Transformer (Figure 1, N = 1)
built from the core blocks, small enough to follow every number by hand."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import core
from nlp.data.batching import pad_batch

PAD, START, END = "<pad>", "<start>", "<end>"
SPECIALS = (PAD, START, END)


class Vocabulary:
    """Word-level vocabulary: the special tokens, then each word of the corpus in order of first
    appearance, so the ids read like the sentences."""

    def __init__(self, sentences: list[str]) -> None:
        words = [word for sentence in sentences for word in sentence.split()]
        self.words: list[str] = list(dict.fromkeys([*SPECIALS, *words]))
        self.index: dict[str, int] = {word: i for i, word in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, sentence: str) -> list[int]:
        """Ids of the whitespace-separated words of ``sentence``."""
        unknown = [word for word in sentence.split() if word not in self.index]
        if unknown:
            known = self.words[len(SPECIALS) :]
            raise ValueError(f"words {unknown} are not in the vocabulary; use words of the corpus: {known}")
        return [self.index[word] for word in sentence.split()]

    @property
    def pad_id(self) -> int:
        """Id of ``<pad>``."""
        return self.index[PAD]

    @property
    def start_id(self) -> int:
        """Id of ``<start>``, the first decoder input."""
        return self.index[START]

    @property
    def end_id(self) -> int:
        """Id of ``<end>``, which ends a sentence."""
        return self.index[END]


class TinyTransformer(nn.Module):
    """Figure 1 with one encoder layer and one decoder layer: shared word embeddings plus the
    sinusoidal positions (Section 3.5), post-norm ``core.EncoderLayer`` / ``core.DecoderLayer``
    with ReLU and LayerNorm eps 1e-6, and a linear layer from d_model to the vocabulary.

    Unlike the paper (Section 3.4) the embeddings are not multiplied by sqrt(d_model) and the
    linear layers have no biases, so each step is a plain matrix product as in the worked example.

    Args:
        vocab_size: number of words, special tokens included.
        dim: model width d_model.
        num_heads: attention heads h.
        head_dim: width d_k of each head's Q, K and V.
        ffn_dim: inner width d_ff of the feed-forward layer.
        max_len: longest sentence the positional table covers.
    """

    def __init__(
        self,
        vocab_size: int,
        dim: int = 6,
        num_heads: int = 2,
        head_dim: int = 4,
        ffn_dim: int = 8,
        max_len: int = 64,
    ) -> None:
        super().__init__()
        layer_args = dict(ffn_dim=ffn_dim, activation="relu", norm_eps=1e-6, bias=False, head_dim=head_dim)
        self.embedding = nn.Embedding(vocab_size, dim)
        self.positional = core.SinusoidalPositionalEncoding(dim, max_len)
        self.encoder = core.EncoderLayer(dim, num_heads, **layer_args)
        self.decoder = core.DecoderLayer(dim, num_heads, **layer_args)
        self.output = nn.Linear(dim, vocab_size, bias=False)

    def uniform_init(self, seed: int) -> None:
        """Every weight matrix uniform in [0, 1) from ``seed``, as in the worked example; the
        LayerNorm gains stay 1 and their biases 0."""
        generator = torch.Generator().manual_seed(seed)
        for parameter in self.parameters():
            if parameter.dim() > 1:
                nn.init.uniform_(parameter, 0.0, 1.0, generator=generator)

    def encode(self, source: Tensor, source_padding: Tensor | None = None) -> Tensor:
        """Source ids [B, S] -> encoder output [B, S, dim]."""
        return self.encoder(self.positional(self.embedding(source)), key_padding_mask=source_padding)

    def decode(
        self,
        target: Tensor,
        memory: Tensor,
        target_padding: Tensor | None = None,
        source_padding: Tensor | None = None,
    ) -> Tensor:
        """Decoder input ids [B, T] and encoder output [B, S, dim] -> logits [B, T, vocab]."""
        hidden = self.decoder(
            self.positional(self.embedding(target)),
            memory,
            tgt_key_padding_mask=target_padding,
            memory_key_padding_mask=source_padding,
        )
        return self.output(hidden)

    def forward(self, source: Tensor, target: Tensor) -> Tensor:
        """Source ids [B, S] and decoder input ids [B, T] -> logits [B, T, vocab]."""
        return self.decode(target, self.encode(source))


def build_model(
    vocab: Vocabulary, dim: int, num_heads: int, head_dim: int, ffn_dim: int, seed: int
) -> TinyTransformer:
    """The tiny model with seeded uniform [0, 1) weights."""
    model = TinyTransformer(len(vocab), dim, num_heads, head_dim, ffn_dim)
    model.uniform_init(seed)
    return model.eval()


def fit(
    model: TinyTransformer, vocab: Vocabulary, pairs: list[tuple[str, str]], steps: int, lr: float
) -> float:
    """Teacher-forced training on all ``pairs`` as one batch with Adam; returns the last loss.

    The decoder reads ``<start> y_1 .. y_n`` and learns to predict ``y_1 .. y_n <end>``.
    """
    source = pad_batch([vocab.encode(src) for src, _ in pairs], vocab.pad_id)
    targets = [vocab.encode(tgt) for _, tgt in pairs]
    decoder_input = pad_batch([[vocab.start_id, *ids] for ids in targets], vocab.pad_id)
    labels = pad_batch([[*ids, vocab.end_id] for ids in targets], vocab.pad_id)
    source_padding = core.padding_mask_from_ids(source, vocab.pad_id)
    target_padding = core.padding_mask_from_ids(decoder_input, vocab.pad_id)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    loss = torch.tensor(float("nan"))
    for _ in range(steps):
        memory = model.encode(source, source_padding)
        logits = model.decode(decoder_input, memory, target_padding, source_padding)
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=vocab.pad_id)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    return loss.item()


@torch.no_grad()
def greedy_words(
    model: TinyTransformer, vocab: Vocabulary, source: Tensor, max_len: int
) -> list[tuple[str, float]]:
    """Feed each most likely word back in until ``<end>`` or ``max_len`` words; returns each
    chosen word with its probability. ``source`` is [1, S].

    The loop of the worked example, one sentence and no cache, so every step can be printed;
    :func:`nlp.decoding.greedy_decode` is the batched, cached decoder of the real models."""
    memory = model.encode(source)
    decoded = [vocab.start_id]
    chosen: list[tuple[str, float]] = []
    while len(chosen) < max_len and decoded[-1] != vocab.end_id:
        probabilities = model.decode(torch.tensor([decoded]), memory)[0, -1].softmax(-1)
        word_id = int(probabilities.argmax())
        decoded.append(word_id)
        chosen.append((vocab.words[word_id], float(probabilities[word_id])))
    return chosen
