"""Corpus BLEU and chrF of a split of any size in bounded memory.

sacreBLEU's ``corpus_score`` counts the n-grams of every reference before it scores a single
sentence (its reference cache), and chrF's character n-grams take far more room than the text, so
the memory of scoring a split grows with the split (``benchmarks.scale_evaluate``). A corpus score
is computed from the sum of the sentences' statistics (matched and total n-grams, lengths), so
:func:`corpus_score` extracts them a chunk of sentences at a time, through the two steps
``corpus_score`` itself takes (``_extract_corpus_statistics``, then ``_aggregate_and_compute``),
and gets the same score and signature.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.metrics.bleu import BLEUScore
from sacrebleu.metrics.chrf import CHRFScore

log = logging.getLogger(__name__)

CHUNK = 1_000  # sentences whose references are held as n-gram counts at once
MECAB_FALLBACK = {"ja": "char", "ko": "13a"}  # sacreBLEU's tokenizer of each without mecab: characters, spaced words


def bleu_for(tgt_lang: str | None) -> BLEU:
    """sacreBLEU's BLEU for references in ``tgt_lang`` (``de``, ``zh_CN``, ``ja``; None: a
    language with spaces between words), as sacreBLEU chooses for it: ``13a`` by default, its own
    tokenizers for Chinese, Japanese and Korean, whose words are not separated by spaces (``13a``
    would count a Chinese sentence as a word or two). Japanese and Korean need mecab
    (``pip install "sacrebleu[ja,ko]"``); without it, Japanese is scored on characters and Korean
    on its spaced words, with a warning."""
    code = (tgt_lang or "").replace("-", "_").split("_")[0].lower()
    if code == "zh":
        return BLEU(trg_lang=code)
    if code not in MECAB_FALLBACK:
        return BLEU()
    try:
        return BLEU(trg_lang=code)
    except RuntimeError:  # the mecab packages are missing
        fallback = MECAB_FALLBACK[code]
        log.warning('BLEU for %s targets needs mecab (pip install "sacrebleu[ja,ko]"); scoring with tokenize=%s', code, fallback)
        return BLEU(tokenize=fallback)


def corpus_score(
    metric: BLEU | CHRF, hypotheses: Sequence[str], references: Sequence[str], chunk: int = CHUNK
) -> BLEUScore | CHRFScore:
    """``metric.corpus_score(hypotheses, [references])``, one reference per sentence, its
    statistics extracted ``chunk`` sentences at a time."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses against {len(references)} references")
    statistics: list[list[int]] = []
    for start in range(0, len(hypotheses), chunk):
        end = start + chunk
        statistics += metric._extract_corpus_statistics(hypotheses[start:end], [references[start:end]])
    return metric._aggregate_and_compute(statistics)
