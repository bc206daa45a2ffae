"""Speed benchmarks against the implementations users would pick instead.

``python -m benchmarks.vit`` (ours vs timm), ``python -m benchmarks.seq2seq`` (ours vs
``torch.nn.Transformer``) and ``python -m benchmarks.decoding`` (cached vs uncached vs Hugging Face
``generate``) each print one JSON object; ``python -m benchmarks.report`` turns appended results
into the tables of BENCHMARKS.md.
"""
