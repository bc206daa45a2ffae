"""One labelled heatmap for every matrix a command draws: attention weights and alignments
(``nlp.translate --attention``, the walkthrough) and confusion matrices (``vision.evaluate``)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from torch import Tensor

from core.files.atomic import atomic_path


def heatmap(
    ax: Axes,
    matrix: Tensor,
    rows: list[str],
    columns: list[str],
    title: str,
    *,
    texts: list[list[str]] | None = None,
    annotate_up_to: int = 200,
    cmap: str = "viridis",
    value_range: tuple[float, float] | None = None,
    colorbar_label: str | None = None,
    column_rotation: int = 45,
    aspect: str = "auto",
) -> None:
    """Draw ``matrix`` [rows, columns] on ``ax`` with its labels, a colour bar and, for at most
    ``annotate_up_to`` cells, each cell's text (``texts``, or the value to two decimals) in black
    or white, whichever reads on the cell's colour."""
    vmin, vmax = value_range if value_range is not None else (None, None)
    image = ax.imshow(matrix.numpy(), cmap=cmap, vmin=vmin, vmax=vmax, aspect=aspect)
    ax.set_title(title)
    ax.set_xticks(range(len(columns)), labels=columns, rotation=column_rotation, ha="right" if column_rotation % 90 else "center")
    ax.set_yticks(range(len(rows)), labels=rows)
    if matrix.numel() <= annotate_up_to:
        for i, row in enumerate(matrix.tolist()):
            for j, value in enumerate(row):
                red, green, blue, _ = image.cmap(image.norm(value))
                dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5  # the cell's luma
                text = texts[i][j] if texts is not None else f"{value:.2f}"
                ax.text(j, i, text, ha="center", va="center", fontsize=7, color="white" if dark else "black")
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label=colorbar_label)


def save_figure(figure: Figure, path: Path, tight: bool = True) -> Path:
    """Save ``figure`` to ``path`` as a PNG, whole or not at all (:func:`core.files.atomic.atomic_path`,
    which creates its folder), cropped to its content unless ``tight`` is False (the figure's own
    size), and return the path."""
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=120, bbox_inches="tight" if tight else None, format="png")
    return path
