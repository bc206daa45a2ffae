"""BLEU and chrF by source length, the report of ``python -m nlp.evaluate`` that shows where long
sentences fail: ``{split}/bleu_by_length/{low}-{high}``, ``{split}/chrf_by_length/{low}-{high}``
and ``{split}/sentences_by_length/{low}-{high}`` in ``metrics.json``, and the bar chart
``bleu_by_length.png`` beside it.

Length is counted in words of the source as the model read it: its ids decoded (after the
truncation to the checkpoint's ``max_len``) and split at whitespace, so buckets read the same
whatever the tokenizer. The buckets are contiguous ranges of word counts cut by the distribution of
the split's own lengths (:func:`length_buckets`): at most :data:`MAX_BUCKETS` of them, holding
shares of the sentences as equal as whole word counts allow, and at least :data:`MIN_SENTENCES`
sentences each, since a corpus BLEU over fewer moves by points with a single sentence (a split of
under 100 sentences is one bucket). The edges depend only on the sources, so two checkpoints
evaluated on the same split get the same keys.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from matplotlib.figure import Figure
from sacrebleu.metrics import CHRF

from core.files.atomic import atomic_path
from core.training.evaluation import EvaluationReport, Metrics
from nlp.analysis.corpus_scores import corpus_score
from nlp.module import TranslationModule

MAX_BUCKETS = 5
MIN_SENTENCES = 50
FIGURE = "bleu_by_length.png"

Bucket = tuple[int, int]  # lowest and highest source length in words, inclusive


def length_buckets(lengths: Sequence[int], most: int = MAX_BUCKETS, least: int = MIN_SENTENCES) -> list[Bucket]:
    """Contiguous ranges of length, ascending, that cover ``lengths``: ``len(lengths) // least``
    ranges (at least 1, at most ``most``) of shares as equal as whole lengths allow. Walking up
    the lengths, a range closes once it holds ``least`` sentences and taking the next length would
    bring it farther from an equal share of the sentences left; the last range takes the rest and
    joins the one before it when it holds fewer than ``least``."""
    counts = Counter(lengths)
    values = sorted(counts)
    count = max(1, min(most, len(lengths) // least))
    buckets: list[Bucket] = []
    held = left = 0
    low, remaining = (values[0] if values else 0), len(lengths)
    for index, value in enumerate(values):
        held += counts[value]
        if index + 1 < len(values):
            share = remaining / (count - len(buckets))
            closer = abs(held - share) <= abs(held + counts[values[index + 1]] - share)
            if not (len(buckets) < count - 1 and held >= least and closer):
                continue
        buckets.append((low, value))
        remaining -= held
        low, left, held = value + 1, held, 0
    if len(buckets) > 1 and left < least:
        buckets[-2:] = [(buckets[-2][0], buckets[-1][1])]
    return buckets


def label(bucket: Bucket) -> str:
    return f"{bucket[0]}-{bucket[1]}"


def draw_scores(rows: list[dict[str, Any]], overall_bleu: float, out: Path) -> None:
    """Bars of BLEU and chrF per bucket, the sentence count under each, and the split's BLEU as a
    dashed line; written to ``out`` atomically."""
    figure = Figure(figsize=(max(5.0, 1.4 * len(rows) + 2.0), 4.0), layout="constrained")
    axis = figure.subplots()
    positions = range(len(rows))
    width = 0.38
    for offset, key, name in ((-width / 2, "bleu", "BLEU"), (width / 2, "chrf", "chrF")):
        bars = axis.bar([p + offset for p in positions], [row[key] for row in rows], width, label=name)
        axis.bar_label(bars, fmt="%.1f", fontsize=7)
    axis.axhline(overall_bleu, color="black", linestyle="--", linewidth=1, label=f"BLEU of all ({overall_bleu:.1f})")
    axis.set_xticks(list(positions), labels=[f"{row['label']}\n({row['sentences']} sent.)" for row in rows])
    axis.set_xlabel("source length (words)")
    axis.set_ylabel("score")
    axis.set_ylim(0, 105)
    figure.legend(loc="outside upper center", ncols=3, fontsize=8)
    with atomic_path(out) as tmp:
        figure.savefig(tmp, dpi=110, format="png")


class BleuByLengthReport(EvaluationReport):
    """Collects each test batch's translations and references (which the module gathers for its
    own BLEU) with the length of their sources, then scores them by length bucket."""

    def __init__(self) -> None:
        self.lengths: list[int] = []
        self.hypotheses: list[str] = []
        self.references: list[str] = []
        self.before = 0
        self.draws = True

    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.draws = trainer.is_global_zero

    def on_test_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        assert isinstance(pl_module, TranslationModule)
        self.before = len(pl_module.hypotheses)

    def on_test_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        assert isinstance(pl_module, TranslationModule)
        self.hypotheses += pl_module.hypotheses[self.before :]
        self.references += pl_module.references[self.before :]
        tokenizer = pl_module.tokenizer
        self.lengths += [len(tokenizer.decode(row.tolist()).split()) for row in batch["source"]]

    def report(self, module: pl.LightningModule, output_dir: Path) -> Metrics:
        rows = []
        for bucket in length_buckets(self.lengths):
            kept = [index for index, length in enumerate(self.lengths) if bucket[0] <= length <= bucket[1]]
            hypotheses = [self.hypotheses[index] for index in kept]
            references = [self.references[index] for index in kept]
            rows.append({
                "label": label(bucket),
                "sentences": len(kept),
                "bleu": corpus_score(module.bleu, hypotheses, references).score,
                "chrf": corpus_score(CHRF(), hypotheses, references).score,
            })
        if rows and self.draws:
            draw_scores(rows, corpus_score(module.bleu, self.hypotheses, self.references).score, output_dir / FIGURE)
        metrics: Metrics = {}
        for row in rows:
            metrics[f"bleu_by_length/{row['label']}"] = row["bleu"]
            metrics[f"chrf_by_length/{row['label']}"] = row["chrf"]
            metrics[f"sentences_by_length/{row['label']}"] = row["sentences"]
        return metrics
