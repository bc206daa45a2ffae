"""Export: a trained translator as a CTranslate2 model or as safetensors files, and the
``python -m nlp.export`` command (:mod:`~nlp.export.command`).

:mod:`~nlp.export.spec` maps :class:`nlp.model.Seq2SeqTransformer` onto a
``ctranslate2.specs.TransformerSpec`` (as ``ctranslate2.converters.fairseq`` does for fairseq
models); :mod:`~nlp.export.writer` writes the model directory with its tokenizer and decoding
settings, checked against the PyTorch model; :mod:`~nlp.export.directory` says what the
directory holds and reads it back; :mod:`~nlp.export.translator` translates with it as
:meth:`nlp.module.TranslationModule.translate` does. ``python -m nlp.export`` writes the
directory, ``python -m nlp.translate DIR`` runs it; ``ctranslate2`` is the optional extra
``pip install -e ".[ctranslate2]"``. :mod:`~nlp.export.safetensors_files` writes and reads the
other format, ``model.safetensors`` + ``config.json`` + ``tokenizer.json``, the way to share a
model (``nlp.module.load_translator`` reads it).
"""

from nlp.export.command import main

__all__ = ["main"]
