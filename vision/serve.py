"""``python -m vision.serve CKPT_OR_DIR [--port 8000] [--max-batch-size 16] [--batch-timeout 0.01]``:
a trained Vision Transformer over HTTP, on LitServe. ``POST /predict`` takes images as base64 in
JSON or as multipart uploads and answers the top-k classes of each with their probabilities, as
``python -m vision.predict`` computes them; ``GET /health`` says whether it is ready. The model is
a checkpoint or a directory written by ``python -m vision.export --format safetensors``, loaded as
``vision.predict`` loads it.

Requests that arrive together are classified as one batch (``--max-batch-size`` requests, waiting
up to ``--batch-timeout`` seconds). Each image is checked in the HTTP process before it is queued:
it must be base64 of a file whose header Pillow reads, of at most ``PIL.Image.MAX_IMAGE_PIXELS``
pixels (refused from the header, before any pixel is decoded); one that then fails to decode is
answered alone. Needs ``pip install -e ".[serve]"``.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.commands.arguments import ArgumentParser
from core.commands.exit import command
from core.serving.requests import TOO_LARGE, UNUSABLE, BadRequest, item_name, known_keys, one_or_many, whole_number
from core.serving.runner import add_server_options, require_free_port, require_litserve, serve

if TYPE_CHECKING:
    from PIL import Image
    from torch import Tensor

    from core.serving.gate import Fields, Route

ROUTE = "/predict"
DEFAULT_TOP_K = 5  # as vision.predict
MAX_IMAGES = 64  # per request, and per forward pass of a batch
EXAMPLE = '{"image": "<base64 of an image file>", "top_k": 5}'
# What the server decodes: the common image files, not every format Pillow knows (EPS runs
# Ghostscript on what a client sends).
FORMATS = ("PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF")
ONE, MANY = "image", "images"
KEYS = (ONE, MANY, "top_k")

Ranked = list[tuple[str, float]]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (``sys.argv[1:]`` when ``argv`` is None)."""
    parser = ArgumentParser(prog="python -m vision.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a checkpoint written by vision.train (e.g. checkpoints/last.ckpt) "
                        "or a directory written by vision.export --format safetensors")
    add_server_options(parser)
    return parser.parse_args(argv)


# ----------------------------------------------------------------------------- the gate's checks


def check_request(payload: dict[str, Any]) -> dict[str, Any]:
    """A request's JSON object, checked down to each image's header, its images together at most
    ``Image.MAX_IMAGE_PIXELS`` pixels (what one decoded image may hold); returned as it came."""
    from PIL import Image

    known_keys(payload, KEYS, EXAMPLE)
    images, single = one_or_many(payload, ONE, MANY, MAX_IMAGES, EXAMPLE)
    pixels = 0
    for index, value in enumerate(images):
        name = item_name(ONE, MANY, index, single)
        pixels += check_header(image_bytes(value, name), name)
    limit = Image.MAX_IMAGE_PIXELS
    if limit is not None and pixels > limit:
        raise BadRequest(
            TOO_LARGE,
            f"the {len(images)} images hold {pixels:,} pixels, more than the {limit:,} the server decodes per request "
            "(Pillow's Image.MAX_IMAGE_PIXELS); send fewer or smaller images per request",
        )
    whole_number(payload, "top_k", DEFAULT_TOP_K)
    return payload


def image_bytes(value: Any, name: str) -> bytes:
    """The file bytes of a base64 string."""
    if not isinstance(value, str):
        raise BadRequest(UNUSABLE, f"{name} must be a base64 string of an image file; send {EXAMPLE}")
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest(UNUSABLE, f"{name} is not valid base64; send the file's bytes base64-encoded") from None
    if not data:
        raise BadRequest(UNUSABLE, f"{name} is empty; send the bytes of an image file")
    return data


def check_header(data: bytes, name: str) -> int:
    """The pixels of an image, from its header; refuse one whose header Pillow cannot read as one
    of :data:`FORMATS` or whose size exceeds ``Image.MAX_IMAGE_PIXELS``. No pixel is decoded."""
    from PIL import Image

    limit = Image.MAX_IMAGE_PIXELS
    try:
        with Image.open(io.BytesIO(data), formats=FORMATS) as image:
            width, height = image.size
    except Image.DecompressionBombError as error:  # over twice the limit: Pillow refuses from the header
        raise BadRequest(TOO_LARGE, f"{name} is too large to decode ({error}); send an image of at most {limit:,} pixels") from None
    except Exception as error:  # noqa: BLE001 - any failure to read a header is a file that is not an image
        raise BadRequest(
            UNUSABLE, f"{name} is not an image file of a format the server decodes ({type(error).__name__}); "
            f"send a {', '.join(FORMATS[:-1])} or {FORMATS[-1]} file"
        ) from None
    if limit is not None and width * height > limit:
        raise BadRequest(
            TOO_LARGE,
            f"{name} is {width} x {height} pixels, more than the {limit:,} the server decodes "
            "(Pillow's Image.MAX_IMAGE_PIXELS); send a smaller image",
        )
    return width * height


