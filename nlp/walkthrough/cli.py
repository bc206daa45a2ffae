"""The command line of ``python -m nlp.walkthrough``: its options, checked before the tiny model
and torch load (:mod:`nlp.walkthrough.run` does the work)."""

from __future__ import annotations

import argparse
from pathlib import Path

from core.commands.arguments import ArgumentParser, positive_float, positive_int
from core.commands.exit import command


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line of ``python -m nlp.walkthrough``, checked option by option."""
    parser = ArgumentParser(
        prog="python -m nlp.walkthrough",
        description="Print every matrix of one forward pass of a tiny Transformer on the toy corpus.",
    )
    add = parser.add_argument
    add("--seed", type=int, default=0, help="seed of the uniform [0, 1) weights (default 0)")
    add("--dim", type=positive_int, default=6, help="model width d_model (default 6)")
    add("--heads", type=positive_int, default=2, help="attention heads h (default 2)")
    add("--head-dim", type=positive_int, default=4, help="width d_k of each head's Q, K, V (default 4)")
    add("--ffn-dim", type=positive_int, default=8, help="inner width d_ff of the feed-forward layer (default 8)")
    add("--train", action="store_true", help="train on the corpus first, so the predictions are right")
    add("--train-steps", type=positive_int, default=150, help="Adam steps of --train (default 150)")
    add("--lr", type=positive_float, default=0.02, help="learning rate of --train (default 0.02)")
    add("--json", type=Path, metavar="PATH", help="write every step, unrounded, to this JSON file")
    add("--plots", type=Path, metavar="DIR", help="write heatmaps (PNG) into this directory")
    args = parser.parse_args(argv)
    if args.dim < 2:
        parser.error(f"argument --dim: {args.dim} is too small for LayerNorm to mean anything; use 2 or more")
    if args.json is not None and args.json.is_dir():
        parser.error(f"argument --json: {args.json} is a directory; give a file path such as {args.json / 'steps.json'}")
    if args.plots is not None and args.plots.exists() and not args.plots.is_dir():
        parser.error(f"argument --plots: {args.plots} is a file; give a directory for the PNG files")
    return args


@command
def main(argv: list[str] | None = None) -> None:
    """Run the walkthrough of the command line ``argv`` on one torch thread."""
    args = parse_args(argv)
    from nlp.walkthrough.run import one_thread, walk_through  # torch loads after the arguments are read

    with one_thread():
        walk_through(args)
