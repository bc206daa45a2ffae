"""The third head's data: labelled sentences (:mod:`~tests.third_head.data.sentences`)."""

from tests.third_head.data.sentences import PAD, SentenceData

__all__ = ["PAD", "SentenceData"]
