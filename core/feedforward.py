"""Position-wise feed-forward network (Section 3.3, Eq. 2)."""

from __future__ import annotations

from torch import Tensor, nn

from core.constraints import ACTIVATION, ACTIVATIONS
from core.dropout import Dropout


def make_activation(name: str) -> nn.Module:
    """The activation called ``name``: ``relu`` (the paper) or ``gelu`` (ViT)."""
    ACTIVATION.require(name, "activation")
    return getattr(nn, ACTIVATIONS[name])()


class FeedForward(nn.Module):
    """Eq. 2: ``FFN(x) = max(0, x W_1 + b_1) W_2 + b_2``, applied to each position alike.

    Submodule names follow timm's ``Mlp`` (``fc1``, ``act``, ``fc2``) so ViT weights map 1:1.

    Args:
        dim: model width d_model.
        hidden_dim: inner width d_ff (2048 for d_model 512 in the paper).
        activation: ``relu`` or ``gelu``.
        dropout: dropout after ``fc2``, and after the activation unless ``activation_dropout``
            says otherwise.
        bias: whether the linear layers have biases.
        activation_dropout: dropout after the activation; None: ``dropout``, as timm's ``Mlp``.
            The paper's Section 5.4 drops only the sublayer's output, fairseq's
            ``--activation-dropout`` is 0 by default: ``activation_dropout=0``.
    """

    def __init__(
        self,
        dim: int,
        hidden_dim: int,
        activation: str = "relu",
        dropout: float = 0.0,
        bias: bool = True,
        activation_dropout: float | None = None,
    ) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim, bias=bias)
        self.act = make_activation(activation)
        self.drop1 = Dropout(dropout if activation_dropout is None else activation_dropout)
        self.fc2 = nn.Linear(hidden_dim, dim, bias=bias)
        self.drop2 = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.drop2(self.fc2(self.drop1(self.act(self.fc1(x)))))
