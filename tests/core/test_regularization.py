"""Word dropout: whole token embeddings dropped at the rate asked, the kept ones scaled, and only
in training; in the translation model, before the positional encoding."""

import math

import pytest
import torch

import core
from nlp.model import Seq2SeqTransformer


def test_word_dropout_drops_whole_tokens_at_its_rate_and_scales_the_rest() -> None:
    torch.manual_seed(0)
    p, batch, length, dim = 0.25, 64, 50, 8
    layer = core.WordDropout(p)
    x = torch.randn(batch, length, dim, requires_grad=True)
    y = layer(x)
    dropped = (y == 0).all(dim=-1)  # [B, T]
    kept = ~dropped
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))  # kept tokens whole, scaled by 1 / (1 - p)
    tokens = batch * length
    assert abs(int(dropped.sum()) - p * tokens) < 5 * math.sqrt(tokens * p * (1 - p))  # within 5 sigma
    assert 0 < int(dropped.any(dim=1).sum()) and bool(dropped.all(dim=1).logical_not().all())  # per token, not per sentence
    y.sum().backward()  # the gradient is the mask: 0 for dropped tokens, the scale for kept ones
    torch.testing.assert_close(x.grad, kept.unsqueeze(-1).expand_as(x) / (1 - p))


def test_word_dropout_is_the_identity_in_evaluation_and_at_rate_zero() -> None:
    x = torch.randn(4, 6, 8)
    assert core.WordDropout(0.5).eval()(x) is x
    assert core.WordDropout(0.0)(x) is x
    with pytest.raises(ValueError, match=r"word dropout probability must be a number in \[0, 1\), got 1"):
        core.WordDropout(1.0)


def test_the_translation_model_drops_words_before_their_positions() -> None:
    """A dropped token's input to the first layer is its positional encoding alone, on both sides."""
    torch.manual_seed(0)
    model = Seq2SeqTransformer(40, 40, dim=16, num_heads=2, encoder_depth=1, decoder_depth=1, ffn_dim=32, dropout=0.0, word_dropout=0.5)
    tokens = torch.randint(3, 40, (8, 12))
    positions = model.pos_encoding.table[:12]
    for embedding in (model.src_embed, model.tgt_embed):
        model.train()
        out = model.embed(embedding, tokens)
        dropped = torch.isclose(out, positions.expand_as(out)).all(dim=-1)
        assert 0.3 < dropped.float().mean() < 0.7
        scaled = embedding(tokens) * math.sqrt(16) / 0.5 + positions
        torch.testing.assert_close(out[~dropped], scaled[~dropped])
        model.eval()
        torch.testing.assert_close(model.embed(embedding, tokens), embedding(tokens) * math.sqrt(16) + positions)
