"""Load on ``python -m vision.serve`` over the loopback address: requests per second and p50/p99
latency at 1, 8 and 32 concurrent clients, each request one image, beside the offline batch
command on the same images (``vision.predict --batch-size N``, timed in-process from the loaded
model to the last result). Bounded: at most ``--requests`` requests and ``--max-seconds`` per
client count.

    python -m benchmarks.serve_load [CKPT] [--threads 1] [--requests 256] [--max-seconds 30] [--quick]

Without ``CKPT`` an untrained ViT of CIFAR size (32 px, patch 4, 192 wide, 6 blocks; speed does
not depend on training) is written to a temporary folder. The server and the clients share the
machine's cores: on a small machine the clients' own work is part of the figures. Writes one
JSON line to ``benchmarks/results/serve_load.jsonl`` (``--append``) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "serve_load.jsonl"
HOST = "127.0.0.1"
START_SECONDS = 180  # the command loads the model, then LitServe starts its processes and loads it again
STOP_SECONDS = 60
MODEL = dict(img_size=32, patch_size=4, dim=192, depth=6, num_heads=3, mlp_ratio=4.0, drop_path=0.0)
CLASSES = 10


# ----------------------------------------------------------------------------- a server and HTTP to it


def free_port() -> int:
    """A TCP port nothing listens on now, on the loopback address."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


class Server:
    """``python -m <module> <model> --host 127.0.0.1 --port P --device cpu *options`` in a
    subprocess of its own process group with ``threads`` OpenMP threads per process, its output in
    ``log``; :meth:`start` returns once ``/health`` answers 200, :meth:`stop` sends SIGTERM (or
    Ctrl-C) and returns the exit status."""

    def __init__(self, module: str, model: str | Path, log: Path, *options: str, threads: int = 1) -> None:
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log = log
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        env.pop("HYDRA_FULL_ERROR", None)
        command = [sys.executable, "-m", module, str(model), "--host", HOST, "--port", str(self.port), "--device", "cpu",
                   "--log-level", "warning", *options]
        with open(log, "wb") as output:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
            )

    def start(self) -> Server:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}:\n{self.output()}")
            try:
                if get(f"{self.url}/health", timeout=2)[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"the server did not answer /health within {START_SECONDS} s:\n{self.output()}")

    def stop(self, ctrl_c: bool = False) -> int:
        """SIGTERM to the server, or with ``ctrl_c`` SIGINT to every process of its group as a
        terminal's Ctrl-C sends it, and the exit status (the processes are killed after
        :data:`STOP_SECONDS`)."""
        if self.process.poll() is None:
            if ctrl_c:
                os.killpg(self.process.pid, signal.SIGINT)
            else:
                self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.kill()
            sent = "Ctrl-C" if ctrl_c else "SIGTERM"
            raise RuntimeError(f"the server did not stop within {STOP_SECONDS} s of {sent}:\n{self.output()}") from None

    def kill(self) -> None:
        """SIGKILL to every process of the server's group (it started them all; its own session),
        those left behind by a server that has died too."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=STOP_SECONDS)

    def output(self) -> str:
        """The end of the server's log."""
        return self.log.read_text(errors="replace")[-4000:]

    def __enter__(self) -> Server:
        try:
            return self.start()
        except BaseException:
            self.kill()
            raise

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.stop()


def request(url: str, body: bytes | None, headers: dict[str, str], timeout: float, method: str) -> tuple[int, Any]:
    """(status, JSON body or text) of one HTTP request; 4xx and 5xx answers are returned too."""
    call = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with urllib.request.urlopen(call, timeout=timeout) as response:
            status, data = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, data = error.code, error.read()
    try:
        return status, json.loads(data)
    except ValueError:
        return status, data.decode(errors="replace")


def get(url: str, timeout: float = 10) -> tuple[int, Any]:
    return request(url, None, {}, timeout, "GET")


def post(url: str, body: bytes, content_type: str = "application/json", timeout: float = 60) -> tuple[int, Any]:
    return request(url, body, {"Content-Type": content_type}, timeout, "POST")


def post_json(url: str, payload: Any, timeout: float = 60) -> tuple[int, Any]:
    return post(url, json.dumps(payload).encode(), timeout=timeout)


# ----------------------------------------------------------------------------- the load


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def load(url: str, bodies: list[bytes], clients: int, requests: int, seconds: float) -> dict[str, Any]:
    """``clients`` threads posting ``bodies`` in turn until ``requests`` were sent or ``seconds``
    passed: requests answered per second and their latencies."""
    latencies: list[float] = []
    failures: list[int] = []
    lock = threading.Lock()
    sent = 0
    deadline = time.monotonic() + seconds

    def client() -> None:
        nonlocal sent
        while time.monotonic() < deadline:
            with lock:
                if sent >= requests:
                    return
                body = bodies[sent % len(bodies)]
                sent += 1
            start = time.perf_counter()
            try:
                status, _ = post(url, body, timeout=max(1.0, deadline - time.monotonic() + 30))
            except OSError:  # no answer (a timeout, a closed connection): a failure too
                status = 0
            elapsed = time.perf_counter() - start
            with lock:
                (latencies.append(elapsed) if status == 200 else failures.append(status))

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    return {
        "mode": "server",
        "clients": clients,
        "requests": len(latencies),
        "failed": len(failures),
        "seconds": round(wall, 3),
        "requests_per_s": round(len(latencies) / wall, 2),
        "p50_ms": round(1000 * percentile(latencies, 0.5), 2) if latencies else None,
        "p99_ms": round(1000 * percentile(latencies, 0.99), 2) if latencies else None,
    }


