"""BENCHMARKS.md, regenerated from the result files: each script's latest results and the command
that reproduces them.

    python -m benchmarks.report_page            # writes BENCHMARKS.md
    python -m benchmarks.report_page --check    # exit 1 if BENCHMARKS.md is out of date

Every table is taken from ``benchmarks/results/*.jsonl`` (the lines the scripts append with
``--append``), the latest line of its kind winning; the commands are the ones recorded in those
lines, with the paths of the machine they ran on left out. The dated notes on how the figures came
about stay in ``benchmarks/LOG.md``, which the site does not publish.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from benchmarks import (
    attention_kernels, decoding_choice, dropout_speed, fine_tune, quality_report, report, scale_evaluate, translation_step,
)
from benchmarks.report import results_of, table
from core.files.atomic import atomic_path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGE = "BENCHMARKS.md"
SPEED_FILES = {1: "cpu_threads1.jsonl", 2: "cpu_threads2.jsonl"}
EXTRA_DECODING = ("cpu_threads1_len256.jsonl", "cpu_threads1_b32_uncached.jsonl")


def reproducible(command: str, results_file: str | None = None) -> str:
    """A recorded command without the machine's paths: ``--out-dir`` dropped, ``--data-dir`` as
    ``DIR`` and ``--append`` into the result file the line is in (``results_file``)."""
    words, out = shlex.split(command), []
    skip = False
    for index, word in enumerate(words):
        if skip:
            skip = False
            continue
        if word == "--out-dir":
            skip = True
        elif word == "--data-dir":
            out += [word, "DIR"]
            skip = True
        elif word == "--append":
            out += [word, f"benchmarks/results/{results_file}" if results_file else words[index + 1]]
            skip = True
        else:
            out.append(word)
    if results_file and "--append" not in words:
        out += ["--append", f"benchmarks/results/{results_file}"]
    return shlex.join(out)


def latest_of(results_dir: Path, benchmark: str) -> list[tuple[str, dict[str, Any]]]:
    """(file name, result) of every result of ``benchmark`` in the folder, oldest first."""
    return results_of(sorted(results_dir.glob("*.jsonl")), benchmark)


def threads(result: Mapping[str, Any]) -> str:
    count = result["env"].get("threads", "?")
    return f"{count} thread" if count == 1 else f"{count} threads"


def command_block(commands: Iterable[str]) -> str:
    return "```bash\n" + "\n".join(dict.fromkeys(commands)) + "\n```"


# ----------------------------------------------------------------------------- speed


TARGETS = (  # (target, its least ratio, benchmark, which cases, ratio name)
    ("ViT training >= {}x timm", "1.0", "vit", lambda case: case.endswith("_train"), "ours/timm"),
    ("ViT inference >= {}x timm", "1.0", "vit", lambda case: case.endswith("_infer"), "ours/timm"),
    ("seq2seq training >= {}x torch.nn.Transformer", "1.0", "seq2seq", None, "train ours/torch"),
    ("cached greedy, 128 tokens, >= {}x uncached", "3", "decoding",
     lambda case: case.startswith("greedy") and case.endswith("len128"), "cached/uncached"),
    ("cached beam 4, 128 tokens, >= {}x uncached", "2", "decoding",
     lambda case: case.startswith("beam") and case.endswith("len128"), "cached/uncached"),
    ("cached >= {}x HF generate", "1.0", "decoding", lambda case: True, "cached/hf"),
)


def ratios(result: Mapping[str, Any], case_test: Callable[[str], bool] | None, name: str) -> dict[str, float]:
    """case -> the named ratio of a result (seq2seq has one ratio and no cases)."""
    if "cases" not in result:
        return {f"d={result['settings']['dim']}, N={result['settings']['layers']}, "
                f"batch {result['settings']['batch']}x{result['settings']['src_len']}": result["ratios"][name]}
    return {case["case"]: case["ratios"][name] for case in result["cases"]
            if case_test(case["case"]) and case["ratios"].get(name) is not None}


def targets_section(results_dir: Path) -> str:
    latest = {count: report.latest_results(results_dir / name) for count, name in SPEED_FILES.items()
              if (results_dir / name).is_file()}
    extra = [result for name in EXTRA_DECODING if (results_dir / name).is_file()
             for result in report.read_results(results_dir / name)]
    rows = []
    for words, shown, benchmark, case_test, name in TARGETS:
        target, least = words.format(shown), float(shown)
        by_threads = {count: ratios(found[benchmark], case_test, name) for count, found in latest.items() if benchmark in found}
        if benchmark == "decoding":  # the extra runs at one thread add cases the default grid leaves out
            for result in extra:
                for case, value in ratios(result, case_test, name).items():
                    by_threads.setdefault(1, {}).setdefault(case, value)
        cases = list(dict.fromkeys(case for values in by_threads.values() for case in values))
        if name == "cached/hf":  # one line for all cases: the range
            cells = [by_threads.get(count, {}) for count in SPEED_FILES]
            text = [f"{min(c.values()):.2f} - {max(c.values()):.2f}" if c else "-" for c in cells]
            met = all(value >= least for c in cells for value in c.values())
            rows.append([target, f"all {len(cases)} decoding cases", *text, "yes" if met else "no"])
            continue
        for index, case in enumerate(cases):
            values = [by_threads.get(count, {}).get(case) for count in SPEED_FILES]
            met = all(value >= least for value in values if value is not None)
            rows.append([target if index == 0 else "", case, *(f"{v:.3f}" if v is not None else "-" for v in values),
                         "yes" if met else "no"])
    return table(["target", "case", "1 thread", "2 threads", "met?"], rows)


def speed_sections(results_dir: Path) -> str:
    parts = []
    for count, name in SPEED_FILES.items():
        if (results_dir / name).is_file():
            sections = report.render(report.latest_results(results_dir / name))
            parts.append(f"## Results, {count} thread{'s' if count > 1 else ''}\n\n{sections.strip()}")
    extras = [f"#### {case_title(result)}\n\n{report.decoding_section(result).split(chr(10), 2)[2]}\n\n"
              f"{report.environment_line(result)}"
              for name in EXTRA_DECODING if (results_dir / name).is_file()
              for result in [report.read_results(results_dir / name)[-1]]]
    if extras:
        parts.append("## Extra decoding runs, 1 thread\n\nCases the default grid leaves out, with uncached decoding "
                     "timed where it takes long (`--uncached-budget` raised).\n\n" + "\n\n".join(extras))
    return "\n\n".join(parts)


def case_title(result: Mapping[str, Any]) -> str:
    cases = result["cases"]
    strategies = sorted({case["case"].split("_")[0] for case in cases})
    batches = sorted({case["batch"] for case in cases})
    lengths = sorted({case["length"] for case in cases})
    return f"{' and '.join(strategies)}, batch {', '.join(map(str, batches))}, {', '.join(map(str, lengths))} tokens"


# ----------------------------------------------------------------------------- quality


def quality_commands(results_dir: Path) -> str:
    """The commands of the runs behind today's table of each head on the results page (today's
    defaults and the loop at its best rate), oldest first, without the machine's paths."""
    quality = quality_report.measure(results_dir)
    today = {run.time for run in quality.vision_runs if run.contender in (quality_report.DEFAULTS, quality_report.LOOP)}
    today |= {run.time for run in quality.nmt_runs}
    lines = [reproducible(result["env"]["command"], name)
             for benchmark in ("quality_vision", "quality_nmt")
             for name, result in latest_of(results_dir, benchmark) if result["env"]["time"] in today]
    return command_block(lines)


