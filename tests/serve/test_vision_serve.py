"""``python -m vision.serve`` on the loopback address with a tiny classifier, through real HTTP:
its answers are those of ``python -m vision.predict`` for the same images, whether sent as base64
JSON or multipart uploads, alone or batched with others; every bad request gets its 4xx with a
one-line reason and the next good request is answered; SIGTERM, or Ctrl-C to the whole process
group, answers the request in flight and exits 0, and a second signal forces the stop (143); a
worker that dies is started again."""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import os
import signal
import struct
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests.serve.server import Server, b64, get, multipart, post, post_json

pytest.importorskip("litserve", reason='serving needs litserve: pip install -e ".[serve]"')
# a server takes 10 to 25 s to start on 2 cores; one worker starts the module's, once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vision-server")]

BODY_LIMIT = 200_000  # --max-body-bytes of the test server


def predicted(checkpoint: Path, paths: list[Path], top_k: int = 5) -> list[list[dict[str, Any]]]:
    """The predictions ``python -m vision.predict --json`` prints for ``paths`` (one batch)."""
    from vision import predict

    printed = io.StringIO()
    with redirect_stdout(printed):
        predict.main([str(checkpoint), *map(str, paths), "--json", "--top-k", str(top_k), "--device", "cpu"])
    return [result["predictions"] for result in json.loads(printed.getvalue())["results"]]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, classifier_checkpoint: Path):
    log = tmp_path_factory.mktemp("vision-serve") / "server.log"
    options = ["--max-batch-size", "8", "--batch-timeout", "0.05", "--max-body-bytes", str(BODY_LIMIT)]
    with Server("vision.serve", classifier_checkpoint, log, *options) as running:
        yield running


@pytest.fixture(scope="module")
def expected(classifier_checkpoint: Path, images: list[Path]) -> dict[Path, list[dict[str, Any]]]:
    """vision.predict's top-5 of each image, classified alone."""
    return {path: predicted(classifier_checkpoint, [path])[0] for path in images}


def assert_close(answer: dict[str, Any], predictions: list[dict[str, Any]]) -> None:
    """The same classes in the same order, the probabilities equal up to float32 rounding (a
    batch of another composition may round the last bits differently)."""
    assert [entry["class"] for entry in answer["predictions"]] == [entry["class"] for entry in predictions]
    got = [entry["probability"] for entry in answer["predictions"]]
    assert got == pytest.approx([entry["probability"] for entry in predictions], rel=1e-5, abs=1e-7)


def assert_answers(reply: tuple[int, Any], predictions: list[list[dict[str, Any]]], batched: bool = False) -> None:
    """A 200 answering one image (``{"predictions": ...}``) or, ``batched``, several
    (``{"results": [...]}``), each close to its entry of ``predictions`` (:func:`assert_close`)."""
    status, answer = reply
    assert status == 200, answer
    assert set(answer) == {"results" if batched else "predictions"}, answer
    results = answer["results"] if batched else [answer]
    assert len(results) == len(predictions), answer
    for result, expected in zip(results, predictions):
        assert_close(result, expected)


def test_health_and_info(server: Server) -> None:
    assert get(f"{server.url}/health") == (200, "ok")
    status, info = get(f"{server.url}/info")
    assert status == 200 and info["model"]["classes"] == ["cat", "dog", "owl"]


def test_one_image_answers_what_vision_predict_prints(server: Server, expected: dict) -> None:
    for path, predictions in expected.items():
        assert_answers(post_json(f"{server.url}/predict", {"image": b64(path)}), [predictions])


def test_several_images_and_top_k_answer_what_vision_predict_prints(
    server: Server, classifier_checkpoint: Path, images: list[Path]
) -> None:
    answer = post_json(f"{server.url}/predict", {"images": [b64(path) for path in images], "top_k": 2})
    assert_answers(answer, predicted(classifier_checkpoint, images, top_k=2), batched=True)
    answer = post_json(f"{server.url}/predict", {"image": b64(images[0]), "top_k": 50})
    # More than the 3 classes: all of them, as vision.predict shows.
    assert_answers(answer, predicted(classifier_checkpoint, images[:1], top_k=50))


