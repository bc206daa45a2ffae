"""``python -m vision.predict CKPT IMAGE... [--top-k 5] [--batch-size 64] [--flip-tta] [--json]``: the most
probable classes of each image under a trained Vision Transformer.

Images are read, classified and printed ``--batch-size`` at a time, so any number of them can be
given (a shell glob, or ``xargs`` over a listing) without holding them all in memory.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from typing import TYPE_CHECKING

from core.commands.arguments import ArgumentParser, add_device_option, positive_int, readable_text
from core.commands.exit import command

if TYPE_CHECKING:
    from vision.module import ImageClassifier

Ranked = list[tuple[str, float]]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (``sys.argv[1:]`` when ``argv`` is None)."""
    parser = ArgumentParser(prog="python -m vision.predict", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a checkpoint written by vision.train (e.g. checkpoints/last.ckpt)")
    parser.add_argument("images", nargs="+", help="image files (any format Pillow reads)")
    parser.add_argument(
        "--top-k",
        type=positive_int,
        default=5,
        help="classes to show per image, at least 1; more than the model has shows them all (default 5)",
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=64, help="images read and classified together (default 64)"
    )
    parser.add_argument(
        "--flip-tta", action="store_true", help="average each image's prediction with its mirror image's (test-time augmentation)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    add_device_option(parser)
    return parser.parse_args(argv)


def predictions(
    classifier: ImageClassifier, paths: Sequence[str], k: int, batch_size: int
) -> Iterator[tuple[str, Ranked]]:
    """(path, top-``k`` classes) of each image in order, reading ``batch_size`` images at a time."""
    from vision.inference import load_image, preprocess, top_k

    for start in range(0, len(paths), batch_size):
        chunk = paths[start : start + batch_size]
        batch = preprocess(classifier, [load_image(path) for path in chunk])
        yield from zip(chunk, top_k(classifier, batch, k))


def write_text(results: Iterator[tuple[str, Ranked]]) -> None:
    """Each image's path (its bytes that are not UTF-8 shown as U+FFFD), then one
    ``probability  class`` line per class."""
    for path, ranked in results:
        print(readable_text(path))
        for name, probability in ranked:
            print(f"  {probability:7.2%}  {name}")
        sys.stdout.flush()


def write_json(checkpoint: str, results: Iterator[tuple[str, Ranked]]) -> None:
    """One object ``{"checkpoint", "results": [{"image", "predictions": [{"class", "probability"}]}]}``,
    written one result at a time from the first one on; :func:`main` has decoded every image
    once before, so the object is complete when the command ends."""
    for index, (path, ranked) in enumerate(results):
        result = {"image": path, "predictions": [{"class": name, "probability": p} for name, p in ranked]}
        opening = f'{{"checkpoint": {json.dumps(checkpoint)}, "results": [' if index == 0 else ","
        sys.stdout.write(f"{opening}\n  {json.dumps(result)}")
        sys.stdout.flush()
    sys.stdout.write("\n]}\n")


@command
def main(argv: list[str] | None = None) -> None:
    """Print the ``--top-k`` classes of each image, as text or JSON."""
    args = parse_args(argv)
    missing = next((path for path in args.images if not Path(path).is_file()), None)
    if missing is not None:  # before any work, not after printing half the results
        raise FileNotFoundError(f"image {missing} does not exist (or is not a file); check the path")
    # torch, timm and Lightning load after the arguments are read
    from vision.inference import require_readable
    from vision.module import load_classifier

    if args.json:  # every image decoded once first: an unreadable one would cut the object short
        require_readable(args.images)

    classifier = load_classifier(args.checkpoint, args.device)
    if args.flip_tta:
        classifier.hparams.flip_tta = True
    results = predictions(classifier, args.images, args.top_k, args.batch_size)
    if args.json:
        write_json(args.checkpoint, results)
    else:
        write_text(results)


if __name__ == "__main__":
    main()
