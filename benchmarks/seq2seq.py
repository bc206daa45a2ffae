"""Our :class:`nlp.model.Seq2SeqTransformer` vs the same model built on ``torch.nn.Transformer``:
training tokens per second (forward + backward + AdamW) and their ratio.

Both models have the same dimensions, the same embeddings (shared source/target table scaled by
sqrt(d), sinusoidal positions from :mod:`core`), post-norm layers without a final norm, an
output projection tied to the embedding, and the same loss (label-smoothed cross-entropy over
non-pad target tokens), on the same batch.

    python -m benchmarks.seq2seq [--quick] [--append results.jsonl] [--threads N] [--device cuda]
                                 [--dim 256] [--heads 4] [--layers 3] [--ffn 1024] [--vocab 8000]
                                 [--batch 32] [--src-len 32] [--tgt-len 32]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import core
from benchmarks.common import autocast, base_parser, emit, environment, interleave, setup, speed_ratio, throughput
from nlp.model import Seq2SeqTransformer

PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
LABEL_SMOOTHING = 0.1


@dataclass(frozen=True)
class ModelSize:
    """Dimensions shared by every contender."""

    vocab: int  # joint source/target vocabulary
    dim: int  # d_model
    heads: int  # attention heads h
    layers: int  # encoder layers = decoder layers N
    ffn: int  # feed-forward width d_ff
    max_len: int  # longest sequence the positional table covers


QUICK_SIZE = ModelSize(vocab=64, dim=32, heads=2, layers=1, ffn=64, max_len=64)


def add_size_args(parser: argparse.ArgumentParser) -> None:
    """Model dimension options (defaults: a small base-like model that runs on a laptop CPU)."""
    parser.add_argument("--vocab", type=int, default=8000, help="joint vocabulary size")
    parser.add_argument("--dim", type=int, default=256, help="model width d_model")
    parser.add_argument("--heads", type=int, default=4, help="attention heads")
    parser.add_argument("--layers", type=int, default=3, help="encoder and decoder layers each")
    parser.add_argument("--ffn", type=int, default=1024, help="feed-forward width d_ff")
    parser.add_argument("--max-len", type=int, default=512, help="longest sequence (positional table size)")


def model_size(args: argparse.Namespace) -> ModelSize:
    if args.quick:
        return QUICK_SIZE
    return ModelSize(args.vocab, args.dim, args.heads, args.layers, args.ffn, args.max_len)


def build_ours(size: ModelSize, model_class: type[Seq2SeqTransformer] = Seq2SeqTransformer) -> Seq2SeqTransformer:
    """Our translation model (or a subclass) at ``size``, without dropout (timing, not training
    quality)."""
    return model_class(
        size.vocab,
        size.vocab,
        dim=size.dim,
        num_heads=size.heads,
        encoder_depth=size.layers,
        decoder_depth=size.layers,
        ffn_dim=size.ffn,
        dropout=0.0,
        max_len=size.max_len,
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
    )


class TorchTransformerSeq2Seq(nn.Module):
    """The model of :class:`Seq2SeqTransformer` with ``torch.nn.Transformer`` as encoder-decoder.

    ``nn.Transformer`` would add a final LayerNorm to each post-norm stack, which our post-norm
    stacks do not have, so its encoder and decoder are passed in without one.
    """

    def __init__(self, size: ModelSize) -> None:
        super().__init__()
        self.dim = size.dim
        self.embedding = nn.Embedding(size.vocab, size.dim, padding_idx=PAD_ID)
        self.pos_encoding = core.SinusoidalPositionalEncoding(size.dim, size.max_len, 0.0)
        layer_args = dict(dim_feedforward=size.ffn, dropout=0.0, activation="relu", batch_first=True)
        encoder_layer = nn.TransformerEncoderLayer(size.dim, size.heads, **layer_args)
        decoder_layer = nn.TransformerDecoderLayer(size.dim, size.heads, **layer_args)
        self.transformer = nn.Transformer(
            size.dim,
            size.heads,
            custom_encoder=nn.TransformerEncoder(encoder_layer, size.layers, enable_nested_tensor=False),
            custom_decoder=nn.TransformerDecoder(decoder_layer, size.layers),
            batch_first=True,
        )
        self.output = nn.Linear(size.dim, size.vocab, bias=False)
        self.output.weight = self.embedding.weight

    def embed(self, tokens: Tensor) -> Tensor:
        return self.pos_encoding(self.embedding(tokens) * math.sqrt(self.dim))

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Source [B, S] and shifted target [B, T] -> logits [B, T, vocab]."""
        src_padding_mask = src.eq(PAD_ID)
        causal = core.causal_mask(tgt.shape[1], device=tgt.device)
        hidden = self.transformer(
            self.embed(src),
            self.embed(tgt),
            tgt_mask=causal,
            src_key_padding_mask=src_padding_mask,
            memory_key_padding_mask=src_padding_mask,
            tgt_is_causal=True,
        )
        return self.output(hidden)


