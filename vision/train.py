"""``python -m vision.train [overrides]``: train a Vision Transformer (config ``conf/vision.yaml``).

Writes checkpoints and ``metrics.json`` to the Hydra run directory; returns ``optimized_metric``
for sweeps (:func:`core.training.commands.apps.training_app`).
"""

from core.training.commands.apps import training_app
from vision.head import HEAD

main = training_app(HEAD)

if __name__ == "__main__":
    main()
