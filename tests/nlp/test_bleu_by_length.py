"""BLEU and chrF by source length in ``python -m nlp.evaluate``: the bucket rule, and on a model
trained briefly on the reverse task (scores between 50 and 100, lower for long sentences) the
buckets' keys, counts and scores against sacreBLEU run independently on each bucket's sentences."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from PIL import Image
from sacrebleu.metrics import BLEU, CHRF

from core.training.evaluation import evaluate_checkpoint
from nlp.analysis.bleu_by_length import FIGURE, MIN_SENTENCES, length_buckets
from nlp.head import HEAD
from nlp.module import load_translator
from tests.nlp.conftest import CONF, write_lines
from tests.nlp.trained_translator import TEST_PAIRS, train_reverse_translator

pytestmark = pytest.mark.xdist_group("bleu-by-length")  # one worker trains and evaluates the checkpoint, once


@pytest.mark.parametrize(
    ("lengths", "buckets"),
    [
        ([], []),
        ([3, 9, 4], [(3, 9)]),  # too few sentences for two buckets
        ([5] * 300, [(5, 5)]),  # one length, one bucket
        (list(range(1, 101)) * 10, [(1, 20), (21, 40), (41, 60), (61, 80), (81, 100)]),  # equal shares
        ([3] * 116 + [4] * 127 + [5] * 125 + [6] * 102 + [7] * 130, [(3, 3), (4, 4), (5, 5), (6, 6), (7, 7)]),
        ([1] * 60 + [2] * 45, [(1, 2)]),  # the last bucket would hold fewer than 50
        ([1] * 10 + [2] * 90 + [9] * 60, [(1, 2), (3, 9)]),  # a range grows until it holds 50
        ([2] * 40 + [3] * 400 + [4] * 40 + [5] * 20, [(2, 3), (4, 5)]),  # fewer ranges where lengths tie
    ],
)
def test_buckets_are_contiguous_quantile_ranges_of_enough_sentences(lengths: list[int], buckets: list[tuple[int, int]]) -> None:
    assert length_buckets(lengths) == buckets
    for low, high in buckets:
        assert len(buckets) == 1 or sum(low <= length <= high for length in lengths) >= MIN_SENTENCES


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, Path]:
    """``metrics.json`` of ``nlp.evaluate`` on the test pairs, its run directory and the checkpoint."""
    root = tmp_path_factory.mktemp("lengths")
    checkpoint = train_reverse_translator(root / "reverse.ckpt", steps=100)
    corpus = write_lines(root / "test.tsv", [f"{source}\t{target}" for source, target in TEST_PAIRS])
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            "nlp_eval",
            overrides=[
                f"paths.output_dir={root / 'eval'}", "trainer=cpu", "callbacks.progress_bar=null",
                f"ckpt_path={checkpoint}", "data=files", f"data.train={corpus}", f"data.val={corpus}", f"data.test={corpus}",
            ],
        )
    evaluate_checkpoint(cfg, HEAD)
    return json.loads((root / "eval" / "metrics.json").read_text()), root / "eval", checkpoint


def test_metrics_hold_every_bucket_and_their_counts_sum_to_the_split(evaluated: tuple[dict, Path, Path]) -> None:
    metrics, _, _ = evaluated
    labels = [key.removeprefix("test/sentences_by_length/") for key in metrics if key.startswith("test/sentences_by_length/")]
    # 600 sources of 3 to 7 words, over a hundred of each length: a bucket per length.
    assert labels == ["3-3", "4-4", "5-5", "6-6", "7-7"]
    for kind in ("bleu", "chrf"):
        assert all(isinstance(metrics[f"test/{kind}_by_length/{label}"], float) for label in labels)
    assert sum(metrics[f"test/sentences_by_length/{label}"] for label in labels) == len(TEST_PAIRS)


def test_each_buckets_scores_are_sacrebleus_on_its_sentences(evaluated: tuple[dict, Path, Path]) -> None:
    metrics, _, checkpoint = evaluated
    sources = [source for source, _ in TEST_PAIRS]
    hypotheses = load_translator(checkpoint).translate(sources, beam_size=4)  # the checkpoint's beam
    labels = [key.removeprefix("test/bleu_by_length/") for key in metrics if key.startswith("test/bleu_by_length/")]
    scores = []
    for text in labels:
        low, high = map(int, re.fullmatch(r"(\d+)-(\d+)", text).groups())
        kept = [index for index, source in enumerate(sources) if low <= len(source.split()) <= high]
        references = [[TEST_PAIRS[index][1] for index in kept]]
        bleu = BLEU().corpus_score([hypotheses[index] for index in kept], references).score
        chrf = CHRF().corpus_score([hypotheses[index] for index in kept], references).score
        assert metrics[f"test/sentences_by_length/{text}"] == len(kept)
        assert metrics[f"test/bleu_by_length/{text}"] == pytest.approx(bleu)
        assert metrics[f"test/chrf_by_length/{text}"] == pytest.approx(chrf)
        scores.append(bleu)
    assert 50 < metrics["test/bleu"] < 100 and scores[-1] < scores[1]  # long sentences fare worse


def test_the_figure_is_written_beside_metrics_json(evaluated: tuple[dict, Path, Path]) -> None:
    _, run_dir, _ = evaluated
    with Image.open(run_dir / FIGURE) as picture:
        assert picture.format == "PNG" and picture.size[0] > 400
    assert sorted(path.name for path in run_dir.iterdir() if path.name.startswith(".")) == []  # no temporary left
