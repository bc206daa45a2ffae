"""The third head's model: a sentence classifier on the core ``Encoder``
(:mod:`~tests.third_head.model.classifier`)."""

from tests.third_head.model.classifier import SentenceClassifier

__all__ = ["SentenceClassifier"]