def test_multipart_uploads_answer_as_base64_json(server: Server, expected: dict, images: list[Path]) -> None:
    body, content_type = multipart([("image", (images[1].name, images[1].read_bytes()))])
    assert_answers(post(f"{server.url}/predict", body, content_type), [expected[images[1]]])
    fields = [("images", (path.name, path.read_bytes())) for path in images[:2]] + [("top_k", "1")]
    body, content_type = multipart(fields)
    answer = post(f"{server.url}/predict", body, content_type)
    assert_answers(answer, [expected[path][:1] for path in images[:2]], batched=True)


def test_concurrent_requests_are_batched_with_the_same_answers(server: Server, expected: dict) -> None:
    paths = list(expected) * 4
    with ThreadPoolExecutor(len(paths)) as pool:
        answers = list(pool.map(lambda path: post_json(f"{server.url}/predict", {"image": b64(path)}, timeout=60), paths))
    for path, reply in zip(paths, answers):
        assert_answers(reply, [expected[path]])


# ----------------------------------------------------------------------------- bad requests


def png(width: int = 64, height: int = 64, seed: int = 0) -> bytes:
    """A PNG of random (incompressible) pixels."""
    buffer = io.BytesIO()
    pixels = np.random.default_rng(seed).integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(buffer, "PNG")
    return buffer.getvalue()


def decompression_bomb() -> bytes:
    """A 10,000 x 10,000 PNG of one colour: a few kilobytes that decode to 100 million pixels,
    more than Pillow's Image.MAX_IMAGE_PIXELS."""
    buffer = io.BytesIO()
    Image.new("1", (10_000, 10_000)).save(buffer, "PNG")
    return buffer.getvalue()


