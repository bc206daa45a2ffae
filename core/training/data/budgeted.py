"""A LightningDataModule whose training batch is a number or ``auto`` (sized by the head's rule
from the run's budget, :mod:`core.training.plan.batch_rule`), kept in checkpoints, and whose
training loader a run resumed mid-epoch continues exactly (:mod:`core.data.resumable`).

Both heads' datamodules derive from :class:`BudgetedDataModule`; each says what its batch counts
(``images``, ``tokens``) through :meth:`~BudgetedDataModule.choose_train_batch` and the
constructor's arguments.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from torch.utils.data import DataLoader, Dataset

from core.data.resumable import ResumableLoader, trained_position
from core.training.plan.batch_rule import ChosenBatch


class BudgetedDataModule(pl.LightningDataModule):
    """The batch-rule and resume plumbing of a head's datamodule.

    Args:
        batch_setting: the config's training batch, a number or ``auto``.
        state_key: the checkpoint key of an ``auto`` run's choice (``train_batch_size``).
        without_trainer: the batch of ``auto`` before a trainer with a module is attached.
    """

    def __init__(self, batch_setting: int | str, state_key: str, without_trainer: int) -> None:
        super().__init__()
        self.train_batch = ChosenBatch(batch_setting, state_key)
        self.batch_without_trainer = without_trainer

    def choose_train_batch(self, trainer: pl.Trainer) -> int:
        """The head's rule for ``trainer``'s budget (called once, for ``auto``)."""
        raise NotImplementedError

    def train_batch_size(self) -> int:
        """The training batch: the configured number, or for ``auto`` the choice of
        :meth:`choose_train_batch` for the attached trainer's budget (made once and kept in
        checkpoints); ``without_trainer`` before a trainer is attached."""
        return self.train_batch.resolve(self.trainer, self.choose_train_batch, self.batch_without_trainer)

    def shards(self) -> tuple[int, int]:
        """(processes, this process's rank) of the attached trainer; (1, 0) without one."""
        return (self.trainer.world_size, self.trainer.global_rank) if self.trainer is not None else (1, 0)

    def training_loader(self, dataset: Dataset, **options: Any) -> DataLoader:
        """A loader over ``dataset`` with ``options`` (its ``batch_sampler`` seeded by epoch) that
        a run resumed mid-epoch continues where it stopped; a plain loader without a trainer.
        Under ``trainer.overfit_batches`` (``debug=overfit``) the sampler does not shuffle, so the
        first batches, the ones Lightning trains on, are the same every epoch."""
        sampler = options.get("batch_sampler")
        if self.trainer is not None and self.trainer.overfit_batches > 0 and hasattr(sampler, "shuffle"):
            sampler.shuffle = False
        if self.trainer is not None:
            return ResumableLoader(dataset, position=lambda: trained_position(self.trainer), **options)
        return DataLoader(dataset, **options)

    def state_dict(self) -> dict[str, Any]:
        """The resolved batch of an ``auto`` run, so that a resumed run batches alike."""
        return self.train_batch.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take the batch an interrupted ``auto`` run chose."""
        self.train_batch.load_state_dict(state_dict)
