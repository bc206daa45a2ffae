"""benchmarks.quality_report: the docs' results page is regenerated from the result files (and
is up to date with them), the latest run wins, the loop keeps its best rate, seeds are averaged,
a lead is taken on the seeds both sides ran, speed is compared only at an equal batch, levers are
set against the defaults they change, and the figures are written."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

from omegaconf import OmegaConf

from benchmarks import quality_report
from benchmarks.quality_report import DEFAULTS, LOOP, NMT_DEFAULTS, NMT_LOOP, PATCH, Contender

NMT_FLOAT32 = f"{NMT_DEFAULTS}, float32"
WIDE = quality_report.LEGACY_WIDTH  # the width of rows that record none


def scored(score: float, seed: int = 0, machine: str = "Intel Xeon") -> quality_report.Run:
    """One run of a cell: its score, seed and machine (the rest is what no test here reads)."""
    return quality_report.Run("x", ("minutes", 8.0), seed, "x", score, None, None, "2026-01-01T10:00:00+00:00", machine=machine)


def translation(dropout: float | str = 0.1, smoothing: float | str = 0.1, width: tuple[int, int] = WIDE) -> dict:
    """Translation defaults of a day after bf16 autocast (and before any later change unless named)."""
    return {**quality_report.LEGACY_NMT, "precision": "auto", "dropout": dropout, "label_smoothing": smoothing, "width": width}


def nmt_contender(row: dict, *today: object, time: str | None = None) -> Contender:
    """The row's contender under the translation defaults of :func:`translation` ``(*today)``, the row
    written at ``time`` (None: now)."""
    return quality_report.nmt_contender(row, translation(*today), time)


VISION = {**quality_report.LEGACY_VISION, "stem": "conv"}  # the convolutional stem, and no later change of the recipe


def vision_line(time: str, rows: list[dict], stem: str = "patch") -> str:
    return json.dumps({
        "benchmark": "quality_vision", "env": {"time": time},
        "settings": {"model": {"stem": stem}, "plain_loop": {"lr": 0.002}}, "rows": rows,
    })


def row(contender: str, acc: float, seed: int = 0, speed: float = 100.0, batch: int = 128, **extra) -> dict:
    return {"data": "glyphs", "epochs": 3, "seed": seed, "contender": contender, "test_acc": acc,
            "images_per_second": speed, "batch": batch, **extra}


def write_results(folder: Path) -> None:
    folder.mkdir()
    (folder / "quality_vision_a.jsonl").write_text("\n".join([
        vision_line("2026-01-01T00:00:00", [row("vision.train defaults", 0.10), row("plain timm loop", 0.20, lr=0.002)]),
        # a re-run of the linear-patch defaults replaces the first; a lever under test is left out
        vision_line("2026-01-02T00:00:00", [row("vision.train defaults", 0.30, speed=90.0)]),
        vision_line("2026-01-02T00:00:01", [row("vision.train defaults + model.weight_init=mimetic", 0.99)]),
    ]) + "\n")
    (folder / "quality_vision_b.jsonl").write_text("\n".join([
        vision_line("2026-01-03T00:00:00", [row("plain timm loop", 0.25, lr=0.004), row("plain timm loop", 0.05, lr=0.001)]),
        vision_line("2026-01-03T00:00:01", [row("vision.train defaults + model.stem=conv", 0.40, seed=0, speed=80.0)]),
        vision_line("2026-01-04T00:00:00", [row("vision.train defaults", 0.60, seed=1, speed=120.0, batch=64)], stem="conv"),
    ]) + "\n")
    (folder / "quality_vision_tuning.jsonl").write_text(json.dumps({"command": "a tuning log line"}) + "\n")
    (folder / "quality_nmt.jsonl").write_text(json.dumps({
        "benchmark": "quality_nmt", "env": {"time": "2026-01-01T00:00:00"},
        "rows": [
            {"corpus": "toy", "minutes": 8.0, "contender": "nlp.train (transformer_mini)", "bleu": 20.0,
             "train_tokens_per_second": 300.0, "precision": "bf16-mixed"},
            {"corpus": "toy", "minutes": 8.0, "contender": "plain nn.Transformer loop", "bleu": 5.0, "train_tokens_per_second": 200.0},
            {"minutes": 8.0, "contender": "plain nn.Transformer loop", "bleu": 1.0},  # before corpora were named
        ],
    }) + "\n")


def cells_of(page: str, start: str) -> list[str]:
    line = next(line for line in page.splitlines() if line.startswith(start))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_tables_take_the_latest_run_the_loops_best_rate_and_the_mean_of_seeds(tmp_path: Path) -> None:
    write_results(tmp_path / "results")
    page = quality_report.render(tmp_path / "results", tmp_path / "figures", VISION, translation())  # the lines'
    cells = cells_of(page, "| glyphs | 3 epochs |")
    assert cells[2] == "25.0"  # the loop's best of its rates 1e-3, 2e-3, 4e-3
    assert cells[3] == "50.0 (40.0-60.0, 2 seeds)"  # conv stem: the override of seed 0, the default of seed 1
    assert cells[4] == "+15.0 (seed 0)"  # on the seed both ran: 40.0 against 25.0
    assert cells[5] == "0.80x"  # seed 0 beside the loop at its batch; seed 1 trained at 64, a day later
    assert len(cells) == 6  # one column of defaults: today's; earlier recipes and levers are told in words
    # each against the defaults it changes, on the seeds both have; the later linear-patch run, not the first
    assert "- **The linear patch embedding of the ViT paper instead of the convolutional stem** (`model.stem=patch`), " \
        "against today's defaults:\n    - glyphs, 3 epochs: 30.0 against 40.0 (-10.0)" in page
    assert "- **Mimetic initialization of the attention weights** (`model.weight_init=mimetic`), against the earlier " \
        "defaults (linear patch embedding):\n    - glyphs, 3 epochs: 99.0 against 30.0 (+69.0)" in page
    assert cells_of(page, "| toy | 8 minutes |")[2:] == ["5.0", "20.0", "+15.0", "1.50x"]
    for name in ("vision_quality.png", "translation_quality.png", "speed_ratios.png"):
        assert (tmp_path / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_lead_between_two_machines_is_marked_and_has_no_speed_ratio(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    lines = [json.loads(vision_line(time, [row(name, acc)], stem="conv")) for time, name, acc in (
        ("2026-01-01T00:00:00", "vision.train defaults", 0.5), ("2026-01-01T00:00:01", "plain timm loop", 0.2))]
    lines[0]["env"]["cpu"], lines[1]["env"]["cpu"] = "Intel(R) Xeon(R) Processor", "AMD EPYC"
    (folder / "quality_vision.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    page = quality_report.render(folder, None, VISION)
    assert cells_of(page, "| glyphs | 3 epochs |")[4:] == ["+30.0†", "-"]
    assert "† the loop's run and the defaults' ran on different machines." in page
    lines[1]["env"]["cpu"] = "Intel Xeon"  # the same machine, named without its trademarks
    (folder / "quality_vision.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert cells_of(quality_report.render(folder, None, VISION), "| glyphs | 3 epochs |")[4:] == ["+30.0", "1.00x"]


def test_the_speed_ratio_pairs_the_runs_of_one_session_at_one_batch(tmp_path: Path) -> None:
    """The defaults' seeds ran on two days, the loop's on the first: the ratio comes from the pair of
    the first day alone; a run of the same session at another batch pairs with none."""
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "quality_vision.jsonl").write_text("\n".join([
        vision_line("2026-01-01T10:00:00", [row("plain timm loop", 0.2), row("vision.train defaults", 0.5, speed=120.0)], stem="conv"),
        vision_line("2026-01-02T10:00:00", [row("vision.train defaults", 0.7, seed=1, speed=300.0)], stem="conv"),
    ]) + "\n")
    assert cells_of(quality_report.render(folder, None, VISION), "| glyphs | 3 epochs |")[3:] == [
        "60.0 (50.0-70.0, 2 seeds)", "+30.0 (seed 0)", "1.20x"]
    with (folder / "quality_vision.jsonl").open("a") as results:
        results.write(vision_line("2026-01-01T10:30:00", [row("vision.train defaults", 0.5, seed=2, speed=30.0, batch=64)], stem="conv") + "\n")
    assert cells_of(quality_report.render(folder, None, VISION), "| glyphs | 3 epochs |")[5] == "1.20x"


def test_a_run_that_shared_its_machine_has_no_speed_ratio_in_either_head(tmp_path: Path) -> None:
    """A line marked ``shared_machine`` keeps its score but its speed is no figure: the pair shows
    its lead and no ratio, for images/s and for tokens/s alike."""
    folder = tmp_path / "results"
    folder.mkdir()
    vision = [json.loads(vision_line(time, [row(name, acc)], stem="conv")) for time, name, acc in (
        ("2026-01-01T00:00:00", "vision.train defaults", 0.5), ("2026-01-01T00:00:01", "plain timm loop", 0.2))]
    nmt = [{"benchmark": "quality_nmt", "env": {"time": f"2026-01-01T00:00:0{second}"}, "rows": [{
        "corpus": "toy", "minutes": 30.0, "contender": contender, "bleu": bleu, "train_tokens_per_second": 300.0,
        "precision": "bf16-mixed", "dropout": "auto", "min_dropout": 0.05, "label_smoothing": "auto", "dim": 192, "ffn_dim": 768,
    }]} for second, contender, bleu in ((0, "nlp.train (transformer_mini)", 30.0), (1, NMT_LOOP, 20.0))]

    def ratios() -> list[list[str]]:
        (folder / "quality_vision.jsonl").write_text("".join(json.dumps(line) + "\n" for line in vision))
        (folder / "quality_nmt.jsonl").write_text("".join(json.dumps(line) + "\n" for line in nmt))
        page = quality_report.render(folder, None, VISION, translation("auto", "auto", (192, 768)))
        return [cells_of(page, "| glyphs | 3 epochs |")[4:], cells_of(page, "| toy | 30 minutes |")[4:]]

    assert ratios() == [["+30.0", "1.00x"], ["+10.0", "1.00x"]]
    vision[1]["env"]["shared_machine"] = nmt[1]["env"]["shared_machine"] = True
    assert ratios() == [["+30.0", "-"], ["+10.0", "-"]]


def test_contenders_are_named_by_their_patch_embedding() -> None:
    def name(row: dict, settings: dict) -> str:
        return quality_report.vision_contender(row, settings, VISION).name

    settings = {"model": {"stem": "patch"}}
    assert name({"contender": "plain timm loop"}, settings) == LOOP
    assert name({"contender": "vision.train defaults"}, settings) == PATCH
    assert name({"contender": "vision.train defaults"}, {"model": {"stem": "conv"}}) == DEFAULTS
    assert name({"contender": "vision.train defaults + model.stem=conv"}, settings) == DEFAULTS
    assert name({"contender": "vision.train defaults"}, {}) == PATCH  # before stems existed
    assert name({"contender": "vision.train defaults + data.hflip=0"}, settings) == f"{PATCH} + data.hflip=0"
    lever = {"contender": "vision.train defaults + model.stem=conv + +callbacks.ema.decay=0.99"}
    assert name(lever, settings) == f"{DEFAULTS} + +callbacks.ema.decay=0.99"


def test_contenders_are_named_by_their_warmup_cap_and_set_against_the_defaults_they_change() -> None:
    conv = {"model": {"stem": "conv"}}
    contender = functools.partial(quality_report.vision_contender, today={**VISION, "max_warmup_fraction": 0.3})
    today = {"contender": "vision.train defaults", "max_warmup_fraction": 0.3}
    assert contender(today, conv) == Contender(DEFAULTS)
    before = contender({"contender": "vision.train defaults"}, conv)  # no cap recorded: 0.1, the cap of its time
    assert before == Contender(f"{DEFAULTS}, warmup cap 0.1", DEFAULTS, "budget.max_warmup_fraction=0.1")
    # the lever that became the default is the default; a lever measured before names its own defaults
    assert contender({"contender": "vision.train defaults + budget.max_warmup_fraction=0.3"}, conv) == Contender(DEFAULTS)
    old_lever = contender({"contender": "vision.train defaults + model.layer_scale=1e-4"}, conv)
    assert old_lever == Contender(f"{DEFAULTS}, warmup cap 0.1 + model.layer_scale=1e-4", f"{DEFAULTS}, warmup cap 0.1", "model.layer_scale=1e-4")
    patch = contender({"contender": "vision.train defaults"}, {"model": {"stem": "patch"}})
    # newest change first: the name of the recipe it is set against begins its own
    assert patch == Contender(f"{DEFAULTS}, warmup cap 0.1, linear patch embedding", f"{DEFAULTS}, warmup cap 0.1", "model.stem=patch")


def test_contenders_are_named_by_their_beta2_set_by_a_row_or_by_its_overrides() -> None:
    conv = {"model": {"stem": "conv"}}
    contender = functools.partial(quality_report.vision_contender, today={**VISION, "max_warmup_fraction": 0.3, "beta2": 0.99})
    assert contender({"contender": "vision.train defaults", "max_warmup_fraction": 0.3, "beta2": 0.99}, conv) == Contender(DEFAULTS)
    before = contender({"contender": "vision.train defaults", "max_warmup_fraction": 0.3}, conv)  # no beta2 recorded: 0.999
    assert before == Contender(f"{DEFAULTS}, beta2 0.999", DEFAULTS, "module.betas=[0.9,0.999]")
    assert quality_report.is_history(before.lever) and not quality_report.is_history("module.betas=[0.9,0.95]")
    # the lever that became the default is the default, whether the row recorded its beta2 or not
    lever = {"contender": "vision.train defaults + module.betas=[0.9,0.99]", "max_warmup_fraction": 0.3}
    assert contender(lever, conv) == Contender(DEFAULTS)
    assert contender({**lever, "beta2": 0.99}, conv) == Contender(DEFAULTS)
    # another beta2, or another beta1, stays a lever of the defaults of its time
    other = contender({"contender": "vision.train defaults + module.betas=[0.9,0.95]", "max_warmup_fraction": 0.3}, conv)
    assert other == Contender(f"{DEFAULTS}, beta2 0.95", DEFAULTS, "module.betas=[0.9,0.95]")
    beta1 = contender({"contender": "vision.train defaults + module.betas=[0.8,0.99]", "max_warmup_fraction": 0.3}, conv)
    assert beta1 == Contender(f"{DEFAULTS}, beta2 0.999 + module.betas=[0.8,0.99]", f"{DEFAULTS}, beta2 0.999", "module.betas=[0.8,0.99]")
    # an earlier recipe is set against the one that differs in its newest change alone
    older = contender({"contender": "vision.train defaults"}, conv)
    assert older == Contender(f"{DEFAULTS}, beta2 0.999, warmup cap 0.1", f"{DEFAULTS}, beta2 0.999", "budget.max_warmup_fraction=0.1")


def test_contenders_are_named_by_their_stem_convolutions_which_only_a_convolutional_stem_has() -> None:
    conv = {"model": {"stem": "conv"}}
    today = {**VISION, "max_warmup_fraction": 0.3, "beta2": 0.99, "stem_convs": 2}
    contender = functools.partial(quality_report.vision_contender, today=today)
    recorded = {"max_warmup_fraction": 0.3, "beta2": 0.99}
    before = contender({"contender": "vision.train defaults", **recorded}, conv)  # no stem_convs recorded: 1
    assert before == Contender(f"{DEFAULTS}, 1 stem convolution per stage", DEFAULTS, "model.stem_convs=1")
    assert quality_report.is_history(before.lever) and not quality_report.is_history("model.stem_convs=3")
    # the lever that became the default is the default, whether the row recorded its convolutions or not
    lever = {"contender": "vision.train defaults + model.stem_convs=2", **recorded}
    assert contender(lever, conv) == Contender(DEFAULTS)
    assert contender({"contender": "vision.train defaults", **recorded, "stem_convs": 2}, conv) == Contender(DEFAULTS)
    deeper = contender({"contender": "vision.train defaults + model.stem_convs=3", **recorded}, conv)
    assert deeper == Contender(f"{DEFAULTS}, 3 stem convolutions per stage", DEFAULTS, "model.stem_convs=3")
    # the linear patch embedding has no stem convolutions to name; it is set against the stem of its time
    patch = contender({"contender": "vision.train defaults", **recorded}, {"model": {"stem": "patch"}})
    assert patch == Contender(f"{PATCH}", f"{DEFAULTS}, 1 stem convolution per stage", "model.stem=patch")


def test_the_defaults_before_a_change_of_recipe_are_a_lever_of_todays(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "quality_vision.jsonl").write_text("\n".join([
        vision_line("2026-01-01T00:00:00", [row("vision.train defaults", acc, seed=seed) for seed, acc in ((0, 0.40), (1, 0.50))], stem="conv"),
        vision_line("2026-01-01T00:00:01", [row("vision.train defaults + model.layer_scale=1e-4", 0.45)], stem="conv"),
        vision_line("2026-01-02T00:00:00", [row("vision.train defaults", 0.70, max_warmup_fraction=0.3)], stem="conv"),
        vision_line("2026-01-02T00:00:01", [row("plain timm loop", 0.20, lr=0.002)]),
    ]) + "\n")
    page = quality_report.render(folder, None, {**VISION, "max_warmup_fraction": 0.3})
    assert cells_of(page, "| glyphs | 3 epochs |")[2:] == ["20.0", "70.0", "+50.0", "1.00x"]
    assert "(`budget.max_warmup_fraction=0.1`), against today's defaults:\n" \
        "    - glyphs, 3 epochs: 40.0 against 70.0 (-30.0)" in page  # on seed 0, the only seed today's defaults have
    assert "(`model.layer_scale=1e-4`), against the earlier defaults (warmup cap 0.1):\n" \
        "    - glyphs, 3 epochs: 45.0 against 40.0 (+5.0)" in page


def test_translation_runs_are_named_by_their_precision_and_float32_is_history(tmp_path: Path) -> None:
    """A row that recorded no precision trained in float32 (before ``trainer.precision=auto``); the
    float32 ablation of today's defaults is the same recipe; budgets only float32 reached are listed."""
    contender = nmt_contender
    cli = "nlp.train (transformer_mini)"
    assert contender({"contender": NMT_LOOP}) == Contender(NMT_LOOP)
    assert contender({"contender": cli, "precision": "bf16-mixed"}) == Contender(NMT_DEFAULTS)
    float32 = Contender(NMT_FLOAT32, NMT_DEFAULTS, "trainer.precision=32-true")
    assert contender({"contender": cli}) == float32
    assert contender({"contender": f"{cli} + trainer.precision=32-true", "precision": "32-true"}) == float32
    lever = contender({"contender": f"{cli} + module.lr=1e-3", "precision": "bf16-mixed"})
    assert lever == Contender(f"{NMT_DEFAULTS} + module.lr=1e-3", NMT_DEFAULTS, "module.lr=1e-3")

    def nmt(time: str, rows: list[dict]) -> str:
        return json.dumps({"benchmark": "quality_nmt", "env": {"time": time}, "rows": rows})

    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "quality_nmt.jsonl").write_text("\n".join([
        nmt("2026-01-01T00:00:00", [{"corpus": "toy", "minutes": m, "contender": cli, "bleu": b} for m, b in ((8.0, 10.0), (30.0, 25.0))]),
        nmt("2026-01-02T00:00:00", [{"corpus": "toy", "minutes": 8.0, "contender": cli, "bleu": 14.0, "precision": "bf16-mixed"},
                                    {"corpus": "toy", "minutes": 8.0, "contender": NMT_LOOP, "bleu": 4.0}]),
        nmt("2026-01-02T00:00:01", [{"corpus": "toy", "minutes": 8.0, "contender": f"{cli} + trainer.precision=32-true",
                                     "bleu": 11.0, "precision": "32-true"}]),
    ]) + "\n")
    page = quality_report.render(folder, None, translation=translation())  # the lines ran with the dropout and width of then
    assert cells_of(page, "| toy | 8 minutes |")[2:5] == ["4.0", "14.0", "+10.0"]
    assert "- **Float32 instead of bf16 autocast** (`trainer.precision=32-true`), against today's defaults:\n" \
        "    - toy, 8 minutes: 11.0 against 14.0 (-3.0)" in page  # the ablation replaces the older float32 run
    assert "- toy, 30 minutes: 25.0 with the earlier defaults (float32)." in page


