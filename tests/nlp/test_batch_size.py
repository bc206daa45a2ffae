"""``data.max_tokens=auto``: the batch follows the run's budget (epochs or wall-clock time)."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from core.files.checkpoints import load_checkpoint
from core.training.runner import train
from nlp.data import batch_size
from nlp.data.batch_size import MAX_TOKENS, MIN_TOKENS, rule, tokens_for_budget
from tests.nlp.conftest import nlp_config, reverse_pairs, write_lines


def test_the_rule_is_the_square_root_of_an_eighth_of_the_budget_within_bounds() -> None:
    for budget in (2e7, 6e7, 5.4e8):
        tokens = tokens_for_budget(budget)
        assert tokens % 64 == 0 and math.sqrt(budget / 8) - 64 < tokens <= math.sqrt(budget / 8)
        assert budget / tokens == pytest.approx(8 * tokens, rel=0.1)  # steps = 8 x the batch
    for budget in (0, 1e3, 6e5, 4e6, 8e6):  # CPU budgets of minutes to an hour: the floor
        assert tokens_for_budget(budget) == MIN_TOKENS == 1024
    assert tokens_for_budget(1e12) == MAX_TOKENS
    assert tokens_for_budget(2e7) < tokens_for_budget(6e7)  # a longer budget, larger batches


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    pairs = reverse_pairs(300, seed=0)
    return write_lines(tmp_path / "pairs.tsv", [f"{source}\t{target}" for source, target in pairs])


def files_config(tmp_path: Path, corpus: Path, *overrides: str):
    return nlp_config(
        tmp_path,
        "data=files",
        f"data.train={corpus}",
        f"data.val={corpus}",
        "data.vocab_size=300",
        "model=transformer_mini",
        "model.dim=32",
        "model.ffn_dim=64",
        "model.encoder_depth=1",
        "model.decoder_depth=1",
        "trainer.num_sanity_val_steps=0",
        "trainer.limit_val_batches=1",
        "trainer.limit_test_batches=1",
        "module.beam_size=1",
        *overrides,
    )


def test_under_data_parallelism_each_process_takes_its_share_of_the_batch() -> None:
    budget = 8 * 8192**2  # the budget whose batch is 8,192 tokens
    assert rule(1).for_budget(budget) == 8192
    assert rule(4).for_budget(budget) == 2048  # the job's batch stays 8,192 tokens
    assert rule(16).for_budget(budget) == MIN_TOKENS  # what one device does well, at least


def test_the_mini_preset_sizes_its_batches_from_the_epochs(
    tmp_path: Path, corpus: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = files_config(tmp_path, corpus, "trainer.max_epochs=2")
    assert cfg.data.max_tokens == "auto"
    with caplog.at_level("INFO"):
        train(cfg)
    # 300 pairs of 3-7 letters: about 2,100 tokens an epoch, so 2 epochs -> sqrt(4,200 / 8) < 1024.
    assert "data.max_tokens=auto: batches of 1024 tokens, max(1024, sqrt(" in caplog.text
    assert "2 epochs of" in caplog.text
    checkpoint = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    assert checkpoint["TranslationDataModule"] == {"train_max_tokens": 1024}


def test_a_time_budget_measures_the_pace_and_a_resumed_run_keeps_the_choice(
    tmp_path: Path, corpus: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    paces = []
    measure = batch_size.measure_pace

    def recorded(module, trainer, batch):  # type: ignore[no-untyped-def]
        before = torch.random.get_rng_state()
        pace = measure(module, trainer, batch)
        assert torch.equal(before, torch.random.get_rng_state())  # training randomness untouched
        assert all(p.grad is None for p in module.parameters())
        paces.append(pace)
        return pace

    monkeypatch.setattr(batch_size, "measure_pace", recorded)
    cfg = files_config(tmp_path / "a", corpus, "trainer.max_epochs=1000", "++trainer.max_time=00:00:00:03")
    with caplog.at_level("INFO"):
        train(cfg)
    assert paces and all(pace > 0 for pace in paces)
    expected = tokens_for_budget(paces[-1] * 3)
    assert f"data.max_tokens=auto: batches of {expected} tokens" in caplog.text
    assert "tokens/s (measured on" in caplog.text

    paces.clear()
    resumed = files_config(
        tmp_path / "b", corpus, "trainer.max_epochs=1000", "++trainer.max_time=00:00:00:06",
        f"ckpt_path={tmp_path / 'a' / 'checkpoints' / 'last.ckpt'}",
    )
    train(resumed)
    assert not paces  # the interrupted run's choice is taken from its checkpoint
    checkpoint = load_checkpoint(tmp_path / "b" / "checkpoints" / "last.ckpt")
    assert checkpoint["TranslationDataModule"] == {"train_max_tokens": expected}


def test_the_rule_counts_the_lengths_as_the_batch_sampler_does(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The epoch's tokens and the probe batch are counted padded to multiples of 8, as the
    sampler packs batches and the collator pads them."""
    from hydra.utils import instantiate

    from nlp.data import datamodule
    from nlp.data.batching import TokenBudgetBatchSampler

    seen: list[np.ndarray] = []
    monkeypatch.setattr(datamodule, "auto_max_tokens", lambda trainer, module, lengths, make_batch: seen.append(lengths) or 1024)
    data = instantiate(files_config(tmp_path, corpus).data)
    data.setup("fit")
    assert data.choose_train_batch(SimpleNamespace(lightning_module=None)) == 1024
    raw = data.examples["train"].lengths()
    counted = TokenBudgetBatchSampler(raw, 1024, multiple=data.pad_multiple).lengths
    assert data.pad_multiple == 8 and (raw % 8).any()  # the corpus has lengths that padding changes
    assert np.array_equal(seen[0], counted)


def test_max_steps_alone_keeps_fairseqs_usual_budget(tmp_path: Path, corpus: Path, caplog: pytest.LogCaptureFixture) -> None:
    cfg = files_config(tmp_path, corpus, "trainer.max_epochs=-1", "trainer.max_steps=2")
    with caplog.at_level("INFO"):
        train(cfg)
    assert "batches of 4096 tokens, no epoch or time budget (max_steps alone)" in caplog.text


def test_a_number_is_kept_and_a_bad_word_is_refused(tmp_path: Path, corpus: Path) -> None:
    from hydra.utils import instantiate

    from core.errors import InputError
    from core.training.commands.config_check import validate_config

    fixed = instantiate(files_config(tmp_path, corpus, "data.max_tokens=1000").data)
    assert fixed.train_batch_size() == 1000
    with pytest.raises(InputError, match="data.max_tokens must be a whole number of at least 1, or auto"):
        validate_config(files_config(tmp_path, corpus, "data.max_tokens=big"))
