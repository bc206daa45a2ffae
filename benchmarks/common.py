"""Timing, environment and result plumbing shared by the benchmark scripts.

Contenders run interleaved (A B A B ...) after a warmup, so that load from other processes on a
shared machine falls on all of them alike, and each reports the median of its samples. Ratios of
medians from one interleaved run are the figures to compare; absolute times are only indicative.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from core.training.plan.precision import AUTO, cpu_computes_bf16, hardware_precision

CONF = Path(__file__).resolve().parents[1] / "conf"  # the project's Hydra configs


def mini_preset() -> DictConfig:
    """``conf/model/transformer_mini.yaml``, the translation CPU preset: its model and recipe as the file holds them."""
    return OmegaConf.load(CONF / "model" / "transformer_mini.yaml")


def base_parser(description: str) -> argparse.ArgumentParser:
    """The options every benchmark script takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one sample: checks that the script runs")
    parser.add_argument(
        "--append", type=Path, default=None, help="also append the result as one line to this JSONL file"
    )
    parser.add_argument("--threads", type=int, default=None, help="intra-op CPU threads (default: torch's default)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (cuda adds bf16 autocast)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed calls of each contender first")
    parser.add_argument("--repeats", type=int, default=None, help="timed samples per contender")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def setup(args: argparse.Namespace, warmup: int, repeats: int) -> torch.device:
    """Fix threads and seed, fill in the warmup/repeat defaults, check the device."""
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be at least 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    args.threads = torch.get_num_threads()
    args.warmup = warmup if args.warmup is None else args.warmup
    args.repeats = repeats if args.repeats is None else args.repeats
    if args.repeats < 1 or args.warmup < 0:
        raise ValueError(f"--repeats must be >= 1 and --warmup >= 0, got {args.repeats} and {args.warmup}")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but torch sees no CUDA device; use --device cpu")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"--device must be cpu or cuda, got {args.device!r}")
    torch.manual_seed(args.seed)
    return device


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo where there is one."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def environment(device: torch.device, threads: int, command: str, **versions: str) -> dict[str, Any]:
    """What the numbers depend on: library versions, device, threads, machine (its CPU model, the
    widest vector instructions PyTorch's CPU kernels use there, ``AVX2`` or ``AVX512``, and whether
    it computes bfloat16, as ``trainer.precision=auto`` asks), and the command that produced them."""
    return {
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        **versions,
        "python": platform.python_version(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "cpu": cpu_name(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_bf16": cpu_computes_bf16(),
        "cpu_count": os.cpu_count(),
        "threads": threads,
        "command": command,
    }


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def autocast(device: torch.device, bf16: bool) -> torch.autocast:
    """bf16 autocast on ``device`` when ``bf16``, else a context that changes nothing."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)


def interleave(
    contenders: Mapping[str, Callable[[], object]],
    warmup: int,
    repeats: int,
    device: torch.device,
) -> dict[str, list[float]]:
    """Seconds per call of each contender: ``warmup`` untimed rounds, then ``repeats`` timed
    rounds, each round calling every contender once in turn (A B A B ...)."""
    for _ in range(warmup):
        for run in contenders.values():
            run()
    synchronize(device)
    seconds: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, run in contenders.items():
            start = time.perf_counter()
            run()
            synchronize(device)
            seconds[name].append(time.perf_counter() - start)
    return seconds


def throughput(seconds: list[float], items: int) -> dict[str, Any]:
    """Median time of one call and the items per second it gives."""
    median = statistics.median(seconds)
    return {
        "items_per_s": round(items / median, 2),
        "median_s": round(median, 5),
        "samples_s": [round(value, 5) for value in seconds],
    }


def speed_ratio(numerator: Mapping[str, Any], denominator: Mapping[str, Any]) -> float:
    """Speed of ``numerator`` over speed of ``denominator`` (> 1 means numerator is faster)."""
    return round(numerator["items_per_s"] / denominator["items_per_s"], 3)


def resident_mib(field: str) -> float:
    """``VmRSS`` (resident now) or ``VmHWM`` (peak resident) of this process in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(f"{field} is not in /proc/self/status")


def reset_resident_peak() -> bool:
    """Return freed heap memory to the OS and restart the peak-RSS count at the current RSS
    (Linux: ``malloc_trim`` and writing 5 to ``/proc/self/clear_refs``). False where that is
    not possible."""
    clear_refs = Path("/proc/self/clear_refs")
    if not clear_refs.exists() or not os.access(clear_refs, os.W_OK):
        return False
    ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)
    clear_refs.write_text("5")
    return True


def peak_memory(run: Callable[[], object], device: torch.device, calls: int = 2) -> dict[str, Any]:
    """Extra memory at the peak of ``calls`` calls of ``run`` over what was held before (the
    models, and the optimizer state once a training step has run).

    On CUDA this is ``torch.cuda.max_memory_allocated`` (exact, tensors only). On CPU torch keeps
    no allocator statistics and tracemalloc does not see its buffers, so it is the growth of the
    process's peak resident set size after :func:`reset_resident_peak` (Linux only), which also
    counts allocator overhead.
    """
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        for _ in range(calls):
            run()
        synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - before
        return {"peak_mib": round(peak / 2**20, 1), "method": "torch.cuda.max_memory_allocated"}
    gc.collect()
    if not reset_resident_peak():
        return {"peak_mib": None, "method": "unavailable: needs Linux /proc/self/clear_refs"}
    before = resident_mib("VmRSS")
    for _ in range(calls):
        run()
    return {"peak_mib": round(resident_mib("VmHWM") - before, 1), "method": "peak RSS growth (VmHWM)"}


def run_training_cli(module: str, overrides: list[str], run_dir: Path, threads: int) -> tuple[dict[str, Any], float]:
    """``python -m {module} *overrides`` in a subprocess with ``threads`` OpenMP threads, its Hydra
    run directory at ``run_dir``: the run's ``metrics.json`` and the command's wall seconds."""
    command = [sys.executable, "-m", module, *overrides, f"hydra.run.dir={run_dir}"]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=Path(__file__).resolve().parents[1])
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return json.loads((run_dir / "metrics.json").read_text()), wall


