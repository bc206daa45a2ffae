"""``python -m nlp.walkthrough``: the worked example of the Transformer, every matrix of one
forward pass printed step by step, computed by the core blocks that train the real models.

The model is Figure 1 with one encoder and one decoder layer (:class:`~nlp.walkthrough.model.TinyTransformer`,
a word-level :class:`~nlp.walkthrough.model.Vocabulary`) over the three-sentence toy corpus. The
numbers are read from the modules with forward hooks (:mod:`~nlp.walkthrough.recorder`) into named
steps (:mod:`~nlp.walkthrough.steps`), printed as tables (:mod:`~nlp.walkthrough.printing`) and
optionally drawn as heatmaps (:mod:`~nlp.walkthrough.plots`); :mod:`~nlp.walkthrough.cli` is the
command line.
"""
