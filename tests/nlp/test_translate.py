"""``python -m nlp.translate`` on a tiny untrained checkpoint: one output line per input line
whatever the bytes, the cross-attention figure, and bad input ending in one ``error:`` line."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

from nlp import translate
from nlp.analysis.alignment import alignment_figure, cross_attention
from nlp.module import load_translator
from nlp.data.tokenizer import SubwordTokenizer
from nlp.data.toy_corpus import TOY_PAIRS
from tests.nlp.translator_testdata import TINY, write_translator_checkpoint
from tests.vision.vision_testdata import write_classifier_checkpoint

SOURCES = [source for source, _ in TOY_PAIRS]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory, toy_tokenizer: SubwordTokenizer) -> Path:
    return write_translator_checkpoint(tmp_path_factory.mktemp("run") / "tiny.ckpt", toy_tokenizer)


def run(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], stdin: bytes = b""
) -> tuple[list[str], str]:
    """``main(argv)`` with ``stdin`` as standard input; its stdout lines and its stderr."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    translate.main([*argv, "--device", "cpu"])
    captured = capsys.readouterr()
    return captured.out.splitlines(), captured.err


def test_every_input_line_gets_one_output_line_whatever_its_bytes(
    checkpoint: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        SOURCES[0].encode(),
        b"",
        b"winter \xff\xfe is coming",  # not UTF-8
        b"   ",
        f"{SOURCES[2]}\u2028still one line".encode(),  # a Unicode line separator is not a line break
        SOURCES[1].encode() + b"\r",  # CRLF line ending
        b"\xc3",  # a truncated two-byte sequence
    ]
    out, err = run([str(checkpoint), "--beam", "2", "--batch-size", "2"], monkeypatch, capsys, b"\n".join(lines) + b"\n")
    assert len(out) == len(lines)
    translator = load_translator(checkpoint)
    expected = translator.translate(
        [SOURCES[0], "winter \ufffd\ufffd is coming", f"{SOURCES[2]}\u2028still one line", SOURCES[1], "\ufffd"], 2
    )
    assert [out[0], out[2], out[4], out[5], out[6]] == [" ".join(text.splitlines()) for text in expected]
    assert out[1] == out[3] == ""
    assert err.strip() == (
        "warning: 2 input line(s) held bytes that are not UTF-8; each invalid sequence was replaced by U+FFFD "
        "before translating"
    )