def png_header(width: int, height: int) -> bytes:
    """The header of a ``width`` x ``height`` RGB PNG and the start of its first row: an image
    the server can only refuse from its header (decoding it would fail as truncated)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    return b"\x89PNG\r\n\x1a\n" + header + chunk(b"IDAT", zlib.compress(bytes(64)))


def json_body(payload: Any) -> tuple[bytes, str]:
    return json.dumps(payload).encode(), "application/json"


BAD_REQUESTS = {
    "not an image": (lambda: json_body({"image": b64(b"plain text, not an image")}), 422, "'image' is not an image file"),
    "a truncated image": (lambda: json_body({"image": b64(png()[:2000])}), 422, "'image' cannot be decoded"),
    "a truncated image among good ones": (
        lambda: json_body({"images": [b64(png()), b64(png()[:2000])]}), 422, "images[1] cannot be decoded"
    ),
    "a decompression bomb": (lambda: json_body({"image": b64(decompression_bomb())}), 413, "10000 x 10000 pixels"),
    "a 20,000 x 20,000 image": (lambda: json_body({"image": b64(png_header(20_000, 20_000))}), 413, "too large to decode"),
    "invalid JSON": (lambda: (b'{"image": "iVBOR', "application/json"), 400, "not valid JSON"),
    "a JSON array": (lambda: json_body([b64(png())]), 422, "JSON array, not an object"),
    "a wrong content type": (lambda: (b64(png()).encode(), "text/plain"), 415, "content type text/plain"),
    "no content type": (lambda: (b64(png()).encode(), ""), 415, "content type (none)"),
    "a body over the limit": (lambda: json_body({"image": "A" * BODY_LIMIT}), 413, f"{BODY_LIMIT:,} bytes"),
    "not base64": (lambda: json_body({"image": "not base64!"}), 422, "not valid base64"),
    "an image that is no string": (lambda: json_body({"image": 3}), 422, "must be a base64 string"),
    "no image": (lambda: json_body({"top_k": 3}), 422, "either 'image' or 'images'"),
    "an empty list": (lambda: json_body({"images": []}), 422, "non-empty array"),
    "too many images": (lambda: json_body({"images": [b64(png(8, 8))] * 65}), 413, "more than the 64"),
    "an unknown key": (lambda: json_body({"image": b64(png()), "topk": 3}), 422, "unknown key 'topk'"),
    "top_k 0": (lambda: json_body({"image": b64(png()), "top_k": 0}), 422, "'top_k' must be a whole number"),
    "a malformed multipart body": (
        lambda: (b"--x\r\nno headers\r\n", "multipart/form-data; boundary=y"), 400, "multipart"
    ),
    "a multipart field unknown": (lambda: multipart([("picture", ("a.png", png()))]), 422, "unknown key 'picture'"),
}


@pytest.mark.parametrize("case", BAD_REQUESTS, ids=str)
def test_a_bad_request_gets_its_4xx_and_the_next_good_one_is_answered(
    case: str, server: Server, expected: dict
) -> None:
    build, status, reason = BAD_REQUESTS[case]
    body, content_type = build()
    answer = post(f"{server.url}/predict", body, content_type, timeout=30)
    assert answer[0] == status, answer
    assert reason in answer[1]["detail"] and "\n" not in answer[1]["detail"], answer
    path, predictions = next(iter(expected.items()))
    assert_answers(post_json(f"{server.url}/predict", {"image": b64(path)}), [predictions])


def test_a_chunked_body_over_the_limit_is_refused_as_it_arrives(server: Server, expected: dict) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    chunks = (b'{"image": "' + b"A" * 50_000 for _ in range(8))  # 400 kB without a Content-Length
    try:
        connection.request("POST", "/predict", body=chunks, headers={"Content-Type": "application/json"}, encode_chunked=True)
        response = connection.getresponse()
        assert response.status == 413 and "--max-body-bytes" in json.loads(response.read())["detail"]
    finally:
        connection.close()
    path, predictions = next(iter(expected.items()))
    assert_answers(post_json(f"{server.url}/predict", {"image": b64(path)}), [predictions])


def test_a_bad_image_batched_with_good_ones_is_answered_alone(server: Server, expected: dict) -> None:
    paths = list(expected)
    payloads = [{"image": b64(path)} for path in paths] + [{"image": b64(png()[:2000])}]
    with ThreadPoolExecutor(len(payloads)) as pool:
        answers = list(pool.map(lambda payload: post_json(f"{server.url}/predict", payload, timeout=60), payloads))
    for path, reply in zip(paths, answers):
        assert_answers(reply, [expected[path]])
    assert answers[-1][0] == 422


def test_other_methods_and_paths_get_a_4xx(server: Server) -> None:
    assert get(f"{server.url}/predict")[0] == 405
    assert post_json(f"{server.url}/classify", {"image": ""})[0] == 404


# ----------------------------------------------------------------------------- stopping


@pytest.mark.parametrize("ctrl_c", [False, True], ids=["SIGTERM", "Ctrl-C"])
def test_stopping_answers_the_request_in_flight_and_exits_0(
    ctrl_c: bool, tmp_path: Path, classifier_checkpoint: Path, expected: dict
) -> None:
    path, predictions = next(iter(expected.items()))
    # A batch waits up to 2 s for company: the request is in flight when the signal comes. Ctrl-C
    # reaches the inference worker too, which must leave it to the server.
    server = Server("vision.serve", classifier_checkpoint, tmp_path / "server.log", "--batch-timeout", "2")
    with server:
        answers = []
        client = threading.Thread(
            target=lambda: answers.append(post_json(f"{server.url}/predict", {"image": b64(path)}, timeout=60))
        )
        client.start()
        time.sleep(0.5)
        status = server.stop(ctrl_c=ctrl_c)
        client.join(timeout=60)
    assert status == 0, server.output()
    assert answers == [(200, {"predictions": predictions})], server.output()
    with pytest.raises(OSError):
        get(f"{server.url}/health", timeout=5)


def spawned_workers(group: int) -> list[int]:
    """The pids of the processes of process group ``group`` that multiprocessing spawned."""
    pids = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError, ValueError):
            if entry.name.isdigit() and os.getpgid(int(entry.name)) == group:
                if b"multiprocessing.spawn" in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
    return pids


def ctrl_c_ignored(pid: int, *sets: str) -> bool:
    """Whether process ``pid`` has SIGINT in one of its ``sets`` of signals (``/proc/PID/status``:
    ``SigIgn`` ignored, ``SigBlk`` blocked; both by default)."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    masks = [int(line.split()[1], 16) for line in lines if line.split(":")[0] in (sets or ("SigIgn", "SigBlk"))]
    return any(mask & (1 << (signal.SIGINT - 1)) for mask in masks)


