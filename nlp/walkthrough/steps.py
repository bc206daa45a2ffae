"""The worked example as a list of named steps: every matrix of one forward pass through the tiny
model, read out of the core modules with forward hooks (Figure 1, Eq. 1 and 2, Section 3.5)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

import core
from nlp.walkthrough.model import START, TinyTransformer, Vocabulary, greedy_words
from nlp.walkthrough.recorder import ActivationRecorder

ENCODER_MODULES = [
    "embedding",
    "positional",
    "encoder.attn",
    "encoder.attn.proj",
    "encoder.norm1",
    "encoder.mlp.fc1",
    "encoder.mlp.act",
    "encoder.mlp",
    "encoder.norm2",
]
DECODER_MODULES = [
    "positional",
    "decoder.self_attn",
    "decoder.norm1",
    "decoder.cross_attn",
    "decoder.norm2",
    "decoder.norm3",
    "output",
]


@dataclass
class Step:
    """One step of the walkthrough.

    Attributes:
        name: stable snake_case key in the JSON output.
        title: short heading.
        formula: the equation the value satisfies.
        value: an unrounded tensor, a word, a list of words or pairs.
        rows: labels of a matrix's rows (or of a vector's entries).
        columns: labels of a matrix's columns.
        note: a sentence or two on what the step shows.
        text: how to print a value that is not a matrix (the corpus, the greedy loop).
        transpose: print one column per row label, for matrices as wide as the vocabulary.
    """

    name: str
    title: str
    formula: str
    value: Any
    rows: list[str] | None = None
    columns: list[str] | None = None
    note: str = ""
    text: str | None = None
    transpose: bool = False

    def to_json(self) -> dict[str, Any]:
        """The step as plain JSON types: name, formula and unrounded value."""
        value = self.value.tolist() if isinstance(self.value, Tensor) else self.value
        return {"name": self.name, "formula": self.formula, "value": value}


def indices(count: int) -> list[str]:
    """Labels ``0 .. count-1`` of a matrix's dimensions."""
    return [str(i) for i in range(count)]


@torch.no_grad()
def trace(model: TinyTransformer, vocab: Vocabulary, pairs: list[tuple[str, str]]) -> list[Step]:
    """All steps for the first pair of ``pairs``: the encoder on its source, the decoder on
    ``<start>`` + its target (teacher forcing), the output distribution, then greedy decoding."""
    source_text, target_text = pairs[0]
    source_words = source_text.split()
    decoder_words = [START, *target_text.split()]
    source = torch.tensor([vocab.encode(source_text)])
    decoder_ids = torch.tensor([[vocab.start_id, *vocab.encode(target_text)]])
    with ActivationRecorder(model, ENCODER_MODULES) as encoder:
        memory = model.encode(source)
    with ActivationRecorder(model, DECODER_MODULES) as decoder:
        model.decode(decoder_ids, memory)
    return [
        *corpus_steps(vocab, pairs, source_words, source),
        *embedding_steps(model, encoder, source_words),
        *projection_steps(model, encoder, source_words),
        *single_head_steps(model, encoder, source_words),
        *multi_head_steps(model, encoder, source_words),
        *add_norm_steps(model, encoder, source_words),
        *feed_forward_steps(model, encoder, source_words),
        *decoder_steps(model, decoder, decoder_words, decoder_ids, source_words),
        *output_steps(vocab, decoder, decoder_words),
        greedy_step(model, vocab, source, len(source_words)),
    ]


def corpus_steps(
    vocab: Vocabulary, pairs: list[tuple[str, str]], words: list[str], ids: Tensor
) -> list[Step]:
    """Steps 1-4: the corpus, the source tokens, the vocabulary and the source word ids."""
    listing = "\n".join(f"{i}. {src}  ->  {tgt}" for i, (src, tgt) in enumerate(pairs, 1))
    numbered = [f"{i:>2} {word:<11}" for i, word in enumerate(vocab.words)]
    table = "\n".join("".join(numbered[i : i + 6]).rstrip() for i in range(0, len(numbered), 6))
    return [
        Step("corpus", "Corpus", "(source, target) sentence pairs", [list(p) for p in pairs], text=listing),
        Step(
            "tokens",
            "Tokens of the source sentence",
            "split on whitespace",
            words,
            text=" | ".join(words),
            note="The encoder reads the first source sentence; the decoder learns its target.",
        ),
        Step(
            "vocabulary",
            "Vocabulary",
            f"special tokens + every corpus word once, |V| = {len(vocab)}",
            vocab.words,
            text=table,
        ),
        Step("word_ids", "Word ids", "id = position of the word in the vocabulary", ids[0], columns=words),
    ]


