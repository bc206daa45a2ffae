"""Seq2SeqTransformer: wiring checked against torch.nn.Transformer, masks, tying, errors."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from nlp.model import Seq2SeqTransformer
from tests.core.reference import copy_from_torch_layer
from tests.nlp.conftest import tiny_model


def paper_positional_encoding(length: int, dim: int) -> torch.Tensor:
    """Section 3.5, written out: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)."""
    table = torch.zeros(length, dim)
    for pos in range(length):
        for i in range(0, dim, 2):
            table[pos, i] = math.sin(pos / 10000 ** (i / dim))
            table[pos, i + 1] = math.cos(pos / 10000 ** (i / dim))
    return table


def padded_batch() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    src = torch.randint(3, 40, (3, 7))
    src[1, 4:] = 0  # padding
    tgt = torch.randint(3, 40, (3, 5))
    tgt[:, 0] = 1
    return src, tgt


def test_matches_torch_transformer_with_the_same_weights() -> None:
    ours = tiny_model(norm_first=True)
    theirs = nn.Transformer(
        d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=64,
        dropout=0.0, batch_first=True, norm_first=True,
    ).eval()
    for mine, reference in zip(ours.encoder.layers, theirs.encoder.layers):
        copy_from_torch_layer(mine, reference, encoder=True)
    for mine, reference in zip(ours.decoder.layers, theirs.decoder.layers):
        copy_from_torch_layer(mine, reference, encoder=False)
    ours.encoder.norm.load_state_dict(theirs.encoder.norm.state_dict())
    ours.decoder.norm.load_state_dict(theirs.decoder.norm.state_dict())

    src, tgt = padded_batch()
    embedding = ours.src_embed.weight.detach()
    pe = paper_positional_encoding(7, 32)
    src_x = embedding[src] * math.sqrt(32) + pe[: src.shape[1]]
    tgt_x = embedding[tgt] * math.sqrt(32) + pe[: tgt.shape[1]]
    src_pad = src == 0
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
    with torch.no_grad():
        hidden = theirs(src_x, tgt_x, tgt_mask=causal, src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad)
        expected = hidden @ embedding.T  # output projection tied to the embedding
        actual = ours(src, tgt)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-4)


def test_output_projection_is_tied_to_the_target_embedding() -> None:
    shared = tiny_model(share_embeddings=True)
    assert shared.output.weight is shared.tgt_embed.weight is shared.src_embed.weight
    separate = Seq2SeqTransformer(30, 50, dim=16, num_heads=2, encoder_depth=1, decoder_depth=1, share_embeddings=False)
    assert separate.output.weight is separate.tgt_embed.weight
    assert separate.src_embed.weight.shape == (30, 16)
    assert separate(torch.randint(3, 30, (2, 4)), torch.randint(3, 50, (2, 3))).shape == (2, 3, 50)


def test_predicted_positions_are_the_rows_of_the_full_logits() -> None:
    model = tiny_model()
    src, tgt = padded_batch()
    tgt[2, 3:] = 0  # a shorter target, right-padded
    predicted = tgt.ne(0)
    with torch.no_grad():
        full, rows = model(src, tgt), model(src, tgt, predicted)
    assert rows.shape == (13, 40)
    torch.testing.assert_close(rows, full[predicted], atol=1e-6, rtol=1e-6)


def test_a_target_position_sees_no_later_target_token() -> None:
    model = tiny_model()
    src, tgt = padded_batch()
    changed = tgt.clone()
    changed[:, 3] = (changed[:, 3] + 7) % 37 + 3
    with torch.no_grad():
        before, after = model(src, tgt), model(src, changed)
    torch.testing.assert_close(before[:, :3], after[:, :3], atol=0, rtol=0)
    assert not torch.allclose(before[:, 3:], after[:, 3:])


def test_source_padding_changes_nothing() -> None:
    model = tiny_model()
    src, tgt = padded_batch()
    longer = torch.cat([src, torch.zeros(3, 4, dtype=torch.long)], dim=1)
    with torch.no_grad():
        torch.testing.assert_close(model(longer, tgt), model(src, tgt), atol=1e-5, rtol=1e-5)
        # ...while the padded row's real tokens do matter.
        edited = src.clone()
        edited[1, 2] = (edited[1, 2] + 5) % 37 + 3
        assert not torch.allclose(model(edited, tgt)[1], model(src, tgt)[1])


def test_sequence_longer_than_max_len_is_a_clear_error() -> None:
    model = tiny_model(max_len=8)
    with pytest.raises(ValueError, match="exceed max_len 8"):
        model.encode(torch.randint(3, 40, (1, 9)))
    with pytest.raises(ValueError, match="integer tensor"):
        model.encode(torch.rand(1, 4))


def test_shared_embeddings_need_one_vocabulary() -> None:
    with pytest.raises(ValueError, match="share_embeddings needs one vocabulary"):
        Seq2SeqTransformer(30, 50, dim=16, num_heads=2, share_embeddings=True)


def test_embeddings_are_scaled_to_unit_variance() -> None:
    model = Seq2SeqTransformer(1000, 1000, dim=64, num_heads=4, encoder_depth=1, decoder_depth=1)
    scaled = model.src_embed.weight[1:] * math.sqrt(64)
    assert scaled.std().item() == pytest.approx(1.0, abs=0.05)
    assert model.src_embed.weight[0].abs().sum() == 0  # <pad>
