"""``python -m nlp.walkthrough``: the numbers it prints satisfy the equations it prints.

Every check recomputes a step from the JSON output with plain tensor math (or from the paper's
formula), independently of the core modules that produced it.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from nlp.data.toy_corpus import TOY_PAIRS
from nlp.walkthrough.cli import main
from nlp.walkthrough.model import Vocabulary, build_model

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = {"dim": 6, "heads": 2, "head_dim": 4, "ffn_dim": 8, "seed": 0}
WIDER = {"dim": 8, "heads": 3, "head_dim": 2, "ffn_dim": 5, "seed": 3}
ISSUE_NAMES = [
    "embeddings",
    "positional_encoding",
    "encoder_input",
    "query",
    "key",
    "value",
    "scores",
    "scaled_scores",
    "attention_weights",
    "attention_output",
    "add_norm_1",
    "ffn_linear",
    "ffn_relu",
    "add_norm_2",
    "decoder_self_attention_weights",
    "cross_attention_weights",
    "logits",
    "probabilities",
    "predicted_word",
]
TOL = {"rtol": 1e-5, "atol": 1e-5}


def cli_args(config: dict[str, int]) -> list[str]:
    return [arg for key, value in config.items() for arg in (f"--{key.replace('_', '-')}", str(value))]


def tensor(value: Any) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.float64)


@pytest.fixture(scope="module", params=[DEFAULT, WIDER], ids=["default", "dim8_heads3"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One untrained walkthrough: its config, printed text, JSON steps and values by name."""
    path = tmp_path_factory.mktemp("walkthrough") / "steps.json"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        main([*cli_args(request.param), "--json", str(path)])
    steps = json.loads(path.read_text())["steps"]
    values = {step["name"]: step["value"] for step in steps}
    return {"config": request.param, "text": printed.getvalue(), "steps": steps, "values": values}


def test_json_has_every_named_step_once(run: dict[str, Any]) -> None:
    names = [step["name"] for step in run["steps"]]
    assert len(names) == len(set(names))
    assert set(ISSUE_NAMES) <= set(names)
    for step in run["steps"]:
        assert set(step) == {"name", "formula", "value"}
        assert step["formula"].strip()


def test_positional_encoding_is_the_formula(run: dict[str, Any]) -> None:
    values, dim = run["values"], run["config"]["dim"]
    encoding = tensor(values["positional_encoding"])
    assert encoding[0].tolist() == [0.0, 1.0] * (dim // 2)
    expected = torch.tensor(
        [
            [
                math.sin(pos / 10000 ** (j / dim)) if j % 2 == 0 else math.cos(pos / 10000 ** ((j - 1) / dim))
                for j in range(dim)
            ]
            for pos in range(encoding.shape[0])
        ],
        dtype=torch.float64,
    )
    torch.testing.assert_close(encoding, expected, **TOL)
    torch.testing.assert_close(
        tensor(values["encoder_input"]), tensor(values["embeddings"]) + encoding, **TOL
    )


def test_softmax_rows_sum_to_one(run: dict[str, Any]) -> None:
    values = run["values"]
    for name in [
        "attention_weights",
        "attention_weights_all_heads",
        "decoder_self_attention_weights",
        "cross_attention_weights",
        "probabilities",
    ]:
        weights = tensor(values[name])
        assert (weights >= 0).all(), name
        torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)), **TOL)


def test_masked_future_weights_are_exactly_zero(run: dict[str, Any]) -> None:
    weights = tensor(run["values"]["decoder_self_attention_weights"])  # (H, T, T)
    heads, length, _ = weights.shape
    assert heads == run["config"]["heads"]
    future = torch.ones(length, length, dtype=torch.bool).triu(1)
    assert (weights[:, future] == 0).all()
    assert (weights[:, ~future] > 0).any()


