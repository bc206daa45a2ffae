"""Corpus BLEU and chrF scored a chunk of sentences at a time
(:mod:`nlp.analysis.corpus_scores`) are sacreBLEU's ``corpus_score`` of the whole split: the same
score and signature, with no more than a chunk of references counted at once; and BLEU split
into words as sacreBLEU splits the target language."""

from __future__ import annotations

import random

import pytest
from sacrebleu.metrics import BLEU, CHRF

from nlp.analysis.corpus_scores import bleu_for, corpus_score
from nlp.data.toy_corpus import TOY_PAIRS


def split(size: int = 23, seed: int = 0) -> tuple[list[str], list[str]]:
    """References, and hypotheses that drop, swap or keep their words (some empty)."""
    rng = random.Random(seed)
    references = [TOY_PAIRS[index % len(TOY_PAIRS)][1] for index in range(size)]
    hypotheses = []
    for reference in references:
        words = reference.split()
        if rng.random() < 0.3:
            rng.shuffle(words)
        hypotheses.append(" ".join(word for word in words if rng.random() < 0.8))
    return hypotheses, references


@pytest.mark.parametrize("metric", [BLEU, CHRF], ids=["BLEU", "chrF"])
@pytest.mark.parametrize("chunk", [1, 5, 23, 1000])
def test_chunked_scores_are_sacrebleus_corpus_scores(metric: type[BLEU] | type[CHRF], chunk: int) -> None:
    hypotheses, references = split()
    whole, whole_metric = metric().corpus_score(hypotheses, [references]), metric()
    chunked_metric = metric()
    chunked = corpus_score(chunked_metric, hypotheses, references, chunk=chunk)
    assert chunked.score == whole.score and str(chunked) == str(whole)
    whole_metric.corpus_score(hypotheses, [references])
    assert str(chunked_metric.get_signature()) == str(whole_metric.get_signature())


def test_no_more_than_a_chunk_of_references_is_counted_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    hypotheses, references = split(size=23)
    metric, counted = CHRF(), []
    cache = metric._cache_references

    def counting(refs):  # noqa: ANN001, ANN202 - sacreBLEU's own signature
        counted.append(len(refs[0]))
        return cache(refs)

    monkeypatch.setattr(metric, "_cache_references", counting)
    corpus_score(metric, hypotheses, references, chunk=10)
    assert counted == [10, 10, 3]


def test_hypotheses_and_references_must_pair_up() -> None:
    with pytest.raises(ValueError, match="3 hypotheses against 2 references"):
        corpus_score(BLEU(), ["a", "b", "c"], ["a", "b"])


def test_chinese_targets_are_split_into_words_as_sacrebleu_splits_them(caplog: pytest.LogCaptureFixture) -> None:
    hypothesis, reference = ["我今天很高兴"], ["我今天很高兴了"]

    def scored(metric: BLEU) -> tuple[float, str]:
        """The score of the sentence, and the signature's tokenizer."""
        score = corpus_score(metric, hypothesis, reference).score
        return score, next(part for part in str(metric.get_signature()).split("|") if part.startswith("tok:"))

    assert scored(BLEU()) == (0.0, "tok:13a")  # one "word" each: no 4-gram to match
    for lang in ("zh_CN", "zh-TW", "zh"):
        score, tokenizer = scored(bleu_for(lang))
        assert score > 50 and tokenizer == "tok:zh"
    assert scored(bleu_for("de"))[1] == scored(bleu_for(None))[1] == "tok:13a"
    try:
        import MeCab  # noqa: F401 - sacreBLEU's Japanese tokenizer
    except ImportError:
        with caplog.at_level("WARNING"):
            japanese = bleu_for("ja")
        assert scored(japanese)[1] == "tok:char" and "needs mecab" in caplog.text
