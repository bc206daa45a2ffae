"""``python -m vision.explain CKPT IMAGE --out map.png``: attention rollout (Abnar & Zuidema 2020)
over the image, and the class token's attention in every layer, as one PNG."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import Tensor  # noqa: E402

from vision.inference import load_classifier, load_image, preprocess  # noqa: E402
from vision.rollout import explain  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m vision.explain", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a checkpoint written by vision.train")
    parser.add_argument("image", help="an image file")
    parser.add_argument("--out", default="attention.png", help="PNG to write (default attention.png)")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
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
    figure, axes = plt.subplots(
        rows, columns, figsize=(2.4 * columns, 2.6 * rows), squeeze=False, layout="constrained"
    )
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
    figure.savefig(out, dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        classifier = load_classifier(args.checkpoint, args.device)
        batch = preprocess(classifier, [load_image(args.image)])
    except (FileNotFoundError, ValueError) as error:
        sys.exit(f"vision.explain: {error}")
    logits, rollout, layers = explain(classifier.net, batch)
    probability, index = logits.softmax(dim=-1)[0].max(dim=0)
    name = classifier.hparams.class_names[int(index)]
    kind = "class token" if classifier.net.pool == "cls" else "mean-pooled"
    title = f"{Path(args.image).name}: {name} ({float(probability):.1%}); per-layer maps: {kind} attention"
    image = unnormalize(batch[0], classifier.hparams.mean, classifier.hparams.std)
    draw(image, rollout[0], [layer[0] for layer in layers], title, Path(args.out))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