def test_translation_on_a_cpu_without_bf16_is_a_table_of_its_own(tmp_path: Path) -> None:
    """Lines from a CPU that computes no bfloat16 hold the defaults in float32 (the ``auto`` setting
    they recorded, not the float32 ablation) against the loop, in their own table under the
    machine's name; the main table keeps the runs of the CPUs with bfloat16."""
    cli = "nlp.train (transformer_mini)"
    assert nmt_contender({"contender": cli, "precision": "32-true", "precision_setting": "auto"}) == Contender(NMT_DEFAULTS)
    float32 = {"contender": f"{cli} + trainer.precision=32-true", "precision": "32-true", "precision_setting": "32-true"}
    assert nmt_contender(float32) == Contender(NMT_FLOAT32, NMT_DEFAULTS, "trainer.precision=32-true")

    def nmt(env: dict, defaults: float, loop: float, precision: str) -> str:
        rows = [{"corpus": "toy", "minutes": 8.0, "contender": cli, "bleu": defaults, "train_tokens_per_second": 300.0,
                 "precision": precision, "precision_setting": "auto"},
                {"corpus": "toy", "minutes": 8.0, "contender": NMT_LOOP, "bleu": loop, "train_tokens_per_second": 200.0}]
        return json.dumps({"benchmark": "quality_nmt", "env": {"device": "cpu", **env}, "rows": rows})

    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "quality_nmt.jsonl").write_text("\n".join([
        nmt({"time": "2026-01-01T00:00:00", "cpu": "Intel Xeon"}, 20.0, 5.0, "bf16-mixed"),
        nmt({"time": "2026-01-02T00:00:00", "cpu": "AMD EPYC", "cpu_capability": "AVX2", "cpu_bf16": False}, 15.0, 4.0, "32-true"),
        json.dumps({"benchmark": "quality_nmt", "env": {"device": "cpu", "time": "2026-01-02T01:00:00", "cpu": "AMD EPYC",
                                                        "cpu_capability": "AVX2", "cpu_bf16": False},
                    "rows": [{"corpus": "toy", "minutes": 8.0, "contender": f"{cli} + module.lr=1e-3", "bleu": 16.5,
                              "train_tokens_per_second": 300.0, "precision": "32-true", "precision_setting": "auto"},
                             {**float32, "corpus": "toy", "minutes": 8.0, "bleu": 15.5, "train_tokens_per_second": 300.0}]}),
    ]) + "\n")
    page = quality_report.render(folder, tmp_path / "figures", translation=translation())
    main, apart = page.split("### On a CPU without bfloat16")
    apart, rest = apart.split("### History", 1)
    # a lever or an earlier recipe measured on such a CPU is set against the defaults there, and
    # listed with them alone
    assert "(`module.lr=1e-3`), against today's defaults:\n    - toy, 8 minutes: 16.5 against 15.0 (+1.5)" in apart
    assert "(`trainer.precision=32-true`), against today's defaults:\n    - toy, 8 minutes: 15.5 against 15.0 (+0.5)" in apart
    assert "module.lr=1e-3" not in main + rest and "15.5" not in main + rest
    assert cells_of(main, "| toy | 8 minutes |")[2:6] == ["5.0", "20.0", "+15.0", "1.50x"]
    assert "Machine: AMD EPYC (AVX2)." in apart
    # their own figure: the defaults and the loop there, no lever
    float32 = quality_report.measure(folder, VISION, translation()).nmt_float32
    assert {name for _, _, name in quality_report.float32_figures(float32)} == {NMT_LOOP, NMT_DEFAULTS}
    assert f"![Test BLEU against minutes on a CPU without bfloat16](figures/{quality_report.FLOAT32_FIGURE})" in apart
    assert (tmp_path / "figures" / quality_report.FLOAT32_FIGURE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cells_of(apart, "| toy | 8 minutes |")[2:6] == ["4.0", "15.0", "+11.0", "1.50x"]
    assert "The lead as budget:\n\n(no data set has the loop at a larger budget under the defaults)" in apart
    empty = tmp_path / "none"
    empty.mkdir()
    (empty / "quality_nmt.jsonl").write_text(nmt({"time": "2026-01-01T00:00:00", "cpu": "Intel Xeon"}, 20.0, 5.0, "bf16-mixed") + "\n")
    page = quality_report.render(empty, tmp_path / "no-figures", translation=translation())
    assert "(no runs on such a CPU yet)" in page and quality_report.FLOAT32_FIGURE not in page
    assert not (tmp_path / "no-figures" / quality_report.FLOAT32_FIGURE).exists()


def test_a_pair_at_equal_steps_is_a_lever_in_words_and_no_budget_of_the_tables(tmp_path: Path) -> None:
    """Runs bounded by optimizer steps (``quality_nmt --steps``) set a lever against the defaults at
    the same steps; they are not a budget against the loop."""
    cli = "nlp.train (transformer_mini)"
    today = {"precision": "bf16-mixed", "dropout": "auto", "min_dropout": 0.05}
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "quality_nmt.jsonl").write_text(json.dumps({
        "benchmark": "quality_nmt", "env": {"time": "2026-01-01T00:00:00"},
        "rows": [
            {"corpus": "toy", "minutes": 8.0, "contender": cli, "bleu": 20.0, **today},
            {"corpus": "toy", "minutes": 8.0, "contender": NMT_LOOP, "bleu": 5.0},
            {"corpus": "toy", "max_steps": 2300, "contender": cli, "bleu": 21.0, **today},
            {"corpus": "toy", "max_steps": 2300, "contender": f"{cli} + module.label_smoothing=0", "bleu": 22.5, **today},
        ],
    }) + "\n")
    page = quality_report.render(folder, None, translation=translation("auto"))
    assert "    - toy, 2300 steps: 22.5 against 21.0 (+1.5)" in page
    assert cells_of(page, "| toy | 8 minutes |")[2:5] == ["5.0", "20.0", "+15.0"]
    assert "| toy | 2300 steps |" not in page


