"""benchmarks.quality_vision's equal-minutes mode and its sweep of the plain loop's rate, without
the CLI: the loop trained to a time budget on a tiny proving ground, the CLI's max_time string,
and the table's choice of the loop's best rate."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from benchmarks import proving_grounds, quality_vision

TINY_MODEL = {"img_size": 32, "patch_size": 8, "dim": 16, "depth": 1, "num_heads": 2, "mlp_ratio": 2}


def test_max_time_is_lightnings_days_hours_minutes_seconds() -> None:
    assert quality_vision.max_time(0.05) == "00:00:00:03"
    assert quality_vision.max_time(8) == "00:00:08:00"
    assert quality_vision.max_time(90.5) == "00:01:30:30"
    assert quality_vision.max_time(2 * 24 * 60 + 1) == "02:00:01:00"


def test_plain_loop_lays_its_schedule_over_the_time_it_is_given(tmp_path: Path) -> None:
    built = proving_grounds.build(tmp_path, "glyphs", {"train": 96, "val": 0, "test": 20})
    assert not (built.folder / "val").exists()  # no folder for an empty split
    seconds = 2.0
    row = quality_vision.run_plain(
        built.folder, None, TINY_MODEL, [0.5] * 3, [0.5] * 3, torch.device("cpu"), lr=4e-3, batch_size=16,
        seconds=seconds,
    )
    assert row["lr"] == 4e-3 and row["batch"] == 16 and 0 <= row["test_acc"] <= 1
    assert row["steps"] > quality_vision.SKIP_BATCHES  # several epochs of 6 batches
    assert row["planned_steps"] is not None and row["steps_per_second_measured"] > 0
    assert row["steps"] <= row["planned_steps"]
    assert row["train_seconds"] < seconds + 1  # stopped at the limit (or at the end of its schedule)
    by_epochs = quality_vision.run_plain(
        built.folder, 1, TINY_MODEL, [0.5] * 3, [0.5] * 3, torch.device("cpu"), batch_size=16
    )
    assert by_epochs["steps"] == 6 and by_epochs["lr"] == quality_vision.PLAIN_LOOP.lr
    assert "planned_steps" not in by_epochs


def rows(accuracies: dict[float, list[float]]) -> list[dict]:
    """CLI and loop rows of a 3-epoch run per seed, the loop at each rate with the given accuracies."""
    out = []
    for seed in range(2):
        common = {"data": "glyphs", "epochs": 3, "seed": seed, "train_seconds": 1.0, "wall_seconds": 2.0, "steps": 9}
        out.append({**common, "contender": quality_vision.CLI, "test_acc": 0.5, "images_per_second": 100.0,
                    "batch": 32})
        for lr, accs in accuracies.items():
            out.append({**common, "contender": quality_vision.PLAIN, "test_acc": accs[seed], "lr": lr,
                        "images_per_second": 1000 * lr, "batch": 128})
    return out


def test_the_best_rate_by_mean_accuracy_is_marked_and_compared_with() -> None:
    table_rows = rows({1e-3: [0.30, 0.50], 2e-3: [0.45, 0.40], 4e-3: [0.10, 0.90]})
    quality_vision.mark_best_rates(table_rows)
    assert [row["best_lr"] for row in table_rows if "lr" in row] == [False, False, True] * 2  # means .40 .425 .50
    table = quality_vision.markdown(table_rows)
    assert "| glyphs | 3 | 0 | plain timm loop (lr 0.004) **best** | 128 | 10.00% |" in table
    assert "| glyphs | 3 | 1 | plain timm loop (lr 0.001) | 128 | 50.00% |" in table
    assert "| glyphs | 3 | 0 | vision.train defaults | 32 | 50.00% | 1 | 2 | 100 (25.00x) |" in table  # vs 4 img/s
    assert "Over seeds 0, 1 (the loop at its best rate):" in table
    assert "| glyphs | 3 | 50.0% (50.0-50.0) | 50.0% (10.0-90.0) | +0.0 |" in table


def test_minutes_rows_show_minutes_and_steps_and_one_rate_looks_as_before() -> None:
    table_rows = rows({quality_vision.PLAIN_LOOP.lr: [0.2, 0.3]})
    for row in table_rows:
        row["minutes"] = 0.5
        del row["epochs"]
    quality_vision.mark_best_rates(table_rows)
    table = quality_vision.markdown(table_rows)
    assert table.startswith("| data | minutes | seed | contender | batch | test acc | train s | wall s | "
                            "images/s (vs the loop) | steps |")
    assert "| glyphs | 0.5 | 1 | plain timm loop | 128 | 30.00% | 1 | 2 | 2 (1.00x) | 9 |" in table
    assert "**best**" not in table and "best rate" not in table


@pytest.mark.parametrize("argv", [["--minutes", "0"], ["--loop-lrs", "-1"], ["--loop-batch", "0"]])
def test_bad_budgets_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        quality_vision.parse_args(argv)


@pytest.mark.parametrize(("checkpoint", "config_batch", "expected"), [
    ({"ImageFolderDataModule": {"train_batch_size": 128}}, "auto", 128),  # chosen by the rule, kept in the checkpoint
    ({"state_dict": {}}, 64, 64),  # a fixed data.batch_size: no rule state, the config's
])
def test_a_cli_runs_batch_comes_from_its_rule_or_its_config(
    tmp_path: Path, checkpoint: dict, config_batch: object, expected: int
) -> None:
    (tmp_path / "checkpoints").mkdir()
    torch.save(checkpoint, tmp_path / "checkpoints" / "last.ckpt")
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text(f"data:\n  batch_size: {config_batch}\n")
    assert quality_vision.train_batch(tmp_path) == expected
