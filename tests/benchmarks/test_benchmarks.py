"""Smoke runs of the benchmark scripts at tiny sizes: they run, compare like with like, and write
the results they print. No timing is asserted."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from benchmarks import (
    attention_kernels, decoding, dropout_speed, precision, quality_nmt, quality_vision, report, scale, scale_evaluate, scale_images,
    seq2seq, translation_step, vit,
)
from benchmarks.common import interleave, peak_memory
from nlp.decoding import beam_search, greedy_decode
from nlp.recipe import MIN_DROPOUT
from tests.nlp.gettext_catalogs import fake_locale_tree

QUICK = ["--quick", "--threads", "1"]


@pytest.fixture(autouse=True)
def restore_threads() -> Iterator[None]:
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def printed_json(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out)


def test_interleave_alternates_contenders_after_warmup() -> None:
    calls: list[str] = []
    seconds = interleave({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 1, 3, torch.device("cpu"))
    assert calls == ["a", "b"] * 4
    assert [len(values) for values in seconds.values()] == [3, 3]


def test_vit_compares_identical_models_and_appends(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results.jsonl"
    output = vit.main([*QUICK, "--append", str(results)])
    assert printed_json(capsys) == output
    assert json.loads(results.read_text()) == output
    assert output["env"]["threads"] == 1 and output["env"]["torch"] == torch.__version__
    assert [case["case"] for case in output["cases"]] == ["vit_tiny_16px_train", "vit_tiny_16px_infer"]
    for case in output["cases"]:
        assert case["max_abs_logit_difference"] < 1e-5
        assert set(case["speed"]) == {"ours", "timm"}
        assert case["ratios"]["ours/timm"] > 0
        assert set(case["memory"]) == {"ours", "timm"}
        assert all(memory["peak_mib"] >= 0 for memory in case["memory"].values())


def test_precision_times_both_heads_in_both_precisions_and_appends(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    output = precision.main([*QUICK, "--append", str(results)])
    assert json.loads(results.read_text()) == output
    assert [row["head"] for row in output["rows"]] == ["translation", "vision"]
    for row in output["rows"]:
        assert row["float32"]["items_per_s"] > 0 and row["bf16"]["items_per_s"] > 0
        assert row["bf16_speedup"] == round(row["bf16"]["items_per_s"] / row["float32"]["items_per_s"], 3)


def test_attention_kernels_time_both_kernels_at_each_length_and_precision(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    output = attention_kernels.main([*QUICK, "--append", str(results)])
    assert json.loads(results.read_text()) == output
    assert [(row["dtype"], row["keys"]) for row in output["rows"]] == [
        ("bfloat16", 8), ("bfloat16", 16), ("float32", 8), ("float32", 16)
    ]
    assert all(row["math_speedup"] == round(row["math"]["items_per_s"] / row["fused"]["items_per_s"], 3)
               for row in output["rows"])


def test_dropout_speed_times_both_dropouts_and_the_product_in_each_precision(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    output = dropout_speed.main([*QUICK, "--append", str(results)])
    assert json.loads(results.read_text()) == output
    assert output["rate"] == MIN_DROPOUT
    assert [row["dtype"] for row in output["rows"]] == ["bfloat16", "float32"]
    for row in output["rows"]:
        assert all(row[name]["items_per_s"] > 0 for name in dropout_speed.CONTENDERS)
        assert row["speedup"] == round(row["core.dropout"]["items_per_s"] / row["F.dropout"]["items_per_s"], 3)
    assert "| bfloat16 |" in dropout_speed.result_markdown(output)


def test_translation_step_times_each_lever_against_the_step_before(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    output = translation_step.main([*QUICK, "--append", str(results)])
    assert json.loads(results.read_text()) == output
    names = [row["contender"] for row in output["rows"]]
    assert names[:5] == ["before", "math kernel", "predicted rows", "defaults", "defaults, no biases"]
    assert names[5:7] == ["defaults, dropout 0.005", "defaults, dropout 0.05"]  # 0.05: nlp.recipe.MIN_DROPOUT
    assert names[7:] == ["defaults, vocabulary 32", "defaults, vocabulary 128"]  # no compiled step without --compile
    assert output["compile_seconds"] is None
    assert output["rows"][0]["speedup"] == 1.0 and output["tokens"] > 0


@pytest.mark.slow
def test_translation_step_with_compile_times_the_compiled_step_last_and_its_compile_time() -> None:
    output = translation_step.main([*QUICK, "--compile"])
    assert [row["contender"] for row in output["rows"]][-1] == "defaults, torch.compile"
    assert output["compile_seconds"] > 0
    assert "compiling the step once" in translation_step.markdown(output["rows"], output["compile_seconds"])


def test_translation_step_contenders_compute_the_same_loss() -> None:
    """Each lever changes what a step costs, not what it computes."""
    generator = torch.Generator().manual_seed(0)
    source, target = translation_step.padded_batch(3, 6, 64, generator)[:, 1:], translation_step.padded_batch(3, 6, 64, generator)
    assert target.eq(translation_step.PAD_ID).any()  # padding takes part
    losses = []
    for predicted_rows in (False, True):
        for math_kernel in (False, True):
            model = translation_step.mini(64, quick=True)  # the same weights each time
            step = translation_step.training_step(model, source, target, predicted_rows=predicted_rows, math_kernel=math_kernel)
            losses.append(float(step()))
    assert losses[0] > 3.0  # about log(64) for a new model
    assert max(losses) - min(losses) < 0.02  # bf16 rounding of the paths, not another loss


def test_peak_memory_sees_a_large_temporary() -> None:
    megabytes = 64
    memory = peak_memory(lambda: torch.ones(megabytes * 2**18).sum(), torch.device("cpu"))  # 4-byte floats
    assert memory["method"] == "peak RSS growth (VmHWM)"
    assert megabytes * 0.9 <= memory["peak_mib"] <= megabytes * 1.5


def test_seq2seq_contenders_have_the_same_size(capsys: pytest.CaptureFixture[str]) -> None:
    output = seq2seq.main(QUICK)
    assert printed_json(capsys) == output
    parameters = output["settings"]["parameters"]
    assert parameters["ours"] == parameters["torch"]
    assert output["ratios"]["train ours/torch"] > 0


def test_torch_baseline_is_causal() -> None:
    torch.manual_seed(0)
    model = seq2seq.TorchTransformerSeq2Seq(seq2seq.QUICK_SIZE).eval()
    src, tgt = torch.randint(3, 64, (2, 5)), torch.randint(3, 64, (2, 6))
    changed = tgt.clone()
    changed[:, -1] = 3 if int(tgt[0, -1]) != 3 else 4
    torch.testing.assert_close(model(src, tgt)[:, :-1], model(src, changed)[:, :-1])


def test_no_early_end_model_runs_to_the_length_limit() -> None:
    torch.manual_seed(0)
    model = seq2seq.build_ours(seq2seq.QUICK_SIZE, decoding.NoEarlyEnd).eval()
    src = torch.randint(3, 64, (3, 5))
    for use_cache in (True, False):
        assert greedy_decode(model, src, max_len=6, use_cache=use_cache).shape == (3, 6)
        assert beam_search(model, src, beam_size=4, max_len=6, use_cache=use_cache).shape == (3, 6)


def test_decoding_compares_cached_uncached_and_hf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("transformers")
    results = tmp_path / "results.jsonl"
    output = decoding.main([*QUICK, "--append", str(results)])
    assert printed_json(capsys) == output
    names = [case["case"] for case in output["cases"]]
    assert names == ["greedy_b1_len4", "greedy_b2_len4", "beam_b1_len4", "beam_b2_len4"]
    for case in output["cases"]:
        assert set(case["speed"]) == {"cached", "uncached", "hf"}
        assert set(case["ratios"]) == {"cached/uncached", "cached/hf"}
    seq2seq.main([*QUICK, "--append", str(results)])
    vit.main([*QUICK, "--append", str(results), "--models", "vit_tiny"])
    capsys.readouterr()
    tables = report.main([str(results)])
    for title in ("ViT: ours vs timm", "Seq2seq training", "Decoding: cached"):
        assert title in tables
    assert "| greedy_b2_len4 |" in tables and "| vit_tiny_16px_infer |" in tables


def test_decoding_without_transformers_skips_hf(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # makes `import transformers` fail
    output = decoding.main([*QUICK, "--strategies", "greedy", "--uncached-budget", "0"])
    captured = capsys.readouterr()
    assert "skipping Hugging Face generate" in captured.err
    assert json.loads(captured.out) == output
    assert all(set(case["speed"]) == {"cached"} and case["ratios"] == {} for case in output["cases"])


def test_report_names_a_bad_line(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text("not json\n")
    with pytest.raises(ValueError, match="results.jsonl:1"):
        report.main([str(results)])


@pytest.mark.slow
def test_quality_nmt_runs_the_cli_and_the_plain_loop_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locale = fake_locale_tree(tmp_path / "locale", ("de", "es"))
    results = tmp_path / "results.jsonl"
    argv = ["--quick", "--threads", "1", "--locale-dir", str(locale), "--out-dir", str(tmp_path / "runs")]
    output = quality_nmt.main([*argv, "--corpus", "gettext-en-de", "long-es-en", "--append", str(results)])
    assert json.loads(results.read_text()) == output
    assert [(row["corpus"], row["contender"]) for row in output["rows"]] == [
        ("gettext-en-de", "nlp.train (transformer_mini)"),
        ("gettext-en-de", "plain nn.Transformer loop"),
        ("long-es-en", "nlp.train (transformer_mini)"),
        ("long-es-en", "plain nn.Transformer loop"),
    ]
    for row in output["rows"]:
        assert 0 <= row["bleu"] <= 100 and 0 <= row["val_bleu"] <= 100 and 0 <= row["chrf"] <= 100 and 0 <= row["rep4"] <= 1
        assert row["train_tokens_per_second"] > 0 and row["rep4_ref"] == 0.0 and row["train_loss"] > 0
        assert row["steps"] > 0
        if row["contender"].startswith("nlp.train"):
            assert row["val_nll"] > 0 and row["test_nll"] > 0  # the losses without label smoothing
    # The long corpus goes through data=files, as a user's own TSV files would.
    long_settings = output["settings"]["corpora"]["long-es-en"]
    assert "data=files" in long_settings["overrides"] and (tmp_path / "runs" / "long-es-en" / "train.tsv").is_file()
    lines = (tmp_path / "runs" / "long-es-en" / "train.tsv").read_text(encoding="utf-8").splitlines()
    english_words = sorted(len(line.split("\t")[1].split()) for line in lines)
    assert english_words[len(lines) // 2] >= 24  # a program's messages joined to 24+ English words
    assert (tmp_path / "runs" / "gettext-en-de_cli_0.05min" / "metrics.json").is_file()
    table = capsys.readouterr().out
    assert "| corpus | budget | contender | test BLEU | val BLEU (greedy) | test chrF | rep4 (references) | steps |" in table
    assert "| long-es-en | 0.05 min | plain nn.Transformer loop |" in table
    alone = quality_nmt.main([*argv, "--corpus", "gettext-en-de", "--contenders", "loop"])
    assert [row["contender"] for row in alone["rows"]] == ["plain nn.Transformer loop"]
    # A corpus of benchmarks.corpora is built into the output folder once and read with data=files.
    built = quality_nmt.main([*argv, "--corpus", "long-many-en", "--contenders", "cli", "--cli-extra", "model.dropout=auto"])
    # A CLI row records its dropout, and an auto one the rate it switches on at.
    assert output["rows"][0]["dropout"] == 0.1 and "min_dropout" not in output["rows"][0]  # transformer_tiny's
    assert output["rows"][0]["label_smoothing"] == 0.1 and "label_smoothing" not in output["rows"][1]  # the CLI's
    assert built["rows"][0]["dropout"] == "auto" and built["rows"][0]["min_dropout"] == MIN_DROPOUT
    # A budget of optimizer steps: the CLI alone, bounded by steps at a fixed batch.
    stepped = quality_nmt.main([*argv, "--corpus", "gettext-en-de", "--contenders", "cli", "--steps", "3"])
    assert [(row["max_steps"], row["steps"], "minutes" in row) for row in stepped["rows"]] == [(3, 3, False)]
    config = OmegaConf.load(tmp_path / "runs" / "gettext-en-de_cli_3steps" / ".hydra" / "config.yaml")
    assert config.trainer.max_time is None and config.data.max_tokens == quality_nmt.STEP_BATCH_TOKENS
    assert config.seed == 42 and "seed" not in stepped["rows"][0]  # the config's seed when none is named
    reseeded = quality_nmt.main([*argv, "--corpus", "gettext-en-de", "--contenders", "cli", "--steps", "3", "--seed", "2"])
    assert reseeded["rows"][0]["seed"] == 2
    assert OmegaConf.load(tmp_path / "runs" / "gettext-en-de_cli_3steps2" / ".hydra" / "config.yaml").seed == 2
    with pytest.raises(SystemExit) as refused:
        quality_nmt.main([*argv, "--corpus", "gettext-en-de", "--steps", "3"])  # the loop has no budget of steps
    assert refused.value.code == 2
    with pytest.raises(SystemExit) as refused:  # the config's own seed: rows without a seed are its
        quality_nmt.main([*argv, "--corpus", "gettext-en-de", "--contenders", "cli", "--seed", str(quality_nmt.DEFAULT_SEED)])
    assert refused.value.code == 2
    record = json.loads((tmp_path / "runs" / "corpora" / "long-many-en" / "build.json").read_text())
    assert record["languages"] == ["de", "es"] and record["counts"]["train"] == built["settings"]["corpora"]["long-many-en"]["pairs"]["train"]
    assert f"data.train={tmp_path / 'runs' / 'corpora' / 'long-many-en' / 'train.tsv'}" in built["settings"]["corpora"]["long-many-en"]["overrides"]


@pytest.mark.slow
def test_quality_vision_runs_the_cli_and_the_plain_timm_loop_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("sklearn")
    results = tmp_path / "results.jsonl"
    argv = [*QUICK, "--data-dir", str(tmp_path / "data"), "--out-dir", str(tmp_path / "runs"), "--seeds", "0", "1"]
    output = quality_vision.main([*argv, "--append", str(results)])
    assert json.loads(results.read_text()) == output
    assert [(row["seed"], row["contender"]) for row in output["rows"]] == [
        (0, "vision.train defaults"), (0, "plain timm loop"), (1, "vision.train defaults"), (1, "plain timm loop")
    ]
    for row in output["rows"]:
        assert (row["data"], row["epochs"]) == ("digits", 1)
        assert 0 <= row["test_acc"] <= 1 and row["train_seconds"] > 0 and row["wall_seconds"] >= row["train_seconds"]
        assert row["images_per_second"] > 0
    # The CLI sizes its batch from 1 epoch of 1,258 images (the floor, 32); the loop keeps 64.
    assert [row["batch"] for row in output["rows"]] == [32, 64, 32, 64]
    # Each CLI row records the warmup cap, beta2 and stem convolutions its run's config held (the
    # results page names recipes by them).
    config = OmegaConf.load(quality_vision.CONF / "vision.yaml")
    cap, beta2 = config.budget.max_warmup_fraction, config.module.betas[1]
    convs = OmegaConf.load(quality_vision.CONF / "model" / "vit_tiny.yaml").model.stem_convs
    assert [row.get("max_warmup_fraction") for row in output["rows"]] == [cap, None, cap, None]
    assert [row.get("beta2") for row in output["rows"]] == [beta2, None, beta2, None]
    assert [row.get("stem_convs") for row in output["rows"]] == [convs, None, convs, None]
    assert output["settings"]["images"] == {"digits": {"train": 1258, "val": 179, "test": 360}}
    assert (tmp_path / "runs" / "digits_1ep_seed1" / "metrics.json").is_file()
    table = capsys.readouterr().out
    assert "| data | epochs | seed | contender | batch | test acc | train s | wall s | images/s (vs the loop) |" in table
    assert "| digits | 1 | 1 | plain timm loop | 64 |" in table and "(1.00x) |" in table
    assert "| data | epochs | CLI mean (min-max) | loop mean (min-max) | CLI lead |" in table


@pytest.mark.slow
def test_scale_measures_first_and_cached_starts_and_ddp_ranks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    locale = fake_locale_tree(tmp_path / "locale", ("de",))
    results = tmp_path / "results.jsonl"
    output = scale.main(["--quick", "--locale-dir", str(locale), "--out-dir", str(tmp_path / "runs"), "--append", str(results)])
    assert json.loads(results.read_text()) == output
    runs = [(row["pairs"], row["run"], len(row["processes"])) for row in output["rows"]]
    assert runs == [(300, "first", 1), (300, "cached", 1), (300, "first, DDP", 2), (300, "cached, DDP", 2)]
    for row in output["rows"]:
        assert all(p["peak_mib"] > 0 and p["seconds"] > 0 for p in row["processes"])
    lines = (tmp_path / "runs" / "train300.tsv").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 300 and all(len(line.split("\t")[0].split()) >= 50 for line in lines)
    assert "| pairs | TSV MB | run | processes |" in capsys.readouterr().out


@pytest.mark.slow
def test_scale_evaluate_times_scoring_and_translating_each_test_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    locale = fake_locale_tree(tmp_path / "locale", ("de",))
    results = tmp_path / "results.jsonl"
    output = scale_evaluate.main(["--quick", "--locale-dir", str(locale), "--out-dir", str(tmp_path / "runs"), "--append", str(results)])
    assert json.loads(results.read_text()) == output
    assert [(row["command"], row["items"], row["run"]) for row in output["rows"]] == [
        ("nlp.evaluate", 30, "first"), ("nlp.evaluate", 30, "cached"), ("nlp.translate", 30, "-"),
        ("vision.evaluate", 40, "first"), ("vision.evaluate", 40, "cached"),
    ]
    assert all(row["peak_mib"] > 0 and row["seconds"] > 0 for row in output["rows"])
    translated = output["rows"][2]
    assert translated["lines"] == 30 and 0 < translated["first_line_s"] <= translated["seconds"] + 1
    runs = tmp_path / "runs"
    for split, key in (("nlp-eval30_first", "test/bleu"), ("vision-eval40_cached", "test/acc")):
        assert key in json.loads((runs / split / "metrics.json").read_text())
    assert "encoding the test split" in (runs / "nlp-eval30_first.log").read_text()
    assert "encoding the test split" not in (runs / "nlp-eval30_cached.log").read_text()
    assert "| command | test items | run | wall s | peak MiB | first line s |" in capsys.readouterr().out
    trained = (runs / "nlp-train" / "checkpoints" / "last.ckpt").stat().st_mtime_ns
    again = scale_evaluate.main(["--quick", "--locale-dir", str(locale), "--out-dir", str(runs), "--commands", "nlp.evaluate",
                                 "--runs", "cached"])
    assert [(row["command"], row["items"], row["run"]) for row in again["rows"]] == [("nlp.evaluate", 30, "cached")]
    assert (runs / "nlp-train" / "checkpoints" / "last.ckpt").stat().st_mtime_ns == trained  # the checkpoint is reused
    assert "encoding the test split" not in (runs / "nlp-eval30_cached.log").read_text()  # and the data cache kept


@pytest.mark.slow
def test_scale_images_measures_files_and_held_images(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results.jsonl"
    output = scale_images.main(
        ["--quick", "--speed-steps", "3", "--repeats", "1", "--out-dir", str(tmp_path / "runs"), "--append", str(results)]
    )
    assert json.loads(results.read_text()) == output
    assert [(row["train"], row["images"], row["run"], row["in_memory"]) for row in output["rows"]] == [
        (200, 240, "first", "false"), (200, 240, "cached", "false"), (200, 240, "cached", "true")
    ]
    assert all(row["peak_mib"] > 0 and row["seconds"] > 0 and row["png_mb"] > 0 for row in output["rows"])
    held = (tmp_path / "runs" / "run200_cached_true.log").read_text()
    assert "holding 240 images decoded in memory" in held
    assert "holding" not in (tmp_path / "runs" / "run200_cached_false.log").read_text()
    assert [(row["in_memory"], row["augment_on"], row["steps"]) for row in output["speed"]] == [
        ("false", "loader", 3), ("true", "loader", 3), ("true", "device", 3)
    ]
    assert all(row["images_per_second"] > 0 for row in output["speed"])
    table = capsys.readouterr().out
    assert "| training images | all images | PNG MB | run | data.in_memory | wall s | peak MiB |" in table
    assert "| data.in_memory | data.augment_on | images/s per run | median |" in table
