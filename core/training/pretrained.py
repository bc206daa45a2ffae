"""Starting a run from trained weights (fine-tuning, domain adaptation): ``pretrained=PATH`` beside
``ckpt_path`` (which resumes a run: optimizer, schedule and step included). A run that starts from
``pretrained`` loads the network's weights only, from a checkpoint or an exported directory of
the same head (or whatever else the head reads, e.g. a timm weights file), and lays a new
optimizer and schedule over its own budget.

A head's module takes part with two members (:class:`StartsFromWeights`): ``pretrained_data``,
the data settings the weights fix (a translator's tokenizer), read before the datamodule is
built, and ``load_pretrained``, which loads the weights into the built module. The runner calls
the first whenever ``pretrained`` is set, on the checkpoint a run resumes from if it does (which
holds what the weights fixed, so the weights file may be gone by then), else on ``pretrained``,
and the second only when the run does not resume.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from core.errors import InputError
from core.files.checkpoints import settings_differences


@runtime_checkable
class StartsFromWeights(Protocol):
    """Optional for a head's LightningModule: it can start a run from trained weights."""

    @classmethod
    def pretrained_data(cls, path: str, output_dir: Path) -> dict[str, Any]:
        """The data settings the weights at ``path`` (or a checkpoint of a run started from them)
        fix (e.g. ``tokenizer_path``, written into ``output_dir``), given to the datamodule's
        constructor; ``{}`` when they fix none."""

    def load_pretrained(self, path: str) -> list[str]:
        """Load the weights at ``path`` into the network; returns the names of the parameters that
        start fresh (a classifier layer for other classes), or none."""


def require_pretrained(module_class: type, path: str) -> None:
    """Refuse ``pretrained=path`` for a module that cannot start from weights (the config check,
    :func:`core.training.commands.config_check.start_weights`, has found the path)."""
    if not all(hasattr(module_class, name) for name in vars(StartsFromWeights) if not name.startswith("_")):
        raise InputError(
            f"{module_class.__name__} cannot start from trained weights (it has no load_pretrained); drop pretrained={path}"
        )


def require_same_network(
    path: str, written: dict[str, Any], model: dict[str, Any], network: type, free: Collection[str]
) -> None:
    """Refuse weights whose network settings ``written`` differ from this run's ``model`` in a
    setting outside ``free`` (those the weights do not fix: dropout rates, or the image size a
    position table is resampled to), naming each and the settings to pass."""
    if differences := settings_differences(written, model, network, free):
        details, settings = differences
        raise InputError(
            f"pretrained={path} holds another network than this run's: {details}; start from it with its settings ({settings})"
        )
