"""One intra-op thread per test: the tiny models here gain nothing from more, and on a shared
machine extra OpenMP threads spin against other processes."""

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def single_thread() -> Iterator[None]:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
