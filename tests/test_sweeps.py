"""Sweeps: the ``hparams_search=`` presets of the Optuna sweeper (conf/hparams_search/) and the
table of every sweep's trials (core.training.commands.trials)."""

from __future__ import annotations

import csv
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from core.training.commands.optuna_logs import OptunaLogs
from core.training.commands.trials import TrialsTable, trial_rows, write_table
from tests.command_runs import ROOT, TINY_VISION_RUN, run_command


@pytest.mark.parametrize(
    ("head", "direction", "searched"),
    [
        ("vision", "maximize", {"module.lr", "module.weight_decay", "model.drop_path", "module.label_smoothing"}),
        ("nlp", "minimize", {"module.lr", "module.weight_decay", "model.dropout"}),
    ],
)
def test_each_head_has_a_search_laid_over_a_per_trial_budget(head: str, direction: str, searched: set[str]) -> None:
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(head, overrides=[f"hparams_search={head}_optuna"], return_hydra_config=True)
    sweeper = cfg.hydra.sweeper
    assert sweeper._target_.endswith("OptunaSweeper") and cfg.hydra.mode.name == "MULTIRUN"
    assert sweeper.direction == direction  # from optimized_mode
    assert set(sweeper.params) == searched
    assert (cfg.trainer.max_time, cfg.trainer.max_epochs) == ("00:00:10:00", None)  # the time alone ends a trial
    assert cfg.hydra.callbacks.trials_table._target_ == "core.training.commands.trials.TrialsTable"
    assert cfg.hydra.callbacks.optuna_logs._target_ == "core.training.commands.optuna_logs.OptunaLogs"


def test_optunas_lines_go_through_the_sweeps_logging_warnings_only(caplog: pytest.LogCaptureFixture) -> None:
    optuna = pytest.importorskip("optuna")
    OptunaLogs().on_multirun_start(config=None)
    with caplog.at_level(logging.INFO):
        optuna.create_study(study_name="quiet")  # logs "A new study created ..." at INFO
        optuna.logging.get_logger("optuna.study").warning("a trial could not be recorded")
    assert [record.getMessage() for record in caplog.records if record.name.startswith("optuna")] == [
        "a trial could not be recorded"
    ]
    assert optuna.logging._default_handler not in logging.getLogger("optuna").handlers  # no second copy on stderr


def test_the_trials_table_has_each_jobs_settings_and_metrics(tmp_path: Path) -> None:
    command_line = ["data=synthetic", "model=vit_tiny,vit_small", "hparams_search=vision_optuna"]
    jobs = [
        (["module.lr=0.001", "data=synthetic", "model=vit_tiny", "hparams_search=vision_optuna"], None),  # failed
        (["module.lr=0.002", "data=synthetic", "model=vit_small", "hparams_search=vision_optuna"], {"fit_seconds": 3.0, "val/acc": 0.5}),
    ]
    for number, (overrides, metrics) in enumerate(jobs):
        job_dir = tmp_path / str(number)
        (job_dir / ".hydra").mkdir(parents=True)
        (job_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
        (job_dir / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"job": {"num": number}}}))
        if metrics is not None:
            (job_dir / "metrics.json").write_text(json.dumps(metrics))
    rows = trial_rows(tmp_path, command_line, metric="val/acc")
    assert rows == [
        {"job": 0, "module.lr": "0.001", "model": "vit_tiny", "val/acc": "", "fit_seconds": ""},
        {"job": 1, "module.lr": "0.002", "model": "vit_small", "val/acc": 0.5, "fit_seconds": 3.0},
    ]
    write_table(tmp_path / "trials.csv", rows)
    with (tmp_path / "trials.csv").open() as file:
        table = list(csv.DictReader(file))
    assert [row["val/acc"] for row in table] == ["", "0.5"]
    assert list(table[0]) == ["job", "module.lr", "model", "val/acc", "fit_seconds"]  # the optimized metric first


def test_the_table_is_written_as_each_job_ends_so_a_sweep_a_failed_job_stops_keeps_it(tmp_path: Path) -> None:
    """Hydra's basic sweeper raises a failed job's error once every job has run, and the multirun
    never ends: the table written after each job is all the sweep leaves."""
    sweep = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}, "overrides": {"task": ["module.lr=0.002,1e9"]}}})
    table = TrialsTable()
    table.on_multirun_start(sweep)
    for number, (lr, metrics) in enumerate([("0.002", {"val/acc": 0.5}), ("1e9", {"diverged": True})]):
        job_dir = tmp_path / str(number)
        (job_dir / ".hydra").mkdir(parents=True)
        (job_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"module.lr={lr}"]))
        (job_dir / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"job": {"num": number}}}))
        (job_dir / "metrics.json").write_text(json.dumps(metrics))
        job = OmegaConf.merge(sweep, {"optimized_metric": "val/acc", "hydra": {"overrides": {"task": [f"module.lr={lr}"]}}})
        table.on_job_end(job, job_return=None)
        with (tmp_path / "trials.csv").open() as file:
            assert [row["module.lr"] for row in csv.DictReader(file)] == ["0.002", "1e9"][: number + 1]
    with (tmp_path / "trials.csv").open() as file:
        assert [(row["val/acc"], row["diverged"]) for row in csv.DictReader(file)] == [("0.5", ""), ("", "True")]


