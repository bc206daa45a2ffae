"""How the translation data path's cost grows with the corpus: start-up time and peak memory of
``python -m nlp.train`` on corpora of 100k, 1M and 4M sentence pairs, first run (tokenizer trained,
splits encoded into the cache) and cached run (the cache mapped), in one process and per rank of
a 2-process DDP run on the CPU (gloo).

The corpora are built offline from the machine's gettext catalogs (English -> German): each pair
joins randomly drawn messages until the English side holds 50 words, so the text is real and
its vocabulary that of program messages. Each run is ``nlp.train data=files model=transformer_mini
trainer=cpu trainer.max_steps=2`` (two optimizer steps, one validation batch), timed whole by
``/usr/bin/time -f "%M %e"`` (peak resident set of the process, wall seconds); under DDP every
rank is its own process (the environment torchrun sets), each measured alike.

    python -m benchmarks.scale [--pairs 100000 1000000 4000000] [--out-dir DIR] [--append results.jsonl]
        [--quick]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import environment, table_result
from benchmarks.report import table
from nlp.data.gettext import DEFAULT_LOCALE_DIR, read_gettext_corpus

ROOT = Path(__file__).resolve().parents[1]
WORDS_PER_PAIR = 50


def build_corpus(path: Path, pairs: int, locale_dir: str, seed: int = 0) -> Path:
    """``pairs`` lines of ``source<TAB>target``, each joining random gettext messages to at least
    :data:`WORDS_PER_PAIR` English words; written once and reused."""
    if path.is_file():
        return path
    messages = read_gettext_corpus(locale_dir, "en", "de")["train"]
    rng = random.Random(seed)
    partial = path.with_suffix(".partial")
    with partial.open("w", encoding="utf-8") as handle:
        for _ in range(pairs):
            sources, targets, words = [], [], 0
            while words < WORDS_PER_PAIR:
                source, target = messages[rng.randrange(len(messages))]
                sources.append(source)
                targets.append(target)
                words += len(source.split())
            handle.write(f"{' '.join(sources)}\t{' '.join(targets)}\n")
    partial.rename(path)
    return path


TIME = ["/usr/bin/time", "-f", "TIME %M %e"]  # a command's prefix: its peak KiB and wall seconds, on stderr (measured)


def timed(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``command`` under ``/usr/bin/time``, its output and the time line into ``log``."""
    handle = log.open("wb")
    return subprocess.Popen([*TIME, *command], cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)


def timed_run(command: list[str], env: dict[str, str], log: Path) -> dict[str, float]:
    """Run ``command`` to its end under ``/usr/bin/time`` (:func:`timed`); its peak MiB and wall
    seconds (:func:`measured`), refused where it failed."""
    if timed(command, env, log).wait():
        raise RuntimeError(f"{' '.join(command)} failed; see {log}")
    return measured(log)


def measured(log: Path) -> dict[str, float]:
    """Peak resident MiB and wall seconds from a log's time line (:data:`TIME`)."""
    line = next(line for line in log.read_text(errors="replace").splitlines() if line.startswith("TIME "))
    kib, seconds = line.split()[1:3]
    return {"peak_mib": round(int(kib) / 1024, 1), "seconds": round(float(seconds), 1)}


def train_command(corpus: Path, valid: Path, cache: Path, run_dir: Path, ddp: bool) -> list[str]:
    command = [
        sys.executable, "-m", "nlp.train", "data=files", f"data.train={corpus}", f"data.val={valid}",
        f"data.cache_dir={cache}", "model=transformer_mini", "trainer=cpu", "trainer.max_epochs=-1",
        "trainer.max_steps=2", "trainer.num_sanity_val_steps=0", "trainer.limit_val_batches=1",
        "trainer.limit_test_batches=1", "module.beam_size=1", "logger=csv", f"hydra.run.dir={run_dir}",
    ]
    if ddp:
        command += ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2"]
    return command


