"""A forced target prefix and the n-best hypotheses of beam search, on randomly initialized models:
the prefix starts every output (greedy and beam, with and without the cache) and decoding then
continues as a teacher-forced argmax would; the hypotheses are distinct, ranked by their score,
the first is beam search's output, and each score is the teacher-forced log-probability of the
tokens after the prefix over the GNMT penalty of their number, which exhaustive search confirms."""

from __future__ import annotations

import itertools

import pytest
import torch

from core.errors import InputError
from nlp.decoding import (
    Candidates,
    advance_beams,
    beam_hypotheses,
    beam_search,
    gnmt_length_penalty,
    greedy_decode,
    only_the_best_may_end,
)
from tests.nlp.conftest import decode, tiny_model

PAD, BOS, EOS = 0, 1, 2
PREFIXES = [[5, 6, 7], [], [9], [11, 5]]  # one per sentence of ``sources``, of different lengths


def alone(src: torch.Tensor, row: int) -> torch.Tensor:
    """Sentence ``row`` of a padded batch without its padding: [1, S_row]."""
    return src[row : row + 1, : int(src[row].ne(PAD).sum())]


def until_eos(row: list[int]) -> list[int]:
    return row[: row.index(EOS) + 1]


def continuation_score(
    model: torch.nn.Module, src: torch.Tensor, hypothesis: list[int], prefix: int, alpha: float
) -> float:
    """log P(hypothesis[prefix:] | src, hypothesis[:prefix]) by teacher forcing, over the GNMT
    penalty of the continuation's length: independent of the search code."""
    with torch.no_grad():
        log_probs = model(src, torch.tensor([[BOS, *hypothesis[:-1]]])).log_softmax(dim=-1)[0]
    log_p = sum(float(log_probs[step, token]) for step, token in enumerate(hypothesis) if step >= prefix)
    return log_p / gnmt_length_penalty(len(hypothesis) - prefix, alpha)


@pytest.mark.parametrize("beam", [0, 1, 4])
def test_every_output_starts_with_its_prefix_cached_or_not_alone_or_batched(
    model: torch.nn.Module, sources: torch.Tensor, beam: int
) -> None:
    free = decode(model, sources, beam, max_len=10).tolist()
    forced = decode(model, sources, beam, max_len=10, prefix=PREFIXES)
    assert torch.equal(forced, decode(model, sources, beam, max_len=10, prefix=PREFIXES, use_cache=False))
    for row, prefix in enumerate(PREFIXES):
        output = until_eos(forced[row].tolist())
        assert output[: len(prefix)] == prefix and EOS not in output[:-1]
        if prefix:
            assert free[row][: len(prefix)] != prefix  # the model would not have chosen it
        else:
            assert output == until_eos(free[row])  # no prefix: as before
        by_itself = decode(model, alone(sources, row), beam, max_len=10, prefix=[prefix])[0].tolist()
        assert until_eos(by_itself) == output


def teacher_forced_greedy(model: torch.nn.Module, src: torch.Tensor, prefix: list[int], limit: int) -> list[int]:
    """The prefix, then the argmax of the full forward pass at every step (never <pad> or <s>),
    with </s> at ``limit`` tokens."""
    hypothesis = list(prefix)
    while not hypothesis or hypothesis[-1] != EOS:
        if len(hypothesis) == limit - 1:
            return [*hypothesis, EOS]
        with torch.no_grad():
            logits = model(src, torch.tensor([[BOS, *hypothesis]]))[0, -1]
        logits[[PAD, BOS]] = float("-inf")
        hypothesis.append(int(logits.argmax()))
    return hypothesis


def test_greedy_continues_the_prefix_as_a_teacher_forced_argmax(model: torch.nn.Module, sources: torch.Tensor) -> None:
    """Greedy decoding with a prefix (cached, batched) against the argmax of a whole forward pass
    at each step; the limit (6 here) counts the tokens after the prefix."""
    output = greedy_decode(model, sources, max_len=6, prefix=PREFIXES)
    lengths = set()
    for row, prefix in enumerate(PREFIXES):
        expected = teacher_forced_greedy(model, alone(sources, row), prefix, limit=len(prefix) + 6)
        assert until_eos(output[row].tolist()) == expected
        lengths.add(len(expected) - len(prefix))
    assert len(lengths) > 1  # some continuations end before the limit and some at it


@pytest.mark.parametrize("prefixes", [None, PREFIXES], ids=["no prefix", "prefixes"])
@pytest.mark.parametrize("use_cache", [True, False])
def test_nbest_are_distinct_ranked_by_their_teacher_forced_scores_and_the_first_is_beam_searchs(
    model: torch.nn.Module, sources: torch.Tensor, prefixes: list[list[int]] | None, use_cache: bool
) -> None:
    kwargs = dict(beam_size=4, length_penalty=0.6, max_len=10, no_repeat_ngram_size=2, prefix=prefixes)
    ranked = beam_hypotheses(model, sources, use_cache=use_cache, **kwargs)
    best = beam_search(model, sources, use_cache=use_cache, **kwargs)
    for row, hypotheses in enumerate(ranked):
        prefix = prefixes[row] if prefixes else []
        tokens = [hypothesis.tokens for hypothesis in hypotheses]
        scores = [hypothesis.score for hypothesis in hypotheses]
        assert len(hypotheses) == 4 and len(set(map(tuple, tokens))) == 4
        assert scores == sorted(scores, reverse=True)
        assert tokens[0] == until_eos(best[row].tolist())
        for hypothesis in hypotheses:
            assert hypothesis.tokens[: len(prefix)] == prefix
            assert hypothesis.tokens.index(EOS) == len(hypothesis.tokens) - 1
            expected = continuation_score(model, alone(sources, row), hypothesis.tokens, len(prefix), alpha=0.6)
            assert hypothesis.score == pytest.approx(expected, abs=1e-4)


