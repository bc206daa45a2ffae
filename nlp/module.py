"""Training and evaluation of :class:`nlp.model.Seq2SeqTransformer` with Lightning (Section 5)."""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_only
from sacrebleu.metrics import BLEU, CHRF
from torch import Tensor

import core
from core.errors import InputError
from core.constraints import AUTO
from core.training.plan.budget import FollowsThePlan, run_plan, stepping_bound
from core.training.pretrained import require_same_network
from nlp.analysis.corpus_scores import bleu_for, corpus_score
from nlp.data.batching import pad_batch
from nlp.decoding import (
    DEFAULT_MAX_LEN_A,
    DEFAULT_MAX_LEN_B,
    Prefix,
    Scored,
    beam_hypotheses,
    beam_search,
    greedy_decode,
    repetition_rate,
)
from nlp.data.encoding import encode_sources
from nlp.model import Seq2SeqTransformer
from nlp.data.tokenizer import SubwordTokenizer
from nlp.recipe import FULL_DROPOUT, FULL_SMOOTHING, dropout as planned_dropout, label_smoothing as planned_smoothing

log = logging.getLogger(__name__)

Batch = dict[str, Tensor]
FREE_SETTINGS = ("dropout", "attn_dropout", "activation_dropout", "word_dropout")  # the network settings trained weights do not fix
AUTO_REGULARIZATION = "auto_regularization"  # the checkpoint's key of the auto dropout and label smoothing in force


def totals_dtype(device: torch.device) -> torch.dtype:
    """The dtype an epoch's summed losses and token counts are kept in on ``device``: float64,
    exact over millions of tokens, but float32 on Apple's GPUs (MPS), which have no float64."""
    return torch.float32 if device.type == "mps" else torch.float64


