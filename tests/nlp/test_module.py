"""TranslationModule: the loss, optimizer and schedule against the paper's formulas."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch

from core.errors import InputError
from core.training.runner import train
from nlp.module import TranslationModule
from nlp.data.tokenizer import SubwordTokenizer
from tests.nlp.conftest import nlp_config

TINY = {"dim": 32, "num_heads": 4, "encoder_depth": 1, "decoder_depth": 1, "ffn_dim": 64, "dropout": 0.0, "max_len": 32}


@pytest.fixture
def module(toy_tokenizer: SubwordTokenizer) -> TranslationModule:
    torch.manual_seed(0)
    return TranslationModule(model=TINY, tokenizer=toy_tokenizer.to_json(), label_smoothing=0.1, warmup_steps=10, lr=1e-3)


def toy_batch(tokenizer: SubwordTokenizer) -> dict[str, torch.Tensor]:
    from nlp.data.batching import Collator

    pairs = [("winter is coming", "the north remembers"), ("when you play the game of thrones", "you win or you die")]
    examples = [
        (tokenizer.encode(s) + [tokenizer.eos_id], [tokenizer.bos_id, *tokenizer.encode(t), tokenizer.eos_id])
        for s, t in pairs
    ]
    return Collator(tokenizer.pad_id)(examples)


def smoothed_cross_entropy(log_probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Section 5.4 per position: the cross entropy against the one-hot target mixed with a uniform
    distribution, weight eps = 0.1."""
    vocab = log_probs.shape[-1]
    smoothed = 0.9 * torch.nn.functional.one_hot(labels, vocab) + 0.1 / vocab
    return -(smoothed * log_probs).sum(-1)


def test_loss_is_label_smoothed_cross_entropy_over_real_tokens(module: TranslationModule, toy_tokenizer: SubwordTokenizer) -> None:
    batch = toy_batch(toy_tokenizer)
    loss, tokens = module.loss(batch)
    with torch.no_grad():
        log_probs = module.net(batch["source"], batch["target"][:, :-1]).log_softmax(-1)
    labels = batch["target"][:, 1:]
    real = labels.ne(toy_tokenizer.pad_id)
    expected = smoothed_cross_entropy(log_probs, labels)[real].mean()
    assert tokens == int(real.sum()) == module.count_items(batch) == 3 + 1 + 5 + 1
    torch.testing.assert_close(loss.detach(), expected)


def test_validation_logs_the_unsmoothed_nll_and_its_perplexity_over_all_tokens(
    module: TranslationModule, toy_tokenizer: SubwordTokenizer
) -> None:
    # Two batches of 10 and 2 target tokens: a mean of the batches' means would weigh them alike.
    long = toy_batch(toy_tokenizer)
    short = {key: value[:1, :3] if key == "target" else value[:1] for key, value in long.items()}
    short["target"][0, -1] = toy_tokenizer.eos_id
    batches = [long, short]
    trainer = pl.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.validate(module, torch.utils.data.DataLoader(batches, batch_size=None))
    negative_log_likelihoods, smoothed_losses = [], []
    with torch.no_grad():
        for batch in batches:
            log_probs = module.net(batch["source"], batch["target"][:, :-1]).log_softmax(-1)
            labels = batch["target"][:, 1:]
            real = labels.ne(toy_tokenizer.pad_id)
            picked = -log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
            negative_log_likelihoods.append(picked[real])
            smoothed_losses.append(smoothed_cross_entropy(log_probs, labels)[real])
    every = torch.cat(negative_log_likelihoods)
    assert [len(part) for part in negative_log_likelihoods] == [10, 2]
    metrics = trainer.callback_metrics
    torch.testing.assert_close(metrics["val/nll"], every.mean())
    # exp turns the NLL's absolute rounding (float32 sums in another order) into relative error.
    torch.testing.assert_close(metrics["val/ppl"], every.mean().exp(), rtol=1e-5, atol=0.0)
    # The logged loss is the smoothed one, each batch's mean weighed by its tokens.
    torch.testing.assert_close(metrics["val/loss"], torch.cat(smoothed_losses).mean())
    assert abs(float(metrics["val/loss"]) - float(metrics["val/nll"])) > 1e-3
    # A model cast to 16 bits keeps its totals in float64: the same figure, to bfloat16's rounding of the weights.
    in_bf16 = pl.Trainer(precision="bf16-true", logger=False, enable_progress_bar=False, enable_model_summary=False)
    in_bf16.validate(module, torch.utils.data.DataLoader(batches, batch_size=None))
    assert float(in_bf16.callback_metrics["val/nll"]) == pytest.approx(float(every.mean()), rel=0.02)