def first_choice(model: torch.nn.Module, src: torch.Tensor, prefix: list[int]) -> int:
    """The most probable token right after ``prefix`` (never <pad> or <s>), by a full forward pass."""
    with torch.no_grad():
        logits = model(src, torch.tensor([[BOS, *prefix]]))[0, -1]
    logits[[PAD, BOS]] = float("-inf")
    return int(logits.argmax())


@pytest.mark.parametrize(
    ("prefix", "alpha", "may_end_at_once"), [([5], 0.6, True), ([3, 4], 2.0, False), ([4, 4], 0.0, False)]
)
def test_a_wide_beam_ranks_every_continuation_of_the_prefix_as_brute_force(
    prefix: list[int], alpha: float, may_end_at_once: bool
) -> None:
    """With a beam wider than the number of hypotheses, the search is exact: it must find every
    continuation of at most 3 tokens, ranked and scored as enumerating them all ranks and scores
    them (the prefix's own log-probability and length left out). The empty continuation is one
    of them only where </s> is the most probable token after the prefix (CTranslate2's rule)."""
    model = tiny_model(vocab_size=6, seed=1)  # tokens 3, 4, 5 besides <pad>, <s>, </s>
    src = torch.tensor([[4, 3, 5, EOS]])
    assert (first_choice(model, src, prefix) == EOS) == may_end_at_once
    shortest = 0 if may_end_at_once else 1
    candidates = [
        [*prefix, *body, EOS] for length in range(shortest, 3) for body in itertools.product((3, 4, 5), repeat=length)
    ]
    expected = sorted(
        ((continuation_score(model, src, c, len(prefix), alpha), c) for c in candidates), key=lambda pair: -pair[0]
    )
    found = beam_hypotheses(model, src, beam_size=64, length_penalty=alpha, max_len=3, prefix=[prefix])[0]
    assert [hypothesis.tokens for hypothesis in found] == [tokens for _, tokens in expected]
    assert [hypothesis.score for hypothesis in found] == pytest.approx([score for score, _ in expected], abs=1e-5)


def test_the_length_limit_counts_the_tokens_after_the_prefix(sources: torch.Tensor) -> None:
    never_ends = tiny_model(vocab_size=40, seed=0)
    with torch.no_grad():
        # A constant </s> row: its logit is -10 times the sum of a layer-normed state, about 0,
        # below the largest of the 39 other random logits at every step.
        never_ends.output.weight[EOS] = -10.0
    prefix_lengths = torch.tensor([len(prefix) for prefix in PREFIXES])
    output = greedy_decode(never_ends, sources, prefix=PREFIXES)
    assert torch.equal(output.ne(PAD).sum(dim=1), torch.tensor([20, 14, 20, 17]) + prefix_lengths)  # int(1.2 * S + 10)
    output = beam_search(never_ends, sources, max_len=5, prefix=PREFIXES)
    assert torch.equal(output.ne(PAD).sum(dim=1), 5 + prefix_lengths)
    capped = greedy_decode(never_ends, sources, max_len=63, prefix=PREFIXES)
    assert capped.ne(PAD).sum(dim=1).tolist() == [64, 63, 64, 64]  # the model's max_len 64 still caps it
    ends_at_once = beam_hypotheses(never_ends, sources[:1], max_len=1, prefix=[[5, 6]])[0]
    assert [hypothesis.tokens for hypothesis in ends_at_once] == [[5, 6, EOS]]  # room for </s> only


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        ([[5, EOS]], "the prefix holds the special token </s>"),
        ([[BOS]], "the prefix holds the special token <s>"),
        ([[PAD, 5]], "the prefix holds the special token <pad>"),
        ([[5] * 64], "the prefix has 64 subwords, more than the 63 a translation of this model may hold"),
        ([[5], [6]], "the prefix has 2 entries for 1 sentences"),
    ],
)
@pytest.mark.parametrize("beam", [0, 2])
def test_a_prefix_that_cannot_start_a_translation_is_refused(
    model: torch.nn.Module, sources: torch.Tensor, prefix: list[list[int]], message: str, beam: int
) -> None:
    with pytest.raises(InputError, match=message):
        decode(model, sources[:1], beam, prefix=prefix)


def test_after_a_prefix_the_dropped_endings_leave_every_beam_live() -> None:
    """Ranks 1 and 2 of the 2K = 8 candidates end with </s> right after the prefix: they are
    dropped, and the 4 live beams are ranks 0, 3, 4 and 5, none of them dead (-inf)."""
    ends = torch.tensor([[False, True, True, False, False, False, False, False]])
    candidates = Candidates(-torch.arange(1.0, 9.0)[None], torch.zeros(1, 8, dtype=torch.long), torch.arange(8)[None], ends)
    kept = only_the_best_may_end(candidates, torch.tensor([True]))
    assert kept.scores[0, 1:3].isinf().all()
    _, scores, _ = advance_beams(kept, torch.zeros(4, 1, dtype=torch.long), beam_size=4)
    assert scores.tolist() == [[-1.0, -4.0, -5.0, -6.0]]
