"""Dropout (Srivastava et al. 2014), the Transformer's residual dropout ``P_drop`` (Section 5.4),
with its random mask made from bulk integer draws on a CPU.

A dropout layer draws a random number for every activation. PyTorch's CPU Bernoulli sampler
draws them one at a time on one thread (MKL's vectorized sampler serves Intel CPUs only), which
makes a dropout layer cost many times the product that applies its mask
(``benchmarks.dropout_speed``).
:func:`dropout` cuts 64-bit draws into four 16-bit pieces, one per element of ``x``, and keeps an
element when the 15 low bits of its piece are at least ``k = round(p * 2**15)``: with probability
``1 - k / 2**15``. For 16-bit ``x`` (bfloat16, float16) the mask is built with integer operations
as the bit pattern of 0 or of the kept elements' scale ``2**15 / (2**15 - k)``; for wider ``x``
the pieces' 0 or 1 is converted to the dtype and scaled. Either way the scale is rounded to the
dtype of ``x``, as :func:`F.dropout` rounds its own, and one product applies the mask forward and
backward: inverted dropout, the expectation unchanged. The rate is ``p`` rounded to a multiple of
``2**-15``. On other devices, and inside ``torch.compile`` (which generates its own random
numbers), it is :func:`F.dropout`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

BITS = 15  # the low bits of each piece that decide (random_() leaves an int64's sign bit at 0)
LEVELS = 1 << BITS
PIECES = 4  # 16-bit pieces of a 64-bit draw


def scaled_keep_mask(x: Tensor, dropped: int) -> Tensor:
    """A tensor like ``x``: ``2**15 / (2**15 - dropped)`` with probability ``1 - dropped / 2**15``
    per element, else 0."""
    count = x.numel()
    draws = torch.empty((count + PIECES - 1) // PIECES, dtype=torch.int64, device=x.device).random_()
    low = draws.view(torch.int16)[:count].bitwise_and_(LEVELS - 1)  # (draws * 4,) -> (count,): uniform in [0, 2**15)
    scale = LEVELS / (LEVELS - dropped)
    if x.element_size() == 2:
        pattern = torch.tensor(scale, dtype=x.dtype).view(torch.int16).item()  # the scale's bit pattern
        dropped_sign = low.sub_(dropped).bitwise_right_shift_(BITS)  # -1 dropped, 0 kept
        mask = dropped_sign.bitwise_not_().bitwise_and_(pattern).view(x.dtype)
    else:
        mask = low.ge_(dropped).to(x.dtype).mul_(scale)  # 1 kept, 0 dropped; then the scale in x's dtype
    return mask.view(x.shape)


def dropout(x: Tensor, p: float, training: bool = True, inplace: bool = False) -> Tensor:
    """Inverted dropout of ``x`` at rate ``p`` (rounded to a multiple of ``2**-15`` on a CPU)."""
    if not training or p == 0.0:
        return x
    dropped = round(p * LEVELS)
    bulk = x.device.type == "cpu" and x.is_floating_point() and x.element_size() >= 2
    if not bulk or dropped == LEVELS or torch.compiler.is_compiling():
        return F.dropout(x, p, training=True, inplace=inplace)
    mask = scaled_keep_mask(x, dropped)
    return x.mul_(mask) if inplace else x * mask


class Dropout(nn.Dropout):
    """:class:`torch.nn.Dropout` computed by :func:`dropout`: the same arguments, checks and type
    (a module that sets ``layer.p`` on every ``nn.Dropout`` finds it)."""

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training, self.inplace)
