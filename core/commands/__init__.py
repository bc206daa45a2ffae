"""What every command of both heads shares, apart from Hydra: the error convention
(:mod:`~core.commands.exit`) and the argparse parser, types and ``--device`` option
(:mod:`~core.commands.arguments`), and the log lines of the libraries through the command's own
handlers (:mod:`~core.commands.logs`). Loads no torch until a device is chosen."""
