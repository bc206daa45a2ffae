"""``python -m vision.explain CKPT IMAGE --out map.png``: attention rollout (Abnar & Zuidema 2020)
over the image, and the class token's attention in every layer, as one PNG."""

from __future__ import annotations

import argparse
from pathlib import Path

from core.commands.arguments import ArgumentParser, add_device_option, png_path
from core.commands.exit import command


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
    parser.add_argument(
        "--flip-tta", action="store_true",
        help="name the class vision.predict --flip-tta gives (logits averaged with the mirror image's); the maps are the image's",
    )
    add_device_option(parser)
    return parser.parse_args(argv)


@command
def main(argv: list[str] | None = None) -> None:
    """Write the attention maps of one image to ``--out`` and print the path written."""
    args = parse_args(argv)
    # torch, timm, Lightning and matplotlib load after the arguments are read
    import torch

    from vision.inference import load_image, preprocess
    from vision.module import load_classifier
    from vision.analysis.rollout import explain
    from vision.analysis.rollout_figure import draw, unnormalize

    classifier = load_classifier(args.checkpoint, args.device)
    if args.flip_tta:
        classifier.hparams.flip_tta = True
    batch = preprocess(classifier, [load_image(args.image)])
    _, rollout, layers = explain(classifier.net, batch)
    with torch.no_grad():  # the class vision.predict names: mirror-averaged under the checkpoint's flip_tta too
        probability, index = classifier.classify(batch).softmax(dim=-1)[0].max(dim=0)
    name = classifier.hparams.class_names[int(index)]
    kind = {"cls": "class token", "mean": "mean-pooled", "seq": "sequence-pooled"}[classifier.net.pool]
    title = f"{Path(args.image).name}: {name} ({float(probability):.1%}); per-layer maps: {kind} attention"
    image = unnormalize(batch[0], classifier.hparams.mean, classifier.hparams.std)
    draw(image, rollout[0], [layer[0] for layer in layers], title, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
