"""Loading checkpoints as data: ``torch.load(weights_only=True)`` only, never unpickling code."""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

from core.errors import InputError

ModuleT = TypeVar("ModuleT", bound=nn.Module)


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint file holding only tensors and plain Python types.

    Raises ``FileNotFoundError`` for a missing file and :class:`InputError` for a directory, a
    file that would need arbitrary unpickling (which could run code) or one that is not a whole
    checkpoint (empty, truncated, garbage).
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"checkpoint {path} is a directory; pass the path of a .ckpt file in it")
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist; pass the path of a .ckpt file")
    if path.stat().st_size == 0:
        raise InputError(f"checkpoint {path} is empty (0 bytes); pass a checkpoint written by a training run")
    try:
        with warnings.catch_warnings():
            # Garbage read as a pickle may claim any protocol; the error below says what is wrong.
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        reason = next((line for line in str(error).splitlines() if "global" in line.lower()), None)
        if reason is None:
            raise InputError(f"{path} is not a readable checkpoint (it is not a torch.save file)") from None
        raise InputError(
            f"checkpoint {path} holds objects other than tensors and plain Python types, so it was "
            "refused: loading it could execute code. Use checkpoints written by this toolkit, or "
            f"re-save a trusted one as a plain state dict. ({reason.strip()})"
        ) from None
    except Exception as error:  # noqa: BLE001 - any failure to parse the bytes is a bad file
        # A truncated zip archive surfaces as OSError (EINVAL) from the stream reader; random
        # bytes read as a pickle fail in many ways (EOFError, UnicodeDecodeError, KeyError, ...).
        raise InputError(
            f"{path} is not a readable checkpoint, perhaps truncated by an interrupted copy or save "
            f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else 'no detail'})"
        ) from None
    if not isinstance(checkpoint, dict):
        raise InputError(f"checkpoint {path} holds a {type(checkpoint).__name__}, expected a dict")
    return checkpoint


def load_module(module_class: type[ModuleT], path: str | Path, map_location: str | torch.device = "cpu") -> ModuleT:
    """Rebuild a module from a Lightning checkpoint: ``module_class(**hyper_parameters)``, then
    its ``state_dict``; returned in eval mode."""
    checkpoint = load_checkpoint(path, map_location)
    missing = {"hyper_parameters", "state_dict"} - checkpoint.keys()
    if missing:
        raise InputError(
            f"checkpoint {path} lacks {sorted(missing)}; pass a checkpoint written by a training run "
            "(checkpoints/last.ckpt or the best one)"
        )
    try:
        module = module_class(**checkpoint["hyper_parameters"])
        module.load_state_dict(checkpoint["state_dict"])
    except (TypeError, RuntimeError) as error:
        raise InputError(
            f"checkpoint {path} was not written by a {module_class.__name__}; pass a checkpoint of "
            f"this kind of model ({str(error).splitlines()[0]})"
        ) from None
    return module.eval()