# ----------------------------------------------------------------------------- other scripts


def latest_rows(
    results: list[tuple[str, Mapping[str, Any]]], key: Callable[[Mapping[str, Any]], Any]
) -> list[tuple[Mapping[str, Any], str, Mapping[str, Any]]]:
    """(row, file name, result) of the latest row of each ``key(row)``, in the order first seen."""
    latest: dict[Any, tuple] = {}
    for name, result in results:
        for row in result["rows"]:
            latest[key(row)] = (row, name, result)
    order = list(dict.fromkeys(key(row) for _, result in results for row in result["rows"]))
    return [latest[k] for k in order]


def sources(found: Iterable[tuple[Mapping[str, Any], str, Mapping[str, Any]]]) -> str:
    results = {id(result): (name, result) for _, name, result in found}
    return "\n".join(
        f"- `{reproducible(result['env']['command'], name)}` at {result['env']['time']} ({report.machine(result['env'])}, "
        f"{threads(result)})"
        for name, result in sorted(results.values(), key=lambda item: item[1]["env"]["time"])
    )


def ctranslate2_section(results_dir: Path) -> str:
    parts = []
    latest = {result["settings"]["checkpoint"]: (name, result) for name, result in latest_of(results_dir, "ctranslate2_speed")}
    for name, result in sorted(latest.values(), key=lambda item: item[1]["env"]["time"]):
        rows = [[row["contender"], f"{row['sentences_per_s']:.1f}", f"{row['speedup']:.2f}x", f"{row['bleu']:.1f}",
                 f"{row['chrf']:.1f}", f"{100 * row['same_as_pytorch']:.1f}%", f"{row['size_mb']:.1f}"] for row in result["rows"]]
        settings = result["settings"]
        parts.append(
            f"Checkpoint `{Path(settings['checkpoint']).name}`, {settings['sentences']} sentences, beam {settings['beam']}, "
            f"batch {settings['batch']}:\n\n"
            + table(["runtime", "sentences/s", "speed-up", "BLEU", "chrF", "same output as PyTorch", "size MB"], rows)
            + f"\n\n{sources([(None, name, result)])}"
        )
    return "\n\n".join(parts)


