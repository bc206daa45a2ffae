"""``data.max_tokens=auto``: the token budget of a training batch, sized from the run's budget.

The rule: a batch holds ``B = max(1024, sqrt(T / 8))`` padded tokens, where ``T`` is the number of
tokens the budget will train, so the run takes ``T / B`` optimizer steps: every budget up to
``T = 8M`` tokens (about an hour of ``transformer_mini`` on 2 CPU cores) is spent on 1,024-token
batches, and a larger one grows batch and updates together, each as the square root of the budget
(``8 B`` steps). ``T`` is the smaller of ``max_epochs`` times the tokens of an epoch and, for
``max_time``, the measured pace (padded tokens per second of forward and backward passes on a
batch of the training data, on the run's device and precision) times the seconds. ``B`` is
rounded down to a multiple of 64 and kept within [:data:`MIN_TOKENS`, :data:`MAX_TOKENS`]; with
neither bound (``max_steps`` alone) it is :data:`STEPS_ONLY_TOKENS`, fairseq's usual
``--max-tokens``. Under data parallelism ``T`` and the pace are the whole job's and ``B`` is
shared: each of ``W`` processes batches ``B / W`` tokens (a multiple of 64, at least
:data:`MIN_TOKENS`), so the job still takes ``T / B`` steps, or ``T / (W * MIN_TOKENS)`` where that
floor binds. Gradient accumulation over ``k`` batches (``trainer.accumulate_grad_batches``) makes
steps of ``k`` such batches: ``T / (k B)`` steps.

Why: a short budget is spent best on many small updates, a long one on larger, less noisy batches
(the critical batch grows as training goes, McCandlish et al. 2018). Measured on 2 CPU cores with
``transformer_mini`` (BENCHMARKS.md): at 8 minutes 1,024-token batches reached 12.3 test BLEU on
gettext en-de where 2,048 reached 8.3, and 1,280 reached 17.1 on long Spanish sentences where
2,048 reached 12.2; at 30 minutes on gettext fr-en 1,024 reached 39.6, 1,600 39.1 and 2,900 36.8.
Below 1,024 tokens a batch holds a few dozen sentences and a device does less per second. An
hour of a GPU that trains 150k tokens a second gives about 8k-token batches and 65k steps. The
choice is logged, and kept in checkpoints so that a resumed run batches as the interrupted one did.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch

from core.training.plan.batch_rule import BatchRule, choose_batch
from core.training.plan.batch_rule import measure_pace as pace_of
from nlp.data.batching import token_budget_batches

MIN_TOKENS = 1024
MAX_TOKENS = 32768
MULTIPLE = 64
STEPS_PER_TOKEN = 8  # above the floor, a run takes 8 optimizer steps per token of its batch
STEPS_ONLY_TOKENS = 4096
PROBE_TOKENS = 2048

Batch = dict[str, torch.Tensor]


def tokens_for_budget(budget_tokens: float) -> int:
    """``sqrt(budget_tokens / STEPS_PER_TOKEN)``, rounded down to a multiple of 64, within the bounds."""
    tokens = int(math.sqrt(max(budget_tokens, 0.0) / STEPS_PER_TOKEN)) // MULTIPLE * MULTIPLE
    return min(MAX_TOKENS, max(MIN_TOKENS, tokens))


def per_process(tokens: int, world_size: int) -> int:
    """Each of ``world_size`` processes' share of a batch of ``tokens``: a multiple of 64, at
    least :data:`MIN_TOKENS` (what one device does well)."""
    return max(MIN_TOKENS, tokens // world_size // MULTIPLE * MULTIPLE)


def rule(world_size: int) -> BatchRule:
    """The rule for a job of ``world_size`` processes: the budget and the pace are the whole job's
    (every process's tokens), the batch each process's share of the rule's."""
    processes = f" on {world_size} processes" if world_size > 1 else ""
    return BatchRule(
        setting="data.max_tokens",
        unit="tokens",
        probe=PROBE_TOKENS,
        for_budget=lambda tokens: per_process(tokens_for_budget(tokens), world_size),
        steps_only=STEPS_ONLY_TOKENS,
        formula=lambda tokens, sources: (
            f"max({MIN_TOKENS}, sqrt({tokens:,.0f} tokens the budget trains / {STEPS_PER_TOKEN}): {sources})"
        ),
        pace_words=lambda pace, probed: f"{pace:,.0f} tokens/s{processes} (measured on {probed}-token batches)",
    )


def measure_pace(module: Any, trainer: pl.Trainer, batch: Batch) -> float:
    """Padded tokens per second of forward and backward passes of ``module.loss`` on ``batch``
    (:func:`core.training.plan.batch_rule.measure_pace`)."""
    batch = {key: value.to(module.device) for key, value in batch.items()}
    tokens = batch["source"].shape[0] * max(batch["source"].shape[1], batch["target"].shape[1] - 1)
    return pace_of(module, trainer, lambda: module.loss(batch)[0], tokens)


def probe_batch(lengths: np.ndarray, max_tokens: int, make_batch: Callable[[list[int]], Batch]) -> Batch:
    """A batch of ``max_tokens`` of sentences of the median length."""
    batches = token_budget_batches(lengths, max_tokens, np.argsort(lengths, kind="stable"))
    return make_batch(batches[len(batches) // 2].tolist())


def auto_max_tokens(
    trainer: pl.Trainer,
    module: Any,
    lengths: np.ndarray,
    make_batch: Callable[[list[int]], Batch],
) -> int:
    """Each process's token budget of a training batch for this run (the rule of the module
    docstring, through :func:`core.training.plan.batch_rule.choose_batch`): ``lengths`` are the
    training examples' sizes as the batch sampler counts them, and ``make_batch`` collates
    examples by index. Every process uses the first one's choice; the pace measured on it counts
    for every process of the job."""
    world = trainer.world_size
    return choose_batch(
        rule(world), trainer, int(lengths.sum()),
        lambda tokens: world * measure_pace(module, trainer, probe_batch(lengths, tokens, make_batch)),
    )
