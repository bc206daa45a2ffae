"""The encoder-decoder Transformer of "Attention Is All You Need" (Figure 1) for translation."""

from __future__ import annotations

import math

from torch import Tensor, nn

import core


class Seq2SeqTransformer(nn.Module):
    """Figure 1: source embedding -> encoder; target embedding -> decoder attending to the
    encoder output -> linear -> softmax over the target vocabulary.

    Embeddings are multiplied by sqrt(d_model) and summed with the sinusoidal positional
    encoding (Sections 3.4 and 3.5). The pre-softmax projection shares its weight with the target
    embedding, and with ``share_embeddings`` the source embedding too (Section 3.4, for a joint
    source+target vocabulary).

    The defaults are the paper's base model, the ``transformer_base`` preset
    (``conf/model/transformer_base.yaml``).

    Args:
        src_vocab_size: source vocabulary size.
        tgt_vocab_size: target vocabulary size.
        dim: model width d_model.
        num_heads: attention heads h.
        encoder_depth: encoder layers N.
        decoder_depth: decoder layers N.
        ffn_dim: feed-forward inner width d_ff.
        dropout: P_drop on embeddings and every sublayer output.
        attn_dropout: dropout on attention weights.
        activation_dropout: dropout after the feed-forward activation; None: ``dropout`` (timm's
            ``Mlp``), 0: the paper's Section 5.4 and fairseq's default.
        word_dropout: probability of dropping a token's whole embedding, source and target
            (:class:`core.WordDropout`; 0 = off).
        activation: feed-forward activation, ``relu`` (the paper) or ``gelu``.
        norm_first: pre-norm layers (stabler for deep or high-lr training) instead of the paper's
            post-norm.
        share_embeddings: one embedding matrix for source and target (needs equal vocabularies).
        max_len: longest source or target sequence, in tokens.
        pad_id: id of ``<pad>``; its embedding starts at zero and gets no gradient from lookups
            (with the output projection tied, the projection's gradient still moves it), and it is
            masked out of attention.
        bos_id: id of ``<s>``, which starts every target.
        eos_id: id of ``</s>``, which ends every source and target.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        dim: int = 512,
        num_heads: int = 8,
        encoder_depth: int = 6,
        decoder_depth: int = 6,
        ffn_dim: int = 2048,
        dropout: float = 0.1,
        attn_dropout: float = 0.0,
        activation_dropout: float | None = None,
        word_dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        share_embeddings: bool = True,
        max_len: int = 1024,
        pad_id: int = 0,
        bos_id: int = 1,
        eos_id: int = 2,
    ) -> None:
        super().__init__()
        if share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError(
                f"share_embeddings needs one vocabulary, got src_vocab_size {src_vocab_size} != "
                f"tgt_vocab_size {tgt_vocab_size}; use a joint tokenizer or share_embeddings=false"
            )
        self.dim = dim
        self.max_len = max_len
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.src_embed = nn.Embedding(src_vocab_size, dim, padding_idx=pad_id)
        self.tgt_embed = self.src_embed if share_embeddings else nn.Embedding(tgt_vocab_size, dim, padding_idx=pad_id)
        self.word_dropout = core.WordDropout(word_dropout)
        self.pos_encoding = core.SinusoidalPositionalEncoding(dim, max_len, dropout)
        layer_kwargs = dict(
            ffn_dim=ffn_dim, dropout=dropout, attn_dropout=attn_dropout, activation_dropout=activation_dropout, activation=activation
        )
        self.encoder = core.Encoder(dim, encoder_depth, num_heads, norm_first=norm_first, **layer_kwargs)
        self.decoder = core.Decoder(dim, decoder_depth, num_heads, norm_first=norm_first, **layer_kwargs)
        self.output = nn.Linear(dim, tgt_vocab_size, bias=False)
        self.reset_parameters()
        self.output.weight = self.tgt_embed.weight

    def reset_parameters(self) -> None:
        """Xavier-uniform linear layers (as the Annotated Transformer); embeddings N(0, d^-1/2) so
        that after the sqrt(d) scaling they have unit variance (as fairseq)."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        for embedding in {self.src_embed, self.tgt_embed}:
            nn.init.normal_(embedding.weight, std=self.dim**-0.5)
            nn.init.zeros_(embedding.weight[self.pad_id])

    def new_cache(self) -> core.DecoderCache:
        """An empty key/value cache for incremental decoding with :meth:`decode`."""
        return self.decoder.new_cache()

    def embed(self, embedding: nn.Embedding, tokens: Tensor, offset: int = 0) -> Tensor:
        """Section 3.4-3.5: ``Embedding(tokens) * sqrt(d) + PE``, then dropout; in training, word
        dropout first drops whole token embeddings."""
        if tokens.dim() != 2 or tokens.is_floating_point():
            raise ValueError(f"token ids must be an integer tensor [batch, length], got {tokens.dtype} {tuple(tokens.shape)}")
        return self.pos_encoding(self.word_dropout(embedding(tokens) * math.sqrt(self.dim)), offset=offset)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """Source ids [B, S] -> (memory [B, S, dim], source padding mask [B, S], True = pad)."""
        src_padding_mask = core.padding_mask_from_ids(src, self.pad_id)
        memory = self.encoder(self.embed(self.src_embed, src), key_padding_mask=src_padding_mask)
        return memory, src_padding_mask

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_padding_mask: Tensor | None = None,
        cache: core.DecoderCache | None = None,
        predicted: Tensor | None = None,
    ) -> Tensor:
        """Target ids [B, T] -> next-token logits [B, T, tgt_vocab].

        With a ``cache``, ``tgt`` holds only the positions not decoded yet (usually one), and the
        cache keeps the keys and values of the earlier ones. Right padding of ``tgt`` needs no
        mask: the causal mask already hides later positions from every real token.
        ``predicted`` (bool [B, T]) projects only those positions to the vocabulary: the rows of
        the logits [N, tgt_vocab] in row-major order.
        """
        offset = 0 if cache is None else cache.length
        x = self.embed(self.tgt_embed, tgt, offset=offset)
        x = self.decoder(x, memory, memory_key_padding_mask=src_padding_mask, cache=cache)
        return self.output(x if predicted is None else x[predicted])  # (B, T, dim) or (N, dim) -> logits

    def forward(self, src: Tensor, tgt: Tensor, predicted: Tensor | None = None) -> Tensor:
        """Teacher forcing: source [B, S] and shifted target ``<s> y_1 .. y_n`` [B, T] -> logits
        [B, T, tgt_vocab] predicting ``y_1 .. y_n </s>``.

        ``predicted`` (bool [B, T]) projects only those positions to the vocabulary (:meth:`decode`):
        training skips the padding's share of the output layer and its softmax, the costliest layer
        at a small width.
        """
        memory, src_padding_mask = self.encode(src)
        return self.decode(tgt, memory, src_padding_mask, predicted=predicted)
