"""Accuracy at equal epochs (or equal minutes): the default ``python -m vision.train`` recipe
against a plain timm training loop, on real images that run offline: the digits and MNIST digits
of :mod:`benchmarks.digits_data` (``digits``, ``mnist``) and the large proving grounds of
:mod:`benchmarks.proving_grounds` (``cluttered-digits``, ``glyphs``: 60,000 training, 5,000 val
and 10,000 test images each by default, ``--ground-counts``; built into ``--data-dir`` when they
are not there yet, about a minute or two each, so give a ``--data-dir`` that is kept).

The CLI runs as a user would run it, in a subprocess, with only the data and the length given
(``data=imagefolder data.root=DIR trainer.max_epochs=E``) plus the model size; everything else
is the default recipe, whose regularization follows the run's length (``vision/recipe.py``). Its batch is
``data.batch_size=auto`` (sized from the budget, ``vision/data/batch_size.py``; the table shows the
choice). It validates on ``val/`` every epoch and tests its best checkpoint on ``test/``
(``metrics.json``). ``--seeds`` repeats every row with each seed (the CLI's ``seed=S``, the loop's
``torch.manual_seed(S)``) and adds a table of the means and ranges.

The plain loop is a ~50-line timm loop, the bar the defaults must reach: timm's
``VisionTransformer`` with the CLI model's patch, width, depth, heads and MLP ratio (no stochastic
depth; timm's learned positional table, where the presets use fixed 2D sin-cos positions),
the same epochs, batches of 64, AdamW (lr 2e-3, weight decay 0.05, no decay on norms and biases),
10% linear warmup then cosine per step (timm's ``CosineLRScheduler``), label smoothing 0.1,
pad-crop + flip, no mixing; torchvision's ``ImageFolder`` reads ``train/`` and ``test/``; it tests
its final weights. ``--loop-batch`` sets its batch and ``--loop-lrs`` its peak rate: with several
rates the loop runs once per rate, every loop row records its ``lr`` and ``best_lr`` marks the
rate of the best mean test accuracy over the seeds of that data and length, which the table marks
and the CLI is compared with.

``--minutes M`` gives both contenders the same wall-clock training time instead of the same
epochs: the CLI gets ``trainer.max_time=DD:HH:MM:SS trainer.max_epochs=-1`` (its schedule is laid
over the steps the time allows, measured on its first steps), and the loop measures its pace over
``MEASURE_STEPS`` steps after the first ``SKIP_BATCHES`` (lr held at the warmup's start, lr / 100,
meanwhile), lays its warmup and cosine over the steps it can make in the time left at that pace,
and stops at the time limit (or at the end of its schedule, if that comes first). Rows then
record ``minutes`` instead of ``epochs``, and both record their ``steps``.

Speed is compared as training images per second, loading included, the first ``SKIP_BATCHES``
batches left out (the CLI's ``train_samples_per_second``, timed by ``TrainThroughput``; the loop
timed the same way), with the CLI's ratio to the loop in the table.

The model: on a CPU, a small ViT (width 128, depth 4, 4 heads, MLP ratio 2, patch 4 at 32px;
0.55M parameters; ``CPU_MODEL``), as the default ``vit_tiny`` preset (width 192, depth 9; 2.7M)
costs about 5x the compute per image; ``--preset`` uses the preset, the default on a GPU. On a
machine with few cores, ``--threads 1`` avoids oversubscribing them beside the loader workers.

    python -m benchmarks.quality_vision [--datasets digits mnist cluttered-digits glyphs]
        [--epochs 3 10 30 | --minutes 5 15] [--seeds 0 1 2] [--loop-batch 128] [--loop-lrs 1e-3 2e-3 4e-3]
        [--ground-counts 60000 5000 10000] [--preset] [--threads N] [--data-dir DIR] [--out-dir DIR]
        [--append results.jsonl] [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import timm
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from timm.loss import LabelSmoothingCrossEntropy
from timm.optim import create_optimizer_v2
from timm.scheduler import CosineLRScheduler
from torch.utils.data import DataLoader
from torchvision import transforms as T
from torchvision.datasets import ImageFolder

from benchmarks import digits_data, proving_grounds
from benchmarks.common import CONF, cli_precision, environment, run_training_cli, table_result
from benchmarks.report import length_of, table
from core.files.checkpoints import load_checkpoint
from core.training.callbacks.throughput import SKIP_BATCHES
from vision.data.datamodule import usable_cpus
from vision.data.folder import ImageFolderDataModule

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
CLI = "vision.train defaults"
DATASETS = (*digits_data.DATASETS, *proving_grounds.SETS)
# Under --minutes: the loop's steps timed (after the first SKIP_BATCHES) before its schedule is
# fixed, or fewer where PLAN_BY of the time has passed first.
MEASURE_STEPS = 50
PLAN_BY = 0.1


def max_time(minutes: float) -> str:
    """Lightning's ``DD:HH:MM:SS`` for ``minutes`` (whole seconds, at least 1)."""
    seconds = max(1, round(60 * minutes))
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    return f"{days:02d}:{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def write_data(data_dir: Path, name: str, ground_counts: dict[str, int]) -> tuple[Path, dict[str, int]]:
    """The image folder of dataset ``name`` under ``data_dir`` (written when missing) and its
    images per split."""
    if name in digits_data.DATASETS:
        written = digits_data.write(data_dir, name)
        return written.folder, written.counts
    built = proving_grounds.build(data_dir, name, ground_counts, workers=min(2, usable_cpus()))
    return built.folder, built.counts


