"""Translation outside PyTorch: a trained checkpoint as a CTranslate2 model.

:mod:`~nlp.runtime.spec` maps :class:`nlp.model.Seq2SeqTransformer` onto a
``ctranslate2.specs.TransformerSpec`` (as ``ctranslate2.converters.fairseq`` does for fairseq
models); :mod:`~nlp.runtime.writer` writes the model directory with its tokenizer and decoding
settings, checked against the PyTorch model; :mod:`~nlp.runtime.directory` says what the
directory holds and reads it back; :mod:`~nlp.runtime.translator` translates with it as
:meth:`nlp.module.TranslationModule.translate` does. ``python -m nlp.export`` writes the
directory, ``python -m nlp.translate DIR`` runs it; ``ctranslate2`` is the optional extra
``pip install -e ".[ctranslate2]"``.
"""
