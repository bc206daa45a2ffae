"""What a translation training step costs, lever by lever, at equal batch: ``transformer_mini``
in bf16 autocast on a CPU (the translation recipe's precision there), forward, the label-smoothed
loss, backward and Adam's update, in target tokens per second.

Contenders (alternating A B C ..., each its median):

- ``before``: the fused attention kernel everywhere and logits for every target position, padding
  included (the step as it was);
- ``math kernel``: attention in the math kernel up to ``core.attention.MATH_KERNEL_MAX_KEYS`` keys;
- ``predicted rows``: the output layer and its softmax only on the predicted (non-pad) positions;
- ``defaults``: both, the step ``nlp.train`` takes;
- ``defaults, no biases``: the linear layers without biases (Cramming);
- ``defaults, dropout R``: dropout at a rate of ``R`` (``nlp.recipe``'s auto dropout switches on at
  ``MIN_DROPOUT``; a layer draws a random number per activation at any rate above 0);
- ``defaults, vocabulary V``: the output layer and embeddings at another vocabulary size (same
  batch of ids: the cost per token; a smaller vocabulary cuts sentences into more tokens);
- ``defaults, torch.compile``: the step's forward and loss compiled (``--compile``; its compile
  time is reported, a cost inside the run's budget).

The batch: ``--sentences`` pairs, source and target right-padded to ``--length`` tokens, each
sentence 80-100% of that long, as a batch of similar lengths from the length-bucketed sampler.

    python -m benchmarks.translation_step [--compile] [--threads N] [--repeats N] [--append results.jsonl] [--quick]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import core.attention
from benchmarks.common import base_parser, environment, interleave, mini_preset, setup, speed_ratio, table_result, throughput
from benchmarks.report import table
from core.training.plan.precision import cpu_computes_bf16
from nlp.model import Seq2SeqTransformer
from nlp.recipe import MIN_DROPOUT

PAD_ID = 0
VOCAB = 8000
OTHER_VOCABULARIES = (4000, 16000)
DROPOUT_RATES = (0.005, MIN_DROPOUT)


def padded_batch(sentences: int, length: int, vocab: int, generator: torch.Generator) -> Tensor:
    """Right-padded random ids [sentences, length + 1] (``<s>`` and the target), each sentence
    80-100% of ``length`` long."""
    tokens = torch.randint(3, vocab, (sentences, length + 1), generator=generator)
    lengths = torch.randint(int(0.8 * length), length + 1, (sentences,), generator=generator) + 1
    tokens[torch.arange(length + 1)[None, :] >= lengths[:, None]] = PAD_ID  # (B, length + 1)
    return tokens


@contextmanager
def fused_kernel_only() -> Iterator[None]:
    """Attention in PyTorch's own kernel choice (the fused kernel on a CPU) at every length."""
    limit = core.attention.MATH_KERNEL_MAX_KEYS
    core.attention.MATH_KERNEL_MAX_KEYS = 0
    try:
        yield
    finally:
        core.attention.MATH_KERNEL_MAX_KEYS = limit


def training_step(
    model: nn.Module, source: Tensor, target: Tensor, *, predicted_rows: bool, math_kernel: bool, compiled: bool = False
) -> Callable[[], Tensor]:
    """One Adam step of teacher forcing on a fixed batch, the loss as ``nlp.module``'s; a call
    returns the step's loss."""
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    target_in, target_out = target[:, :-1], target[:, 1:]

    def loss() -> Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if predicted_rows:
                predicted = target_out.ne(PAD_ID)
                return F.cross_entropy(model(source, target_in, predicted).float(), target_out[predicted], label_smoothing=0.1)
            logits = model(source, target_in)
            return F.cross_entropy(
                logits.flatten(0, 1).float(), target_out.flatten(), ignore_index=PAD_ID, label_smoothing=0.1
            )

    forward = torch.compile(loss) if compiled else loss

    def step() -> Tensor:
        optimizer.zero_grad(set_to_none=True)
        with nullcontext() if math_kernel else fused_kernel_only():
            value = forward()
            value.backward()
        optimizer.step()
        return value.detach()

    return step


def mini_sizes() -> dict[str, int]:
    """The width, heads, depths and feed-forward of ``conf/model/transformer_mini.yaml``."""
    model = mini_preset().model
    return {key: int(model[key]) for key in ("dim", "num_heads", "encoder_depth", "decoder_depth", "ffn_dim")}


