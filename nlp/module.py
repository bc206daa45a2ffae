"""Training and evaluation of :class:`nlp.model.Seq2SeqTransformer` with Lightning (Section 5)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_only
from sacrebleu.metrics import BLEU
from torch import Tensor

import core
from nlp.batching import pad_batch
from nlp.decoding import beam_search, greedy_decode
from nlp.model import Seq2SeqTransformer
from nlp.tokenizer import SubwordTokenizer

log = logging.getLogger(__name__)

Batch = dict[str, Tensor]


class TranslationModule(pl.LightningModule):
    """Label-smoothed cross entropy (Section 5.4), Adam with beta2 = 0.98 and eps = 1e-9 and the
    inverse-square-root warmup schedule (Section 5.3); BLEU of detokenized output with sacreBLEU.

    Validation logs ``val/loss`` every epoch and ``val/bleu`` (greedy decoding) every
    ``bleu_every_n_epochs`` epochs and at the last validation of the run; testing logs ``test/loss`` and
    ``test/bleu`` (beam search).

    Args:
        model: keyword arguments of :class:`Seq2SeqTransformer` besides the vocabulary sizes and
            special-token ids, which come from the tokenizer.
        tokenizer: the tokenizer's JSON string (:meth:`SubwordTokenizer.to_json`).
        lr: peak learning rate, reached at the end of warmup (the paper's is
            ``(d_model * warmup_steps) ** -0.5``, 7e-4 for the base model).
        warmup_steps: linear warmup steps before the ``1/sqrt(step)`` decay.
        betas: Adam's beta1, beta2.
        eps: Adam's epsilon.
        weight_decay: L2 penalty of Adam (0 in the paper).
        label_smoothing: epsilon_ls of label smoothing (0.1 in the paper).
        bleu_every_n_epochs: how often validation also decodes and scores BLEU.
        beam_size: beam width of the test-time search (4 in the paper).
        length_penalty: alpha of the GNMT length penalty (0.6 in the paper).
        max_decode_len: most generated tokens per sentence (default: source length + 50).
    """

    throughput_unit = "tokens"

    def __init__(
        self,
        model: dict[str, Any],
        tokenizer: str,
        lr: float = 7e-4,
        warmup_steps: int = 4000,
        betas: tuple[float, float] = (0.9, 0.98),
        eps: float = 1e-9,
        weight_decay: float = 0.0,
        label_smoothing: float = 0.1,
        bleu_every_n_epochs: int = 1,
        beam_size: int = 4,
        length_penalty: float = 0.6,
        max_decode_len: int | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.tokenizer = SubwordTokenizer.from_json(tokenizer)
        vocab_size = self.tokenizer.vocab_size
        special_ids = {"pad_id": self.tokenizer.pad_id, "bos_id": self.tokenizer.bos_id, "eos_id": self.tokenizer.eos_id}
        self.net = Seq2SeqTransformer(vocab_size, vocab_size, **special_ids, **model)
        self.bleu = BLEU()
        self.hypotheses: list[str] = []
        self.references: list[str] = []
        self.last_validation_step = 0
        self.decode_validation = False

    def count_items(self, batch: Batch) -> int:
        """Target tokens the model predicts in a training batch (padding excluded)."""
        return int(batch["target"][:, 1:].ne(self.tokenizer.pad_id).sum())

    def loss(self, batch: Batch) -> tuple[Tensor, int]:
        """Mean label-smoothed cross entropy per target token, and the number of tokens."""
        target_in, target_out = batch["target"][:, :-1], batch["target"][:, 1:]  # teacher forcing
        logits = self.net(batch["source"], target_in)
        loss = F.cross_entropy(
            logits.flatten(0, 1).float(),  # (B * T, V)
            target_out.flatten(),
            ignore_index=self.tokenizer.pad_id,
            label_smoothing=self.hparams.label_smoothing,
        )
        return loss, int(target_out.ne(self.tokenizer.pad_id).sum())

    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        """The label-smoothed loss of one batch, logged per target token."""
        loss, tokens = self.loss(batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=tokens)
        return loss

    def translate_ids(self, source: Tensor, beam_size: int = 1, max_len: int | None = None) -> list[str]:
        """Decode source ids [B, S] to detokenized sentences: greedy for ``beam_size`` 1, beam
        search otherwise; ``max_len`` defaults to the ``max_decode_len`` hyperparameter."""
        max_len = self.hparams.max_decode_len if max_len is None else max_len
        if beam_size == 1:
            output = greedy_decode(self.net, source, max_len=max_len)
        else:
            output = beam_search(
                self.net, source, beam_size=beam_size, length_penalty=self.hparams.length_penalty, max_len=max_len
            )
        return [self.tokenizer.decode(row.tolist()) for row in output]

    def translate(self, sentences: list[str], beam_size: int = 1, max_len: int | None = None) -> list[str]:
        """Translate raw sentences (encoded with the module's tokenizer; longer than the model's
        ``max_len`` they are truncated, with a warning)."""
        keep = self.net.max_len - 1
        encoded = self.tokenizer.encode_batch(sentences)
        truncated = sum(len(ids) > keep for ids in encoded)
        if truncated:
            log.warning(
                "truncated %d of %d sentences longer than %d subwords (model max_len %d)",
                truncated, len(encoded), keep, self.net.max_len,
            )
        encoded = [ids[:keep] + [self.tokenizer.eos_id] for ids in encoded]
        source = pad_batch(encoded, self.tokenizer.pad_id).to(self.device)
        return self.translate_ids(source, beam_size, max_len)

    def scores_bleu(self) -> bool:
        """Whether this validation decodes and scores BLEU: every ``bleu_every_n_epochs`` epochs and
        at the last validation of the fit, whether ``max_epochs`` or ``max_steps`` ends it.

        The last one is the validation after which another interval of the same number of
        optimizer steps would pass the run's total (Lightning does not validate when ``max_steps``
        stops training inside an epoch, so that may be a validation before the last step).
        """
        trainer = self.trainer
        if trainer.sanity_checking:
            return False
        if trainer.state.fn != TrainerFn.FITTING or (self.current_epoch + 1) % self.hparams.bleu_every_n_epochs == 0:
            return True
        interval = self.global_step - self.last_validation_step
        return self.global_step + interval > trainer.estimated_stepping_batches

    def on_train_start(self) -> None:
        """Count validation intervals from where this fit starts (0, or a resumed step)."""
        self.last_validation_step = self.global_step

    def on_validation_epoch_start(self) -> None:
        """Decide once per validation whether its batches are decoded for BLEU."""
        self.decode_validation = self.scores_bleu()

    def evaluate(self, batch: Batch, stage: str, decode: bool, beam_size: int) -> None:
        """Log the loss of ``batch``; with ``decode``, also translate it for the epoch's BLEU."""
        loss, tokens = self.loss(batch)
        self.log(f"{stage}/loss", loss, prog_bar=True, batch_size=tokens, sync_dist=True)
        if decode:
            self.hypotheses += self.translate_ids(batch["source"], beam_size)
            self.references += [self.tokenizer.decode(row.tolist()) for row in batch["target"]]

    def log_bleu(self, stage: str) -> None:
        """Corpus BLEU of the collected translations; the sacreBLEU signature goes to the log."""
        if not self.hypotheses:
            return
        score = self.bleu.corpus_score(self.hypotheses, [self.references])
        self.log(f"{stage}/bleu", score.score, prog_bar=True, sync_dist=True)
        rank_zero_only(log.info)("%s BLEU %.2f (%s)", stage, score.score, self.bleu.get_signature())
        self.hypotheses, self.references = [], []

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        """Loss of a validation batch, and its greedy translations when BLEU is due."""
        self.evaluate(batch, "val", decode=self.decode_validation, beam_size=1)

    def on_validation_epoch_end(self) -> None:
        """Log ``val/bleu`` when this validation decoded, and remember its step."""
        self.log_bleu("val")
        if not self.trainer.sanity_checking:
            self.last_validation_step = self.global_step

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        """Loss of a test batch and its beam-search translations."""
        self.evaluate(batch, "test", decode=True, beam_size=self.hparams.beam_size)

    def on_test_epoch_end(self) -> None:
        """Log ``test/bleu`` of the whole test split."""
        self.log_bleu("test")

    def on_fit_start(self) -> None:
        """Save ``tokenizer.json`` beside the checkpoints, for tools that want it without torch."""
        checkpoint = self.trainer.checkpoint_callback
        directory = getattr(checkpoint, "dirpath", None)
        if directory and self.trainer.is_global_zero:
            Path(directory).mkdir(parents=True, exist_ok=True)
            self.tokenizer.save(Path(directory) / "tokenizer.json")

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Refuse to resume with token ids that mean something else than in the checkpoint."""
        saved = checkpoint.get("hyper_parameters", {}).get("tokenizer")
        if saved is not None and saved != self.hparams.tokenizer:
            raise ValueError(
                "the checkpoint was trained with another tokenizer than the one built from this run's "
                "data; resume with the same data settings, or reuse the run's tokenizer with "
                "data.tokenizer_path=<run>/checkpoints/tokenizer.json"
            )

    def configure_optimizers(self) -> dict[str, Any]:
        """Adam (Section 5.3) with the inverse-square-root warmup, stepped every optimizer step."""
        optimizer = torch.optim.Adam(
            self.net.parameters(),
            lr=self.hparams.lr,
            betas=tuple(self.hparams.betas),
            eps=self.hparams.eps,
            weight_decay=self.hparams.weight_decay,
        )
        scheduler = core.inverse_sqrt(optimizer, self.hparams.warmup_steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def load_translator(path: str | Path, map_location: str | torch.device = "cpu") -> TranslationModule:
    """A trained :class:`TranslationModule` from its checkpoint alone, in eval mode."""
    return core.load_module(TranslationModule, path, map_location)
