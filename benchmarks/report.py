"""Markdown tables (ratios first) of the latest result of each benchmark in a JSONL file written
with ``--append``.

    python -m benchmarks.report results.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ORDER = ("vit", "seq2seq", "decoding")


def read_results(path: Path) -> list[dict[str, Any]]:
    """Every result object of a JSONL file written with ``--append``, in the file's order."""
    if not path.is_file():
        raise FileNotFoundError(f"results file {path} does not exist; write one with `--append {path}`")
    results = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            results.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number} is not a JSON object ({error}); remove the line") from error
    return results


def results_of(paths: Iterable[Path], benchmark: str) -> list[tuple[str, dict[str, Any]]]:
    """(file name, result) of every result of ``benchmark`` in the files ``paths``, oldest first
    (by the ``env.time`` each records)."""
    found = [(path.name, result) for path in paths for result in read_results(path) if result.get("benchmark") == benchmark]
    return sorted(found, key=lambda item: item[1]["env"]["time"])


def latest_results(path: Path) -> dict[str, dict[str, Any]]:
    """The last result of each benchmark in the file."""
    return {result["benchmark"]: result for result in read_results(path)}


def length_of(row: Mapping[str, Any]) -> tuple[str, float]:
    """How long a quality row's run was: ``("epochs", E)``, ``("minutes", M)`` or ``("steps", N)``
    (a run bounded by optimizer steps, ``max_steps``)."""
    if "max_steps" in row:
        return "steps", row["max_steps"]
    return ("minutes", row["minutes"]) if "minutes" in row else ("epochs", row["epochs"])


def budget_label(budget: tuple[str, float]) -> str:
    """A budget in a table's cell: ``3 ep``, ``8 min``, ``2300 steps``."""
    unit, length = budget
    return f"{length:g} {dict(epochs='ep', minutes='min').get(unit, unit)}"


def table(header: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("-" if cell is None else str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def speed(results: Mapping[str, Any], name: str) -> float | None:
    return results[name]["items_per_s"] if name in results else None


def machine_name(env: Mapping[str, Any]) -> str:
    """The CPU model of a result's machine, trademarks dropped ('Intel(R) Xeon(R) Processor' and
    'Intel Xeon' are one machine), with the vector instructions its line recorded: 'AMD EPYC
    (AVX2)' and 'AMD EPYC (AVX512)' are two."""
    name = " ".join(re.sub(r"\((R|TM)\)|\bProcessor\b|\bCPU\b", "", str(env.get("cpu", ""))).split())
    capability = env.get("cpu_capability")
    return f"{name} ({capability})" if name and capability else name


def machine(env: Mapping[str, Any]) -> str:
    """A result's machine as every generated page names it: '2-core AMD EPYC (AVX2)'."""
    return f"{env.get('cpu_count', '?')}-core {machine_name(env) or env.get('device', '?')}"


def environment_line(result: Mapping[str, Any]) -> str:
    env = result["env"]
    versions = ", ".join(f"{key} {env[key]}" for key in ("torch", "timm", "transformers") if key in env)
    return f"`{env['command']}` at {env['time']}: {versions}; device {env['device']} on a {machine(env)}, threads: {env['threads']}."


def vit_section(result: Mapping[str, Any]) -> str:
    rows = []
    for case in result["cases"]:
        memory = case["memory"] or {}
        rows.append(
            [
                case["case"],
                case["ratios"]["ours/timm"],
                case["batch"],
                speed(case["speed"], "ours"),
                speed(case["speed"], "timm"),
                memory.get("ours", {}).get("peak_mib"),
                memory.get("timm", {}).get("peak_mib"),
            ]
        )
    header = ["case", "ours/timm", "batch", "ours img/s", "timm img/s", "ours peak MiB", "timm peak MiB"]
    return "### ViT: ours vs timm\n\n" + table(header, rows)


def seq2seq_section(result: Mapping[str, Any]) -> str:
    settings = result["settings"]
    row = [
        result["ratios"]["train ours/torch"],
        speed(result["speed"], "ours"),
        speed(result["speed"], "torch"),
        f"d={settings['dim']} h={settings['heads']} N={settings['layers']} d_ff={settings['ffn']} "
        f"V={settings['vocab']}, batch {settings['batch']}x{settings['src_len']}->{settings['tgt_len']}",
    ]
    header = ["ours/torch", "ours tokens/s", "torch tokens/s", "model and batch"]
    return "### Seq2seq training: ours vs torch.nn.Transformer\n\n" + table(header, [row])


def decoding_section(result: Mapping[str, Any]) -> str:
    rows = [
        [
            case["case"],
            case["ratios"].get("cached/uncached"),
            case["ratios"].get("cached/hf"),
            speed(case["speed"], "cached"),
            speed(case["speed"], "uncached"),
            speed(case["speed"], "hf"),
        ]
        for case in result["cases"]
    ]
    header = ["case", "cached/uncached", "cached/HF", "cached tok/s", "uncached tok/s", "HF tok/s"]
    return "### Decoding: cached vs uncached vs Hugging Face generate\n\n" + table(header, rows)


SECTIONS = {"vit": vit_section, "seq2seq": seq2seq_section, "decoding": decoding_section}


def render(latest: Mapping[str, Mapping[str, Any]]) -> str:
    parts = []
    for name in ORDER:
        if name in latest:
            parts.append(SECTIONS[name](latest[name]) + "\n\n" + environment_line(latest[name]))
    return "\n\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="JSONL file written by the benchmarks' --append")
    args = parser.parse_args(argv)
    text = render(latest_results(args.results))
    print(text, end="")
    return text


if __name__ == "__main__":
    main()
