"""The fused (flash) CPU kernel of ``F.scaled_dot_product_attention`` against its math kernel, for
a training step of attention (forward and backward) in bfloat16 and float32, at sequence lengths
from a short sentence to a long document.

A batch holds about 4,096 query positions (``batch = 4096 // length``) of 4 heads; both kernels
see the same tensors and the same key padding mask, alternating (A B A B ...), each reporting its
median. This is the measurement behind ``core.attention.MATH_KERNEL_MAX_KEYS``: on a CPU, with
bfloat16 and gradients, attention over at most that many keys takes the math kernel.

    python -m benchmarks.attention_kernels [--threads N] [--repeats N] [--append results.jsonl] [--quick]
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from benchmarks.common import base_parser, environment, interleave, setup, speed_ratio, table_result, throughput
from benchmarks.report import table
from core.attention import MATH_KERNEL_MAX_KEYS

LENGTHS = (16, 32, 64, 128, 256, 512)
QUERIES = 4096  # query positions per batch
HEADS = 4
KERNELS = {"fused": SDPBackend.FLASH_ATTENTION, "math": SDPBackend.MATH}


def attention_step(length: int, head_dim: int, dtype: torch.dtype, kernel: SDPBackend) -> Callable[[], None]:
    """Forward and backward of attention over ``length`` keys with ``kernel``, on a fixed batch."""
    generator = torch.Generator().manual_seed(0)
    shape = (max(1, QUERIES // length), HEADS, length, head_dim)
    query, key, value = (torch.randn(shape, generator=generator, dtype=dtype, requires_grad=True) for _ in range(3))
    keep = torch.rand(shape[0], 1, 1, length, generator=generator) > 0.1  # True = may attend
    keep[..., 0] = True  # every query sees at least one key
    grad = torch.randn(shape, generator=generator, dtype=dtype)

    def step() -> None:
        with sdpa_kernel(kernel):
            F.scaled_dot_product_attention(query, key, value, attn_mask=keep).backward(grad)

    return step


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows of a result as a table: each precision and length, both kernels' times."""
    return table(
        ("dtype", "keys", "fused kernel ms", "math kernel ms", "math over fused"),
        ((row["dtype"], row["keys"], f"{1e3 * row['fused']['median_s']:.1f}", f"{1e3 * row['math']['median_s']:.1f}",
          f"{row['math_speedup']:.2f}x") for row in rows),
    )


def result_markdown(result: Mapping[str, Any]) -> str:
    """The table of one of this script's result lines (BENCHMARKS.md and the docs' figure)."""
    return markdown(result["rows"])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--head-dim", type=int, default=32, help="width of one head d_k")
    args = parser.parse_args(argv)
    device = setup(args, warmup=1 if args.quick else 3, repeats=1 if args.quick else 15)
    lengths = (8, 16) if args.quick else LENGTHS
    rows = []
    for dtype in (torch.bfloat16, torch.float32):
        for length in lengths:
            steps = {name: attention_step(length, args.head_dim, dtype, kernel) for name, kernel in KERNELS.items()}
            seconds = interleave(steps, args.warmup, args.repeats, device)
            fused, math = throughput(seconds["fused"], QUERIES), throughput(seconds["math"], QUERIES)
            rows.append({"dtype": str(dtype).removeprefix("torch."), "keys": length, "fused": fused, "math": math,
                         "math_speedup": speed_ratio(math, fused)})
    lines = markdown(rows)
    env = environment(device, args.threads, " ".join(["python -m benchmarks.attention_kernels", *argv]))
    return table_result("attention_kernels", env, rows, lines, args.append, head_dim=args.head_dim,
                        heads=HEADS, math_kernel_max_keys=MATH_KERNEL_MAX_KEYS)


if __name__ == "__main__":
    main()
