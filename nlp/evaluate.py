"""``python -m nlp.evaluate ckpt_path=CKPT [data=...] [split=test|val|train]``: score a trained
translation model without training (config ``conf/nlp_eval.yaml``).

Writes ``metrics.json`` in the run directory: ``{split}/bleu`` and ``{split}/chrf`` of the
detokenized beam-search output with their sacreBLEU signatures (``{split}/bleu_signature``,
``{split}/chrf_signature``), ``{split}/loss``, ``{split}/nll``, ``{split}/ppl`` and ``{split}/rep4``. ``module.beam_size``,
``module.length_penalty``, ``module.no_repeat_ngram_size``, ``module.max_decode_len``,
``module.max_len_a`` and ``module.max_len_b`` override the checkpoint's decoding settings. Sentences are encoded with the
checkpoint's tokenizer and ``max_len``; without ``data=`` the training run's data is used.
Returns the split's BLEU for sweeps (:func:`core.training.commands.apps.evaluation_app`).
"""

from core.training.commands.apps import evaluation_app
from nlp.head import HEAD

main = evaluation_app(HEAD)

if __name__ == "__main__":
    main()
