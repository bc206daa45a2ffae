"""``python -m nlp.serve`` on the loopback address with a tiny translator, through real HTTP: its
answers are what ``python -m nlp.translate`` prints for the same sentences and beam, for the
checkpoint and for its CTranslate2 export, alone or batched with other requests; every bad
request gets its 4xx with a one-line reason and the next good request is answered."""

from __future__ import annotations

import io
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from nlp.data.toy_corpus import TOY_PAIRS
from tests.serve.server import Server, get, multipart, post, post_json

pytest.importorskip("litserve", reason='serving needs litserve: pip install -e ".[serve]"')

SOURCES = [source for source, _ in TOY_PAIRS] + ["l'hiver arrive, ça vient"]


def translated(model: Path, texts: list[str], beam: int | None = None) -> list[str]:
    """The lines ``python -m nlp.translate MODEL --text ... [--beam N]`` prints."""
    from nlp import translate

    printed = io.StringIO()
    beam_option = [] if beam is None else ["--beam", str(beam)]
    with redirect_stdout(printed):
        translate.main([str(model), *(f"--text={text}" for text in texts), *beam_option, "--device", "cpu"])
    return printed.getvalue().splitlines()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, translator_checkpoint: Path):
    log = tmp_path_factory.mktemp("nlp-serve") / "server.log"
    with Server("nlp.serve", translator_checkpoint, log, "--max-batch-size", "8", "--batch-timeout", "0.05") as running:
        yield running


def test_one_text_answers_what_nlp_translate_prints(server: Server, translator_checkpoint: Path) -> None:
    for text in SOURCES:
        expected = translated(translator_checkpoint, [text])
        assert post_json(f"{server.url}/translate", {"text": text}) == (200, {"translation": expected[0]}), text


@pytest.mark.parametrize("beam", [1, 2])
def test_several_texts_and_a_beam_answer_what_nlp_translate_prints(
    beam: int, server: Server, translator_checkpoint: Path
) -> None:
    expected = translated(translator_checkpoint, SOURCES, beam)
    assert post_json(f"{server.url}/translate", {"texts": SOURCES, "beam": beam}) == (200, {"translations": expected})


def test_concurrent_requests_of_several_beams_are_batched_with_the_same_answers(
    server: Server, translator_checkpoint: Path
) -> None:
    requests = [{"text": text, "beam": beam} for text in SOURCES for beam in (1, 3)] + [{"texts": SOURCES[:2]}]
    with ThreadPoolExecutor(len(requests)) as pool:
        answers = list(pool.map(lambda payload: post_json(f"{server.url}/translate", payload, timeout=60), requests))
    for payload, answer in zip(requests[:-1], answers):
        assert answer == (200, {"translation": translated(translator_checkpoint, [payload["text"]], payload["beam"])[0]})
    assert answers[-1] == (200, {"translations": translated(translator_checkpoint, SOURCES[:2])})


BAD_REQUESTS = {
    "an empty text": ({"text": ""}, 422, "'text' is empty"),
    "a blank text": ({"text": " \t\n"}, 422, "'text' is empty"),
    "an empty text among others": ({"texts": ["winter is coming", ""]}, 422, "texts[1] is empty"),
    "a 1 MB text": ({"text": "winter " * 150_000}, 413, "1,050,000 characters"),
    "a text that is no string": ({"text": 42}, 422, "must be a string"),
    "texts that are no list": ({"texts": "winter is coming"}, 422, "non-empty array"),
    "too many texts": ({"texts": ["winter"] * 65}, 413, "more than the 64"),
    "text and texts": ({"text": "a", "texts": ["b"]}, 422, "either 'text' or 'texts'"),
    "beam 0": ({"text": "winter", "beam": 0}, 422, "'beam' must be a whole number from 1 to 32"),
    "beam 1000": ({"text": "winter", "beam": 1000}, 422, "'beam' must be a whole number from 1 to 32"),
    "a beam that is no number": ({"text": "winter", "beam": "4"}, 422, "'beam' must be a whole number"),
    "an unknown key": ({"text": "winter", "beam_size": 2}, 422, "unknown key 'beam_size'"),
}


@pytest.mark.parametrize("case", BAD_REQUESTS, ids=str)
def test_a_bad_request_gets_its_4xx_and_the_next_good_one_is_answered(
    case: str, server: Server, translator_checkpoint: Path
) -> None:
    payload, status, reason = BAD_REQUESTS[case]
    answer = post_json(f"{server.url}/translate", payload, timeout=30)
    assert answer[0] == status and reason in answer[1]["detail"] and "\n" not in answer[1]["detail"], answer
    assert_still_answers(server, translator_checkpoint)


MALFORMED = {
    "invalid JSON": (b'{"text": "winter', "application/json", 400, "not valid JSON"),
    "JSON nested too deeply": (b"[" * 100_000, "application/json", 400, "nests JSON too deeply"),
    "not UTF-8": (b'{"text": "\xff\xfe"}', "application/json", 400, "not valid JSON"),
    "a wrong content type": (b"winter is coming", "text/plain", 415, "content type text/plain"),
    "a multipart upload": (*multipart([("text", "winter is coming")]), 415, "content type multipart/form-data"),
}


@pytest.mark.parametrize("case", MALFORMED, ids=str)
def test_a_malformed_body_gets_its_4xx_and_the_next_good_one_is_answered(
    case: str, server: Server, translator_checkpoint: Path
) -> None:
    body, content_type, status, reason = MALFORMED[case]
    answer = post(f"{server.url}/translate", body, content_type, timeout=30)
    assert answer[0] == status and reason in answer[1]["detail"] and "\n" not in answer[1]["detail"], answer
    assert_still_answers(server, translator_checkpoint)


def assert_still_answers(server: Server, model: Path) -> None:
    assert post_json(f"{server.url}/translate", {"text": SOURCES[1]}) == (200, {"translation": translated(model, SOURCES[1:2])[0]})


@pytest.mark.slow
def test_the_ctranslate2_export_answers_what_nlp_translate_prints_for_it(
    tmp_path: Path, translator_checkpoint: Path
) -> None:
    pytest.importorskip("ctranslate2")
    exported = tmp_path / "ct2"
    subprocess.run(
        [sys.executable, "-m", "nlp.export", str(translator_checkpoint), "--format", "ctranslate2", "--out", str(exported)],
        check=True, capture_output=True, timeout=300,
    )
    with Server("nlp.serve", exported, tmp_path / "server.log") as server:
        status, info = get(f"{server.url}/info")
        assert status == 200 and info["model"]["backend"] == "ctranslate2"
        for beam in (1, 2):
            expected = translated(exported, SOURCES, beam)
            assert post_json(f"{server.url}/translate", {"texts": SOURCES, "beam": beam}) == (200, {"translations": expected})
        expected = translated(exported, SOURCES[:1])
        assert post_json(f"{server.url}/translate", {"text": SOURCES[0]}) == (200, {"translation": expected[0]})
        assert post_json(f"{server.url}/translate", {"text": ""})[0] == 422

