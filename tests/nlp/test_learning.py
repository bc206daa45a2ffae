"""Can the model learn, and only by legitimate means? A reverse task through the whole training
stack, and a target it may not predict without peeking at the future."""

from __future__ import annotations

import json
import math
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

import core
from core.training.runner import train
from nlp.module import load_translator
from tests.nlp.conftest import nlp_config, reverse_pairs, write_lines


def reverse_task_config(tmp_path: Path) -> DictConfig:
    train_pairs, val_pairs = reverse_pairs(1500, seed=0), reverse_pairs(60, seed=1)
    write_lines(tmp_path / "train.tsv", [f"{s}\t{t}" for s, t in train_pairs])
    write_lines(tmp_path / "val.tsv", [f"{s}\t{t}" for s, t in val_pairs])
    return nlp_config(
        tmp_path / "run",
        "data=files",
        f"data.train={tmp_path / 'train.tsv'}",
        f"data.val={tmp_path / 'val.tsv'}",
        "data.vocab_size=300",
        "data.min_frequency=1",
        "data.max_tokens=256",
        "model=transformer_tiny",
        "model.dropout=0.0",
        "module.lr=3e-3",
        "module.warmup_steps=50",
        "module.bleu_every_n_epochs=100",
        "module.beam_size=2",
        "trainer.max_epochs=15",
        "trainer.precision=32-true",  # the same arithmetic on every CPU, bf16-capable or not
    )


@pytest.mark.slow
def test_reverse_task_is_learned_to_exact_match(tmp_path: Path) -> None:
    cfg = reverse_task_config(tmp_path)
    train(cfg)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["test/bleu"] > 95.0
    checkpoint = next((tmp_path / "run" / "checkpoints").glob("best-*.ckpt"))
    translator = load_translator(checkpoint)
    val_pairs = reverse_pairs(60, seed=1)
    outputs = translator.translate([source for source, _ in val_pairs])
    exact = sum(output == target for output, (_, target) in zip(outputs, val_pairs)) / len(val_pairs)
    assert exact >= 0.95


def fit_random_targets(shift: bool) -> float:
    """Train a tiny model for 100 steps on fresh uniform random targets (8 symbols, length 6)
    with a constant source; return the mean cross entropy of the last 20 steps."""
    from tests.nlp.conftest import tiny_model

    model = tiny_model(vocab_size=12).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    source = torch.full((64, 3), 5)
    losses = []
    for _ in range(100):
        targets = torch.randint(3, 11, (64, 6))
        decoder_input = torch.cat([torch.full((64, 1), model.bos_id), targets[:, :-1]], dim=1) if shift else targets
        logits = model(source, decoder_input)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    return sum(losses[-20:]) / 20


def test_decoder_cannot_see_the_future_tokens_it_predicts() -> None:
    """Fresh random targets cannot be predicted better than chance (log 8 nats per token) when
    the decoder input is shifted right, as in training. The same model given the unshifted
    targets (a leak) drives the loss to ~0, so the first result is the causal mask at work, not
    a model too weak to fit."""
    pl.seed_everything(0)
    chance = math.log(8)
    assert fit_random_targets(shift=True) > 0.97 * chance
    assert fit_random_targets(shift=False) < 0.1


@pytest.mark.slow
def test_two_process_ddp_splits_the_token_budget_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # read by the spawned processes
    cfg = nlp_config(
        tmp_path, "data=toy", "model=transformer_tiny", "trainer.devices=2", "trainer.strategy=ddp_spawn",
        "trainer.max_epochs=1", "trainer.num_sanity_val_steps=0",
    )
    data = instantiate(cfg.data)
    data.setup("fit")
    single_process_batches = len(data.train_dataloader())
    train(cfg)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert {"val/bleu", "test/bleu", "train_tokens_per_second"} <= metrics.keys()
    steps = core.load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")["global_step"]
    assert steps == math.ceil(single_process_batches / 2)
