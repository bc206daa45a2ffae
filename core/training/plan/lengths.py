"""Settings that grow with a run's planned length: regularization pays only when a run is long
enough to overfit (the same examples seen again and again), so the heads size theirs to the
planned epochs (and steps) of :func:`core.training.plan.budget.run_plan`. Plain Python: the config
checks import it before torch."""

from __future__ import annotations

import math


def ramp(length: float, start: float, full: float) -> float:
    """0 up to a ``length`` (epochs or steps) of ``start``, 1 from ``full`` on, linear in
    log(length) between."""
    if not length > start:  # NaN included
        return 0.0
    return min(1.0, math.log(length / start) / math.log(full / start))