def run_cli(
    data_root: Path, epochs: int | None, overrides: list[str], run_dir: Path, threads: int,
    minutes: float | None = None,
) -> dict[str, float]:
    """``python -m vision.train`` on the image folder for ``epochs`` (or, given ``minutes``, for
    that wall-clock time: ``trainer.max_time``, no epoch bound); its ``metrics.json`` figures, the
    training batch it chose, the warmup cap, Adam's beta2 and the stem's convolutions per stage its
    config held and the precision it trained in."""
    if minutes is None:
        budget = [f"trainer.max_epochs={epochs}"]
    else:
        budget = [f"trainer.max_time={max_time(minutes)}", "trainer.max_epochs=-1"]
    metrics, wall = run_training_cli(
        "vision.train",
        ["data=imagefolder", f"data.root={data_root}", *budget, *overrides],
        run_dir,
        threads,
    )
    config = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    return {
        "test_acc": metrics["test/acc"], "train_seconds": metrics["fit_seconds"], "wall_seconds": wall,
        "images_per_second": metrics["train_samples_per_second"],
        "batch": train_batch(run_dir),
        "steps": metrics["optimizer_steps"],
        "max_warmup_fraction": float(config.budget.max_warmup_fraction),
        "beta2": float(config.module.betas[1]),
        "stem_convs": int(config.model.stem_convs),
        "precision": cli_precision(overrides, "cuda" if torch.cuda.is_available() else "cpu"),  # as the Trainer picks
    }


