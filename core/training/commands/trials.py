"""The table of a sweep's trials: ``trials.csv`` in the sweep directory, one row per job, with the
settings the sweep gave it and the metrics of its ``metrics.json``.

:class:`TrialsTable` is a Hydra callback (``hydra.callbacks.trials_table`` of the training
configs) that writes the table when a multirun ends, whatever the sweeper: Hydra's basic sweeper
(``-m model=vit_tiny,vit_small``) or the Optuna sweeper of ``hparams_search=...``, which also
writes the best trial's settings beside it (``optimization_results.yaml``). It reads what every
job left on disk (``.hydra/hydra.yaml``, ``.hydra/overrides.yaml``, ``metrics.json``), so it
works with any launcher; a job that wrote no metrics (it failed) has empty metric cells. Jobs run
in this process rewrite it as each ends, so a sweep that a failed job stops keeps it too.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from core.files.atomic import atomic_path


class TrialsTable(Callback):
    """Writes ``filename`` in the sweep directory (:func:`trial_rows`) when a multirun ends, and
    after each of its jobs run in this process (Hydra's basic launcher, the Optuna sweeper's): a
    sweep that a failed job ends (the basic sweeper raises its first failure once every job has
    run, and never reaches its end) keeps the table of every job."""

    def __init__(self, filename: str = "trials.csv") -> None:
        self.filename = filename
        self.command_line: list[str] | None = None  # the multirun's overrides, once it has started here

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.command_line = list(config.hydra.overrides.task)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        if self.command_line is not None:
            self.write(Path(config.hydra.sweep.dir), self.command_line, config.get("optimized_metric"))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self.write(Path(config.hydra.sweep.dir), list(config.hydra.overrides.task), config.get("optimized_metric"))

    def write(self, sweep_dir: Path, command_line: list[str], metric: str | None) -> None:
        """The table of the jobs under ``sweep_dir`` so far, if any."""
        if rows := trial_rows(sweep_dir, command_line, metric):
            write_table(sweep_dir / self.filename, rows)


def trial_rows(sweep_dir: Path, command_line: list[str], metric: str | None = None) -> list[dict[str, Any]]:
    """One row per job under ``sweep_dir``, in job order: ``job``; the settings the sweep chose
    (the job's overrides except those the command line fixed for every job); then the entries of
    any job's ``metrics.json``, ``metric`` (the optimized one) first, the others by name, empty
    where a job has none (it failed before writing them)."""
    parser = OverridesParser.create()
    fixed = {override.key_or_group for override in parser.parse_overrides(command_line) if not override.is_sweep_override()}
    jobs = []
    for overrides_file in sweep_dir.glob("**/.hydra/overrides.yaml"):
        job_dir = overrides_file.parent.parent
        lines = list(OmegaConf.load(overrides_file))
        settings = {
            override.key_or_group: line.partition("=")[2]
            for override, line in zip(parser.parse_overrides(lines), lines)
            if override.key_or_group not in fixed
        }
        metrics_file = job_dir / "metrics.json"
        metrics = json.loads(metrics_file.read_text()) if metrics_file.is_file() else {}
        jobs.append((OmegaConf.load(job_dir / ".hydra" / "hydra.yaml").hydra.job.num, settings, metrics))
    names = sorted({name for _, _, metrics in jobs for name in metrics}, key=lambda name: (name != metric, name))
    return [
        {"job": job, **settings, **{name: metrics.get(name, "") for name in names}}
        for job, settings, metrics in sorted(jobs, key=lambda job: job[0])
    ]


def write_table(path: Path, rows: list[dict[str, Any]]) -> None:
    """``rows`` as CSV, the columns in order of first appearance; a value a row lacks is empty."""
    columns = list(dict.fromkeys(column for row in rows for column in row))
    with atomic_path(path) as tmp, tmp.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
