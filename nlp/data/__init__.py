"""Parallel text to batches: corpora (:mod:`~nlp.data.corpora`, the gettext catalogs in
:mod:`~nlp.data.gettext`, the worked example's :mod:`~nlp.data.toy_corpus`), the joint BPE
tokenizer (:mod:`~nlp.data.tokenizer`), the encoding rule (:mod:`~nlp.data.encoding`), data
prepared once (:mod:`~nlp.data.prepared`), token-budget batches (:mod:`~nlp.data.batching`,
sized from the budget in :mod:`~nlp.data.batch_size`) and the datamodule
(:mod:`~nlp.data.datamodule`)."""
