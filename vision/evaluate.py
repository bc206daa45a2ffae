"""``python -m vision.evaluate ckpt_path=CKPT [data=...] [split=test|val|train]``: score a trained Vision
Transformer without training (config ``conf/vision_eval.yaml``).

Writes ``metrics.json`` in the run directory (``{split}/acc``, ``{split}/acc5``, ``{split}/loss``
and each class's accuracy ``{split}/class_acc/<name>``) and ``confusion_matrix.png``. Images are
preprocessed with the checkpoint's evaluation data config (size, interpolation, mean, std), the
data chooses which images; without ``data=`` the training run's data is used.
"""

from __future__ import annotations

from omegaconf import DictConfig

from core.training.hydra_app import hydra_app


@hydra_app("vision_eval")
def main(cfg: DictConfig) -> float:
    """Evaluate the checkpoint; returns the split's top-1 accuracy (for sweeps)."""
    from vision.analysis.confusion import evaluate_classifier  # Lightning and the model load after the config is read

    return float(evaluate_classifier(cfg)[f"{cfg.split}/acc"])


if __name__ == "__main__":
    main()
