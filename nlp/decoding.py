"""Greedy and beam-search decoding for :class:`nlp.model.Seq2SeqTransformer`.

Both run a whole batch at once and, with ``use_cache``, feed the decoder one new token per step
while the key/value cache keeps the earlier ones (O(t) per step instead of O(t^2)). They return
generated ids [B, L] without ``<s>``: each row ends with ``</s>`` and is padded after it.

Each sentence may generate up to ``max_len`` tokens, by default ``max_len_a * source_length +
max_len_b`` (fairseq's ``--max-len-a`` / ``--max-len-b``, the source length counting its
``</s>``), capped by the model's ``max_len``. Limits per sentence, rather than per padded batch,
make a sentence's translation independent of the batch it is decoded in.

``no_repeat_ngram_size`` n > 0 forbids any token that would complete an n-gram of subword ids
already generated in the same hypothesis (fairseq's ``--no-repeat-ngram-size``), which cuts the
loops of an undertrained model ("the name of the name of ...").

A target ``prefix`` (subword ids per sentence) is forced: while a sentence's prefix lasts, its one
token is the only choice, and decoding goes on freely after it. The prefix is given, not chosen:
its tokens add nothing to a hypothesis's log-probability and do not count in its length, so a
score is ``log P(continuation | source, prefix) / lp(continuation length)``, ``</s>`` counted
(the length limits count the tokens after the prefix too). Its n-grams do count for blocking.
Right after the prefix, beam search lets only its best candidate end (CTranslate2's rule).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

import torch
from torch import Tensor

from core import DecoderCache
from core.errors import InputError
from nlp.model import Seq2SeqTransformer

DEFAULT_MAX_LEN_A = 1.2
DEFAULT_MAX_LEN_B = 10
FREE = -1  # in a table of forced tokens: no token is forced at this step

Prefix = Sequence[Sequence[int]]  # the forced target ids of each sentence (may be empty)


class Vocabulary(Protocol):
    """What the decoding rules read of a model: its special ids and ``max_len`` (a
    :class:`~nlp.model.Seq2SeqTransformer`, or an exported CTranslate2 model's translator)."""

    pad_id: int
    bos_id: int
    eos_id: int
    max_len: int


class Scored(NamedTuple):
    """A finished hypothesis: its ids (prefix included, ``</s>`` last) and the score it is ranked
    by, ``log P(continuation | source, prefix) / lp(continuation length)`` (GNMT)."""

    tokens: list[int]
    score: float


def length_limits(
    model: Vocabulary,
    src: Tensor,
    max_len: int | None = None,
    max_len_a: float = DEFAULT_MAX_LEN_A,
    max_len_b: int = DEFAULT_MAX_LEN_B,
    prefix_lengths: Sequence[int] | None = None,
) -> Tensor:
    """Most tokens each sentence may generate, including ``</s>``: [B].

    ``max_len`` for every sentence when given, else ``int(max_len_a * source_length + max_len_b)``
    with the source length counted in ids (its ``</s>`` included), capped by the model's ``max_len``;
    a sentence with a prefix of ``prefix_lengths`` tokens may generate that many more (the limit
    counts the tokens after the prefix), still within the model's ``max_len``.
    """
    if max_len is not None:
        if not 0 < max_len <= model.max_len:
            raise InputError(f"max_len {max_len} must be in 1..{model.max_len} (the model's max_len)")
        limits = torch.full((src.shape[0],), max_len, dtype=torch.long, device=src.device)
    elif max_len_a < 0 or max_len_b < 1:
        raise InputError(
            f"max_len_a must be >= 0 and max_len_b >= 1 (limit = a * source length + b), "
            f"got {max_len_a} and {max_len_b}"
        )
    else:
        source_lengths = src.ne(model.pad_id).sum(dim=1).tolist()
        limits = torch.tensor(
            [int(max_len_a * length + max_len_b) for length in source_lengths], dtype=torch.long, device=src.device
        )
    if prefix_lengths is not None:
        limits = limits + torch.tensor(prefix_lengths, dtype=torch.long, device=src.device)
    return limits.clamp(max=model.max_len)


def check_prefix(model: Vocabulary, prefix: Prefix, sentences: int, name: str = "the prefix") -> None:
    """Refuse a prefix that is not one list of ids per sentence, that holds ``<pad>``, ``<s>`` or
    ``</s>``, or that leaves no room for ``</s>`` within the model's ``max_len``; ``name`` is how
    the error names it (``--prefix`` in a command)."""
    if len(prefix) != sentences:
        raise InputError(f"{name} has {len(prefix)} entries for {sentences} sentences; give one per sentence")
    specials = {model.pad_id: "<pad>", model.bos_id: "<s>", model.eos_id: "</s>"}
    for ids in prefix:
        special = next((specials[token] for token in ids if token in specials), None)
        if special is not None:
            raise InputError(
                f"{name} holds the special token {special}; a prefix is text that every translation starts with"
            )
        if len(ids) >= model.max_len:
            raise InputError(
                f"{name} has {len(ids)} subwords, more than the {model.max_len - 1} a translation of this model "
                f"may hold before its </s> (max_len {model.max_len}); give a shorter prefix"
            )


def forced_tokens(model: Vocabulary, prefix: Prefix | None, src: Tensor) -> Tensor:
    """The prefix of each sentence as a table [B, P] (P the longest prefix), :data:`FREE` after a
    shorter one's end; [B, 0] without a prefix."""
    if prefix is None:
        return torch.full((src.shape[0], 0), FREE, dtype=torch.long, device=src.device)
    check_prefix(model, prefix, src.shape[0])
    table = torch.full((src.shape[0], max(map(len, prefix), default=0)), FREE, dtype=torch.long)
    for row, ids in enumerate(prefix):
        table[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return table.to(src.device)


def force(log_probs: Tensor, forced: Tensor) -> Tensor:
    """``log_probs`` [R, V] with each row's ``forced`` token [R] the only choice, at log-probability
    0 (the prefix is given); rows where ``forced`` is :data:`FREE` keep theirs."""
    only = torch.full_like(log_probs, float("-inf"))
    only.scatter_(1, forced.clamp(min=0)[:, None], 0.0)
    return torch.where(forced[:, None] == FREE, log_probs, only)


def step_forced(table: Tensor, step: int) -> Tensor | None:
    """The forced token of each row at ``step`` (:data:`FREE` where none), or None after every prefix."""
    return table[:, step] if step < table.shape[1] else None


def repeated_ngram_bans(generated: Tensor, n: int, vocab: int) -> Tensor:
    """Tokens that would repeat an n-gram of each row: bool [R, vocab] for ``generated`` [R, t].

    A token is banned when the last ``n - 1`` tokens of the row, followed by it, form an n-gram
    that already occurs in the row (for n = 1, every token already generated).
    """
    rows, length = generated.shape
    banned = torch.zeros(rows, vocab + 1, dtype=torch.bool, device=generated.device)
    if length >= n:
        ngrams = generated.unfold(1, n, 1)  # (R, t - n + 1, n)
        current = generated[:, length - n + 1 :]  # (R, n - 1): the prefix of the next n-gram
        matches = (ngrams[..., :-1] == current[:, None, :]).all(dim=-1)  # (R, t - n + 1)
        # Non-matching n-grams write into the spare column ``vocab``, dropped below.
        banned.scatter_(1, torch.where(matches, ngrams[..., -1], vocab), True)
    return banned[:, :vocab]


def next_token_log_probs(
    model: Seq2SeqTransformer,
    tokens: Tensor,
    memory: Tensor,
    src_padding_mask: Tensor,
    cache: DecoderCache | None,
    at_limit: Tensor,
    no_repeat_ngram_size: int = 0,
    forced: Tensor | None = None,
) -> Tensor:
    """Log-probabilities [B, V] of the token after ``tokens`` [B, t] (``<s>`` first).

    ``<pad>`` and ``<s>`` are never generated, nor tokens that repeat an n-gram of size
    ``no_repeat_ngram_size`` (0 = any may); rows ``at_limit`` may only end (``</s>``, which a
    live hypothesis has not generated, so it is never banned); rows with a ``forced`` token [B]
    (:data:`FREE` for none) take it, whatever the bans (:func:`force`). Scores that are not
    numbers (a diverged model) are refused with an :class:`InputError`.
    """
    step_input = tokens if cache is None else tokens[:, -1:]
    logits = model.decode(step_input, memory, src_padding_mask, cache=cache)[:, -1].float()  # (B, V)
    log_probs = logits.log_softmax(dim=-1)
    if log_probs.isnan().any():  # no ranking is possible, and beam search would end with no hypothesis
        raise InputError(
            f"the model gave scores that are not numbers (NaN) at decoding step {tokens.shape[1]}: its weights are not "
            "finite or its outputs overflow; decode with a checkpoint saved before its training diverged, in float32"
        )
    log_probs[:, [model.pad_id, model.bos_id]] = float("-inf")
    if no_repeat_ngram_size > 0:
        bans = repeated_ngram_bans(tokens[:, 1:], no_repeat_ngram_size, log_probs.shape[-1])
        log_probs.masked_fill_(bans, float("-inf"))
    # At the limit only </s> stays possible, still at its own probability, so the score of a
    # cut-off hypothesis is not inflated.
    forced_end = torch.full_like(log_probs, float("-inf"))
    forced_end[:, model.eos_id] = log_probs[:, model.eos_id]
    log_probs = torch.where(at_limit[:, None], forced_end, log_probs)
    return log_probs if forced is None else force(log_probs, forced)


def start_tokens(model: Seq2SeqTransformer, rows: int, device: torch.device) -> Tensor:
    """A [rows, 1] column of ``<s>``: the decoder input of the first step."""
    return torch.full((rows, 1), model.bos_id, dtype=torch.long, device=device)


def check_ngram_size(no_repeat_ngram_size: int) -> None:
    """Refuse a negative n-gram size."""
    if no_repeat_ngram_size < 0:
        raise InputError(f"no_repeat_ngram_size must be 0 (off) or a positive n-gram size, got {no_repeat_ngram_size}")


@torch.no_grad()
def greedy_decode(
    model: Seq2SeqTransformer,
    src: Tensor,
    max_len: int | None = None,
    use_cache: bool = True,
    no_repeat_ngram_size: int = 0,
    max_len_a: float = DEFAULT_MAX_LEN_A,
    max_len_b: int = DEFAULT_MAX_LEN_B,
    prefix: Prefix | None = None,
) -> Tensor:
    """Pick the most probable token at each step until every sentence has produced ``</s>``.

    Args:
        model: the translation model (put it in eval mode first).
        src: source ids [B, S], right-padded with the model's ``pad_id``.
        max_len: most generated tokens per sentence after its prefix (default: ``max_len_a * S_i +
            max_len_b``).
        use_cache: incremental decoding with the key/value cache.
        no_repeat_ngram_size: forbid repeating an n-gram of this size (0 = off).
        max_len_a: the default limit's factor of the source length.
        max_len_b: the default limit's added tokens.
        prefix: target ids each sentence's output starts with (one list per sentence, no special
            tokens); decoding continues freely after it.

    Returns:
        Generated ids [B, L] (no ``<s>``), ``</s>``-terminated, padded after it.
    """
    check_ngram_size(no_repeat_ngram_size)
    table = forced_tokens(model, prefix, src)
    limits = length_limits(model, src, max_len, max_len_a, max_len_b, prefix_lengths(table))
    memory, src_padding_mask = model.encode(src)
    cache = model.new_cache() if use_cache else None
    tokens = start_tokens(model, src.shape[0], src.device)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for step in range(int(limits.max())):
        log_probs = next_token_log_probs(
            model, tokens, memory, src_padding_mask, cache, step + 1 >= limits, no_repeat_ngram_size,
            step_forced(table, step),
        )
        next_token = log_probs.argmax(dim=-1).masked_fill(finished, model.pad_id)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        finished |= next_token == model.eos_id
        if finished.all():
            break
    return tokens[:, 1:]


def prefix_lengths(table: Tensor) -> list[int]:
    """The length of each row's prefix in a table of :func:`forced_tokens`."""
    return table.ne(FREE).sum(dim=1).tolist()


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """GNMT's length normalization (Wu et al. 2016, Eq. 14): ``lp(Y) = ((5 + |Y|) / 6)^alpha``."""
    return ((5.0 + length) / 6.0) ** alpha


class Candidates(NamedTuple):
    """The ``2 * beam_size`` best continuations of each sentence at one step, best first."""

    scores: Tensor  # (B, 2K) log P of the hypothesis with the new token
    beams: Tensor  # (B, 2K) the beam (0..K-1) each one extends
    tokens: Tensor  # (B, 2K) the new token
    ends: Tensor  # (B, 2K) whether the new token is </s>


def best_candidates(scores: Tensor, log_probs: Tensor, beam_size: int, eos_id: int) -> Candidates:
    """Score every continuation of every live beam (``scores`` [B, K] + ``log_probs`` [B * K, V])
    and keep the ``2 * beam_size`` best of each sentence: enough that ``beam_size`` of them do not
    end, whatever the others do."""
    batch, vocab = scores.shape[0], log_probs.shape[-1]
    candidates = (scores.view(-1, 1) + log_probs).view(batch, beam_size * vocab)  # (B, K * V)
    top_scores, top_index = candidates.topk(2 * beam_size, dim=1)  # (B, 2K)
    tokens = top_index % vocab
    return Candidates(top_scores, top_index // vocab, tokens, tokens == eos_id)


def only_the_best_may_end(candidates: Candidates, sentences: Tensor) -> Candidates:
    """``candidates`` where, for the ``sentences`` [B] (bool) at their first step after a prefix,
    no candidate but the best may end: the others that would end are dropped (score ``-inf``:
    still ending, so no hypothesis collects them and the best ``beam_size`` that do not end stay
    live). CTranslate2's rule, so that the prefix alone does not fill the n-best list with an
    empty continuation that is not the most probable one."""
    dropped = candidates.ends & sentences[:, None]
    dropped[:, 0] = False
    scores = candidates.scores.masked_fill(dropped, float("-inf"))
    return Candidates(scores, candidates.beams, candidates.tokens, candidates.ends)


class FinishedHypotheses:
    """The hypotheses of each sentence that have ended, scored ``log P / lp(length)`` (GNMT) over
    the tokens after the sentence's prefix (``prefix_lengths``).

    A sentence is done when it holds ``beam_size`` of them (the fairseq criterion).
    """

    def __init__(self, prefix_lengths: list[int], beam_size: int, length_penalty: float) -> None:
        self.prefix_lengths = prefix_lengths
        self.beam_size, self.length_penalty = beam_size, length_penalty
        self.hypotheses: list[list[Scored]] = [[] for _ in prefix_lengths]
        self.done = [False] * len(prefix_lengths)

    def collect(self, candidates: Candidates, tokens: Tensor, step: int) -> None:
        """Keep the candidates among each sentence's top ``beam_size`` that end with ``</s>``;
        ``tokens`` [B * K, step + 1] are the live beams they extend (``<s>`` first)."""
        k = self.beam_size
        ended = candidates.ends[:, :k] & candidates.scores[:, :k].isfinite()
        for sentence, rank in ended.nonzero().tolist():
            if self.done[sentence]:
                continue
            row = sentence * k + int(candidates.beams[sentence, rank])
            length = step + 1 - self.prefix_lengths[sentence]
            score = float(candidates.scores[sentence, rank]) / gnmt_length_penalty(length, self.length_penalty)
            hypothesis = [*tokens[row, 1:].tolist(), int(candidates.tokens[sentence, rank])]
            self.hypotheses[sentence].append(Scored(hypothesis, score))
            self.done[sentence] = len(self.hypotheses[sentence]) >= k

    def all_done(self) -> bool:
        return all(self.done)

    def ranked(self) -> list[list[Scored]]:
        """Each sentence's hypotheses, best first (in the order they ended where scores tie)."""
        return [sorted(found, key=lambda hypothesis: hypothesis.score, reverse=True) for found in self.hypotheses]


def pad_rows(rows: list[list[int]], pad_id: int, device: torch.device) -> Tensor:
    """Id lists as one right-padded tensor [B, L]."""
    output = torch.full((len(rows), max(map(len, rows))), pad_id, dtype=torch.long, device=device)
    for index, row in enumerate(rows):
        output[index, : len(row)] = torch.tensor(row, dtype=torch.long)
    return output


def advance_beams(candidates: Candidates, tokens: Tensor, beam_size: int) -> tuple[Tensor, Tensor, Tensor]:
    """The best ``beam_size`` candidates of each sentence that do not end become its live beams.

    Returns their tokens [B * K, t + 1], their scores [B, K] and the rows [B * K] of ``tokens``
    they extend (to reorder the cache by).
    """
    batch = candidates.scores.shape[0]
    keep = candidates.ends.int().sort(dim=1, stable=True).indices[:, :beam_size]  # (B, K), rank order kept
    beam_offsets = (torch.arange(batch, device=tokens.device) * beam_size)[:, None]  # (B, 1)
    rows = (beam_offsets + candidates.beams.gather(1, keep)).view(-1)  # (B * K,)
    new_tokens = candidates.tokens.gather(1, keep).view(-1, 1)  # (B * K, 1)
    return torch.cat([tokens.index_select(0, rows), new_tokens], dim=1), candidates.scores.gather(1, keep), rows


@torch.no_grad()
def beam_search(
    model: Seq2SeqTransformer,
    src: Tensor,
    beam_size: int = 4,
    length_penalty: float = 0.6,
    max_len: int | None = None,
    use_cache: bool = True,
    no_repeat_ngram_size: int = 0,
    max_len_a: float = DEFAULT_MAX_LEN_A,
    max_len_b: int = DEFAULT_MAX_LEN_B,
    prefix: Prefix | None = None,
) -> Tensor:
    """Beam search with GNMT length normalization, as in the paper (beam 4, alpha 0.6): the best
    hypothesis of each sentence among :func:`beam_hypotheses` (same arguments).

    Returns:
        The best hypothesis of each sentence [B, L] (no ``<s>``), ``</s>``-terminated, padded.
    """
    ranked = beam_hypotheses(
        model, src, beam_size, length_penalty, max_len, use_cache, no_repeat_ngram_size, max_len_a, max_len_b, prefix
    )
    return pad_rows([hypotheses[0].tokens for hypotheses in ranked], model.pad_id, src.device)


@torch.no_grad()
def beam_hypotheses(
    model: Seq2SeqTransformer,
    src: Tensor,
    beam_size: int = 4,
    length_penalty: float = 0.6,
    max_len: int | None = None,
    use_cache: bool = True,
    no_repeat_ngram_size: int = 0,
    max_len_a: float = DEFAULT_MAX_LEN_A,
    max_len_b: int = DEFAULT_MAX_LEN_B,
    prefix: Prefix | None = None,
) -> list[list[Scored]]:
    """Beam search, every finished hypothesis of each sentence with its score, best first.

    The beams of all sentences are folded into one batch of ``B * beam_size`` rows. Each step
    scores every continuation of every live beam and takes the ``2 * beam_size`` best of each
    sentence (:func:`best_candidates`): those ending in ``</s>`` among the top ``beam_size``
    become finished hypotheses (:class:`FinishedHypotheses`), and the best ``beam_size`` others
    stay live (:func:`advance_beams`), with the self-attention cache reordered to follow them (the
    cross-attention keys and values are the same in every beam of a sentence); at the
    first step after a prefix only the best candidate may end (:func:`only_the_best_may_end`).
    The search stops when every sentence is done. Each sentence ends with ``beam_size`` distinct
    hypotheses, fewer only when fewer could end (a limit that leaves room for ``</s>`` alone).

    Args:
        model: the translation model (put it in eval mode first).
        src: source ids [B, S], right-padded with the model's ``pad_id``.
        beam_size: hypotheses kept per sentence; 1 is greedy decoding.
        length_penalty: alpha of :func:`gnmt_length_penalty`; 0 ranks by raw log-probability.
        max_len: most generated tokens per sentence after its prefix (default: ``max_len_a * S_i +
            max_len_b``).
        use_cache: incremental decoding with the key/value cache.
        no_repeat_ngram_size: forbid repeating an n-gram of this size in a hypothesis (0 = off).
        max_len_a: the default limit's factor of the source length.
        max_len_b: the default limit's added tokens.
        prefix: target ids each sentence's hypotheses start with (one list per sentence, no
            special tokens); the search continues freely after it.

    Returns:
        For each sentence, its hypotheses (ids without ``<s>``, ``</s>`` last) best first.
    """
    if beam_size < 1:
        raise InputError(f"beam_size must be at least 1, got {beam_size}")
    check_ngram_size(no_repeat_ngram_size)
    batch, device = src.shape[0], src.device
    table = forced_tokens(model, prefix, src)
    lengths = prefix_lengths(table)
    limits = length_limits(model, src, max_len, max_len_a, max_len_b, lengths).repeat_interleave(beam_size)  # (B * K,)
    table = table.repeat_interleave(beam_size, dim=0)  # (B * K, P): a beam stays within its sentence
    memory, src_padding_mask = model.encode(src)
    memory = memory.repeat_interleave(beam_size, dim=0)  # (B * K, S, dim)
    src_padding_mask = src_padding_mask.repeat_interleave(beam_size, dim=0)  # (B * K, S)
    cache = model.new_cache() if use_cache else None
    tokens = start_tokens(model, batch * beam_size, device)
    # All beams start identical; only the first may expand at step 0, or the beam would fill
    # with copies of one hypothesis.
    scores = torch.full((batch, beam_size), float("-inf"), device=device)
    scores[:, 0] = 0.0
    first_free = torch.tensor([length or -1 for length in lengths], device=device)  # the step after a prefix, -1: none
    finished = FinishedHypotheses(lengths, beam_size, length_penalty)
    for step in range(int(limits.max())):
        log_probs = next_token_log_probs(
            model, tokens, memory, src_padding_mask, cache, step + 1 >= limits, no_repeat_ngram_size,
            step_forced(table, step),
        )
        candidates = best_candidates(scores, log_probs, beam_size, model.eos_id)
        candidates = only_the_best_may_end(candidates, first_free == step)
        finished.collect(candidates, tokens, step)
        if finished.all_done():
            break
        tokens, scores, rows = advance_beams(candidates, tokens, beam_size)
        if cache is not None:
            cache.reorder(rows, cross_attention=False)  # rows stay within their sentence's beams
    return finished.ranked()


def repeats_ngram(words: list[str], n: int) -> bool:
    """Whether some n-gram of ``words`` occurs more than once."""
    ngrams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return len(set(ngrams)) < len(ngrams)


def repetition_rate(sentences: list[str], n: int = 4) -> float:
    """Share of ``sentences`` in which a word n-gram (split at whitespace) occurs twice or more:
    the mark of decoding loops ("the name of the name of ..."), to compare with the references'
    own share."""
    if not sentences:
        return 0.0
    return sum(repeats_ngram(sentence.split(), n) for sentence in sentences) / len(sentences)
