"""The decoding settings of each corpus: beam width, length penalty (GNMT alpha) and n-gram
blocking chosen on the validation split of a trained model, then scored on its test split beside
the checkpoint's own settings (as trained).

Every setting is one job of an ``nlp.evaluate`` sweep (``-m``, Hydra's basic launcher), read back
from the sweep's ``trials.csv``; the test split is decoded only for the defaults and for the
setting with the best validation BLEU, so it never takes part in the choice; ``--candidate``
also scores one setting (a default under consideration) on every test split. A sweep whose
``trials.csv`` is already in ``--out-dir`` is read back instead of run again.

    python -m benchmarks.decoding_choice --model NAME=CKPT [NAME=CKPT ...] [--beams 4 8]
        [--length-penalties 0.6 1.0] [--no-repeat 0 4] [--candidate BEAM ALPHA N]
        [--overrides data=...] [--out-dir DIR] [--append results.jsonl]
"""

from __future__ import annotations

import argparse
import csv
import itertools
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import emit, environment

SETTINGS = ("module.beam_size", "module.length_penalty", "module.no_repeat_ngram_size")


def sweep(
    checkpoint: Path, split: str, grid: dict[str, list[str]], overrides: list[str], out_dir: Path
) -> list[dict[str, str]]:
    """The rows of ``trials.csv`` of one ``nlp.evaluate`` sweep over ``grid`` on ``split``."""
    table = out_dir / "trials.csv"
    if table.is_file():
        with table.open() as done:
            return list(csv.DictReader(done))
    command = [
        sys.executable, "-m", "nlp.evaluate", "-m", f"ckpt_path={checkpoint}", f"split={split}", *overrides,
        *(f"{name}={','.join(values)}" for name, values in grid.items()),
        f"hydra.sweep.dir={out_dir}",
    ]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    with table.open() as done:
        return list(csv.DictReader(done))


def setting(row: dict[str, str], grid: dict[str, list[str]]) -> dict[str, float]:
    """The decoding setting of a trials row, as numbers (a setting the grid gives one value is
    fixed for the whole sweep, so the table has no column for it)."""
    return {name.removeprefix("module."): float(row.get(name, grid[name][0])) for name in SETTINGS}


def scores(row: dict[str, str], split: str) -> dict[str, float]:
    """BLEU and the share of repeated 4-grams of a trials row."""
    return {"bleu": float(row[f"{split}/bleu"]), "rep4": float(row[f"{split}/rep4"])}


def choose(name: str, checkpoint: Path, args: argparse.Namespace, out_dir: Path) -> dict[str, Any]:
    """Validation BLEU of every setting of the grid; test BLEU of the defaults, of the best and of
    the candidate."""
    grid = {
        "module.beam_size": [str(b) for b in args.beams],
        "module.length_penalty": [str(a) for a in args.length_penalties],
        "module.no_repeat_ngram_size": [str(n) for n in args.no_repeat],
    }
    val = sweep(checkpoint, "val", grid, args.overrides, out_dir / name / "val")
    best = setting(max(val, key=lambda row: float(row["val/bleu"])), grid)
    chosen = {key: [f"{best[key.removeprefix('module.')]:g}"] for key in SETTINGS}
    test_best = sweep(checkpoint, "test", chosen, args.overrides, out_dir / name / "test_best")[0]
    test_default = sweep(checkpoint, "test", {}, args.overrides, out_dir / name / "test_default")[0]
    row = {
        "corpus": name,
        "checkpoint": str(checkpoint),
        "val": [{**setting(row, grid), **scores(row, "val")} for row in val],
        "chosen": best,
        "test_chosen": scores(test_best, "test"),
        "test_default": scores(test_default, "test"),
    }
    if args.candidate:
        candidate = {key: [f"{value:g}"] for key, value in zip(SETTINGS, args.candidate)}
        row["test_candidate"] = scores(sweep(checkpoint, "test", candidate, args.overrides, out_dir / name / "test_candidate")[0], "test")
    return row


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", required=True, metavar="NAME=CKPT", help="trained models by corpus")
    parser.add_argument("--beams", nargs="+", type=int, default=[4, 8], help="beam widths (1 = greedy)")
    parser.add_argument("--length-penalties", nargs="+", type=float, default=[0.6, 1.0], help="GNMT alphas")
    parser.add_argument("--no-repeat", nargs="+", type=int, default=[0, 4], help="blocked n-gram sizes (0 = off)")
    parser.add_argument(
        "--candidate", nargs=3, type=float, default=None, metavar=("BEAM", "ALPHA", "N"),
        help="one setting also scored on every test split (a default under consideration)",
    )
    parser.add_argument(
        "--overrides", nargs="+", default=[], metavar="OVERRIDE",
        help="nlp.evaluate overrides of every sweep (default: each checkpoint's own data)",
    )
    parser.add_argument("--out-dir", type=Path, default=None, help="where the sweeps go (default: a temporary dir)")
    parser.add_argument("--append", type=Path, default=None, help="also append the result as one JSON line here")
    return parser.parse_args(argv)


def markdown(rows: list[dict[str, Any]], candidate: list[float] | None = None) -> str:
    """One line per corpus: the chosen setting and the test BLEU of the checkpoint's own settings,
    of it and of the candidate."""
    extra = f" test BLEU, {int(candidate[0])}, {candidate[1]:g}, {int(candidate[2])} |" if candidate else ""
    lines = [
        f"| corpus | chosen on validation (beam, alpha, blocked n-gram) | test BLEU, as trained | test BLEU, chosen |{extra}",
        "|---|---|---|---|" + ("---|" if candidate else ""),
    ]
    for row in rows:
        c = row["chosen"]
        cell = f" {row['test_candidate']['bleu']:.1f} |" if candidate else ""
        lines.append(
            f"| {row['corpus']} | {int(c['beam_size'])}, {c['length_penalty']:g}, {int(c['no_repeat_ngram_size'])} "
            f"| {row['test_default']['bleu']:.1f} | {row['test_chosen']['bleu']:.1f} |{cell}"
        )
    return "\n".join(lines)


def result_markdown(result: Mapping[str, Any]) -> str:
    """The table of one of this script's result lines (BENCHMARKS.md and the docs' figure)."""
    return markdown(result["rows"], result["settings"].get("candidate"))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    models = [item.partition("=") for item in args.model]
    with tempfile.TemporaryDirectory() as scratch:
        out_dir = args.out_dir or Path(scratch)
        rows = [choose(name, Path(path), args, out_dir) for name, _, path in models]
    grid = list(itertools.product(args.beams, args.length_penalties, args.no_repeat))
    result = {
        "benchmark": "decoding_choice",
        "env": environment(torch.device("cpu"), torch.get_num_threads(), " ".join(["python -m benchmarks.decoding_choice", *argv])),
        "settings": {"grid": grid, "candidate": args.candidate},
        "rows": rows,
    }
    print(markdown(rows, args.candidate))
    emit(result, args.append)
    return result


if __name__ == "__main__":
    main()
