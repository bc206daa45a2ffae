"""The datamodule base both heads build on (:mod:`~core.training.data.budgeted`): the training
batch sized by the head's rule, kept in checkpoints, and loaders a resumed run continues."""