def mini(vocab: int, quick: bool, bias: bool = True, dropout: float = 0.0) -> Seq2SeqTransformer:
    """``transformer_mini`` (``quick``: a tiny model), without dropout unless ``dropout``."""
    torch.manual_seed(0)
    size = dict(dim=32, num_heads=2, encoder_depth=1, decoder_depth=1, ffn_dim=64) if quick else mini_sizes()
    model = Seq2SeqTransformer(vocab, vocab, **size, dropout=dropout, max_len=256, norm_first=True)
    if not bias:
        for layer in model.modules():
            if isinstance(layer, nn.Linear):
                layer.bias = None
    return model


def markdown(rows: list[dict[str, Any]], compile_seconds: float | None) -> str:
    """The rows of a result as a table: each step's tokens/s and its speed over ``before``, and
    the compile time where the step was compiled."""
    cells = [[row["contender"], f"{row['items_per_s']:,.0f}", f"{row['speedup']:.2f}x"] for row in rows]
    if compile_seconds is not None:
        cells.append(["compiling the step once", f"{compile_seconds:.0f} s", "-"])
    return table(("step", "target tokens/s", "over before"), cells)


def result_markdown(result: Mapping[str, Any]) -> str:
    """The table of one of this script's result lines (BENCHMARKS.md and the docs' figure)."""
    return markdown(result["rows"], result.get("compile_seconds"))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=36, help="sentence pairs per batch")
    parser.add_argument("--length", type=int, default=30, help="padded source and target length")
    parser.add_argument("--compile", action="store_true", help="also the step with torch.compile")
    args = parser.parse_args(argv)
    setup(args, warmup=1 if args.quick else 3, repeats=1 if args.quick else 15)
    sentences, length = (4, 6) if args.quick else (args.sentences, args.length)
    vocab = 64 if args.quick else VOCAB
    generator = torch.Generator().manual_seed(args.seed)
    source, target = padded_batch(sentences, length, vocab, generator)[:, 1:], padded_batch(sentences, length, vocab, generator)
    tokens = int(target[:, 1:].ne(PAD_ID).sum())
    steps = {
        "before": training_step(mini(vocab, args.quick), source, target, predicted_rows=False, math_kernel=False),
        "math kernel": training_step(mini(vocab, args.quick), source, target, predicted_rows=False, math_kernel=True),
        "predicted rows": training_step(mini(vocab, args.quick), source, target, predicted_rows=True, math_kernel=False),
        "defaults": training_step(mini(vocab, args.quick), source, target, predicted_rows=True, math_kernel=True),
        "defaults, no biases": training_step(
            mini(vocab, args.quick, bias=False), source, target, predicted_rows=True, math_kernel=True
        ),
    }
    for rate in DROPOUT_RATES:
        steps[f"defaults, dropout {rate:g}"] = training_step(
            mini(vocab, args.quick, dropout=rate), source, target, predicted_rows=True, math_kernel=True
        )
    for other in (32, 128) if args.quick else OTHER_VOCABULARIES:
        steps[f"defaults, vocabulary {other:,}"] = training_step(
            mini(other, args.quick), source % other, target % other, predicted_rows=True, math_kernel=True
        )
    compile_seconds = None
    if args.compile:
        steps["defaults, torch.compile"] = compiled = training_step(
            mini(vocab, args.quick), source, target, predicted_rows=True, math_kernel=True, compiled=True
        )
        start = time.perf_counter()
        compiled()  # the first call compiles
        compile_seconds = round(time.perf_counter() - start, 1)
    seconds = interleave(steps, args.warmup, args.repeats, torch.device("cpu"))
    speeds = {name: throughput(samples, tokens) for name, samples in seconds.items()}
    rows = [
        {"contender": name, **speed, "speedup": speed_ratio(speed, speeds["before"])} for name, speed in speeds.items()
    ]
    lines = markdown(rows, compile_seconds)
    env = environment(torch.device("cpu"), args.threads, " ".join(["python -m benchmarks.translation_step", *argv]))
    return table_result(
        "translation_step", env, rows, lines, args.append, tokens=tokens, sentences=sentences, length=length,
        compile_seconds=compile_seconds, cpu_computes_bf16=cpu_computes_bf16(), model=None if args.quick else mini_sizes(),
    )


if __name__ == "__main__":
    main()
