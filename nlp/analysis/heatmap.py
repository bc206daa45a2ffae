"""Labelled heatmaps of attention-sized matrices (PNG), for the alignment plot of
:mod:`nlp.analysis.alignment` and the walkthrough's figures."""

from __future__ import annotations

from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from torch import Tensor


def heatmap(ax: Axes, matrix: Tensor, rows: list[str], columns: list[str], title: str) -> None:
    """One labelled heatmap; small matrices also show their values."""
    image = ax.imshow(matrix.numpy(), cmap="viridis", aspect="auto")
    ax.set_title(title)
    ax.set_xticks(range(len(columns)), labels=columns, rotation=45, ha="right")
    ax.set_yticks(range(len(rows)), labels=rows)
    if matrix.numel() <= 200:
        middle = float(matrix.min() + matrix.max()) / 2
        for i, row in enumerate(matrix.tolist()):
            for j, v in enumerate(row):
                color = "black" if v > middle else "white"
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color=color)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)


def save_figure(figure: Figure, path: Path) -> Path:
    """Save ``figure`` to ``path`` as a PNG and return the path."""
    figure.savefig(path, dpi=120, bbox_inches="tight")
    return path
