"""What ``python -m nlp.evaluate`` runs (see that command for the options and outputs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from omegaconf import DictConfig

from core.training.evaluation import EvaluationReport, Metrics, checkpoint_path, evaluate
from nlp.module import TranslationModule, load_translator


class SacreBleuSignatures(EvaluationReport):
    """The sacreBLEU signatures of the scores (tokenization, smoothing, version, ...), which make
    them comparable with published ones."""

    def report(self, module: pl.LightningModule, output_dir: Path) -> Metrics:
        assert isinstance(module, TranslationModule)
        return {"bleu_signature": str(module.bleu.get_signature()), "chrf_signature": str(module.chrf.get_signature())}


def encoding(translator: TranslationModule, output_dir: Path) -> dict[str, Any]:
    """The data settings the checkpoint fixes: its tokenizer (written to the run directory for the
    datamodule to load) and the ``max_len`` its sources were encoded to."""
    path = output_dir / "tokenizer.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    translator.tokenizer.save(path)
    return {"tokenizer_path": str(path), "max_len": translator.hparams.source_max_len or translator.net.max_len}


def evaluate_translator(cfg: DictConfig) -> Metrics:
    """Evaluate the checkpoint ``cfg.ckpt_path`` as ``cfg`` says; returns what ``metrics.json`` holds."""
    translator = load_translator(checkpoint_path(cfg))
    return evaluate(cfg, translator, encoding(translator, Path(cfg.paths.output_dir)), [SacreBleuSignatures()])