def scale_section(results_dir: Path) -> str:
    found = latest_rows(latest_of(results_dir, "scale"), lambda row: (row["pairs"], row["run"]))
    rows = [[f"{row['pairs']:,}", f"{row['tsv_mb']:,.0f}", row["run"], len(row["processes"]),
             " / ".join(f"{process['seconds']:.0f}" for process in row["processes"]),
             " / ".join(f"{process['peak_mib']:,.0f}" for process in row["processes"])] for row, _, _ in found]
    return table(["pairs", "TSV MB", "run", "processes", "wall s (each)", "peak MiB (each)"], rows) + "\n\n" + sources(found)


def scale_evaluate_section(results_dir: Path) -> str:
    found = latest_rows(latest_of(results_dir, "scale_evaluate"), lambda row: (row["command"], row["items"], row["run"]))
    found.sort(key=lambda item: (item[0]["command"], item[0]["items"], item[0]["run"] != "first"))
    return scale_evaluate.markdown([row for row, _, _ in found]) + "\n\n" + sources(found)


def scale_images_section(results_dir: Path) -> str:
    results = latest_of(results_dir, "scale_images")
    found = latest_rows(results, lambda row: (row["train"], row["run"], row["in_memory"]))
    found.sort(key=lambda item: (item[0]["train"], item[0]["run"] != "first", item[0]["in_memory"]))
    rows = [[f"{row['train']:,}", f"{row['images']:,}", f"{row['png_mb']:,.0f}", row["run"], row["in_memory"],
             f"{row['seconds']:.0f}", f"{row['peak_mib']:,.0f}"] for row, _, _ in found]
    text = table(["training images", "all images", "PNG MB", "run", "data.in_memory", "wall s", "peak MiB"], rows)
    text += "\n\n" + sources(found)
    timed = [(name, result) for name, result in results if result.get("speed")]
    if timed:
        name, result = timed[-1]
        runs: dict[tuple[str, str], list[float]] = {}
        for run in result["speed"]:
            runs.setdefault((run["in_memory"], run.get("augment_on", "loader")), []).append(run["images_per_second"])
        rows = [[held, place, " / ".join(f"{value:.0f}" for value in values), f"{sorted(values)[len(values) // 2]:.0f}"]
                for (held, place), values in runs.items()]
        steps = result["speed"][0]["steps"]
        text += (f"\n\nTraining speed, alternated ({steps} steps each):\n\n"
                 + table(["data.in_memory", "data.augment_on", "images/s per run", "median"], rows)
                 + f"\n\n{sources([(None, name, result)])}")
    return text


