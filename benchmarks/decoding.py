"""Greedy and beam-search decoding speed: our cached decoding vs our uncached decoding vs Hugging
Face ``MarianMTModel.generate`` at the same size, in generated tokens per second.

Every sentence is made to generate exactly ``length`` tokens, so that all contenders do the same
work whatever their (random) weights predict: our model's ``</s>`` logit is lowered by
``EOS_PENALTY`` (:class:`NoEarlyEnd`), so a hypothesis ends only when the ``max_len`` limit
forces ``</s>``; ``generate`` gets ``min_new_tokens = max_new_tokens = length``, whose logits
processor sets the ``</s>`` score to -inf until the last step. Beam search is beam 4 with
length penalty 0.6 in both. Decoding runs in float32 on every device.

Uncached decoding re-runs the decoder over the whole prefix at every step (O(t^2) work), so it is
only timed where ``rows * length^2 <= --uncached-budget`` (rows = batch * beam).

    python -m benchmarks.decoding [--quick] [--full] [--append results.jsonl] [--threads N]
        [--strategies greedy beam] [--batches 1 32] [--lengths 32 128] [--uncached-budget N]
        [--dim 256] [--heads 4] [--layers 3] [--ffn 1024] [--vocab 8000] [--src-len 24]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor, nn

from benchmarks.common import base_parser, emit, environment, interleave, setup, speed_ratio, throughput
from benchmarks.seq2seq import BOS_ID, EOS_ID, PAD_ID, ModelSize, add_size_args, build_ours, model_size, random_batch
from core import DecoderCache
from nlp.decoding import beam_search, greedy_decode
from nlp.model import Seq2SeqTransformer

BEAM_SIZE = 4
LENGTH_PENALTY = 0.6
STRATEGIES = ("greedy", "beam")
EOS_PENALTY = 1e4


class NoEarlyEnd(Seq2SeqTransformer):
    """The translation model with its ``</s>`` logit lowered by ``EOS_PENALTY``: finite, so the
    length limit can still force ``</s>``, but far below every other token before that."""

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_padding_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        logits = super().decode(tgt, memory, src_padding_mask, cache)
        logits[..., self.eos_id] -= EOS_PENALTY
        return logits


@dataclass(frozen=True)
class Case:
    """One decoding configuration."""

    strategy: str  # "greedy" or "beam"
    batch: int  # source sentences
    length: int  # generated tokens per sentence

    @property
    def beam(self) -> int:
        return BEAM_SIZE if self.strategy == "beam" else 1

    @property
    def name(self) -> str:
        return f"{self.strategy}_b{self.batch}_len{self.length}"


def build_marian(size: ModelSize) -> nn.Module | None:
    """``MarianMTModel`` with our model's dimensions and random weights, or None without
    ``transformers`` (the optional ``bench`` extra)."""
    try:
        from transformers import MarianConfig, MarianMTModel
        from transformers.utils import logging
    except ImportError:
        return None
    logging.set_verbosity_error()
    config = MarianConfig(
        vocab_size=size.vocab,
        d_model=size.dim,
        encoder_layers=size.layers,
        decoder_layers=size.layers,
        encoder_attention_heads=size.heads,
        decoder_attention_heads=size.heads,
        encoder_ffn_dim=size.ffn,
        decoder_ffn_dim=size.ffn,
        activation_function="relu",
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        max_position_embeddings=size.max_len,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        pad_token_id=PAD_ID,
        decoder_start_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        forced_eos_token_id=None,
    )
    return MarianMTModel._from_config(config, attn_implementation="sdpa").eval()


def ours_run(model: nn.Module, src: Tensor, case: Case, use_cache: bool) -> Callable[[], Tensor]:
    if case.strategy == "greedy":
        return lambda: greedy_decode(model, src, max_len=case.length, use_cache=use_cache)
    return lambda: beam_search(
        model, src, BEAM_SIZE, LENGTH_PENALTY, max_len=case.length, use_cache=use_cache
    )


def marian_run(model: nn.Module, src: Tensor, case: Case) -> Callable[[], Tensor]:
    def generate() -> Tensor:
        with torch.inference_mode():
            output = model.generate(
                input_ids=src,
                attention_mask=src.ne(PAD_ID),
                num_beams=case.beam,
                do_sample=False,
                length_penalty=LENGTH_PENALTY,
                min_new_tokens=case.length,
                max_new_tokens=case.length,
                use_cache=True,
            )
        return output[:, 1:]  # drop the decoder start token

    return generate


def checked(run: Callable[[], Tensor], case: Case, name: str) -> Callable[[], Tensor]:
    """``run``, refusing an output of another length: the contenders must do the same work."""

    def checked_run() -> Tensor:
        output = run()
        if output.shape != (case.batch, case.length):
            raise RuntimeError(f"{name} produced {tuple(output.shape)} tokens, expected {(case.batch, case.length)}")
        return output

    return checked_run


def run_case(case: Case, args: argparse.Namespace, models: dict[str, nn.Module | None], src: Tensor) -> dict:
    ours, marian = models["ours"], models["hf"]
    runs = {"cached": ours_run(ours, src, case, use_cache=True)}
    uncached = case.batch * case.beam * case.length**2 <= args.uncached_budget
    if uncached:
        runs["uncached"] = ours_run(ours, src, case, use_cache=False)
    if marian is not None:
        runs["hf"] = marian_run(marian, src, case)
    runs = {name: checked(run, case, name) for name, run in runs.items()}
    seconds = interleave(runs, args.warmup, args.repeats, src.device)
    speed = {name: throughput(values, case.batch * case.length) for name, values in seconds.items()}
    ratios = {
        f"cached/{name}": speed_ratio(speed["cached"], speed[name]) for name in ("uncached", "hf") if name in speed
    }
    return {"case": case.name, **asdict(case), "beam": case.beam, "ratios": ratios, "speed": speed}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    add_size_args(parser)
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 32], help="source sentences per call")
    parser.add_argument("--lengths", nargs="+", type=int, default=[32, 128], help="generated tokens per sentence")
    parser.add_argument("--full", action="store_true", help="lengths 32 128 256")
    parser.add_argument("--src-len", type=int, default=24, help="padded source length")
    parser.add_argument(
        "--uncached-budget",
        type=int,
        default=2**17,
        help="time uncached decoding only where batch * beam * length^2 is at most this",
    )
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    device = setup(args, warmup=0 if args.quick else 1, repeats=1 if args.quick else 5)
    size = model_size(args)
    if args.quick:
        batches, lengths, src_len = [1, 2], [4], 5
    else:
        batches, lengths, src_len = args.batches, [32, 128, 256] if args.full else args.lengths, args.src_len
    if max(lengths) > size.max_len or src_len > size.max_len:
        raise ValueError(f"lengths {lengths} and --src-len {src_len} must not exceed --max-len {size.max_len}")
    models = {"ours": build_ours(size, NoEarlyEnd).to(device).eval(), "hf": build_marian(size)}
    if models["hf"] is None:
        print("transformers is not installed (pip install '.[bench]'): skipping Hugging Face generate", file=sys.stderr)
    else:
        models["hf"].to(device)
    generator = torch.Generator().manual_seed(args.seed)
    cases = [Case(strategy, batch, length) for strategy in args.strategies for batch in batches for length in lengths]
    sources = {batch: random_batch(size, batch, src_len, device, generator) for batch in batches}
    results = [run_case(case, args, models, sources[case.batch]) for case in cases]
    versions = {} if models["hf"] is None else {"transformers": sys.modules["transformers"].__version__}
    output = {
        "benchmark": "decoding",
        "ratios": {result["case"]: result["ratios"] for result in results},
        "env": environment(device, args.threads, " ".join(["python -m benchmarks.decoding", *argv]), **versions),
        "settings": {
            "warmup": args.warmup,
            "repeats": args.repeats,
            **asdict(size),
            "src_len": src_len,
            "beam_size": BEAM_SIZE,
            "length_penalty": LENGTH_PENALTY,
            "uncached_budget": args.uncached_budget,
        },
        "unit": "generated tokens/s",
        "cases": results,
    }
    emit(output, args.append)
    return output


if __name__ == "__main__":
    main()
