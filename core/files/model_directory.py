"""A trained network as a directory of plain files that others load, as models are shared on the
Hugging Face Hub: ``model.safetensors`` (the weights) and ``config.json`` (what rebuilds the
network), beside any file a head adds (the tokenizer of a translation model).

The directory is written whole or not at all (:func:`core.files.atomic.atomic_directory`) and read
without executing code: safetensors holds tensors only and the rest is JSON. ``config.json``
starts with ``library``, ``head`` and ``version``, which say that this toolkit wrote it, for which
head, in which layout; each head adds its own fields. A missing, unreadable or foreign file is an
:class:`InputError` that names it and the fix. Imports neither torch nor safetensors until weights
are read or written, so commands can check their arguments first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import InputError
from core.files.atomic import atomic_directory

if TYPE_CHECKING:
    from torch import Tensor, nn

FORMAT = "safetensors"  # the --format value of both export commands
WEIGHTS = "model.safetensors"
CONFIG = "config.json"
LIBRARY = "transformer-toolkit"
VERSION = 1  # of the layout of config.json


def export_again(head: str) -> str:
    """The fix for a directory this code cannot read."""
    return f"export the model again with python -m {head}.export CKPT --format {FORMAT} --out DIR"


def is_model_directory(path: str | Path) -> bool:
    """Whether ``path`` is a directory holding ``model.safetensors`` and ``config.json``."""
    path = Path(path)
    return (path / WEIGHTS).is_file() and (path / CONFIG).is_file()


def check_output(out: Path, replace: bool, is_export: Callable[[Path], bool] = is_model_directory) -> None:
    """Refuse, before any work, an ``--out`` whose files an export would destroy: a file, a
    directory of other files, or (without ``replace``) an earlier export, as ``is_export`` tells
    one (this layout's by default; the CTranslate2 directory's for that format)."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; pass a directory name (it is created)")
    if out.is_dir() and any(out.iterdir()):
        if not is_export(out):
            raise InputError(f"--out {out} is a directory of other files; pass a new directory name")
        if not replace:
            raise InputError(f"--out {out} already holds an exported model; pass --force to replace it, or another --out")


@contextmanager
def new_model_directory(
    out: Path, replace: bool, is_export: Callable[[Path], bool] = is_model_directory
) -> Iterator[Path]:
    """An empty directory beside ``out`` that becomes ``out`` when the block succeeds and is
    removed when it fails; ``out`` may be new, empty or (with ``replace``) an earlier export
    (:func:`check_output`)."""
    check_output(out, replace, is_export)
    with atomic_directory(out) as staging:
        yield staging


def write_model_files(directory: Path, head: str, weights: Mapping[str, Tensor], config: Mapping[str, Any]) -> None:
    """``weights`` as ``model.safetensors`` (on the CPU, each tensor once: :func:`unique_weights`)
    and ``config`` as ``config.json`` after the fields that say who wrote it."""
    from safetensors.torch import save_file

    tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in weights.items()}
    save_file(tensors, str(directory / WEIGHTS), metadata={"format": "pt"})  # "pt": torch tensors, as the Hub marks them
    header = {"library": LIBRARY, "head": head, "version": VERSION}
    (directory / CONFIG).write_text(json.dumps({**header, **config}, indent=2) + "\n", encoding="utf-8")


def read_config(directory: str | Path, head: str, required: Sequence[str]) -> dict[str, Any]:
    """``config.json`` of a model directory of ``head``, checked to be one this code reads and to
    have the ``required`` fields."""
    directory = Path(directory)
    path = directory / CONFIG
    if not directory.is_dir():
        raise FileNotFoundError(f"model directory {directory} does not exist; pass a .ckpt file or a directory it was exported to")
    if not path.is_file():
        raise InputError(
            f"{directory} is a directory without {CONFIG}, so no exported model; pass a .ckpt file or a directory "
            f"written by python -m {head}.export --format {FORMAT}"
        )
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{path} is not readable JSON ({error}); {export_again(head)}") from None
    if not isinstance(config, dict) or config.get("library") != LIBRARY:
        raise InputError(f'{path} was not written by this toolkit (no "library": "{LIBRARY}"); {export_again(head)}')
    if config.get("head") != head:
        raise InputError(
            f"{path} describes a model of the {config.get('head')} head, not of the {head} head; use it with the "
            f"{config.get('head')} commands, or pass a model of the {head} head here"
        )
    if config.get("version") != VERSION:
        raise InputError(f"{path} has layout version {config.get('version')}, this toolkit reads {VERSION}; {export_again(head)}")
    missing = [key for key in required if key not in config]
    if missing:
        raise InputError(f"{path} lacks {', '.join(missing)}; {export_again(head)}")
    return config


def read_weights(directory: str | Path, head: str) -> dict[str, Tensor]:
    """The tensors of ``model.safetensors`` on the CPU; refused when the file is missing,
    unreadable or holds weights that are not finite."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from core.files.checkpoints import require_finite_weights

    path = Path(directory) / WEIGHTS
    if not path.is_file():
        raise InputError(f"{path} does not exist; {export_again(head)}")
    try:
        weights = load_file(str(path), device="cpu")
    except (SafetensorError, OSError) as error:
        raise InputError(
            f"{path} is not a readable safetensors file, perhaps truncated by an interrupted copy ({error}); "
            f"{export_again(head)}"
        ) from None
    require_finite_weights({"state_dict": weights}, path)
    return weights


def tied_groups(module: nn.Module) -> list[list[str]]:
    """The state-dict names of ``module`` grouped by the tensor they name: a group of several is
    one tied weight (a translation model's embeddings and output projection)."""
    groups: dict[int, list[str]] = {}
    for name, tensor in module.state_dict(keep_vars=True).items():
        groups.setdefault(id(tensor), []).append(name)
    return list(groups.values())


def unique_weights(module: nn.Module) -> dict[str, Tensor]:
    """The state dict of ``module`` with each tensor once, under the first of its names
    (safetensors refuses tensors that share memory; :func:`load_weights` ties them again)."""
    state = module.state_dict()
    return {group[0]: state[group[0]] for group in tied_groups(module)}


def load_weights(module: nn.Module, weights: Mapping[str, Tensor], directory: str | Path, head: str) -> None:
    """Load ``weights`` (read from ``directory``) into ``module``: every weight once (a tied
    weight under any of its names), none unknown, every shape the module's; else an
    :class:`InputError` naming what differs."""
    own = module.state_dict()
    missing = [group[0] for group in tied_groups(module) if not any(name in weights for name in group)]
    unexpected = sorted(set(weights) - set(own))
    reshaped = sorted(name for name in set(own) & set(weights) if own[name].shape != weights[name].shape)
    if missing or unexpected or reshaped:
        listed = "; ".join(
            f"{kind} {', '.join(names[:3])}{', ...' if len(names) > 3 else ''}"
            for kind, names in (("missing", missing), ("unexpected", unexpected), ("other shapes", reshaped))
            if names
        )
        raise InputError(
            f"{Path(directory) / WEIGHTS} does not fit the network {CONFIG} describes ({listed}); {export_again(head)}"
        )
    module.load_state_dict(dict(weights), strict=False)
