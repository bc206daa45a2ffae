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
    assert state["lr_lambdas"] == [{"requested_warmup": 5, "warmup_steps": 5, "total_steps": 50, "min_ratio": 0.0}]


def test_plan_caps_the_warmup_to_a_fraction_of_the_planned_steps() -> None:
    schedule = core.WarmupCosine(warmup_steps=100, total_steps=None, min_ratio=0.0)
    assert schedule(49) == pytest.approx(0.5)  # no plan yet: warming up toward step 100
    assert schedule.plan(300, max_warmup_fraction=0.1) is True
    assert (schedule.warmup_steps, schedule.total_steps) == (30, 300)
    assert schedule(29) == pytest.approx(1.0)
    assert schedule(300) == pytest.approx(0.0)
    assert schedule.plan(5000, max_warmup_fraction=0.1) is False  # 100 fits in 10% of 5000
    assert schedule.warmup_steps == 100


@pytest.mark.parametrize("schedule", [core.WarmupCosine(1000, None), core.InverseSqrt(1000)], ids=["cosine", "inverse sqrt"])
def test_a_longer_plan_does_not_take_the_rate_back_into_a_warmup_that_is_over(schedule: core.BudgetedSchedule) -> None:
    schedule.plan(100, max_warmup_fraction=0.3, step=20)  # warmup 30
    assert schedule(40) > 0.9
    schedule.plan(200, max_warmup_fraction=0.3, step=40)  # a time budget's estimate grew: 30% is 60 steps now
    assert schedule.warmup_steps == 30 and schedule(40) > 0.9  # not 41 / 60 of the peak
    schedule.plan(200, max_warmup_fraction=0.3, step=10)  # inside the warmup, it follows the plan
    assert schedule.warmup_steps == 60
    schedule.plan(100, max_warmup_fraction=0.3, step=10)  # warmup 30 again
    schedule.plan(200, max_warmup_fraction=0.3, step=29)  # its last step, already at the peak: over
    assert schedule.warmup_steps == 30


def test_inverse_sqrt_cooldown_ends_at_the_budget() -> None:
    warmup, total = 40, 1000
    schedule = core.InverseSqrt(warmup, total_steps=total, cooldown_fraction=0.2)
    for step in (0, 39, 40, 500, 799):  # before the cooldown: the paper's shape
        assert schedule(step) == pytest.approx(min((step + 1) / warmup, math.sqrt(warmup / (step + 1))))
    assert schedule(900) == pytest.approx(math.sqrt(warmup / 901) * 0.5)
    assert schedule(total) == 0.0
    assert core.InverseSqrt(warmup)(10**6) == pytest.approx(math.sqrt(warmup / (10**6 + 1)))


def test_inverse_sqrt_shortened_warmup_holds_the_peak_until_the_requested_warmup() -> None:
    schedule = core.InverseSqrt(warmup_steps=1000, total_steps=None, cooldown_fraction=0.2)
    assert schedule.plan(400, max_warmup_fraction=0.1) is True  # warmup 1000 -> 40
    assert schedule(19) == pytest.approx(0.5)  # rising over 40 steps
    assert schedule(39) == schedule(200) == schedule(300) == pytest.approx(1.0)  # held: 1000 is not reached
    assert schedule(399) == pytest.approx(1.0 / 80)  # the last 20% (80 steps) cool down to 0
    long = core.InverseSqrt(warmup_steps=1000, total_steps=None)
    long.plan(50_000, max_warmup_fraction=0.1)  # 1000 fits: the paper's schedule
    assert long(3999) == pytest.approx(math.sqrt(1000 / 4000))
    tiny = core.InverseSqrt(warmup_steps=1000, total_steps=None)
    tiny.plan(5, max_warmup_fraction=0.1)  # no room for any warmup: the peak from the first step
    assert tiny.warmup_steps == 0 and tiny(0) == 1.0
