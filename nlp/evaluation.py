"""``python -m nlp.evaluate ckpt_path=CKPT [data=...] [split=test|val|train]``: score a trained
translation model without training (config ``conf/nlp_eval.yaml``).

Writes ``metrics.json`` in the run directory: ``{split}/bleu`` and ``{split}/chrf`` of the
detokenized beam-search output with their sacreBLEU signatures (``{split}/bleu_signature``,
``{split}/chrf_signature``), ``{split}/loss`` and ``{split}/rep4``. ``module.beam_size``,
``module.length_penalty``, ``module.no_repeat_ngram_size``, ``module.max_len_a`` and
``module.max_len_b`` override the checkpoint's decoding settings. Sentences are encoded with the
checkpoint's tokenizer and ``max_len``; without ``data=`` the training run's data is used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from omegaconf import DictConfig

from core.training.cli import hydra_app
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


@hydra_app("nlp_eval")
def main(cfg: DictConfig) -> float:
    """Evaluate the checkpoint; returns the split's BLEU (for sweeps)."""
    return float(evaluate_translator(cfg)[f"{cfg.split}/bleu"])


if __name__ == "__main__":
    main()
