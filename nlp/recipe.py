"""How much a translation run regularizes, from how many passes over its corpus it plans.

Dropout (``P_drop = 0.1``, Section 5.4) trades slower fitting for less overfitting. The paper's
runs pass over their corpus many times; a run of minutes passes over a small corpus a few times and
is short of fitting, not of overfitting. Measured (docs/decisions.md, Translation): at 30 minutes
(about 12 passes over fr-en) a model without dropout overfits after the fifth pass and loses to
0.1; at 8 minutes (one to three passes) it is ahead on the long sentences and on the long
passages of three languages, and a little behind on the short messages (one seed each). So
``model.dropout: auto`` (of ``transformer_mini``, the preset of CPU budgets) follows :func:`dropout`: none up to ``START_EPOCHS`` planned passes,
``FULL_DROPOUT`` from ``FULL_EPOCHS``, linear in log(passes) between. Attention-weight dropout
(``model.attn_dropout``) is a setting of its own.

:meth:`nlp.module.TranslationModule.follow_plan` reads the run's plan
(:func:`core.training.plan.budget.run_plan`) at the start of every epoch, and a ``max_time`` run
from the moment its first steps are timed.
"""

from __future__ import annotations

from core.training.plan.lengths import ramp

START_EPOCHS = 3.0
FULL_EPOCHS = 10.0
FULL_DROPOUT = 0.1


def dropout(epochs: float) -> float:
    """The dropout of a run of ``epochs`` planned passes over its training corpus."""
    return FULL_DROPOUT * ramp(epochs, START_EPOCHS, FULL_EPOCHS)