def test_a_lever_is_set_against_the_defaults_run_of_its_session_and_the_table_shows_the_latest(tmp_path: Path) -> None:
    """The defaults ran twice at 8 minutes, a day apart, on machines of another pace: the lever's
    run is set against the defaults' run of its session, the table against the loop keeps the
    latest, and a speed ratio is shown only between runs of one session."""
    cli = "nlp.train (transformer_mini)"
    today = {"precision": "bf16-mixed", "dropout": "auto", "min_dropout": 0.05}

    def nmt(time: str, rows: list[dict]) -> str:
        return json.dumps({"benchmark": "quality_nmt", "env": {"time": time}, "rows": rows})

    def run(bleu: float, extra: str = "", corpus: str = "toy") -> dict:
        return {"corpus": corpus, "minutes": 8.0, "contender": cli + extra, "bleu": bleu, "train_tokens_per_second": 300.0, **today}

    def loop(corpus: str) -> dict:
        return {"corpus": corpus, "minutes": 8.0, "contender": NMT_LOOP, "bleu": 2.0, "train_tokens_per_second": 100.0}

    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "quality_nmt.jsonl").write_text("\n".join([
        nmt("2026-01-01T10:00:00+00:00", [run(30.0), loop("other")]),
        nmt("2026-01-01T10:20:00+00:00", [run(28.0, " + module.lr=3e-3")]),
        nmt("2026-01-02T09:00:00+00:00", [run(24.0), loop("toy"), run(20.0, corpus="other")]),
    ]) + "\n")
    page = quality_report.render(folder, None, translation=translation("auto"))
    assert "    - toy, 8 minutes: 28.0 against 30.0 (-2.0)" in page  # not against the next day's 24.0
    assert cells_of(page, "| toy | 8 minutes |")[2:] == ["2.0", "24.0", "+22.0", "3.00x"]
    assert cells_of(page, "| other | 8 minutes |")[2:] == ["2.0", "20.0", "+18.0", "-"]  # a day apart: no speed ratio
    (effect,) = quality_report.measure(folder, translation=translation("auto")).nmt_effects["module.lr=3e-3"]
    assert (effect.base.mean, effect.lever.mean) == (30.0, 28.0)


