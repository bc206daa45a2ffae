"""Translation head: the encoder-decoder Transformer of "Attention Is All You Need".

``data`` (corpora, the joint byte-level BPE tokenizer, token-budget batches, the datamodule) ->
``model`` (``Seq2SeqTransformer`` on core blocks) -> ``decoding`` (greedy, beam search) ->
``module`` (Lightning training, BLEU) -> the commands ``train``, ``evaluate``, ``translate``,
``average`` and ``export``; ``analysis`` holds what they show (scores, scores by length,
alignments), ``export`` the checkpoint as a CTranslate2 model or a safetensors directory, which ``translate``
also runs.
``data.toy_corpus`` holds the worked example's three sentence pairs, which ``walkthrough`` traces
through every block.
"""
