"""Train a translation model: ``python -m nlp.train [data=toy model=transformer_tiny ...]``.

Writes checkpoints (with the tokenizer inside) and ``metrics.json`` to the Hydra run directory.
"""

from __future__ import annotations

from omegaconf import DictConfig

from core.training.hydra_app import hydra_app
from core.training.validation import validate_config


@hydra_app("nlp")
def main(cfg: DictConfig) -> float | None:
    """Train, test and return the optimized metric (``optimized_metric``) of the run."""
    validate_config(cfg)  # a refused value costs no import of Lightning or the head's models
    from core.training.runner import train

    return train(cfg)


if __name__ == "__main__":
    main()