def latest_table(
    results_dir: Path, benchmark: str, header: list[str], cells: Callable[[Mapping[str, Any]], list[Any]]
) -> str:
    """The latest result of ``benchmark`` as a table, ``cells`` giving each of its rows' cells, and
    the command that wrote it."""
    results = latest_of(results_dir, benchmark)
    if not results:
        return "(no results)"
    name, result = results[-1]
    return table(header, [cells(row) for row in result["rows"]]) + f"\n\n{sources([(None, name, result)])}"


def serve_section(results_dir: Path) -> str:
    return latest_table(
        results_dir, "serve_load", ["mode", "clients (server) or batch (offline)", "requests/s", "p50 ms", "p99 ms", "failed"],
        lambda row: [row["mode"], row.get("clients", row.get("batch_size")), f"{row['requests_per_s']:.1f}",
                     "-" if row.get("p50_ms") is None else f"{row['p50_ms']:.0f}",
                     "-" if row.get("p99_ms") is None else f"{row['p99_ms']:.0f}", row.get("failed", "-")],
    )


def fine_tune_section(results_dir: Path) -> str:
    """The latest ``benchmarks.fine_tune`` result of each head and data, a table each."""
    latest: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for name, result in latest_of(results_dir, "fine_tune"):
        latest[(result["head"], Path(result["data"] or "").name)] = (name, result)
    if not latest:
        return "(no results)"
    parts = []
    for (head, data), (name, result) in sorted(latest.items()):
        title = f"{head}, fine-tuned on `{data}`" if data else f"{head}, continued on a new corpus"
        parts.append(f"**{title}**, from `{result['pretrained']['checkpoint']}`:\n\n{fine_tune.markdown(result['rows'])}\n\n{sources([(None, name, result)])}")
    return "\n\n".join(parts)


def precision_section(results_dir: Path) -> str:
    return latest_table(
        results_dir, "precision", ["head", "items a step", "float32 items/s", "bf16 items/s", "bf16 speed-up"],
        lambda row: [row["head"], row["items"], f"{row['float32']['items_per_s']:.0f}", f"{row['bf16']['items_per_s']:.0f}",
                     f"{row['bf16_speedup']:.2f}x"],
    )


def latest_markdown(results_dir: Path, benchmark: str, markdown: Callable[[Mapping[str, Any]], str]) -> str:
    """The latest result of ``benchmark`` as its script's own table (``markdown`` of the result),
    and the command that wrote it."""
    results = latest_of(results_dir, benchmark)
    if not results:
        return "(no results)"
    name, result = results[-1]
    return f"{markdown(result)}\n\n{sources([(None, name, result)])}"


# The scripts whose result lines are shown as the script prints its own table.
SCRIPT_TABLES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "translation_step": translation_step.result_markdown,
    "attention_kernels": attention_kernels.result_markdown,
    "dropout_speed": dropout_speed.result_markdown,
    "decoding_choice": decoding_choice.result_markdown,
}


def commands_section(results_dir: Path) -> str:
    return latest_table(
        results_dir, "commands", ["command", "`--help` s", "refused argument", "s"],
        lambda row: [f"`{row['command']}`", f"{row['help_s']:.2f}", f"`{row['bad_argument']}`", f"{row['bad_argument_s']:.2f}"],
    )


