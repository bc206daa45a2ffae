"""Classes and their presets agree: a class's defaults are the preset its docstring names, and a
preset's ``model._target_`` is the class its LightningModule builds (an override is refused)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import get_class, instantiate
from omegaconf import OmegaConf

from core.errors import InputError
from core.training.runner import check_model_target, model_kwargs
from nlp.model import Seq2SeqTransformer
from nlp.module import TranslationModule
from vision.model import VisionTransformer
from vision.module import ImageClassifier

CONF = Path(__file__).resolve().parents[1] / "conf"
# Preset values left at `auto` are sized to the run's length by vision/recipe.py (drop path,
# Mixup, CutMix); the classes take numbers there.
AUTO = "auto"


def defaults(cls: type) -> dict[str, Any]:
    """The constructor arguments of ``cls`` that have defaults, with them."""
    parameters = inspect.signature(cls.__init__).parameters.values()
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


def preset(path: str, section: str | None = None) -> dict[str, Any]:
    """A yaml file of conf/ (or one section of it) as plain data, without ``_target_``."""
    config = OmegaConf.load(CONF / path)
    data = OmegaConf.to_container(config[section] if section else config)
    data.pop("_target_", None)
    return data


def as_plain(value: Any) -> Any:
    """Tuples as lists, as yaml writes them."""
    return list(value) if isinstance(value, tuple) else value


@pytest.mark.parametrize(
    ("cls", "path", "section"),
    [
        (VisionTransformer, "model/vit_tiny.yaml", "model"),  # with its recipe: a global package
        (Seq2SeqTransformer, "model/transformer_base.yaml", "model"),
        (ImageClassifier, "vision.yaml", "module"),
        (ImageClassifier, "model/vit_tiny.yaml", "module"),  # the rate and warmup of the preset's size
        (TranslationModule, "nlp.yaml", "module"),
        (TranslationModule, "model/transformer_base.yaml", "module"),
    ],
    ids=["VisionTransformer", "Seq2SeqTransformer", "ImageClassifier", "ImageClassifier-rate", "TranslationModule",
         "TranslationModule-rate"],
)
def test_class_defaults_are_the_named_preset(cls: type, path: str, section: str | None) -> None:
    expected = {key: value for key, value in preset(path, section).items() if value != AUTO}
    assert f"conf/{path}" in inspect.getdoc(cls), f"{cls.__name__}'s docstring names its preset"
    own = defaults(cls)
    assert set(expected) <= set(own), f"{path} sets arguments {cls.__name__} lacks"
    assert {key: as_plain(own[key]) for key in expected} == expected


@pytest.mark.parametrize(
    ("directory", "cls"),
    [("vit_", VisionTransformer), ("transformer_", Seq2SeqTransformer)],
)
def test_every_model_preset_names_the_class_its_module_builds(directory: str, cls: type) -> None:
    names = sorted(path.stem for path in (CONF / "model").glob(f"{directory}*.yaml"))
    assert names
    for name in names:
        config = OmegaConf.load(CONF / "model" / f"{name}.yaml")
        # The architecture and the recipe of its size (and the preset's own warmup cap, if any).
        assert {"model", "module"} <= set(config) <= {"model", "module", "budget"}, name
        assert get_class(config.model._target_) is cls, name


def tiny_vision_config(*overrides: str) -> Any:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(
            "vision",
            overrides=["model.img_size=16", "model.dim=32", "model.depth=1", "model.num_heads=2", *overrides],
        )


def test_model_target_override_is_refused_not_ignored() -> None:
    cfg = tiny_vision_config()
    module = instantiate(cfg.module, model=model_kwargs(cfg), num_classes=3, _convert_="all")
    check_model_target(cfg, module.net)  # the preset's own class
    other = tiny_vision_config("model._target_=timm.models.vision_transformer.VisionTransformer")
    assert "_target_" not in model_kwargs(other)
    with pytest.raises(InputError, match=r"model._target_=timm\.models.*builds a vision\.model\.vision_transformer\.VisionTransformer"):
        check_model_target(other, instantiate(other.module, model=model_kwargs(other), num_classes=3).net)
