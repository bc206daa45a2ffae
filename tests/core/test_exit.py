"""The one-line error of every command (``core.commands.exit``)."""

from __future__ import annotations

import pytest
from torch.utils.data import DataLoader, Dataset

from core.commands.exit import fail
from core.errors import InputError


class Unreadable(Dataset[int]):
    """A dataset whose items cannot be read: bad input found in a loader worker."""

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> int:
        raise InputError(f"image {index}.png cannot be read: a truncated file; replace it or remove it")


def test_an_input_error_in_a_loader_worker_is_its_own_line_without_the_workers_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(InputError) as caught:
        next(iter(DataLoader(Unreadable(), num_workers=1)))
    assert "DataLoader worker process 0" in str(caught.value) and "Traceback" in str(caught.value)  # torch's re-raise
    with pytest.raises(SystemExit) as exit_info:
        fail(str(caught.value))
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == "error: image 0.png cannot be read: a truncated file; replace it or remove it\n"


def test_a_message_is_printed_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        fail("a message\nover  two lines")
    assert capsys.readouterr().err == "error: a message over two lines\n"