def precision_setting(overrides: list[str]) -> str:
    """The ``trainer.precision`` a training CLI is given: a ``trainer.precision`` override, else
    ``auto`` (conf/trainer/default.yaml)."""
    named = [override.split("=", 1)[1] for override in overrides if override.startswith("trainer.precision=")]
    return named[-1] if named else AUTO


def cli_precision(overrides: list[str], device: str) -> str:
    """The precision a training CLI trains in: its :func:`precision_setting`, with ``auto``
    resolved as on this hardware."""
    setting = precision_setting(overrides)
    return hardware_precision("gpu" if device == "cuda" else "cpu") if setting == AUTO else setting


def append_line(result: Mapping[str, Any], append: Path | None) -> None:
    """With ``append``, add ``result`` as one JSON line to that file."""
    if append is not None:
        append.parent.mkdir(parents=True, exist_ok=True)
        with append.open("a") as handle:
            handle.write(json.dumps(result) + "\n")


def table_result(
    benchmark: str, env: Mapping[str, Any], rows: list[dict[str, Any]], table: str, append: Path | None, **extra: Any
) -> dict[str, Any]:
    """The result of a script that reports a table (quality, scale): ``{"benchmark", "env", **extra,
    "rows"}``, the Markdown ``table`` printed and the result appended as one JSON line."""
    output = {"benchmark": benchmark, "env": dict(env), **extra, "rows": rows}
    print(table)
    append_line(output, append)
    return output


def emit(result: Mapping[str, Any], append: Path | None) -> None:
    """Print ``result`` as one JSON object; with ``append``, also add it as one line to that file."""
    print(json.dumps(result, indent=2))
    append_line(result, append)