def test_a_lever_set_against_a_run_of_another_machine_says_so() -> None:
    """A pair of runs of one machine is its difference alone; where the lever's run and the
    defaults' ran on different machines, or the seeds of one side on several, the words say so."""
    def cell(bleu: float, machine: str | None) -> quality_report.Cell:
        return quality_report.Cell(
            (scored(bleu, 0, machine),) if machine else (scored(bleu, 0, "Intel Xeon"), scored(bleu, 1, "AMD EPYC"))
        )

    def words(lever: str | None, base: str | None) -> str:
        return quality_report.Effect("toy", ("minutes", 30.0), NMT_DEFAULTS, cell(30.0, base), cell(31.0, lever)).words()

    assert words("Intel Xeon", "Intel Xeon") == "toy, 30 minutes: 31.0 against 30.0 (+1.0)"
    assert words("AMD EPYC", "Intel Xeon") == "toy, 30 minutes: 31.0 against 30.0 (+1.0, on another machine)"
    assert words(None, "Intel Xeon").endswith("(+1.0, on another machine)")


def test_a_lever_names_earlier_defaults_and_the_validation_figures_where_asked() -> None:
    def run(test: float, validation: float | None) -> quality_report.Run:
        return dataclasses.replace(scored(test), validation=validation)

    def effect(base: str, lever_validation: float | None) -> quality_report.Effect:
        cells = quality_report.Cell((run(30.0, 33.0),)), quality_report.Cell((run(31.0, lever_validation),))
        return quality_report.Effect("toy", ("minutes", 30.0), base, *cells)

    assert effect(NMT_DEFAULTS, 32.0).words(validation=True) == "toy, 30 minutes: 31.0 against 30.0 (+1.0; validation 32.0 against 33.0)"
    assert effect(NMT_DEFAULTS, None).words(validation=True) == "toy, 30 minutes: 31.0 against 30.0 (+1.0)"  # one side has none
    earlier = effect(f"{NMT_DEFAULTS}, dropout 0.1", 32.0)
    assert earlier.words(gain=True, named=True) == "toy, 30 minutes: 30.0 against 31.0 (-1.0, the earlier defaults (dropout 0.1))"
    assert effect(NMT_DEFAULTS, 32.0).words(gain=True, named=True) == "toy, 30 minutes: 30.0 against 31.0 (-1.0)"