def vision_search(tmp_path: Path, *overrides: str) -> tuple[str, Path, list[dict[str, str]]]:
    """``python -m vision.train hparams_search=vision_optuna`` on the tiny run with ``overrides``:
    its output, its sweep directory and the rows of its ``trials.csv``."""
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    sweep_dir = tmp_path / "sweep"
    output = run_command(
        "vision.train", "hparams_search=vision_optuna", *TINY_VISION_RUN, "logger=csv", *overrides, f"hydra.sweep.dir={sweep_dir}"
    )
    with (sweep_dir / "trials.csv").open() as file:
        return output, sweep_dir, list(csv.DictReader(file))


@pytest.mark.slow
def test_a_vision_search_runs_its_trials_and_writes_the_best_and_the_table(tmp_path: Path) -> None:
    output, sweep_dir, trials = vision_search(tmp_path, "trainer.max_steps=2", "hydra.sweeper.n_trials=3")
    assert output.count("Study name: vision") == 1 and "A new study created" not in output  # said once, by the sweeper
    assert sorted(path.name for path in sweep_dir.iterdir() if path.is_dir()) == ["0", "1", "2"]
    results = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    assert [trial["job"] for trial in trials] == ["0", "1", "2"]
    # model.drop_path=0.0 of the command line takes it out of the search: fixed in every trial, no column.
    searched = {"module.lr", "module.weight_decay", "module.label_smoothing"}
    assert set(results["best_params"]) == searched and searched < set(trials[0]) and "model.drop_path" not in trials[0]
    assert list(trials[0])[len(searched) + 1] == "val/acc"  # the optimized metric first
    assert results["best_value"] == max(float(trial["val/acc"]) for trial in trials)
    for trial in trials:  # each trial ran with the settings the table gives it, over its own budget
        config = yaml.safe_load((sweep_dir / trial["job"] / ".hydra" / "config.yaml").read_text())
        assert config["module"]["lr"] == pytest.approx(float(trial["module.lr"]))
        assert config["trainer"]["max_time"] == "00:00:10:00" and trial["optimizer_steps"] == "2"
    best = results["best_params"]
    assert any(all(float(trial[name]) == pytest.approx(value) for name, value in best.items()) for trial in trials)


@pytest.mark.slow
def test_a_trial_that_diverges_is_recorded_and_the_search_goes_on(tmp_path: Path) -> None:
    _, sweep_dir, trials = vision_search(
        tmp_path, "trainer.max_steps=4", "module.lr=choice(0.002, 1e9)", "callbacks.divergence.max_rewinds=0",  # 1e9 diverges at once
        "hydra.sweeper.n_trials=4",
    )
    assert len(trials) == 4
    diverged = [trial for trial in trials if trial["diverged"] == "True"]
    assert diverged and all(float(trial["module.lr"]) == 1e9 and trial["val/acc"] == "" for trial in diverged)
    assert len(diverged) < 4
    results = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    assert results["best_params"]["module.lr"] == 0.002


@pytest.mark.slow
def test_a_trial_whose_settings_are_refused_is_recorded_and_the_search_goes_on(tmp_path: Path) -> None:
    output, _, trials = vision_search(
        tmp_path, "trainer.max_steps=2", "module.label_smoothing=choice(0.1, 1.5)",  # 1.5 is refused by the config check
        "hydra.sweeper.n_trials=4",
    )
    assert len(trials) == 4, output
    refused = [trial for trial in trials if float(trial["module.label_smoothing"]) == 1.5]
    assert refused and all(trial["val/acc"] == "" for trial in refused)
    assert all(trial["val/acc"] != "" for trial in trials if trial not in refused)


@pytest.mark.slow
def test_a_search_whose_every_trial_is_refused_ends_in_one_error_line(tmp_path: Path) -> None:
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    completed = subprocess.run(
        [sys.executable, "-m", "vision.train", "hparams_search=vision_optuna", *TINY_VISION_RUN, "trainer.max_steps=2",
         "module.label_smoothing=choice(1.5, 2.0)", "hydra.sweeper.n_trials=2", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    errors = [line for line in completed.stderr.splitlines() if line.startswith("error:")]
    assert completed.returncode == 2 and "Traceback" not in completed.stderr, completed.stderr[-3000:]
    assert errors == ["error: no trial of the search completed: each was refused or failed (the log's 'Failed experiment' "
                      "lines say why)"], completed.stderr[-3000:]
