"""The third head as the shared commands see it: configs in ``tests/third_head/conf``."""

from pathlib import Path

from core.training.head import Head

HEAD = Head(
    package="tests.third_head",
    train_config="third",
    eval_config="third_eval",
    load_checkpoint="tests.third_head.module.load_sentence_classifier",
    eval_metric="acc",
    config_path=str(Path(__file__).parent / "conf"),
)
