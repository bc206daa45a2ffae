"""The commands every head has and their Hydra side: the ``train`` and ``evaluate`` apps built from a
head's contract (:mod:`~core.training.commands.apps`), the Hydra entry with the error convention
(:mod:`~core.training.commands.hydra_app`), the config check made before anything heavy is
imported (:mod:`~core.training.commands.config_check`), and the Hydra callbacks of sweeps: the
trials table (:mod:`~core.training.commands.trials`) and Optuna's log lines
(:mod:`~core.training.commands.optuna_logs`)."""
