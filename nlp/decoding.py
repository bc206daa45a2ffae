"""Greedy and beam-search decoding for :class:`nlp.model.Seq2SeqTransformer`.

Both run a whole batch at once and, with ``use_cache``, feed the decoder one new token per step
while the key/value cache keeps the earlier ones (O(t) per step instead of O(t^2)). They return
generated ids [B, L] without ``<s>``: each row ends with ``</s>`` and is padded after it.

Each sentence may generate up to ``max_len`` tokens, by default its own source length plus
``DEFAULT_EXTRA_LEN`` (capped by the model's ``max_len``). Limits per sentence, rather than per
padded batch, make a sentence's translation independent of the batch it is decoded in.
"""

from __future__ import annotations

import torch
from torch import Tensor

from core import DecoderCache
from nlp.model import Seq2SeqTransformer

DEFAULT_EXTRA_LEN = 50


def length_limits(model: Seq2SeqTransformer, src: Tensor, max_len: int | None) -> Tensor:
    """Most tokens each sentence may generate, including ``</s>``: [B]."""
    if max_len is not None:
        if not 0 < max_len <= model.max_len:
            raise ValueError(f"max_len {max_len} must be in 1..{model.max_len} (the model's max_len)")
        return torch.full((src.shape[0],), max_len, dtype=torch.long, device=src.device)
    source_lengths = src.ne(model.pad_id).sum(dim=1)
    return (source_lengths + DEFAULT_EXTRA_LEN).clamp(max=model.max_len)


def next_token_log_probs(
    model: Seq2SeqTransformer,
    tokens: Tensor,
    memory: Tensor,
    src_padding_mask: Tensor,
    cache: DecoderCache | None,
    at_limit: Tensor,
) -> Tensor:
    """Log-probabilities [B, V] of the token after ``tokens`` [B, t].

    ``<pad>`` and ``<s>`` are never generated; rows ``at_limit`` may only end (``</s>``).
    """
    step_input = tokens if cache is None else tokens[:, -1:]
    logits = model.decode(step_input, memory, src_padding_mask, cache=cache)[:, -1].float()  # (B, V)
    log_probs = logits.log_softmax(dim=-1)
    log_probs[:, [model.pad_id, model.bos_id]] = float("-inf")
    # At the limit only </s> stays possible, still at its own probability, so the score of a
    # cut-off hypothesis is not inflated.
    forced_end = torch.full_like(log_probs, float("-inf"))
    forced_end[:, model.eos_id] = log_probs[:, model.eos_id]
    return torch.where(at_limit[:, None], forced_end, log_probs)


def start_tokens(model: Seq2SeqTransformer, rows: int, device: torch.device) -> Tensor:
    """A [rows, 1] column of ``<s>``: the decoder input of the first step."""
    return torch.full((rows, 1), model.bos_id, dtype=torch.long, device=device)


