"""Copy weights from torch.nn reference modules into the core modules under test."""

from __future__ import annotations

from torch import nn

# torch.nn.Transformer*Layer parameter names -> core names (everything else is identical).
TORCH_TO_CORE = {
    "self_attn.in_proj_weight": "self_attn.qkv.weight",
    "self_attn.in_proj_bias": "self_attn.qkv.bias",
    "self_attn.out_proj.": "self_attn.proj.",
    "multihead_attn.in_proj_weight": "cross_attn.qkv.weight",
    "multihead_attn.in_proj_bias": "cross_attn.qkv.bias",
    "multihead_attn.out_proj.": "cross_attn.proj.",
    "linear1.": "mlp.fc1.",
    "linear2.": "mlp.fc2.",
}


def core_key(torch_key: str, encoder: bool) -> str:
    for theirs, ours in TORCH_TO_CORE.items():
        if torch_key.startswith(theirs):
            torch_key = ours + torch_key[len(theirs) :]
            break
    if encoder:
        torch_key = torch_key.replace("self_attn.", "attn.")
    return torch_key


def copy_from_torch_layer(ours: nn.Module, theirs: nn.Module, encoder: bool) -> None:
    """Load a torch.nn.TransformerEncoderLayer / DecoderLayer state dict into a core layer."""
    state = {core_key(key, encoder): value for key, value in theirs.state_dict().items()}
    ours.load_state_dict(state, strict=True)


def copy_from_torch_mha(ours: nn.Module, theirs: nn.MultiheadAttention) -> None:
    """Load torch.nn.MultiheadAttention weights (in_proj rows [W_q; W_k; W_v]) into core's."""
    ours.qkv.weight.data.copy_(theirs.in_proj_weight.data)
    ours.qkv.bias.data.copy_(theirs.in_proj_bias.data)
    ours.proj.weight.data.copy_(theirs.out_proj.weight.data)
    ours.proj.bias.data.copy_(theirs.out_proj.bias.data)


def copy_from_torch_stack(
    ours: nn.Module, theirs: nn.TransformerEncoder | nn.TransformerDecoder, encoder: bool
) -> None:
    """Load a torch.nn.TransformerEncoder / Decoder into a core stack, layer by layer, with the
    final norm when ``theirs`` has one (``ours.norm`` is ``nn.Identity`` otherwise)."""
    assert len(ours.layers) == len(theirs.layers)
    for our_layer, their_layer in zip(ours.layers, theirs.layers):
        copy_from_torch_layer(our_layer, their_layer, encoder)
    if theirs.norm is None:
        assert isinstance(ours.norm, nn.Identity), "the reference has no final norm to copy"
    else:
        ours.norm.load_state_dict(theirs.norm.state_dict(), strict=True)
