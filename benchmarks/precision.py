"""bf16 autocast against float32 for one training step of each head's CPU model: the translation
``transformer_mini`` on a batch of about 1,024 target tokens and the pinned CPU ViT (width 128,
depth 4, 4 heads, MLP ratio 2, patch 4, convolutional stem) on 128 images of 28 px.

A step is forward, loss, backward and the optimizer's update (Adam for translation, AdamW for
the ViT), as each head's module runs it; the two precisions alternate (A B A B ...) and each
reports its median. On a CPU that computes bfloat16 (AVX512-BF16 or AMX) this is the measurement
behind ``trainer.precision=auto`` (``core/training/plan/precision.py``): where bf16 speeds a head's
step up, its default follows the hardware.

    python -m benchmarks.precision [--threads N] [--repeats N] [--append results.jsonl] [--quick]
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.common import autocast, base_parser, environment, interleave, setup, speed_ratio, table_result, throughput
from benchmarks.report import table
from core.training.plan.precision import cpu_computes_bf16
from nlp.model import Seq2SeqTransformer
from vision.model import VisionTransformer

VOCAB = 8000
NLP_BATCH = (34, 26, 30)  # sentences, source and target tokens: 1,020 target tokens
VIT_BATCH = (128, 28)  # images, side in pixels


def translation_step(quick: bool, device: torch.device) -> tuple[Callable[[bool], None], int]:
    """A training step of ``transformer_mini`` (``quick``: a tiny one) and its target tokens."""
    vocab, (batch, source, target) = (64, (4, 6, 6)) if quick else (VOCAB, NLP_BATCH)
    size = dict(dim=32, num_heads=2, encoder_depth=1, decoder_depth=1, ffn_dim=64) if quick else dict(
        dim=256, num_heads=4, encoder_depth=3, decoder_depth=3, ffn_dim=1024
    )
    model = Seq2SeqTransformer(vocab, vocab, norm_first=True, max_len=256, **size).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    src = torch.randint(3, vocab, (batch, source), device=device)
    tgt = torch.randint(3, vocab, (batch, target + 1), device=device)

    def step(bf16: bool) -> None:
        with autocast(device, bf16):
            logits = model(src, tgt[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1).float(), tgt[:, 1:].flatten(), label_smoothing=0.1)
        update(model, optimizer, loss)

    return step, batch * target


def vision_step(quick: bool, device: torch.device) -> tuple[Callable[[bool], None], int]:
    """A training step of the pinned CPU ViT (``quick``: a tiny one) and its images."""
    batch, side = (4, 16) if quick else VIT_BATCH
    size = dict(dim=32, depth=1, num_heads=2) if quick else dict(dim=128, depth=4, num_heads=4)
    model = VisionTransformer(img_size=side, patch_size=4, num_classes=10, mlp_ratio=2, stem="conv", **size).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    images = torch.randn(batch, 3, side, side, device=device)
    labels = torch.randint(0, 10, (batch,), device=device)

    def step(bf16: bool) -> None:
        with autocast(device, bf16):
            loss = F.cross_entropy(model(images).float(), labels, label_smoothing=0.1)
        update(model, optimizer, loss)

    return step, batch


def update(model: nn.Module, optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    args = base_parser(__doc__.splitlines()[0]).parse_args(argv)
    device = setup(args, warmup=1 if args.quick else 3, repeats=1 if args.quick else 10)
    rows = []
    for head, (step, items) in (("translation", translation_step(args.quick, device)),
                                ("vision", vision_step(args.quick, device))):
        seconds = interleave({"float32": lambda: step(False), "bf16": lambda: step(True)}, args.warmup, args.repeats, device)
        fp32, bf16 = throughput(seconds["float32"], items), throughput(seconds["bf16"], items)
        rows.append({"head": head, "items": items, "float32": fp32, "bf16": bf16, "bf16_speedup": speed_ratio(bf16, fp32)})
    lines = table(
        ("head", "items a step", "float32 items/s", "bf16 items/s", "bf16 speed-up"),
        ((row["head"], row["items"], f"{row['float32']['items_per_s']:.0f}", f"{row['bf16']['items_per_s']:.0f}",
          f"{row['bf16_speedup']:.2f}x") for row in rows),
    )
    env = environment(device, args.threads, " ".join(["python -m benchmarks.precision", *argv]))
    return table_result("precision", env, rows, lines, args.append, cpu_computes_bf16=cpu_computes_bf16())


if __name__ == "__main__":
    main()
