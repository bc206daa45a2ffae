"""The gate every request of a served route passes in the HTTP process, before LitServe queues it
for the model: a body over the size limit, a content type the route does not take, a body that is
not JSON (or multipart form data, where the route takes files) and what the head's own check
refuses are answered there with their 4xx (:class:`~core.serving.requests.BadRequest`), so a bad
request never reaches a batch of good ones. What passes is forwarded as the JSON the head's check
returned; multipart uploads become that JSON too, so the model's side reads one format.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.serving.requests import MALFORMED, TOO_LARGE, UNSUPPORTED_MEDIA_TYPE, BadRequest, json_object

JSON, MULTIPART = "application/json", "multipart/form-data"
Fields = list[tuple[str, str | bytes]]


@dataclass(frozen=True)
class Route:
    """How the gate reads the requests of one route.

    Args:
        example: a body the route takes, shown in the reasons of refusals.
        check: a parsed JSON object -> the JSON object forwarded to the model's side; raises
            :class:`BadRequest` for one it refuses. Runs on a thread of the HTTP process.
        form: multipart fields (name, text or file bytes) -> the JSON object :attr:`check`
            reads; None where the route takes JSON only.
    """

    example: str
    check: Callable[[dict[str, Any]], dict[str, Any]]
    form: Callable[[Fields], dict[str, Any]] | None = None

    def media_types(self) -> str:
        return JSON if self.form is None else f"{JSON} or {MULTIPART}"


class ClientGone(Exception):
    """The client closed the connection before its body arrived."""


class RequestGate:
    """ASGI middleware: checks each POST to a path of ``routes`` and answers the refused ones
    itself; other paths (``/health``, ``/info``, ...) pass untouched.

    Args:
        app: the application behind the gate (LitServe's FastAPI app).
        routes: path -> :class:`Route`.
        max_body_bytes: the largest body taken (413 beyond), refused from its ``Content-Length``
            before it is read, or as soon as more arrives.
    """

    def __init__(self, app: ASGIApp, routes: Mapping[str, Route], max_body_bytes: int) -> None:
        self.app = app
        self.routes = dict(routes)
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.routes.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if route is None:
            await self.app(scope, receive, send)
            return
        try:
            payload = await self.payload(scope, receive, route)
        except BadRequest as refusal:
            await JSONResponse(refusal.body(), status_code=refusal.status)(scope, receive, send)
            return
        except ClientGone:
            return
        body = json.dumps(payload).encode()
        headers = [(name, value) for name, value in scope["headers"] if name not in (b"content-type", b"content-length")]
        headers += [(b"content-type", JSON.encode()), (b"content-length", str(len(body)).encode())]
        await self.app({**scope, "headers": headers}, replay(body, receive), send)

    async def payload(self, scope: Scope, receive: Receive, route: Route) -> dict[str, Any]:
        """The checked JSON object of a request, or :class:`BadRequest`."""
        headers = Headers(scope=scope)
        media_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != JSON and not (media_type == MULTIPART and route.form is not None):
            raise BadRequest(
                UNSUPPORTED_MEDIA_TYPE,
                f"content type {media_type or '(none)'} is not taken by {scope['path']}; send {route.media_types()}, "
                f"e.g. {route.example}",
            )
        body = await read_body(headers, receive, self.max_body_bytes)
        if media_type == JSON:
            return await asyncio.to_thread(lambda: route.check(json_object(body, route.example)))
        fields = await form_fields(headers, body)
        return await asyncio.to_thread(lambda: route.check(route.form(fields)))


async def read_body(headers: Headers, receive: Receive, limit: int) -> bytes:
    """The whole body, refused (413) once it is known to exceed ``limit`` bytes."""
    too_large = BadRequest(TOO_LARGE, f"the body is larger than the server's limit of {limit:,} bytes "
                                      "(--max-body-bytes); send less per request")
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def form_fields(headers: Headers, body: bytes) -> Fields:
    """The fields of a multipart body in order: (name, text) and (name, file bytes)."""

    async def stream() -> AsyncIterator[bytes]:
        yield body

    try:
        form = await MultiPartParser(headers, stream()).parse()
    except MultiPartException as error:
        raise BadRequest(MALFORMED, f"the multipart body cannot be read ({error})") from None
    try:
        return [(name, await value.read() if isinstance(value, UploadFile) else value) for name, value in form.multi_items()]
    finally:
        await form.close()


def replay(body: bytes, receive: Receive) -> Callable[[], Awaitable[Message]]:
    """A ``receive`` that gives ``body`` once, then whatever the connection says next (its
    disconnect)."""
    sent = False

    async def receive_again() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive_again
