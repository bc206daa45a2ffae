"""Decoding invariants on a randomly initialized model, and greedy and beam search (with and
without n-gram blocking) against brute force."""

from __future__ import annotations

import itertools

import pytest
import torch

from core.errors import InputError
from nlp.decoding import (
    beam_search,
    gnmt_length_penalty,
    greedy_decode,
    repeated_ngram_bans,
    repetition_rate,
)
from tests.nlp.conftest import decode, tiny_model

PAD, BOS, EOS = 0, 1, 2


@pytest.mark.parametrize("beam", [0, 1, 4])
def test_cached_and_uncached_decoding_agree(model: torch.nn.Module, sources: torch.Tensor, beam: int) -> None:
    cached = decode(model, sources, beam, max_len=12, use_cache=True)
    uncached = decode(model, sources, beam, max_len=12, use_cache=False)
    assert torch.equal(cached, uncached)


def test_beam_of_one_is_greedy(model: torch.nn.Module, sources: torch.Tensor) -> None:
    assert torch.equal(beam_search(model, sources, beam_size=1), greedy_decode(model, sources))


@pytest.mark.parametrize("beam", [0, 4])
def test_sentence_alone_equals_sentence_in_padded_batch(
    model: torch.nn.Module, sources: torch.Tensor, beam: int
) -> None:
    batched = decode(model, sources, beam)
    for row in range(sources.shape[0]):
        length = int(sources[row].ne(PAD).sum())
        alone = decode(model, sources[row : row + 1, :length], beam)[0]
        assert torch.equal(batched[row, : len(alone)], alone)
        assert batched[row, len(alone) :].eq(PAD).all()


@pytest.mark.parametrize("beam", [0, 3])
def test_every_output_ends_once_with_eos_then_padding(model: torch.nn.Module, sources: torch.Tensor, beam: int) -> None:
    output = decode(model, sources, beam, max_len=10)
    assert output.shape[1] <= 10
    lengths = set()
    for row in output.tolist():
        assert row.count(EOS) == 1 and BOS not in row
        end = row.index(EOS)
        assert PAD not in row[:end] and all(token == PAD for token in row[end + 1 :])
        lengths.add(end)
    assert len(lengths) > 1  # the outputs end at different steps, so the padding was exercised


def test_default_length_limit_follows_each_source(model: torch.nn.Module, sources: torch.Tensor) -> None:
    never_ends = tiny_model(vocab_size=40, seed=0)
    with torch.no_grad():
        # A constant </s> row: its logit is -10 times the sum of a layer-normed state, about 0,
        # below the largest of the 39 other random logits at every step.
        never_ends.output.weight[EOS] = -10.0
    source_lengths = sources.ne(PAD).sum(dim=1)  # 9, 4, 9, 6 ids, </s> included
    output = greedy_decode(never_ends, sources)
    assert output.ne(PAD).sum(dim=1).tolist() == [20, 14, 20, 17]  # int(1.2 * length + 10): forced </s>
    output = beam_search(never_ends, sources, max_len_a=2.0, max_len_b=3)
    assert torch.equal(output.ne(PAD).sum(dim=1), 2 * source_lengths + 3)
    capped = greedy_decode(never_ends, sources, max_len_a=10.0, max_len_b=1)
    assert capped.ne(PAD).sum(dim=1).tolist() == [64, 41, 64, 61]  # at most the model's max_len 64


def test_max_len_beyond_the_model_is_refused(model: torch.nn.Module, sources: torch.Tensor) -> None:
    with pytest.raises(ValueError, match="max_len 65 must be in 1..64"):
        greedy_decode(model, sources, max_len=65)
    with pytest.raises(ValueError, match="beam_size must be at least 1"):
        beam_search(model, sources, beam_size=0)
    with pytest.raises(InputError, match="no_repeat_ngram_size must be 0"):
        greedy_decode(model, sources, no_repeat_ngram_size=-1)
    with pytest.raises(InputError, match="max_len_b >= 1"):
        beam_search(model, sources, max_len_b=0)


