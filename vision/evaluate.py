"""``python -m vision.evaluate ckpt_path=CKPT [data=...] [split=test|val|train]``: score a trained Vision
Transformer without training (config ``conf/vision_eval.yaml``).

Writes ``metrics.json`` in the run directory (``{split}/acc``, ``{split}/acc5``, ``{split}/loss``
and each class's accuracy ``{split}/class_acc/<name>``) and ``confusion_matrix.png``. Images are
preprocessed with the checkpoint's evaluation data config (size, interpolation, mean, std), the
data chooses which images; without ``data=`` the training run's data is used. Returns the
split's top-1 accuracy for sweeps (:func:`core.training.commands.apps.evaluation_app`).
"""

from core.training.commands.apps import evaluation_app
from vision.head import HEAD

main = evaluation_app(HEAD)

if __name__ == "__main__":
    main()
