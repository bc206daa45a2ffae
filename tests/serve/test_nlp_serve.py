"""``python -m nlp.serve`` on the loopback address with a tiny translator, through real HTTP: its
answers are what ``python -m nlp.translate`` prints for the same sentences, beam, prefix and n-best,
for the checkpoint and for its CTranslate2 export, alone or batched with other requests; every bad
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
# a server takes 10 to 25 s to start on 2 cores; one worker starts the module's, once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("nlp-server")]

SOURCES = [source for source, _ in TOY_PAIRS] + ["l'hiver arrive, ça vient"]


def translated(model: Path, texts: list[str], beam: int | None = None, *options: str) -> list[str]:
    """The lines ``python -m nlp.translate MODEL --text ... [--beam N] [OPTIONS]`` prints."""
    from nlp import translate

    printed = io.StringIO()
    beam_option = [] if beam is None else ["--beam", str(beam)]
    with redirect_stdout(printed):
        translate.main([str(model), *(f"--text={text}" for text in texts), *beam_option, *options, "--device", "cpu"])
    return printed.getvalue().splitlines()


def printed_hypotheses(
    model: Path, texts: list[str], beam: int, nbest: int, prefix: str
) -> list[list[tuple[str, float]]]:
    """The hypotheses ``nlp.translate --nbest`` prints for each text (``index<TAB>score<TAB>text``)."""
    found: list[list[tuple[str, float]]] = [[] for _ in texts]
    for line in translated(model, texts, beam, "--nbest", str(nbest), "--prefix", prefix):
        index, score, text = line.split("\t")
        found[int(index)].append((text, float(score)))
    return found


def assert_same_hypotheses(answer: list[dict[str, object]], printed: list[tuple[str, float]]) -> None:
    """An answer's ``hypotheses`` of one text are the printed ones: the same texts in order, the
    same scores (printed with 4 decimals, computed in another process)."""
    assert [hypothesis["translation"] for hypothesis in answer] == [text for text, _ in printed]
    assert [hypothesis["score"] for hypothesis in answer] == pytest.approx([score for _, score in printed], abs=1e-3)


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


@pytest.mark.parametrize(("beam", "nbest"), [(1, 1), (3, 2)])
def test_nbest_and_a_prefix_answer_the_hypotheses_and_scores_nlp_translate_prints(
    beam: int, nbest: int, server: Server, translator_checkpoint: Path
) -> None:
    prefix = "the north"
    expected = printed_hypotheses(translator_checkpoint, SOURCES, beam, nbest, prefix)
    payload = {"texts": SOURCES, "beam": beam, "nbest": nbest, "prefix": prefix}
    status, answer = post_json(f"{server.url}/translate", payload)
    assert status == 200 and answer["translations"] == [hypotheses[0][0] for hypotheses in expected]
    assert len(answer["hypotheses"]) == len(SOURCES)
    for answered, printed in zip(answer["hypotheses"], expected):
        assert len(printed) == nbest and all(text.startswith(prefix) for text, _ in printed)
        assert_same_hypotheses(answered, printed)
    payload = {"text": SOURCES[0], "beam": beam, "nbest": nbest, "prefix": prefix}
    status, answer = post_json(f"{server.url}/translate", payload)
    assert status == 200 and answer["translation"] == expected[0][0][0]
    assert_same_hypotheses(answer["hypotheses"], expected[0])


def test_requests_with_different_prefixes_batched_together_keep_their_own(
    server: Server, translator_checkpoint: Path
) -> None:
    requests = [{"text": text, "prefix": prefix, "beam": 2} for text in SOURCES for prefix in ("", "the north", "you")]
    with ThreadPoolExecutor(len(requests)) as pool:
        answers = list(pool.map(lambda payload: post_json(f"{server.url}/translate", payload, timeout=60), requests))
    for payload, answer in zip(requests, answers):
        expected = translated(translator_checkpoint, [payload["text"]], 2, "--prefix", payload["prefix"])
        assert answer == (200, {"translation": expected[0]}) and expected[0].startswith(payload["prefix"])


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
    "nbest 0": ({"text": "winter", "nbest": 0}, 422, "'nbest' must be a whole number from 1 to 32"),
    "an nbest that is no number": ({"text": "winter", "nbest": "2"}, 422, "'nbest' must be a whole number"),
    "nbest over the default beam": ({"text": "winter", "nbest": 5}, 422, "'nbest' 5 is more than the beam 4"),
    "nbest over the beam": ({"text": "winter", "beam": 2, "nbest": 3}, 422, "send 'beam': 3 (or more)"),
    "a prefix that is no string": ({"text": "winter", "prefix": 42}, 422, "'prefix' must be a string"),
    "a 2,000-character prefix": ({"text": "winter", "prefix": "n" * 2_000}, 413, "more than the 1,000 a prefix"),
    "a prefix longer than the model's max_len": (
        {"text": "winter", "prefix": "the night is dark " * 20}, 422, "subwords, more than the 63 a translation"
    ),
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
        printed = printed_hypotheses(exported, SOURCES, 2, 2, "the north")
        payload = {"texts": SOURCES, "beam": 2, "nbest": 2, "prefix": "the north"}
        status, answer = post_json(f"{server.url}/translate", payload)
        assert status == 200
        for answered, hypotheses in zip(answer["hypotheses"], printed, strict=True):
            assert_same_hypotheses(answered, hypotheses)
        assert post_json(f"{server.url}/translate", {"text": ""})[0] == 422

