"""The translation head as the shared commands see it (:class:`core.training.head.Head`): configs
``conf/nlp.yaml`` and ``conf/nlp_eval.yaml``; evaluation reads a translator, encodes with the
checkpoint's tokenizer and ``max_len``, adds the sacreBLEU signatures and returns the BLEU."""

from core.training.head import Head

HEAD = Head(
    package="nlp",
    train_config="nlp",
    eval_config="nlp_eval",
    load_checkpoint="nlp.module.load_translator",
    eval_metric="bleu",
    checkpoint_data="nlp.hooks.checkpoint_data",
    evaluation_reports="nlp.hooks.evaluation_reports",
)