def test_a_multiple_is_cut_to_two_decimals_never_rounded_up() -> None:
    assert [quality_report.times(m) for m in (30 / 8, 10 / 3, 4.0, 2.3, 2 / 3)] == ["3.75", "3.33", "4", "2.3", "0.66"]


def test_the_lead_as_budget_is_the_largest_multiple_of_budget_the_loop_stays_under() -> None:
    """Each set names the loop's largest budget still under a figure of the defaults at a smaller
    budget of the same unit, with the multiple; a set where the loop catches up has no line."""
    def cell(bleu: float, machine: str = "Intel Xeon") -> quality_report.Cell:
        return quality_report.Cell((scored(bleu, machine=machine),))

    figures = {
        ("a", ("minutes", 8.0), NMT_DEFAULTS): cell(26.0),
        ("a", ("minutes", 30.0), NMT_DEFAULTS): cell(30.0),
        ("a", ("minutes", 30.0), NMT_LOOP): cell(21.0),
        ("a", ("minutes", 120.0), NMT_LOOP): cell(29.0, "AMD EPYC"),
        ("a", ("epochs", 1.0), NMT_DEFAULTS): cell(50.0),
        ("b", ("minutes", 8.0), NMT_DEFAULTS): cell(10.0),
        ("b", ("minutes", 30.0), NMT_LOOP): cell(12.0),
    }
    assert quality_report.budget_multiples(figures, NMT_DEFAULTS, NMT_LOOP) == (
        "- a: the loop at 120 minutes, 29.0, under the defaults at 30 minutes, 30.0: "
        "more than 4 times the minutes, on another machine"
    )
    del figures[("a", ("minutes", 120.0), NMT_LOOP)]
    assert quality_report.budget_multiples(figures, NMT_DEFAULTS, NMT_LOOP) == (
        "- a: the loop at 30 minutes, 21.0, under the defaults at 8 minutes, 26.0: more than 3.75 times the minutes"  # 30 / 8, not rounded up to 3.8
    )
    del figures[("a", ("minutes", 30.0), NMT_LOOP)]
    assert quality_report.budget_multiples(figures, NMT_DEFAULTS, NMT_LOOP).startswith("(no data set")


