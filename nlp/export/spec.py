"""The translation model as a ``ctranslate2.specs.TransformerSpec``: the weights of
:class:`nlp.model.Seq2SeqTransformer` placed where CTranslate2's Transformer reads them, as
``ctranslate2.converters.fairseq`` does for fairseq's models.

How our model maps onto the spec:

- Layers and heads: encoder and decoder depths, ``num_heads`` of the attention modules; d_model,
  d_ff and d_k follow from the weight shapes, as in every CTranslate2 spec.
- Norms: ``pre_norm`` is the layers' ``norm_first``. Pre-norm stacks end in a LayerNorm (our
  ``Stack.norm``, the spec's final ``layer_norm``); post-norm ones have none, and the spec then
  declares none. ``norm1``/``norm2``/``norm3`` of a layer are the LayerNorms of its sublayers in
  order (self-attention, cross-attention, feed-forward), whichever side of the residual they sit.
  Their epsilon is the config's ``layer_norm_epsilon``.
- Attention: our fused ``qkv`` rows are ``[W^Q; W^K; W^V]``, the order of the spec's fused
  self-attention projection; for cross-attention the Q rows are the spec's first projection and
  the K, V rows its fused second one. The scale is CTranslate2's default 1/sqrt(d_k).
- Feed-forward: ``fc1`` -> activation -> ``fc2``; ReLU or GELU (erf), read from the module.
- Embeddings: multiplied by sqrt(d_model) (``scale_embeddings``). Positions: our sinusoidal table
  itself (``PositionEncoderSpec.encodings``), because CTranslate2's built-in sinusoids put all the
  sines before all the cosines and start at position 1, while ours interleave sin/cos (Section
  3.5) and start at 0: row 0 of the table is the first token's, source and target alike, so the
  table goes in unshifted (fairseq's converter drops the rows up to its padding index instead).
- Tied weights: the output projection is the target embedding (no bias), and with
  ``share_embeddings`` the source embedding too; the spec holds them as separate arrays, which
  ``ModelSpec.optimize`` stores once (it aliases equal variables).
- Vocabulary and special tokens: one joint vocabulary, token strings in id order, for both sides;
  ``<unk>``, ``<s>`` (also the decoder's start token) and ``</s>`` are the tokenizer's, and the
  source gets ``</s>`` appended (``add_source_eos``) as :func:`nlp.data.encoding.encode_sources`
  does, so the directory also translates correctly when used by ``ctranslate2`` alone.
"""

from __future__ import annotations

import numpy as np
from ctranslate2.specs import common_spec, transformer_spec
from torch import Tensor, nn

from core import DecoderLayer, EncoderLayer, MultiHeadAttention
from core.stacks import Stack
from core.errors import InputError
from nlp.data.tokenizer import BOS, EOS, UNK, SubwordTokenizer
from nlp.model import Seq2SeqTransformer


def activation(layer: EncoderLayer | DecoderLayer) -> common_spec.Activation:
    """CTranslate2's code for the feed-forward activation of ``layer``."""
    act = layer.mlp.act
    if isinstance(act, nn.ReLU):
        return common_spec.Activation.RELU
    if isinstance(act, nn.GELU):
        return common_spec.Activation.GELU if act.approximate == "none" else common_spec.Activation.GELUTanh
    raise InputError(f"the feed-forward activation {type(act).__name__} has no CTranslate2 equivalent; use relu or gelu")


def array(tensor: Tensor) -> np.ndarray:
    """A float32 copy of ``tensor`` for the spec."""
    return tensor.detach().float().cpu().numpy().copy()


def set_linear(spec: common_spec.LinearSpec, weight: Tensor, bias: Tensor | None) -> None:
    spec.weight = array(weight)
    if bias is not None:
        spec.bias = array(bias)


def set_layer_norm(spec: common_spec.LayerNormSpec, norm: nn.Module) -> None:
    assert isinstance(norm, nn.LayerNorm)
    spec.gamma = array(norm.weight)
    spec.beta = array(norm.bias)


def set_self_attention(spec: object, attention: MultiHeadAttention) -> None:
    """Fused Q, K, V projection, then the output projection."""
    set_linear(spec.linear[0], attention.qkv.weight, attention.qkv.bias)
    set_linear(spec.linear[1], attention.proj.weight, attention.proj.bias)


def set_cross_attention(spec: object, attention: MultiHeadAttention) -> None:
    """Q projection, fused K, V projection, then the output projection."""
    inner, bias = attention.inner_dim, attention.qkv.bias
    set_linear(spec.linear[0], attention.qkv.weight[:inner], None if bias is None else bias[:inner])
    set_linear(spec.linear[1], attention.qkv.weight[inner:], None if bias is None else bias[inner:])
    set_linear(spec.linear[2], attention.proj.weight, attention.proj.bias)


