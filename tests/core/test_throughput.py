"""TrainThroughput through a real Trainer, on a clock that only loading and validation advance:
loading counts, validation does not."""

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from core.training.callbacks import throughput
from tests.core.tiny_task import TinyModule


class Clock:
    """A stand-in for ``time.perf_counter`` that moves only when told to."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class ClockedDataset(Dataset):
    """Random sequences that each take ``seconds`` of the clock to load."""

    def __init__(self, clock: Clock, size: int, seconds: float) -> None:
        self.clock, self.size, self.seconds = clock, size, seconds

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.clock.now += self.seconds
        return torch.randn(6, 4), torch.tensor(index % 2)


def test_the_rate_counts_loading_and_leaves_out_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    # 6 batches of 4 samples per epoch, 0.08 s of loading each: 50 samples/s. A validation (twice
    # an epoch, mid-epoch too) takes 1 s: counted, it would bring the rate under 12 samples/s;
    # loading left out, the rate would have no time to divide by.
    clock = Clock()
    monkeypatch.setattr(throughput, "perf_counter", clock)
    train = DataLoader(ClockedDataset(clock, 24, 0.02), batch_size=4)
    val = DataLoader(ClockedDataset(clock, 2, 0.5), batch_size=2)
    trainer = pl.Trainer(
        max_epochs=2, val_check_interval=3, num_sanity_val_steps=0,
        callbacks=[throughput.TrainThroughput(skip_batches=0)],
        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )
    trainer.fit(TinyModule({"in_dim": 4, "dim": 16, "depth": 1, "num_heads": 2}, num_classes=2), train, val)
    assert float(trainer.callback_metrics["train/samples_per_second"]) == pytest.approx(50.0)
