"""Export: a trained translator as a CTranslate2 model, and the ``python -m nlp.export`` command
(:mod:`~nlp.export.command`).

:mod:`~nlp.export.spec` maps :class:`nlp.model.Seq2SeqTransformer` onto a
``ctranslate2.specs.TransformerSpec`` (as ``ctranslate2.converters.fairseq`` does for fairseq
models); :mod:`~nlp.export.writer` writes the model directory with its tokenizer and decoding
settings, checked against the PyTorch model; :mod:`~nlp.export.directory` says what the
directory holds and reads it back; :mod:`~nlp.export.translator` translates with it as
:meth:`nlp.module.TranslationModule.translate` does. ``python -m nlp.export`` writes the
directory, ``python -m nlp.translate DIR`` runs it; ``ctranslate2`` is the optional extra
``pip install -e ".[ctranslate2]"``.
"""

from nlp.export.command import main

__all__ = ["main"]