def test_ctrl_c_while_the_workers_start_stops_without_a_traceback_and_exits_130(
    tmp_path: Path, classifier_checkpoint: Path
) -> None:
    server = Server("vision.serve", classifier_checkpoint, tmp_path / "server.log")
    try:
        deadline = time.monotonic() + 60
        while not spawned_workers(server.process.pid) and time.monotonic() < deadline and server.process.poll() is None:
            time.sleep(0.05)
        (worker,) = spawned_workers(server.process.pid)
        time.sleep(0.3)  # the worker is importing torch: long before it is ready
        assert ctrl_c_ignored(worker, "SigIgn")  # Ctrl-C ignored from its start
        status = server.stop(ctrl_c=True)
    finally:
        server.kill()
    assert status == 130, server.output()
    assert "Traceback" not in server.output() and "KeyboardInterrupt" not in server.output(), server.output()


def test_a_worker_that_dies_is_started_again_and_the_server_goes_on(
    tmp_path: Path, classifier_checkpoint: Path, expected: dict
) -> None:
    path, predictions = next(iter(expected.items()))
    with Server("vision.serve", classifier_checkpoint, tmp_path / "server.log") as server:
        (worker,) = spawned_workers(server.process.pid)
        os.kill(worker, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while spawned_workers(server.process.pid) in ([], [worker]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server.process.poll() is None, server.output()
        (replacement,) = spawned_workers(server.process.pid)
        assert replacement != worker
        assert ctrl_c_ignored(replacement)  # ignored or blocked: it is left to the server, as the first worker's
        assert_answers(post_json(f"{server.url}/predict", {"image": b64(path)}, timeout=60), [predictions])
        status = server.stop()
    assert status == 0, server.output()
    assert spawned_workers(server.process.pid) == []  # the replacement stopped with the server


def test_a_worker_that_cannot_load_the_model_again_stops_the_server_with_one_error_line(
    tmp_path: Path, classifier_checkpoint: Path
) -> None:
    checkpoint = tmp_path / "classifier.ckpt"
    checkpoint.write_bytes(classifier_checkpoint.read_bytes())
    with Server("vision.serve", checkpoint, tmp_path / "server.log") as server:
        (worker,) = spawned_workers(server.process.pid)
        checkpoint.unlink()  # its replacement cannot load it: started again every 2 s, it would fail for ever
        os.kill(worker, signal.SIGKILL)
        status = server.process.wait(timeout=60)
    errors = [line for line in server.output().splitlines() if line.startswith("error:")]
    assert status == 2 and errors == ["error: the inference workers could not load the model on cpu (the log above "
                                      "says why); pass fewer --workers, or another --device"], server.output()
    assert spawned_workers(server.process.pid) == []


def test_a_second_sigterm_forces_the_stop_and_exits_143(tmp_path: Path, classifier_checkpoint: Path, expected: dict) -> None:
    path = next(iter(expected))
    # A batch waits up to 5 s for company: the graceful stop still waits on it when the second SIGTERM comes.
    server = Server("vision.serve", classifier_checkpoint, tmp_path / "server.log", "--batch-timeout", "5")

    def request() -> None:
        with contextlib.suppress(OSError):  # the forced stop may close its connection unanswered
            post_json(f"{server.url}/predict", {"image": b64(path)}, timeout=60)

    with server:
        client = threading.Thread(target=request)
        client.start()
        time.sleep(0.5)
        server.process.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        status = server.stop()  # the second SIGTERM
        client.join(timeout=60)
    assert status == 143, server.output()
    with pytest.raises(OSError):
        get(f"{server.url}/health", timeout=5)
