"""A third head, written only against the contract of :mod:`core.training.head`: a sentence
classifier (which side of the toy parallel corpus a sentence comes from) on a ``core.Encoder``,
with its own datamodule, module, config rules and Hydra configs (``conf/``, composing the
project's shared groups through ``hydra.searchpath: [pkg://conf]``). It trains, checkpoints and
evaluates through the shared commands with no change to ``core``."""
