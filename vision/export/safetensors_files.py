"""``python -m vision.export CKPT --format safetensors --out DIR``: the classifier as timm shares
models, ``model.safetensors`` + ``config.json`` (:mod:`core.files.model_directory`), read back by
:func:`vision.module.load_classifier` and, where timm has the architecture, by
``timm.create_model("local-dir:DIR", pretrained=True)``.

``DIR/model.safetensors`` holds the network's weights under timm's key names (``blocks.{i}``,
``norm``; :mod:`vision.model.timm_weights`), a fixed sin-cos ``pos_embed`` included as the table it
is. ``DIR/config.json`` holds, besides the fields every export has:

- ``model``: the :class:`~vision.model.VisionTransformer` settings but ``num_classes``;
- ``num_classes`` and ``label_names``: the classes in logit order (timm's fields);
- ``pretrained_cfg``: the evaluation preprocessing as timm records it (``input_size``,
  ``interpolation``, ``crop_pct``, ``crop_mode``, ``mean``, ``std``), the one record that
  prediction and evaluation build their transform from;
- ``architecture`` and ``model_args``: the timm model and its arguments, when timm builds the
  network (the linear patch embedding, ``model.stem=patch``, and timm's LayerNorm epsilon).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from core.constraints import AUTO
from core.errors import InputError
from core.files.model_directory import (
    CONFIG,
    export_again,
    load_weights,
    new_model_directory,
    read_config,
    read_weights,
    write_model_files,
)
from vision.export.formats import CHECK_BATCHES, TOLERANCE, example_images
from vision.inference import data_config
from vision.model.timm_weights import convert_timm_state_dict, timm_key, timm_model_args
from vision.module import ImageClassifier
from vision.recipe import FULL_DROP_PATH

HEAD = "vision"
REQUIRED = ("model", "num_classes", "label_names", "pretrained_cfg")
PREPROCESSING = ("input_size", "interpolation", "crop_pct", "mean", "std")
TIMM_ARCHITECTURE = "vit_base_patch16_224"  # a plain timm ViT; model_args set every size
TIMM_NORM_EPS = 1e-6  # the LayerNorm epsilon of timm's ViT, which model_args cannot change


def timm_weights(classifier: ImageClassifier) -> dict[str, Tensor]:
    """The network's state dict under timm's names, with ``pos_embed`` also when it is the fixed
    sin-cos table (a buffer left out of the state dict), so timm loads it as its learned table."""
    net = classifier.net
    weights = {timm_key(name): tensor for name, tensor in net.state_dict().items()}
    weights.setdefault("pos_embed", net.pos_embed.detach())
    return weights


def network_settings(classifier: ImageClassifier) -> dict[str, Any]:
    """The checkpoint's ``model`` section with ``drop_path: auto`` as the rate the layers were
    built with, so that ``VisionTransformer(**model, num_classes=...)`` rebuilds the network."""
    model = dict(classifier.hparams.model)
    if model.get("drop_path") == AUTO:
        model["drop_path"] = FULL_DROP_PATH
    return model


def timm_obstacle(model: dict[str, Any]) -> str | None:
    """Why timm cannot build the network of the settings ``model``, or None when it can."""
    if model["stem"] != "patch":
        return f"the {model['stem']} stem (timm's ViT has the linear patch embedding, model.stem=patch)"
    if model["norm_eps"] != TIMM_NORM_EPS:
        return f"LayerNorm epsilon {model['norm_eps']} (timm's ViT has {TIMM_NORM_EPS})"
    if model.get("locality"):
        return "Locality Self-Attention (timm's ViT has plain attention, model.locality=false)"
    if model.get("pool") == "seq":
        return "sequence pooling (timm's ViT pools by class token or average, model.pool=cls or mean)"
    return None


def pretrained_cfg(classifier: ImageClassifier) -> dict[str, Any]:
    """The classifier's evaluation data config (:func:`vision.inference.data_config`) as timm's
    ``pretrained_cfg``: ``img_size`` becomes ``input_size`` [channels, height, width]."""
    config = data_config(classifier)
    size = config["img_size"]
    height, width = (size, size) if isinstance(size, int) else size
    return {
        "input_size": [classifier.net.patch_embed.in_chans, height, width],
        "interpolation": config["interpolation"],
        "crop_pct": config["crop_pct"],
        "crop_mode": "center",
        "mean": config["mean"],
        "std": config["std"],
        "num_classes": classifier.hparams.num_classes,
        "fixed_input_size": not classifier.hparams.model["dynamic_img_size"],
        "first_conv": "patch_embed.proj",
        "classifier": "head",
    }


def directory_config(classifier: ImageClassifier) -> dict[str, Any]:
    """What ``config.json`` records of ``classifier`` besides the common fields."""
    model, num_classes = network_settings(classifier), classifier.hparams.num_classes
    config = {
        "model": model,
        "num_classes": num_classes,
        "label_names": list(classifier.hparams.class_names),
        "pretrained_cfg": pretrained_cfg(classifier),
        "flip_tta": bool(classifier.hparams.flip_tta),  # the toolkit's commands average with the mirror
    }
    if timm_obstacle(model) is None:
        config.update(architecture=TIMM_ARCHITECTURE, model_args=timm_model_args(model, num_classes))
    return config


def preprocessing(config: dict[str, Any], path: Path) -> dict[str, Any]:
    """The classifier's data config (the arguments of :func:`vision.data.transforms.eval_transform`)
    from ``pretrained_cfg``: a square ``input_size`` gives one side, as the datamodules take it."""
    timm_cfg = config["pretrained_cfg"]
    missing = [key for key in PREPROCESSING if not isinstance(timm_cfg, dict) or key not in timm_cfg]
    if missing:
        raise InputError(f"{path} lacks pretrained_cfg.{', pretrained_cfg.'.join(missing)}; {export_again(HEAD)}")
    _, height, width = timm_cfg["input_size"]
    return {
        "img_size": height if height == width else [height, width],
        **{key: timm_cfg[key] for key in ("interpolation", "crop_pct", "mean", "std")},
    }


def read_classifier(directory: str | Path, device: str = "cpu") -> ImageClassifier:
    """The classifier of a directory written by :func:`export_safetensors`, in eval mode."""
    path = Path(directory) / CONFIG
    config = read_config(directory, HEAD, REQUIRED)
    data = preprocessing(config, path)
    try:
        model = ImageClassifier.upgrade_hyperparameters({"model": config["model"]})["model"]  # an earlier export's network
        classifier = ImageClassifier(
            model=model, num_classes=config["num_classes"], class_names=config["label_names"],
            flip_tta=bool(config.get("flip_tta", False)), **data,
        )
    except (TypeError, ValueError) as error:
        raise InputError(f"{path} does not describe a network this toolkit builds ({error}); {export_again(HEAD)}") from None
    net = classifier.net
    weights = convert_timm_state_dict(read_weights(directory, HEAD), net.patch_embed.grid_size, net.num_prefix_tokens)
    if net.pos_embed_kind == "sincos":
        weights.pop("pos_embed", None)  # the network computes its table
    load_weights(net, weights, directory, HEAD)
    return classifier.eval().to(device)


@torch.no_grad()
def export_safetensors(classifier: ImageClassifier, out: Path) -> float:
    """Write ``classifier`` to the directory ``out`` (replacing an earlier export there), after
    reading it back with :func:`read_classifier` and comparing its logits with the classifier's at
    :data:`~vision.export.formats.CHECK_BATCHES` images; returns the largest absolute difference."""
    net = classifier.net.eval()
    with new_model_directory(out, replace=True) as staging:
        write_model_files(staging, HEAD, timm_weights(classifier), directory_config(classifier))
        loaded = read_classifier(staging, str(classifier.device)).net
        worst = 0.0
        for batch in CHECK_BATCHES:
            images = example_images(net, batch, classifier.device)
            expected, actual = net(images).cpu(), loaded(images).cpu()
            torch.testing.assert_close(actual, expected, rtol=TOLERANCE, atol=TOLERANCE)
            worst = max(worst, float((actual - expected).abs().max()))
    return worst
