"""Suite-wide settings: no test reaches the network, and torch uses one intra-op thread."""

import os
from collections.abc import Iterator

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """The models under test are tiny: a second thread buys nothing, and where the cores are
    shared a spinning thread pool slows such steps down by an order of magnitude."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
