"""``python -m vision.train [overrides]``: train a Vision Transformer (config ``conf/vision.yaml``)."""

from __future__ import annotations

from omegaconf import DictConfig

from core.training.hydra_app import hydra_app
from core.training.validation import validate_config


@hydra_app("vision")
def main(cfg: DictConfig) -> float | None:
    """Train and test with the composed config; returns ``optimized_metric`` for sweeps."""
    validate_config(cfg)  # a refused value costs no import of Lightning or the head's models
    from core.training.runner import train

    return train(cfg)


if __name__ == "__main__":
    main()
