"""The command line of ``python -m nlp.walkthrough``: build (and optionally train) the tiny model,
print every step, write the JSON and the plots."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from rich.console import Console
from rich.text import Text

from core.training.cli import ArgumentParser, command, positive_float, positive_int
from nlp.toy_corpus import TOY_PAIRS
from nlp.walkthrough.model import Vocabulary, build_model, fit
from nlp.walkthrough.printing import print_steps
from nlp.walkthrough.steps import trace


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


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread, then restore the previous count: on matrices a few numbers wide,
    more threads only wait for each other (over ten times slower on a busy machine)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@command
def main(argv: list[str] | None = None) -> None:
    """Run the walkthrough of the command line ``argv`` on one torch thread."""
    args = parse_args(argv)
    with one_thread():
        walk_through(args)


def walk_through(args: argparse.Namespace) -> None:
    """Build (and with ``--train`` fit) the tiny model, print every step, write JSON and plots."""
    console = Console(highlight=False, soft_wrap=True)
    vocab = Vocabulary([sentence for pair in TOY_PAIRS for sentence in pair])
    model = build_model(vocab, args.dim, args.heads, args.head_dim, args.ffn_dim, args.seed)
    console.print(
        Text(
            f"Tiny Transformer: d_model = {args.dim}, {args.heads} heads of d_k = {args.head_dim}, d_ff = "
            f"{args.ffn_dim}, one post-norm encoder layer and one decoder layer, ReLU, LayerNorm eps 1e-6, "
            f"weights uniform in [0, 1) from seed {args.seed}.",
            style="bold",
        )
    )
    if args.train:
        began = time.perf_counter()
        loss = fit(model, vocab, TOY_PAIRS, args.train_steps, args.lr)
        console.print(
            Text(
                f"Trained on the {len(TOY_PAIRS)} pairs: {args.train_steps} Adam steps (lr {args.lr:g}) in "
                f"{time.perf_counter() - began:.1f} s, final cross-entropy {loss:.4f}.",
                style="bold",
            )
        )
    console.print()
    steps = trace(model, vocab, TOY_PAIRS)
    print_steps(steps, console)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"steps": [step.to_json() for step in steps]}, indent=1))
        console.print(f"Wrote {len(steps)} steps to {args.json}")
    if args.plots is not None:
        from nlp.walkthrough.plots import save_plots  # matplotlib loads only when plots are asked for

        for path in save_plots(steps, args.plots):
            console.print(f"Wrote {path}")

