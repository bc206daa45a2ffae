"""Heatmaps (PNG) of the walkthrough's attention weights, positional encoding and output
distribution, labelled with the words."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure
from torch import Tensor

from core.figures.heatmap import heatmap, save_figure
from nlp.walkthrough.steps import Step


def plot_matrix(
    matrix: Tensor,
    rows: list[str],
    columns: list[str],
    path: Path,
    title: str,
    axis_labels: tuple[str, str],
    size: tuple[float, float],
) -> Path:
    """One labelled heatmap in a figure of ``size`` inches; ``axis_labels`` are (x, y)."""
    figure = Figure(figsize=size, layout="constrained")
    ax = figure.subplots()
    heatmap(ax, matrix, rows, columns, title)
    ax.set_xlabel(axis_labels[0])
    ax.set_ylabel(axis_labels[1])
    return save_figure(figure, path)


def plot_heads(step: Step, path: Path, title: str, query_label: str, key_label: str) -> Path:
    """One panel per head of a [H, T, S] attention-weight step."""
    weights: Tensor = step.value
    heads = weights.shape[0]
    figure = Figure(figsize=(4.8 * heads, 4.2), layout="constrained")
    axes = figure.subplots(1, heads, squeeze=False)[0]
    for head, ax in enumerate(axes):
        heatmap(ax, weights[head], step.rows, step.columns, f"head {head + 1}")
        ax.set_xlabel(key_label)
        ax.set_ylabel(query_label)
    figure.suptitle(title)
    return save_figure(figure, path)


def save_plots(steps: list[Step], directory: Path) -> list[Path]:
    """Write the heatmaps into ``directory`` (created if missing); returns the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    by_name = {step.name: step for step in steps}
    written = [
        plot_heads(
            by_name["attention_weights_all_heads"],
            directory / "encoder_self_attention.png",
            "Encoder self-attention weights",
            "query word",
            "key word",
        ),
        plot_heads(
            by_name["decoder_self_attention_weights"],
            directory / "decoder_self_attention.png",
            "Decoder masked self-attention weights (future positions 0)",
            "query word",
            "key word",
        ),
        plot_heads(
            by_name["cross_attention_weights"],
            directory / "cross_attention.png",
            "Encoder-decoder attention weights",
            "decoder word",
            "source word",
        ),
    ]

    encoding, output = by_name["positional_encoding"], by_name["probabilities"]
    written.append(
        plot_matrix(
            encoding.value,
            encoding.rows,
            encoding.columns,
            directory / "positional_encoding.png",
            "Positional encoding (sin on even, cos on odd dimensions)",
            ("dimension", "position"),
            (6.0, 4.0),
        )
    )
    written.append(
        plot_matrix(
            output.value.T,
            output.columns,
            output.rows,
            directory / "output_distribution.png",
            "Next-word probabilities",
            ("decoder input word", "vocabulary word"),
            (1.1 * len(output.rows) + 2.5, 0.3 * len(output.columns) + 1.5),
        )
    )
    return written
