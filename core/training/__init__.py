"""The training machinery both heads share, Lightning and Hydra only, in rooms:

- :mod:`~core.training.head`: the contract a head implements;
- :mod:`~core.training.runner` and :mod:`~core.training.evaluation`: the one training routine and
  the evaluation of a checkpoint;
- :mod:`~core.training.commands`: the ``train`` and ``evaluate`` apps built from a head, the Hydra
  entry, the config check, the Hydra callbacks of sweeps;
- :mod:`~core.training.plan`: the run's budget, the schedule's steps and the batch sized from them;
- :mod:`~core.training.callbacks`: checkpoints, divergence, preemption, progress, throughput, seeds;
- :mod:`~core.training.data`: the datamodule base both heads build on.

What is neither Lightning nor Hydra lives beside it: the error type in :mod:`core.errors`, files
(atomic writes, checkpoint loading, the data cache) in :mod:`core.files`, the argparse side of the
commands and the routing of library logs in :mod:`core.commands`, and the resumable batch sampler
in :mod:`core.data`.

Importing this package loads nothing; the modules that need Lightning or Hydra import them
themselves, so :func:`core.load_checkpoint` stays torch-only.
"""
