"""Patch embedding of ViT (Dosovitskiy et al. 2021, Eq. 1): split the image into P x P patches
and project each linearly to the model width."""

from __future__ import annotations

from torch import Tensor, nn

from vision.constraints import require_patch_grid


def as_pair(size: int | tuple[int, int] | list[int]) -> tuple[int, int]:
    """``32`` -> ``(32, 32)``; a (height, width) pair is returned as a tuple."""
    if isinstance(size, int):
        return size, size
    height, width = size
    return int(height), int(width)


class PatchEmbed(nn.Module):
    """``x_p E``: a convolution with kernel = stride = patch size is the same linear map applied to
    every non-overlapping patch, with weight ``proj`` named as in timm.

    Args:
        img_size: training image size (int or (height, width)); fixes the patch grid.
        patch_size: patch side P.
        in_chans: image channels C.
        dim: embedding width D.
        dynamic_img_size: accept any size divisible by the patch size instead of only ``img_size``.
    """

    def __init__(
        self,
        img_size: int | tuple[int, int],
        patch_size: int,
        in_chans: int,
        dim: int,
        dynamic_img_size: bool = False,
    ) -> None:
        super().__init__()
        self.img_size = as_pair(img_size)
        self.patch_size = patch_size
        self.in_chans = in_chans
        self.dynamic_img_size = dynamic_img_size
        require_patch_grid(self.img_size, patch_size)
        self.grid_size = (self.img_size[0] // patch_size, self.img_size[1] // patch_size)
        self.num_patches = self.grid_size[0] * self.grid_size[1]
        self.stem: nn.Module = nn.Identity()  # convolutions before the projection (vision.model.conv_stem)
        self.proj = nn.Conv2d(in_chans, dim, kernel_size=patch_size, stride=patch_size)

    def check_input(self, x: Tensor) -> None:
        """Refuse an input the patch grid cannot take, naming what to change."""
        if x.dim() != 4:
            raise ValueError(f"expected images [batch, channels, height, width], got shape {tuple(x.shape)}")
        channels, height, width = x.shape[1:]
        if channels != self.in_chans:
            raise ValueError(
                f"images have {channels} channels but the model expects in_chans={self.in_chans}; "
                "convert the images (e.g. to RGB) or build the model with that in_chans"
            )
        for side in (height, width):
            if side % self.patch_size != 0:
                raise ValueError(
                    f"image size {side} is not divisible by patch size {self.patch_size}; "
                    "resize or pad the images to a multiple of the patch size"
                )
        if not self.dynamic_img_size and (height, width) != self.img_size:
            raise ValueError(
                f"image size {height}x{width} differs from the model's img_size "
                f"{self.img_size[0]}x{self.img_size[1]}; resize the images or build the model with "
                "dynamic_img_size=True"
            )

    def forward(self, x: Tensor) -> tuple[Tensor, tuple[int, int]]:
        """Images [B, C, H, W] -> patch tokens [B, N, D] in row-major order and the grid (H/P, W/P)."""
        self.check_input(x)
        x = self.proj(self.stem(x))  # (B, D, H/P, W/P)
        grid = (x.shape[2], x.shape[3])
        return x.flatten(2).transpose(1, 2), grid  # (B, N, D)
