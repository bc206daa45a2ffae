"""The Vision Transformer and its parts: patch embedding (:mod:`~vision.model.patch_embed`), the
model (:mod:`~vision.model.vision_transformer`), timm weights read into it
(:mod:`~vision.model.timm_weights`), the convolutional stem (:mod:`~vision.model.conv_stem`) and
flip test-time augmentation (:mod:`~vision.model.flip`).

``from vision.model import VisionTransformer`` is the model's public import path.
"""

from vision.model.vision_transformer import VisionTransformer

__all__ = ["VisionTransformer"]
