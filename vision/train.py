"""``python -m vision.train [overrides]``: train a Vision Transformer (config ``conf/vision.yaml``)."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from core.runner import train


@hydra.main(version_base="1.3", config_path="../conf", config_name="vision")
def main(cfg: DictConfig) -> float | None:
    """Train and test with the composed config; returns ``optimized_metric`` for sweeps."""
    return train(cfg)


if __name__ == "__main__":
    main()
