"""What the serving tests share: the real server on the loopback address and plain HTTP to it
(:mod:`benchmarks.serve_load`, which the load benchmark uses too), base64 and multipart bodies."""

from __future__ import annotations

import base64
from pathlib import Path

from benchmarks.serve_load import Server, free_port, get, post, post_json

__all__ = ["Server", "b64", "free_port", "get", "multipart", "post", "post_json"]


def b64(data: Path | bytes) -> str:
    """A file's bytes (or bytes) as base64 text."""
    return base64.b64encode(data if isinstance(data, bytes) else Path(data).read_bytes()).decode()


def multipart(fields: list[tuple[str, str | tuple[str, bytes]]]) -> tuple[bytes, str]:
    """A multipart/form-data body of text fields and (file name, bytes) files, and its content type."""
    boundary = "----serve-test-boundary-7d1f"
    parts = []
    for name, value in fields:
        if isinstance(value, tuple):
            filename, data = value
            head = (f'Content-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                    "Content-Type: application/octet-stream\r\n\r\n")
            parts.append(f"--{boundary}\r\n{head}".encode() + data + b"\r\n")
        else:
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"