def embedding_steps(model: TinyTransformer, rec: ActivationRecorder, words: list[str]) -> list[Step]:
    """Word embeddings X, the sinusoidal encoding PE (Section 3.5) and the encoder input X + PE."""
    dim = model.embedding.embedding_dim
    embeddings = rec.outputs["embedding"][0]
    table = model.positional.table[: len(words)]
    return [
        Step(
            "embeddings",
            "Word embeddings",
            f"X = E[id], E in R^(|V| x {dim})",
            embeddings,
            words,
            indices(dim),
            note="Rows of the embedding matrix, seeded uniform in [0, 1) before training.",
        ),
        Step(
            "positional_encoding",
            "Positional encoding",
            f"PE(pos, 2i) = sin(pos / 10000^(2i/{dim})),  PE(pos, 2i+1) = cos(pos / 10000^(2i/{dim}))",
            table,
            [f"{pos} {word}" for pos, word in enumerate(words)],
            indices(dim),
            note="Section 3.5; position 0 is [0, 1, 0, 1, ...] since sin 0 = 0 and cos 0 = 1.",
        ),
        Step(
            "encoder_input",
            "Encoder input",
            "X + PE",
            rec.outputs["positional"][0],
            words,
            indices(dim),
            note="The paper (Section 3.4) also multiplies the embeddings by sqrt(d_model); "
            "this example adds them unscaled.",
        ),
    ]


def head_one_weights(attn: core.MultiHeadAttention) -> tuple[Tensor, Tensor, Tensor]:
    """W^Q_1, W^K_1, W^V_1, each [dim, d_k], read from the fused ``qkv`` projection.

    ``qkv`` stacks [W^Q; W^K; W^V] as rows, head after head inside each block, so head 1 is the
    first d_k rows of each block; transposed to the ``x W`` convention of the equations.
    """
    blocks = attn.qkv.weight.view(3, attn.num_heads, attn.head_dim, -1)  # (3, H, d_k, dim)
    return blocks[0, 0].T, blocks[1, 0].T, blocks[2, 0].T


def projection_steps(model: TinyTransformer, rec: ActivationRecorder, words: list[str]) -> list[Step]:
    """Head 1's projection matrices W^Q, W^K, W^V and the queries, keys and values they give."""
    attn = model.encoder.attn
    heads, d_k, dim = attn.num_heads, attn.head_dim, model.embedding.embedding_dim
    query, key, value = attn.project_qkv(rec.inputs["encoder.attn"])  # 3 x (1, H, S, d_k)
    w_query, w_key, w_value = head_one_weights(attn)
    note = (
        f"Single-head attention, followed on head 1 of the encoder layer's {heads} heads with its "
        "own W^Q_1, W^K_1, W^V_1, so these numbers flow on into the layer's output."
    )
    shape = f"in R^({dim} x {d_k})"
    return [
        Step("w_query", "Query weights, head 1", f"W^Q_1 {shape}", w_query, indices(dim), indices(d_k), note=note),
        Step("w_key", "Key weights, head 1", f"W^K_1 {shape}", w_key, indices(dim), indices(d_k)),
        Step("w_value", "Value weights, head 1", f"W^V_1 {shape}", w_value, indices(dim), indices(d_k)),
        Step("query", "Queries Q", "Q = (X + PE) W^Q_1", query[0, 0], words, indices(d_k)),
        Step("key", "Keys K", "K = (X + PE) W^K_1", key[0, 0], words, indices(d_k)),
        Step("value", "Values V", "V = (X + PE) W^V_1", value[0, 0], words, indices(d_k)),
    ]


def single_head_steps(model: TinyTransformer, rec: ActivationRecorder, words: list[str]) -> list[Step]:
    """Eq. 1 for head 1: scores QK^T, scaled by sqrt(d_k), softmax weights and their sum of values."""
    attn = model.encoder.attn
    query, key, _ = attn.project_qkv(rec.inputs["encoder.attn"])  # 3 x (1, H, S, d_k)
    scores = core.attention_scores(query, key)[0, 0]  # (S, S)
    return [
        Step(
            "scores",
            "Scores",
            "Q K^T",
            scores,
            words,
            words,
            note="Row i: how well word i's query matches every word's key.",
        ),
        Step(
            "scaled_scores",
            "Scaled scores",
            f"Q K^T / sqrt(d_k),  d_k = {attn.head_dim}",
            scores * attn.scale,
            words,
            words,
            note=f"Eq. 1 divides by sqrt(d_k) = {attn.head_dim**0.5:g}; the hand-worked example divided "
            "by its embedding width, 6, instead.",
        ),
        Step(
            "attention_weights",
            "Attention weights (softmax)",
            "softmax(Q K^T / sqrt(d_k)), row by row",
            rec.weights["encoder.attn"][0, 0],
            words,
            words,
            note="Each row sums to 1: how much each word takes from every word.",
        ),
        Step(
            "attention_output",
            "Single-head output",
            "head_1 = softmax(Q K^T / sqrt(d_k)) V",
            rec.inputs["encoder.attn.proj"][0, :, : attn.head_dim],
            words,
            indices(attn.head_dim),
        ),
    ]


