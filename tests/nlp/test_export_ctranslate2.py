"""``python -m nlp.export --format ctranslate2`` against the PyTorch model it came from: on a model
trained on the reverse task (pre-norm and post-norm, as the presets use both), float32 greedy
translations are the checkpoint's token for token, int8 loses less than half a BLEU point (its
products in float32 on x86 CPUs without int8 dot-product instructions),
``nlp.translate`` prints the same for the directory as for the checkpoint, and the directory is
written whole or not at all."""

from __future__ import annotations

import io
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
from sacrebleu.metrics import BLEU

from core.errors import InputError
from nlp import export, translate
from nlp.data.batching import pad_batch
from nlp.data.encoding import encode_sources
from nlp.data.tokenizer import SubwordTokenizer
from nlp.module import TranslationModule, load_translator
from nlp.export import writer
from nlp.export.directory import METADATA, QUANTIZATIONS, TOKENIZER, is_exported_model
from nlp.export.translator import CTranslate2Translator, compute_type
from tests.nlp.trained_translator import MODEL, TEST_PAIRS, train_reverse_translator

pytest.importorskip("ctranslate2")
pytestmark = pytest.mark.xdist_group("ctranslate2")  # one worker trains the two checkpoints, once

SOURCES = [source for source, _ in TEST_PAIRS]
REFERENCES = [target for _, target in TEST_PAIRS]


@pytest.fixture(scope="module", params=["pre-norm", "post-norm"])
def checkpoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp(request.param) / "reverse.ckpt"
    return train_reverse_translator(path, norm_first=request.param == "pre-norm", steps=200)


def exported(checkpoint: Path, quantization: str, capsys: pytest.CaptureFixture[str]) -> Path:
    """The directory ``python -m nlp.export`` writes beside ``checkpoint`` (written once)."""
    out = checkpoint.parent / f"ct2-{quantization}"
    if not out.exists():
        export.main([str(checkpoint), "--format", "ctranslate2", "--quantization", quantization, "--out", str(out)])
        assert capsys.readouterr().out.startswith(f"wrote {out} (ctranslate2, {quantization})")
    return out


def ctranslate2_translator(directory: Path) -> CTranslate2Translator:
    return CTranslate2Translator(directory, threads=1)


def torch_ids(translator: TranslationModule, beam: int) -> list[list[int]]:
    """The checkpoint's generated ids of :data:`SOURCES`, ``</s>`` last, padding dropped."""
    encoded, _ = encode_sources(translator.tokenizer, SOURCES, MODEL["max_len"])
    rows = translator.generate(pad_batch(encoded, translator.tokenizer.pad_id), beam).tolist()
    eos = translator.tokenizer.eos_id
    return [row[: row.index(eos) + 1] for row in rows]


def test_the_quantizations_offered_are_ctranslate2s() -> None:
    from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES

    assert set(QUANTIZATIONS) == set(ACCEPTED_MODEL_TYPES)


