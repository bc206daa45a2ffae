"""The walkthrough itself: build (and optionally fit) the tiny model, trace one forward pass, print
every step, write the JSON and the plots."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from rich.console import Console
from rich.text import Text

from nlp.data.toy_corpus import TOY_PAIRS
from nlp.walkthrough.model import Vocabulary, build_model, fit
from nlp.walkthrough.printing import print_steps
from nlp.walkthrough.steps import trace


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