def set_feed_forward(spec: transformer_spec.FeedForwardSpec, layer: EncoderLayer | DecoderLayer, norm: nn.Module) -> None:
    set_layer_norm(spec.layer_norm, norm)
    set_linear(spec.linear_0, layer.mlp.fc1.weight, layer.mlp.fc1.bias)
    set_linear(spec.linear_1, layer.mlp.fc2.weight, layer.mlp.fc2.bias)


def set_inputs(spec: object, embedding: nn.Embedding, positions: np.ndarray) -> None:
    """Token embedding scaled by sqrt(d_model), plus the position table from row 0."""
    embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    embeddings.weight = array(embedding.weight)
    spec.scale_embeddings = True
    spec.position_encodings.encodings = positions


def set_final_norm(spec: object, stack: Stack) -> None:
    """The pre-norm stack's closing LayerNorm (post-norm stacks have none, nor does their spec)."""
    if isinstance(stack.norm, nn.LayerNorm):
        set_layer_norm(spec.layer_norm, stack.norm)


def check_supported(net: Seq2SeqTransformer) -> None:
    """Refuse what the spec cannot express: layers with LayerScale, mixed norm placements, or
    attention heads narrower or wider than d_model / h."""
    layers = [*net.encoder.layers, *net.decoder.layers]
    if len({layer.norm_first for layer in layers}) != 1:
        raise InputError("CTranslate2 needs every layer pre-norm or every layer post-norm; this model mixes them")
    for layer in layers:
        if any(not isinstance(getattr(layer, name), nn.Identity) for name in ("ls1", "ls2")):
            raise InputError("CTranslate2's Transformer has no LayerScale; export a model built without layer_scale")
        attentions = [module for module in layer.modules() if isinstance(module, MultiHeadAttention)]
        if any(attention.inner_dim != net.dim for attention in attentions):
            raise InputError(
                "CTranslate2's Transformer needs num_heads * head_dim == dim; export a model with head_dim = dim / num_heads"
            )


def vocabulary(tokenizer: SubwordTokenizer) -> list[str]:
    """The token strings in id order (byte-level BPE: every token is a distinct printable string)."""
    tokens = [tokenizer.tokenizer.id_to_token(index) for index in range(tokenizer.vocab_size)]
    if None in tokens or len(set(tokens)) != len(tokens):
        raise InputError("the tokenizer's ids are not a dense vocabulary of distinct tokens; it cannot be exported")
    return tokens


def transformer_spec_of(net: Seq2SeqTransformer, tokenizer: SubwordTokenizer) -> transformer_spec.TransformerSpec:
    """The ``TransformerSpec`` holding ``net``'s weights and ``tokenizer``'s vocabulary (see the
    module docstring for the mapping)."""
    check_supported(net)
    encoder_layers, decoder_layers = list(net.encoder.layers), list(net.decoder.layers)
    first = encoder_layers[0]
    spec = transformer_spec.TransformerSpec.from_config(
        (len(encoder_layers), len(decoder_layers)),
        first.attn.num_heads,
        pre_norm=first.norm_first,
        activation=activation(first),
    )
    positions = array(net.pos_encoding.table)  # (max_len, dim): position p is row p
    set_inputs(spec.encoder, net.src_embed, positions)
    set_inputs(spec.decoder, net.tgt_embed, positions)
    for layer_spec, layer in zip(spec.encoder.layer, encoder_layers):
        set_self_attention(layer_spec.self_attention, layer.attn)
        set_layer_norm(layer_spec.self_attention.layer_norm, layer.norm1)
        set_feed_forward(layer_spec.ffn, layer, layer.norm2)
    for layer_spec, layer in zip(spec.decoder.layer, decoder_layers):
        set_self_attention(layer_spec.self_attention, layer.self_attn)
        set_layer_norm(layer_spec.self_attention.layer_norm, layer.norm1)
        set_cross_attention(layer_spec.attention, layer.cross_attn)
        set_layer_norm(layer_spec.attention.layer_norm, layer.norm2)
        set_feed_forward(layer_spec.ffn, layer, layer.norm3)
    set_final_norm(spec.encoder, net.encoder)
    set_final_norm(spec.decoder, net.decoder)
    set_linear(spec.decoder.projection, net.output.weight, net.output.bias)

    tokens = vocabulary(tokenizer)
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    spec.config.layer_norm_epsilon = first.norm1.eps
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = UNK, BOS, EOS
    spec.config.decoder_start_token = BOS
    spec.config.add_source_eos = True
    return spec