def test_translation_rows_of_another_dropout_are_an_earlier_recipe() -> None:
    """Rows that recorded no dropout ran with 0.1, ``auto`` rows that recorded no ``min_dropout``
    switched it on at any rate, and ``auto`` rows marked ``dropout_masks: F.dropout`` drew their
    masks with PyTorch's sampler, and rows marked ``epoch_bound`` stopped at the default epoch bound
    before their time ran out; under today's defaults all are earlier recipes, and their ablations
    are set against them."""
    contender = nmt_contender
    cli = "nlp.train (transformer_mini)"
    today = {"precision": "bf16-mixed", "dropout": "auto", "min_dropout": 0.05}
    assert contender({"contender": cli, **today}, "auto") == Contender(NMT_DEFAULTS)
    earlier = f"{NMT_DEFAULTS}, dropout 0.1"
    assert contender({"contender": cli, "precision": "bf16-mixed"}, "auto") == Contender(earlier, NMT_DEFAULTS, "model.dropout=0.1")
    assert contender({"contender": cli}, "auto") == Contender(f"{earlier}, float32", earlier, "trainer.precision=32-true")
    any_rate = f"{NMT_DEFAULTS}, dropout auto from 3 passes"
    before_minimum = {"contender": cli, "precision": "bf16-mixed", "dropout": "auto"}
    assert contender(before_minimum, "auto") == Contender(any_rate, NMT_DEFAULTS, "model.dropout=auto from 3 passes")
    lever = contender({"contender": f"{cli} + module.lr=1e-3", **today}, "auto")
    assert lever == Contender(f"{NMT_DEFAULTS} + module.lr=1e-3", NMT_DEFAULTS, "module.lr=1e-3")
    assert contender({**before_minimum, "contender": f"{cli} + module.lr=1e-3"}, "auto").base == any_rate
    assert quality_report.is_history("model.dropout=0.1") and not quality_report.is_history("model.dropout=0.2")
    assert quality_report.is_history("model.dropout=auto from 3 passes")
    torch_masks = contender({"contender": cli, **today, "dropout_masks": "F.dropout"}, "auto")
    assert torch_masks == Contender(f"{NMT_DEFAULTS}, dropout auto with F.dropout", NMT_DEFAULTS, "model.dropout=auto with F.dropout")
    assert quality_report.is_history(torch_masks.lever)
    capped = contender({"contender": cli, **today, "epoch_bound": 10}, "auto")
    assert capped == Contender(f"{NMT_DEFAULTS}, at most 10 epochs", NMT_DEFAULTS, "trainer.max_epochs=10")
    assert quality_report.is_history(capped.lever) and not quality_report.is_history("trainer.max_epochs=5")


def test_label_smoothing_of_the_defaults_of_their_time_is_history_under_other_defaults() -> None:
    """Rows that recorded no label smoothing ran with 0.1. Under defaults of 0.1 hard targets are a
    lever; under hard targets the rows of 0.1 are an earlier recipe, each set against the recipe
    without its oldest difference, and the lever's rows are the defaults."""
    contender = nmt_contender
    cli = "nlp.train (transformer_mini)"
    today = {"precision": "bf16-mixed", "dropout": "auto", "min_dropout": 0.05}
    hard = {"contender": f"{cli} + module.label_smoothing=0", **today}
    assert contender(hard, "auto", 0.1) == Contender(f"{NMT_DEFAULTS} + module.label_smoothing=0", NMT_DEFAULTS, "module.label_smoothing=0")
    assert contender({"contender": cli, **today}, "auto", 0.1) == Contender(NMT_DEFAULTS)
    assert contender(hard, "auto", 0.0) == Contender(NMT_DEFAULTS)
    assert contender({"contender": cli, **today, "label_smoothing": 0.0}, "auto", 0.0) == Contender(NMT_DEFAULTS)
    smoothed = f"{NMT_DEFAULTS}, label smoothing 0.1"
    assert contender({"contender": cli, **today}, "auto", 0.0) == Contender(smoothed, NMT_DEFAULTS, "module.label_smoothing=0.1")
    assert quality_report.is_history("module.label_smoothing=0.1") and not quality_report.is_history("module.label_smoothing=0.2")
    capped = contender({"contender": cli, **today, "epoch_bound": 10}, "auto", 0.0)
    assert capped == Contender(f"{smoothed}, at most 10 epochs", smoothed, "trainer.max_epochs=10")
    older = contender({"contender": cli, "precision": "bf16-mixed"}, "auto", 0.0)  # dropout 0.1 and smoothing 0.1
    assert older == Contender(f"{smoothed}, dropout 0.1", smoothed, "model.dropout=0.1")
    assert contender({**hard, "precision": "bf16-mixed", "dropout": 0.1}, "auto", 0.0) == Contender(
        f"{NMT_DEFAULTS}, dropout 0.1", NMT_DEFAULTS, "model.dropout=0.1"
    )
    lever = contender({"contender": f"{cli} + module.label_smoothing=0.2", **today}, "auto", 0.0)
    assert lever == Contender(f"{NMT_DEFAULTS} + module.label_smoothing=0.2", NMT_DEFAULTS, "module.label_smoothing=0.2")
    restored = {"contender": f"{cli} + module.label_smoothing=0.1", **today, "label_smoothing": 0.1}  # the earlier value, set by hand
    assert contender(restored, "auto", 0.0) == Contender(smoothed, NMT_DEFAULTS, "module.label_smoothing=0.1")


