"""The character-level language model page's minute of training, run as the page shows it.

    python -m benchmarks.char_lm --append benchmarks/results/char_lm.jsonl   # 1400 steps, about a minute on 2 cores
    python -m benchmarks.char_lm --steps 5                                   # seconds: checks that it runs

Reads ``docs/language_model.md``, runs its program (the block the docs test runs) and then the
block of "A minute of training" with the page's own settings, prints what that block prints, and
with ``--append`` adds one JSON line: the printed text, the seconds, and the validation loss before
and after. ``python -m benchmarks.report_figures`` puts the printed text into the page.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import emit, environment

PAGE = Path(__file__).resolve().parents[1] / "docs" / "language_model.md"
PROGRAM = re.compile(r"^<!-- test: run -->\n```python\n(?P<code>.*?)^```$", re.M | re.S)
MINUTE = re.compile(r"^## A minute of training\n.*?^```python\n(?P<code>.*?)^```$", re.M | re.S)
STEPS = re.compile(r"\bsteps=(\d+)")


def page_blocks(text: str) -> tuple[str, str]:
    """The page's program and its minute of training, as written."""
    program, minute = PROGRAM.search(text), MINUTE.search(text)
    if program is None or minute is None:
        raise ValueError(f"{PAGE}: no `<!-- test: run -->` program or no python block under '## A minute of training'")
    if not STEPS.search(minute.group("code")):
        raise ValueError(f"{PAGE}: the minute of training sets no `steps=N`")
    return program.group("code"), minute.group("code")


def run(text: str, steps: int | None = None) -> dict[str, Any]:
    """Runs the page's blocks (``steps`` in place of the page's own) and returns what the minute
    of training printed, its seconds and its validation losses."""
    program, minute = page_blocks(text)
    page_steps = int(STEPS.search(minute).group(1))
    if steps is not None:
        minute = STEPS.sub(f"steps={steps}", minute, count=1)
    namespace: dict[str, Any] = {"__name__": "language_model"}
    with contextlib.redirect_stdout(io.StringIO()):  # the program's own checks print True
        exec(compile(program, f"{PAGE}:program", "exec"), namespace)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(minute, f"{PAGE}:minute", "exec"), namespace)
    return {
        "steps": steps or page_steps,
        "page_steps": page_steps,
        "seconds": round(namespace["seconds"], 1),
        "val_loss_before": round(namespace["before"], 4),
        "val_loss_after": round(namespace["after"], 4),
        "output": printed.getvalue(),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="training steps instead of the page's")
    parser.add_argument("--append", type=Path, default=None, help="also append the result as one JSON line here")
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    measured = run(PAGE.read_text(), args.steps)
    env = environment(torch.device("cpu"), torch.get_num_threads(), " ".join(["python -m benchmarks.char_lm", *argv]))
    torch.set_num_threads(threads)  # the page's block sets its own
    result = {"benchmark": "char_lm", "env": env, **measured}
    emit(result, args.append)
    return result


if __name__ == "__main__":
    main()
