"""The sacreBLEU signatures that ``python -m nlp.evaluate`` adds to ``metrics.json``."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl

from core.training.evaluation import EvaluationReport, Metrics
from nlp.module import TranslationModule


class SacreBleuSignatures(EvaluationReport):
    """The sacreBLEU signatures of the scores (tokenization, smoothing, version, ...), which make
    them comparable with published ones."""

    def report(self, module: pl.LightningModule, output_dir: Path) -> Metrics:
        assert isinstance(module, TranslationModule)
        return {"bleu_signature": str(module.bleu.get_signature()), "chrf_signature": str(module.chrf.get_signature())}
