"""The training precision that follows the hardware: ``trainer.precision=auto``.

bf16 autocast (Lightning's ``bf16-mixed``: weights, gradients and the optimizer in float32, matrix
products in bfloat16) where the device computes bfloat16 natively: a CUDA GPU that supports it
(Ampere and later), or a CPU with AVX512-BF16 or AMX; float32 (``32-true``) elsewhere, where
bfloat16 would be emulated and slower than float32.
"""

from __future__ import annotations

import torch
from omegaconf import DictConfig, open_dict

AUTO = "auto"
MIXED, FULL = "bf16-mixed", "32-true"


def cpu_computes_bf16() -> bool:
    """Whether this CPU has bfloat16 instructions (AVX512-BF16 or AMX tiles)."""
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def hardware_precision(accelerator: str) -> str:
    """``bf16-mixed`` where the accelerator Lightning will pick computes bfloat16, else ``32-true``.

    ``accelerator`` is the Trainer's setting: ``cpu``, ``gpu``/``cuda``, or ``auto`` (the GPU when
    one is present, as Lightning decides)."""
    on_gpu = accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available())
    if on_gpu:
        native = torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
        return MIXED if native else FULL  # emulated (before Ampere: T4, V100) is slower than float32
    if accelerator in ("cpu", "auto"):
        return MIXED if cpu_computes_bf16() else FULL
    return FULL  # other accelerators (mps, tpu): Lightning's float32 default


def resolve_precision(trainer: DictConfig) -> str | None:
    """Replace ``trainer.precision=auto`` in place by :func:`hardware_precision`; returns what was
    chosen, or None when the config names a precision itself."""
    if str(trainer.get("precision")) != AUTO:
        return None
    chosen = hardware_precision(str(trainer.get("accelerator", "auto")))
    with open_dict(trainer):
        trainer.precision = chosen
    return chosen
