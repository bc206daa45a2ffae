"""How much a translation run regularizes, from how many passes over its corpus it plans: its
dropout, and its label smoothing where it is ``auto``.

Dropout (``P_drop = 0.1``, Section 5.4) trades slower fitting for less overfitting. The paper's
runs pass over their corpus many times; a run of minutes passes over a small corpus a few times and
is short of fitting, not of overfitting. Measured (docs/decisions.md, Translation): at 30 minutes
(about 12 passes over fr-en) a model without dropout overfits after the fifth pass and loses to
0.1; at 8 minutes (one to three passes) it is ahead on the long sentences and on the long
passages of three languages, and a little behind on the short messages (one seed each). So
``model.dropout: auto`` (of ``transformer_mini``, the preset of CPU budgets) follows :func:`dropout`:
none up to ``START_EPOCHS`` planned passes, ``FULL_DROPOUT`` from ``FULL_EPOCHS``, linear in
log(passes) between. Attention-weight dropout (``model.attn_dropout``) is a setting of its own.

A dropout layer costs the same at any rate above 0: it draws a random number for every
activation. ``core.dropout`` draws them in bulk, but a step with dropout is still slower than one
without (``benchmarks.translation_step`` times both; docs/translation.md, Speed of a training
step). A rate of a few thousandths regularizes next to nothing for that price, so the dropout
switches on only once the plan asks for ``MIN_DROPOUT``, and then follows the ramp; it stays on
after that, or the slower steps would shrink the plan below the threshold and switch it off again.

Label smoothing (``epsilon_ls = 0.1``, Section 5.4) is a regularizer too: it costs nothing per
step, and measured at equal steps (docs/results.md) hard targets led at about four passes over the
short messages, smoothing at ten, and the two split over two seeds at about one pass over the long
passages. ``module.label_smoothing: auto`` (of ``transformer_mini``) follows :func:`label_smoothing`,
the same ramp as the dropout's without a threshold: none up to ``START_EPOCHS`` planned passes,
``FULL_SMOOTHING`` from ``FULL_EPOCHS``. At 8 minutes it led 0.1 on the short messages (two seeds)
and on the long sentences, and was level on the long passages (docs/decisions.md, Translation).

:meth:`nlp.module.TranslationModule.follow_plan` reads the run's plan
(:func:`core.training.plan.budget.run_plan`) at the start of every epoch: a ``max_time`` run has no
dropout (and no auto smoothing) in its first epoch, and decides from a plan refined over it.
"""

from __future__ import annotations

from core.training.plan.lengths import ramp

START_EPOCHS = 3.0
FULL_EPOCHS = 10.0
FULL_DROPOUT = 0.1
MIN_DROPOUT = FULL_DROPOUT / 2  # the rate that switches the dropout on (about 5.5 planned passes)
FULL_SMOOTHING = 0.1


def dropout(epochs: float, in_force: float = 0.0) -> float:
    """The dropout of a run of ``epochs`` planned passes over its training corpus: the ramp, but 0
    while the ramp is under :data:`MIN_DROPOUT` and the run has no dropout on (``in_force``, the
    rate it has now, is 0)."""
    rate = FULL_DROPOUT * ramp(epochs, START_EPOCHS, FULL_EPOCHS)
    return rate if rate >= MIN_DROPOUT or in_force > 0 else 0.0


def label_smoothing(epochs: float) -> float:
    """The label smoothing of a run of ``epochs`` planned passes over its training corpus: the ramp
    from none at :data:`START_EPOCHS` to :data:`FULL_SMOOTHING` at :data:`FULL_EPOCHS`."""
    return FULL_SMOOTHING * ramp(epochs, START_EPOCHS, FULL_EPOCHS)
