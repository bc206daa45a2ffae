"""``python -m nlp.evaluate``: the real ``conf/nlp_eval.yaml`` composed with Hydra and a tiny
untrained checkpoint on the toy corpus; scores against sacreBLEU run on the module's own
translations, decoding overrides that take effect, and bad input ending in one ``error:`` line."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig
from sacrebleu.metrics import BLEU, CHRF

from benchmarks import decoding_choice
from core.errors import InputError
from core.training.evaluation import evaluate_checkpoint
from nlp import evaluate
from nlp.head import HEAD
from nlp.decoding import repetition_rate
from nlp.module import load_translator
from nlp.data.tokenizer import SubwordTokenizer
from nlp.data.toy_corpus import TOY_PAIRS
from tests.nlp.conftest import CONF
from tests.nlp.translator_testdata import write_translator_checkpoint
from tests.vision.vision_testdata import write_classifier_checkpoint


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory, toy_tokenizer: SubwordTokenizer) -> Path:
    """An untrained model whose translations repeat a word, which the no-repeat option forbids."""
    return write_translator_checkpoint(tmp_path_factory.mktemp("run") / "tiny.ckpt", toy_tokenizer)


def eval_config(output_dir: Path, *overrides: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(
            "nlp_eval",
            overrides=[f"paths.output_dir={output_dir}", "trainer=cpu", "callbacks.progress_bar=null", *overrides],
        )


def write_corpus(path: Path, checkpoint: Path, beam: int) -> list[str]:
    """A TSV file of the toy sources whose first two targets are the model's own translations, so
    that the scores are neither 0 nor 100; returns its references."""
    sources = [source for source, _ in TOY_PAIRS]
    references = [*load_translator(checkpoint).translate(sources[:2], beam_size=beam), TOY_PAIRS[2][1]]
    path.write_text("".join(f"{source}\t{target.strip()}\n" for source, target in zip(sources, references)))
    return references


@pytest.mark.parametrize("beam", [1, 3])
def test_scores_are_sacrebleus_on_the_modules_translations(beam: int, checkpoint: Path, tmp_path: Path) -> None:
    path = tmp_path / "test.tsv"
    references = write_corpus(path, checkpoint, beam)
    files = ["data=files", f"data.train={path}", f"data.val={path}", f"data.test={path}"]
    cfg = eval_config(tmp_path, f"ckpt_path={checkpoint}", *files, f"module.beam_size={beam}")
    metrics = evaluate_checkpoint(cfg, HEAD)
    assert json.loads((tmp_path / "metrics.json").read_text()) == metrics
    hypotheses = load_translator(checkpoint).translate([source for source, _ in TOY_PAIRS], beam_size=beam)
    bleu, chrf = BLEU(), CHRF()
    assert 0 < metrics["test/bleu"] < 100 and 0 < metrics["test/chrf"] < 100
    assert metrics["test/bleu"] == pytest.approx(bleu.corpus_score(hypotheses, [references]).score)
    assert metrics["test/chrf"] == pytest.approx(chrf.corpus_score(hypotheses, [references]).score)
    assert metrics["test/bleu_signature"] == str(bleu.get_signature()) and "tok:13a" in metrics["test/bleu_signature"]
    assert metrics["test/chrf_signature"] == str(chrf.get_signature())
    assert metrics["test/rep4"] == pytest.approx(repetition_rate(hypotheses, 4))


def test_only_the_evaluated_split_is_read_and_encoded(checkpoint: Path, tmp_path: Path) -> None:
    """Scoring the test split neither reads nor encodes the training pairs: a training file
    without a single pair does not stop it, and the prepared data holds the test split alone."""
    path, train, cache = tmp_path / "test.tsv", tmp_path / "train.tsv", tmp_path / "cache"
    write_corpus(path, checkpoint, beam=1)
    train.write_text("a line without a tab\n")
    files = ["data=files", f"data.train={train}", f"data.val={path}", f"data.test={path}", f"data.cache_dir={cache}"]
    metrics = evaluate_checkpoint(eval_config(tmp_path / "run", f"ckpt_path={checkpoint}", *files), HEAD)
    assert 0 < metrics["test/bleu"] < 100
    (meta,) = cache.glob("nlp/*/meta.json")
    assert list(json.loads(meta.read_text())["splits"]) == ["test"]


def test_no_repeat_option_overrides_the_checkpoint(checkpoint: Path, tmp_path: Path) -> None:
    plain = evaluate_checkpoint(eval_config(tmp_path / "a", f"ckpt_path={checkpoint}", "data=toy"), HEAD)
    assert plain["test/rep4"] > 0  # the untrained model babbles
    cfg = eval_config(
        tmp_path / "b", f"ckpt_path={checkpoint}", "data=toy", "module.no_repeat_ngram_size=2", "split=train"
    )
    blocked = evaluate_checkpoint(cfg, HEAD)
    assert blocked["train/rep4"] == 0.0 and blocked["split"] == "train"


def test_max_decode_len_overrides_the_checkpoints_length_rule(checkpoint: Path, tmp_path: Path) -> None:
    """``module.max_decode_len=3`` caps every translation at 3 tokens (``</s>`` included) as the
    rule ``0 * source length + 3`` does, so the babbling model repeats no 4-gram."""
    capped = evaluate_checkpoint(
        eval_config(tmp_path / "a", f"ckpt_path={checkpoint}", "data=toy", "module.max_decode_len=3"), HEAD
    )
    rule = ["module.max_len_a=0", "module.max_len_b=3"]
    by_rule = evaluate_checkpoint(eval_config(tmp_path / "b", f"ckpt_path={checkpoint}", "data=toy", *rule), HEAD)
    assert capped["test/rep4"] == 0.0
    assert {key: value for key, value in capped.items() if key.startswith("test/")} == {
        key: value for key, value in by_rule.items() if key.startswith("test/")
    }


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["module.beam_size=0"], "module.beam_size must be a whole number of at least 1"),
        (["module.length_penalty=-1"], "module.length_penalty must be"),
        (["split=dev"], "split=dev is not offered"),
        (["data.max_tokens=0"], "data.max_tokens must be"),
    ],
)
def test_bad_settings_are_input_errors(overrides: list[str], message: str, checkpoint: Path, tmp_path: Path) -> None:
    cfg = eval_config(tmp_path, f"ckpt_path={checkpoint}", "data=toy", *overrides)
    with pytest.raises(InputError, match=message):
        evaluate_checkpoint(cfg, HEAD)


@pytest.mark.parametrize("kind", ["vision checkpoint", "garbage", "empty"])
def test_the_command_names_a_checkpoint_it_cannot_use(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "model.ckpt"
    if kind == "vision checkpoint":
        write_classifier_checkpoint(path)
    else:
        path.write_bytes(b"" if kind == "empty" else b"\x00not a checkpoint" * 50)
    monkeypatch.setattr(sys, "argv", ["nlp.evaluate", f"ckpt_path={path}", "data=toy", f"hydra.run.dir={tmp_path / 'run'}"])
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main()
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("error:") and error.count("\n") == 1 and "Traceback" not in error, error
    assert str(path) in error


def test_a_sweep_over_decoding_settings_writes_each_jobs_scores_in_a_table(
    checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep_dir = tmp_path / "sweep"
    monkeypatch.setattr(sys, "argv", [
        "nlp.evaluate", "-m", f"ckpt_path={checkpoint}", "data=toy", "trainer=cpu", "module.beam_size=1,3",
        f"hydra.sweep.dir={sweep_dir}",
    ])
    evaluate.main()
    with (sweep_dir / "trials.csv").open() as file:
        trials = list(csv.DictReader(file))
    assert [trial["module.beam_size"] for trial in trials] == ["1", "3"]
    for trial in trials:  # each job's scores are those of one evaluation with its setting
        alone = evaluate_checkpoint(
            eval_config(tmp_path / trial["job"], f"ckpt_path={checkpoint}", "data=toy", f"module.beam_size={trial['module.beam_size']}"),
            HEAD,
        )
        assert float(trial["test/bleu"]) == pytest.approx(alone["test/bleu"])
        assert float(trial["test/rep4"]) == pytest.approx(alone["test/rep4"])


@pytest.mark.slow
def test_decoding_choice_picks_on_validation_and_scores_the_pick_on_test(checkpoint: Path, tmp_path: Path) -> None:
    result = decoding_choice.main([
        "--model", f"toy={checkpoint}", "--beams", "1", "3", "--length-penalties", "0.6", "--no-repeat", "0", "2",
        "--candidate", "3", "0.6", "2", "--overrides", "data=toy", "trainer=cpu", "--out-dir", str(tmp_path / "sweeps"),
    ])
    row = result["rows"][0]
    assert len(row["val"]) == 4 and row["chosen"] == {
        key: value for key, value in max(row["val"], key=lambda entry: entry["bleu"]).items() if key not in ("bleu", "rep4")
    }
    chosen = row["chosen"]
    settings = [f"module.beam_size={int(chosen['beam_size'])}", f"module.no_repeat_ngram_size={int(chosen['no_repeat_ngram_size'])}"]
    alone = evaluate_checkpoint(eval_config(tmp_path / "alone", f"ckpt_path={checkpoint}", "data=toy", *settings), HEAD)
    assert row["test_chosen"]["bleu"] == pytest.approx(alone["test/bleu"])
    candidate = ["module.beam_size=3", "module.no_repeat_ngram_size=2"]
    alone = evaluate_checkpoint(eval_config(tmp_path / "candidate", f"ckpt_path={checkpoint}", "data=toy", *candidate), HEAD)
    assert row["test_candidate"] == {"bleu": pytest.approx(alone["test/bleu"]), "rep4": pytest.approx(alone["test/rep4"])}
    # Run again over the same directory, the sweeps are read back, not run.
    (tmp_path / "sweeps" / "toy" / "val" / "0" / "metrics.json").unlink()
    assert decoding_choice.main([
        "--model", f"toy={checkpoint}", "--beams", "1", "3", "--length-penalties", "0.6", "--no-repeat", "0", "2",
        "--candidate", "3", "0.6", "2", "--overrides", "data=toy", "trainer=cpu", "--out-dir", str(tmp_path / "sweeps"),
    ])["rows"] == result["rows"]
