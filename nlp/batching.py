"""Length-bucketed batches by a token budget, as in fairseq's ``--max-tokens``.

Sentences of similar length share a batch, so little compute goes to padding, and a batch holds
as many sentences as fit in ``max_tokens`` padded tokens: many short ones or a few long ones.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import torch
from torch import Tensor
from torch.utils.data import Sampler

Example = tuple[list[int], list[int]]


def token_budget_batches(lengths: Sequence[int], max_tokens: int, order: Sequence[int]) -> list[list[int]]:
    """Cut ``order`` (indices sorted by length) into consecutive batches whose padded size
    ``len(batch) * max(length in batch)`` stays within ``max_tokens``.

    A single example longer than the budget still gets a batch of its own.
    """
    batches: list[list[int]] = []
    batch: list[int] = []
    longest = 0
    for index in order:
        longest_if_added = max(longest, lengths[index])
        if batch and longest_if_added * (len(batch) + 1) > max_tokens:
            batches.append(batch)
            batch, longest_if_added = [], lengths[index]
        batch.append(index)
        longest = longest_if_added
    if batch:
        batches.append(batch)
    return batches


class TokenBudgetBatchSampler(Sampler[list[int]]):
    """Yields lists of example indices, each within a token budget.

    Training (``shuffle=True``): each epoch sorts by length with random tie-breaking, packs, then
    shuffles the order of the batches. With several processes (DDP) every rank gets the batches
    ``rank, rank + num_replicas, ...`` of the same list (the seed and epoch are shared), and the list
    is padded by repeating batches so that every rank runs the same number of steps.

    Args:
        lengths: size of each example (longer of source and target, in tokens).
        max_tokens: padded-token budget per batch.
        shuffle: randomize batches each epoch (call :meth:`set_epoch`, which Lightning does).
        seed: base seed of the shuffling.
        num_replicas: number of data-parallel processes.
        rank: this process's index among them.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        max_tokens: int,
        shuffle: bool = False,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
    ) -> None:
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is outside 0..{num_replicas - 1}")
        self.lengths = list(lengths)
        self.max_tokens = max_tokens
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the shuffling of ``epoch`` (the same on every rank)."""
        self.epoch = epoch

    def batches(self) -> list[list[int]]:
        """All batches of this epoch for this rank."""
        rng = random.Random(self.seed + self.epoch)
        indices = list(range(len(self.lengths)))
        if self.shuffle:
            rng.shuffle(indices)
        # A stable sort keeps the shuffled order among equal lengths: random buckets each epoch.
        indices.sort(key=self.lengths.__getitem__)
        batches = token_budget_batches(self.lengths, self.max_tokens, indices)
        if self.shuffle:
            rng.shuffle(batches)
        remainder = len(batches) % self.num_replicas
        if remainder:
            batches += batches[: self.num_replicas - remainder]
        return batches[self.rank :: self.num_replicas]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches())

    def __len__(self) -> int:
        return len(self.batches())


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int) -> Tensor:
    """Right-pad token id lists to one LongTensor [B, max_len]."""
    longest = max(len(sequence) for sequence in sequences)
    out = torch.full((len(sequences), longest), pad_id, dtype=torch.long)
    for row, sequence in enumerate(sequences):
        out[row, : len(sequence)] = torch.as_tensor(sequence, dtype=torch.long)
    return out


class Collator:
    """Turns examples ``(source_ids, target_ids)`` into a batch dict: ``source`` [B, S] (ending in
    ``</s>``) and ``target`` [B, T] (``<s> ... </s>``), right-padded."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, examples: list[Example]) -> dict[str, Tensor]:
        return {
            "source": pad_batch([source for source, _ in examples], self.pad_id),
            "target": pad_batch([target for _, target in examples], self.pad_id),
        }
