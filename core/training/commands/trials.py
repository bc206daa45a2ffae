"""The table of a sweep's trials: ``trials.csv`` in the sweep directory, one row per job, with the
settings the sweep gave it and the metrics of its ``metrics.json``.

:class:`TrialsTable` is a Hydra callback (``hydra.callbacks.trials_table`` of the training
configs) that writes the table when a multirun ends, whatever the sweeper: Hydra's basic sweeper
(``-m model=vit_tiny,vit_small``) or the Optuna sweeper of ``hparams_search=...``, which also
writes the best trial's settings beside it (``optimization_results.yaml``). It reads what every
job left on disk (``.hydra/hydra.yaml``, ``.hydra/overrides.yaml``, ``metrics.json``), so it
works with any launcher; a job that wrote no metrics (it failed) has empty metric cells.
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
    """Writes ``filename`` in the sweep directory when a multirun ends (:func:`trial_rows`)."""

    def __init__(self, filename: str = "trials.csv") -> None:
        self.filename = filename

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        rows = trial_rows(sweep_dir, list(config.hydra.overrides.task), config.get("optimized_metric"))
        if rows:
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
