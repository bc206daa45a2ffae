"""Accuracy at equal epochs: the default ``python -m vision.train`` recipe against a plain timm
training loop, on real digits that run offline (:mod:`benchmarks.digits_data`).

The CLI runs as a user would run it, in a subprocess, with only the data and the length given
(``data=imagefolder data.root=DIR trainer.max_epochs=E``) plus the model size; everything else
is the default recipe, whose regularization follows the run's length (``vision/recipe.py``). Its batch is
``data.batch_size=auto`` (sized from the budget, ``vision/batch_size.py``; the table shows the
choice). It validates on ``val/`` every epoch and tests its best checkpoint on ``test/``
(``metrics.json``). ``--seeds`` repeats every row with each seed (the CLI's ``seed=S``, the loop's
``torch.manual_seed(S)``) and adds a table of the means and ranges.

The plain loop is a ~50-line timm loop, the bar the defaults must reach: timm's
``VisionTransformer`` with the CLI model's patch, width, depth, heads and MLP ratio (no stochastic
depth; timm's learned positional table, where the presets use fixed 2D sin-cos positions),
the same epochs, batches of 64, AdamW (lr 2e-3, weight decay 0.05, no decay on norms and biases),
10% linear warmup then cosine per step (timm's ``CosineLRScheduler``), label smoothing 0.1,
pad-crop + flip, no mixing; torchvision's ``ImageFolder`` reads ``train/`` and ``test/``; it tests
its final weights.

Speed is compared as training images per second, loading included, the first ``SKIP_BATCHES``
batches left out (the CLI's ``train_samples_per_second``, timed by ``TrainThroughput``; the loop
timed the same way), with the CLI's ratio to the loop in the table.

The model: on a CPU, a small ViT (width 128, depth 4, 4 heads, MLP ratio 2, patch 4 at 32px;
0.55M parameters; ``CPU_MODEL``), as the default ``vit_tiny`` preset (width 192, depth 9; 2.7M)
costs about 5x the compute per image; ``--preset`` uses the preset, the default on a GPU. On a
machine with few cores, ``--threads 1`` avoids oversubscribing them beside the loader workers.

    python -m benchmarks.quality_vision [--datasets digits mnist] [--epochs 3 10 30] [--seeds 0 1 2]
        [--preset] [--threads N] [--data-dir DIR] [--out-dir DIR] [--append results.jsonl] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import timm
import torch
from hydra import compose, initialize_config_dir
from timm.loss import LabelSmoothingCrossEntropy
from timm.optim import create_optimizer_v2
from timm.scheduler import CosineLRScheduler
from torch.utils.data import DataLoader
from torchvision import transforms as T
from torchvision.datasets import ImageFolder

from benchmarks import digits_data
from benchmarks.common import environment, run_training_cli, table_result
from core.files.checkpoints import load_checkpoint
from core.training.throughput import SKIP_BATCHES
from vision.data.datamodule import usable_cpus
from vision.data.folder import ImageFolderDataModule

CONF = Path(__file__).resolve().parents[1] / "conf"
# A small ViT for CPUs (0.55M parameters).
CPU_MODEL = ("model.dim=128", "model.depth=4", "model.num_heads=4", "model.mlp_ratio=2", "model.patch_size=4")
QUICK_MODEL = ("model.dim=32", "model.depth=1", "model.num_heads=2", "model.mlp_ratio=2", "model.patch_size=8")
QUICK_LIMITS = ("trainer.limit_train_batches=3", "trainer.limit_val_batches=2", "trainer.limit_test_batches=2")


@dataclass(frozen=True)
class PlainLoop:
    """Settings of the plain timm loop."""

    lr: float = 2e-3
    batch_size: int = 64
    weight_decay: float = 0.05
    warmup_fraction: float = 0.1  # of all steps, linear from lr / 100
    label_smoothing: float = 0.1
    pad: int = 4  # pad-crop at 32px
    hflip: float = 0.5


PLAIN_LOOP = PlainLoop()
PLAIN = "plain timm loop"


def run_cli(
    data_root: Path, epochs: int, overrides: list[str], run_dir: Path, threads: int
) -> dict[str, float]:
    """``python -m vision.train`` on the image folder for ``epochs``; its ``metrics.json`` figures
    and the training batch it chose."""
    metrics, wall = run_training_cli(
        "vision.train",
        ["data=imagefolder", f"data.root={data_root}", f"trainer.max_epochs={epochs}", *overrides],
        run_dir,
        threads,
    )
    return {
        "test_acc": metrics["test/acc"], "train_seconds": metrics["fit_seconds"], "wall_seconds": wall,
        "images_per_second": metrics["train_samples_per_second"],
        "batch": load_checkpoint(run_dir / "checkpoints" / "last.ckpt")["ImageFolderDataModule"]["train_batch_size"],
    }


def plain_model(model: dict[str, Any], num_classes: int) -> torch.nn.Module:
    """timm's ``VisionTransformer`` with the CLI's model config."""
    return timm.models.vision_transformer.VisionTransformer(
        img_size=model["img_size"],
        patch_size=model["patch_size"],
        embed_dim=model["dim"],
        depth=model["depth"],
        num_heads=model["num_heads"],
        mlp_ratio=model["mlp_ratio"],
        num_classes=num_classes,
    )


def run_plain(
    data_root: Path, epochs: int, model: dict[str, Any], mean: list[float], std: list[float],
    device: torch.device, seed: int = 0, max_batches: int | None = None,
) -> dict[str, float]:
    """The plain loop: train on ``train/`` for ``epochs``, test the final weights on ``test/``."""
    settings = PLAIN_LOOP
    batch_size = settings.batch_size
    torch.manual_seed(seed)
    size = model["img_size"]
    resize = T.Resize((size, size), interpolation=T.InterpolationMode.BICUBIC)
    normalize = [T.ToTensor(), T.Normalize(mean, std)]
    train_set = ImageFolder(str(data_root / "train"), T.Compose(
        [resize, T.RandomCrop(size, padding=settings.pad), T.RandomHorizontalFlip(settings.hflip), *normalize]
    ))
    test_set = ImageFolder(str(data_root / "test"), T.Compose([resize, *normalize]))
    workers = min(8, usable_cpus())
    train_loader = DataLoader(
        train_set, batch_size, shuffle=True, drop_last=True, num_workers=workers, persistent_workers=workers > 0
    )
    test_loader = DataLoader(test_set, 256, num_workers=workers)
    net = plain_model(model, len(train_set.classes)).to(device)
    optimizer = create_optimizer_v2(net, "adamw", lr=settings.lr, weight_decay=settings.weight_decay)
    steps_per_epoch = min(len(train_loader), max_batches or len(train_loader))
    total = epochs * steps_per_epoch
    warmup = round(settings.warmup_fraction * total)
    scheduler = CosineLRScheduler(
        optimizer, t_initial=total - warmup, warmup_t=warmup, warmup_lr_init=settings.lr / 100,
        warmup_prefix=True, t_in_epochs=False,
    )
    loss_fn = LabelSmoothingCrossEntropy(settings.label_smoothing)
    start, step = time.perf_counter(), 0
    # The clock once the first SKIP_BATCHES batches are done; a run of no more batches than that
    # is timed whole, as TrainThroughput falls back to.
    steady_start = start
    for _ in range(epochs):
        net.train()
        for batch, (images, labels) in enumerate(train_loader):
            if batch == steps_per_epoch:
                break
            loss = loss_fn(net(images.to(device)), labels.to(device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            scheduler.step_update(step)
            if step == SKIP_BATCHES:
                steady_start = time.perf_counter()
    end = time.perf_counter()
    train_seconds = end - start
    batches, seconds = (step - SKIP_BATCHES, end - steady_start) if step > SKIP_BATCHES else (step, train_seconds)
    images_per_second = batches * batch_size / seconds
    net.eval()
    correct = seen = 0
    with torch.inference_mode():
        for batch, (images, labels) in enumerate(test_loader):
            if max_batches is not None and batch == max_batches:
                break
            correct += int((net(images.to(device)).argmax(-1).cpu() == labels).sum())
            seen += len(labels)
    return {
        "test_acc": correct / seen, "train_seconds": train_seconds, "wall_seconds": time.perf_counter() - start,
        "images_per_second": images_per_second, "batch": batch_size,
    }


def run_key(row: dict[str, Any]) -> tuple[str, int, int]:
    """The run a row belongs to: data, epochs, seed."""
    return row["data"], row["epochs"], row["seed"]


def markdown(rows: list[dict[str, Any]]) -> str:
    """The side-by-side table."""
    lines = [
        "| data | epochs | seed | contender | batch | test acc | train s | wall s | images/s (vs the loop) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    loop_speed = {run_key(row): row["images_per_second"] for row in rows if row["contender"] == PLAIN}
    for row in rows:
        ratio = row["images_per_second"] / loop_speed[run_key(row)]
        lines.append(
            f"| {row['data']} | {row['epochs']} | {row['seed']} | {row['contender']} | {row['batch']} | "
            f"{100 * row['test_acc']:.2f}% | {row['train_seconds']:.0f} | {row['wall_seconds']:.0f} | "
            f"{row['images_per_second']:.0f} ({ratio:.2f}x) |"
        )
    seeds = sorted({row["seed"] for row in rows})
    if len(seeds) > 1:
        lines += ["", f"Over seeds {', '.join(map(str, seeds))}:", "",
                  "| data | epochs | CLI mean (min-max) | loop mean (min-max) | CLI lead |", "|---|---|---|---|---|"]
        for data, epochs in dict.fromkeys((row["data"], row["epochs"]) for row in rows):
            accs = {
                side: [100 * row["test_acc"] for row in rows if (row["data"], row["epochs"]) == (data, epochs)
                       and (row["contender"] == PLAIN) == (side == PLAIN)]
                for side in ("cli", PLAIN)
            }
            means = {side: sum(values) / len(values) for side, values in accs.items()}
            cells = [f"{means[side]:.1f}% ({min(accs[side]):.1f}-{max(accs[side]):.1f})" for side in ("cli", PLAIN)]
            lines.append(f"| {data} | {epochs} | {cells[0]} | {cells[1]} | {means['cli'] - means[PLAIN]:+.1f} |")
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", choices=digits_data.DATASETS, default=list(digits_data.DATASETS))
    parser.add_argument("--epochs", type=int, nargs="+", default=[3, 10, 30], help="run lengths to compare")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds of the runs (each row per seed)")
    parser.add_argument("--preset", action="store_true", help="the default vit_tiny preset instead of CPU_MODEL")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="CPU threads of both contenders")
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="where the digits are written (default: a temporary dir)"
    )
    parser.add_argument("--out-dir", type=Path, default=None, help="where the CLI runs go (default: a temporary dir)")
    parser.add_argument("--append", type=Path, default=None, help="also append the result as one JSON line here")
    parser.add_argument(
        "--quick", action="store_true", help="digits, 1 epoch of 3 batches, a tiny model: checks the script runs"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.datasets, args.epochs = ["digits"], [1]
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # what the CLI's trainer picks
    if args.quick:
        model_overrides = list(QUICK_MODEL)
    else:
        model_overrides = [] if args.preset or device.type == "cuda" else list(CPU_MODEL)
    overrides = [*model_overrides, *(QUICK_LIMITS if args.quick else ())]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("vision", overrides=["data=imagefolder", "data.root=unused", *model_overrides])
    model = {key: value for key, value in cfg.model.items() if key != "_target_"}
    mean, std = list(ImageFolderDataModule.MEAN), list(ImageFolderDataModule.STD)  # data.mean/std null: these
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="quality_vision-data-"))
    out_dir = args.out_dir or Path(tempfile.mkdtemp(prefix="quality_vision-"))
    rows, counts = [], {}
    for name in args.datasets:
        written = digits_data.write(data_dir, name)
        counts[name] = written.counts
        for epochs in args.epochs:
            for seed in args.seeds:
                run_dir = out_dir / f"{name}_{epochs}ep_seed{seed}"
                cli = run_cli(written.folder, epochs, [*overrides, f"seed={seed}"], run_dir, args.threads)
                plain = run_plain(written.folder, epochs, model, mean, std, device, seed, 3 if args.quick else None)
                row = {"data": name, "epochs": epochs, "seed": seed}
                rows.append({**row, "contender": "vision.train defaults", **cli})
                rows.append({**row, "contender": PLAIN, **plain})
    env = environment(device, args.threads, " ".join(["python -m benchmarks.quality_vision", *argv]), timm=timm.__version__)
    settings = {
        "cli_overrides": overrides, "model": model,
        "plain_loop": asdict(PLAIN_LOOP), "images": counts,
    }
    return table_result("quality_vision", env, rows, markdown(rows), args.append, settings=settings)


if __name__ == "__main__":
    main()