def offline(checkpoint: Path, paths: list[str], batch_size: int) -> dict[str, Any]:
    """``vision.predict``'s work on ``paths`` at ``--batch-size batch_size``, in-process: images
    per second from reading the first image to the last result."""
    from vision.inference import load_classifier
    from vision.predict import predictions

    classifier = load_classifier(checkpoint)
    list(predictions(classifier, paths[:batch_size], 5, batch_size))  # warm up
    start = time.perf_counter()
    results = list(predictions(classifier, paths, 5, batch_size))
    wall = time.perf_counter() - start
    return {"mode": "offline", "batch_size": batch_size, "requests": len(results), "seconds": round(wall, 3),
            "requests_per_s": round(len(results) / wall, 2), "p50_ms": None, "p99_ms": None}


def write_inputs(folder: Path, count: int, size: int) -> list[str]:
    """``count`` random RGB PNG files of ``size`` x ``size`` pixels."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    paths = []
    for index in range(count):
        path = folder / f"{index}.png"
        Image.fromarray(rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)).save(path)
        paths.append(str(path))
    return paths


def write_checkpoint(path: Path) -> Path:
    """An untrained classifier of :data:`MODEL`, saved as a training checkpoint."""
    import torch

    from vision.module import ImageClassifier

    torch.manual_seed(0)
    classifier = ImageClassifier(model=MODEL, num_classes=CLASSES, class_names=[f"class_{i}" for i in range(CLASSES)])
    torch.save({"hyper_parameters": dict(classifier.hparams), "state_dict": classifier.state_dict()}, path)
    return path


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table, one image per request."""
    from benchmarks.report import table

    def contender(row: dict[str, Any]) -> str:
        if row["mode"] == "server":
            return f"vision.serve, {row['clients']} concurrent client{'s' if row['clients'] > 1 else ''}"
        return f"vision.predict --batch-size {row['batch_size']} (offline)"

    return table(
        ["contender", "images", "images/s", "p50 ms", "p99 ms", "failed"],
        [[contender(row), row["requests"], row["requests_per_s"], row["p50_ms"], row["p99_ms"], row.get("failed", 0)]
         for row in rows],
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", nargs="?", type=Path, help="a vision.train checkpoint (default: an untrained CIFAR-size ViT)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32], help="concurrent clients (default 1 8 32)")
    parser.add_argument("--requests", type=int, default=256, help="most requests per client count (default 256)")
    parser.add_argument("--max-seconds", type=float, default=30, help="most seconds per client count (default 30)")
    parser.add_argument("--images", type=int, default=64, help="distinct input images (default 64)")
    parser.add_argument("--max-batch-size", type=int, default=32, help="the server's --max-batch-size (default 32)")
    parser.add_argument("--batch-timeout", type=float, default=0.01, help="the server's --batch-timeout (default 0.01)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the server's worker and of the offline run")
    parser.add_argument("--quick", action="store_true", help="32 requests, 5 s per client count: checks that the script runs")
    parser.add_argument("--append", type=Path, default=RESULTS, help=f"append the result as one JSON line here (default {RESULTS.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    if args.quick:
        args.requests, args.max_seconds, args.images = 32, 5.0, 8
    import torch

    from benchmarks.common import environment, table_result

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="serve-load-") as folder:
        folder = Path(folder)
        checkpoint = args.checkpoint or write_checkpoint(folder / "classifier.ckpt")
        from vision.inference import load_classifier

        size = load_classifier(checkpoint).hparams.img_size
        paths = write_inputs(folder, args.images, size[0] if isinstance(size, (list, tuple)) else size)
        bodies = [json.dumps({"image": base64.b64encode(Path(path).read_bytes()).decode()}).encode() for path in paths]
        rows = []
        options = ["--max-batch-size", str(args.max_batch_size), "--batch-timeout", str(args.batch_timeout)]
        with Server("vision.serve", checkpoint, folder / "server.log", *options, threads=args.threads) as server:
            url = f"{server.url}/predict"
            load(url, bodies, 1, 4, args.max_seconds)  # warm up
            for clients in args.clients:
                rows.append(load(url, bodies, clients, args.requests, args.max_seconds))
        inputs = (paths * math.ceil(args.requests / len(paths)))[: args.requests]  # the images the clients send
        for batch_size in args.clients:
            rows.append(offline(checkpoint, inputs, batch_size))
    env = environment(torch.device("cpu"), args.threads, " ".join(["python -m benchmarks.serve_load", *(argv or sys.argv[1:])]))
    settings = {"max_batch_size": args.max_batch_size, "batch_timeout": args.batch_timeout, "images": args.images,
                "model": "given" if args.checkpoint else MODEL}
    return table_result("serve_load", env, rows, markdown(rows), args.append, settings=settings)


if __name__ == "__main__":
    main()
