"""Vision Transformer, "An Image is Worth 16x16 Words" (Dosovitskiy et al. 2021), on the shared
core :class:`core.Encoder`.

Parameter names follow timm's ``VisionTransformer`` (``cls_token``, ``pos_embed``,
``patch_embed.proj``, ``head``; timm's ``blocks.{i}`` / ``norm`` are our ``encoder.layers.{i}`` /
``encoder.norm``), so timm checkpoints load with a key rename only (:mod:`vision.model.timm_weights`).
"""

from __future__ import annotations

from typing import Any

import torch
from timm.layers import resample_abs_pos_embed
from torch import Tensor, nn

from core import Encoder, sincos_2d
from core.dropout import Dropout
from core.initialization import mimetic_init_
from vision.constraints import STEM, WEIGHT_INIT, require_pool
from vision.model.conv_stem import ConvStem
from vision.model.patch_embed import PatchEmbed
from vision.model.timm_weights import convert_timm_state_dict, timm_config



class VisionTransformer(nn.Module):
    """ViT (Eq. 1-4 of Dosovitskiy et al.): ``z_0 = [x_class; x_p E] + E_pos``, L pre-norm encoder
    layers, ``y = LN(z_L^0)`` and a linear head.

    The defaults are the ``vit_tiny`` preset (``conf/model/vit_tiny.yaml``, the ViT baseline for
    32px images of Lee et al. 2021 with fixed 2D sin-cos positions and a convolutional stem) with a
    ten-class head; :meth:`from_timm` builds timm's layout (a learned positional table, the linear
    patch embedding).

    Args:
        img_size: training image size (int or (height, width)).
        patch_size: patch side P (4 for 32px CIFAR images, 16 for 224px ImageNet ones).
        in_chans: image channels.
        num_classes: classes of the head; 0 gives the pooled features instead of logits.
        dim: model width D.
        depth: encoder layers L.
        num_heads: attention heads per layer.
        mlp_ratio: MLP hidden width / D.
        pool: ``cls`` (class token, Eq. 4), ``mean`` (average of the patch tokens) or ``seq``
            (sequence pooling of Hassani et al. 2021, "Escaping the Big Data Paradigm with Compact
            Transformers": the patch tokens weighted by a softmax over a learned score of each).
        pos_embed: ``sincos`` (fixed 2D sin-cos, as in MAE and Beyer et al. 2022: nothing to learn,
            so short runs from scratch fit faster) or ``learned`` (a trained table, Eq. 1; timm's).
        class_token: prepend the learnable class token; required by ``pool="cls"``.
        fc_norm: apply the final LayerNorm after pooling instead of to every token (timm's layout
            for average-pooled models such as MAE fine-tunes).
        drop_path: stochastic depth of the last layer, rising linearly from 0 at the first.
        dropout: dropout after the positional embedding and on each residual branch.
        attn_dropout: dropout on the attention weights.
        layer_scale: LayerScale initial value (CaiT / DeiT III), or None for none.
        norm_eps: LayerNorm epsilon (1e-6 as in the ViT paper and timm).
        dynamic_img_size: accept any image size divisible by P, resampling the positional
            embedding to the input's grid.
        weight_init: ``timm`` (truncated normal, timm's default) or ``mimetic`` (the same, then
            each self-attention layer set by :func:`core.initialization.mimetic_init_`: a token
            starts by attending to its neighbours, as in trained ViTs).
        stem: ``conv`` (a convolutional stem down to the same grid,
            :class:`vision.model.conv_stem.ConvStem`, Xiao et al. 2021: ahead of the linear
            embedding from scratch on every set measured, docs/decisions.md) or ``patch`` (Eq. 1's
            linear patch embedding; timm's, needed for timm weights).
        stem_convs: 3x3 convolutions per halving of the grid in the convolutional stem, the first
            of stride 2 and the rest of stride 1 (1: Xiao et al.'s stem; 2: a stride-1
            convolution after each stride-2 one, ahead at 3 and 10 epochs and at 6 minutes on every
            set measured, docs/decisions.md).
        locality: Locality Self-Attention (Lee, Lee and Song 2021) in every layer: a learned
            temperature per head and each token's own key masked (:class:`core.MultiHeadAttention`).
    """

    def __init__(
        self,
        img_size: int | tuple[int, int] = 32,
        patch_size: int = 4,
        in_chans: int = 3,
        num_classes: int = 10,
        dim: int = 192,
        depth: int = 9,
        num_heads: int = 12,
        mlp_ratio: float = 2.0,
        pool: str = "cls",
        pos_embed: str = "sincos",
        class_token: bool = True,
        fc_norm: bool = False,
        drop_path: float = 0.1,
        dropout: float = 0.0,
        attn_dropout: float = 0.0,
        layer_scale: float | None = None,
        norm_eps: float = 1e-6,
        dynamic_img_size: bool = False,
        weight_init: str = "timm",
        stem: str = "conv",
        locality: bool = False,
        stem_convs: int = 2,
    ) -> None:
        super().__init__()
        require_pool(pool, pos_embed, class_token)
        WEIGHT_INIT.require(weight_init, "weight_init")
        STEM.require(stem, "stem")
        self.weight_init = weight_init
        self.num_classes = num_classes
        self.pool = pool
        self.pos_embed_kind = pos_embed
        self.num_prefix_tokens = 1 if class_token else 0
        if stem == "conv":
            self.patch_embed = ConvStem(img_size, patch_size, in_chans, dim, dynamic_img_size, stem_convs)
        else:
            self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, dim, dynamic_img_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim)) if class_token else None
        num_positions = self.num_prefix_tokens + self.patch_embed.num_patches
        if pos_embed == "learned":
            self.pos_embed = nn.Parameter(torch.zeros(1, num_positions, dim))
        else:
            self.register_buffer("pos_embed", self.sincos_table(self.patch_embed.grid_size, dim), persistent=False)
        self.pos_drop = Dropout(dropout)
        self.encoder = Encoder(
            dim,
            depth,
            num_heads,
            norm_first=True,
            drop_path=drop_path,
            norm_eps=norm_eps,
            mlp_ratio=mlp_ratio,
            dropout=dropout,
            attn_dropout=attn_dropout,
            activation="gelu",
            layer_scale=layer_scale,
            locality=locality,
        )
        if fc_norm:
            # The final norm moves after pooling: LN(mean(z)) differs from mean(LN(z)).
            self.encoder.norm = nn.Identity()
        self.fc_norm = nn.LayerNorm(dim, eps=norm_eps) if fc_norm else nn.Identity()
        self.seq_pool = nn.Linear(dim, 1) if pool == "seq" else None
        self.head = nn.Linear(dim, num_classes) if num_classes > 0 else nn.Identity()
        self.init_weights()

    def sincos_table(self, grid: tuple[int, int], dim: int) -> Tensor:
        """Fixed positions [1, prefix + N, D]; the class token gets the zero vector."""
        table = sincos_2d(grid[0], grid[1], dim)
        prefix = torch.zeros(self.num_prefix_tokens, dim)
        return torch.cat([prefix, table]).unsqueeze(0)

    def init_weights(self) -> None:
        """timm's default ViT init: truncated normal (std 0.02) for linear layers and the
        positional table, zero biases, a near-zero class token; with ``weight_init="mimetic"``
        the attention weights are then set mimetically (Trockman and Kolter 2023)."""
        if isinstance(self.pos_embed, nn.Parameter):
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
        if self.cls_token is not None:
            nn.init.normal_(self.cls_token, std=1e-6)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        if self.weight_init == "mimetic":
            for layer in self.encoder.layers:
                mimetic_init_(layer.attn)

    def no_weight_decay(self) -> set[str]:
        """Parameters excluded from weight decay besides norms and biases (as in timm)."""
        return {"pos_embed", "cls_token"}

    def position_table(self, grid: tuple[int, int]) -> Tensor:
        """The positional embedding for a patch grid, resampled when it differs from the
        training grid (bicubic for a learned table, recomputed for sin-cos)."""
        if grid == self.patch_embed.grid_size:
            return self.pos_embed
        if self.pos_embed_kind == "sincos":
            return self.sincos_table(grid, self.pos_embed.shape[-1]).to(self.pos_embed)
        return resample_abs_pos_embed(
            self.pos_embed, list(grid), list(self.patch_embed.grid_size), self.num_prefix_tokens
        )

    def embed(self, x: Tensor) -> Tensor:
        """Eq. 1: images [B, C, H, W] -> tokens [B, prefix + N, D] with positions added."""
        tokens, grid = self.patch_embed(x)
        if self.cls_token is not None:
            tokens = torch.cat([self.cls_token.expand(tokens.shape[0], -1, -1), tokens], dim=1)
        return self.pos_drop(tokens + self.position_table(grid))

    def forward_features(self, x: Tensor) -> Tensor:
        """Eq. 2-3: images -> encoded tokens [B, prefix + N, D] (after the final norm unless
        ``fc_norm``)."""
        return self.encoder(self.embed(x))

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        """Eq. 4: pool the tokens [B, prefix + N, D] and classify -> logits [B, num_classes]
        (or the pooled features [B, D] with ``pre_logits``)."""
        if self.pool == "cls":
            x = x[:, 0]
        elif self.pool == "mean":
            x = x[:, self.num_prefix_tokens :].mean(dim=1)
        else:
            x = torch.einsum("bn,bnd->bd", self.pool_weights(x), x[:, self.num_prefix_tokens :])
        x = self.fc_norm(x)
        return x if pre_logits else self.head(x)

    def pool_weights(self, x: Tensor) -> Tensor:
        """The weight of each patch token in the pooled features [B, N] (``mean`` or ``seq``
        pooling) of the tokens [B, prefix + N, D]: uniform for ``mean``; for ``seq``,
        ``softmax(g(z_L))`` over the patches, g a linear score of each token (CCT's SeqPool)."""
        patches = x[:, self.num_prefix_tokens :]
        if self.seq_pool is None:
            return patches.new_full(patches.shape[:2], 1 / patches.shape[1])
        return self.seq_pool(patches).squeeze(-1).softmax(dim=-1)  # (B, N, 1) -> (B, N)

    def forward(self, x: Tensor) -> Tensor:
        """Images [B, C, H, W] -> logits [B, num_classes]."""
        return self.forward_head(self.forward_features(x))

    @property
    def img_size(self) -> tuple[int, int]:
        """The input size (H, W) the model was built for."""
        return self.patch_embed.img_size

    def group_matcher(self, coarse: bool = False) -> dict[str, Any]:
        """The parameters by depth, as timm's ``VisionTransformer`` groups them (what
        ``timm.optim.param_groups_layer_decay`` reads for layer-wise rate decay): the embedding
        (class token, positions, patch embedding) first, then one group per encoder layer, the
        final norm with the last; the head is above them all."""
        return {
            "stem": r"^cls_token|^pos_embed|^patch_embed",
            "blocks": [(r"^encoder\.layers\.(\d+)", None), (r"^encoder\.norm", (99999,))],
        }

    def load_pretrained_state_dict(self, state_dict: dict[str, Tensor], new_head: bool = False) -> list[str]:
        """Load the weights of a ViT of this architecture, ours or timm's ``VisionTransformer``
        (its keys renamed, :mod:`vision.model.timm_weights`), resampling ``pos_embed`` (bicubic)
        to this model's grid. The classifier layer keeps its fresh init when ``new_head`` (other
        classes), when its class count differs or when the weights have none (timm's
        ``num_classes=0``: self-supervised weights such as MAE's), so an ImageNet checkpoint can be
        fine-tuned on CIFAR.

        Returns the names of the parameters that were not loaded (the head, or nothing).
        """
        converted = convert_timm_state_dict(state_dict, self.patch_embed.grid_size, self.num_prefix_tokens)
        own = self.state_dict()
        head = ("head.weight", "head.bias")
        fresh = [
            name for name in head
            if name in own and (name not in converted or new_head or converted[name].shape != own[name].shape)
        ]
        skipped = [name for name in head if name in fresh or (name in converted and name not in own)]
        for name in skipped:
            converted.pop(name, None)
        missing = sorted(set(own) - set(converted) - set(skipped))
        unexpected = sorted(set(converted) - set(own))
        resized = sorted(name for name in set(own) & set(converted) if own[name].shape != converted[name].shape)
        if missing or unexpected or resized:
            if "pos_embed" in unexpected:
                fix = "timm checkpoints carry a learned pos_embed; build the model with pos_embed='learned'"
            elif any(name.startswith("seq_pool.") for name in missing):
                fix = "timm's ViT pools by class token or average; build the model with pool='cls' or 'mean'"
            elif any(name.startswith("patch_embed.stem.") for name in missing):
                fix = "timm checkpoints carry a linear patch embedding; build the model with stem='patch' (model.stem=patch)"
            else:
                fix = "build the model with the checkpoint's architecture, e.g. via VisionTransformer.from_timm(timm_model)"
            raise ValueError(
                f"the state dict does not fit this VisionTransformer (missing {missing}, unexpected {unexpected}, "
                f"other shapes {resized}); {fix}"
            )
        self.load_state_dict(converted, strict=False)
        return skipped

    @classmethod
    def from_timm(cls, timm_model: nn.Module, **overrides: Any) -> VisionTransformer:
        """A copy of a timm ``VisionTransformer`` instance: same architecture, same weights, same
        logits. ``overrides`` change constructor arguments (e.g. ``img_size=384``,
        ``num_classes=10``, ``drop_path=0.1``)."""
        config = timm_config(timm_model)
        config.update(overrides)
        model = cls(**config)
        model.load_pretrained_state_dict(timm_model.state_dict())
        return model