def train_batch(run_dir: Path) -> int:
    """The training batch of a CLI run: the one ``data.batch_size=auto`` chose (kept in the
    checkpoint), else the one its config fixed."""
    chosen = load_checkpoint(run_dir / "checkpoints" / "last.ckpt").get("ImageFolderDataModule", {})
    if "train_batch_size" in chosen:
        return int(chosen["train_batch_size"])
    return int(OmegaConf.load(run_dir / ".hydra" / "config.yaml").data.batch_size)


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
    data_root: Path, epochs: int | None, model: dict[str, Any], mean: list[float], std: list[float],
    device: torch.device, seed: int = 0, max_batches: int | None = None, *, lr: float | None = None,
    batch_size: int | None = None, seconds: float | None = None,
) -> dict[str, float]:
    """The plain loop: train on ``train/`` for ``epochs`` (or, given ``seconds``, for that long:
    the schedule laid over the steps its measured pace allows), test the final weights on
    ``test/``. ``lr`` and ``batch_size`` default to :data:`PLAIN_LOOP`'s."""
    settings = PLAIN_LOOP
    lr = settings.lr if lr is None else lr
    batch_size = settings.batch_size if batch_size is None else batch_size
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
    optimizer = create_optimizer_v2(net, "adamw", lr=lr, weight_decay=settings.weight_decay)
    steps_per_epoch = min(len(train_loader), max_batches or len(train_loader))

    def cosine(total: int) -> CosineLRScheduler:
        """10% linear warmup from lr / 100, then cosine, over ``total`` steps."""
        warmup = round(settings.warmup_fraction * total)
        return CosineLRScheduler(
            optimizer, t_initial=total - warmup, warmup_t=warmup, warmup_lr_init=lr / 100,
            warmup_prefix=True, t_in_epochs=False,
        )

    planned: int | None = None
    scheduler: CosineLRScheduler | None = None
    if seconds is None:
        planned = epochs * steps_per_epoch
        scheduler = cosine(planned)
    else:  # the warmup's first rate until the pace is known; the schedule keeps the peak as its base
        for group in optimizer.param_groups:
            group["initial_lr"], group["lr"] = group["lr"], lr / 100
    loss_fn = LabelSmoothingCrossEntropy(settings.label_smoothing)
    start, step = time.perf_counter(), 0
    deadline = math.inf if seconds is None else start + seconds
    # The clock once the first SKIP_BATCHES batches are done; a run of no more batches than that
    # is timed whole, as TrainThroughput falls back to.
    steady_start = start
    pace = None  # steps per second measured under --minutes
    done = False
    for _ in range(epochs) if seconds is None else itertools.count():
        net.train()
        for batch, (images, labels) in enumerate(train_loader):
            if batch == steps_per_epoch:
                break
            loss = loss_fn(net(images.to(device)), labels.to(device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            if step == SKIP_BATCHES:
                steady_start = time.perf_counter()
            if seconds is not None:
                now = time.perf_counter()
                if scheduler is None and step > SKIP_BATCHES and (
                    step >= SKIP_BATCHES + MEASURE_STEPS or now - start >= PLAN_BY * seconds
                ):
                    pace = (step - SKIP_BATCHES) / (now - steady_start)
                    planned = step + max(1, int(pace * (deadline - now)))
                    scheduler = cosine(planned)
                done = now >= deadline or (planned is not None and step >= planned)
            if scheduler is not None:
                scheduler.step_update(step)
            if done:
                break
        if done:
            break
    end = time.perf_counter()
    train_seconds = end - start
    batches, seconds_timed = (step - SKIP_BATCHES, end - steady_start) if step > SKIP_BATCHES else (step, train_seconds)
    images_per_second = batches * batch_size / seconds_timed
    net.eval()
    correct = seen = 0
    with torch.inference_mode():
        for batch, (images, labels) in enumerate(test_loader):
            if max_batches is not None and batch == max_batches:
                break
            correct += int((net(images.to(device)).argmax(-1).cpu() == labels).sum())
            seen += len(labels)
    result = {
        "test_acc": correct / seen, "train_seconds": train_seconds, "wall_seconds": time.perf_counter() - start,
        "images_per_second": images_per_second, "batch": batch_size, "steps": step, "lr": lr,
    }
    if seconds is not None:
        result.update(planned_steps=planned, steps_per_second_measured=pace)
    return result


def run_key(row: dict[str, Any]) -> tuple[str, float, int]:
    """The run a row belongs to: data, epochs (or minutes), seed."""
    return row["data"], length_of(row)[1], row["seed"]


def mark_best_rates(rows: list[dict[str, Any]]) -> None:
    """Set ``best_lr`` on every loop row: whether its rate has the best mean test accuracy over the
    seeds of its data and length (the first such rate on a tie)."""
    loop_rows = [row for row in rows if row["contender"] == PLAIN]
    for data, length in dict.fromkeys((row["data"], length_of(row)) for row in loop_rows):
        runs = [row for row in loop_rows if (row["data"], length_of(row)) == (data, length)]
        rates = dict.fromkeys(row["lr"] for row in runs)
        accuracy = {lr: [row["test_acc"] for row in runs if row["lr"] == lr] for lr in rates}
        best = max(accuracy, key=lambda lr: sum(accuracy[lr]) / len(accuracy[lr]))
        for row in runs:
            row["best_lr"] = row["lr"] == best


def markdown(rows: list[dict[str, Any]]) -> str:
    """The side-by-side table (the loop at each rate when there are several, its best marked)."""
    unit = length_of(rows[0])[0]
    timed = unit == "minutes"
    rates = {row["lr"] for row in rows if row["contender"] == PLAIN}
    show_rate = len(rates) > 1 or rates != {PLAIN_LOOP.lr}
    header = ["data", unit, "seed", "contender", "batch", "test acc", "train s", "wall s", "images/s (vs the loop)"]
    loop_speed = {
        run_key(row): row["images_per_second"] for row in rows if row["contender"] == PLAIN and row.get("best_lr", True)
    }
    cells = []
    for row in rows:
        loop = loop_speed.get(run_key(row))  # absent when only the CLI ran
        ratio = f" ({row['images_per_second'] / loop:.2f}x)" if loop else ""
        contender = row["contender"]
        if contender == PLAIN and show_rate:
            contender += f" (lr {row['lr']:g})" + (" **best**" if row["best_lr"] and len(rates) > 1 else "")
        cells.append([
            row["data"], f"{length_of(row)[1]:g}", row["seed"], contender, row["batch"], f"{100 * row['test_acc']:.2f}%",
            f"{row['train_seconds']:.0f}", f"{row['wall_seconds']:.0f}", f"{row['images_per_second']:.0f}{ratio}",
            *([row["steps"]] if timed else []),
        ])
    lines = [table(header + (["steps"] if timed else []), cells)]
    seeds = sorted({row["seed"] for row in rows})
    if len(seeds) > 1:
        at_best = " (the loop at its best rate)" if len(rates) > 1 else ""
        means_rows = []
        for data, length in dict.fromkeys((row["data"], length_of(row)[1]) for row in rows):
            accs = {
                side: [100 * row["test_acc"] for row in rows if (row["data"], length_of(row)[1]) == (data, length)
                       and (row["contender"] == PLAIN) == (side == PLAIN) and row.get("best_lr", True)]
                for side in ("cli", PLAIN)
            }
            if not all(accs.values()):  # one side did not run (--contenders)
                continue
            means = {side: sum(values) / len(values) for side, values in accs.items()}
            spread = [f"{means[side]:.1f}% ({min(accs[side]):.1f}-{max(accs[side]):.1f})" for side in ("cli", PLAIN)]
            means_rows.append([data, f"{length:g}", *spread, f"{means['cli'] - means[PLAIN]:+.1f}"])
        header = ["data", unit, "CLI mean (min-max)", "loop mean (min-max)", "CLI lead"]
        lines += ["", f"Over seeds {', '.join(map(str, seeds))}{at_best}:", "", table(header, means_rows)]
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(digits_data.DATASETS))
    parser.add_argument("--epochs", type=int, nargs="+", default=[3, 10, 30], help="run lengths to compare")
    parser.add_argument(
        "--minutes", type=float, nargs="+", default=None,
        help="wall-clock training minutes to compare instead of --epochs (both contenders alike)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds of the runs (each row per seed)")
    parser.add_argument("--loop-batch", type=int, default=PLAIN_LOOP.batch_size, help="the plain loop's batch")
    parser.add_argument(
        "--loop-lrs", type=float, nargs="+", default=[PLAIN_LOOP.lr], help="the plain loop's peak rates (a run each)"
    )
    parser.add_argument(
        "--ground-counts", type=int, nargs=3, metavar=("TRAIN", "VAL", "TEST"),
        default=list(proving_grounds.DEFAULT_COUNTS.values()), help="images per split of cluttered-digits and glyphs",
    )
    parser.add_argument("--preset", action="store_true", help="the default vit_tiny preset instead of CPU_MODEL")
    parser.add_argument(
        "--contenders", nargs="+", choices=("cli", "loop"), default=["cli", "loop"], help="which sides to run"
    )
    parser.add_argument(
        "--cli-extra", nargs="+", default=[], metavar="OVERRIDE",
        help="overrides added to the CLI's (a lever under test, e.g. model.stem=conv); named in its rows",
    )
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="CPU threads of both contenders")
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="where the data sets are written (default: a temporary dir)"
    )
    parser.add_argument("--out-dir", type=Path, default=None, help="where the CLI runs go (default: a temporary dir)")
    parser.add_argument("--append", type=Path, default=None, help="also append the result as one JSON line here")
    parser.add_argument(
        "--quick", action="store_true",
        help="digits, 1 epoch (or 3 s with --minutes) of 3 batches, a tiny model: checks the script runs",
    )
    args = parser.parse_args(argv)
    if args.loop_batch < 1 or any(lr <= 0 for lr in args.loop_lrs):
        parser.error("--loop-batch and --loop-lrs must be positive")
    if args.minutes is not None and any(minutes <= 0 for minutes in args.minutes):
        parser.error("--minutes must be positive")
    if args.quick:
        args.datasets, args.epochs = ["digits"], [1]
        if args.minutes is not None:
            args.minutes = [0.05]
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
    ground_counts = dict(zip(proving_grounds.SPLITS, args.ground_counts))
    # The run lengths: ("epochs", E) or, with --minutes, ("minutes", M).
    lengths = [("epochs", epochs) for epochs in args.epochs] if args.minutes is None else [
        ("minutes", minutes) for minutes in args.minutes
    ]
    max_batches = 3 if args.quick else None
    # All data first: the proving grounds are drawn by worker processes, forked before any training.
    folders, counts = {}, {}
    for name in args.datasets:
        folders[name], counts[name] = write_data(data_dir, name, ground_counts)
    rows = []
    for name, folder in folders.items():
        for unit, length in lengths:
            epochs, minutes = (length, None) if unit == "epochs" else (None, length)
            for seed in args.seeds:
                run_dir = out_dir / f"{name}_{length}ep_seed{seed}" if minutes is None else (
                    out_dir / f"{name}_{minutes:g}min_seed{seed}"
                )
                row = {"data": name, unit: length, "seed": seed}
                if "cli" in args.contenders:
                    cli = run_cli(folder, epochs, [*overrides, *args.cli_extra, f"seed={seed}"], run_dir, args.threads, minutes)
                    rows.append({**row, "contender": " + ".join([CLI, *args.cli_extra]), **cli})
                for lr in args.loop_lrs if "loop" in args.contenders else ():
                    plain = run_plain(
                        folder, epochs, model, mean, std, device, seed, max_batches, lr=lr,
                        batch_size=args.loop_batch, seconds=None if minutes is None else 60 * minutes,
                    )
                    rows.append({**row, "contender": PLAIN, **plain})
    mark_best_rates(rows)
    env = environment(device, args.threads, " ".join(["python -m benchmarks.quality_vision", *argv]), timm=timm.__version__)
    plain_loop = {**asdict(PLAIN_LOOP), "batch_size": args.loop_batch, "lrs": args.loop_lrs}
    plain_loop["lr"] = args.loop_lrs[0] if len(args.loop_lrs) == 1 else None
    settings = {
        "cli_overrides": [*overrides, *args.cli_extra], "model": model, "budget": "minutes" if args.minutes is not None else "epochs",
        "plain_loop": plain_loop, "images": counts,
    }
    return table_result("quality_vision", env, rows, markdown(rows), args.append, settings=settings)


if __name__ == "__main__":
    main()
