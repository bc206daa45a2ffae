"""The ``LitAPI`` both heads serve through: LitServe's four steps (decode each request, predict a
batch, split it, encode each answer) over a head's :class:`Handler`.

LitServe fails a whole batch when one request of it raises, so a request that passes the gate
but cannot be decoded (a truncated image) is kept in its batch as its
:class:`~core.serving.requests.BadRequest` and answered alone with its 4xx, the others of the batch
predicted as if it had not come.
"""

from __future__ import annotations

from typing import Any, Protocol

import litserve
from starlette.responses import JSONResponse

from core.serving.requests import BadRequest


class Handler(Protocol):
    """What a head serves: built in the command, pickled to each inference worker, set up there."""

    def setup(self, device: str) -> None:
        """Load the model on ``device`` (in the worker process)."""

    def decode(self, payload: dict[str, Any]) -> Any:
        """A request's JSON object (as the gate forwarded it) -> the model's input; raises
        :class:`BadRequest` for one that cannot be used."""

    def predict(self, inputs: list[Any]) -> list[Any]:
        """The outputs of a batch of decoded requests, one per request, in order."""

    def encode(self, output: Any) -> dict[str, Any]:
        """One request's output as its JSON answer."""


class BatchedAPI(litserve.LitAPI):
    """LitServe's API over ``handler`` at ``api_path``, batching up to ``max_batch_size`` requests
    that arrive within ``batch_timeout`` seconds."""

    def __init__(self, handler: Handler, api_path: str, max_batch_size: int, batch_timeout: float) -> None:
        super().__init__(max_batch_size=max_batch_size, batch_timeout=batch_timeout, api_path=api_path)
        self.handler = handler

    def setup(self, device: str) -> None:
        self.handler.setup(device)

    # decode_request and encode_response stay unannotated: LitServe reads their annotations as
    # the route's FastAPI request and response types.
    def decode_request(self, request):
        try:
            return self.handler.decode(request)
        except BadRequest as refusal:
            return refusal

    def predict(self, x: Any) -> Any:
        # LitServe passes the batch as a list, or one request alone when max_batch_size is 1.
        if self.max_batch_size == 1:
            return self.predict_batch([x])[0]
        return self.predict_batch(list(x))

    def predict_batch(self, inputs: list[Any]) -> list[Any]:
        """The handler's outputs for the decoded requests; each refused one stays its refusal."""
        usable = [item for item in inputs if not isinstance(item, BadRequest)]
        outputs = iter(self.handler.predict(usable) if usable else [])
        return [item if isinstance(item, BadRequest) else next(outputs) for item in inputs]

    def encode_response(self, output):
        if isinstance(output, BadRequest):
            return JSONResponse(output.body(), status_code=output.status)
        return self.handler.encode(output)
