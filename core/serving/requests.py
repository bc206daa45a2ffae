"""A refused request and the checks of a JSON request body that both heads share.

A request is refused with a :class:`BadRequest`: an HTTP status and a one-line reason, answered
as ``{"detail": reason}`` (the shape FastAPI and LitServe give their own errors). The statuses:
400 a body that is not JSON (or not multipart), 413 something too large, 415 a content type the
route does not take, 422 a well-formed body whose content cannot be used.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

MALFORMED, TOO_LARGE, UNSUPPORTED_MEDIA_TYPE, UNUSABLE = 400, 413, 415, 422


class BadRequest(Exception):
    """A request the server refuses: ``status`` (4xx) and a one-line ``reason`` naming what is
    wrong and what to send instead."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = " ".join(reason.split())

    def body(self) -> dict[str, str]:
        """The JSON body of the answer."""
        return {"detail": self.reason}


def json_object(body: bytes, example: str) -> dict[str, Any]:
    """``body`` parsed as a JSON object (UTF-8); ``example`` is a body the route takes, shown
    in the reason of a refusal."""
    try:
        payload = json.loads(body)
    except ValueError as error:  # not UTF-8, not JSON, or a number of more digits than Python converts
        raise BadRequest(MALFORMED, f"the body is not valid JSON ({error}); send {example}") from None
    except RecursionError:
        raise BadRequest(MALFORMED, f"the body nests JSON too deeply to read; send {example}") from None
    if not isinstance(payload, dict):
        raise BadRequest(UNUSABLE, f"the body is a JSON {json_type(payload)}, not an object; send {example}")
    return payload


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def known_keys(payload: dict[str, Any], allowed: Collection[str], example: str) -> None:
    """Refuse keys the route does not read (a misspelt option would otherwise be ignored)."""
    unknown = sorted(set(payload) - set(allowed))
    if unknown:
        raise BadRequest(
            UNUSABLE, f"unknown key {unknown[0]!r}; the keys are {', '.join(sorted(allowed))}, e.g. {example}"
        )


def one_or_many(payload: dict[str, Any], one: str, many: str, max_items: int, example: str) -> tuple[list[Any], bool]:
    """The items of a request that holds either ``one`` item or a list under ``many`` (1 to
    ``max_items`` of them), and whether it was the single one."""
    if (one in payload) == (many in payload):
        raise BadRequest(UNUSABLE, f"give either {one!r} or {many!r} (one of them); send {example}")
    if one in payload:
        return [payload[one]], True
    items = payload[many]
    if not isinstance(items, list) or not items:
        raise BadRequest(UNUSABLE, f"{many!r} must be a non-empty array, got a JSON {json_type(items)}; send {example}")
    if len(items) > max_items:
        raise BadRequest(TOO_LARGE, f"{many!r} holds {len(items)} items, more than the {max_items} a request may hold; "
                                    "send them in several requests")
    return items, False


def text_value(value: Any, name: str, example: str) -> str:
    """``value`` as a string of text: one that JSON's escapes filled with a lone surrogate
    (``"\\ud800"``) is no text a model can read, and is refused before it reaches a batch."""
    if not isinstance(value, str):
        raise BadRequest(UNUSABLE, f"{name} must be a string, got a JSON {json_type(value)}; send {example}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise BadRequest(
            UNUSABLE, f"{name} holds a lone surrogate ({value[error.start]!a}), which is no text; send UTF-8 text"
        ) from None
    return value


def item_name(one: str, many: str, index: int, single: bool) -> str:
    """How a reason names item ``index``: ``'image'`` or ``'images[3]'``."""
    return repr(one) if single else f"{many}[{index}]"


def whole_number(payload: dict[str, Any], key: str, default: int, maximum: int | None = None) -> int:
    """``payload[key]`` as a whole number of at least 1 (and at most ``maximum``), or ``default``
    when absent."""
    if key not in payload:
        return default
    value = payload[key]
    bounded = maximum is None or (isinstance(value, int) and value <= maximum)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or not bounded:
        allowed = "of at least 1" if maximum is None else f"from 1 to {maximum}"
        shown = json.dumps(value, default=repr)  # a multipart field sent as a file is bytes, which JSON has not
        raise BadRequest(UNUSABLE, f"{key!r} must be a whole number {allowed}, got {shown[:40]}")
    return value
