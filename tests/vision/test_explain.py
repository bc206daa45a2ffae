"""Recorded attention weights and attention rollout (Abnar & Zuidema 2020)."""

from __future__ import annotations

import numpy as np
import torch

from tests.vision.vision_testdata import tiny_model_kwargs
from vision.model import VisionTransformer
from vision.rollout import attention_rollout, explain, recorded_attention, token_relevance


def tiny_vit(**overrides: object) -> VisionTransformer:
    torch.manual_seed(0)
    return VisionTransformer(**tiny_model_kwargs(**overrides), num_classes=3).eval()


def test_recorded_weights_are_each_layers_softmax_and_leave_the_output_unchanged() -> None:
    model = tiny_vit()
    images = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        plain = model(images)
        with recorded_attention(model) as weights:
            recorded = model(images)
        torch.testing.assert_close(recorded, plain)
        assert len(weights) == 2 and weights[0].shape == (2, 2, 17, 17)
        x = model.embed(images)
        for layer, layer_weights in zip(model.encoder.layers, weights):
            q, k, _ = layer.attn.project_qkv(layer.norm1(x))
            expected = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)
            torch.testing.assert_close(layer_weights, expected)
            x = layer(x)
    with recorded_attention(model) as after:
        model(images)
    assert len(weights) == 2 and len(after) == 2  # hooks are removed on leaving the block
    for layer in model.encoder.layers:
        assert not layer.attn._forward_hooks and not layer.attn._forward_pre_hooks


def test_rollout_follows_the_formula() -> None:
    rng = np.random.default_rng(0)
    layers = [rng.random((1, 2, 3, 3)) for _ in range(3)]
    layers = [w / w.sum(axis=-1, keepdims=True) for w in layers]
    expected = np.eye(3)
    for w in layers:
        a = 0.5 * w[0].mean(axis=0) + 0.5 * np.eye(3)
        expected = (a / a.sum(axis=-1, keepdims=True)) @ expected
    rollout = attention_rollout([torch.from_numpy(w) for w in layers])
    np.testing.assert_allclose(rollout[0].numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(rollout.sum(dim=-1).numpy(), 1.0)


def test_maps_cover_the_patch_grid_for_both_poolings() -> None:
    images = torch.randn(1, 3, 16, 16)
    for pool in ("cls", "mean"):
        model = tiny_vit(pool=pool)
        logits, rollout, layers = explain(model, images)
        assert logits.shape == (1, 3) and rollout.shape == (1, 4, 4)
        assert len(layers) == 2 and all(m.shape == (1, 4, 4) for m in layers)
        assert (rollout >= 0).all() and rollout.sum() < 1.0
    matrix = torch.arange(17 * 17, dtype=torch.float).reshape(1, 17, 17)
    torch.testing.assert_close(token_relevance(tiny_vit(), matrix)[0].flatten(), matrix[0, 0, 1:])
