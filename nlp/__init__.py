"""Translation head: the encoder-decoder Transformer of "Attention Is All You Need".

``tokenizer`` (joint byte-level BPE) -> ``corpora`` / ``datamodule`` / ``batching`` (parallel
text to token-budget batches) -> ``model`` (``Seq2SeqTransformer`` on core blocks) ->
``decoding`` (greedy, beam search) -> ``module`` (Lightning training, BLEU) -> ``train`` and
``translate`` (command lines). ``toy_corpus`` holds the worked example's three sentence pairs, which
``walkthrough`` traces through every block.
"""