def test_attention_and_add_norm_recomputed_from_json(run: dict[str, Any]) -> None:
    values, config = run["values"], run["config"]
    x = tensor(values["encoder_input"])
    query = x @ tensor(values["w_query"])
    key = x @ tensor(values["w_key"])
    value = x @ tensor(values["w_value"])
    torch.testing.assert_close(query, tensor(values["query"]), **TOL)
    torch.testing.assert_close(key, tensor(values["key"]), **TOL)
    torch.testing.assert_close(value, tensor(values["value"]), **TOL)

    scores = query @ key.T
    torch.testing.assert_close(tensor(values["scores"]), scores, **TOL)
    scaled = scores / math.sqrt(config["head_dim"])
    torch.testing.assert_close(tensor(values["scaled_scores"]), scaled, **TOL)
    weights = torch.exp(scaled - scaled.max(-1, keepdim=True).values)
    weights = weights / weights.sum(-1, keepdim=True)
    torch.testing.assert_close(tensor(values["attention_weights"]), weights, **TOL)
    torch.testing.assert_close(tensor(values["attention_weights_all_heads"])[0], weights, **TOL)
    head = weights @ value
    torch.testing.assert_close(tensor(values["attention_output"]), head, **TOL)

    concat = tensor(values["heads_concat"])
    assert concat.shape[1] == config["heads"] * config["head_dim"]
    torch.testing.assert_close(concat[:, : config["head_dim"]], head, **TOL)
    multi_head = concat @ tensor(values["w_output"])
    torch.testing.assert_close(tensor(values["multi_head_output"]), multi_head, **TOL)

    residual = x + multi_head
    mean = residual.mean(-1, keepdim=True)
    variance = ((residual - mean) ** 2).mean(-1, keepdim=True)
    torch.testing.assert_close(tensor(values["residual_1_mean"]), mean[:, 0], **TOL)
    torch.testing.assert_close(tensor(values["residual_1_std"]), variance.sqrt()[:, 0], **TOL)
    normalized = (residual - mean) / torch.sqrt(variance + 1e-6)  # untrained LayerNorm: gain 1, bias 0
    torch.testing.assert_close(tensor(values["add_norm_1"]), normalized, **TOL)


def test_relu_of_feed_forward_linear(run: dict[str, Any]) -> None:
    linear = tensor(run["values"]["ffn_linear"])
    assert linear.shape[1] == run["config"]["ffn_dim"]
    assert (linear < 0).any()
    torch.testing.assert_close(tensor(run["values"]["ffn_relu"]), linear.clamp(min=0), **TOL)


def test_predicted_word_recomputed_from_logits(run: dict[str, Any]) -> None:
    values = run["values"]
    logits = tensor(values["logits"])
    assert logits.shape == (len(TOY_PAIRS[0][1].split()) + 1, len(values["vocabulary"]))
    probabilities = logits.exp() / logits.exp().sum(-1, keepdim=True)
    torch.testing.assert_close(tensor(values["probabilities"]), probabilities, **TOL)
    assert values["predicted_word"] == values["vocabulary"][int(logits[0].argmax())]
    assert values["predicted_words"] == [values["vocabulary"][int(i)] for i in logits.argmax(-1)]
    assert values["greedy_output"][0] == values["predicted_word"]


def test_recorded_logits_match_a_plain_forward_pass(run: dict[str, Any]) -> None:
    """The hooks read the forward pass without changing it."""
    config = run["config"]
    vocab = Vocabulary([sentence for pair in TOY_PAIRS for sentence in pair])
    model = build_model(
        vocab, config["dim"], config["heads"], config["head_dim"], config["ffn_dim"], config["seed"]
    )
    source, target = TOY_PAIRS[0]
    decoder_input = [vocab.start_id, *vocab.encode(target)]
    with torch.no_grad():
        logits = model(torch.tensor([vocab.encode(source)]), torch.tensor([decoder_input]))
    torch.testing.assert_close(tensor(run["values"]["logits"]), logits[0].double(), **TOL)


def test_printed_numbers_are_the_json_numbers_rounded(run: dict[str, Any]) -> None:
    text, values = run["text"], run["values"]
    assert "Scaled scores" in text and "Q K^T / sqrt(d_k)" in text
    assert "divided by its embedding width, 6, instead" in text
    section = text[text.index("Scaled scores") :].splitlines()
    first_word = TOY_PAIRS[0][0].split()[0]
    printed = next(line for line in section if line.startswith(f"   {first_word} "))
    assert printed.split()[1:] == [f"{v:.3f}" for v in values["scaled_scores"][0]]


@pytest.mark.slow
def test_trained_cli_predicts_you_and_decodes_the_target(tmp_path: Path) -> None:
    """The real command: train, then walk through; JSON and heatmaps are written."""
    path, plots = tmp_path / "steps.json", tmp_path / "plots"
    result = subprocess.run(
        [sys.executable, "-m", "nlp.walkthrough", "--train", "--json", str(path), "--plots", str(plots)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    values = {step["name"]: step["value"] for step in json.loads(path.read_text())["steps"]}
    assert values["predicted_word"] == "you"
    assert values["greedy_output"] == ["you", "win", "or", "you", "die", "<end>"]
    assert "translation: you win or you die <end>" in result.stdout
    assert "Trained on the 3 pairs" in result.stdout
    names = sorted(p.name for p in plots.iterdir())
    assert names == [
        "cross_attention.png",
        "decoder_self_attention.png",
        "encoder_self_attention.png",
        "output_distribution.png",
        "positional_encoding.png",
    ]
    for name in names:
        assert (plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--dim", "0"], "--dim"), (["--heads", "-2"], "--heads"), (["--dim", "1"], "--dim"), (["--lr", "0"], "--lr")],
)
def test_bad_arguments_name_the_option(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
