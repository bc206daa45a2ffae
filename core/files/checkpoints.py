"""Loading checkpoints as data: ``torch.load(weights_only=True)`` only, never unpickling code."""

from __future__ import annotations

import inspect
import pickle
import warnings
from pathlib import Path
from collections.abc import Collection
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


def current_hyperparameters(module_class: type, hparams: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's ``hyper_parameters`` as ``module_class`` reads them today: the class's
    optional ``upgrade_hyperparameters(hparams)`` gives a setting added after the checkpoint was
    written the value it had then (a default that has changed since), so older checkpoints still
    rebuild the network they trained."""
    upgrade = getattr(module_class, "upgrade_hyperparameters", None)
    return upgrade(dict(hparams)) if upgrade is not None else hparams


def load_module(module_class: type[ModuleT], path: str | Path, map_location: str | torch.device = "cpu") -> ModuleT:
    """Rebuild a module from a Lightning checkpoint: ``module_class(**hyper_parameters)``, then
    its ``state_dict``; returned in eval mode. Weights that are not finite are refused."""
    checkpoint = load_checkpoint(path, map_location)
    missing = {"hyper_parameters", "state_dict"} - checkpoint.keys()
    if missing:
        raise InputError(
            f"checkpoint {path} lacks {sorted(missing)}; pass a checkpoint written by a training run "
            "(checkpoints/last.ckpt or the best one)"
        )
    require_finite_weights(checkpoint, path)
    try:
        module = module_class(**current_hyperparameters(module_class, checkpoint["hyper_parameters"]))
        module.load_state_dict(checkpoint["state_dict"])
    except (TypeError, RuntimeError) as error:
        raise InputError(
            f"checkpoint {path} was not written by a {module_class.__name__}; pass a checkpoint of "
            f"this kind of model ({str(error).splitlines()[0]})"
        ) from None
    return module.eval()


def require_finite_weights(checkpoint: dict[str, Any], path: str | Path) -> None:
    """Refuse a checkpoint whose weights hold NaN or inf: it was saved after its run diverged, and
    everything computed from it would be NaN."""
    state = checkpoint.get("state_dict") or {}
    weights = {name: value for name, value in state.items() if isinstance(value, torch.Tensor) and value.is_floating_point()}
    broken = [name for name, value in weights.items() if not bool(value.isfinite().all())]
    if broken:
        raise InputError(
            f"checkpoint {path} holds weights that are not finite (NaN or inf in {len(broken)} of {len(weights)} "
            f"tensors, e.g. {broken[0]}): it was saved after its training diverged; use an earlier checkpoint of "
            "that run, or train again with a lower module.lr"
        )


def outline(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """What :func:`require_fit` reads of a checkpoint, without the weights' data: its
    ``hyper_parameters`` and its ``state_dict`` with each tensor on the ``meta`` device (shape
    and dtype only), so a resumed run does not hold a second copy of the weights while its data
    is prepared."""
    state = checkpoint.get("state_dict") or {}
    return {
        "hyper_parameters": checkpoint.get("hyper_parameters") or {},
        "state_dict": {name: value.to("meta") if isinstance(value, torch.Tensor) else value for name, value in state.items()},
    }


def constructor_defaults(cls: type) -> dict[str, Any]:
    """The arguments of ``cls`` that have defaults, with them: what a network was built with for
    each setting its model section left out."""
    return {
        name: parameter.default
        for name, parameter in inspect.signature(cls).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }


UNSET = object()


def shown(value: Any) -> str:
    """A setting's value in an error line, cut to a readable length."""
    text = "unset" if value is UNSET else repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def settings_differences(
    written: dict[str, Any], model: dict[str, Any], network: type, free: Collection[str] = ()
) -> tuple[str, str] | None:
    """How the model section ``written`` (a checkpoint's) differs from ``model`` (this run's)
    outside the settings ``free``, or None where they agree: the differences
    (``model.dim is 192 there and 128 here, ...``) and the settings that give the checkpoint's
    network (``model.dim=192 ...``), in the config's order. A setting one leaves out counts as
    ``network``'s constructor default (what a checkpoint that does not record it was built with)."""
    defaults = constructor_defaults(network)
    written, model = {**defaults, **written}, {**defaults, **model}
    keys = [*model, *(key for key in written if key not in model)]
    differing = [key for key in keys if key not in free and written.get(key, UNSET) != model.get(key, UNSET)]
    if not differing:
        return None
    details = ", ".join(f"model.{key} is {shown(written.get(key, UNSET))} there and {shown(model.get(key, UNSET))} here" for key in differing)
    return details, " ".join(f"model.{key}={shown(written[key])}" for key in differing if key in written)


def require_fit(checkpoint: dict[str, Any], path: str | Path, module: nn.Module, model: dict[str, Any]) -> None:
    """Refuse to resume ``module`` (built from the settings ``model``) from a checkpoint whose
    weights do not fit it, naming what differs: the kind of module, else each ``model`` setting
    that differs from the checkpoint's ``hyper_parameters['model']``, else the first weight."""
    saved = checkpoint.get("state_dict") or {}
    wanted = module.state_dict()
    unfit = sorted(saved.keys() ^ wanted.keys()) + sorted(
        name for name in saved.keys() & wanted.keys() if getattr(saved[name], "shape", None) != getattr(wanted[name], "shape", None)
    )
    if not unfit:
        return
    kind = type(module).__name__
    fix = "or train without ckpt_path"
    hparams = current_hyperparameters(type(module), checkpoint.get("hyper_parameters") or {})
    own = set(getattr(module, "hparams", {}))
    if own and set(hparams) != own:
        foreign = sorted(set(hparams) - own)
        listed = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise InputError(
            f"checkpoint {path} was written by another kind of model than this run's {kind} (settings it has and "
            f"a {kind} has not: {listed or 'none'}); resume from a checkpoint of a run of this command {fix}"
        )
    written = hparams.get("model") if isinstance(hparams.get("model"), dict) else {}
    if differences := settings_differences(written, model, type(getattr(module, "net", module))):
        details, settings = differences
        raise InputError(f"checkpoint {path} does not fit this run's model: {details}; resume with the checkpoint's settings ({settings}) {fix}")
    name = unfit[0]
    there = tuple(saved[name].shape) if name in saved else "absent"
    here = tuple(wanted[name].shape) if name in wanted else "absent"
    raise InputError(
        f"checkpoint {path} does not fit this run's model although the model settings agree: its weight {name} is "
        f"{there} there and {here} here ({len(unfit)} weights differ), so the data's classes or vocabulary differ from "
        f"the run that wrote it; resume with that run's data settings {fix}"
    )
