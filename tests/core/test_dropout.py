"""core.dropout: inverted dropout (Srivastava et al. 2014) from bulk integer draws, checked against
the formula: kept elements scaled by 2**15 / (2**15 - k), the rest 0, each dropped with
probability k / 2**15, independently, and the expectation unchanged. The masks come from integer
operations on torch's seeded generator, so every check is exact and the same on any CPU."""

import math

import pytest
import torch
from torch import nn

import core
from core.dropout import LEVELS, dropout

COUNT = 1 << 18
DTYPES = [torch.bfloat16, torch.float16, torch.float32, torch.float64]


def dropped_levels(p: float) -> int:
    return round(p * LEVELS)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p", [0.05, 0.1, 0.5])
def test_kept_elements_are_scaled_and_the_rest_zero(dtype: torch.dtype, p: float) -> None:
    torch.manual_seed(0)
    x = torch.randn(64, 4096).to(dtype) + 10.0  # no zeros of its own
    y = dropout(x, p)
    assert y.dtype == dtype and y.shape == x.shape
    kept = y != 0
    scale = torch.tensor(LEVELS / (LEVELS - dropped_levels(p)), dtype=dtype)
    torch.testing.assert_close(y[kept], x[kept] * scale, rtol=0, atol=0)
    share = dropped_levels(p) / LEVELS
    sigma = math.sqrt(share * (1 - share) / x.numel())
    assert abs((~kept).double().mean().item() - share) < 5 * sigma


@pytest.mark.parametrize("p", [0.05, 0.5])
def test_the_expectation_is_unchanged(p: float) -> None:
    torch.manual_seed(1)
    y = dropout(torch.ones(COUNT, dtype=torch.float64), p)
    sigma = math.sqrt(p / (1 - p) / COUNT)  # the standard deviation of the mean of COUNT masks
    assert abs(y.mean().item() - 1.0) < 5 * sigma


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_the_four_elements_of_one_draw_are_independent(dtype: torch.dtype) -> None:
    """Four elements share one 64-bit draw, whatever their width; at p = 0.5 all four are dropped
    1/16 of the time, and each pair of them 1/4."""
    torch.manual_seed(2)
    dropped = (dropout(torch.ones(COUNT, dtype=dtype), 0.5) == 0).view(-1, 4).double()
    groups = dropped.shape[0]
    assert abs(dropped.prod(dim=1).mean().item() - 1 / 16) < 5 * math.sqrt(1 / 16 * 15 / 16 / groups)
    for i in range(3):
        both = (dropped[:, i] * dropped[:, i + 1]).mean().item()
        assert abs(both - 1 / 4) < 5 * math.sqrt(1 / 4 * 3 / 4 / groups)


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_draw_serves_four_elements_of_any_width(dtype: torch.dtype) -> None:
    """The generator moves on by one 64-bit draw per four elements: a float32 mask costs the draws
    of a bfloat16 one."""
    torch.manual_seed(7)
    dropout(torch.ones(4096, dtype=dtype), 0.1)
    after_mask = torch.empty(4, dtype=torch.int64).random_()
    torch.manual_seed(7)
    torch.empty(4096 // 4, dtype=torch.int64).random_()
    assert torch.equal(torch.empty(4, dtype=torch.int64).random_(), after_mask)


def test_the_gradient_is_the_mask() -> None:
    torch.manual_seed(3)
    x = torch.ones(1000, dtype=torch.float64, requires_grad=True)
    y = dropout(x, 0.3)
    y.backward(torch.full_like(y, 2.0))
    torch.testing.assert_close(x.grad, 2.0 * y.detach(), rtol=0, atol=0)


def test_the_same_seed_draws_the_same_mask() -> None:
    x = torch.ones(10_000, dtype=torch.bfloat16)
    torch.manual_seed(4)
    first = dropout(x, 0.1)
    torch.manual_seed(4)
    assert torch.equal(dropout(x, 0.1), first)
    assert not torch.equal(dropout(x, 0.1), first)


def test_evaluation_and_rate_zero_return_the_input_and_draw_nothing() -> None:
    x = torch.randn(8, 16)
    state = torch.random.get_rng_state()
    assert dropout(x, 0.5, training=False) is x
    assert dropout(x, 0.0) is x
    layer = core.Dropout(0.5).eval()
    assert layer(x) is x
    assert torch.equal(torch.random.get_rng_state(), state)


@pytest.mark.parametrize("p", [1.0, 1.0 - 1e-6])
def test_a_rate_that_rounds_to_one_drops_everything(p: float) -> None:
    torch.manual_seed(6)
    assert torch.equal(dropout(torch.ones(100), p), torch.zeros(100))


def test_inplace_writes_into_the_input() -> None:
    torch.manual_seed(5)
    x = torch.ones(4096)
    y = core.Dropout(0.25, inplace=True)(x)
    scale = torch.tensor(LEVELS / (LEVELS - dropped_levels(0.25)))
    assert y is x and set(x.unique().tolist()) == {0.0, scale.item()}


def test_the_layer_is_a_torch_dropout_and_follows_its_rate() -> None:
    """A module that sets ``p`` on every ``nn.Dropout`` (as ``model.dropout: auto`` does) reaches
    the blocks' layers, and a new rate takes effect at once."""
    layer = core.FeedForward(8, 16, dropout=0.0)
    found = [module for module in layer.modules() if isinstance(module, nn.Dropout)]
    assert len(found) == 2 and all(isinstance(module, core.Dropout) for module in found)
    x = torch.ones(2, 8)
    assert torch.equal(found[1](x), x)
    found[1].p = 1.0
    assert torch.equal(found[1](x), torch.zeros(2, 8))
    with pytest.raises(ValueError, match="between 0 and 1"):
        core.Dropout(1.5)
