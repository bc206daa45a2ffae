"""Positional encodings against the paper's formula."""

import math

import pytest
import torch

import core


def test_sinusoidal_table_is_the_papers_formula() -> None:
    length, dim = 50, 6
    table = core.sinusoidal_table(length, dim)
    assert table[0].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    for pos in range(length):
        for i in range(dim // 2):
            angle = pos / 10000 ** (2 * i / dim)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_sinusoidal_encoding_adds_at_an_offset_and_refuses_overflow() -> None:
    encoding = core.SinusoidalPositionalEncoding(8, max_len=10)
    x = torch.zeros(1, 3, 8)
    torch.testing.assert_close(encoding(x, offset=4)[0], core.sinusoidal_table(10, 8)[4:7])
    with pytest.raises(ValueError, match="exceed max_len 10"):
        encoding(torch.zeros(1, 11, 8))


def test_learned_embedding_adds_its_rows() -> None:
    embedding = core.LearnedPositionalEmbedding(5, 4)
    x = torch.ones(2, 3, 4)
    torch.testing.assert_close(embedding(x, offset=1), x + embedding.weight[1:4])


def test_sincos_2d_encodes_row_and_column() -> None:
    grid_h, grid_w, dim = 3, 4, 8
    table = core.sincos_2d(grid_h, grid_w, dim)
    assert table.shape == (12, 8)
    omega = [1.0, 1.0 / 100.0]  # 1 / 10000^(k / (dim / 4)) for k = 0, 1
    for row in range(grid_h):
        for col in range(grid_w):
            expected = (
                [math.sin(col * w) for w in omega]
                + [math.cos(col * w) for w in omega]
                + [math.sin(row * w) for w in omega]
                + [math.cos(row * w) for w in omega]
            )
            assert table[row * grid_w + col].tolist() == pytest.approx(expected, abs=1e-6)
    with pytest.raises(ValueError, match="dim=6 is not a multiple of 4.*set dim=8"):
        core.sincos_2d(2, 2, 6)
