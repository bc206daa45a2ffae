"""Writing the directory of ``python -m nlp.export`` (its files: :mod:`nlp.export.directory`).

The directory is built beside ``DIR`` and renamed into place once complete and checked, so
``DIR`` never holds half an export. The check scores probe sentence pairs (random subwords, fixed
seed) with the written model and with the PyTorch model, teacher-forced: the per-token
log-probabilities of a float32 export must agree within :data:`FLOAT32_TOLERANCE`; a quantized
export's largest difference is reported.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from core.errors import InputError
from core.files.model_directory import new_model_directory
from nlp.module import TranslationModule
from nlp.export.translator import compute_type
from nlp.export.directory import (
    DECODING_KEYS,
    FORMAT,
    METADATA,
    QUANTIZATIONS,
    TOKENIZER,
    VERSION,
    is_exported_model,
    require_ctranslate2,
)

FLOAT32_TOLERANCE = 1e-3  # on log-probabilities
PROBES = 4  # probe sentence pairs of the check


def metadata_of(translator: TranslationModule, quantization: str, checkpoint: str) -> dict[str, Any]:
    """What ``translation.json`` records of ``translator`` (:mod:`nlp.export.directory`)."""
    hparams, net, tokenizer = translator.hparams, translator.net, translator.tokenizer
    return {
        "format": FORMAT,
        "version": VERSION,
        "checkpoint": checkpoint,
        "quantization": quantization,
        "max_len": net.max_len,
        "source_max_len": hparams.source_max_len or net.max_len,
        "special_ids": {"pad": tokenizer.pad_id, "bos": tokenizer.bos_id, "eos": tokenizer.eos_id, "unk": tokenizer.unk_id},
        "decoding": {key: hparams[key] for key in DECODING_KEYS},
    }


def staged_directory(out: Path, force: bool) -> AbstractContextManager[Path]:
    """An empty directory beside ``out`` that becomes ``out`` when the block succeeds and is
    removed when it fails. An existing ``out`` is replaced only with ``force``, and only when
    it is an earlier export or empty (never a directory of other files)."""
    return new_model_directory(out, force, is_exported_model)


def probe_pairs(translator: TranslationModule) -> list[tuple[list[int], list[int]]]:
    """:data:`PROBES` (source, target) pairs of random ordinary subword ids, without ``</s>``."""
    tokenizer, rng = translator.tokenizer, np.random.default_rng(0)
    special = {tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.unk_id}
    ordinary = np.array([index for index in range(tokenizer.vocab_size) if index not in special])
    longest = min(12, translator.net.max_len - 1)
    def sentence() -> list[int]:
        return rng.choice(ordinary, int(rng.integers(1, longest + 1))).tolist()

    return [(sentence(), sentence()) for _ in range(PROBES)]


@torch.no_grad()
def torch_log_probs(translator: TranslationModule, source: list[int], target: list[int]) -> np.ndarray:
    """Teacher-forced log P of ``target`` then ``</s>`` under the PyTorch model."""
    net, eos, bos = translator.net.eval(), translator.tokenizer.eos_id, translator.tokenizer.bos_id
    src = torch.tensor([[*source, eos]], device=translator.device)
    tgt = torch.tensor([[bos, *target]], device=translator.device)
    log_probs = net(src, tgt)[0].float().log_softmax(dim=-1)  # (T + 1, V)
    expected = torch.tensor([*target, eos], device=translator.device)
    return log_probs.gather(1, expected[:, None])[:, 0].cpu().numpy()


def largest_difference(translator: TranslationModule, directory: Path, quantization: str) -> float:
    """The largest |difference| of per-token log-probabilities between the model written in
    ``directory`` (weights stored as ``quantization``, computed as ``nlp.translate`` computes them
    on this CPU) and the PyTorch model, on :func:`probe_pairs`."""
    import ctranslate2

    model = ctranslate2.Translator(
        str(directory), device="cpu", intra_threads=1, compute_type=compute_type(quantization, "cpu")
    )
    token = translator.tokenizer.tokenizer.id_to_token
    pairs = probe_pairs(translator)
    scored = model.score_batch(
        [[token(i) for i in source] for source, _ in pairs], [[token(i) for i in target] for _, target in pairs],
        max_input_length=0,
    )
    return max(
        float(np.abs(np.asarray(result.log_probs) - torch_log_probs(translator, source, target)).max())
        for result, (source, target) in zip(scored, pairs)
    )


def export_ctranslate2(
    translator: TranslationModule, out: Path, quantization: str = "float32", force: bool = False, checkpoint: str = ""
) -> float:
    """Write ``translator`` to the directory ``out`` as a CTranslate2 model with its tokenizer and
    ``translation.json``, checked before it is moved into place; returns the largest
    log-probability difference of the check (float32: at most :data:`FLOAT32_TOLERANCE`)."""
    require_ctranslate2("--format ctranslate2")
    from nlp.export.spec import transformer_spec_of

    if quantization not in QUANTIZATIONS:
        raise InputError(f"--quantization {quantization} is not one of {', '.join(QUANTIZATIONS)}")
    broken = [name for name, parameter in translator.net.named_parameters() if not parameter.isfinite().all()]
    if broken:
        raise InputError(
            f"the checkpoint's weights are not finite ({broken[0]}{' and others' if len(broken) > 1 else ''}): its "
            "training diverged; export a checkpoint saved before that"
        )
    spec = transformer_spec_of(translator.net, translator.tokenizer)
    spec.validate()
    spec.optimize(quantization=quantization)
    with staged_directory(out, force) as staging:
        spec.save(str(staging))
        translator.tokenizer.save(staging / TOKENIZER)
        metadata = metadata_of(translator, quantization, checkpoint)
        (staging / METADATA).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
        difference = largest_difference(translator, staging, quantization)
        if quantization == "float32" and not difference <= FLOAT32_TOLERANCE:
            raise AssertionError(
                f"the exported model's log-probabilities differ from the PyTorch model's by {difference:.2e} "
                f"(> {FLOAT32_TOLERANCE}): the weights were mapped wrongly; nothing was written to {out}"
            )
    return difference
