"""What the blocks accept, stated once and without torch.

The blocks check their arguments with these objects (``DropPath`` with :data:`FRACTION`,
``MultiHeadAttention`` with :func:`require_head_width`, ...), and the training commands check a
composed config with the same ones before torch is imported (``core.training.commands.config_check``), so
a rule and its words live in one place. A check raises ``ValueError`` naming the value as the
caller calls it: an argument name in a block, a config key in a config check.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

AUTO = "auto"  # a value the head sizes itself (to the run's length, the device, the image size)
ACTIVATIONS = {"relu": "ReLU", "gelu": "GELU"}  # name -> torch.nn class (core.feedforward.make_activation)


def value_text(value: Any) -> str:
    """A value as a user wrote it: null, 'text', 3."""
    return "null" if value is None else repr(value) if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class Check:
    """A test of one value and the words for what it requires."""

    requirement: str
    test: Callable[[Any], bool]

    def require(self, value: Any, name: str, error: type[ValueError] = ValueError) -> None:
        """Raise ``error("<name> must be <requirement>, got <value>")`` unless ``value`` passes."""
        if not self.test(value):
            raise error(f"{name} must be {self.requirement}, got {value_text(value)}")


def is_number(value: Any) -> bool:
    """A finite real number (Python or numpy), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def whole(least: int) -> Check:
    """An integer of at least ``least``."""
    return Check(
        f"a whole number of at least {least}",
        lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= least,
    )


def optional(check: Check) -> Check:
    """``check``, or null."""
    return Check(f"{check.requirement} or null", lambda v: v is None or check.test(v))


def or_auto(check: Check) -> Check:
    """``check``, or ``auto`` (sized by the head, e.g. to the run's length)."""
    return Check(f"{check.requirement}, or auto", lambda v: v == AUTO or check.test(v))


def or_minus_one(check: Check) -> Check:
    """``check``, or -1 for no limit."""
    return Check(f"{check.requirement}, or -1 for no limit", lambda v: v == -1 or check.test(v))


def one_of(names: tuple[Any, ...]) -> Check:
    """One of ``names``."""
    return Check(f"one of {', '.join(map(str, names))}", lambda v: v in names)


POSITIVE_INT = whole(1)
NON_NEGATIVE_INT = whole(0)
POSITIVE = Check("a number above 0", lambda v: is_number(v) and v > 0)
NON_NEGATIVE = Check("a number of at least 0", lambda v: is_number(v) and v >= 0)
FRACTION = Check("a number in [0, 1)", lambda v: is_number(v) and 0 <= v < 1)
PROBABILITY = Check("a number in [0, 1]", lambda v: is_number(v) and 0 <= v <= 1)
DECAY = Check("a number in (0, 1]", lambda v: is_number(v) and 0 < v <= 1)
ABOVE_ONE = Check("a number above 1", lambda v: is_number(v) and v > 1)
ACTIVATION = one_of(tuple(ACTIVATIONS))


def require_head_width(dim: int, num_heads: int, names: tuple[str, str] = ("dim", "num_heads")) -> None:
    """``dim`` splits evenly over ``num_heads`` attention heads (Section 3.2.2: d_k = d_model / h)."""
    if dim % num_heads:
        divisors = [h for h in range(1, dim + 1) if dim % h == 0]
        nearest = min(divisors, key=lambda h: abs(h - num_heads))
        raise ValueError(
            f"{names[0]}={dim} is not divisible by {names[1]}={num_heads}, so the heads cannot share the width "
            f"evenly; set {names[1]}={nearest} or {names[0]}={max(num_heads, round(dim / num_heads) * num_heads)}"
        )


def require_sincos_width(dim: int, num_heads: int = 1, name: str = "dim", other_fix: str = "") -> None:
    """``dim`` is a multiple of 4 for fixed 2D sin-cos positions (``core.sincos_2d``: sin and cos
    of the column and of the row, a quarter of the width each); the suggested width also splits
    over ``num_heads``."""
    if dim % 4:
        step = math.lcm(4, num_heads)
        raise ValueError(
            f"{name}={dim} is not a multiple of 4, which the fixed 2D sin-cos positions need; "
            f"set {name}={max(step, round(dim / step) * step)}{other_fix}"
        )
