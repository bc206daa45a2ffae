"""Decoding invariants on a randomly initialized model, and beam search against brute force."""

from __future__ import annotations

import itertools

import pytest
import torch

from nlp.decoding import beam_search, gnmt_length_penalty, greedy_decode
from tests.nlp.conftest import tiny_model

PAD, BOS, EOS = 0, 1, 2


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    # A larger </s> output row makes a random model end its hypotheses at different steps, so
    # that finished rows and padding after </s> take part in every test.
    model = tiny_model(vocab_size=40, seed=0)
    with torch.no_grad():
        model.output.weight[EOS].mul_(6.0)
    return model


@pytest.fixture(scope="module")
def sources() -> torch.Tensor:
    torch.manual_seed(5)
    src = torch.randint(3, 40, (4, 9))
    src[:, -1] = EOS
    for row, length in ((1, 4), (3, 6)):
        src[row, length - 1] = EOS
        src[row, length:] = PAD
    return src


def decode(model: torch.nn.Module, src: torch.Tensor, beam: int, **kwargs: object) -> torch.Tensor:
    return greedy_decode(model, src, **kwargs) if beam == 0 else beam_search(model, src, beam_size=beam, **kwargs)


@pytest.mark.parametrize("beam", [0, 1, 4])
def test_cached_and_uncached_decoding_agree(model: torch.nn.Module, sources: torch.Tensor, beam: int) -> None:
    cached = decode(model, sources, beam, max_len=12, use_cache=True)
    uncached = decode(model, sources, beam, max_len=12, use_cache=False)
    assert torch.equal(cached, uncached)


def test_beam_of_one_is_greedy(model: torch.nn.Module, sources: torch.Tensor) -> None:
    assert torch.equal(beam_search(model, sources, beam_size=1), greedy_decode(model, sources))


@pytest.mark.parametrize("beam", [0, 4])
def test_sentence_alone_equals_sentence_in_padded_batch(model: torch.nn.Module, sources: torch.Tensor, beam: int) -> None:
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
        never_ends.output.weight[EOS] = -10.0  # </s> logits far below the others
    output = greedy_decode(never_ends, sources)
    source_lengths = sources.ne(PAD).sum(dim=1)
    output_lengths = output.ne(PAD).sum(dim=1)
    assert torch.equal(output_lengths, source_lengths + 50)  # forced </s> at the limit


def test_max_len_beyond_the_model_is_refused(model: torch.nn.Module, sources: torch.Tensor) -> None:
    with pytest.raises(ValueError, match="max_len 65 must be in 1..64"):
        greedy_decode(model, sources, max_len=65)
    with pytest.raises(ValueError, match="beam_size must be at least 1"):
        beam_search(model, sources, beam_size=0)


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
