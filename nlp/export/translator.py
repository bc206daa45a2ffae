"""Translating with an exported CTranslate2 directory as :class:`nlp.module.TranslationModule`
translates with its checkpoint: the same source encoding (:func:`nlp.data.encoding.encode_sources`
with the stored ``max_len``), the same length limit per sentence (:func:`nlp.decoding.length_limits`),
``<pad>`` and ``<s>`` never generated, the same n-gram blocking, and beam search ranked by the GNMT
length penalty, with CTranslate2's C++ search doing the decoding.

How the decoding rules of :mod:`nlp.decoding` are kept:

- Length: our limit ``L`` counts ``</s>``, and at the limit only ``</s>`` may come, so at most
  ``L - 1`` subwords; CTranslate2's ``max_decoding_length`` counts subwords (a target prefix's
  included, as ours), so it gets ``L - 1``. It takes one limit per batch, the batch's largest: a
  sentence whose search came within one step of a smaller own limit is searched again alone with
  it, so no sentence's translation depends on its batch.
- Beam search: CTranslate2 collects finished hypotheses and stops a sentence at ``beam_size`` of
  them, as :class:`nlp.decoding.FinishedHypotheses` does, but divides scores by
  ``length ** alpha``; all ``beam_size`` hypotheses are returned with ``</s>`` and their scores,
  the raw log-probability recovered and ranked by ``log P / ((5 + length) / 6) ** alpha`` (GNMT).
- Target prefix: CTranslate2's ``target_prefix`` forces it as :mod:`nlp.decoding` does (which
  took over CTranslate2's rule that right after the prefix only the best candidate may end), and
  its log-probability, like ours, leaves the prefix's tokens out; the GNMT length leaves them out
  too. The candidates CTranslate2 marks as not to be taken are dropped (:data:`DEAD`).
- At the limit: CTranslate2 ends a beam hypothesis there without ``</s>``, where ours must take
  ``</s>`` at its own probability; the cut hypotheses get that log-probability added
  (``score_batch``) before the ranking, or a cut hypothesis that was unlikely to end outranks
  the shorter ones that did.
- Differences left: CTranslate2 renormalizes the probabilities over the tokens it may generate
  (ours are normalized over the whole vocabulary, then masked), which changes beam scores
  slightly, never a greedy translation.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from core.errors import InputError
from nlp.data.encoding import encode_sources
from nlp.data.tokenizer import BOS, PAD
from nlp.decoding import Prefix, Scored, check_prefix, gnmt_length_penalty, length_limits
from nlp.export.directory import EXPORT_AGAIN, METADATA, TOKENIZER, read_metadata, read_tokenizer, require_ctranslate2

log = logging.getLogger(__name__)

# CTranslate2 ends a beam search at the first finished best hypothesis when the length penalty is
# exactly 0; a penalty this small keeps the rule of nlp.decoding (beam_size finished hypotheses)
# and leaves every score unchanged in float32.
NO_PENALTY = 1e-30
# CTranslate2 scores -1e10 a candidate it may not take (another beam's copy of the prefix, an end
# that only the best may take right after the prefix); one it returns at the limit is no hypothesis.
DEAD = -1e9

Hypothesis = tuple[list[int], float]  # generated ids (``</s>`` last when it ended), raw log P

# x86 instructions that sum int8 products into int32 (VNNI, AMX). Without them, oneDNN's u8s8
# kernels (CTranslate2's int8 products on CPUs other than Intel's) sum pairs of products in 16 bits,
# which saturate.
INT8_DOT_PRODUCTS = ("avx512_vnni", "avx_vnni", "amx_int8")


def compute_type(quantization: str, device: str) -> str:
    """CTranslate2's compute type for weights stored as ``quantization`` on ``device``: the stored
    type (``default``), except integer weights on an x86 CPU without :data:`INT8_DOT_PRODUCTS`,
    which are widened and computed in float32: there CTranslate2's int8 products lose accuracy
    (docs/translation.md, measured on an AMD CPU with AVX2). Intel's CPUs without them take the
    same rule, though CTranslate2 computes int8 there with MKL."""
    capabilities = torch.cpu.get_capabilities()
    x86_without_dot_products = "avx" in capabilities and not any(capabilities.get(name) for name in INT8_DOT_PRODUCTS)
    if device.startswith("cpu") and quantization.startswith("int") and x86_without_dot_products:
        log.info("%s weights computed in float32: this CPU has no int8 dot-product instructions (VNNI, AMX)", quantization)
        return "float32"
    return "default"


def ctranslate2_device(device: str) -> tuple[str, int]:
    """``cpu``, ``cuda`` or ``cuda:N`` as CTranslate2's device and index."""
    kind, _, index = device.partition(":")
    if kind not in ("cpu", "cuda"):
        raise InputError(f"--device {device}: a CTranslate2 model runs on cpu or cuda")
    return kind, int(index or 0)


