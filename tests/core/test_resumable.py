"""Training batches that follow the training epoch, shard over processes and resume inside an
epoch on exactly the batches not yet trained."""

from __future__ import annotations

import pytest

from core.data.resumable import ResumableLoader, ShuffledBatchSampler
from core.errors import InputError


def test_the_loader_follows_the_training_epoch_and_resumes_inside_it() -> None:
    epoch, trained = [0], [0]
    loader = ResumableLoader(list(range(40)), batch_sampler=ShuffledBatchSampler(40, 4, seed=3), position=lambda: (epoch[0], trained[0]))
    first = [batch.tolist() for batch in loader]
    epoch[0] = 1  # what the Trainer's loop says, without any set_epoch call
    second = [batch.tolist() for batch in loader]
    assert first != second and sorted(i for batch in second for i in batch) == list(range(40))

    trained[0] = 3
    assert loader.state_dict() == {"epoch": 1, "batches": 3, "replicas": 1, "shard": 10}
    resumed = ResumableLoader(list(range(40)), batch_sampler=ShuffledBatchSampler(40, 4, seed=3), position=lambda: (epoch[0], 0))
    resumed.load_state_dict(loader.state_dict())
    assert [batch.tolist() for batch in resumed] == second[3:]
    assert [batch.tolist() for batch in resumed] == second  # the skip applies to that epoch's first pass only


def test_ranks_split_each_epoch_into_full_batches() -> None:
    ranks = [ShuffledBatchSampler(50, 8, seed=1, num_replicas=2, rank=rank) for rank in (0, 1)]
    shards = [list(sampler) for sampler in ranks]
    assert [len(shard) for shard in shards] == [3, 3] and all(len(batch) == 8 for shard in shards for batch in shard)
    seen = [i for shard in shards for batch in shard for i in batch]
    assert len(set(seen)) == 48 and len(seen) == 48  # 6 full batches of 50 images, each image at most once
    assert list(ShuffledBatchSampler(10, 4, shuffle=False, drop_last=False)) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    with pytest.raises(ValueError, match="rank 2 is outside"):
        ShuffledBatchSampler(10, 2, num_replicas=2, rank=2)


def test_an_epoch_of_fewer_batches_than_processes_gives_every_process_the_same_steps() -> None:
    ranks = [ShuffledBatchSampler(12, 4, seed=1, num_replicas=8, rank=rank) for rank in range(8)]
    shards = [list(sampler) for sampler in ranks]
    assert [len(shard) for shard in shards] == [1] * 8  # 3 batches, repeated to 8
    assert sorted(i for shard in shards[:3] for batch in shard for i in batch) == list(range(12))


def test_a_resume_on_another_number_of_processes_is_refused_inside_an_epoch_and_taken_at_its_end() -> None:
    def loader(replicas: int, trained: int) -> ResumableLoader:
        sampler = ShuffledBatchSampler(40, 4, seed=3, num_replicas=replicas, rank=0)
        return ResumableLoader(list(range(40)), batch_sampler=sampler, position=lambda: (0, trained))

    inside = loader(2, trained=3).state_dict()  # 3 of each process's 5 batches
    with pytest.raises(InputError, match=r"written by 2 data-parallel process\(es\) inside an epoch .* resume on 2"):
        loader(4, trained=0).load_state_dict(inside)
    resumed = loader(4, trained=0)
    resumed.load_state_dict(loader(2, trained=5).state_dict())  # the epoch was over
    assert list(resumed) == []  # nothing of epoch 0 is left
    same = loader(2, trained=0)
    same.load_state_dict(inside)
    assert len(list(same)) == 2