def test_gnmt_length_penalty_formula() -> None:
    assert gnmt_length_penalty(1, 0.6) == 1.0
    assert gnmt_length_penalty(7, 0.6) == pytest.approx(2.0**0.6)
    assert gnmt_length_penalty(7, 0.0) == 1.0


def sequence_log_prob(model: torch.nn.Module, src: torch.Tensor, hypothesis: list[int]) -> float:
    """log P(hypothesis | src) by teacher forcing, independent of the search code."""
    decoder_input = torch.tensor([[BOS, *hypothesis[:-1]]])
    with torch.no_grad():
        log_probs = model(src, decoder_input).log_softmax(dim=-1)[0]
    return sum(float(log_probs[step, token]) for step, token in enumerate(hypothesis))


@pytest.mark.parametrize(("alpha", "expected"), [(0.0, (EOS,)), (0.6, (4, EOS)), (2.0, (4, EOS))])
def test_wide_beam_finds_the_best_sequence_by_brute_force(alpha: float, expected: tuple[int, ...]) -> None:
    """With a beam wider than the number of hypotheses, beam search is exact: it must return the
    argmax over every sequence of at most 3 tokens of log P / lp(length). For this model the
    argmax depends on alpha, and greedy decoding finds none of them."""
    model = tiny_model(vocab_size=6, seed=1)  # tokens 3, 4, 5 besides <pad>, <s>, </s>
    src = torch.tensor([[4, 3, 5, EOS]])
    candidates = [(*body, EOS) for length in range(3) for body in itertools.product((3, 4, 5), repeat=length)]
    scores = {c: sequence_log_prob(model, src, list(c)) / gnmt_length_penalty(len(c), alpha) for c in candidates}
    assert max(scores, key=scores.get) == expected
    found = beam_search(model, src, beam_size=16, length_penalty=alpha, max_len=3)[0]
    assert tuple(token for token in found.tolist() if token != PAD) == expected
    assert greedy_decode(model, src, max_len=3)[0].tolist() == [4, 4, EOS]


def has_repeated_ngram(tokens: list[int], n: int) -> bool:
    ngrams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(set(ngrams)) < len(ngrams)


def brute_force_bans(row: list[int], n: int, vocab: int) -> set[int]:
    """Every token t whose n-gram ending ``row + [t]`` already occurs in ``row``, by trying them all."""
    earlier = {tuple(row[i : i + n]) for i in range(len(row) - n + 1)}
    return {t for t in range(vocab) if len(row) >= n and tuple([*row, t][-n:]) in earlier}


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_repeated_ngram_bans_match_brute_force(n: int) -> None:
    torch.manual_seed(n)
    generated = torch.randint(0, 4, (64, 9))  # 4 symbols: repeats are frequent
    for length in range(10):
        bans = repeated_ngram_bans(generated[:, :length], n, vocab=6)
        for row, banned in zip(generated[:, :length].tolist(), bans.tolist()):
            assert {token for token, flag in enumerate(banned) if flag} == brute_force_bans(row, n, vocab=6)


def brute_force_greedy(model: torch.nn.Module, src: torch.Tensor, n: int, max_len: int) -> list[int]:
    """Greedy decoding of one sentence by teacher forcing the whole prefix at every step, with
    the banned tokens found by trying every continuation."""
    hypothesis: list[int] = []
    for step in range(max_len):
        with torch.no_grad():
            log_probs = model(src, torch.tensor([[BOS, *hypothesis]]))[0, -1].log_softmax(dim=-1)
        if step == max_len - 1:
            return [*hypothesis, EOS]
        allowed = [
            t for t in range(len(log_probs)) if t not in (PAD, BOS) and not has_repeated_ngram([*hypothesis, t], n)
        ]
        token = max(allowed, key=lambda t: float(log_probs[t]))
        hypothesis.append(token)
        if token == EOS:
            return hypothesis
    return hypothesis