class CTranslate2Translator:
    """An exported directory (``python -m nlp.export``), translating like the checkpoint it came
    from (see the module docstring).

    Args:
        directory: the directory ``nlp.export`` wrote.
        device: ``cpu``, ``cuda`` or ``cuda:N``.
        threads: CTranslate2's intra-op threads (0: its default).
    """

    def __init__(self, directory: str | Path, device: str = "cpu", threads: int = 0) -> None:
        require_ctranslate2(f"translating with {directory}")
        import ctranslate2

        directory = Path(directory)
        metadata = read_metadata(directory)
        self.tokenizer = read_tokenizer(directory, EXPORT_AGAIN)
        ids, tokenizer = metadata["special_ids"], self.tokenizer
        if ids != {"pad": tokenizer.pad_id, "bos": tokenizer.bos_id, "eos": tokenizer.eos_id, "unk": tokenizer.unk_id}:
            raise InputError(
                f"{directory / TOKENIZER} does not match the special ids in {directory / METADATA}; {EXPORT_AGAIN}"
            )
        self.pad_id, self.bos_id, self.eos_id = ids["pad"], ids["bos"], ids["eos"]
        self.max_len: int = metadata["max_len"]
        self.source_max_len: int = metadata["source_max_len"]
        self.quantization: str = metadata["quantization"]
        self.decoding: dict[str, Any] = metadata["decoding"]
        self.beam_size: int = self.decoding["beam_size"]
        kind, index = ctranslate2_device(device)
        try:
            self.model = ctranslate2.Translator(
                str(directory), device=kind, device_index=index, intra_threads=threads,
                compute_type=compute_type(self.quantization, device),
            )
        except Exception as error:  # noqa: BLE001 - a missing or damaged model.bin, an unusable device
            raise InputError(f"CTranslate2 cannot load {directory} on {device} ({error}); {EXPORT_AGAIN}") from None

    def translate(self, sentences: list[str], beam_size: int = 1, max_len: int | None = None) -> list[str]:
        """Translate raw sentences, as :meth:`nlp.module.TranslationModule.translate`."""
        return [self.tokenizer.decode(ids) for ids in self.generate(self.encode(sentences), beam_size, max_len)]

    def encode(self, sentences: list[str]) -> list[list[int]]:
        """Source ids of raw sentences, as :meth:`nlp.module.TranslationModule.source_batch` encodes
        them (the stored ``source_max_len``; truncation is logged as a warning), without padding."""
        encoded, truncated = encode_sources(self.tokenizer, sentences, self.source_max_len)
        if any(truncated):
            log.warning(
                "truncated %d of %d sentences longer than %d subwords (model max_len %d)",
                sum(truncated), len(encoded), self.source_max_len - 1, self.max_len,
            )
        return encoded

    def generate(self, sources: list[list[int]], beam_size: int = 1, max_len: int | None = None) -> list[list[int]]:
        """Source ids (each ending in ``</s>``) -> generated ids, each ending in ``</s>``, as a row
        of :meth:`nlp.module.TranslationModule.generate` without its padding; ``max_len`` defaults
        to the exported ``max_decode_len``."""
        return [ranked[0].tokens for ranked in self.scored_hypotheses(sources, beam_size, max_len)]

    def scored_hypotheses(
        self, sources: list[list[int]], beam_size: int = 1, max_len: int | None = None, prefix: Prefix | None = None
    ) -> list[list[Scored]]:
        """Every hypothesis of each sentence that CTranslate2's search finished, best first, with its
        score, as :func:`nlp.decoding.beam_hypotheses` gives them (greedy decoding for
        ``beam_size`` 1); ``prefix`` holds the target ids each sentence's hypotheses start with."""
        if beam_size < 1:
            raise InputError(f"beam_size must be at least 1, got {beam_size}")
        if not sources:
            return []
        prefix = [list(ids) for ids in prefix] if prefix is not None else [[] for _ in sources]
        check_prefix(self, prefix, len(sources))
        limits = self.length_limits(sources, self.decoding["max_decode_len"] if max_len is None else max_len, prefix)
        found: list[list[Hypothesis]] = [[(ids, 0.0)] for ids in prefix]  # where the limit leaves room for </s> only
        # Given a target_prefix, CTranslate2 applies its rule for the step after a prefix to empty
        # prefixes too (at step 0), so sentences without one are searched apart, without the rule.
        for forced in (False, True):
            group = [i for i, limit in enumerate(limits) if limit > len(prefix[i]) + 1 and bool(prefix[i]) == forced]
            searched = self.search_within_limits(
                [sources[i] for i in group], beam_size, [limits[i] for i in group], [prefix[i] for i in group]
            )
            for index, hypotheses in zip(group, searched):
                found[index] = hypotheses
        return [self.rank(*sentence) for sentence in zip(sources, found, prefix)]

    def search_within_limits(
        self, sources: list[list[int]], beam_size: int, limits: list[int], prefix: list[list[int]]
    ) -> list[list[Hypothesis]]:
        """:meth:`search` under each sentence's own limit: one search with the largest, and a
        sentence that came within one step of a smaller own limit searched again alone with it."""
        if not sources:
            return []
        batch_limit = max(limits)
        searched = self.search(sources, beam_size, batch_limit, prefix)
        for index, (own, hypotheses) in enumerate(zip(limits, searched)):
            if own < batch_limit and max(len(ids) for ids, _ in hypotheses) >= own - 1:
                searched[index] = self.search([sources[index]], beam_size, own, [prefix[index]])[0]
        return searched

    def length_limits(self, sources: list[list[int]], max_len: int | None, prefix: Prefix) -> list[int]:
        """Most tokens each sentence may generate, ``</s>`` included: the rule of
        :func:`nlp.decoding.length_limits`, which reads only ``max_len`` and ``pad_id`` of the model."""
        rows = [torch.tensor(ids) for ids in sources]
        padded = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=self.pad_id)
        a, b = self.decoding["max_len_a"], self.decoding["max_len_b"]
        prefix_lengths = [len(ids) for ids in prefix]
        return length_limits(self, padded, max_len, a, b, prefix_lengths).tolist()  # type: ignore[arg-type]

    def search(self, sources: list[list[int]], beam_size: int, limit: int, prefix: Prefix) -> list[list[Hypothesis]]:
        """CTranslate2's greedy or beam search over ``sources`` with at most ``limit - 1``
        subwords per hypothesis (its ``prefix`` included): every finished hypothesis of each
        sentence with the raw log P of its tokens after the prefix."""
        token = self.tokenizer.tokenizer.id_to_token
        penalty = self.decoding["length_penalty"] or NO_PENALTY
        results = self.model.translate_batch(
            [[token(i) for i in ids[:-1]] for ids in sources],  # the model appends </s> itself
            target_prefix=[[token(i) for i in ids] for ids in prefix] if any(prefix) else None,
            beam_size=beam_size,
            num_hypotheses=beam_size,
            length_penalty=penalty,
            no_repeat_ngram_size=self.decoding["no_repeat_ngram_size"],
            suppress_sequences=[[PAD], [BOS]],
            return_end_token=True,
            return_scores=True,
            max_input_length=0,
            max_decoding_length=limit - 1,
            min_decoding_length=0,
        )
        to_id = self.tokenizer.tokenizer.token_to_id
        searched = []
        for result in results:
            hypotheses = [[to_id(text) for text in tokens] for tokens in result.hypotheses]
            # CTranslate2's score is log P / length ** penalty, log P without the prefix's tokens and
            # the length with them and </s>.
            raw = [score * max(len(ids), 1) ** penalty for ids, score in zip(hypotheses, result.scores)]
            searched.append([(ids, log_p) for ids, log_p in zip(hypotheses, raw) if log_p > DEAD])
        return searched

    def rank(self, source: list[int], hypotheses: list[Hypothesis], prefix: list[int]) -> list[Scored]:
        """The hypotheses of one sentence, each ending in ``</s>`` (:meth:`forced_ends`), scored by
        ``log P / ((5 + length) / 6) ** alpha`` (GNMT) over the tokens after ``prefix``, best first."""
        alpha = self.decoding["length_penalty"]
        scored = [
            Scored(ids, log_p / gnmt_length_penalty(len(ids) - len(prefix), alpha))
            for ids, log_p in self.forced_ends(source, hypotheses)
        ]
        return sorted(scored, key=lambda hypothesis: hypothesis.score, reverse=True)

    def forced_ends(self, source: list[int], hypotheses: list[Hypothesis]) -> list[Hypothesis]:
        """The hypotheses with the ``</s>`` that :mod:`nlp.decoding` forces at the limit:
        CTranslate2 ends a hypothesis cut at the limit without it, so its
        log P(``</s>`` | source, hypothesis) is scored here (``score_batch``, whose last entry is
        ``</s>``) and added; without it a cut hypothesis outranks the ones the limit ended."""
        cut = [index for index, (ids, _) in enumerate(hypotheses) if not ids or ids[-1] != self.eos_id]
        if not cut:
            return hypotheses
        token = self.tokenizer.tokenizer.id_to_token
        source_tokens = [token(i) for i in source[:-1]]
        scored = self.model.score_batch(
            [source_tokens] * len(cut), [[token(i) for i in hypotheses[index][0]] for index in cut], max_input_length=0
        )
        ended = list(hypotheses)
        for index, result in zip(cut, scored):
            ids, log_p = hypotheses[index]
            ended[index] = ([*ids, self.eos_id], log_p + result.log_probs[-1])
        return ended
