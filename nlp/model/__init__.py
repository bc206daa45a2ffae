"""The translation model: the encoder-decoder Transformer of Figure 1
(:mod:`~nlp.model.seq2seq`), built from the blocks of :mod:`core`.

``from nlp.model import Seq2SeqTransformer`` is the model's public import path.
"""

from nlp.model.seq2seq import Seq2SeqTransformer

__all__ = ["Seq2SeqTransformer"]
