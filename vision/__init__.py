"""Vision Transformer head: the ViT model on the shared core, image data, training and inspection."""

from vision.model import VisionTransformer

__all__ = ["VisionTransformer"]