def form_payload(fields: Fields) -> dict[str, Any]:
    """Multipart fields as the JSON object :func:`check_request` reads: the file of one field
    ``image`` as base64, or the files of fields ``images`` (or of several ``image`` fields) as
    a list (``image`` and ``images`` together are refused, as in JSON), ``top_k`` as a number
    when it is one of at most 9 digits."""
    payload: dict[str, Any] = {}
    encoded = {
        key: [base64.b64encode(value).decode() if isinstance(value, bytes) else value for name, value in fields if name == key]
        for key in (ONE, MANY)
    }
    if encoded[MANY]:
        payload[MANY] = encoded[MANY]
        if encoded[ONE]:
            payload[ONE] = encoded[ONE][0]  # both: refused by the check
    elif encoded[ONE]:
        payload.update({ONE: encoded[ONE][0]} if len(encoded[ONE]) == 1 else {MANY: encoded[ONE]})
    for name, value in fields:
        if name not in (ONE, MANY):
            number = name == "top_k" and isinstance(value, str) and value.isdecimal() and len(value) <= 9
            payload[name] = int(value) if number else value
    return payload


# ----------------------------------------------------------------------------- the model's side


@dataclass
class ImageRequest:
    """A decoded request: its images as the classifier takes them ([3, H, W] each, the full-size
    image not kept while the batch gathers), how many classes to answer, and whether it sent one
    image."""

    images: list[Tensor]
    top_k: int
    single: bool


class ClassifierHandler:
    """Classifies batches of requests with the checkpoint's classifier
    (:class:`core.serving.api.Handler`)."""

    def __init__(self, checkpoint: str) -> None:
        self.checkpoint = checkpoint
        self.classifier: Any = None
        self.transform: Any = None

    def setup(self, device: str) -> None:
        from vision.inference import image_transform, load_classifier

        self.classifier = load_classifier(self.checkpoint, device)
        self.transform = image_transform(self.classifier)

    def decode(self, payload: dict[str, Any]) -> ImageRequest:
        """The request's images decoded and preprocessed as ``vision.predict`` does
        (:func:`vision.inference.image_transform`), one at a time."""
        images, single = ([payload[ONE]], True) if ONE in payload else (payload[MANY], False)
        preprocessed = [
            self.transform(decode_image(base64.b64decode(value), item_name(ONE, MANY, i, single)))
            for i, value in enumerate(images)
        ]
        return ImageRequest(preprocessed, payload.get("top_k", DEFAULT_TOP_K), single)

    def predict(self, requests: list[ImageRequest]) -> list[tuple[list[Ranked], bool]]:
        """The top-k classes of every image of every request, ranked by
        :func:`vision.inference.top_k` as ``vision.predict`` does, :data:`MAX_IMAGES` at a time."""
        import torch

        from vision.inference import top_k

        images = [image for request in requests for image in request.images]
        k = max(request.top_k for request in requests)
        ranked: list[Ranked] = []
        for start in range(0, len(images), MAX_IMAGES):
            batch = torch.stack(images[start : start + MAX_IMAGES]).to(self.classifier.device)  # (B, 3, H, W)
            ranked += top_k(self.classifier, batch, k)
        outputs, start = [], 0
        for request in requests:
            mine = ranked[start : start + len(request.images)]
            outputs.append(([classes[: request.top_k] for classes in mine], request.single))
            start += len(request.images)
        return outputs

    def encode(self, output: tuple[list[Ranked], bool]) -> dict[str, Any]:
        ranked, single = output
        results = [{"predictions": [{"class": name, "probability": p} for name, p in classes]} for classes in ranked]
        return results[0] if single else {"results": results}


def decode_image(data: bytes, name: str) -> Image.Image:
    """An image file's bytes decoded as ``vision.predict`` decodes files
    (:func:`vision.data.folder.read_image`: 8-bit RGB, transparency over white)."""
    from vision.data.folder import read_image

    try:
        return read_image(io.BytesIO(data), FORMATS)
    except Exception as error:  # noqa: BLE001 - a decoder's failure on any bytes is a bad file
        raise BadRequest(
            UNUSABLE, f"{name} cannot be decoded ({type(error).__name__}: {error}); send the whole image file"
        ) from None


def route() -> Route:
    """The gate's checks of ``POST /predict``."""
    from core.serving.gate import Route

    return Route(EXAMPLE, check_request, form_payload)


@command
def main(argv: list[str] | None = None) -> None:
    """Serve the checkpoint or exported directory until SIGTERM or Ctrl-C."""
    args = parse_args(argv)
    if not Path(args.checkpoint).exists():  # before the heavy imports
        raise FileNotFoundError(
            f"{args.checkpoint} does not exist; pass a .ckpt file or a directory written by python -m vision.export"
        )
    require_litserve()
    require_free_port(args.host, args.port)
    from vision.inference import load_classifier  # torch, timm and Lightning load after the arguments are read

    classifier = load_classifier(args.checkpoint)  # a bad checkpoint ends here, with one error: line
    metadata = {"checkpoint": str(args.checkpoint), "classes": list(classifier.hparams.class_names),
                "image_size": classifier.hparams.img_size}
    del classifier
    serve(ClassifierHandler(args.checkpoint), ROUTE, route(), args, metadata)


if __name__ == "__main__":
    main()
