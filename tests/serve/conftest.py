"""The tiny models and inputs of the serving tests, made once per session."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.nlp.conftest import toy_tokenizer  # noqa: F401 - the session fixture, shared with the nlp tests
from tests.nlp.translator_testdata import write_translator_checkpoint
from tests.vision.vision_testdata import write_classifier_checkpoint
from nlp.data.tokenizer import SubwordTokenizer


@pytest.fixture(scope="session")
def classifier_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_classifier_checkpoint(tmp_path_factory.mktemp("classifier") / "classifier.ckpt")


@pytest.fixture(scope="session")
def translator_checkpoint(tmp_path_factory: pytest.TempPathFactory, toy_tokenizer: SubwordTokenizer) -> Path:  # noqa: F811
    return write_translator_checkpoint(tmp_path_factory.mktemp("translator") / "translator.ckpt", toy_tokenizer)


@pytest.fixture(scope="session")
def images(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Image files of several sizes, formats and modes: RGB PNG, JPEG, RGBA PNG (composited over
    white), grayscale PNG."""
    folder = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(7)
    made = [
        ("rgb.png", rng.integers(0, 256, size=(40, 30, 3), dtype=np.uint8)),
        ("photo.jpg", rng.integers(0, 256, size=(48, 64, 3), dtype=np.uint8)),
        ("transparent.png", rng.integers(0, 256, size=(20, 20, 4), dtype=np.uint8)),  # RGBA
        ("gray.png", rng.integers(0, 256, size=(30, 50), dtype=np.uint8)),  # L
    ]
    paths = []
    for name, pixels in made:
        Image.fromarray(pixels).save(folder / name)
        paths.append(folder / name)
    return paths
