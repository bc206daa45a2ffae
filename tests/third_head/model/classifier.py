"""A sentence classifier from core blocks: word embeddings, sinusoidal positions, an Encoder,
the mean over the words, a linear head."""

from __future__ import annotations

from torch import Tensor, nn

import core
from tests.third_head.data.sentences import PAD


class SentenceClassifier(nn.Module):
    """Word ids -> class logits; ``vocab_size`` counts the padding and unknown ids."""

    def __init__(self, vocab_size: int, num_classes: int, dim: int = 16, depth: int = 1, num_heads: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=PAD)
        self.positions = core.SinusoidalPositionalEncoding(dim)
        self.encoder = core.Encoder(dim, depth, num_heads, norm_first=True, mlp_ratio=2.0)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, ids: Tensor) -> Tensor:
        """``ids`` [B, S] -> logits [B, classes]."""
        padding = ids == PAD  # [B, S], True = padding
        x = self.encoder(self.positions(self.embed(ids)), key_padding_mask=padding)  # [B, S, dim]
        words = (~padding).unsqueeze(-1)  # [B, S, 1]
        return self.head((x * words).sum(dim=1) / words.sum(dim=1))
