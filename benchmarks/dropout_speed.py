"""A dropout layer forward and backward: PyTorch's ``F.dropout`` against ``core.dropout`` (its mask
from bulk integer draws), beside the product alone (the same tensor times a constant), in
bfloat16 and float32.

The activations are those of a feed-forward hidden layer 1,024 wide (``transformer_mini``'s until it became 768)
over a batch of 1,024 target tokens. All contenders alternate (A B C A B C ...), each reporting
its median.

    python -m benchmarks.dropout_speed [--rate P] [--threads N] [--repeats N] [--append results.jsonl] [--quick]
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from benchmarks.common import base_parser, environment, interleave, setup, speed_ratio, table_result, throughput
from benchmarks.report import table
from core.dropout import dropout
from nlp.recipe import MIN_DROPOUT

TOKENS, WIDTH = 1024, 1024
CONTENDERS: dict[str, Callable[[Tensor, float], Tensor]] = {
    "F.dropout": lambda x, p: F.dropout(x, p, training=True),
    "core.dropout": lambda x, p: dropout(x, p),
    "product only": lambda x, p: x * (1 / (1 - p)),
}


def layer_step(shape: tuple[int, int], dtype: torch.dtype, rate: float, apply: Callable[[Tensor, float], Tensor]) -> Callable[[], None]:
    """Forward and backward of ``apply`` on a fixed tensor of ``shape``."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=generator).to(dtype).requires_grad_()
    grad = torch.randn(shape, generator=generator).to(dtype)

    def step() -> None:
        apply(x, rate).backward(grad)

    return step


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows of a result as a table: each precision, every contender's time, and the speedup."""
    return table(
        ("dtype", *(f"{name} ms" for name in CONTENDERS), "core.dropout over F.dropout"),
        ((row["dtype"], *(f"{1e3 * row[name]['median_s']:.2f}" for name in CONTENDERS), f"{row['speedup']:.2f}x")
         for row in rows),
    )


def result_markdown(result: Mapping[str, Any]) -> str:
    """The table of one of this script's result lines (BENCHMARKS.md and the docs' figure)."""
    return markdown(result["rows"])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=MIN_DROPOUT, help="the dropout rate (default: nlp.recipe.MIN_DROPOUT)")
    args = parser.parse_args(argv)
    device = setup(args, warmup=1 if args.quick else 5, repeats=1 if args.quick else 30)
    shape = (16, 32) if args.quick else (TOKENS, WIDTH)
    rows = []
    for dtype in (torch.bfloat16, torch.float32):
        steps = {name: layer_step(shape, dtype, args.rate, apply) for name, apply in CONTENDERS.items()}
        seconds = interleave(steps, args.warmup, args.repeats, device)
        speeds = {name: throughput(values, shape[0] * shape[1]) for name, values in seconds.items()}
        rows.append({"dtype": str(dtype).removeprefix("torch."), **speeds,
                     "speedup": speed_ratio(speeds["core.dropout"], speeds["F.dropout"])})
    lines = markdown(rows)
    env = environment(device, args.threads, " ".join(["python -m benchmarks.dropout_speed", *argv]))
    return table_result("dropout_speed", env, rows, lines, args.append, rate=args.rate, shape=list(shape))


if __name__ == "__main__":
    main()
