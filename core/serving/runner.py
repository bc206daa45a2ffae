"""Running a server: the options both ``serve`` commands take, and :func:`serve`, which starts
LitServe with the request gate in front of the head's route and runs until stopped.

SIGTERM, or Ctrl-C, stops the server gracefully: the HTTP process stops accepting connections,
answers every request it has taken (the inference workers run until it is done, up to LitServe's
30 s), and the command exits with status 0. Ctrl-C reaches every process of the terminal's group;
the inference workers ignore it (they start with it ignored) and are stopped after the HTTP
process. A stop cut short (a signal before serving began, or a second one during the graceful
stop, which forces it) exits with 128 + the signal's number: 130 for Ctrl-C, 143 for SIGTERM. An
inference worker that dies while serving is started again; workers that all fail to load the
model end the command with one error line.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from core.commands.arguments import add_device_option, positive_int
from core.errors import InputError

if TYPE_CHECKING:
    from core.serving.api import Handler
    from core.serving.gate import Route

HOSTS = ("127.0.0.1", "0.0.0.0", "::")  # the addresses LitServe binds
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
MAX_BODY_BYTES = 16 * 2**20
MAX_BATCH_TIMEOUT = 10.0  # seconds; below LitServe's request timeout (30 s), which counts the wait
MIN_BATCH_TIMEOUT = 0.001  # seconds; at 0 LitServe's batching loop polls its queue without waiting, a core busy while idle


def port(text: str) -> int:
    """A TCP port LitServe listens on (1024 to 65535), for ``type=`` of ``--port``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 1024 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 1024 to 65535, got {value}")
    return value


def batch_timeout(text: str) -> float:
    """Seconds a batch waits to fill, from :data:`MIN_BATCH_TIMEOUT` to :data:`MAX_BATCH_TIMEOUT`."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not MIN_BATCH_TIMEOUT <= value <= MAX_BATCH_TIMEOUT:
        raise argparse.ArgumentTypeError(
            f"expected seconds from {MIN_BATCH_TIMEOUT:g} to {MAX_BATCH_TIMEOUT:g}, got {value:g} "
            f"(below {MIN_BATCH_TIMEOUT * 1000:g} ms the batching loop keeps a core busy while the server is idle)"
        )
    return value


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """``--host --port --workers --max-batch-size --batch-timeout --max-body-bytes --log-level
    --device``."""
    parser.add_argument("--host", choices=HOSTS, default="127.0.0.1",
                        help="address to listen on: 127.0.0.1 (this machine only, the default), 0.0.0.0 or :: (every interface)")
    parser.add_argument("--port", type=port, default=8000, help="TCP port, 1024 to 65535 (default 8000)")
    parser.add_argument("--workers", type=positive_int, default=1,
                        help="inference worker processes, each holding the model (default 1)")
    parser.add_argument("--max-batch-size", type=positive_int, default=16,
                        help="most requests the model takes together (default 16)")
    parser.add_argument("--batch-timeout", type=batch_timeout, default=0.01,
                        help=f"seconds a batch waits for more requests, {MIN_BATCH_TIMEOUT:g} to {MAX_BATCH_TIMEOUT:g} (default 0.01)")
    parser.add_argument("--max-body-bytes", type=positive_int, default=MAX_BODY_BYTES,
                        help=f"largest request body taken; larger ones get 413 (default {MAX_BODY_BYTES:,})")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="server log level (default info)")
    add_device_option(parser, kinds=("cpu", "cuda", "mps"))  # LitServe's accelerators


def require_litserve() -> None:
    """Refuse, naming the fix, when the optional package is missing."""
    try:
        import litserve  # noqa: F401
    except ImportError:
        raise InputError('serving needs the package litserve: pip install -e ".[serve]"') from None


def require_free_port(host: str, port: int) -> None:
    """Refuse a port another program listens on, before the model is loaded."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as error:
            raise InputError(f"cannot listen on {host} port {port} ({error.strerror}); pass another --port") from None


def litserve_devices(device: str) -> tuple[str, list[int] | int]:
    """A torch device (``cpu``, ``cuda``, ``cuda:1``, ``mps``) as LitServe's accelerator and
    devices, so its workers are set up on that device."""
    kind, _, index = device.partition(":")
    return (kind, 1) if kind == "cpu" else (kind, [int(index or 0)])