def test_the_width_of_the_defaults_of_their_time_is_history_under_a_narrower_default() -> None:
    """Rows that recorded no width ran with 256 and 1,024. Under those defaults a narrower model is
    a lever; under a default of 192 and 768 its rows (and rows that recorded that width) are the
    defaults, the rows of 256 an earlier recipe (also where their own overrides set it, so one run of
    that recipe has one name), and another width a lever."""
    contender = nmt_contender
    cli = "nlp.train (transformer_mini)"
    today = {"precision": "bf16-mixed", "dropout": "auto", "min_dropout": 0.05, "label_smoothing": 0.1}
    narrow, narrowed = (192, 768), {"contender": f"{cli} + model.dim=192 + model.ffn_dim=768", **today}
    lever = "model.dim=192 + model.ffn_dim=768"
    assert contender(narrowed, "auto", 0.1) == Contender(f"{NMT_DEFAULTS} + {lever}", NMT_DEFAULTS, lever)
    assert contender(narrowed, "auto", 0.1, narrow) == Contender(NMT_DEFAULTS)
    assert contender({"contender": cli, **today, "dim": 192, "ffn_dim": 768}, "auto", 0.1, narrow) == Contender(NMT_DEFAULTS)
    wide = f"{NMT_DEFAULTS}, width 256"
    assert contender({"contender": cli, **today}, "auto", 0.1, narrow) == Contender(wide, NMT_DEFAULTS, "model.dim=256 + model.ffn_dim=1024")
    assert quality_report.is_history("model.dim=256 + model.ffn_dim=1024") and not quality_report.is_history(lever)
    older = contender({"contender": cli, **today, "precision": "32-true"}, "auto", 0.1, narrow)
    assert older == Contender(f"{wide}, float32", wide, "trainer.precision=32-true")
    rate = contender({"contender": f"{cli} + module.lr=3e-3", **today}, "auto", 0.1, narrow)
    assert rate == Contender(f"{wide} + module.lr=3e-3", wide, "module.lr=3e-3")
    set_by_hand = {"contender": f"{cli} + model.dim=256 + model.ffn_dim=1024", **today, "dim": 256, "ffn_dim": 1024}
    assert contender(set_by_hand, "auto", 0.1, narrow) == Contender(wide, NMT_DEFAULTS, "model.dim=256 + model.ffn_dim=1024")
    by_hand_rate = {**set_by_hand, "contender": f"{cli} + model.dim=256 + model.ffn_dim=1024 + module.lr=3e-3"}
    assert contender(by_hand_rate, "auto", 0.1, narrow) == Contender(f"{wide} + module.lr=3e-3", wide, "module.lr=3e-3")
    other = "model.dim=128 + model.ffn_dim=512"
    assert contender({"contender": f"{cli} + {other}", **today}, "auto", 0.1, narrow) == Contender(
        f"{NMT_DEFAULTS} + {other}", NMT_DEFAULTS, other
    )


def test_the_docs_results_page_is_up_to_date_with_the_result_files() -> None:
    assert quality_report.main(["--check"]) == 0, "run python -m benchmarks.quality_report"


def test_check_fails_on_a_stale_page(tmp_path: Path) -> None:
    write_results(tmp_path / "results")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "results.md").write_text("a stale page\n")
    assert quality_report.main(["--results", str(tmp_path / "results"), "--docs", str(tmp_path / "docs"), "--check"]) == 1
    assert quality_report.main(["--results", str(tmp_path / "results"), "--docs", str(tmp_path / "docs")]) == 0
    assert quality_report.main(["--results", str(tmp_path / "results"), "--docs", str(tmp_path / "docs"), "--check"]) == 0


def test_a_proving_ground_of_another_size_is_its_own_set() -> None:
    def settings(train: int) -> dict:
        return {"images": {"cluttered-digits": {"train": train, "val": 5000, "test": 10000}}}

    ground = {"data": "cluttered-digits"}
    assert quality_report.vision_data(ground, settings(60_000)) == "cluttered-digits"
    assert quality_report.vision_data(ground, settings(50_000)) == "cluttered-digits (50,000)"
    assert quality_report.vision_data(ground, {}) == "cluttered-digits"  # lines from before counts were recorded
    assert quality_report.vision_data({"data": "digits"}, {"images": {"digits": {"train": 1258}}}) == "digits"


def test_a_contender_keeps_its_colour_and_marker_in_every_panel(tmp_path: Path, monkeypatch) -> None:
    from matplotlib.axes import Axes

    drawn: list[tuple[str, str, str]] = []
    errorbar = Axes.errorbar

    def recording(self, *args, **kwargs):
        drawn.append((self.get_title(), kwargs["label"], (kwargs["color"], kwargs["marker"])))
        return errorbar(self, *args, **kwargs)

    monkeypatch.setattr(Axes, "errorbar", recording)
    cell = quality_report.Cell((scored(49.0, 0), scored(51.0, 1)))
    figures = {  # the first set lacks the middle contender, so a colour cycle per panel would shift
        ("a", ("epochs", 3.0), "loop"): cell, ("a", ("epochs", 3.0), "today"): cell,
        ("b", ("epochs", 3.0), "loop"): cell, ("b", ("epochs", 3.0), "earlier"): cell, ("b", ("epochs", 3.0), "today"): cell,
    }
    quality_report.plot_quality(figures, ("loop", "earlier", "today"), "accuracy", tmp_path / "q.png")
    colours = {label: {colour for _, name, colour in drawn if name == label} for _, label, _ in drawn}
    assert all(len(found) == 1 for found in colours.values()) and len(set.union(*colours.values())) == 3
    assert (tmp_path / "q.png").is_file()
    drawn.clear()  # past the ten colours of the cycle, the marker tells contenders apart
    many = tuple(f"recipe {index}" for index in range(12))
    quality_report.plot_quality({("a", ("epochs", 3.0), name): cell for name in many}, many, "accuracy", tmp_path / "q.png")
    assert len({style for _, _, style in drawn}) == 12


