"""Our :class:`vision.model.VisionTransformer` vs timm's ``VisionTransformer`` at identical
configuration and weights (ours is copied from the timm model with ``from_timm``).

Cases: vit_tiny and vit_small at 32px with patch 4 (training step = forward + backward + AdamW,
and inference), vit_base at 224px (inference). On CUDA both models run under bf16 autocast with
channels_last inputs; ``--compile`` adds ``torch.compile``d copies of both.

    python -m benchmarks.vit [--quick] [--append results.jsonl] [--threads N]
                             [--device cuda] [--compile] [--batch N] [--base-batch N]
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass

import timm
import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.common import (
    autocast,
    base_parser,
    emit,
    environment,
    interleave,
    peak_memory,
    setup,
    speed_ratio,
    throughput,
)
from vision.model import VisionTransformer

TIMM_NAMES = {
    "vit_tiny": "vit_tiny_patch16_224",
    "vit_small": "vit_small_patch16_224",
    "vit_base": "vit_base_patch16_224",
}
NUM_CLASSES = 10
MODES = ("train", "infer")


@dataclass(frozen=True)
class Case:
    """One measured configuration."""

    model: str  # key of TIMM_NAMES
    img_size: int  # square input side in pixels
    patch_size: int  # patch side P
    mode: str  # "train" (forward + backward + AdamW step) or "infer" (forward, no grad)
    batch: int  # images per call
    depth: int | None = None  # fewer layers than the named model (smoke runs)

    @property
    def name(self) -> str:
        return f"{self.model}_{self.img_size}px_{self.mode}"


@dataclass(frozen=True)
class Precision:
    """How the models run: bf16 autocast and channels_last are the GPU settings."""

    device: str
    bf16: bool
    channels_last: bool


def default_cases(args: argparse.Namespace) -> list[Case]:
    if args.quick:
        return [Case("vit_tiny", 16, 4, mode, batch=2, depth=2) for mode in MODES]
    small_images = [Case(model, 32, 4, mode, args.batch) for model in ("vit_tiny", "vit_small") for mode in MODES]
    return [*small_images, Case("vit_base", 224, 16, "infer", args.base_batch)]


def build_timm(case: Case, seed: int) -> nn.Module:
    """timm's model with random weights (no download), resized to the case's image and patch."""
    torch.manual_seed(seed)
    depth = {} if case.depth is None else {"depth": case.depth}
    return timm.create_model(
        TIMM_NAMES[case.model],
        pretrained=False,
        img_size=case.img_size,
        patch_size=case.patch_size,
        num_classes=NUM_CLASSES,
        **depth,
    )


def build_pair(case: Case, seed: int, precision: Precision) -> dict[str, nn.Module]:
    """timm's model and ours with the same configuration and the same weights."""
    theirs = build_timm(case, seed)
    ours = VisionTransformer.from_timm(theirs)
    memory_format = torch.channels_last if precision.channels_last else torch.contiguous_format
    return {
        name: model.to(precision.device, memory_format=memory_format)
        for name, model in (("ours", ours), ("timm", theirs))
    }


def make_run(model: nn.Module, case: Case, precision: Precision) -> Callable[[], object]:
    """One call of the case on ``model``: a training step or an inference forward."""
    device = torch.device(precision.device)
    images = torch.randn(case.batch, 3, case.img_size, case.img_size, device=device)
    if precision.channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, NUM_CLASSES, (case.batch,), device=device)

    if case.mode == "infer":
        model.eval()

        def infer() -> object:
            with torch.inference_mode(), autocast(device, precision.bf16):
                return model(images)

        return infer
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train_step() -> object:
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, precision.bf16):
            loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    return train_step


def max_logit_difference(models: dict[str, nn.Module], case: Case, precision: Precision) -> float:
    """Largest |logit difference| between the two models on one batch (fp32): shows that the
    timed models compute the same function."""
    images = torch.randn(2, 3, case.img_size, case.img_size, device=precision.device)
    with torch.inference_mode():
        outputs = [model.eval()(images) for model in models.values()]
    return float((outputs[0] - outputs[1]).abs().max())


def run_case(case: Case, args: argparse.Namespace, precision: Precision) -> dict:
    models = build_pair(case, args.seed, precision)
    logit_difference = max_logit_difference(models, case, precision)
    if args.compile:
        models.update({f"{name}_compiled": torch.compile(copy.deepcopy(model)) for name, model in list(models.items())})
    runs = {name: make_run(model, case, precision) for name, model in models.items()}
    device = torch.device(precision.device)
    seconds = interleave(runs, args.warmup, args.repeats, device)
    results = {name: throughput(values, case.batch) for name, values in seconds.items()}
    ratios = {"ours/timm": speed_ratio(results["ours"], results["timm"])}
    if args.compile:
        ratios["ours_compiled/timm_compiled"] = speed_ratio(results["ours_compiled"], results["timm_compiled"])
    return {
        "case": case.name,
        **asdict(case),
        "unit": "images/s",
        "ratios": ratios,
        "max_abs_logit_difference": logit_difference,
        "speed": results,
        "memory": {name: peak_memory(run, device) for name, run in runs.items()},
    }


def main(argv: list[str] | None = None) -> dict:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--compile", action="store_true", help="also time torch.compile'd copies of both models")
    parser.add_argument("--batch", type=int, default=None, help="images per call at 32px (CPU 16, CUDA 256)")
    parser.add_argument(
        "--base-batch", type=int, default=None, help="images per call for vit_base at 224px (CPU 4, CUDA 64)"
    )
    parser.add_argument(
        "--models", nargs="+", choices=sorted(TIMM_NAMES), default=None, help="only these models (default: all)"
    )
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    device = setup(args, warmup=1, repeats=1 if args.quick else 5)
    on_gpu = device.type == "cuda"
    args.batch = args.batch or (256 if on_gpu else 16)
    args.base_batch = args.base_batch or (64 if on_gpu else 4)
    precision = Precision(device=device.type, bf16=on_gpu, channels_last=on_gpu)
    cases = [case for case in default_cases(args) if args.models is None or case.model in args.models]
    results = [run_case(case, args, precision) for case in cases]
    output = {
        "benchmark": "vit",
        "ratios": {result["case"]: result["ratios"] for result in results},
        "env": environment(
            device, args.threads, " ".join(["python -m benchmarks.vit", *argv]), timm=timm.__version__
        ),
        "settings": {
            "warmup": args.warmup,
            "repeats": args.repeats,
            "compile": args.compile,
            **asdict(precision),
        },
        "cases": results,
    }
    emit(output, args.append)
    return output


if __name__ == "__main__":
    main()