def multi_head_steps(model: TinyTransformer, rec: ActivationRecorder, words: list[str]) -> list[Step]:
    """Multi-head attention (Section 3.2.2): every head's weights, their concatenation, W^O and the output."""
    attn = model.encoder.attn
    heads, d_k, dim = attn.num_heads, attn.head_dim, model.embedding.embedding_dim
    head_columns = [f"h{h + 1}.{i}" for h in range(heads) for i in range(d_k)]
    return [
        Step(
            "attention_weights_all_heads",
            f"Attention weights, all heads (h = {heads})",
            "head_i = softmax(Q_i K_i^T / sqrt(d_k)) V_i,  Q_i = (X + PE) W^Q_i, ...",
            rec.weights["encoder.attn"][0],
            words,
            words,
            note="Each head has its own W^Q_i, W^K_i, W^V_i, so it attends differently.",
        ),
        Step(
            "heads_concat",
            "All heads concatenated",
            "Concat(head_1, ..., head_h)",
            rec.inputs["encoder.attn.proj"][0],
            words,
            head_columns,
        ),
        Step(
            "w_output",
            "Output projection weights",
            f"W^O in R^({heads * d_k} x {dim})",
            attn.proj.weight.T,
            head_columns,
            indices(dim),
        ),
        Step(
            "multi_head_output",
            "Multi-head attention output",
            "MultiHead(X) = Concat(head_1, ..., head_h) W^O",
            rec.outputs["encoder.attn"][0],
            words,
            indices(dim),
        ),
    ]


def add_norm_steps(model: TinyTransformer, rec: ActivationRecorder, words: list[str]) -> list[Step]:
    """The first Add & Norm of the encoder: residual sum, its row mean and std, LayerNorm."""
    dim, norm = model.embedding.embedding_dim, model.encoder.norm1
    residual = rec.inputs["encoder.norm1"][0]
    return [
        Step(
            "residual_1",
            "Add: residual connection",
            "x + MultiHead(x),  x = X + PE",
            residual,
            words,
            indices(dim),
        ),
        Step("residual_1_mean", "Row means", "mu = mean_j (x + MultiHead(x))_j", residual.mean(-1), words),
        Step(
            "residual_1_std",
            "Row standard deviations",
            "sigma = sqrt(mean_j ((x + MultiHead(x))_j - mu)^2)",
            residual.std(-1, correction=0),
            words,
        ),
        Step(
            "add_norm_1",
            "Add & Norm",
            "LayerNorm(x + MultiHead(x)) = gamma * (x + MultiHead(x) - mu) / sqrt(sigma^2 + eps) + beta,"
            f"  eps = {norm.eps:g}",
            rec.outputs["encoder.norm1"][0],
            words,
            indices(dim),
            note=norm_note(norm),
        ),
    ]


def norm_note(norm: torch.nn.LayerNorm) -> str:
    """Say what the LayerNorm's gain and bias are, which the formula needs."""
    if bool((norm.weight == 1).all()) and bool((norm.bias == 0).all()):
        return "gamma = 1 and beta = 0 (LayerNorm's initial values): each row gets mean 0 and std 1."
    gamma = ", ".join(f"{v:.3f}" for v in norm.weight.tolist())
    beta = ", ".join(f"{v:.3f}" for v in norm.bias.tolist())
    return f"Learned gamma = [{gamma}], beta = [{beta}]."


def feed_forward_steps(model: TinyTransformer, rec: ActivationRecorder, words: list[str]) -> list[Step]:
    """The position-wise feed-forward network (Eq. 2 of Section 3.3) and the second Add & Norm."""
    dim, ffn_dim = model.embedding.embedding_dim, model.encoder.mlp.fc1.out_features
    return [
        Step(
            "ffn_linear",
            "Feed-forward: linear",
            f"x W_1,  W_1 in R^({dim} x {ffn_dim}),  x = Add&Norm output",
            rec.outputs["encoder.mlp.fc1"][0],
            words,
            indices(ffn_dim),
        ),
        Step(
            "ffn_relu",
            "Feed-forward: ReLU",
            "max(0, x W_1)",
            rec.outputs["encoder.mlp.act"][0],
            words,
            indices(ffn_dim),
            note="Negative entries become 0.",
        ),
        Step(
            "ffn_output",
            "Feed-forward: second linear",
            f"FFN(x) = max(0, x W_1) W_2,  W_2 in R^({ffn_dim} x {dim})  (Eq. 2)",
            rec.outputs["encoder.mlp"][0],
            words,
            indices(dim),
        ),
        Step(
            "add_norm_2",
            "Add & Norm (encoder output)",
            "LayerNorm(x + FFN(x))",
            rec.outputs["encoder.norm2"][0],
            words,
            indices(dim),
            note="The encoder's output: the memory every decoder position attends to. "
            + norm_note(model.encoder.norm2),
        ),
    ]