def serve(handler: Handler, path: str, route: Route, args: argparse.Namespace, metadata: dict[str, Any]) -> None:
    """Serve ``handler`` at POST ``path`` behind the gate with ``route``'s checks, with the
    options of :func:`add_server_options`, until SIGTERM or Ctrl-C; ``metadata`` is shown at
    ``GET /info``."""
    import litserve

    from core.serving.api import BatchedAPI
    from core.serving.gate import RequestGate

    class Server(litserve.LitServer):
        """LitServe's server whose inference workers start with Ctrl-C ignored (a disposition a
        spawned process keeps): Ctrl-C reaches every process of the terminal's group, and the
        server stops the workers itself with SIGTERM, after draining the HTTP process (whose
        requests the workers answer). Taken by a worker, it would drop the batch in flight, or
        kill a worker still starting with a traceback. A worker that dies while serving is
        started again (``restart_workers``, LitServe's monitor), but not once the stop has begun
        (the monitor would take the workers the stop terminates for dead ones), nor one that died
        before it had loaded the model."""

        stopping = False
        load_failed = False
        launching = threading.Lock()  # the monitor's restart against the stop

        def launch_inference_worker(self, lit_api: litserve.LitAPI) -> Any:
            with sigint_ignored():
                return super().launch_inference_worker(lit_api)

        def launch_single_inference_worker(self, lit_api: litserve.LitAPI, worker_id: int) -> Any:
            """A worker in place of the dead one (LitServe's monitor): only of one that had loaded
            the model. One that died loading it (killed, out of memory) or failed to would fail
            again every 2 s: that stops the server, and :func:`serve` ends with one error line."""
            from litserve.utils import WorkerSetupStatus

            with self.launching:
                status = self.workers_setup_status.get(f"{lit_api.api_path.split('/')[-1]}_{worker_id}")
                if self.stopping or status != WorkerSetupStatus.READY:
                    if not self.stopping:
                        self.load_failed = True
                        self._shutdown_event.set()  # from the monitor's thread: its own connection to the manager
                    return self.inference_workers[worker_id]  # the dead one, left as it is
                with sigint_ignored():
                    return super().launch_single_inference_worker(lit_api, worker_id)

        def _perform_graceful_shutdown(self, *args: Any, **kwargs: Any) -> None:
            with self.launching:
                self.stopping = True
            super()._perform_graceful_shutdown(*args, **kwargs)
            for child in multiprocessing.active_children():  # one the monitor started as the stop began
                if child.name == "inference-worker":
                    child.terminate()

        def verify_worker_status(self) -> None:
            """Wait for a worker to be ready, as LitServe does, but end with one error line when a
            worker fails to load the model before any is ready, or every worker has died loading it
            (killed for memory: LitServe would wait forever); the other workers are stopped."""
            from litserve.utils import WorkerSetupStatus

            while not any(status == WorkerSetupStatus.READY for status in self.workers_setup_status.values()):
                failed = any(status == WorkerSetupStatus.ERROR for status in self.workers_setup_status.values())
                if failed or not any(worker.is_alive() for worker in self.inference_workers):
                    for worker in self.inference_workers:
                        worker.terminate()
                    self.transport_config.manager.shutdown()
                    raise InputError(cannot_load(args.device))
                time.sleep(0.05)

    api = BatchedAPI(handler, path, args.max_batch_size, args.batch_timeout)
    accelerator, devices = litserve_devices(args.device)
    server = Server(
        api,
        accelerator=accelerator,
        devices=devices,
        workers_per_device=args.workers,
        middlewares=[(RequestGate, {"routes": {path: route}, "max_body_bytes": args.max_body_bytes})],
        model_metadata=metadata,
        restart_workers=True,  # a worker that dies (killed, out of memory) is replaced, not the server stopped
    )
    received = stop_on_signals()
    try:
        server.run(  # one HTTP process for all the workers (LitServe's default starts one per worker)
            host=args.host, port=args.port, log_level=args.log_level, generate_client_file=False, num_api_servers=1
        )
        if server.load_failed:
            raise InputError(cannot_load(args.device))
    except KeyboardInterrupt:  # before serving began, or a second signal during the graceful stop
        for child in multiprocessing.active_children():
            child.terminate()
        raise SystemExit(128 + (received[-1] if received else signal.SIGINT)) from None


def cannot_load(device: str) -> str:
    """The error line of inference workers that could not load the model."""
    return f"the inference workers could not load the model on {device} (the log above says why); pass fewer --workers, or another --device"


@contextmanager
def sigint_ignored() -> Iterator[None]:
    """SIGINT ignored in this process, and in the processes it starts meanwhile, for the block.
    Off the main thread, where no handler can be set (LitServe's monitor starting a worker
    again), SIGINT is blocked in this thread instead: a process it starts keeps it blocked."""
    if threading.current_thread() is not threading.main_thread():
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)


def stop_on_signals() -> list[int]:
    """Make SIGTERM stop this process as Ctrl-C does (LitServe then stops its HTTP processes
    gracefully, which drains them, and its workers after them); the list returned gathers the
    signals (SIGTERM, SIGINT) this process receives. The HTTP processes are forked from this one
    and inherit the handler; uvicorn raises the signal again in them after their own graceful
    stop, and there it keeps its default meaning."""
    server = os.getpid()
    received: list[int] = []

    def stop(signum: int, frame: object) -> None:
        if os.getpid() != server:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        received.append(signum)
        raise KeyboardInterrupt

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)
    return received
