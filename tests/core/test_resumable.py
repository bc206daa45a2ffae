"""Training batches that follow the training epoch, shard over processes and resume inside an
epoch on exactly the batches not yet trained."""

from __future__ import annotations

import pytest

from core.data.resumable import ResumableLoader, ShuffledBatchSampler


def test_the_loader_follows_the_training_epoch_and_resumes_inside_it() -> None:
    epoch, trained = [0], [0]
    loader = ResumableLoader(list(range(40)), batch_sampler=ShuffledBatchSampler(40, 4, seed=3), position=lambda: (epoch[0], trained[0]))
    first = [batch.tolist() for batch in loader]
    epoch[0] = 1  # what the Trainer's loop says, without any set_epoch call
    second = [batch.tolist() for batch in loader]
    assert first != second and sorted(i for batch in second for i in batch) == list(range(40))

    trained[0] = 3
    assert loader.state_dict() == {"epoch": 1, "batches": 3}
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
