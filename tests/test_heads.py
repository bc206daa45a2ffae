"""The heads' declarations (:class:`core.training.head.Head`): every function a head names
imports, both its primary configs exist where Hydra looks, and each names the head's own rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.utils import get_method
from omegaconf import OmegaConf

from core.training.head import Head
from nlp.head import HEAD as NLP
from tests.third_head.head import HEAD as THIRD
from vision.head import HEAD as VISION

CONF = Path(__file__).resolve().parents[1] / "conf"


@pytest.mark.parametrize("head", [VISION, NLP, THIRD], ids=lambda head: head.package)
def test_a_head_names_functions_and_configs_that_exist(head: Head) -> None:
    for path in (head.load_checkpoint, head.checkpoint_data, head.evaluation_reports):
        if path is not None:
            assert callable(get_method(path)), path
    directory = CONF if head.config_path == "pkg://conf" else Path(head.config_path)
    for name in (head.train_config, head.eval_config):
        assert OmegaConf.load(directory / f"{name}.yaml").config_rules == f"{head.package}.config_rules", name

