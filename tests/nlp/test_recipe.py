"""Dropout and label smoothing sized to the planned passes over the corpus (``model.dropout: auto``,
``module.label_smoothing: auto``, :mod:`nlp.recipe`): the rules, and real runs that follow their plan."""

from __future__ import annotations

import math
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader

import core
from core.training.plan.budget import TrainingBudget
from core.training.runner import train
from nlp import recipe
from nlp.data.tokenizer import SubwordTokenizer
from nlp.module import TranslationModule
from nlp.recipe import FULL_DROPOUT, FULL_EPOCHS, FULL_SMOOTHING, MIN_DROPOUT, START_EPOCHS, dropout, label_smoothing
from tests.nlp.conftest import nlp_config
from tests.nlp.test_module import TINY, toy_batch


def test_no_dropout_for_a_few_passes_the_full_rate_for_many() -> None:
    assert [dropout(epochs) for epochs in (0.0, 1.0, START_EPOCHS)] == [0.0, 0.0, 0.0]
    assert dropout(FULL_EPOCHS) == dropout(100.0) == FULL_DROPOUT
    between = math.sqrt(START_EPOCHS * FULL_EPOCHS)  # halfway in log(passes)
    assert dropout(between, in_force=FULL_DROPOUT) == pytest.approx(FULL_DROPOUT / 2)
    lengths = [1, 3, 4, 6, 8, 10, 30]
    assert all(dropout(short) <= dropout(long) for short, long in zip(lengths, lengths[1:]))
    assert dropout(float("nan")) == 0.0  # a plan of unknown length


def test_the_dropout_switches_on_at_its_minimum_and_then_stays_on() -> None:
    assert MIN_DROPOUT == FULL_DROPOUT / 2
    assert dropout(4.0) == 0.0 < dropout(4.0, in_force=MIN_DROPOUT) < MIN_DROPOUT  # the ramp, once on
    assert dropout(6.0) >= MIN_DROPOUT  # past the ramp's midpoint (about 5.5 passes) it switches on
    assert dropout(START_EPOCHS, in_force=MIN_DROPOUT) == 0.0  # none for a few passes, on or not


@pytest.mark.parametrize(("epochs", "expected"), [(2, 0.0), (12, FULL_DROPOUT)])
def test_a_run_sizes_its_dropout_to_its_planned_passes(
    tmp_path: Path, epochs: int, expected: float, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = nlp_config(
        tmp_path, "data=toy", "model=transformer_tiny", "model.dropout=auto", f"trainer.max_epochs={epochs}",
        "trainer.num_sanity_val_steps=0", "trainer.limit_val_batches=1", "trainer.limit_test_batches=1",
        "trainer.check_val_every_n_epoch=100", "module.beam_size=1",
    )
    with caplog.at_level("INFO"):
        train(cfg)
    assert f"dropout {expected:.3g} for {epochs:.3g} planned passes over the corpus (model.dropout=auto)" in caplog.text


def dropout_rates(module: TranslationModule) -> set[float]:
    return {layer.p for layer in module.net.modules() if isinstance(layer, torch.nn.Dropout)}


def test_the_dropout_layers_follow_the_plan(toy_tokenizer: SubwordTokenizer) -> None:
    module = TranslationModule(model={**TINY, "dropout": "auto"}, tokenizer=toy_tokenizer.to_json())
    assert dropout_rates(module) == {FULL_DROPOUT}  # built at the full rate, as a checkpoint rebuilds it
    batch = toy_batch(toy_tokenizer)
    loader = DataLoader([batch], batch_size=None)
    trainer = pl.Trainer(
        max_epochs=7, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
    )
    trainer.fit(module, loader)
    (rate,) = dropout_rates(module)
    assert rate == pytest.approx(dropout(7.0)) and MIN_DROPOUT < rate < FULL_DROPOUT


def test_an_activation_dropout_of_its_own_stays_while_the_auto_dropout_follows_the_plan(
    toy_tokenizer: SubwordTokenizer,
) -> None:
    module = TranslationModule(model={**TINY, "dropout": "auto", "activation_dropout": 0.0}, tokenizer=toy_tokenizer.to_json())
    feed_forwards = [layer for layer in module.net.modules() if isinstance(layer, core.FeedForward)]
    assert len(feed_forwards) == 2  # one encoder and one decoder layer
    module.set_dropout(0.07)
    assert {ffn.drop1.p for ffn in feed_forwards} == {0.0}
    assert dropout_rates(module) == {0.0, 0.07}  # the sublayer outputs, attention projections and embeddings
    following = TranslationModule(model={**TINY, "dropout": "auto", "activation_dropout": None}, tokenizer=toy_tokenizer.to_json())
    following.set_dropout(0.07)
    assert dropout_rates(following) == {0.07}


def test_a_time_budget_decides_its_dropout_at_an_epoch_start_not_from_its_first_plan(
    toy_tokenizer: SubwordTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recipe, "START_EPOCHS", 1e-3)  # any plan asks for the full rate, whatever this machine's pace
    monkeypatch.setattr(recipe, "FULL_EPOCHS", 2e-3)
    module = TranslationModule(model={**TINY, "dropout": "auto"}, tokenizer=toy_tokenizer.to_json())
    seen: list[tuple[int, bool, set[float]]] = []

    class Watch(pl.Callback):
        def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: object) -> None:
            budget = next(callback for callback in trainer.callbacks if isinstance(callback, TrainingBudget))
            seen.append((trainer.current_epoch, budget.plan is not None, dropout_rates(module)))

    trainer = pl.Trainer(
        max_time={"seconds": 4}, max_epochs=1000, limit_val_batches=0, accelerator="cpu", logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        callbacks=[TrainingBudget(max_warmup_fraction=0.3, measure_steps=2, refine_every_n_steps=5), Watch()],
    )
    trainer.fit(module, DataLoader([toy_batch(toy_tokenizer)] * 8, batch_size=None))
    first_epoch = [(planned, rates) for epoch, planned, rates in seen if epoch == 0]
    assert any(planned for planned, _ in first_epoch)  # planned inside the first epoch
    assert all(rates == {0.0} for _, rates in first_epoch)  # but no dropout before the next epoch
    later = [rates for epoch, _, rates in seen if epoch > 0]
    assert later and all(rates == {FULL_DROPOUT} for rates in later)