def test_float32_greedy_translations_are_the_checkpoints_token_for_token(
    checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    translator = load_translator(checkpoint)
    model = ctranslate2_translator(exported(checkpoint, "float32", capsys))
    encoded, _ = encode_sources(model.tokenizer, SOURCES, model.source_max_len)
    assert model.generate(encoded, beam_size=1) == torch_ids(translator, beam=1)
    hypotheses = translator.translate(SOURCES)
    assert model.translate(SOURCES) == hypotheses
    assert BLEU().corpus_score(hypotheses, [REFERENCES]).score > 80  # a model that translates
    assert model.translate([]) == translator.translate([]) == []  # no sentences, no translations


def test_float32_beam_search_ranks_as_the_checkpoint(checkpoint: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """CTranslate2 renormalizes over the tokens it may generate and we rank its hypotheses by
    the GNMT penalty again, so scores may differ in the last digits: (nearly) every sentence
    is the same, and BLEU too."""
    translator = load_translator(checkpoint)
    model = ctranslate2_translator(exported(checkpoint, "float32", capsys))
    ours, theirs = translator.translate(SOURCES, beam_size=4), model.translate(SOURCES, beam_size=4)
    assert sum(a == b for a, b in zip(ours, theirs)) >= 0.98 * len(SOURCES)
    bleu = [BLEU().corpus_score(hypotheses, [REFERENCES]).score for hypotheses in (ours, theirs)]
    assert bleu[1] == pytest.approx(bleu[0], abs=0.5)


def test_int8_is_within_half_a_bleu_point_of_float32(checkpoint: Path, capsys: pytest.CaptureFixture[str]) -> None:
    float32 = ctranslate2_translator(exported(checkpoint, "float32", capsys)).translate(SOURCES)
    int8 = ctranslate2_translator(exported(checkpoint, "int8", capsys)).translate(SOURCES)
    bleu = {name: BLEU().corpus_score(output, [REFERENCES]).score for name, output in (("float32", float32), ("int8", int8))}
    assert bleu["float32"] > 80 and abs(bleu["int8"] - bleu["float32"]) < 0.5, bleu


NO_VNNI = {"avx": True, "avx2": True, "avx512_vnni": False, "avx_vnni": False, "amx_int8": False}


@pytest.mark.parametrize(
    ("capabilities", "quantization", "device", "expected"),
    [
        (NO_VNNI, "int8", "cpu", "float32"),
        (NO_VNNI, "int16", "cpu", "float32"),
        (NO_VNNI, "int8_float32", "cpu", "float32"),
        (NO_VNNI, "float32", "cpu", "default"),
        (NO_VNNI, "int8", "cuda:0", "default"),
        ({**NO_VNNI, "avx512_vnni": True}, "int8", "cpu", "default"),
        ({**NO_VNNI, "avx_vnni": True}, "int8", "cpu", "default"),
        ({**NO_VNNI, "amx_int8": True}, "int8", "cpu", "default"),
        ({"asimd": True}, "int8", "cpu", "default"),  # not x86
    ],
)
def test_integer_weights_are_computed_in_float32_on_x86_cpus_without_int8_dot_products(
    capabilities: dict[str, bool], quantization: str, device: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: capabilities)
    assert compute_type(quantization, device) == expected


def test_an_int8_directory_loads_in_float32_where_the_cpu_has_no_int8_dot_products(
    checkpoint: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = exported(checkpoint, "int8", capsys)
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: NO_VNNI)
    assert ctranslate2_translator(directory).model.compute_type == "float32"
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {**NO_VNNI, "avx512_vnni": True})
    assert ctranslate2_translator(directory).model.compute_type.startswith("int8")


def run_translate(argv: list[str], stdin: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> list[str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    translate.main([*argv, "--device", "cpu"])
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("beam", [[], ["--beam", "1"]], ids=["checkpoint's beam", "greedy"])
def test_translate_prints_the_same_for_the_directory_as_for_the_checkpoint(
    beam: list[str], checkpoint: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = exported(checkpoint, "float32", capsys)
    stdin = "\n".join([SOURCES[0], "", *SOURCES[1:20]]) + "\n"
    options = [*beam, "--batch-size", "8"]
    from_checkpoint = run_translate([str(checkpoint), *options], stdin, monkeypatch, capsys)
    assert len(from_checkpoint) == 21 and from_checkpoint[1] == ""
    assert run_translate([str(directory), *options], stdin, monkeypatch, capsys) == from_checkpoint
    # At a limit of 3, beam search ranks hypotheses cut at the limit with the </s> forced there.
    texts = [*beam, "--text", SOURCES[3], "--text", SOURCES[4], "--max-len", "3"]
    assert run_translate([str(directory), *texts], "", monkeypatch, capsys) == run_translate(
        [str(checkpoint), *texts], "", monkeypatch, capsys
    )


def nbest_lines(lines: list[str]) -> dict[int, list[tuple[float, str]]]:
    """``--nbest`` output (``index<TAB>score<TAB>text`` lines) as each input line's hypotheses."""
    found: dict[int, list[tuple[float, str]]] = {}
    for line in lines:
        index, score, text = line.split("\t")
        found.setdefault(int(index), []).append((float(score), text))
    return found


@pytest.mark.parametrize(("beam", "prefix"), [("1", "a"), ("4", "h g")])
def test_nbest_with_a_prefix_prints_the_same_best_translations_for_the_directory_as_for_the_checkpoint(
    beam: str, prefix: str, checkpoint: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The best hypothesis of every line is the checkpoint's, every hypothesis starts with the
    prefix, and each directory's list is ranked by its scores; lower hypotheses and the scores are
    compared without n-gram blocking below."""
    directory = exported(checkpoint, "float32", capsys)
    stdin = "\n".join([SOURCES[0], "", *SOURCES[1:12]]) + "\n"
    options = ["--beam", beam, "--nbest", beam, "--prefix", prefix, "--batch-size", "8"]
    outputs = [
        nbest_lines(run_translate([str(model), *options], stdin, monkeypatch, capsys)) for model in (checkpoint, directory)
    ]
    for found in outputs:
        assert sorted(found) == [0, *range(2, 13)]  # the blank line has no hypotheses
        for hypotheses in found.values():
            scores = [score for score, _ in hypotheses]
            assert len(hypotheses) == int(beam) and scores == sorted(scores, reverse=True)
            assert all(text.startswith(prefix) for _, text in hypotheses)
    from_checkpoint, from_directory = outputs
    assert [hypotheses[0][1] for hypotheses in from_directory.values()] == [
        hypotheses[0][1] for hypotheses in from_checkpoint.values()
    ]


@pytest.mark.parametrize("prefix", ["", "h g"])
def test_without_ngram_blocking_nbest_scores_are_the_checkpoints(
    checkpoint: Path, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without n-gram blocking the only difference left is CTranslate2's renormalization over the
    tokens it may generate (not <pad> or <s>): the best hypotheses are the same, every hypothesis
    both backends found has the same score within 0.02, and most lists are the same (lower ones
    may differ where several hypotheses end at the last step: CTranslate2 keeps the best of them
    by its own length normalization)."""
    translator, model = load_translator(checkpoint), ctranslate2_translator(exported(checkpoint, "float32", capsys))
    translator.hparams.no_repeat_ngram_size = model.decoding["no_repeat_ngram_size"] = 0
    decoding = translate.Decoding(4, None, tuple(model.tokenizer.encode(prefix)))
    ours, theirs = (translate.hypotheses(backend, SOURCES[:64], decoding) for backend in (translator, model))
    same_lists = 0
    for mine, its in zip(ours, theirs):
        assert len(its) == 4 and len({text for text, _ in its}) == 4 and mine[0].text == its[0].text
        assert [score for _, score in its] == sorted((score for _, score in its), reverse=True)
        scores = {text: score for text, score in mine}
        for text, score in its:
            assert text.startswith(prefix) and score == pytest.approx(scores.get(text, score), abs=0.02)
        same_lists += [text for text, _ in mine] == [text for text, _ in its]
    assert same_lists >= 0.6 * len(ours)


def test_a_gelu_model_exports_with_matching_log_probabilities(toy_tokenizer: SubwordTokenizer, tmp_path: Path) -> None:
    """Untrained, GELU, post-norm, separate embeddings: the export's own check compares the
    teacher-forced log-probabilities with the PyTorch model's and refuses a difference."""
    torch.manual_seed(0)
    model = dict(MODEL, activation="gelu", norm_first=False, share_embeddings=False)
    translator = TranslationModule(model=model, tokenizer=toy_tokenizer.to_json()).eval()
    assert writer.export_ctranslate2(translator, tmp_path / "gelu") <= writer.FLOAT32_TOLERANCE
    assert is_exported_model(tmp_path / "gelu")


def test_weights_that_are_not_finite_are_refused(toy_tokenizer: SubwordTokenizer, tmp_path: Path) -> None:
    translator = TranslationModule(model=MODEL, tokenizer=toy_tokenizer.to_json()).eval()
    with torch.no_grad():
        translator.net.decoder.layers[1].mlp.fc2.weight[0, 0] = float("nan")
    with pytest.raises(InputError, match="decoder.layers.1.mlp.fc2.weight"):
        writer.export_ctranslate2(translator, tmp_path / "model")
    assert list(tmp_path.iterdir()) == []


def fails(argv: list[str], capsys: pytest.CaptureFixture[str], module: ModuleType = export) -> str:
    """The one ``error:`` line of a command that must exit 2."""
    with pytest.raises(SystemExit) as exit_info:
        module.main(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1 and "Traceback" not in error, error
    return error


def test_an_existing_directory_is_replaced_only_when_forced_and_only_if_an_export(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "model"
    export.main([str(checkpoint), "--out", str(out)])
    assert "--force" in fails([str(checkpoint), "--out", str(out)], capsys)
    (out / METADATA).write_text("{}")  # replaced whole by the forced export
    export.main([str(checkpoint), "--out", str(out), "--force"])
    assert "ctranslate2" in (out / METADATA).read_text()
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    assert "other files" in fails([str(checkpoint), "--out", str(other), "--force"], capsys)
    assert (other / "keep.txt").read_text() == "mine"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["model", "notes"]  # no staging left


def test_a_failed_check_leaves_nothing_behind(
    checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer, "largest_difference", lambda translator, directory, quantization: 1.0)
    with pytest.raises(AssertionError, match="mapped wrongly"):
        writer.export_ctranslate2(load_translator(checkpoint), tmp_path / "model")
    assert list(tmp_path.iterdir()) == []


def test_attention_and_bad_input_are_one_error_line(
    checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = exported(checkpoint, "float32", capsys)
    error = fails([str(directory), "--text", "a b c", "--attention", str(tmp_path / "a.png")], capsys, translate)
    assert "pass the .ckpt" in error
    assert "--max-len must be in 1..32" in fails([str(directory), "--text", "a b", "--max-len", "33"], capsys, translate)
    assert "--quantization" in fails([str(checkpoint), "--out", str(tmp_path / "m"), "--quantization", "int4"], capsys)
    assert str(tmp_path / "missing.ckpt") in fails([str(tmp_path / "missing.ckpt"), "--out", str(tmp_path / "m")], capsys)
    damaged = tmp_path / "damaged"
    shutil.copytree(directory, damaged)
    (damaged / TOKENIZER).write_text('{"truncated')
    assert "is not a tokenizer this toolkit reads" in fails([str(damaged), "--text", "a b"], capsys, translate)
    shutil.copy(directory / TOKENIZER, damaged / TOKENIZER)
    (damaged / "model.bin").write_bytes(b"\x00" * 100)
    assert str(damaged) in fails([str(damaged), "--text", "a b"], capsys, translate)
    (damaged / METADATA).write_text("{")
    assert "not readable JSON" in fails([str(damaged), "--text", "a b"], capsys, translate)
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # as if the package were not installed
    assert 'pip install -e ".[ctranslate2]"' in fails([str(checkpoint), "--out", str(tmp_path / "m")], capsys)
    assert 'pip install -e ".[ctranslate2]"' in fails([str(directory), "--text", "a b"], capsys, translate)
