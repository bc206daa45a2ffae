"""Flip test-time augmentation: a classifier's logits averaged with those of the mirrored images,
what :meth:`vision.module.ImageClassifier.classify` computes under ``flip_tta`` and what an export
of such a checkpoint holds."""

from __future__ import annotations

from torch import Tensor, nn


def flip_averaged(net: nn.Module, images: Tensor) -> Tensor:
    """The logits [B, num_classes] of ``net`` on ``images`` [B, C, H, W], averaged with those of
    the images mirrored along the width."""
    return (net(images) + net(images.flip(-1))) / 2


class FlipAveraged(nn.Module):
    """``net`` answering :func:`flip_averaged` logits (the network an export writes)."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, images: Tensor) -> Tensor:
        return flip_averaged(self.net, images)
