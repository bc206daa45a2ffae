"""Suite-wide settings: no test reaches the network or the user's data cache, and torch uses one
intra-op thread."""

import os
import tempfile
from collections.abc import Iterator

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")  # logger=wandb and many_loggers never contact W&B
os.environ.setdefault("MPLBACKEND", "Agg")
# Prepared translation data goes to a fresh directory per test session, not the user's cache.
os.environ.setdefault("TRANSFORMER_TOOLKIT_CACHE", tempfile.mkdtemp(prefix="transformer-toolkit-cache-"))


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """The models under test are tiny: a second thread buys nothing, and where the cores are
    shared a spinning thread pool slows such steps down by an order of magnitude."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
