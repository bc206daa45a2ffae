"""The vision head as the shared commands see it (:class:`core.training.head.Head`): configs
``conf/vision.yaml`` and ``conf/vision_eval.yaml``; evaluation reads a classifier, preprocesses
with the checkpoint's data config, draws the confusion matrix and returns the top-1 accuracy."""

from core.training.head import Head

HEAD = Head(
    package="vision",
    train_config="vision",
    eval_config="vision_eval",
    load_checkpoint="vision.module.load_classifier",
    eval_metric="acc",
    checkpoint_data="vision.hooks.checkpoint_data",
    evaluation_reports="vision.hooks.evaluation_reports",
)
