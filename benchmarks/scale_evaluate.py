"""How scoring and translating cost grows with the data: wall time and peak memory of
``python -m nlp.evaluate``, ``python -m nlp.translate`` and ``python -m vision.evaluate`` at 1x,
10x and 100x a held-back test split (300 sentence pairs, as each proving corpus holds back;
1,000 images), and the seconds to ``nlp.translate``'s first line of output.

The data is built offline: sentence pairs of 50 words from the gettext catalogs
(:func:`benchmarks.scale.build_corpus`), 32 px ``cluttered-digits`` PNGs
(:mod:`benchmarks.proving_grounds`). The checkpoints come from two-step training runs
(``benchmarks.scale`` and ``benchmarks.scale_images`` train them so), since what is measured is the
data path and decoding, not the model's quality: an untrained translation model decodes to its
length limit, so every translation is cut at ``MAX_DECODE`` subwords, greedily, the same at every
size. Each command is timed whole by ``/usr/bin/time -f "%M %e"`` (peak resident set of the
process, wall seconds), one at a time; the evaluate commands run once with an empty data cache
("first": the test split encoded, or every image's decode checked) and once after ("cached").

    python -m benchmarks.scale_evaluate [--pairs 300 3000 30000] [--images 1000 10000 100000]
        [--commands nlp.evaluate nlp.translate vision.evaluate] [--runs first cached]
        [--out-dir DIR] [--append results.jsonl] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks import proving_grounds, scale, scale_images
from benchmarks.common import environment, table_result
from benchmarks.report import table
from nlp.data.gettext import DEFAULT_LOCALE_DIR

MAX_DECODE = 16  # subwords per translation: an untrained model decodes to its limit
TRAIN_PAIRS = 2_000
TRAIN_IMAGES = 200
COMMANDS = ("nlp.evaluate", "nlp.translate", "vision.evaluate")
RUNS = ("first", "cached")  # the evaluate commands' data cache: empty, then kept


def trained(run_dir: Path, command: list[str], env: dict[str, str]) -> Path:
    """The last checkpoint of the training run ``command`` writes in ``run_dir``; a checkpoint an
    earlier run of this script left there is taken as it is."""
    found = run_dir / "checkpoints" / "last.ckpt"
    if not found.is_file():
        shutil.rmtree(run_dir, ignore_errors=True)
        scale.timed_run(command, env, run_dir.with_suffix(".log"))
    if not found.is_file():
        raise FileNotFoundError(f"{found} was not written; see {run_dir.with_suffix('.log')}")
    return found


def translate_run(ckpt: Path, sources: Path, log: Path, env: dict[str, str]) -> dict[str, float]:
    """``nlp.translate`` over the lines of ``sources`` on stdin: peak MiB, wall seconds, the seconds
    to its first line of output, and the lines it wrote."""
    command = [sys.executable, "-m", "nlp.translate", str(ckpt), "--beam", "1", "--max-len", str(MAX_DECODE)]
    start = time.perf_counter()
    with sources.open("rb") as stdin, log.open("wb") as stderr:
        process = subprocess.Popen(
            [*scale.TIME, *command], cwd=scale.ROOT, env=env, stdin=stdin, stdout=subprocess.PIPE, stderr=stderr,
        )
        assert process.stdout is not None
        first, lines = 0.0, 0
        for _ in process.stdout:
            first = first or time.perf_counter() - start
            lines += 1
        if process.wait():
            raise RuntimeError(f"{' '.join(command)} failed; see {log}")
    return {**scale.measured(log), "first_line_s": round(first, 1), "lines": lines}


def translation_rows(
    out_dir: Path, pairs: list[int], locale_dir: str, env: dict[str, str], commands: list[str], runs: list[str]
) -> list[dict[str, Any]]:
    """``nlp.evaluate`` (its ``runs``) and ``nlp.translate`` at each test split of ``pairs``, those of
    ``commands``."""
    train = scale.build_corpus(out_dir / "train.tsv", TRAIN_PAIRS, locale_dir)
    valid = scale.build_corpus(out_dir / "valid.tsv", 200, locale_dir, seed=1)
    run_dir = out_dir / "nlp-train"
    ckpt = trained(run_dir, scale.train_command(train, valid, out_dir / "nlp-cache", run_dir, ddp=False), env)
    rows = []
    for count in pairs:
        test = scale.build_corpus(out_dir / f"test{count}.tsv", count, locale_dir, seed=2)
        cache = out_dir / f"nlp-cache{count}"
        if "first" in runs:
            shutil.rmtree(cache, ignore_errors=True)
        for kind in runs if "nlp.evaluate" in commands else ():
            eval_dir = out_dir / f"nlp-eval{count}_{kind}"
            command = [
                sys.executable, "-m", "nlp.evaluate", f"ckpt_path={ckpt}", "data=files", f"data.train={train}",
                f"data.val={valid}", f"data.test={test}", f"data.cache_dir={cache}", "module.beam_size=1",
                f"module.max_decode_len={MAX_DECODE}", f"hydra.run.dir={eval_dir}",
            ]
            rows.append({"command": "nlp.evaluate", "items": count, "run": kind,
                         **scale.timed_run(command, env, eval_dir.with_suffix(".log"))})
            print(markdown(rows[-1:]).splitlines()[-1], flush=True)
        if "nlp.translate" not in commands:
            continue
        sources = test.with_suffix(".src")
        sources.write_text("".join(line.split("\t")[0] + "\n" for line in test.read_text(encoding="utf-8").splitlines()),
                           encoding="utf-8")
        rows.append({"command": "nlp.translate", "items": count, "run": "-",
                     **translate_run(ckpt, sources, out_dir / f"nlp-translate{count}.log", env)})
        print(markdown(rows[-1:]).splitlines()[-1], flush=True)
    return rows


def vision_rows(out_dir: Path, images: list[int], env: dict[str, str], runs: list[str]) -> list[dict[str, Any]]:
    """``vision.evaluate`` (its ``runs``) at each test split of ``images``."""
    rows = []
    ckpt = None
    for count in images:
        built = proving_grounds.build(out_dir / f"images{count}", scale_images.SET,
                                      {"train": TRAIN_IMAGES, "val": 20, "test": count}, workers=2)
        cache = out_dir / f"vision-cache{count}"
        if "first" in runs:
            shutil.rmtree(cache, ignore_errors=True)
        if ckpt is None:
            run_dir = out_dir / "vision-train"
            ckpt = trained(run_dir, scale_images.train_command(built.folder, out_dir / "vision-train-cache", run_dir, "false"), env)
        for kind in runs:
            eval_dir = out_dir / f"vision-eval{count}_{kind}"
            command = [
                sys.executable, "-m", "vision.evaluate", f"ckpt_path={ckpt}", "data=imagefolder",
                f"data.root={built.folder}", f"data.cache_dir={cache}", f"hydra.run.dir={eval_dir}",
            ]
            rows.append({"command": "vision.evaluate", "items": count, "run": kind,
                         **scale.timed_run(command, env, eval_dir.with_suffix(".log"))})
            print(markdown(rows[-1:]).splitlines()[-1], flush=True)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    return table(
        ("command", "test items", "run", "wall s", "peak MiB", "first line s"),
        (
            (f"`{row['command']}`", f"{row['items']:,}", row["run"], f"{row['seconds']:.0f}", f"{row['peak_mib']:,.0f}",
             f"{row['first_line_s']:.1f}" if "first_line_s" in row else "")
            for row in rows
        ),
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, nargs="+", default=[300, 3_000, 30_000], help="sentence pairs per test split")
    parser.add_argument("--images", type=int, nargs="+", default=[1_000, 10_000, 100_000], help="images per test split")
    parser.add_argument("--commands", nargs="+", choices=COMMANDS, default=list(COMMANDS), help="the commands measured")
    parser.add_argument("--runs", nargs="+", choices=RUNS, default=list(RUNS), help="the evaluate runs: empty cache, then kept")
    parser.add_argument("--locale-dir", default=DEFAULT_LOCALE_DIR)
    parser.add_argument("--out-dir", type=Path, default=None, help="data, caches and runs (default: a temporary dir)")
    parser.add_argument("--append", type=Path, default=None, help="also append the result as one JSON line here")
    parser.add_argument("--quick", action="store_true", help="30 pairs and 40 images: checks the script runs")
    args = parser.parse_args(argv)
    if args.quick:
        args.pairs, args.images = [30], [40]
    out_dir = args.out_dir or Path(tempfile.mkdtemp(prefix="scale-evaluate-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    rows = []
    if {"nlp.evaluate", "nlp.translate"} & set(args.commands):
        rows += translation_rows(out_dir, args.pairs, args.locale_dir, env, args.commands, args.runs)
    if "vision.evaluate" in args.commands:
        rows += vision_rows(out_dir, args.images, env, args.runs)
    info = environment(torch.device("cpu"), torch.get_num_threads(), " ".join(["python -m benchmarks.scale_evaluate", *argv]))
    return table_result("scale_evaluate", info, rows, markdown(rows), args.append, max_decode=MAX_DECODE)


if __name__ == "__main__":
    main()
