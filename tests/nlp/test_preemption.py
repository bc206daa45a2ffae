"""Preemption: SIGTERM in the middle of an epoch saves the step, exits with status 143, and the
resumed run continues exactly where the interrupted one stopped (same batches, same schedule)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

import core
from core.training.callbacks.faults import PREEMPTED_EXIT
from core.training.runner import train
from tests.core.interrupt import logged_losses
from tests.nlp.conftest import nlp_config, reverse_pairs, write_lines

STEPS = 14


def config(tmp_path: Path, corpus: Path, *overrides: str):  # type: ignore[no-untyped-def]
    return nlp_config(
        tmp_path, "data=files", f"data.train={corpus}", f"data.val={corpus}", "data.vocab_size=300",
        "data.max_tokens=128", "model=transformer_tiny", "model.dropout=0", "trainer.max_epochs=-1",
        f"trainer.max_steps={STEPS}", "trainer.num_sanity_val_steps=0", "trainer.log_every_n_steps=1",
        "trainer.limit_val_batches=1", "trainer.limit_test_batches=1", "module.beam_size=1", *overrides,
    )


@pytest.mark.parametrize(
    "bound", [(), ("trainer.max_epochs=2", "trainer.max_steps=-1")], ids=["steps", "epochs"]
)  # an epoch bound's schedule is planned once Lightning has restored the loader's position
def test_sigterm_saves_the_step_exits_143_and_resumes_on_the_same_batches(tmp_path: Path, bound: tuple[str, ...]) -> None:
    corpus = write_lines(tmp_path / "pairs.tsv", [f"{s}\t{t}" for s, t in reverse_pairs(120, seed=0)])
    train(config(tmp_path / "whole", corpus, *bound))
    whole = logged_losses(tmp_path / "whole")

    interrupted = tmp_path / "interrupted"
    with pytest.raises(SystemExit) as stopped:
        train(config(
            interrupted, corpus, *bound, "+callbacks.sigterm._target_=tests.core.interrupt.SigtermAt", "+callbacks.sigterm.step=5"
        ))
    assert stopped.value.code == PREEMPTED_EXIT
    last = interrupted / "checkpoints" / "last.ckpt"
    assert (stopped.value.path, stopped.value.step) == (last, 5)  # Preempted, for a caller of train()
    checkpoint = core.load_checkpoint(last)
    assert checkpoint["global_step"] == 5
    assert checkpoint["loops"]["fit_loop"]["state_dict"]["combined_loader"][0].items() >= {"epoch": 0, "batches": 5}.items()

    train(config(interrupted, corpus, *bound, f"ckpt_path={last}"))
    resumed = logged_losses(interrupted)
    assert sorted(resumed) == sorted(whole) and len(whole) >= STEPS - 1
    for step, loss in whole.items():
        assert resumed[step] == pytest.approx(loss, abs=1e-5), step


def test_sigterm_between_accumulated_batches_stops_once_the_optimizer_has_stepped(tmp_path: Path) -> None:
    """With gradients accumulated over 2 batches, a SIGTERM during the first of them is held until
    the optimizer steps: the checkpoint is taken after the second, and the resumed run logs the
    uninterrupted run's losses. Stopping after the first would resume without its gradient."""
    corpus = write_lines(tmp_path / "pairs.tsv", [f"{s}\t{t}" for s, t in reverse_pairs(120, seed=0)])
    accumulated = ("trainer.accumulate_grad_batches=2", "trainer.max_steps=7")
    train(config(tmp_path / "whole", corpus, *accumulated))
    whole = logged_losses(tmp_path / "whole")

    interrupted = tmp_path / "interrupted"
    with pytest.raises(SystemExit) as stopped:
        train(config(
            interrupted, corpus, *accumulated, "+callbacks.sigterm._target_=tests.core.interrupt.SigtermMidAccumulation",
            "+callbacks.sigterm.step=2",  # as the fifth batch starts
        ))
    assert stopped.value.code == PREEMPTED_EXIT
    last = interrupted / "checkpoints" / "last.ckpt"
    checkpoint = core.load_checkpoint(last)
    assert checkpoint["global_step"] == 3
    assert checkpoint["loops"]["fit_loop"]["state_dict"]["combined_loader"][0].items() >= {"epoch": 0, "batches": 6}.items()

    train(config(interrupted, corpus, *accumulated, f"ckpt_path={last}"))
    resumed = logged_losses(interrupted)
    assert sorted(resumed) == sorted(whole) and len(whole) >= 6
    for step, loss in whole.items():
        assert resumed[step] == pytest.approx(loss, abs=1e-5), step


@pytest.mark.slow
def test_the_command_exits_143_with_its_checkpoint_named(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    from tests.nlp.conftest import SUBPROCESS_ENV

    command = [
        sys.executable, "-m", "nlp.train", "data=toy", "model=transformer_tiny", "trainer=cpu", "trainer.max_epochs=100000",
        "trainer.num_sanity_val_steps=0", "logger=csv", f"hydra.run.dir={tmp_path}",
    ]
    root = Path(__file__).resolve().parents[2]
    log = (tmp_path / "out.log").open("w")
    process = subprocess.Popen(command, cwd=root, env=SUBPROCESS_ENV, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while "learning-rate schedule laid over" not in (tmp_path / "out.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=120) == PREEMPTED_EXIT
    output = (tmp_path / "out.log").read_text()
    assert "preempted (SIGTERM) at step" in output and f"ckpt_path={tmp_path / 'checkpoints' / 'last.ckpt'}" in output
    assert "Traceback" not in output
    assert core.load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")["global_step"] > 0
