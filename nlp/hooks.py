"""What the shared evaluation asks of the translation head (``checkpoint_data`` and
``evaluation_reports`` of :data:`nlp.head.HEAD`, see :class:`core.training.head.Head`): the
encoding the checkpoint fixes, the sacreBLEU signatures and the scores by source length."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.training.evaluation import EvaluationReport
from nlp.analysis.sacrebleu_report import SacreBleuSignatures
from nlp.module import TranslationModule


def checkpoint_data(translator: TranslationModule, output_dir: Path) -> dict[str, Any]:
    """The data settings the checkpoint fixes (``checkpoint_data`` of :data:`nlp.head.HEAD`): its
    tokenizer (written to the run directory for the datamodule to load) and the ``max_len`` its
    sources were encoded to."""
    path = output_dir / "tokenizer.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    translator.tokenizer.save(path)
    return {"tokenizer_path": str(path), "max_len": translator.hparams.source_max_len or translator.net.max_len}


def evaluation_reports(translator: TranslationModule) -> list[EvaluationReport]:
    """The evaluation's reports (``evaluation_reports`` of :data:`nlp.head.HEAD`): the sacreBLEU
    signatures, and BLEU and chrF by source length (:mod:`nlp.analysis.bleu_by_length`)."""
    from nlp.analysis.bleu_by_length import BleuByLengthReport

    return [SacreBleuSignatures(), BleuByLengthReport()]