def test_a_resumed_time_budget_keeps_the_rates_in_force_until_it_is_planned(
    toy_tokenizer: SubwordTokenizer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The checkpoint keeps the auto dropout and label smoothing in force; a resumed time budget,
    unplanned while it measures its pace, trains with them instead of starting over from none."""
    monkeypatch.setattr(recipe, "START_EPOCHS", 1e-3)  # any plan asks for the full rates
    monkeypatch.setattr(recipe, "FULL_EPOCHS", 2e-3)
    settings = dict(model={**TINY, "dropout": "auto"}, tokenizer=toy_tokenizer.to_json(), label_smoothing="auto")
    loader = DataLoader([toy_batch(toy_tokenizer)] * 4, batch_size=None)
    quiet = dict(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                 enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0)
    first = pl.Trainer(max_epochs=2, **quiet)
    first.fit(TranslationModule(**settings), loader)
    first.save_checkpoint(tmp_path / "last.ckpt")
    module, seen = TranslationModule(**settings), []

    class Watch(pl.Callback):
        def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: object) -> None:
            budget = next(callback for callback in trainer.callbacks if isinstance(callback, TrainingBudget))
            seen.append((budget.plan is not None, dropout_rates(module), module.smoothing(training=True)))

    budget = TrainingBudget(max_warmup_fraction=0.3, measure_steps=2, refine_every_n_steps=5)
    resumed = pl.Trainer(max_time={"seconds": 3}, max_epochs=1000, callbacks=[budget, Watch()], **quiet)
    resumed.fit(module, loader, ckpt_path=tmp_path / "last.ckpt")
    unplanned = [(rates, smoothing) for planned, rates, smoothing in seen if not planned]
    assert unplanned and all(rates == {FULL_DROPOUT} and smoothing == FULL_SMOOTHING for rates, smoothing in unplanned)


def test_no_label_smoothing_for_a_few_passes_the_papers_for_many_and_no_threshold() -> None:
    assert [label_smoothing(epochs) for epochs in (0.0, 1.0, START_EPOCHS, float("nan"))] == [0.0] * 4
    assert label_smoothing(FULL_EPOCHS) == label_smoothing(100.0) == FULL_SMOOTHING == 0.1  # Section 5.4
    between = math.sqrt(START_EPOCHS * FULL_EPOCHS)  # halfway in log(passes)
    assert label_smoothing(between) == pytest.approx(FULL_SMOOTHING / 2)
    assert 0.0 < label_smoothing(4.0) < MIN_DROPOUT and dropout(4.0) == 0.0  # on at once, where the dropout waits for its minimum


def test_auto_label_smoothing_follows_the_plan_in_training_and_evaluates_at_the_full_rate(
    toy_tokenizer: SubwordTokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    module = TranslationModule(model=TINY, tokenizer=toy_tokenizer.to_json(), label_smoothing="auto")
    batch = toy_batch(toy_tokenizer)
    logits, targets = module.predictions(batch)
    assert module.smoothing(training=True) == 0.0  # no plan yet: hard targets
    torch.testing.assert_close(module.loss(batch)[0], torch.nn.functional.cross_entropy(logits, targets))
    trainer = pl.Trainer(
        max_epochs=7, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
    )
    with caplog.at_level("INFO"):
        trainer.fit(module, DataLoader([batch], batch_size=None))
    planned = label_smoothing(7.0)
    assert 0.0 < planned < FULL_SMOOTHING and module.smoothing(training=True) == pytest.approx(planned)
    assert f"label smoothing {planned:.3g} for 7 planned passes over the corpus (module.label_smoothing=auto)" in caplog.text
    assert module.smoothing(training=False) == FULL_SMOOTHING  # val/loss and test/loss compare across epochs and runs
    with torch.no_grad():
        logits, targets = module.predictions(batch)
        expected = torch.nn.functional.cross_entropy(logits, targets, label_smoothing=planned)
        torch.testing.assert_close(module.loss(batch)[0], expected)


@pytest.mark.parametrize(
    ("model", "regularization"),
    [("transformer_mini", ("auto", "auto")), ("transformer_small", (0.3, 0.1)), ("transformer_base", (0.1, 0.1))],
)
def test_the_preset_of_cpu_budgets_sizes_dropout_and_smoothing_to_the_plan_the_larger_keep_fixed_rates(
    tmp_path: Path, model: str, regularization: tuple[object, object]
) -> None:
    cfg = nlp_config(tmp_path, "data=toy", f"model={model}")
    assert (cfg.model.dropout, cfg.module.label_smoothing) == regularization
