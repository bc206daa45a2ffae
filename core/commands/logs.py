"""The log lines of a command's libraries through the command's own handlers: each line once, on
the console and in the run directory's log file (``train.log``), none of them an advertisement.

``import lightning`` gives the ``lightning`` logger a console handler of its own (``INFO: ...``)
whatever the program configured, and its records still propagate to the root logger, where a
Hydra command has its console handler and its log file: every Lightning line came twice on the
console. Lightning's own rule (``lightning/pytorch/__init__.py``) is a handler of its own only for
programs that configured none; :func:`route_library_logs` applies that rule once Lightning is
imported, and sends Python's warnings the same way, so the log file has them too.
"""

from __future__ import annotations

import logging
import os
import warnings

# Lightning's packages under both of their names (``lightning.pytorch`` and ``pytorch_lightning``).
LIGHTNING_LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric", "pytorch_lightning", "lightning_fabric")
# The loggers of Lightning's ``rank_zero_info``, through which its tips come.
RANK_ZERO_LOGGERS = tuple(f"{package}.utilities.rank_zero" for package in LIGHTNING_LOGGERS[1:])


class NoAdvertisements(logging.Filter):
    """Drops Lightning's ``💡 Tip:`` lines, which advertise its cloud services (litlogger,
    litmodels) and which no setting turns off (Lightning-AI/pytorch-lightning#21294)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("💡 Tip:")


class WarningLines(logging.Filter):
    """A logged warning without the newline ``warnings.formatwarning`` ends it with (the handlers
    end each record with their own)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = str(record.msg).rstrip()  # logging.captureWarnings logs the text as the message (Python >= 3.11)
        if isinstance(record.args, tuple):  # or as the argument of "%s" (Python 3.10)
            record.args = tuple(arg.rstrip() if isinstance(arg, str) else arg for arg in record.args)
        return True


def route_library_logs() -> None:
    """When the root logger has handlers (a Hydra command's console and log file): remove the
    console handlers Lightning gave its own loggers and let their records propagate to the root,
    and log Python's warnings (logger ``py.warnings``), so each line is written once by each of
    the command's handlers; MLflow's too (``MLFLOW_CONFIGURE_LOGGING=false``, read when it is
    imported). Everywhere: quiet the database migrations (alembic), drop Lightning's tips and the
    deprecation warning that Lightning's own use of torch's ``LeafSpec`` raises in every run
    (nothing a user can change). Call it after Lightning is imported; calling it again changes
    nothing."""
    if logging.getLogger().handlers:
        for name in LIGHTNING_LOGGERS:
            logger = logging.getLogger(name)
            for handler in list(logger.handlers):
                if type(handler) is logging.StreamHandler:  # Lightning's console handler, not a file someone added
                    logger.removeHandler(handler)
            logger.propagate = True
        logging.captureWarnings(True)
        add_filter_once(logging.getLogger("py.warnings"), WarningLines)
        os.environ.setdefault("MLFLOW_CONFIGURE_LOGGING", "false")  # MLflow's lines propagate too, not to a handler of its own
    # Alembic, the schema migrations of MLflow's and Optuna's SQLite stores, logs every step at INFO.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    for name in RANK_ZERO_LOGGERS:
        add_filter_once(logging.getLogger(name), NoAdvertisements)
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated", category=FutureWarning)


def add_filter_once(logger: logging.Logger, kind: type[logging.Filter]) -> None:
    """Give ``logger`` a ``kind`` filter unless it has one."""
    if not any(isinstance(existing, kind) for existing in logger.filters):
        logger.addFilter(kind())