def decoder_steps(
    model: TinyTransformer,
    rec: ActivationRecorder,
    words: list[str],
    ids: Tensor,
    source_words: list[str],
) -> list[Step]:
    """The decoder layer: its tokens, ids and input, masked self-attention, cross-attention, each
    Add & Norm and its output."""
    dim = model.embedding.embedding_dim
    return [
        Step(
            "decoder_tokens",
            "Decoder input words",
            "<start> + target, shifted right by one",
            words,
            text=" | ".join(words),
            note="Teacher forcing: at position t the decoder sees the target words before t.",
        ),
        Step("decoder_ids", "Decoder word ids", "id = position in the vocabulary", ids[0], columns=words),
        Step(
            "decoder_input",
            "Decoder input",
            "E[id] + PE",
            rec.outputs["positional"][0],
            words,
            indices(dim),
        ),
        Step(
            "decoder_self_attention_weights",
            "Masked self-attention weights",
            "softmax(Q K^T / sqrt(d_k) + M),  M_ij = -inf for j > i",
            rec.weights["decoder.self_attn"][0],
            words,
            words,
            note="Future positions get weight exactly 0: a word cannot look at the words after it.",
        ),
        Step(
            "decoder_add_norm_1",
            "Add & Norm after masked self-attention",
            "LayerNorm(y + MaskedMultiHead(y)),  y = decoder input",
            rec.outputs["decoder.norm1"][0],
            words,
            indices(dim),
        ),
        Step(
            "cross_attention_weights",
            "Encoder-decoder attention weights",
            "softmax(Q_dec K_enc^T / sqrt(d_k)),  Q from the decoder, K and V from the encoder output",
            rec.weights["decoder.cross_attn"][0],
            words,
            source_words,
            note="Rows: decoder positions; columns: source words.",
        ),
        Step(
            "decoder_add_norm_2",
            "Add & Norm after encoder-decoder attention",
            "LayerNorm(y + MultiHead(y, memory, memory))",
            rec.outputs["decoder.norm2"][0],
            words,
            indices(dim),
        ),
        Step(
            "decoder_output",
            "Decoder output (feed-forward, Add & Norm)",
            "LayerNorm(y + FFN(y))",
            rec.outputs["decoder.norm3"][0],
            words,
            indices(dim),
        ),
    ]


def output_steps(vocab: Vocabulary, rec: ActivationRecorder, words: list[str]) -> list[Step]:
    """The final Linear and softmax: logits, probabilities and the predicted next words."""
    logits = rec.outputs["output"][0]  # (T, V)
    probabilities = logits.softmax(-1)
    predicted = [vocab.words[i] for i in probabilities.argmax(-1).tolist()]
    return [
        Step(
            "logits",
            "Logits",
            "decoder output W_vocab,  W_vocab in R^(d_model x |V|)",
            logits,
            words,
            vocab.words,
            note="One column per decoder position, one row per vocabulary word.",
            transpose=True,
        ),
        Step(
            "probabilities",
            "Probabilities",
            "softmax(logits) over the vocabulary",
            probabilities,
            words,
            vocab.words,
            transpose=True,
        ),
        Step(
            "predicted_words",
            "Most likely next word at each position",
            "argmax_w P(w | words so far, source)",
            predicted,
            text="\n".join(f"after {given:<8} -> {word}" for given, word in zip(words, predicted)),
        ),
        Step(
            "predicted_word",
            "Predicted first word",
            "argmax_w P(w | <start>, source)",
            predicted[0],
            text=f"{predicted[0]}  (p = {probabilities[0].max():.3f})",
        ),
    ]


def greedy_step(model: TinyTransformer, vocab: Vocabulary, source: Tensor, source_len: int) -> Step:
    """Greedy decoding of the source, each chosen word with its probability."""
    chosen = greedy_words(model, vocab, source, max_len=2 * source_len)
    decoded = [START]
    lines = []
    for t, (word, probability) in enumerate(chosen, 1):
        lines.append(f"{t:>2}. {' '.join(decoded)}  ->  {word}  (p = {probability:.3f})")
        decoded.append(word)
    words = [word for word, _ in chosen]
    return Step(
        "greedy_output",
        "Greedy decoding",
        "y_t = argmax_w P(w | y_<t, source), fed back until <end>",
        words,
        text="\n".join([*lines, f"translation: {' '.join(words)}"]),
        note=f"Stops at <end> or after {2 * source_len} words.",
    )
