"""Smoke run of ``benchmarks.ctranslate2_speed`` on an untrained tiny model: the three runtimes
translate the same sentences and the result is printed and appended. No timing is asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("ctranslate2")

from benchmarks import ctranslate2_speed  # noqa: E402


def test_pytorch_and_both_exports_translate_the_same_sentences(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results.jsonl"
    arguments = ["--quick", "--beam", "1", "--threads", "1", "--repeats", "1", "--append", str(results)]
    output = ctranslate2_speed.main(arguments)
    assert json.loads(results.read_text()) == output
    assert "| ctranslate2 int8 |" in capsys.readouterr().out
    rows = {row["contender"]: row for row in output["rows"]}
    assert list(rows) == ["pytorch", "ctranslate2 float32", "ctranslate2 int8"]
    # Greedy: the same token for token. (This babbling model's beams all end at the length limit,
    # where CTranslate2 forces no </s>: beam search may differ on it.)
    assert rows["ctranslate2 float32"]["same_as_pytorch"] == 1.0
    assert rows["ctranslate2 int8"]["size_mb"] < rows["ctranslate2 float32"]["size_mb"]
    assert all(row["sentences_per_s"] > 0 for row in rows.values())
