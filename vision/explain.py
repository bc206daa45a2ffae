"""``python -m vision.explain CKPT IMAGE --out map.png``: attention rollout (Abnar & Zuidema 2020)
over the image, and the class token's attention in every layer, as one PNG."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from torch import Tensor

from core.training.cli import ArgumentParser, add_device_option, command, png_path
from vision.inference import load_classifier, load_image, preprocess
from vision.rollout import explain


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (``sys.argv[1:]`` when ``argv`` is None)."""
    parser = ArgumentParser(prog="python -m vision.explain", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a checkpoint written by vision.train")
    parser.add_argument("image", help="an image file")
    parser.add_argument(
        "--out",
        type=png_path,
        default=Path("attention.png"),
        help="PNG file to write; .png is added to a name without a suffix (default attention.png)",
    )
    add_device_option(parser)
    return parser.parse_args(argv)


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
    axes[0, 0].imshow(image)
    axes[0, 0].set_title("input")
    axes[0, 1].imshow(image)
    axes[0, 1].imshow(upsample(rollout, size), cmap="jet", alpha=0.5)
    axes[0, 1].set_title("attention rollout")
    axes[0, 2].imshow(rollout.cpu(), cmap="viridis")
    axes[0, 2].set_title("rollout (patch grid)")
    for index, layer_map in enumerate(layers):
        axis = axes[1 + index // columns, index % columns]
        axis.imshow(layer_map.cpu(), cmap="viridis")
        axis.set_title(f"layer {index + 1}")
    figure.suptitle(title)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=120, format="png")


@command
def main(argv: list[str] | None = None) -> None:
    """Write the attention maps of one image to ``--out`` and print the path written."""
    args = parse_args(argv)
    classifier = load_classifier(args.checkpoint, args.device)
    batch = preprocess(classifier, [load_image(args.image)])
    logits, rollout, layers = explain(classifier.net, batch)
    probability, index = logits.softmax(dim=-1)[0].max(dim=0)
    name = classifier.hparams.class_names[int(index)]
    kind = "class token" if classifier.net.pool == "cls" else "mean-pooled"
    title = f"{Path(args.image).name}: {name} ({float(probability):.1%}); per-layer maps: {kind} attention"
    image = unnormalize(batch[0], classifier.hparams.mean, classifier.hparams.std)
    draw(image, rollout[0], [layer[0] for layer in layers], title, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