def test_a_legend_of_long_labels_is_wrapped_inside_the_figure_above_the_panels() -> None:
    import matplotlib.pyplot as plt

    cell = quality_report.Cell((scored(49.0, 0), scored(51.0, 1)))
    names = ("plain PyTorch loop", *(f"nlp.train defaults, {', '.join(['padding to the longest sentence'] * n)}" for n in (1, 3, 4)))
    figures = {(data, ("minutes", 8.0), name): cell for data in ("a", "b") for name in names}
    fig = quality_report.quality_figure(figures, names, "BLEU")
    renderer = fig.canvas.get_renderer()
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    assert 0 <= box.x0 and box.x1 <= fig.bbox.width and box.y1 <= fig.bbox.height
    assert box.y0 >= max(ax.get_tightbbox(renderer).y1 for ax in fig.axes if ax.get_visible())  # no panel under it
    labels = [text.get_text() for text in legend.get_texts()]
    assert [label.replace("\n", " ") for label in labels] == list(names)
    assert "\n" in labels[-1] and "\n" not in labels[0]
    plt.close(fig)


def test_budgets_measured_only_before_today_take_the_newest_earlier_recipe(tmp_path: Path) -> None:
    """The recipes are ordered by their first run, not by name: a budget today's defaults have not
    run shows the latest recipe that ran it."""
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "quality_vision.jsonl").write_text("\n".join([
        vision_line("2026-01-01T00:00:00", [row("vision.train defaults", 0.40)]),  # the linear patch embedding
        vision_line("2026-01-02T00:00:00", [row("vision.train defaults", 0.60)], stem="conv"),  # beta2 0.999 then
        vision_line("2026-01-02T00:00:01", [row("plain timm loop", 0.20, lr=0.002)]),
        vision_line("2026-01-03T00:00:00", [row("vision.train defaults", 0.70, beta2=0.99, epochs=10)], stem="conv"),
    ]) + "\n")
    page = quality_report.render(folder, None, {**VISION, "beta2": 0.99})
    assert "- glyphs, 3 epochs: 60.0 with the earlier defaults (beta2 0.999) against the loop's 20.0 (+40.0)." in page
    # the history names the changes of today's recipe, oldest first
    assert "oldest change first: the convolutional stem replaced the linear patch embedding; Adam's beta2 (`module.betas`) was lowered." in page


def test_todays_translation_recipe_is_read_from_the_composed_config_and_its_changes_named() -> None:
    """``nmt_defaults`` composes the config ``quality_nmt`` trains with; the translation history
    names each change of the recipe's table, oldest first, and not a setting while it holds its
    first default."""
    preset = OmegaConf.load(quality_report.CONF / "model" / "transformer_mini.yaml")
    today = quality_report.nmt_defaults()
    assert today["width"] == (preset.model.dim, preset.model.ffn_dim) and today["dropout"] == preset.model.dropout
    assert today["precision"] == "auto" and today["epoch_bound"] is None
    assert today["label_smoothing"] == preset.module.label_smoothing == "auto"
    words = quality_report.changes(quality_report.NMT_SETTINGS, today)
    assert words.startswith("training moved from float32 to bf16 autocast") and "narrowed" in words
    assert "label smoothing, 0.1 at every budget, became sized to the planned passes" in words
    assert "label smoothing" not in quality_report.changes(quality_report.NMT_SETTINGS, {**today, "label_smoothing": 0.1})


def test_label_smoothing_sized_to_the_plan_is_a_lever_and_a_recipe_when_it_is_the_default() -> None:
    cli = "nlp.train (transformer_mini)"
    row = {"precision": "bf16-mixed", "dropout": "auto", "min_dropout": 0.05, "label_smoothing": "auto"}
    lever = nmt_contender({"contender": f"{cli} + module.label_smoothing=auto", **row}, "auto", 0.1)
    assert lever == Contender(f"{NMT_DEFAULTS} + module.label_smoothing=auto", NMT_DEFAULTS, "module.label_smoothing=auto")
    assert nmt_contender({"contender": cli, **row}, "auto", "auto") == Contender(NMT_DEFAULTS)
    fixed = nmt_contender({"contender": cli, **row, "label_smoothing": 0.1}, "auto", "auto")
    assert fixed == Contender(f"{NMT_DEFAULTS}, label smoothing 0.1", NMT_DEFAULTS, "module.label_smoothing=0.1")
    # under a later default, the rows of auto are an earlier recipe
    planned = nmt_contender({"contender": cli, **row}, "auto", 0.05)
    assert planned == Contender(f"{NMT_DEFAULTS}, label smoothing auto", NMT_DEFAULTS, "module.label_smoothing=auto")


def test_a_lever_of_a_strict_setting_run_before_its_default_changed_is_set_against_the_defaults_of_its_time() -> None:
    """Hard targets measured while the defaults smoothed at 0.1 stay a lever of those defaults once
    ``auto`` is today's, so they pair with the defaults' runs of their session; run after the
    change (or now), they are set against today's."""
    cli = "nlp.train (transformer_mini)"
    ran = {"precision": "bf16-mixed", "dropout": "auto", "min_dropout": 0.05}
    hard = {"contender": f"{cli} + module.label_smoothing=0", **ran, "label_smoothing": 0.0}
    before, since = "2026-12-04T12:00:00+00:00", quality_report.SMOOTHING_SINCE
    assert quality_report.moment(before) < quality_report.moment(since)
    smoothed = f"{NMT_DEFAULTS}, label smoothing 0.1"
    assert nmt_contender(hard, "auto", "auto", time=before) == Contender(
        f"{smoothed} + module.label_smoothing=0", smoothed, "module.label_smoothing=0"
    )
    assert nmt_contender({"contender": cli, **ran, "label_smoothing": 0.1}, "auto", "auto", time=before).name == smoothed
    today = Contender(f"{NMT_DEFAULTS} + module.label_smoothing=0", NMT_DEFAULTS, "module.label_smoothing=0")
    assert nmt_contender(hard, "auto", "auto", time=since) == nmt_contender(hard, "auto", "auto") == today
