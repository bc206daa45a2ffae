"""How fast every command answers before it does any work: the wall time of ``python -m
<command> --help`` and of a refused argument (a mistyped option, an unknown config key or, for
the training commands, a bad value that the config check refuses), each the median of
``--repeats`` runs of a fresh process.

    python -m benchmarks.commands [--repeats 3] [--append results.jsonl]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import environment, table_result

ROOT = Path(__file__).resolve().parents[1]
ARGPARSE = [
    "nlp.translate", "nlp.average", "nlp.export", "nlp.walkthrough", "nlp.serve",
    "vision.predict", "vision.explain", "vision.export", "vision.serve",
]
HYDRA = ["nlp.train", "nlp.evaluate", "vision.train", "vision.evaluate"]


def bad_argument(command: str) -> list[str]:
    """A command line the command refuses before any work."""
    if command.endswith(".train"):
        return ["trainer.max_epochs=-5"]
    return ["no_such_key=1"] if command in HYDRA else ["--no-such-option"]


def seconds(command: list[str], status: int) -> float:
    """Wall seconds of one run of ``command``, which must exit with ``status``."""
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != status:
        raise RuntimeError(f"{' '.join(command)} exited {result.returncode}, not {status}: {result.stderr[-500:]}")
    return elapsed


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (the median is reported)")
    parser.add_argument("--append", type=Path, default=None, help="also append the result as one JSON line here")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for command in ARGPARSE + HYDRA:
        base = [sys.executable, "-m", command]
        helped = [seconds([*base, "--help"], 0) for _ in range(args.repeats)]
        refused = [seconds([*base, *bad_argument(command)], 2) for _ in range(args.repeats)]
        rows.append({
            "command": command, "help_s": round(statistics.median(helped), 2),
            "bad_argument_s": round(statistics.median(refused), 2), "bad_argument": " ".join(bad_argument(command)),
        })
    lines = ["| command | `--help` s | bad argument | s |", "|---|---|---|---|"]
    lines += [f"| `{r['command']}` | {r['help_s']:.2f} | `{r['bad_argument']}` | {r['bad_argument_s']:.2f} |" for r in rows]
    env = environment(torch.device("cpu"), torch.get_num_threads(), " ".join(["python -m benchmarks.commands", *argv]))
    return table_result("commands", env, rows, "\n".join(lines), args.append)


if __name__ == "__main__":
    main()