@torch.no_grad()
def greedy_decode(
    model: Seq2SeqTransformer,
    src: Tensor,
    max_len: int | None = None,
    use_cache: bool = True,
) -> Tensor:
    """Pick the most probable token at each step until every sentence has produced ``</s>``.

    Args:
        model: the translation model (put it in eval mode first).
        src: source ids [B, S], right-padded with the model's ``pad_id``.
        max_len: most generated tokens per sentence (default: source length + 50).
        use_cache: incremental decoding with the key/value cache.

    Returns:
        Generated ids [B, L] (no ``<s>``), ``</s>``-terminated, padded after it.
    """
    limits = length_limits(model, src, max_len)
    memory, src_padding_mask = model.encode(src)
    cache = model.new_cache() if use_cache else None
    tokens = start_tokens(model, src.shape[0], src.device)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for step in range(int(limits.max())):
        log_probs = next_token_log_probs(model, tokens, memory, src_padding_mask, cache, step + 1 >= limits)
        next_token = log_probs.argmax(dim=-1).masked_fill(finished, model.pad_id)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        finished |= next_token == model.eos_id
        if finished.all():
            break
    return tokens[:, 1:]


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """GNMT's length normalization (Wu et al. 2016, Eq. 14): ``lp(Y) = ((5 + |Y|) / 6)^alpha``."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(
    model: Seq2SeqTransformer,
    src: Tensor,
    beam_size: int = 4,
    length_penalty: float = 0.6,
    max_len: int | None = None,
    use_cache: bool = True,
) -> Tensor:
    """Beam search with GNMT length normalization, as in the paper (beam 4, alpha 0.6).

    The beams of all sentences are folded into one batch of ``B * beam_size`` rows. Each step
    scores every continuation of every live beam and takes the ``2 * beam_size`` best of each
    sentence: those ending in ``</s>`` among the top ``beam_size`` become finished hypotheses
    (scored ``log P / lp(length)``), and the best ``beam_size`` others stay live, with the
    key/value cache reordered to follow them. A sentence is done when it has ``beam_size``
    finished hypotheses (the fairseq criterion); the search stops when all are.

    Args:
        model: the translation model (put it in eval mode first).
        src: source ids [B, S], right-padded with the model's ``pad_id``.
        beam_size: hypotheses kept per sentence; 1 is greedy decoding.
        length_penalty: alpha of :func:`gnmt_length_penalty`; 0 ranks by raw log-probability.
        max_len: most generated tokens per sentence (default: source length + 50).
        use_cache: incremental decoding with the key/value cache.

    Returns:
        The best hypothesis of each sentence [B, L] (no ``<s>``), ``</s>``-terminated, padded.
    """
    if beam_size < 1:
        raise ValueError(f"beam_size must be at least 1, got {beam_size}")
    batch, device = src.shape[0], src.device
    limits = length_limits(model, src, max_len).repeat_interleave(beam_size)  # (B * K,)
    memory, src_padding_mask = model.encode(src)
    memory = memory.repeat_interleave(beam_size, dim=0)  # (B * K, S, dim)
    src_padding_mask = src_padding_mask.repeat_interleave(beam_size, dim=0)  # (B * K, S)
    cache = model.new_cache() if use_cache else None
    tokens = start_tokens(model, batch * beam_size, device)
    # All beams start identical; only the first may expand at step 0, or the beam would fill
    # with copies of one hypothesis.
    scores = torch.full((batch, beam_size), float("-inf"), device=device)
    scores[:, 0] = 0.0
    finished: list[list[tuple[float, Tensor]]] = [[] for _ in range(batch)]
    done = [False] * batch
    beam_offsets = (torch.arange(batch, device=device) * beam_size)[:, None]  # (B, 1)
    for step in range(int(limits.max())):
        log_probs = next_token_log_probs(model, tokens, memory, src_padding_mask, cache, step + 1 >= limits)
        vocab = log_probs.shape[-1]
        candidates = (scores.view(-1, 1) + log_probs).view(batch, beam_size * vocab)  # (B, K * V)
        top_scores, top_index = candidates.topk(2 * beam_size, dim=1)  # (B, 2K)
        top_beam, top_token = top_index // vocab, top_index % vocab
        ends = top_token == model.eos_id
        for sentence, rank in (ends[:, :beam_size] & top_scores[:, :beam_size].isfinite()).nonzero().tolist():
            if done[sentence]:
                continue
            row = sentence * beam_size + int(top_beam[sentence, rank])
            normalized = float(top_scores[sentence, rank]) / gnmt_length_penalty(step + 1, length_penalty)
            finished[sentence].append((normalized, torch.cat([tokens[row, 1:], top_token[sentence, rank, None]])))
            done[sentence] = len(finished[sentence]) >= beam_size
        if all(done):
            break
        # Live beams: the best beam_size candidates that do not end (a stable sort keeps rank order).
        keep = ends.int().sort(dim=1, stable=True).indices[:, :beam_size]  # (B, K)
        scores = top_scores.gather(1, keep)
        rows = (beam_offsets + top_beam.gather(1, keep)).view(-1)  # (B * K,)
        tokens = torch.cat([tokens.index_select(0, rows), top_token.gather(1, keep).view(-1, 1)], dim=1)
        if cache is not None:
            cache.reorder(rows)
    best = [max(hypotheses, key=lambda hypothesis: hypothesis[0])[1] for hypotheses in finished]
    output = torch.full((batch, max(map(len, best))), model.pad_id, dtype=torch.long, device=device)
    for sentence, hypothesis in enumerate(best):
        output[sentence, : len(hypothesis)] = hypothesis
    return output
