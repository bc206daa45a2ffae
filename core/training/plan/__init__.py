"""The run's plan: the budget (``max_epochs``, ``max_steps`` or ``max_time``) turned into the
optimizer steps the schedule is laid over (:mod:`~core.training.plan.budget`), and the batch a
head's rule sizes from that budget and the measured pace (:mod:`~core.training.plan.batch_rule`)."""
