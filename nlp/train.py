"""Train a translation model: ``python -m nlp.train [data=toy model=transformer_tiny ...]``.

Writes checkpoints (with the tokenizer inside) and ``metrics.json`` to the Hydra run directory;
returns ``optimized_metric`` for sweeps (:func:`core.training.commands.apps.training_app`).
"""

from core.training.commands.apps import training_app
from nlp.head import HEAD

main = training_app(HEAD)

if __name__ == "__main__":
    main()
