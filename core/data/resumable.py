"""Training batches that a run resumed mid-epoch continues exactly: the same order, no batch
repeated or skipped.

An epoch's batches are a function of (seed, epoch) alone, the same list on every data-parallel
process, which takes every ``num_replicas``-th batch of it (as ``DistributedSampler`` shards
samples). The checkpoint stores where the epoch stood, (epoch, batches trained), through the
loader's ``state_dict`` (Lightning saves and restores it with the fit loop's state), and the
resumed sampler skips those batches of that epoch. Data order and schedule position are then
exact; random augmentation and dropout draw anew, as in any resumed run. Each process's
position is one of its own shard, so a run stopped inside an epoch resumes on as many processes
as it ran on (another number is refused: it would train some of the epoch's batches twice, or
skip some); at an epoch's end any number resumes it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from torch.utils.data import DataLoader, Sampler

from core.errors import InputError


class EpochBatchSampler(Sampler[list[int]]):
    """Batches of example indices per epoch, sharded over ``num_replicas`` processes and
    resumable inside an epoch; subclasses say how an epoch is cut (:meth:`epoch_batches`).

    The epoch's list is padded by repeating its first batches (the whole list again, as often as
    needed, when it holds fewer batches than processes), so that every process runs the same
    number of steps (DDP needs it).
    """

    def __init__(self, seed: int = 0, num_replicas: int = 1, rank: int = 0) -> None:
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is outside 0..{num_replicas - 1}")
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.epoch_source: Callable[[], int] | None = None
        self.cached: tuple[int, list[np.ndarray]] | None = None
        self.resume: tuple[int, int] | None = None  # (epoch, batches of it already trained)

    def epoch_batches(self, rng: np.random.Generator) -> list[np.ndarray]:
        """Every batch of the epoch whose generator is ``rng`` (the same on every process)."""
        raise NotImplementedError

    def set_epoch(self, epoch: int) -> None:
        """Select the shuffling of ``epoch`` (the same on every rank). Lightning calls
        ``set_epoch`` only on a loader's sampler, never on its batch sampler: under a Trainer,
        :class:`ResumableLoader` makes the sampler read the epoch itself (``epoch_source``)."""
        self.epoch = epoch

    def resume_at(self, epoch: int, batches_done: int) -> None:
        """Start ``epoch`` after its first ``batches_done`` batches (a run resumed mid-epoch)."""
        self.resume = (epoch, batches_done)

    def batches(self) -> list[np.ndarray]:
        """This process's batches of the current epoch (computed once per epoch)."""
        if self.cached is None or self.cached[0] != self.epoch:
            batches = self.epoch_batches(np.random.default_rng([self.seed, self.epoch]))
            missing = -len(batches) % self.num_replicas
            batches += [batches[i % len(batches)] for i in range(missing)] if batches else []
            self.cached = (self.epoch, batches[self.rank :: self.num_replicas])
        return self.cached[1]

    def __iter__(self) -> Iterator[list[int]]:
        # A generator: the epoch is read at the first batch, once the Trainer has moved to it (it
        # may create the iterator before restoring the epoch of a resumed run).
        if self.epoch_source is not None:
            self.epoch = self.epoch_source()
        skip = 0
        if self.resume is not None and self.resume[0] == self.epoch:
            skip, self.resume = self.resume[1], None
        for batch in self.batches()[skip:]:
            yield batch.tolist()

    def __len__(self) -> int:
        return len(self.batches())


class ShuffledBatchSampler(EpochBatchSampler):
    """A fresh permutation of ``size`` examples each epoch (or the identity without ``shuffle``),
    cut into batches of ``batch_size``; ``drop_last`` drops the partial batch at the end."""

    def __init__(
        self,
        size: int,
        batch_size: int,
        shuffle: bool = True,
        drop_last: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
    ) -> None:
        super().__init__(seed, num_replicas, rank)
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.size = size
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last

    def epoch_batches(self, rng: np.random.Generator) -> list[np.ndarray]:
        order = rng.permutation(self.size) if self.shuffle else np.arange(self.size)
        end = self.size - self.size % self.batch_size if self.drop_last else self.size
        return [order[start : start + self.batch_size] for start in range(0, end, self.batch_size)]


class ResumableLoader(DataLoader):
    """A ``DataLoader`` over an :class:`EpochBatchSampler` that follows the training epoch and
    whose checkpointed state is its position in the epoch: ``position()`` gives (epoch, batches
    trained); each epoch's iteration shuffles for ``position()``'s epoch, and loading the state
    makes the sampler skip the batches already trained (Lightning saves and loads this state with
    the fit loop's)."""

    def __init__(self, *args: Any, position: Callable[[], tuple[int, int]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(self.batch_sampler, EpochBatchSampler):
            raise TypeError(f"ResumableLoader needs an EpochBatchSampler, got {type(self.batch_sampler).__name__}")
        self.position = position
        self.batch_sampler.epoch_source = lambda: position()[0]

    def state_dict(self) -> dict[str, int]:
        """Where the epoch stands on this process, its shard's length and the number of shards."""
        assert isinstance(self.batch_sampler, EpochBatchSampler)
        epoch, batches = self.position()
        self.batch_sampler.epoch = epoch  # the shard's length is this epoch's
        return {"epoch": epoch, "batches": batches, "replicas": self.batch_sampler.num_replicas, "shard": len(self.batch_sampler)}

    def load_state_dict(self, state_dict: dict[str, int]) -> None:
        """Skip the batches of the checkpoint's epoch trained before it was written; refuse
        another number of processes in the middle of an epoch (an :class:`InputError`)."""
        assert isinstance(self.batch_sampler, EpochBatchSampler)
        epoch, batches = state_dict["epoch"], state_dict["batches"]
        replicas = state_dict.get("replicas", self.batch_sampler.num_replicas)
        if replicas != self.batch_sampler.num_replicas:
            if batches < state_dict.get("shard", sys.maxsize):
                raise InputError(
                    f"the checkpoint was written by {replicas} data-parallel process(es) inside an epoch ({batches} of its "
                    f"{state_dict['shard']} batches each), and this run has {self.batch_sampler.num_replicas}; resume on "
                    f"{replicas} (trainer.devices x trainer.num_nodes), or from a checkpoint written at an epoch's end"
                )
            batches = sys.maxsize  # the epoch was over: none of its batches is left, on any number of processes
        self.batch_sampler.resume_at(epoch, batches)


def trained_position(trainer: Any) -> tuple[int, int]:
    """The training epoch of ``trainer`` (a Lightning Trainer) and how many of its batches this
    process has trained: what a :class:`ResumableLoader` stores."""
    return trainer.current_epoch, trainer.fit_loop.epoch_loop.batch_progress.current.processed