def render(results_dir: Path) -> str:
    return PAGE_TEMPLATE.format(
        targets=targets_section(results_dir),
        speed=speed_sections(results_dir),
        quality=quality_commands(results_dir),
        ctranslate2=ctranslate2_section(results_dir),
        scale=scale_section(results_dir),
        scale_images=scale_images_section(results_dir),
        scale_evaluate=scale_evaluate_section(results_dir),
        serve=serve_section(results_dir),
        fine_tune=fine_tune_section(results_dir),
        precision=precision_section(results_dir),
        **{name: latest_markdown(results_dir, name, markdown) for name, markdown in SCRIPT_TABLES.items()},
        commands=commands_section(results_dir),
    )


PAGE_TEMPLATE = """\
# Benchmarks

<!-- Generated by `python -m benchmarks.report_page` from benchmarks/results/*.jsonl; do not edit. -->

The latest result of every benchmark script, taken from its result file in `benchmarks/results/`,
and the command that reproduces it. Speed is measured next to what users would run instead:
timm's `VisionTransformer`, a `torch.nn.Transformer` model and Hugging Face
`MarianMTModel.generate`; each script runs the contenders in one process on the same inputs,
interleaved (A B A B ...) after a warmup, and reports medians. **Ratios above 1 mean ours is
faster.** Absolute numbers depend on the machine and on what else ran on it; the ratios of one
interleaved run are what to compare. The quality of the default recipes against plain loops is
on the [Results](docs/results.md) page. How the figures came about, dated, and runs no result file
holds are in `benchmarks/LOG.md`, which the site does not publish.

## Targets (latest run)

The ratios of the latest runs with `--threads 1` and `--threads 2` against the targets of the
speed scripts; "met?" compares every case with the target.

{targets}

{speed}

## Quality of the defaults on real data (CPU)

The tables and figures: [Results](docs/results.md), regenerated from
`benchmarks/results/quality_*.jsonl` by `python -m benchmarks.quality_report`. The commands of the
runs behind its tables of today's defaults against the loops, oldest first (`DIR`: where
`python -m benchmarks.digits_data DIR` and `python -m benchmarks.proving_grounds DIR` wrote the
data sets; the quality scripts build them there when missing); the earlier runs and the levers
are in the same files, each line with its command:

{quality}

## Translation through CTranslate2 (CPU)

`python -m benchmarks.ctranslate2_speed CKPT`: the checkpoint in PyTorch against its
`nlp.export` directories in float32 and int8, translating the same test sentences at beam 4 in
batches of 32 with the checkpoint's decoding settings, one thread each, the median of interleaved
passes; BLEU and chrF of each runtime's own translations beside it. The checkpoints: a reverse
task (letters to the same letters reversed) trained in seconds, and `model=transformer_mini`
trained 8 minutes on gettext en->de:

```bash
python -c "from pathlib import Path; from tests.nlp.trained_translator import TEST_PAIRS, train_reverse_translator as t; t(Path('outputs/reverse/reverse.ckpt'), steps=200); Path('outputs/reverse/test.tsv').write_text(''.join(f'{{s}}\\t{{r}}\\n' for s, r in TEST_PAIRS))"
python -m benchmarks.ctranslate2_speed outputs/reverse/reverse.ckpt --test outputs/reverse/test.tsv --threads 1
python -m nlp.train data=gettext model=transformer_mini trainer=cpu trainer.max_time=00:00:08:00 hydra.run.dir=outputs/ct2-gettext
python -m benchmarks.ctranslate2_speed outputs/ct2-gettext/checkpoints/best-*.ckpt --threads 1
```

{ctranslate2}

## Data at scale: start-up time and memory (CPU)

`python -m benchmarks.scale`: corpora of sentence pairs built offline from the gettext catalogs,
each trained with `nlp.train data=files model=transformer_mini trainer=cpu trainer.max_steps=2`,
the whole process timed by `/usr/bin/time`; "first" starts with an empty data cache (the
tokenizer trained and every split encoded once), "cached" is the next run on the same files;
under DDP each rank is its own process.

{scale}

### Image folders: start-up and memory, files and held images

`python -m benchmarks.scale_images`: `cluttered-digits` folders of 32 px PNGs, each trained with
`vision.train data=imagefolder ... trainer.max_steps=2`, the whole process timed by
`/usr/bin/time`; "first" starts with an empty data cache (the check decodes every image once),
"cached" keeps the check's verdicts; `data.in_memory=true` holds the decoded images.

{scale_images}

### Scoring and translating: time and memory against the test split's size

`python -m benchmarks.scale_evaluate`: `nlp.evaluate`, `nlp.translate` (the sources on stdin) and
`vision.evaluate` at the size of a held-back test split and at ten and a hundred times it, each
process timed whole by `/usr/bin/time`, with checkpoints of two-step training runs; translations
greedy and cut at 16 subwords, the same at every size; "first" starts with an empty data cache
(the test split encoded, or every image's decode checked), "cached" is the next run; "first line
s" is the seconds to `nlp.translate`'s first line of output.

{scale_evaluate}

## Serving under load

`python -m benchmarks.serve_load`: `vision.serve` on the loopback address, one image a request,
at several concurrent clients, beside the offline command on the same images
([Serving](docs/serving.md#load)).

{serve}

## Fine-tuning against training from scratch (CPU)

`python -m benchmarks.fine_tune`: a model trained on one proving ground or corpus, then trained for
the same minutes on new data from its weights (`pretrained=`) and from scratch
([Fine-tuning](docs/fine_tuning.md)).

{fine_tune}

## bf16 autocast against float32 (CPU)

`python -m benchmarks.precision`: one training step of each head's CPU model, the two precisions
alternated, on a CPU with AVX512-BF16: the measurement behind `trainer.precision=auto`, bf16
autocast where the hardware computes bfloat16, for both heads
([Translation](docs/translation.md#precision), [Vision](docs/vision.md#precision)).

{precision}

## A translation training step, lever by lever (CPU)

`python -m benchmarks.translation_step --compile`: one bf16 training step of `transformer_mini`
on 36 pairs of about 30 tokens, each lever against the step before the attention kernel and the
predicted rows ([Translation](docs/translation.md#speed-of-a-training-step)).

{translation_step}

## The two attention kernels (CPU)

`python -m benchmarks.attention_kernels`: one attention call forward and backward, the fused and
the math kernel of `F.scaled_dot_product_attention` alternated, by precision and number of keys:
the measurement behind `core.attention.MATH_KERNEL_MAX_KEYS`.

{attention_kernels}

## A dropout layer (CPU)

`python -m benchmarks.dropout_speed`: one dropout layer forward and backward on the activations of
a feed-forward hidden layer of `transformer_mini`, PyTorch's `F.dropout` and `core.dropout` (its
mask from bulk integer draws) alternated, beside the product alone, by precision
([Translation](docs/translation.md#speed-of-a-training-step)).

{dropout_speed}

## Decoding settings per corpus

`python -m benchmarks.decoding_choice`: beam width, length penalty and n-gram blocking of each
trained model chosen on its validation split by an `nlp.evaluate` sweep, then the test BLEU of the
defaults and of the chosen setting ([Translation](docs/translation.md#decoding-settings)).

{decoding_choice}

## Commands answer at once

`python -m benchmarks.commands`: wall seconds of `--help` and of a refused argument, each the
median of fresh processes ([Errors and recovery](docs/errors.md#commands-answer-at-once)).

{commands}

## GPU check (one H200)

`bash benchmarks/gpu_check.sh OUT_DIR` trains through the CLI with `trainer=gpu` (bf16 autocast on the H200) and
`compile=true` and sets its throughput beside timm compiled, with the full 100-epoch vision
recipe in the loader and on the GPU, on a 60,000-image proving ground held in memory, and for
`nlp.train`; it writes `OUT_DIR/summary.md`. No result file holds a GPU run: the one run so far
is in `benchmarks/LOG.md`.

## Regenerate

```bash
pip install -e ".[bench]"    # transformers, for the Hugging Face comparison
for t in 1 2; do
  for b in vit seq2seq decoding; do
    python -m benchmarks.$b --threads $t --append benchmarks/results/cpu_threads$t.jsonl
  done
done
python -m benchmarks.report_page        # this page, from benchmarks/results/*.jsonl
python -m benchmarks.quality_report     # docs/results.md and docs/figures/, from benchmarks/results/quality_*.jsonl
python -m benchmarks.report_figures     # the measurements the README and the docs quote
```

Each script prints one JSON object (versions, device, threads, settings, per-contender median
seconds, items/s and every sample, the ratios first) and with `--append FILE` adds it as one line
to a JSONL file; `python -m benchmarks.report FILE` prints the tables of the latest result of each
speed script in such a file. The three generators take `--check`, which says whether their pages
are up to date (the test suite runs it). `--quick` runs tiny sizes in seconds (the tests run it in
`tests/benchmarks/`). On a GPU: `python -m benchmarks.vit --device cuda --compile` (bf16
autocast, channels_last inputs, and `torch.compile`d copies of both models as extra contenders),
`python -m benchmarks.seq2seq --device cuda` (bf16 autocast).

## What is measured

- **ViT** (`benchmarks/vit.py`): timm's `vit_tiny_patch16_224` and `vit_small_patch16_224`
  created with `img_size=32, patch_size=4, num_classes=10`, and `vit_base_patch16_224` at 224px,
  random weights; ours is `VisionTransformer.from_timm(timm_model)`, so configuration and
  weights are identical (the script records the largest logit difference of each case).
  Training step = forward, cross-entropy, backward, AdamW step; inference = forward under
  `torch.inference_mode()`. float32 on CPU.
  Peak memory: on CPU, the growth of the process's peak resident set size (`VmHWM`) over two
  calls, after returning free heap memory to the OS (`malloc_trim`) and resetting the peak
  (`/proc/self/clear_refs`); torch keeps no CPU allocator statistics and tracemalloc cannot see
  its buffers. It is measured after the timed runs, so it is the memory a call needs beyond the
  weights and the AdamW state. On CUDA it is `torch.cuda.max_memory_allocated`.
- **Seq2seq training** (`benchmarks/seq2seq.py`): our `Seq2SeqTransformer` against the same
  model on `torch.nn.Transformer` (post-norm layers, no final norms, ReLU, no dropout), both
  with one shared embedding scaled by sqrt(d), the sinusoidal positions of `core`, and the
  output projection tied to it (equal parameter counts). Loss: cross-entropy with label
  smoothing 0.1 over non-pad target tokens, AdamW; a batch of random sentence pairs. Speed =
  non-pad target tokens per second.
- **Decoding** (`benchmarks/decoding.py`): the same model size; `greedy_decode` and
  `beam_search` (beam 4, length penalty 0.6) with `use_cache=True` (cached) and `False`
  (uncached), against `MarianMTModel` built from a `MarianConfig` of the same size (random
  weights, no download, `sdpa` attention) calling `generate`. Every hypothesis generates exactly
  the asked length: our model's `</s>` logit is lowered by 1e4 so only the `max_len` limit ends
  a hypothesis, and `generate` gets `min_new_tokens = max_new_tokens = length`; the script checks
  each output's shape. Speed = generated tokens (batch x length) per second. Default grid: greedy
  and beam, batch 1 and 32, lengths 32 and 128; `--full` adds length 256. Uncached decoding redoes
  the whole prefix every step, so it is only timed where batch x beam x length^2 is within
  `--uncached-budget`.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of the result files")
    parser.add_argument("--out", type=Path, default=ROOT / PAGE, help="the page to write (or check)")
    parser.add_argument("--check", action="store_true", help="only compare the page with the results")
    args = parser.parse_args(argv)
    page = render(args.results)
    if args.check:
        if not args.out.is_file() or args.out.read_text() != page:
            print(f"{args.out} is out of date; run python -m benchmarks.report_page", file=sys.stderr)
            return 1
        return 0
    with atomic_path(args.out) as tmp:
        tmp.write_text(page)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
