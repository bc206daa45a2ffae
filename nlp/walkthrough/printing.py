"""The walkthrough's steps as text: labelled tables of their matrices, rounded to 3 decimals."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text
from torch import Tensor

from nlp.walkthrough.steps import Step


def format_row(label: str, cells: list[str], label_width: int, widths: list[int]) -> str:
    """One table line: the label left-aligned, each cell right-aligned in its width."""
    return f"{label:<{label_width}}" + "".join(f"{cell:>{width}}" for cell, width in zip(cells, widths))


def format_matrix(matrix: Tensor, rows: list[str], columns: list[str]) -> str:
    """A labelled table of a [R, C] tensor, rounded to 3 decimals (integers as they are)."""
    cells = [[str(v) if isinstance(v, int) else f"{v:.3f}" for v in row] for row in matrix.tolist()]
    widths = [max(len(columns[j]), *(len(row[j]) for row in cells)) + 2 for j in range(len(columns))]
    label_width = max(len(label) for label in rows) + 1
    lines = [format_row("", columns, label_width, widths)]
    lines += [format_row(label, row, label_width, widths) for label, row in zip(rows, cells)]
    return "\n".join(lines)


def format_value(step: Step) -> str:
    """The printed body of a step: its text, or its tensor as one or more labelled tables."""
    if step.text is not None:
        return step.text
    value: Tensor = step.value
    if value.dim() == 1:
        return format_matrix(value[None], [""], step.columns or step.rows)
    if value.dim() == 3:
        tables = [format_matrix(matrix, step.rows, step.columns) for matrix in value]
        return "\n\n".join(f"head {head}\n{table}" for head, table in enumerate(tables, 1))
    if step.transpose:
        return format_matrix(value.T, step.columns, step.rows)
    return format_matrix(value, step.rows, step.columns)


def print_steps(steps: list[Step], console: Console) -> None:
    """Print each step numbered, with its formula, note and value."""
    for number, step in enumerate(steps, 1):
        console.print(Text(f"{number}. {step.title}", style="bold cyan"))
        console.print(Text(f"   {step.formula}", style="yellow"))
        if step.note:
            console.print(Text(f"   {step.note}", style="dim"))
        body = "\n".join(f"   {line}" for line in format_value(step).splitlines())
        console.print(Text(body))
        console.print()
