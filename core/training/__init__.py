"""The training machinery both heads share, Lightning and Hydra only: the contract a head
implements (:mod:`~core.training.head`) and the two commands built from it
(:mod:`~core.training.apps`), the runner (:mod:`~core.training.runner`), the Hydra entry
(:mod:`~core.training.hydra_app`), the evaluation app, the run's budget and plan
(:mod:`~core.training.budget`) and the batch sizes that follow it
(:mod:`~core.training.batch_rule`), checkpoint saving, progress and throughput lines, preemption
and fault handling, and config validation.

What is neither Lightning nor Hydra lives beside it: the error type in :mod:`core.errors`, files
(atomic writes, checkpoint loading, the data cache) in :mod:`core.files`, and the argparse side
of the commands in :mod:`core.commands`.

Importing this package loads nothing; the modules that need Lightning or Hydra import them
themselves, so :func:`core.load_checkpoint` stays torch-only.
"""
