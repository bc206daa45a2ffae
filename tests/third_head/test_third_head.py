"""A third head through the shared commands, as a user runs them: its ``train`` and ``evaluate``
entries (``training_app`` / ``evaluation_app`` of its :class:`~core.training.head.Head`) in this
process with a command line, so Hydra composes its configs and the real Trainer runs; and a head
that breaks the contract is refused in one ``error:`` line before any training."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.third_head import evaluate, train
from tests.third_head.module import SentenceModule


def run(main: Callable[[], object], monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    """``main`` with the command line ``args``, as ``python -m`` would run it."""
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    monkeypatch.setattr(sys, "argv", ["third_head", *args])
    main()


def test_the_third_head_trains_checkpoints_and_evaluates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    training = tmp_path / "train"
    run(train.main, monkeypatch, f"hydra.run.dir={training}")
    metrics = json.loads((training / "metrics.json").read_text())
    for key in ("val/acc", "test/acc", "test/loss", "fit_seconds", "train_sentences_per_second"):
        assert isinstance(metrics[key], float), key
    assert metrics["optimizer_steps"] == 12  # 2 epochs of 48 sentences in batches of 8
    checkpoints = sorted(path.name for path in (training / "checkpoints").iterdir())
    best = [name for name in checkpoints if name.startswith("best-")]
    assert "last.ckpt" in checkpoints and len(best) == 1
    assert (training / "train.log").is_file()  # Hydra names the job for the head's command

    evaluation = tmp_path / "evaluate"
    checkpoint = training / "checkpoints" / best[0]
    run(evaluate.main, monkeypatch, f"ckpt_path={checkpoint}", f"hydra.run.dir={evaluation}")
    scores = json.loads((evaluation / "metrics.json").read_text())
    assert scores["split"] == "test" and scores["ckpt_path"] == str(checkpoint)
    # The training run tested this checkpoint on the same sentences (its data, read from the run).
    assert scores["test/acc"] == pytest.approx(metrics["test/acc"])
    assert scores["test/loss"] == pytest.approx(metrics["test/loss"], rel=1e-5)


class DetachedNet(SentenceModule):
    """A module that keeps its network under another name than ``net``."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.classifier = self.net
        del self.net


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            f"module._target_={__name__}.DetachedNet",
            f"module._target_={__name__}.DetachedNet: class DetachedNet lacks net, which the shared runner needs "
            "(HeadModule of core.training.head",
        ),
        (
            "data._target_=lightning.pytorch.LightningDataModule",
            "class LightningDataModule lacks module_kwargs, which the shared runner needs (HeadData",
        ),
        ("data.repeat=0", "data.repeat must be a whole number of at least 1, got 0"),  # the head's own rules
    ],
)
def test_a_head_that_breaks_the_contract_is_refused_in_one_line(
    override: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        run(train.main, monkeypatch, override, f"hydra.run.dir={tmp_path}")
    assert exited.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert not (tmp_path / "checkpoints").exists()
