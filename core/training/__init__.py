"""The training machinery both heads share, apart from the blocks in :mod:`core`: the Hydra and
Lightning runner (:mod:`~core.training.runner`), the run's budget and plan
(:mod:`~core.training.budget`), checkpoint saving and loading, progress and throughput lines,
preemption and fault handling, atomic writes, the data cache, config validation and the
project's one-line errors.

Importing this package loads nothing; the modules that need Lightning or Hydra import them
themselves, so :func:`core.load_checkpoint` stays torch-only.
"""
