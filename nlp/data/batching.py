"""Length-bucketed batches by a token budget, as in fairseq's ``--max-tokens``.

Sentences of similar length share a batch, so little compute goes to padding, and a batch holds
as many sentences as fit in ``max_tokens`` padded tokens: many short ones or a few long ones.
With ``multiple`` > 1 (8 by default: the kernels of a CPU's oneDNN and a GPU's tensor cores, and
``compile=true``, meet a bounded set of shapes) the model's inputs are padded to a multiple of it,
sources and teacher-forced targets alike, and the budget counts the padded lengths: an epoch then
yields a few dozen shapes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from core.constraints import POSITIVE_INT
from core.data.resumable import EpochBatchSampler

Example = tuple[Sequence[int], Sequence[int]]  # (source ids, target ids): lists or numpy arrays


def token_budget_batches(lengths: Sequence[int] | np.ndarray, max_tokens: int, order: Sequence[int] | np.ndarray) -> list[np.ndarray]:
    """Cut ``order`` (indices sorted by increasing length) into consecutive batches whose padded
    size ``len(batch) * max(length in batch)`` stays within ``max_tokens``: each batch takes as
    many of the next indices as fit (its last one is its longest).

    A single example longer than the budget still gets a batch of its own.
    """
    order = np.asarray(order, dtype=np.int64)
    sizes = np.asarray(lengths, dtype=np.int64)[order]
    batches: list[np.ndarray] = []
    start = 0
    while start < len(order):
        window = sizes[start : start + max(1, max_tokens // max(1, int(sizes[start])))]
        # Lengths ascend, so (k + 1) * window[k] ascends too: the batch is the prefix that fits.
        fits = int(np.count_nonzero(np.arange(1, len(window) + 1) * window <= max_tokens))
        batches.append(order[start : start + max(1, fits)])
        start += max(1, fits)
    return batches


class TokenBudgetBatchSampler(EpochBatchSampler):
    """Yields lists of example indices, each within a token budget.

    Training (``shuffle=True``): each epoch sorts by length with random tie-breaking, packs, then
    shuffles the order of the batches. With several processes (DDP) every rank gets the batches
    ``rank, rank + num_replicas, ...`` of the same list (the seed and epoch are shared), padded so
    that every rank runs the same number of steps, and a run resumed mid-epoch continues on the
    same batches (:class:`core.data.resumable.EpochBatchSampler`). Lengths and batches are
    numpy arrays: a corpus of millions of sentences costs a few bytes per sentence.

    Args:
        lengths: size of each example (longer of source and target, in tokens).
        max_tokens: padded-token budget per batch.
        shuffle: randomize batches each epoch (the epoch comes from :meth:`set_epoch`, or under a
            Trainer from the training loop, :class:`core.data.resumable.ResumableLoader`).
        seed: base seed of the shuffling.
        num_replicas: number of data-parallel processes.
        rank: this process's index among them.
        multiple: lengths are counted rounded up to a multiple of this (the collator's padding).
    """

    def __init__(
        self,
        lengths: Sequence[int] | np.ndarray,
        max_tokens: int,
        shuffle: bool = False,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
        multiple: int = 1,
    ) -> None:
        super().__init__(seed, num_replicas, rank)
        POSITIVE_INT.require(max_tokens, "max_tokens")
        self.lengths = round_up(np.asarray(lengths, dtype=np.int64), multiple)
        self.max_tokens = max_tokens
        self.shuffle = shuffle

    def epoch_batches(self, rng: np.random.Generator) -> list[np.ndarray]:
        indices = rng.permutation(len(self.lengths)) if self.shuffle else np.arange(len(self.lengths))
        # A stable sort keeps the shuffled order among equal lengths: random buckets each epoch.
        indices = indices[np.argsort(self.lengths[indices], kind="stable")]
        batches = token_budget_batches(self.lengths, self.max_tokens, indices)
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches


def round_up(length: np.ndarray | int, multiple: int) -> np.ndarray | int:
    """``length`` rounded up to a multiple of ``multiple``."""
    return -(-length // multiple) * multiple


def pad_batch(
    sequences: Sequence[Sequence[int] | np.ndarray],
    pad_id: int,
    multiple: int = 1,
    extra: int = 0,
    limit: int | None = None,
) -> Tensor:
    """Right-pad token id sequences (lists or numpy arrays) to one LongTensor [B, L], with ``L -
    extra`` the longest length less ``extra`` rounded up to a multiple of ``multiple``, but not
    past ``limit`` (the positions the model has) unless the longest sequence is."""
    longest = max(len(sequence) for sequence in sequences)
    width = int(round_up(max(longest - extra, 1), multiple)) + extra
    if limit is not None:
        width = max(longest, min(width, limit + extra))
    out = np.full((len(sequences), width), pad_id, dtype=np.int64)
    for row, sequence in enumerate(sequences):
        out[row, : len(sequence)] = sequence
    return torch.from_numpy(out)


class Collator:
    """Turns examples ``(source_ids, target_ids)`` into a batch dict: ``source`` [B, S] (ending in
    ``</s>``) and ``target`` [B, T] (``<s> ... </s>``), right-padded so that ``S`` and ``T - 1``
    (the teacher-forced length) are multiples of ``multiple``, up to ``max_len`` positions."""

    def __init__(self, pad_id: int, multiple: int = 1, max_len: int | None = None) -> None:
        self.pad_id = pad_id
        self.multiple = multiple
        self.max_len = max_len

    def __call__(self, examples: list[Example]) -> dict[str, Tensor]:
        sources = [source for source, _ in examples]
        targets = [target for _, target in examples]
        return {
            "source": pad_batch(sources, self.pad_id, self.multiple, limit=self.max_len),
            "target": pad_batch(targets, self.pad_id, self.multiple, extra=1, limit=self.max_len),
        }
