"""The alignment of a real translation: the decoder's cross-attention (encoder-decoder attention,
Section 3.2.3) from each generated subword to the source subwords, as a PNG heatmap.

The sentence is translated first (greedy or beam search); then the chosen translation is fed back
to the decoder in one teacher-forced pass while :func:`core.recorded_attention_weights` records
every layer's cross-attention weights [1, H, T, S]. Row t is the attention of the decoder position
that predicted target subword t, exactly as during incremental decoding (the causal mask makes
the two computations the same). Heads are averaged, as in the alignment plots of Bahdanau et al.
(2015) and fairseq.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import torch
from matplotlib.figure import Figure
from torch import Tensor

from core import recorded_attention_weights
from core.errors import InputError
from core.figures.heatmap import heatmap, save_figure
from nlp.module import TranslationModule
from nlp.data.tokenizer import SubwordTokenizer


@dataclass
class Alignment:
    """Head-averaged cross-attention of one translation."""

    source: list[str]  # source subwords, ``</s>`` last: the columns
    target: list[str]  # generated subwords, ``</s>`` last: the rows
    layers: list[Tensor]  # one [T, S] matrix per decoder layer, rows summing to 1
    translation: str


def subword_labels(tokenizer: SubwordTokenizer, ids: list[int]) -> list[str]:
    """Readable subwords: ``</s>`` for the end token, and a leading ``▁`` where a subword starts a
    new word (the byte-level BPE's leading space)."""
    return ["</s>" if token == tokenizer.eos_id else tokenizer.decode([token]).replace(" ", "▁") for token in ids]


def check_layer(translator: TranslationModule, layer: int | None) -> None:
    """Refuse a decoder layer number (counted from 1) that the model does not have."""
    count = len(translator.net.decoder.layers)
    if layer is not None and not 1 <= layer <= count:
        raise InputError(f"--attention-layer {layer} does not exist: the model has decoder layers 1..{count}")


@torch.no_grad()
def cross_attention(
    translator: TranslationModule, sentence: str, beam_size: int = 1, max_len: int | None = None
) -> Alignment:
    """Translate ``sentence`` and record the cross-attention that produced each target subword."""
    net = translator.net
    source = translator.source_batch([sentence])  # (1, S), ends with </s>
    generated = translator.generate(source, beam_size, max_len)[0].tolist()
    target = generated[: generated.index(net.eos_id) + 1] if net.eos_id in generated else generated
    decoder_input = torch.tensor([[net.bos_id, *target[:-1]]], device=source.device)  # (1, T): <s> y_1 .. y_{T-1}
    with recorded_attention_weights(layer.cross_attn for layer in net.decoder.layers) as weights:
        net(source, decoder_input)
    tokenizer = translator.tokenizer
    return Alignment(
        source=subword_labels(tokenizer, source[0].tolist()),
        target=subword_labels(tokenizer, target),
        layers=[layer[0].mean(dim=0).float().cpu() for layer in weights],  # (H, T, S) -> (T, S)
        translation=tokenizer.decode(target),
    )


def alignment_figure(alignment: Alignment, layer: int | None = None) -> Figure:
    """One heatmap per decoder layer side by side, or only ``layer`` (counted from 1), with source
    subwords along x and target subwords along y."""
    chosen = range(1, len(alignment.layers) + 1) if layer is None else [layer]
    width = max(4.0, 1.6 + 0.42 * len(alignment.source))
    height = max(3.0, 1.4 + 0.34 * len(alignment.target))
    figure = Figure(figsize=(width * len(chosen), height), layout="constrained")
    axes = figure.subplots(1, len(chosen), squeeze=False)[0]
    for axis, index in zip(axes, chosen):
        heatmap(axis, alignment.layers[index - 1], alignment.target, alignment.source, f"decoder layer {index}")
        axis.set_xlabel("source subword")
        axis.set_ylabel("generated subword")
    translation = textwrap.shorten(alignment.translation, width=int(12 * width * len(chosen)), placeholder=" ...")
    figure.suptitle(f"cross-attention, heads averaged: {translation!r}")
    return figure


def draw_alignment(alignment: Alignment, out: Path, layer: int | None = None) -> Path:
    """Write :func:`alignment_figure` to ``out`` as PNG; returns the path."""
    return save_figure(alignment_figure(alignment, layer), out)
