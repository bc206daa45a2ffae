"""Dropout (Srivastava et al. 2014), the Transformer's residual dropout ``P_drop`` (Section 5.4),
with its random mask made from bulk integer draws on a CPU.

A dropout layer draws a random number for every activation. PyTorch's CPU Bernoulli sampler
draws them one at a time on one thread (MKL's vectorized sampler serves Intel CPUs only), which
makes a dropout layer cost many times the product that applies its mask
(``benchmarks.dropout_speed``).
:func:`dropout` cuts 64-bit draws into pieces as wide as an element of ``x`` (four per draw for
bfloat16) and keeps an element when the 15 low bits of its piece are at least
``k = round(p * 2**15)``: with probability ``1 - k / 2**15``. The mask is built with integer
operations as the bit pattern of 0 or of the kept elements' scale ``2**15 / (2**15 - k)`` in the
dtype of ``x`` (rounded to that dtype, as :func:`F.dropout` rounds its own), so one product applies
it forward and backward: inverted dropout, the expectation unchanged. The rate is ``p`` rounded to
a multiple of ``2**-15``. On other devices, and inside ``torch.compile`` (which generates its own
random numbers), it is :func:`F.dropout`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

BITS = 15  # the low bits of each piece that decide (random_() leaves an int64's sign bit at 0)
LEVELS = 1 << BITS
PIECE = {2: torch.int16, 4: torch.int32, 8: torch.int64}  # element size in bytes -> integer of that width


def scaled_keep_mask(x: Tensor, dropped: int) -> Tensor:
    """A tensor like ``x``: ``2**15 / (2**15 - dropped)`` with probability ``1 - dropped / 2**15``
    per element, else 0."""
    piece = PIECE[x.element_size()]
    per_draw = 8 // x.element_size()
    count = x.numel()
    draws = torch.empty((count + per_draw - 1) // per_draw, dtype=torch.int64, device=x.device).random_()
    scale = torch.tensor(LEVELS / (LEVELS - dropped), dtype=x.dtype).view(piece).item()  # its bit pattern
    pieces = draws.view(piece)[:count]  # (draws * per_draw,) -> (count,)
    low = pieces.bitwise_and_(LEVELS - 1)  # uniform in [0, 2**15)
    dropped_sign = low.sub_(dropped).bitwise_right_shift_(8 * x.element_size() - 1)  # -1 dropped, 0 kept
    return dropped_sign.bitwise_not_().bitwise_and_(scale).view(x.dtype).view(x.shape)


def dropout(x: Tensor, p: float, training: bool = True, inplace: bool = False) -> Tensor:
    """Inverted dropout of ``x`` at rate ``p`` (rounded to a multiple of ``2**-15`` on a CPU)."""
    if not training or p == 0.0:
        return x
    dropped = round(p * LEVELS)
    bulk = x.device.type == "cpu" and x.is_floating_point() and x.element_size() in PIECE
    if not bulk or dropped == LEVELS or torch.compiler.is_compiling():
        return F.dropout(x, p, training=True, inplace=inplace)
    mask = scaled_keep_mask(x, dropped)
    return x.mul_(mask) if inplace else x * mask


class Dropout(nn.Dropout):
    """:class:`torch.nn.Dropout` computed by :func:`dropout`: the same arguments, checks and type
    (a module that sets ``layer.p`` on every ``nn.Dropout`` finds it)."""

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training, self.inplace)
