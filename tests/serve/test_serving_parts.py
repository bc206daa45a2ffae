"""The pieces of a server in-process, without one: a refused request kept out of its batch's
prediction (with and without batching), the checks the gate runs for each head, and how many
sentences a translation server decodes at once."""

from __future__ import annotations

import base64
import functools
import io
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from core.serving.requests import BadRequest, json_object

pytest.importorskip("litserve", reason='serving needs litserve: pip install -e ".[serve]"')

from core.serving.api import BatchedAPI  # noqa: E402 - needs litserve
from nlp import serve as nlp_serve  # noqa: E402
from vision import serve as vision_serve  # noqa: E402


class Doubler:
    """A handler whose model doubles numbers and refuses what is not one."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    def setup(self, device: str) -> None:
        pass

    def decode(self, payload: dict[str, Any]) -> int:
        if not isinstance(payload["x"], int):
            raise BadRequest(422, f"x must be a number, got {payload['x']!r}")
        return payload["x"]

    def predict(self, inputs: list[int]) -> list[int]:
        self.batches.append(list(inputs))
        return [2 * x for x in inputs]

    def encode(self, output: int) -> dict[str, Any]:
        return {"y": output}


@pytest.mark.parametrize("max_batch_size", [1, 4])
def test_a_refused_request_is_answered_alone_and_its_batch_predicted_without_it(max_batch_size: int) -> None:
    handler = Doubler()
    api = BatchedAPI(handler, "/double", max_batch_size, 0.0)
    decoded = [api.decode_request({"x": x}) for x in (1, "two", 3)]
    if max_batch_size == 1:
        outputs = [api.predict(item) for item in decoded]
        assert handler.batches == [[1], [3]]
    else:
        outputs = api.predict(decoded)
        assert handler.batches == [[1, 3]]
    answers = [api.encode_response(output) for output in outputs]
    assert answers[0] == {"y": 2} and answers[2] == {"y": 6}
    assert answers[1].status_code == 422 and answers[1].body == b'{"detail":"x must be a number, got \'two\'"}'


def image_file(width: int, height: int, mode: str = "RGB", format: str = "PNG") -> str:
    buffer = io.BytesIO()
    Image.new(mode, (width, height)).save(buffer, format)
    return base64.b64encode(buffer.getvalue()).decode()


def refusal(check: Any, payload: dict[str, Any]) -> tuple[int, str]:
    with pytest.raises(BadRequest) as refused:
        check(payload)
    return refused.value.status, refused.value.reason


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")  # Pillow warns of the image refused here
def test_the_server_decodes_the_common_image_formats_only() -> None:
    # An EPS header Pillow reads, whose pixels it would ask Ghostscript for.
    eps = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 4 4\n0 0 moveto 4 4 lineto stroke\n%%EOF\n"
    status, reason = refusal(vision_serve.check_request, {"image": base64.b64encode(eps).decode()})
    assert status == 422 and "send a PNG, JPEG" in reason, reason
    for form in ("PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF"):
        encoded = io.BytesIO()
        Image.new("RGB", (4, 4)).save(encoded, format=form)
        assert vision_serve.check_request({"image": base64.b64encode(encoded.getvalue()).decode()}), form


def test_the_classifier_server_keeps_each_image_at_the_models_size_and_ranks_as_vision_predict(
    classifier_checkpoint: Path, tmp_path: Path
) -> None:
    from vision.inference import load_classifier, load_image, preprocess, top_k

    large = io.BytesIO()
    Image.new("RGB", (640, 480), (200, 30, 90)).save(large, format="PNG")
    (tmp_path / "large.png").write_bytes(large.getvalue())
    handler = vision_serve.ClassifierHandler(str(classifier_checkpoint))
    handler.setup("cpu")
    request = handler.decode({"image": base64.b64encode(large.getvalue()).decode(), "top_k": 3})
    size = handler.classifier.hparams.img_size
    assert [tuple(image.shape) for image in request.images] == [(3, size, size)]  # not the 640 x 480 image
    [(ranked, single)] = handler.predict([request])
    classifier = load_classifier(str(classifier_checkpoint), "cpu")
    expected = top_k(classifier, preprocess(classifier, [load_image(tmp_path / "large.png")]), 3)
    assert single and [name for name, _ in ranked[0]] == [name for name, _ in expected[0]]
    assert [p for _, p in ranked[0]] == pytest.approx([p for _, p in expected[0]], rel=1e-5, abs=1e-7)


def test_the_vision_checks_read_headers_only() -> None:
    payload = {"images": [image_file(30, 20), image_file(8, 8, "L", "JPEG")], "top_k": 2}
    assert vision_serve.check_request(payload) is payload
    status, reason = refusal(vision_serve.check_request, {"image": image_file(9_500, 9_500, "1")})
    assert status == 413 and "9500 x 9500 pixels" in reason and f"{Image.MAX_IMAGE_PIXELS:,}" in reason
    assert refusal(vision_serve.check_request, {"image": ""})[0] == 422
    assert refusal(vision_serve.check_request, {"image": image_file(4, 4), "top_k": True})[0] == 422
    side = int((Image.MAX_IMAGE_PIXELS / 2) ** 0.5) + 1  # two images over the limit together, each under it
    status, reason = refusal(vision_serve.check_request, {"images": [image_file(side, side, "1")] * 2})
    assert status == 413 and "the 2 images hold" in reason and "per request" in reason


def test_multipart_fields_become_the_json_of_the_route() -> None:
    png = base64.b64decode(image_file(4, 4))
    encoded = base64.b64encode(png).decode()
    assert vision_serve.form_payload([("image", png), ("top_k", "3")]) == {"image": encoded, "top_k": 3}
    assert vision_serve.form_payload([("image", png), ("image", png)]) == {"images": [encoded, encoded]}
    assert vision_serve.form_payload([("images", png)]) == {"images": [encoded]}
    assert vision_serve.form_payload([("top_k", "x")]) == {"top_k": "x"}  # refused by the check
    assert vision_serve.form_payload([("top_k", "²")]) == {"top_k": "²"}  # a digit int() does not read
    assert vision_serve.form_payload([("top_k", "9" * 5000)]) == {"top_k": "9" * 5000}  # more digits than int() reads
    assert refusal(vision_serve.check_request, {"image": image_file(4, 4), "top_k": "9" * 5000})[0] == 422
    for mixed in ([("image", png), ("images", png)], [("image", png), ("image", png), ("images", png)]):
        assert refusal(vision_serve.check_request, vision_serve.form_payload(mixed))[0] == 422  # as in JSON: image or images
    for top_k in ("²", b"3"):  # a form field sent as a file arrives as bytes
        assert refusal(vision_serve.check_request, {"image": image_file(4, 4), "top_k": top_k})[0] == 422


def test_the_translation_checks() -> None:
    check = functools.partial(nlp_serve.check_request, default_beam=4)
    payload = {"texts": ["winter is coming", "ça vient"], "beam": 4, "nbest": 4, "prefix": "l'hiver"}
    assert check(payload) is payload
    assert refusal(check, {"text": "x" * (nlp_serve.MAX_TEXT_CHARS + 1)})[0] == 413
    assert check({"text": "x" * nlp_serve.MAX_TEXT_CHARS})
    assert check({"text": "a", "nbest": 4}) and check({"text": "a", "prefix": "x" * nlp_serve.MAX_PREFIX_CHARS})
    # nbest is bounded by the beam sent, or by the model's default beam when none is
    assert refusal(check, {"text": "a", "nbest": 5}) == (422, "'nbest' 5 is more than the beam 4, which keeps 4 "
                                                              "hypotheses per text; send 'beam': 5 (or more) with "
                                                              "it, or a smaller 'nbest'")
    assert refusal(check, {"text": "a", "beam": 2, "nbest": 3})[0] == 422
    assert refusal(check, {"text": "a", "prefix": "x" * (nlp_serve.MAX_PREFIX_CHARS + 1)})[0] == 413
    for payload in ({"text": "hi \ud800"}, {"texts": ["ok", "\udcff"]}, {"text": "ok", "prefix": "\ud800"}):
        status, reason = refusal(check, payload)  # JSON escapes can make a lone surrogate, which no tokenizer takes
        assert status == 422 and "lone surrogate" in reason, payload
    assert refusal(check, {"text": "a", "prefix": ["l'hiver"]}) == (
        422, """'prefix' must be a string, got a JSON array; send {"text": "winter is coming", "prefix": "l'hiver"}"""
    )


@pytest.mark.parametrize(("beam", "largest_chunk"), [(1, 64), (4, 64), (32, 8)])
def test_a_wide_beam_decodes_fewer_sentences_at_once(monkeypatch: pytest.MonkeyPatch, beam: int, largest_chunk: int) -> None:
    from nlp import translate

    chunks: list[int] = []

    def hypotheses(translator: Any, sentences: list[str], decoding: translate.Decoding) -> list[list[translate.Translation]]:
        chunks.append(len(sentences))
        return [[translate.Translation(sentence.upper(), 0.0)] for sentence in sentences]

    monkeypatch.setattr(translate, "hypotheses", hypotheses)
    texts = [f"text {index}" for index in range(nlp_serve.MAX_TEXTS)]
    request = nlp_serve.TextRequest(texts, translate.Decoding(beam), None, False)
    [(found, _)] = nlp_serve.TranslatorHandler("unused.ckpt").predict([request])
    assert max(chunks) == largest_chunk and sum(chunks) == len(texts)  # at most 256 hypotheses at once
    assert [ranked[0].text for ranked in found] == [text.upper() for text in texts]  # in order


def test_a_json_body_must_be_an_object() -> None:
    assert json_object(b'{"a": 1}', "{}") == {"a": 1}
    huge = b'{"beam": ' + b"1" * 5_000 + b"}"  # more digits than Python converts to an int
    for body, status in [(b"", 400), (b"\xff", 400), (b"[" * 50_000, 400), (huge, 400), (b"null", 422), (b'"text"', 422)]:
        with pytest.raises(BadRequest) as refused:
            json_object(body, '{"text": "..."}')
        assert refused.value.status == status, body[:10]