def random_batch(size: ModelSize, batch: int, length: int, device: torch.device, generator: torch.Generator) -> Tensor:
    """Right-padded random sentences [B, length] of lengths between length/2 and length."""
    tokens = torch.randint(3, size.vocab, (batch, length), generator=generator)
    lengths = torch.randint(max(length // 2, 1), length + 1, (batch,), generator=generator)
    tokens[torch.arange(length)[None, :] >= lengths[:, None]] = PAD_ID
    return tokens.to(device)


def make_train_step(
    model: nn.Module, src: Tensor, tgt_in: Tensor, tgt_out: Tensor, bf16: bool
) -> Callable[[], object]:
    """One optimizer step of teacher-forced translation on a fixed batch."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> object:
        optimizer.zero_grad(set_to_none=True)
        with autocast(src.device, bf16):
            logits = model(src, tgt_in)
            loss = F.cross_entropy(
                logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD_ID, label_smoothing=LABEL_SMOOTHING
            )
        loss.backward()
        optimizer.step()
        return loss

    return step


def main(argv: list[str] | None = None) -> dict:
    parser = base_parser(__doc__.splitlines()[0])
    add_size_args(parser)
    parser.add_argument("--batch", type=int, default=32, help="sentence pairs per step")
    parser.add_argument("--src-len", type=int, default=32, help="padded source length")
    parser.add_argument("--tgt-len", type=int, default=32, help="padded target length")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    device = setup(args, warmup=1 if args.quick else 3, repeats=1 if args.quick else 15)
    size = model_size(args)
    batch, src_len, tgt_len = (2, 6, 6) if args.quick else (args.batch, args.src_len, args.tgt_len)
    generator = torch.Generator().manual_seed(args.seed)
    src = random_batch(size, batch, src_len, device, generator)
    tgt = random_batch(size, batch, tgt_len + 1, device, generator)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    tokens = int(tgt_out.ne(PAD_ID).sum())
    bf16 = device.type == "cuda"
    models = {"ours": build_ours(size), "torch": TorchTransformerSeq2Seq(size)}
    runs = {
        name: make_train_step(model.to(device), src, tgt_in, tgt_out, bf16) for name, model in models.items()
    }
    seconds = interleave(runs, args.warmup, args.repeats, device)
    speed = {name: throughput(values, tokens) for name, values in seconds.items()}
    ratios = {"train ours/torch": speed_ratio(speed["ours"], speed["torch"])}
    output = {
        "benchmark": "seq2seq",
        "ratios": ratios,
        "env": environment(device, args.threads, " ".join(["python -m benchmarks.seq2seq", *argv])),
        "settings": {
            "warmup": args.warmup,
            "repeats": args.repeats,
            "bf16": bf16,
            **asdict(size),
            "batch": batch,
            "src_len": src_len,
            "tgt_len": tgt_len,
            "target_tokens_per_step": tokens,
            "parameters": {name: sum(p.numel() for p in model.parameters()) for name, model in models.items()},
        },
        "unit": "target tokens/s",
        "speed": speed,
    }
    emit(output, args.append)
    return output


if __name__ == "__main__":
    main()
