"""How an image folder's start-up cost grows with its size: wall time and peak memory of
``python -m vision.train`` on ``cluttered-digits`` folders of 6,000, 60,000 and 500,000 training
images (32 px PNGs, plus 5,000 validation and 10,000 test images, built offline by
:mod:`benchmarks.proving_grounds`), the images read from the files every epoch
(``data.in_memory=false``) or held decoded in memory (``true``; what ``auto`` does up to 2 GiB).
``--speed-steps`` also times training, alternating the files, held images augmented per image in
the loader workers (``data.augment_on=loader``), and held images augmented as whole batches
(``device``; what ``auto`` does with the pad crop).

Each run is ``vision.train data=imagefolder ... trainer.max_steps=2`` (two optimizer steps of 128
images, one validation and one test batch), timed whole by ``/usr/bin/time -f "%M %e"`` (peak
resident set of the process, wall seconds), one run at a time. "first" starts with an empty data
cache (every image decoded once by the check for unreadable files), "cached" is a later run
(the check's verdicts kept), as every run after the first one is.

    python -m benchmarks.scale_images [--train 6000 60000 500000] [--speed-steps 150] [--repeats 3]
        [--out-dir DIR] [--append results.jsonl] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from benchmarks import proving_grounds
from benchmarks.common import environment, table_result
from benchmarks.quality_vision import CPU_MODEL
from benchmarks.report import table
from benchmarks.scale import timed, timed_run

SET = "cluttered-digits"
EVAL_COUNTS = {"val": 5_000, "test": 10_000}
RUNS = (("first", "false"), ("cached", "false"), ("cached", "true"))
SPEED_RUNS = (("false", "loader"), ("true", "loader"), ("true", "device"))  # data.in_memory, data.augment_on


def train_command(
    folder: Path, cache: Path, run_dir: Path, in_memory: str, steps: int = 2, augment_on: str = "auto"
) -> list[str]:
    return [
        sys.executable, "-m", "vision.train", "data=imagefolder", f"data.root={folder}", f"data.cache_dir={cache}",
        f"data.in_memory={in_memory}", f"data.augment_on={augment_on}", "data.batch_size=128", *CPU_MODEL, "trainer.max_epochs=-1",
        f"trainer.max_steps={steps}", "trainer.num_sanity_val_steps=0", "trainer.limit_val_batches=1",
        "trainer.limit_test_batches=1", "logger=csv", f"hydra.run.dir={run_dir}",
    ]


def speed_rows(folder: Path, cache: Path, out_dir: Path, steps: int, repeats: int, env: dict[str, str]) -> list[dict[str, Any]]:
    """Training images per second over ``steps`` steps, each of :data:`SPEED_RUNS` in turn."""
    rows = []
    for repeat in range(repeats):
        for in_memory, augment_on in SPEED_RUNS:
            run_dir = out_dir / f"speed{repeat}_{in_memory}_{augment_on}"
            shutil.rmtree(run_dir, ignore_errors=True)
            command = train_command(folder, cache, run_dir, in_memory, steps, augment_on)
            timed(command, env, run_dir.with_suffix(".log")).wait()
            metrics = json.loads((run_dir / "metrics.json").read_text())
            rows.append({"repeat": repeat, "in_memory": in_memory, "augment_on": augment_on, "steps": steps,
                         "images_per_second": metrics["train_samples_per_second"]})
            print(f"speed: repeat {repeat}, data.in_memory={in_memory} data.augment_on={augment_on}: "
                  f"{rows[-1]['images_per_second']:.0f} images/s", flush=True)
    return rows


def speed_markdown(rows: list[dict[str, Any]]) -> str:
    cells = []
    for in_memory, augment_on in SPEED_RUNS:
        rates = [row["images_per_second"] for row in rows if (row["in_memory"], row["augment_on"]) == (in_memory, augment_on)]
        cells.append((in_memory, augment_on, " / ".join(f"{rate:.0f}" for rate in rates), f"{statistics.median(rates):.0f}"))
    return table(("data.in_memory", "data.augment_on", "images/s per run", "median"), cells)


def markdown(rows: list[dict[str, Any]]) -> str:
    return table(
        ("training images", "all images", "PNG MB", "run", "data.in_memory", "wall s", "peak MiB"),
        (
            (f"{row['train']:,}", f"{row['images']:,}", f"{row['png_mb']:.0f}", row["run"], row["in_memory"],
             f"{row['seconds']:.0f}", f"{row['peak_mib']:,.0f}")
            for row in rows
        ),
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, nargs="+", default=[6_000, 60_000, 500_000], help="training images per folder")
    parser.add_argument("--speed-steps", type=int, default=0, help="also time this many training steps, files against held images, loader against batch augmentation")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each under --speed-steps, alternating")
    parser.add_argument("--out-dir", type=Path, default=None, help="folders, caches and runs (default: a temporary dir)")
    parser.add_argument("--append", type=Path, default=None, help="also append the result as one JSON line here")
    parser.add_argument("--quick", action="store_true", help="a folder of 200 images: checks the script runs")
    args = parser.parse_args(argv)
    eval_counts = {"val": 20, "test": 20} if args.quick else EVAL_COUNTS
    if args.quick:
        args.train = [200]
    out_dir = args.out_dir or Path(tempfile.mkdtemp(prefix="scale-images-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    rows: list[dict[str, Any]] = []
    for train in args.train:
        built = proving_grounds.build(out_dir / f"train{train}", SET, {"train": train, **eval_counts}, workers=2)
        png_mb = sum(path.stat().st_size for path in built.folder.rglob("*.png")) / 1e6
        cache = out_dir / f"cache{train}"
        shutil.rmtree(cache, ignore_errors=True)
        for kind, in_memory in RUNS:
            run_dir = out_dir / f"run{train}_{kind}_{in_memory}"
            shutil.rmtree(run_dir, ignore_errors=True)
            measurement = timed_run(train_command(built.folder, cache, run_dir, in_memory), env, run_dir.with_suffix(".log"))
            rows.append({"train": train, "images": sum(built.counts.values()), "png_mb": png_mb, "run": kind,
                         "in_memory": in_memory, **measurement})
            print(markdown(rows[-1:]).splitlines()[-1], flush=True)
    table = markdown(rows)
    speed: list[dict[str, Any]] = []
    if args.speed_steps:
        speed = speed_rows(built.folder, cache, out_dir, args.speed_steps, args.repeats, env)
        table += "\n\n" + speed_markdown(speed)
    env_info = environment(torch.device("cpu"), torch.get_num_threads(), " ".join(["python -m benchmarks.scale_images", *argv]))
    return table_result("scale_images", env_info, rows, table, args.append, speed=speed)


if __name__ == "__main__":
    main()