def test_adam_and_inverse_square_root_schedule(module: TranslationModule) -> None:
    module.trainer = pl.Trainer(max_epochs=-1, max_steps=1000, logger=False)  # cooldown from step 800
    config = module.configure_optimizers()
    optimizer, scheduler = config["optimizer"], config["lr_scheduler"]["scheduler"]
    assert config["lr_scheduler"]["interval"] == "step"
    assert isinstance(optimizer, torch.optim.Adam)
    assert optimizer.defaults["betas"] == (0.9, 0.98) and optimizer.defaults["eps"] == 1e-9
    rates = []
    for _ in range(40):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    # Section 5.3: lrate proportional to min(step^-0.5, step * warmup^-1.5), peaking at warmup.
    for step, rate in enumerate(rates, start=1):
        paper = min(step**-0.5, step * 10**-1.5) / 10**-0.5
        assert rate == pytest.approx(1e-3 * paper)
    assert max(rates) == rates[9]


def test_hyperparameters_are_plain_python(module: TranslationModule) -> None:
    assert set(module.hparams) >= {"model", "tokenizer", "lr", "beam_size"}
    assert type(module.hparams["model"]) is dict and isinstance(module.hparams["tokenizer"], str)


def test_translate_returns_one_line_per_sentence(module: TranslationModule) -> None:
    module.eval()
    out = module.translate(["winter is coming", "a lannister always pays his debts"], beam_size=2, max_len=5)
    assert len(out) == 2 and all(isinstance(line, str) for line in out)


def test_translate_truncates_overlong_input_with_a_warning(module: TranslationModule, caplog: pytest.LogCaptureFixture) -> None:
    module.eval()
    with caplog.at_level("WARNING"):
        out = module.translate(["winter is coming " * 20, "winter"], max_len=4)
    assert len(out) == 2
    assert "truncated 1 of 2 sentences longer than 31 subwords (model max_len 32)" in caplog.text


def test_resuming_with_another_tokenizer_is_refused(module: TranslationModule) -> None:
    from nlp.data.tokenizer import train_tokenizer

    other = train_tokenizer(["a completely different corpus"], vocab_size=300, min_frequency=1).to_json()
    module.on_load_checkpoint({"hyper_parameters": {**module.hparams, "tokenizer": module.hparams.tokenizer}})
    with pytest.raises(InputError, match="data.tokenizer_path=<run>/checkpoints/tokenizer.json"):
        module.on_load_checkpoint({"hyper_parameters": {**module.hparams, "tokenizer": other}})


@pytest.mark.parametrize("dropout", ["auto", 0.3])
def test_a_resumed_run_takes_the_auto_dropout_in_force_only_where_it_leaves_dropout_at_auto(
    toy_tokenizer: SubwordTokenizer, dropout: str | float
) -> None:
    resumed = TranslationModule(model={**TINY, "dropout": dropout}, tokenizer=toy_tokenizer.to_json(), label_smoothing=0.2)
    resumed.on_load_checkpoint({"auto_regularization": {"dropout": 0.0, "label_smoothing": 0.05}})
    rates = {layer.p for layer in resumed.net.modules() if isinstance(layer, torch.nn.Dropout)}
    assert rates == ({0.0} if dropout == "auto" else {0.3})  # a rate set on the resumed run's command line stays
    assert resumed.auto_smoothing is None  # label_smoothing=0.2 is not auto: the checkpoint's 0.05 is not taken


@pytest.mark.parametrize(
    ("overrides", "scored"),
    [
        # Stopped by max_steps inside the third epoch (11 steps an epoch): validations after steps
        # 11 and 22 and, as the budget ends the run, 25; max_epochs -1 is no limit.
        (["trainer.max_epochs=-1", "trainer.max_steps=25", "module.bleu_every_n_epochs=5"], [False, False, True]),
        (["trainer.max_epochs=3", "module.bleu_every_n_epochs=2"], [False, True, True]),
    ],
    ids=["max_steps", "max_epochs"],
)
def test_bleu_every_n_epochs_and_at_the_last_validation(
    tmp_path: Path, overrides: list[str], scored: list[bool]
) -> None:
    cfg = nlp_config(tmp_path, "data=toy", "model=transformer_tiny", "trainer.num_sanity_val_steps=0", *overrides)
    train(cfg)
    with next(tmp_path.glob("csv/version_*/metrics.csv")).open() as handle:
        validations = [row for row in csv.DictReader(handle) if row["val/loss"]]
    assert [bool(row["val/bleu"]) for row in validations] == scored
    assert "val/bleu" in json.loads((tmp_path / "metrics.json").read_text())


def test_the_epoch_totals_are_float64_but_on_apples_gpus() -> None:
    from nlp.module import totals_dtype

    assert totals_dtype(torch.device("cpu")) == totals_dtype(torch.device("cuda", 0)) == torch.float64
    assert totals_dtype(torch.device("mps")) == torch.float32  # MPS has no float64
