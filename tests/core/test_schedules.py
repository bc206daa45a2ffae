"""Learning-rate schedules against their formulas."""

import math

import pytest
import torch

import core


def test_inverse_sqrt_is_the_papers_rate() -> None:
    dim, warmup = 512, 4000
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam([parameter], lr=(dim * warmup) ** -0.5)
    scheduler = core.inverse_sqrt(optimizer, warmup)
    for step in range(1, 12001):
        paper = dim**-0.5 * min(step**-0.5, step * warmup**-1.5)
        if step in (1, 100, 3999, 4000, 4001, 12000):
            assert optimizer.param_groups[0]["lr"] == pytest.approx(paper, rel=1e-9)
        optimizer.step()
        scheduler.step()


def test_warmup_cosine_rises_then_decays_to_the_floor() -> None:
    schedule = core.WarmupCosine(warmup_steps=10, total_steps=110, min_ratio=0.1)
    assert schedule(0) == pytest.approx(0.1)
    assert schedule(9) == pytest.approx(1.0)
    assert schedule(60) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert schedule(110) == pytest.approx(0.1)
    assert schedule(500) == pytest.approx(0.1)


def test_scheduler_state_is_plain_data() -> None:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    state = core.warmup_cosine(optimizer, 5, 50).state_dict()
    assert state["lr_lambdas"] == [{"warmup_steps": 5, "total_steps": 50, "min_ratio": 0.0}]
