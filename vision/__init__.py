"""Vision Transformer head: the ViT model on the shared core, image data, training and inspection.

``from vision import VisionTransformer`` loads the model (and timm) on first use, so that the
commands under ``vision`` refuse a bad command line before paying for those imports.
"""

from __future__ import annotations

from typing import Any

__all__ = ["VisionTransformer"]


def __getattr__(name: str) -> Any:
    """``vision.VisionTransformer``, imported when first asked for (PEP 562)."""
    if name == "VisionTransformer":
        from vision.model import VisionTransformer

        return VisionTransformer
    raise AttributeError(f"module 'vision' has no attribute {name!r}")
