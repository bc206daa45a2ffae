"""A convolutional stem in place of the patch embedding (Xiao et al. 2021, "Early Convolutions
Help Transformers See Better", Section 3): stride-2 3x3 convolutions, each followed by batch norm
and ReLU, down to the patch grid, then a 1x1 convolution to the model width. For patch size P it
has log2(P) stride-2 convolutions, so the tokens and the grid are those of the patch embedding;
the width doubles at each convolution, ending at half the model width. ``convs_per_stage`` above 1
follows each stride-2 convolution with stride-1 3x3 ones of its width (a deeper stem, as the
ResNet-C stem of He et al. 2019, "Bag of Tricks", Section 4.2): a wider receptive field per
token."""

from __future__ import annotations

import math

from torch import nn

from vision.model.patch_embed import PatchEmbed


def conv_bn_relu(in_chans: int, out_chans: int, stride: int = 2) -> nn.Sequential:
    """A 3x3 convolution (no bias: the norm has one), batch norm, ReLU."""
    return nn.Sequential(
        nn.Conv2d(in_chans, out_chans, kernel_size=3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(out_chans),
        nn.ReLU(inplace=True),
    )


class ConvStem(PatchEmbed):
    """Tokens from log2(P) stride-2 convolutions (``stem``) and a 1x1 projection ``proj``, in
    :class:`PatchEmbed`'s place in its forward pass: the same inputs, checks, grid and shapes.

    Args: as :class:`PatchEmbed`; ``patch_size`` must be a power of two (at least 2).
        ``convs_per_stage``: 3x3 convolutions per halving of the grid, the first of stride 2 and
        the rest of stride 1 (1: Xiao et al.'s stem).
    """

    def __init__(
        self,
        img_size: int | tuple[int, int],
        patch_size: int,
        in_chans: int,
        dim: int,
        dynamic_img_size: bool = False,
        convs_per_stage: int = 1,
    ) -> None:
        super().__init__(img_size, patch_size, in_chans, dim, dynamic_img_size)
        depth = int(math.log2(patch_size))
        if patch_size < 2 or 2**depth != patch_size:
            raise ValueError(
                f"a convolutional stem needs a patch size that is a power of two (2, 4, 8, 16), got "
                f"{patch_size}; set model.patch_size to one or use model.stem=patch"
            )
        if convs_per_stage < 1:
            raise ValueError(
                f"a convolutional stem needs at least one convolution per stage, got convs_per_stage="
                f"{convs_per_stage}; set model.stem_convs to 1 or more"
            )
        # Widths double up to dim / 2 at the last stage: dim/4, then dim/2, for P = 4.
        widths = [max(dim // 2 ** (depth - i), 8) for i in range(depth)]
        layers = []
        for c_in, c_out in zip([in_chans, *widths], widths):
            layers.append(conv_bn_relu(c_in, c_out))
            layers.extend(conv_bn_relu(c_out, c_out, stride=1) for _ in range(convs_per_stage - 1))
        self.stem = nn.Sequential(*layers)
        self.proj = nn.Conv2d(widths[-1], dim, kernel_size=1)