@pytest.fixture(scope="module")
def looping_model() -> torch.nn.Module:
    """A random model that never ends early and, unblocked, repeats n-grams in every sentence."""
    model = tiny_model(vocab_size=12, seed=3)
    with torch.no_grad():
        model.output.weight[EOS] = -10.0  # constant row on a layer-normed state: </s> logit about 0
    return model


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_ngram_blocking_matches_brute_force(
    looping_model: torch.nn.Module, sources: torch.Tensor, n: int, use_cache: bool
) -> None:
    src = sources.clamp(max=11)
    unblocked = greedy_decode(looping_model, src, max_len=14, use_cache=use_cache)
    assert all(has_repeated_ngram(row, n) for row in unblocked.tolist())
    blocked = greedy_decode(looping_model, src, max_len=14, use_cache=use_cache, no_repeat_ngram_size=n)
    for row in range(src.shape[0]):
        length = int(src[row].ne(PAD).sum())
        expected = brute_force_greedy(looping_model, src[row : row + 1, :length], n, max_len=14)
        assert blocked[row, : len(expected)].tolist() == expected
        assert not has_repeated_ngram(expected, n)


@pytest.mark.parametrize("beam", [0, 1, 4])
def test_cached_and_uncached_blocked_decoding_agree(
    looping_model: torch.nn.Module, sources: torch.Tensor, beam: int
) -> None:
    src = sources.clamp(max=11)
    kwargs = dict(max_len=14, no_repeat_ngram_size=2)
    cached = decode(looping_model, src, beam, use_cache=True, **kwargs)
    assert torch.equal(cached, decode(looping_model, src, beam, use_cache=False, **kwargs))
    for row in cached.tolist():
        assert not has_repeated_ngram(row[: row.index(EOS) + 1], 2)


@pytest.mark.parametrize(
    ("seed", "alpha", "unblocked", "blocked"),
    [(4, 0.6, (4, 4, 4, EOS), (4, 4, EOS)), (2, 2.0, (3, 3, 3, EOS), (3, 3, 4, EOS))],
)
def test_wide_beam_with_blocking_finds_the_best_allowed_sequence(
    seed: int, alpha: float, unblocked: tuple[int, ...], blocked: tuple[int, ...]
) -> None:
    """Exhaustive search over every sequence of at most 4 tokens: the best one repeats the bigram
    (t, t); with bigram blocking, beam search (wide enough to be exact) must return the best
    sequence without a repeated bigram."""
    model = tiny_model(vocab_size=6, seed=seed)
    src = torch.tensor([[4, 3, 5, EOS]])
    candidates = [(*body, EOS) for length in range(4) for body in itertools.product((3, 4, 5), repeat=length)]
    scores = {c: sequence_log_prob(model, src, list(c)) / gnmt_length_penalty(len(c), alpha) for c in candidates}
    allowed = {c: score for c, score in scores.items() if not has_repeated_ngram(list(c), 2)}
    assert max(scores, key=scores.get) == unblocked and max(allowed, key=allowed.get) == blocked
    for n, expected in ((0, unblocked), (2, blocked)):
        found = beam_search(model, src, beam_size=64, length_penalty=alpha, max_len=4, no_repeat_ngram_size=n)[0]
        assert tuple(token for token in found.tolist() if token != PAD) == expected


def test_repetition_rate_counts_sentences_that_repeat_a_word_4gram() -> None:
    sentences = [
        "the name of the name of the name of Manasseh",  # "the name of the" twice
        "a b c d a b c",  # no 4-gram twice
        "one two three four one two three four",
        "",
    ]
    assert repetition_rate(sentences) == 0.5
    assert repetition_rate(sentences, n=3) == 0.75
    assert repetition_rate([]) == 0.0


@pytest.mark.parametrize("beam", [0, 4])
def test_a_model_giving_nan_scores_is_one_clear_error(sources: torch.Tensor, beam: int) -> None:
    diverged = tiny_model(vocab_size=40, seed=0)
    with torch.no_grad():
        diverged.output.weight[7, 0] = float("nan")  # as a run that diverged leaves its weights
    with pytest.raises(InputError, match="the model gave scores that are not numbers .* at decoding step 1: its weights"):
        decode(diverged, sources, beam)
