"""``python -m vision.predict CKPT IMAGE... [--top-k 5] [--json]``: the most probable classes of
each image under a trained Vision Transformer."""

from __future__ import annotations

import argparse
import json
import sys

from core.cli import positive_int
from vision.inference import load_classifier, load_image, preprocess, top_k


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (``sys.argv[1:]`` when ``argv`` is None)."""
    parser = argparse.ArgumentParser(prog="python -m vision.predict", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a checkpoint written by vision.train (e.g. checkpoints/last.ckpt)")
    parser.add_argument("images", nargs="+", help="image files (any format Pillow reads)")
    parser.add_argument(
        "--top-k",
        type=positive_int,
        default=5,
        help="classes to show per image, at least 1; more than the model has shows them all (default 5)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cuda (default cpu)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Print the ``--top-k`` classes of each image, as text or JSON."""
    args = parse_args(argv)
    try:
        classifier = load_classifier(args.checkpoint, args.device)
        images = [load_image(path) for path in args.images]
    except (FileNotFoundError, ValueError) as error:
        sys.exit(f"vision.predict: {error}")
    predictions = top_k(classifier, preprocess(classifier, images), args.top_k)
    if args.json:
        results = [
            {"image": path, "predictions": [{"class": name, "probability": p} for name, p in ranked]}
            for path, ranked in zip(args.images, predictions)
        ]
        json.dump({"checkpoint": args.checkpoint, "results": results}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    for path, ranked in zip(args.images, predictions):
        print(path)
        for name, probability in ranked:
            print(f"  {probability:7.2%}  {name}")


if __name__ == "__main__":
    main()