def run(corpus: Path, valid: Path, cache: Path, run_dir: Path, ddp: bool) -> list[dict[str, float]]:
    """One training start; the measurements of its process, or of each rank's."""
    env = {**os.environ, "OMP_NUM_THREADS": "1" if ddp else os.environ.get("OMP_NUM_THREADS", "2")}
    command = train_command(corpus, valid, cache, run_dir, ddp)
    if not ddp:
        return [timed_run(command, env, run_dir.with_suffix(".log"))]
    ranks = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29533", "WORLD_SIZE": "2", "NODE_RANK": "0"}
    logs = [run_dir.with_suffix(f".rank{rank}.log") for rank in (0, 1)]
    processes = [
        timed(command, {**env, **ranks, "RANK": str(rank), "LOCAL_RANK": str(rank)}, log) for rank, log in enumerate(logs)
    ]
    for process in processes:
        process.wait()
    return [measured(log) for log in logs]


def markdown(rows: list[dict[str, Any]]) -> str:
    cells = []
    for row in rows:
        walls = " / ".join(f"{p['seconds']:.0f}" for p in row["processes"])
        peaks = " / ".join(f"{p['peak_mib']:,.0f}" for p in row["processes"])
        cells.append((f"{row['pairs']:,}", f"{row['tsv_mb']:.0f}", row["run"], len(row["processes"]), walls, peaks))
    return table(("pairs", "TSV MB", "run", "processes", "wall s (each)", "peak MiB (each)"), cells)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, nargs="+", default=[100_000, 1_000_000, 4_000_000])
    parser.add_argument("--ddp-pairs", type=int, default=1_000_000, help="corpus size of the 2-process DDP runs")
    parser.add_argument("--locale-dir", default=DEFAULT_LOCALE_DIR)
    parser.add_argument("--out-dir", type=Path, default=None, help="corpora, cache and runs (default: a temporary dir)")
    parser.add_argument("--append", type=Path, default=None, help="also append the result as one JSON line here")
    parser.add_argument("--quick", action="store_true", help="a corpus of 300 pairs: checks the script runs")
    args = parser.parse_args(argv)
    if args.quick:
        args.pairs, args.ddp_pairs = [300], 300
    out_dir = args.out_dir or Path(tempfile.mkdtemp(prefix="scale-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    valid = build_corpus(out_dir / "valid.tsv", 200, args.locale_dir, seed=1)
    rows: list[dict[str, Any]] = []
    for pairs in args.pairs:
        corpus = build_corpus(out_dir / f"train{pairs}.tsv", pairs, args.locale_dir)
        cache = out_dir / f"cache{pairs}"
        shutil.rmtree(cache, ignore_errors=True)
        size = corpus.stat().st_size / 1e6
        for kind in ("first", "cached"):
            start = time.perf_counter()
            processes = run(corpus, valid, cache, out_dir / f"run{pairs}_{kind}", ddp=False)
            rows.append({"pairs": pairs, "tsv_mb": size, "run": kind, "processes": processes,
                         "elapsed": round(time.perf_counter() - start, 1)})
            print(markdown(rows[-1:]).splitlines()[-1], flush=True)
        if pairs == args.ddp_pairs:
            for kind in ("first", "cached"):
                if kind == "first":
                    shutil.rmtree(cache, ignore_errors=True)
                processes = run(corpus, valid, cache, out_dir / f"ddp{pairs}_{kind}", ddp=True)
                rows.append({"pairs": pairs, "tsv_mb": size, "run": f"{kind}, DDP", "processes": processes})
                print(markdown(rows[-1:]).splitlines()[-1], flush=True)
    env = environment(torch.device("cpu"), torch.get_num_threads(), " ".join(["python -m benchmarks.scale", *argv]))
    return table_result("scale", env, rows, markdown(rows), args.append)


if __name__ == "__main__":
    main()
