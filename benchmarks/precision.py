"""bf16 autocast against float32 for one training step of each head's CPU model: the translation
``transformer_mini`` on a batch of about 1,024 target tokens and the pinned CPU ViT (width 128,
depth 4, 4 heads, MLP ratio 2, patch 4, convolutional stem) on 128 images of 28 px.

A step is forward, the label-smoothed loss, backward and AdamW's update (for translation
:func:`benchmarks.seq2seq.make_train_step` on right-padded random sentences, counted in their
target tokens); the two precisions alternate (A B A B ...) and each reports its median. On a CPU that computes bfloat16 (AVX512-BF16 or AMX) this is the measurement
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

from benchmarks import seq2seq
from benchmarks.common import autocast, base_parser, environment, interleave, setup, speed_ratio, table_result, throughput
from benchmarks.report import table
from core.training.plan.precision import cpu_computes_bf16
from nlp.model import Seq2SeqTransformer
from vision.model import VisionTransformer

VOCAB = 8000
NLP_BATCH = (34, 26, 30)  # sentences, padded source and target lengths (about 1,020 target positions)
VIT_BATCH = (128, 28)  # images, side in pixels


def translation_step(quick: bool, device: torch.device) -> tuple[Callable[[bool], object], int]:
    """A training step of ``transformer_mini`` (``quick``: a tiny one), :func:`benchmarks.seq2seq.make_train_step`
    on right-padded random sentences, and its target tokens."""
    size = seq2seq.QUICK_SIZE if quick else seq2seq.ModelSize(vocab=VOCAB, dim=256, heads=4, layers=3, ffn=1024, max_len=256)
    batch, source, target = (4, 6, 6) if quick else NLP_BATCH
    model = Seq2SeqTransformer(
        size.vocab, size.vocab, dim=size.dim, num_heads=size.heads, encoder_depth=size.layers,
        decoder_depth=size.layers, ffn_dim=size.ffn, max_len=size.max_len, norm_first=True,
    ).to(device)
    generator = torch.Generator().manual_seed(0)
    src = seq2seq.random_batch(size, batch, source, device, generator)
    tgt = seq2seq.random_batch(size, batch, target + 1, device, generator)
    steps = {bf16: seq2seq.make_train_step(model, src, tgt[:, :-1], tgt[:, 1:], bf16) for bf16 in (False, True)}
    return (lambda bf16: steps[bf16]()), int(tgt[:, 1:].ne(seq2seq.PAD_ID).sum())


def vision_step(quick: bool, device: torch.device) -> tuple[Callable[[bool], None], int]:
    """A training step of the pinned CPU ViT (``quick``: a tiny one) and its images."""
    batch, side = (4, 16) if quick else VIT_BATCH
    size = dict(dim=32, depth=1, num_heads=2) if quick else dict(dim=128, depth=4, num_heads=4)
    model = VisionTransformer(img_size=side, patch_size=4, num_classes=10, mlp_ratio=2, stem="conv", **size).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    images = torch.randn(batch, 3, side, side, device=device)
    labels = torch.randint(0, 10, (batch,), device=device)

    def step(bf16: bool) -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, bf16):
            loss = F.cross_entropy(model(images).float(), labels, label_smoothing=0.1)
        loss.backward()
        optimizer.step()

    return step, batch


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
