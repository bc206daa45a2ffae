"""Recorded attention weights and attention rollout (Abnar & Zuidema 2020)."""

from __future__ import annotations

import numpy as np
import torch

from tests.vision.vision_testdata import tiny_model_kwargs
from vision.model import VisionTransformer
from vision.analysis.rollout import attention_rollout, explain, token_relevance


def tiny_vit(**overrides: object) -> VisionTransformer:
    torch.manual_seed(0)
    return VisionTransformer(**tiny_model_kwargs(**overrides), num_classes=3).eval()


def test_explain_maps_come_from_each_layers_softmax_and_leave_the_model_unchanged() -> None:
    model = tiny_vit()
    images = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        plain = model(images)
        expected = []
        x = model.embed(images)
        for layer in model.encoder.layers:
            q, k, _ = layer.attn.project_qkv(layer.norm1(x))
            expected.append((q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1))  # (B, H, T, T)
            x = layer(x)
    logits, rollout, layers = explain(model, images)
    torch.testing.assert_close(logits, plain)
    assert len(layers) == 2
    for layer_map, weights in zip(layers, expected):
        torch.testing.assert_close(layer_map, token_relevance(model, weights.mean(dim=1)))
    torch.testing.assert_close(rollout, token_relevance(model, attention_rollout(expected)))
    for layer in model.encoder.layers:  # the recording hooks are gone afterwards
        assert not layer.attn._forward_hooks and not layer.attn._forward_pre_hooks
    torch.testing.assert_close(model(images), plain)


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


def test_maps_cover_the_patch_grid_for_every_pooling() -> None:
    images = torch.randn(1, 3, 16, 16)
    for pool in ("cls", "mean", "seq"):
        model = tiny_vit(pool=pool)
        logits, rollout, layers = explain(model, images)
        assert logits.shape == (1, 3) and rollout.shape == (1, 4, 4)
        assert len(layers) == 2 and all(m.shape == (1, 4, 4) for m in layers)
        assert (rollout >= 0).all() and rollout.sum() < 1.0
    matrix = torch.arange(17 * 17, dtype=torch.float).reshape(1, 17, 17)
    torch.testing.assert_close(token_relevance(tiny_vit(), matrix)[0].flatten(), matrix[0, 0, 1:])
    weights = torch.zeros(1, 16)
    weights[0, 5] = 1.0  # a pooling that reads patch 5 alone draws what patch 5's row draws
    torch.testing.assert_close(token_relevance(tiny_vit(pool="seq"), matrix, weights)[0].flatten(), matrix[0, 6, 1:])
