"""Forward hooks that read a model's intermediate tensors out of its own forward pass."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Callable

from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

import core


class ActivationRecorder:
    """Records the first input and the output of named submodules during a forward pass.

    Attention modules among them are also asked for their weights: a pre-hook sets
    ``need_weights=True`` on the very call the layer makes, and the forward hook keeps the
    weights [B, H, T, S] and hands the layer its usual output. That call takes the explicit Eq. 1
    path instead of the fused kernel, which agree to float rounding.

    Use as a context manager; the hooks are removed on exit.
    """

    def __init__(self, model: nn.Module, names: list[str]) -> None:
        self.modules = {name: model.get_submodule(name) for name in names}
        self.inputs: dict[str, Tensor] = {}
        self.outputs: dict[str, Tensor] = {}
        self.weights: dict[str, Tensor] = {}
        self._handles: list[RemovableHandle] = []

    def __enter__(self) -> ActivationRecorder:
        for name, module in self.modules.items():
            if isinstance(module, core.MultiHeadAttention):
                self._handles.append(module.register_forward_pre_hook(ask_for_weights, with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._hook(name)))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _hook(self, name: str) -> Callable[[nn.Module, tuple[Any, ...], Any], Any]:
        def record(module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
            self.inputs[name] = args[0].detach()
            if isinstance(module, core.MultiHeadAttention):
                output, weights = output
                self.weights[name] = weights.detach()
            self.outputs[name] = output.detach()
            return output

        return record


def ask_for_weights(
    module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Forward pre-hook: make a ``MultiHeadAttention`` call also return its weights."""
    return args, {**kwargs, "need_weights": True}
