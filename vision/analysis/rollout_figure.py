"""The figure of ``vision.explain``: the input, the attention rollout over it and its patch-grid
map, then one map per layer."""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from torch import Tensor

from core.figures.heatmap import save_figure


def unnormalize(image: Tensor, mean: list[float], std: list[float]) -> Tensor:
    """A normalized [3, H, W] image back to displayable [H, W, 3] values in [0, 1]."""
    image = image.cpu() * torch.tensor(std)[:, None, None] + torch.tensor(mean)[:, None, None]
    return image.clamp(0, 1).permute(1, 2, 0)  # (H, W, 3)


def upsample(grid_map: Tensor, size: tuple[int, int]) -> Tensor:
    """A patch-grid map [gh, gw] at image resolution [H, W], scaled to [0, 1]."""
    resized = F.interpolate(grid_map[None, None].float().cpu(), size=size, mode="bilinear", align_corners=False)[0, 0]
    low, high = resized.min(), resized.max()
    return (resized - low) / (high - low) if high > low else torch.zeros_like(resized)


def draw(image: Tensor, rollout: Tensor, layers: list[Tensor], title: str, out: Path) -> None:
    """Input, rollout overlay and rollout map on the first row; one map per layer below."""
    size = (image.shape[0], image.shape[1])
    columns = max(3, min(6, len(layers)))
    rows = 1 + math.ceil(len(layers) / columns)
    figure = Figure(figsize=(2.4 * columns, 2.6 * rows), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False)
    for axis in axes.flat:
        axis.axis("off")
    # numpy arrays, not tensors: matplotlib asks for a copy-free array, which Tensor.__array__ cannot promise
    axes[0, 0].imshow(image.numpy())
    axes[0, 0].set_title("input")
    axes[0, 1].imshow(image.numpy())
    axes[0, 1].imshow(upsample(rollout, size).numpy(), cmap="jet", alpha=0.5)
    axes[0, 1].set_title("attention rollout")
    axes[0, 2].imshow(rollout.float().cpu().numpy(), cmap="viridis")
    axes[0, 2].set_title("rollout (patch grid)")
    for index, layer_map in enumerate(layers):
        axis = axes[1 + index // columns, index % columns]
        axis.imshow(layer_map.float().cpu().numpy(), cmap="viridis")
        axis.set_title(f"layer {index + 1}")
    figure.suptitle(title)
    save_figure(figure, out, tight=False)
