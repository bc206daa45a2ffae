"""What ``python -m nlp.evaluate`` adds to the shared evaluation (see that command for the options
and outputs): the encoding the checkpoint fixes and the sacreBLEU signatures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl

from core.training.evaluation import EvaluationReport, Metrics
from nlp.module import TranslationModule


class SacreBleuSignatures(EvaluationReport):
    """The sacreBLEU signatures of the scores (tokenization, smoothing, version, ...), which make
    them comparable with published ones."""

    def report(self, module: pl.LightningModule, output_dir: Path) -> Metrics:
        assert isinstance(module, TranslationModule)
        return {"bleu_signature": str(module.bleu.get_signature()), "chrf_signature": str(module.chrf.get_signature())}


def encoding(translator: TranslationModule, output_dir: Path) -> dict[str, Any]:
    """The data settings the checkpoint fixes (``checkpoint_data`` of :data:`nlp.head.HEAD`): its
    tokenizer (written to the run directory for the datamodule to load) and the ``max_len`` its
    sources were encoded to."""
    path = output_dir / "tokenizer.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    translator.tokenizer.save(path)
    return {"tokenizer_path": str(path), "max_len": translator.hparams.source_max_len or translator.net.max_len}


def reports(translator: TranslationModule) -> list[EvaluationReport]:
    """The evaluation's reports (``evaluation_reports`` of :data:`nlp.head.HEAD`): the sacreBLEU
    signatures, and BLEU and chrF by source length (:mod:`nlp.analysis.bleu_by_length`)."""
    from nlp.analysis.bleu_by_length import BleuByLengthReport

    return [SacreBleuSignatures(), BleuByLengthReport()]
