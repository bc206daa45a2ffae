"""Average the weights of checkpoints: ``python -m nlp.average CKPT... --out AVG.ckpt``.

The paper's base models are "a single model obtained by averaging the last 5 checkpoints, which
were written at 10-minute intervals" (Section 6.1); the training config keeps such checkpoints
as ``checkpoints/recent-step*.ckpt`` (``callbacks.recent_checkpoints``). As fairseq's
``scripts/average_checkpoints.py``, every floating-point tensor of the ``state_dict`` becomes the
mean of its values over the checkpoints (accumulated in float64, stored in its own dtype);
everything else (hyperparameters, tokenizer, optimizer state, step counters, integer buffers)
comes from the last checkpoint given. The result loads wherever a training checkpoint does:
``python -m nlp.translate AVG.ckpt``, ``ckpt_path=AVG.ckpt``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.commands.arguments import ArgumentParser
from core.commands.exit import command
from core.errors import InputError

# The hyperparameters that give the weights their meaning: averaged checkpoints must share them.
SHARED_HYPERPARAMETERS = ("model", "tokenizer")


def training_checkpoint(path: Path) -> dict[str, Any]:
    """A checkpoint written by a training run, read as plain data (``weights_only``); one whose
    weights are not finite (written as its run diverged) is refused."""
    from core.files.checkpoints import load_checkpoint, require_finite_weights  # torch: after the arguments are read

    checkpoint = load_checkpoint(path)
    missing = {"hyper_parameters", "state_dict"} - checkpoint.keys()
    if missing:
        raise InputError(
            f"checkpoint {path} lacks {sorted(missing)}; pass checkpoints written by python -m nlp.train "
            "(checkpoints/recent-step*.ckpt, last.ckpt or the best one)"
        )
    require_finite_weights(checkpoint, path)
    return checkpoint


def check_compatible(reference: dict[str, Any], reference_path: Path, checkpoint: dict[str, Any], path: Path) -> None:
    """Refuse to average checkpoints of different models: other architecture, tokenizer or tensors."""
    for key in SHARED_HYPERPARAMETERS:
        if checkpoint["hyper_parameters"].get(key) != reference["hyper_parameters"].get(key):
            raise InputError(
                f"checkpoints {reference_path} and {path} have different {key!r} hyperparameters; "
                "average only checkpoints of one training run"
            )
    expected, found = reference["state_dict"], checkpoint["state_dict"]
    if expected.keys() != found.keys():
        extra = sorted(set(found) ^ set(expected))[:3]
        raise InputError(
            f"checkpoints {reference_path} and {path} hold different parameters (e.g. {extra}); "
            "average only checkpoints of one training run"
        )
    for name, tensor in found.items():
        if tensor.shape != expected[name].shape or tensor.dtype != expected[name].dtype:
            raise InputError(
                f"parameter {name!r} is {tuple(tensor.shape)} {tensor.dtype} in {path} but "
                f"{tuple(expected[name].shape)} {expected[name].dtype} in {reference_path}; average only "
                "checkpoints of one training run"
            )


def average_checkpoints(paths: list[Path]) -> dict[str, Any]:
    """The last checkpoint of ``paths`` with each floating-point ``state_dict`` tensor replaced by
    its mean over all of them; the checkpoints are read one at a time."""
    import torch

    if not paths:
        raise InputError("no checkpoints to average; pass one or more .ckpt files")
    first = training_checkpoint(paths[0])
    sums = {
        name: tensor.to(torch.float64, copy=True)
        for name, tensor in first["state_dict"].items()
        if tensor.is_floating_point()
    }
    last = first
    for path in paths[1:]:
        last = training_checkpoint(path)
        check_compatible(first, paths[0], last, path)
        for name, total in sums.items():
            total += last["state_dict"][name].double()
    state_dict = dict(last["state_dict"])
    for name, total in sums.items():
        state_dict[name] = (total / len(paths)).to(state_dict[name].dtype)
    return {**last, "state_dict": state_dict}


@command
def main(argv: list[str] | None = None) -> None:
    """Average the checkpoints on the command line into ``--out`` (written atomically)."""
    parser = ArgumentParser(prog="python -m nlp.average", description=__doc__.splitlines()[0])
    parser.add_argument(
        "checkpoints", nargs="+", type=Path, help="checkpoints of one training run, e.g. recent-step*.ckpt"
    )
    parser.add_argument("--out", type=Path, required=True, help="the averaged checkpoint to write")
    args = parser.parse_args(argv)
    if args.out.is_dir():
        raise InputError(f"--out {args.out} is a directory; pass a file name such as {args.out / 'averaged.ckpt'}")
    averaged = average_checkpoints(args.checkpoints)
    from core.training.callbacks.checkpoints import AtomicCheckpointIO

    AtomicCheckpointIO().save_checkpoint(averaged, args.out)
    print(f"averaged {len(args.checkpoints)} checkpoints into {args.out}")


if __name__ == "__main__":
    main()