def test_a_command_line_text_that_is_not_utf8_is_read_as_stdin_is(
    checkpoint: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python keeps argv bytes that are not UTF-8 as lone surrogates, which the tokenizer cannot
    take: they become U+FFFD."""
    text = b"winter \xff is coming".decode("utf-8", "surrogateescape")
    out, _ = run([str(checkpoint), "--text", text, "--beam", "1"], monkeypatch, capsys)
    (expected,) = load_translator(checkpoint).translate(["winter \ufffd is coming"], 1)
    assert out == [" ".join(expected.splitlines())]


def test_attention_rows_are_the_generated_subwords(checkpoint: Path) -> None:
    translator = load_translator(checkpoint)
    alignment = cross_attention(translator, SOURCES[1], beam_size=1)
    assert alignment.translation == translator.translate([SOURCES[1]])[0]
    source = translator.source_batch([SOURCES[1]])
    assert alignment.source[-1] == "</s>" and len(alignment.source) == source.shape[1]
    assert alignment.target[-1] == "</s>" and len(alignment.layers) == TINY["decoder_depth"]
    for weights in alignment.layers:
        assert weights.shape == (len(alignment.target), len(alignment.source))
        torch.testing.assert_close(weights.sum(dim=-1), torch.ones(len(alignment.target)))
    # Row t comes from the decoder position that predicted target subword t: teacher forcing the
    # generated prefix predicts each generated subword again (greedy search picks the argmax; the
    # final </s> may be forced by the length limit, as it is for this babbling model).
    generated = translator.generate(source)[0].tolist()
    target = generated[: generated.index(translator.net.eos_id) + 1]
    assert len(target) == len(alignment.target) > 2
    decoder_input = torch.tensor([[translator.net.bos_id, *target[:-1]]])
    with torch.no_grad():
        predicted = translator.net(source, decoder_input)[0].argmax(dim=-1).tolist()
    assert predicted[:-1] == target[:-1]


@pytest.mark.parametrize(("layer", "titles"), [(None, ["decoder layer 1", "decoder layer 2"]), (2, ["decoder layer 2"])])
def test_attention_figure_has_a_panel_per_layer_or_the_chosen_one(
    layer: int | None, titles: list[str], checkpoint: Path
) -> None:
    figure = alignment_figure(cross_attention(load_translator(checkpoint), SOURCES[0]), layer)
    assert [axis.get_title() for axis in figure.axes if axis.get_title()] == titles


def test_attention_option_prints_the_translation_and_writes_the_png(
    checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = [str(checkpoint), "--text", SOURCES[0], "--beam", "1", "--attention", str(tmp_path / "align")]
    out, err = run([*arguments, "--attention-layer", "2"], monkeypatch, capsys)
    written = tmp_path / "align.png"
    assert out == [" ".join(load_translator(checkpoint).translate([SOURCES[0]])[0].splitlines())]
    assert err.strip() == f"wrote {written}"
    with Image.open(written) as picture:
        assert picture.format == "PNG" and picture.size[1] > 300


def test_an_attention_figure_that_cannot_be_written_is_one_error_line(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("a file, not a folder")
    out = tmp_path / "notes.txt" / "align.png"
    with pytest.raises(SystemExit) as exit_info:
        translate.main([str(checkpoint), "--text", SOURCES[0], "--beam", "1", "--attention", str(out), "--device", "cpu"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith("error:") and str(out) in error and "Traceback" not in error, error
    assert (tmp_path / "notes.txt").read_text() == "a file, not a folder"


def test_nbest_prints_each_lines_hypotheses_ranked_the_first_its_translation(
    checkpoint: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin = f"{SOURCES[0]}\n\n{SOURCES[1]}\n{SOURCES[2]}\n".encode()
    translations, _ = run([str(checkpoint), "--beam", "3"], monkeypatch, capsys, stdin)
    out, _ = run([str(checkpoint), "--beam", "3", "--nbest", "3"], monkeypatch, capsys, stdin)
    rows = [line.split("\t") for line in out]
    assert [int(index) for index, _, _ in rows] == [0, 0, 0, 2, 2, 2, 3, 3, 3]  # none for the blank line
    for line in (0, 2, 3):
        hypotheses = [(float(score), text) for index, score, text in rows if int(index) == line]
        scores, texts = [score for score, _ in hypotheses], [text for _, text in hypotheses]
        assert scores == sorted(scores, reverse=True) and len(set(texts)) == 3
        assert texts[0] == translations[line]
    two_best, _ = run([str(checkpoint), "--beam", "3", "--nbest", "2"], monkeypatch, capsys, stdin)
    assert two_best == [*out[0:2], *out[3:5], *out[6:8]]  # the same search, its two best


@pytest.mark.parametrize("beam", ["1", "4"])
def test_every_translation_starts_with_the_prefix(
    beam: str, checkpoint: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin = "".join(f"{source}\n" for source in SOURCES).encode()
    free, _ = run([str(checkpoint), "--beam", beam], monkeypatch, capsys, stdin)
    assert free == [" ".join(text.splitlines()) for text in load_translator(checkpoint).translate(SOURCES, int(beam))]
    prefix = "the north remembers,"
    assert not any(line.startswith(prefix) for line in free)
    forced, _ = run([str(checkpoint), "--beam", beam, "--prefix", prefix], monkeypatch, capsys, stdin)
    assert len(forced) == len(SOURCES) and all(line.startswith(prefix) and line != prefix for line in forced), forced


def damaged(kind: str, checkpoint: Path, path: Path) -> Path:
    """A checkpoint file ``path`` that cannot be translated with."""
    if kind == "truncated":
        path.write_bytes(checkpoint.read_bytes()[:-200])
    elif kind == "garbage":
        path.write_bytes(bytes(range(256)) * 8)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "directory":
        path.mkdir()
    elif kind == "vision checkpoint":
        write_classifier_checkpoint(path)
    return path


@pytest.mark.parametrize("kind", ["truncated", "garbage", "empty", "directory", "vision checkpoint", "missing"])
def test_an_unusable_checkpoint_is_one_error_line_naming_it(
    kind: str, checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = damaged(kind, checkpoint, tmp_path / "model.ckpt")
    with pytest.raises(SystemExit) as exit_info:
        translate.main([str(path), "--text", "winter is coming", "--device", "cpu"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("error:") and error.count("\n") == 1 and "Traceback" not in error, error
    assert str(path) in error


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--attention", "a.png"], "give exactly one --text"),
        (["--text", "a", "--text", "b", "--attention", "a.png"], "give exactly one --text"),
        (["--text", "a", "--attention-layer", "1"], "give --attention FILE.png too"),
        (["--text", "a", "--attention", "a.png", "--attention-layer", "3"], "decoder layers 1..2"),
        (["--text", "a", "--attention", "a.jpg"], "a.png"),
        (["--text", "a", "--max-len", "65"], "--max-len must be in 1..64"),
        (["--text", "a", "--device", "tpu:9"], "--device"),
        (["--text", "a", "--nbest", "5"], "--nbest 5 is more than the beam size 4: beam search keeps 4 hypotheses per "
                                          "sentence; pass --beam 5 (or more), or a smaller --nbest"),
        (["--text", "a", "--beam", "2", "--nbest", "3"], "pass --beam 3 (or more)"),
        (["--text", "a", "--nbest", "0"], "argument --nbest: expected a whole number of at least 1, got 0"),
        (["--text", "a", "--prefix", "winter is coming " * 30], "subwords, more than the 63 a translation of this"),
        (["--text", "a", "--nbest", "2", "--attention", "a.png"], "leave out --nbest and --prefix"),
    ],
)
def test_bad_options_are_one_error_line(
    arguments: list[str], message: str, checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        translate.main([str(checkpoint), *(a if not a.endswith(("png", "jpg")) else str(tmp_path / a) for a in arguments)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("error:") and error.count("\n") == 1 and message in error, error
    assert not list(tmp_path.iterdir())
