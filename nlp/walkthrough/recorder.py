"""Forward hooks that read a model's intermediate tensors out of its own forward pass."""

from __future__ import annotations

from contextlib import ExitStack
from types import TracebackType
from typing import Any, Callable

from torch import Tensor, nn

import core


class ActivationRecorder:
    """Records the first input and the output of named submodules during a forward pass.

    Attention modules among them also record their weights [B, H, T, S], through
    :func:`core.recorded_attention_weights`: that call takes the explicit Eq. 1 path instead of
    the fused kernel, which agree to float rounding.

    Use as a context manager; the hooks are removed on exit.
    """

    def __init__(self, model: nn.Module, names: list[str]) -> None:
        self.modules = {name: model.get_submodule(name) for name in names}
        self.inputs: dict[str, Tensor] = {}
        self.outputs: dict[str, Tensor] = {}
        self._weights: dict[str, list[Tensor]] = {}
        self._stack = ExitStack()

    @property
    def weights(self) -> dict[str, Tensor]:
        """Attention weights [B, H, T, S] of each recorded attention module's last call."""
        return {name: calls[-1] for name, calls in self._weights.items() if calls}

    def __enter__(self) -> ActivationRecorder:
        for name, module in self.modules.items():
            if isinstance(module, core.MultiHeadAttention):
                # Entered before the hook below is registered, so that hook sees the plain output.
                self._weights[name] = self._stack.enter_context(core.recorded_attention_weights([module]))
            self._stack.callback(module.register_forward_hook(self._hook(name)).remove)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stack.close()

    def _hook(self, name: str) -> Callable[[nn.Module, tuple[Any, ...], Any], None]:
        def record(module: nn.Module, args: tuple[Any, ...], output: Tensor) -> None:
            self.inputs[name] = args[0].detach()
            self.outputs[name] = output.detach()

        return record