class TranslationModule(FollowsThePlan, pl.LightningModule):
    """Label-smoothed cross entropy (Section 5.4), Adam with beta2 = 0.98 and eps = 1e-9 and the
    inverse-square-root warmup schedule (Section 5.3); BLEU and chrF of detokenized output with
    sacreBLEU.

    Validation logs ``val/loss`` (label-smoothed), ``val/nll`` (without smoothing) and ``val/ppl``
    (its exponential) every epoch and ``val/bleu``, ``val/chrf`` (greedy decoding) every
    ``bleu_every_n_epochs`` epochs and at the last validation of the run; testing logs the same
    losses, ``test/bleu``, ``test/chrf`` (beam search) and ``test/rep4``, the share of translations that
    repeat a word 4-gram, beside ``test/rep4_ref``, the references' own share.

    The defaults are the recipe of ``conf/nlp.yaml`` (its ``module`` section) with the paper's
    rate and warmup (``conf/model/transformer_base.yaml``; each model preset brings its own).

    Args:
        model: keyword arguments of :class:`Seq2SeqTransformer` besides the vocabulary sizes and
            special-token ids, which come from the tokenizer; ``dropout: auto`` is sized to the
            run's planned passes over the corpus (:mod:`nlp.recipe`).
        tokenizer: the tokenizer's JSON string (:meth:`SubwordTokenizer.to_json`).
        source_max_len: the data's ``max_len``: sources are encoded as at most
            ``source_max_len - 1`` subwords and ``</s>`` (:mod:`nlp.data.encoding`); None is the
            model's ``max_len``.
        tgt_lang: the language of the targets (``de``, ``zh_CN``), which chooses how BLEU
            splits them into words (:func:`nlp.analysis.corpus_scores.bleu_for`); None: ``13a``.
        lr: peak learning rate, reached at the end of warmup (the paper's is
            ``(d_model * warmup_steps) ** -0.5``, 7e-4 for the base model).
        warmup_steps: linear warmup steps before the ``1/sqrt(step)`` decay; a budget may
            shorten the warmup to ``budget.max_warmup_fraction`` of the planned steps, and the
            peak is then held until this step, where the decay stays anchored.
        cooldown_fraction: share of the planned steps over which the rate falls linearly to 0 at
            the end of the budget (0 = the paper's schedule, which never ends).
        betas: Adam's beta1, beta2.
        eps: Adam's epsilon.
        weight_decay: L2 penalty of Adam (0 in the paper).
        label_smoothing: epsilon_ls of label smoothing (0.1 in the paper); ``auto``: the training
            loss's is sized to the run's planned passes over the corpus (:mod:`nlp.recipe`), and
            ``val/loss`` and ``test/loss`` are smoothed at the full 0.1, so they compare across
            epochs and runs.
        bleu_every_n_epochs: how often validation also decodes and scores BLEU.
        beam_size: beam width of the test-time search (4 in the paper).
        length_penalty: alpha of the GNMT length penalty (0.6 in the paper).
        max_decode_len: most generated tokens per sentence (default: ``max_len_a * source
            length + max_len_b``).
        max_len_a: the default decoding limit's factor of the source length (fairseq's).
        max_len_b: the default decoding limit's added tokens.
        no_repeat_ngram_size: forbid decoding to repeat a subword n-gram of this size (0 = off, the
            default: on long passages, which repeat phrases, blocking 4-grams cost BLEU;
            docs/translation.md, Decoding settings).
    """

    throughput_unit = "tokens"

    def __init__(
        self,
        model: dict[str, Any],
        tokenizer: str,
        source_max_len: int | None = None,
        tgt_lang: str | None = None,
        lr: float = 7e-4,
        warmup_steps: int = 4000,
        cooldown_fraction: float = 0.2,
        betas: tuple[float, float] = (0.9, 0.98),
        eps: float = 1e-9,
        weight_decay: float = 0.0,
        label_smoothing: float | str = 0.1,
        bleu_every_n_epochs: int = 1,
        beam_size: int = 4,
        length_penalty: float = 0.6,
        max_decode_len: int | None = None,
        max_len_a: float = DEFAULT_MAX_LEN_A,
        max_len_b: int = DEFAULT_MAX_LEN_B,
        no_repeat_ngram_size: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.tokenizer = SubwordTokenizer.from_json(tokenizer)
        vocab_size = self.tokenizer.vocab_size
        special_ids = {"pad_id": self.tokenizer.pad_id, "bos_id": self.tokenizer.bos_id, "eos_id": self.tokenizer.eos_id}
        # An auto dropout builds the dropout layers at the full rate; follow_plan scales them.
        full = {"dropout": FULL_DROPOUT} if model.get("dropout") == AUTO else {}
        self.net = Seq2SeqTransformer(vocab_size, vocab_size, **special_ids, **{**model, **full})
        self.auto_dropout: float | None = None  # the auto dropout in force
        self.auto_smoothing: float | None = None  # the auto label smoothing of the training loss in force
        self.chrf = CHRF()
        # Per stage, the unsmoothed cross entropy summed over the epoch's target tokens and their count, in
        # float64 (float32 on MPS: totals_dtype) and outside the module's state, so a model cast to 16 bits
        # keeps exact totals.
        self.nll_totals: dict[str, Tensor] = {}
        self.hypotheses: list[str] = []
        self.references: list[str] = []
        self.decode_validation = False

    def count_items(self, batch: Batch) -> int:
        """Target tokens the model predicts in a training batch (padding excluded)."""
        return int(batch["target"][:, 1:].ne(self.tokenizer.pad_id).sum())

    def predictions(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """The float32 logits [N, V] of the N target tokens a batch predicts under teacher forcing
        (padding excluded), and those tokens' ids [N]."""
        target_in, target_out = batch["target"][:, :-1], batch["target"][:, 1:]  # teacher forcing
        predicted = target_out.ne(self.tokenizer.pad_id)  # (B, T): padding is not predicted
        logits = self.net(batch["source"], target_in, predicted)  # (N, V) for the N predicted tokens
        return logits.float(), target_out[predicted]

    def smoothing(self, training: bool) -> float:
        """The label smoothing of the training loss (``training``) or of the evaluation's: the
        setting; with ``auto``, the planned one in training (none before a plan) and the full
        :data:`nlp.recipe.FULL_SMOOTHING` in evaluation."""
        setting = self.hparams.label_smoothing
        if setting != AUTO:
            return float(setting)
        return (self.auto_smoothing or 0.0) if training else FULL_SMOOTHING

    def evaluation_losses(self, logits: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
        """The evaluation's mean label-smoothed cross entropy per target token (Section 5.4, at
        :meth:`smoothing`) and its summed negative log-likelihood without smoothing, from one
        log-softmax: with ``-log p`` of each of the V subwords, the smoothed loss of a token is
        ``(1 - eps) * nll + eps * mean(-log p)``, ``F.cross_entropy``'s ``label_smoothing``."""
        eps = self.smoothing(training=False)
        log_probs = logits.log_softmax(-1)  # (N, V)
        nll = -log_probs.gather(1, targets.unsqueeze(1)).squeeze(1)  # (N,)
        smoothed = (1.0 - eps) * nll + eps * -log_probs.mean(-1)  # (N,)
        return smoothed.mean(), nll.sum()

    def loss(self, batch: Batch) -> tuple[Tensor, int]:
        """Mean label-smoothed cross entropy per target token of the training loss (Section 5.4, at
        :meth:`smoothing`), and the number of tokens."""
        logits, targets = self.predictions(batch)
        return F.cross_entropy(logits, targets, label_smoothing=self.smoothing(training=True)), len(targets)

    def follow_plan(self) -> None:
        """Size the settings left at ``auto`` to the planned passes over the corpus
        (:func:`core.training.plan.budget.run_plan`, the same on every process) at the start of an
        epoch and of a resumed run: every dropout layer of the network to
        :func:`nlp.recipe.dropout` (``model.dropout``), the training loss's label smoothing to
        :func:`nlp.recipe.label_smoothing` (``module.label_smoothing``); log each when it changes.
        Before the first plan of a time budget both are 0, or, resumed from a checkpoint written
        before that plan, the ones in force then."""
        auto_dropout = self.hparams.model.get("dropout") == AUTO
        auto_smoothing = self.hparams.label_smoothing == AUTO
        if not (auto_dropout or auto_smoothing):
            return
        plan = self.followed_plan = run_plan(self.trainer)
        if plan is None and (self.auto_dropout is not None or self.auto_smoothing is not None):
            return  # no plan yet, rates in force (restored from the checkpoint, or the first epoch's 0)
        epochs = plan.epochs if plan is not None else 0.0
        if auto_dropout:
            rate = planned_dropout(epochs, self.auto_dropout or 0.0)
            self.set_dropout(rate)
            if rate != self.auto_dropout:
                log.info("dropout %.3g for %.3g planned passes over the corpus (model.dropout=auto)", rate, epochs)
                self.auto_dropout = rate
        if auto_smoothing:
            smoothing = planned_smoothing(epochs)
            if smoothing != self.auto_smoothing:
                log.info(
                    "label smoothing %.3g for %.3g planned passes over the corpus (module.label_smoothing=auto)", smoothing, epochs
                )
                self.auto_smoothing = smoothing

    @functools.cached_property
    def bleu(self) -> BLEU:
        """sacreBLEU's BLEU for the targets' language (:func:`nlp.analysis.corpus_scores.bleu_for`),
        made when first scored: a model loaded to translate never builds it (nor warns of mecab)."""
        return bleu_for(self.hparams.get("tgt_lang"))

    def set_dropout(self, rate: float) -> None:
        """Every dropout layer of the network at ``rate`` (the auto dropout), but the feed-forward
        activation's where ``model.activation_dropout`` sets its own."""
        own_rate = self.hparams.model.get("activation_dropout") is not None
        kept = {module.drop1 for module in self.net.modules() if own_rate and isinstance(module, core.FeedForward)}
        for layer in self.net.modules():
            if isinstance(layer, torch.nn.Dropout) and layer not in kept:
                layer.p = rate

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        """The dropout and label smoothing follow the plan at the start of each epoch only
        (:meth:`follow_plan`), not from a time budget's first plan in the middle of the first: made
        from the first timed steps, that one runs ahead of the pace the run keeps, and could switch
        the dropout on for good (:func:`nlp.recipe.dropout`)."""

    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        """The label-smoothed loss of one batch, logged per target token."""
        loss, tokens = self.loss(batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=tokens)
        return loss

    def decoding_limits(self, max_len: int | None = None) -> dict[str, Any]:
        """The length limits and n-gram blocking of the checkpoint's decoding settings; ``max_len``
        defaults to the ``max_decode_len`` hyperparameter."""
        return {
            "max_len": self.hparams.max_decode_len if max_len is None else max_len,
            "max_len_a": self.hparams.max_len_a,
            "max_len_b": self.hparams.max_len_b,
            "no_repeat_ngram_size": self.hparams.no_repeat_ngram_size,
        }

    def scored_hypotheses(
        self, source: Tensor, beam_size: int = 1, max_len: int | None = None, prefix: Prefix | None = None
    ) -> list[list[Scored]]:
        """Every finished hypothesis of each source [B, S], best first, with its score
        (:func:`nlp.decoding.beam_hypotheses` with the checkpoint's settings; a beam of 1 searches
        as greedy decoding does); ``prefix``: the target ids each sentence's hypotheses start with."""
        return beam_hypotheses(
            self.net, source, beam_size, self.hparams.length_penalty, prefix=prefix, **self.decoding_limits(max_len)
        )

    def generate(self, source: Tensor, beam_size: int = 1, max_len: int | None = None) -> Tensor:
        """Decode source ids [B, S] to target ids [B, L] (``</s>``-terminated, then padded): greedy
        for ``beam_size`` 1, beam search otherwise; ``max_len`` defaults to the
        ``max_decode_len`` hyperparameter."""
        limits = self.decoding_limits(max_len)
        if beam_size == 1:
            return greedy_decode(self.net, source, **limits)
        return beam_search(self.net, source, beam_size, self.hparams.length_penalty, **limits)

    def translate_ids(self, source: Tensor, beam_size: int = 1, max_len: int | None = None) -> list[str]:
        """Decode source ids [B, S] to detokenized sentences (:meth:`generate`)."""
        return [self.tokenizer.decode(row.tolist()) for row in self.generate(source, beam_size, max_len)]

    def source_batch(self, sentences: list[str]) -> Tensor:
        """Raw sentences -> padded source ids [B, S] on the module's device, encoded as the
        datamodule encoded the training data (:func:`nlp.data.encoding.encode_sources` with the stored
        ``source_max_len``); truncation is logged as a warning."""
        max_len = self.hparams.source_max_len or self.net.max_len
        encoded, truncated = encode_sources(self.tokenizer, sentences, max_len)
        if any(truncated):
            log.warning(
                "truncated %d of %d sentences longer than %d subwords (model max_len %d)",
                sum(truncated), len(encoded), max_len - 1, self.net.max_len,
            )
        return pad_batch(encoded, self.tokenizer.pad_id).to(self.device)

    def translate(self, sentences: list[str], beam_size: int = 1, max_len: int | None = None) -> list[str]:
        """Translate raw sentences (encoded by :meth:`source_batch`)."""
        if not sentences:
            return []
        return self.translate_ids(self.source_batch(sentences), beam_size, max_len)

    def scores_bleu(self) -> bool:
        """Whether this validation decodes and scores BLEU: every ``bleu_every_n_epochs`` epochs and
        at the last validation of the fit, whichever of ``max_epochs``, ``max_steps`` or
        ``max_time`` ends it (:class:`core.training.plan.budget.TrainingBudget` makes a run that stops inside an
        epoch validate first, with ``trainer.should_stop`` set)."""
        trainer = self.trainer
        if trainer.sanity_checking:
            return False
        if trainer.state.fn != TrainerFn.FITTING or (self.current_epoch + 1) % self.hparams.bleu_every_n_epochs == 0:
            return True
        last_epoch = trainer.max_epochs is not None and 0 <= trainer.max_epochs <= self.current_epoch + 1
        return trainer.should_stop or last_epoch

    def on_validation_epoch_start(self) -> None:
        """Decide once per validation whether its batches are decoded for BLEU."""
        self.decode_validation = self.scores_bleu()

    def evaluate(self, batch: Batch, stage: str, decode: bool, beam_size: int) -> None:
        """Log the loss of ``batch``, and gather its unsmoothed negative log-likelihood for the
        epoch's ``nll`` and ``ppl``; with ``decode``, also translate it for the epoch's BLEU."""
        logits, targets = self.predictions(batch)
        loss, nll = self.evaluation_losses(logits.detach(), targets)
        self.log(f"{stage}/loss", loss, prog_bar=True, batch_size=len(targets), sync_dist=True)
        nll = nll.to(totals_dtype(nll.device))
        totals = torch.stack([nll, nll.new_tensor(len(targets))])  # (2,): summed nll, tokens
        self.nll_totals[stage] = self.nll_totals.get(stage, 0) + totals
        if decode:
            self.hypotheses += self.translate_ids(batch["source"], beam_size)
            self.references += [self.tokenizer.decode(row.tolist()) for row in batch["target"]]

    def log_nll(self, stage: str) -> None:
        """Log ``<stage>/nll``, the cross entropy per target token of the epoch without label
        smoothing (natural log; the totals summed over processes), and ``<stage>/ppl``, its
        exponential, the perplexity."""
        totals = self.nll_totals.pop(stage, None)
        if totals is None:
            return
        nll, tokens = self.trainer.strategy.reduce(totals, reduce_op="sum")
        mean = nll / tokens
        self.log(f"{stage}/nll", mean.float())
        self.log(f"{stage}/ppl", mean.exp().float())

    def log_bleu(self, stage: str) -> None:
        """Corpus BLEU and chrF of the collected translations (their sacreBLEU signatures go to the
        log); for the test, also the share of translations and of references repeating a 4-gram."""
        if not self.hypotheses:
            return
        bleu = corpus_score(self.bleu, self.hypotheses, self.references)
        chrf = corpus_score(self.chrf, self.hypotheses, self.references)
        self.log(f"{stage}/bleu", bleu.score, prog_bar=True, sync_dist=True)
        self.log(f"{stage}/chrf", chrf.score, sync_dist=True)
        if stage == "test":
            self.log("test/rep4", repetition_rate(self.hypotheses, 4), sync_dist=True)
            self.log("test/rep4_ref", repetition_rate(self.references, 4), sync_dist=True)
        rank_zero_only(log.info)(
            "%s BLEU %.2f (%s), chrF %.2f (%s)",
            stage, bleu.score, self.bleu.get_signature(), chrf.score, self.chrf.get_signature(),
        )
        self.hypotheses, self.references = [], []

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        """Loss of a validation batch, and its greedy translations when BLEU is due."""
        self.evaluate(batch, "val", decode=self.decode_validation, beam_size=1)

    def on_validation_epoch_end(self) -> None:
        """Log ``val/nll`` and ``val/ppl``, and ``val/bleu`` and ``val/chrf`` when this validation decoded."""
        self.log_nll("val")
        self.log_bleu("val")

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        """Loss of a test batch and its beam-search translations."""
        self.evaluate(batch, "test", decode=True, beam_size=self.hparams.beam_size)

    def on_test_epoch_end(self) -> None:
        """Log ``test/nll``, ``test/ppl``, ``test/bleu``, ``test/chrf`` and ``test/rep4`` of the whole test split."""
        self.log_nll("test")
        self.log_bleu("test")

    def on_fit_start(self) -> None:
        """Save ``tokenizer.json`` beside the checkpoints, for tools that want it without torch."""
        checkpoint = self.trainer.checkpoint_callback
        directory = getattr(checkpoint, "dirpath", None)
        if directory and self.trainer.is_global_zero:
            Path(directory).mkdir(parents=True, exist_ok=True)
            self.tokenizer.save(Path(directory) / "tokenizer.json")

    @classmethod
    def pretrained_data(cls, path: str, output_dir: Path) -> dict[str, Any]:
        """The data settings a translator to start from fixes (:mod:`core.training.pretrained`):
        its tokenizer (written to ``output_dir/pretrained/``) and the ``max_len`` its sources were
        encoded to, so the new corpus is encoded with the token ids the weights know."""
        from nlp.hooks import checkpoint_data  # the evaluation's hook reads a checkpoint's the same way

        return checkpoint_data(load_translator(path), output_dir / "pretrained")

    def load_pretrained(self, path: str) -> list[str]:
        """Start from a trained translator (``pretrained=PATH``: a checkpoint or an exported
        directory), continued on this run's corpus (domain adaptation): the network settings
        must be its own but for the dropout rates, and the data encoded with its tokenizer
        (:meth:`pretrained_data`). Every weight is loaded; returns no fresh parameter."""
        source = load_translator(path)
        if source.hparams.tokenizer != self.hparams.tokenizer:
            raise InputError(
                f"pretrained={path} has another tokenizer than this run's data; drop data.tokenizer_path "
                "(a run started from a translator encodes its corpus with the translator's tokenizer)"
            )
        require_same_network(path, source.hparams.model, self.hparams.model, Seq2SeqTransformer, FREE_SETTINGS)
        self.net.load_state_dict(source.net.state_dict())
        return []

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Keep the auto dropout and label smoothing in force, which a resumed run trains with
        until its epoch starts with a plan (:meth:`follow_plan`)."""
        checkpoint[AUTO_REGULARIZATION] = {"dropout": self.auto_dropout, "label_smoothing": self.auto_smoothing}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Refuse to resume with token ids that mean something else than in the checkpoint; put
        back the auto dropout and label smoothing in force when it was written, each where this
        run leaves it at ``auto`` (a rate set on the command line of the resumed run is kept)."""
        saved = checkpoint.get("hyper_parameters", {}).get("tokenizer")
        if saved is not None and saved != self.hparams.tokenizer:
            raise InputError(
                "the checkpoint was trained with another tokenizer than the one built from this run's "
                "data; resume with the same data settings, or reuse the run's tokenizer with "
                "data.tokenizer_path=<run>/checkpoints/tokenizer.json"
            )
        in_force = checkpoint.get(AUTO_REGULARIZATION, {})
        if self.hparams.model.get("dropout") == AUTO:
            self.auto_dropout = in_force.get("dropout")
            if self.auto_dropout is not None:
                self.set_dropout(self.auto_dropout)
        if self.hparams.label_smoothing == AUTO:
            self.auto_smoothing = in_force.get("label_smoothing")

    def configure_optimizers(self) -> dict[str, Any]:
        """Adam (Section 5.3) with the inverse-square-root warmup, stepped every optimizer step and
        laid over the run's budget by :class:`core.training.plan.budget.TrainingBudget` (warmup capped to a
        fraction of the planned steps, linear cooldown to 0 over the last ``cooldown_fraction``)."""
        optimizer = torch.optim.Adam(
            self.net.parameters(),
            lr=self.hparams.lr,
            betas=tuple(self.hparams.betas),
            eps=self.hparams.eps,
            weight_decay=self.hparams.weight_decay,
        )
        scheduler = core.inverse_sqrt(
            optimizer, self.hparams.warmup_steps, stepping_bound(self.trainer), self.hparams.cooldown_fraction
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def load_translator(path: str | Path, map_location: str | torch.device = "cpu") -> TranslationModule:
    """A trained :class:`TranslationModule` from its checkpoint alone, or from a directory written
    by ``python -m nlp.export --format safetensors`` (:mod:`nlp.export.safetensors_files`), in eval
    mode."""
    if Path(path).is_dir():
        from nlp.export.safetensors_files import read_translator  # it builds this module's TranslationModule

        return read_translator(path).to(map_location)
    return core.load_module(TranslationModule, path, map_location)
