"""The measurements the README and the docs pages quote, regenerated from the result files.

A page quotes a measurement between two markers that name it; the text between them is generated:

    the cached start takes <!-- figure: scale:1000000:cached:seconds -->(generated)<!-- /figure -->

    <!-- figure: table:translation -->
    (a table, generated)
    <!-- /figure -->

    python -m benchmarks.report_figures            # rewrites what stands between the markers
    python -m benchmarks.report_figures --check    # exit 1 if a page quotes what the results do not hold

Figure names (``kind:argument:...``):

- ``table:vision`` / ``table:vision:SET;SET`` / ``table:translation``: today's defaults against the
  plain loop, as on the results page (``benchmarks.quality_report``), for every set or the ones named;
  ``table:translation-float32``: the same of translation on CPUs without bfloat16, with the machine.
- ``lever:OVERRIDE``: one lever or earlier default (vision, else translation) against the defaults it
  changes, a list.
- ``gain:OVERRIDE``: the least and the most the defaults gain over that lever, ``LOW to HIGH``;
  ``gains:OVERRIDE``: each gain on one line, for a table's cell (``gains:OVERRIDE:nlp`` or
  ``:vision``: one head's, where both measured the override; ``gains:OVERRIDE:HEAD:today`` or
  ``:earlier``: against today's defaults alone, or the earlier ones alone, where it ran against both).
- ``speedups:OVERRIDE``: the defaults' training images/s (tokens/s) over that lever's, per data set
  and budget measured on one machine (``speedups:OVERRIDE:today`` or ``:earlier`` as for gains).
- ``commands``: how fast each command answers (``benchmarks.commands``), a table.
- ``scale:PAIRS:RUN:seconds`` / ``scale:PAIRS:RUN:peak``: the translation data cache
  (``benchmarks.scale``), the first process's wall seconds or peak memory.
- ``images-held:TRAIN:start`` / ``images-held:TRAIN:peak`` / ``images-held:speed``: what holding an
  image folder in memory costs at start and in memory, and its training speed over the files'
  (``benchmarks.scale_images``).
- ``scale-evaluate:COMMAND:ITEMS:RUN:WHAT``: ``nlp.evaluate``, ``nlp.translate`` or ``vision.evaluate``
  at ITEMS test items (``benchmarks.scale_evaluate``; RUN ``first``, ``cached`` or ``-``), WHAT
  ``seconds``, ``peak`` or ``first-line``.
- ``table:step:translation_step`` / ``table:step:attention_kernels`` / ``table:step:dropout_speed``:
  what a translation training step costs lever by lever, the two attention kernels by length, or
  the two dropouts by precision (a table, its machine and command); ``precision:HEAD``: the head's
  bf16 training step over float32's (``benchmarks.precision``); ``dropout:DTYPE``: ``core.dropout``
  over ``F.dropout`` in that dtype (``benchmarks.dropout_speed``).
- ``table:decoding``: the decoding setting of each corpus chosen on its validation split, and the
  test BLEU of the checkpoint's own settings, of it and of a candidate (``benchmarks.decoding_choice``),
  a table.
- ``char-lm:output``: what the language model page's program printed (``benchmarks.char_lm``).
- ``table:fine-tune:HEAD`` / ``table:fine-tune:HEAD:DATA``: starting from trained weights against
  training from scratch (``benchmarks.fine_tune``; ``DATA``: the image folder's name), a table
  with its machine and command; ``fine-tune:HEAD:DATA:CONTENDER`` (``DATA`` empty for nlp): one
  contender's test accuracy (vision) or BLEU (nlp).

Each figure is taken from the latest result that holds it.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from benchmarks import fine_tune, quality_report
from benchmarks.quality_report import DEFAULTS, LOOP, NMT_DEFAULTS, NMT_LOOP, Quality
from benchmarks.report import environment_line, results_of, table
from benchmarks.report_page import SCRIPT_TABLES
from core.files.atomic import atomic_path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
MARKER = re.compile(r"<!-- figure: (?P<name>[^>]*?) -->(?P<body>.*?)<!-- /figure -->", re.S)
BLOCK = "table", "lever", "commands", "char-lm"  # kinds whose figure is a block of Markdown


def pages(root: Path = ROOT) -> list[Path]:
    """The pages that quote measurements: the README and the docs, but the generated results page."""
    docs = sorted(path for path in (root / "docs").glob("*.md") if path.name != quality_report.PAGE)
    return [root / "README.md", *docs]


class Results:
    """The result files of a folder, each read once, and the figures taken from them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._quality: Quality | None = None
        self._results: dict[str, list[dict[str, Any]]] = {}  # benchmark -> its results, oldest first

    @property
    def quality(self) -> Quality:
        if self._quality is None:
            self._quality = quality_report.measure(self.folder)
        return self._quality

    def latest(self, benchmark: str) -> Iterator[Mapping[str, Any]]:
        """The results of ``benchmark`` in every file of the folder, latest first."""
        if benchmark not in self._results:
            self._results[benchmark] = [result for _, result in results_of(sorted(self.folder.glob("*.jsonl")), benchmark)]
        return reversed(self._results[benchmark])

    def newest(self, benchmark: str) -> Mapping[str, Any]:
        result = next(self.latest(benchmark), None)
        if result is None:
            raise LookupError(f"no result of benchmarks.{benchmark} in {self.folder}")
        return result

    def row(self, benchmark: str, test: Callable[[Mapping[str, Any]], bool]) -> Mapping[str, Any]:
        """The row of the latest result of ``benchmark`` that has a row passing ``test``."""
        for result in self.latest(benchmark):
            for row in result.get("rows", []):
                if test(row):
                    return row
        raise LookupError(f"no result of benchmarks.{benchmark} in {self.folder} holds that row")


def vision_table(results: Results, sets: str = "") -> str:
    data = sets.split(";") if sets else None
    return quality_report.defaults_table(results.quality.vision, DEFAULTS, LOOP, data)


def translation_table(results: Results) -> str:
    quality = results.quality
    return quality_report.defaults_table(quality.nmt, NMT_DEFAULTS, NMT_LOOP, what="corpus")


def lever_effects(results: Results, lever: str, head: str = "", against: str = "") -> list[quality_report.Effect]:
    """The lever's effects in the vision or the translation results (``head``: ``vision`` or
    ``nlp``, which a marker must name where both heads measured the override; translation's from
    CPUs with bfloat16, else from those without): against today's
    defaults where it was measured against them, else against the earlier defaults it changed;
    ``against``: ``today`` or ``earlier`` for those alone."""
    quality = results.quality
    vision = quality.vision_effects.get(lever) if head in ("", "vision") else None
    translation = (quality.nmt_effects.get(lever) or quality.nmt_float32_effects.get(lever)) if head in ("", "nlp") else None
    if vision and translation:
        raise LookupError(f"both heads measure the lever {lever!r}; name one: {lever}:vision or {lever}:nlp")
    found = vision or translation
    if not found:
        raise LookupError(f"the quality results measure no lever {lever!r}")
    today = [effect for effect in found if effect.against in (DEFAULTS, NMT_DEFAULTS)]
    if against not in ("", "today", "earlier"):
        raise LookupError(f"against must be today or earlier, got {against!r}")
    if against == "earlier":
        return [effect for effect in found if effect not in today]
    return today if against == "today" else today or found


def lever(results: Results, override: str) -> str:
    return quality_report.lever_words(override, lever_effects(results, override))


def gain(results: Results, override: str) -> str:
    gains = sorted(effect.base.mean - effect.lever.mean for effect in lever_effects(results, override))
    return f"{gains[0]:.1f} to {gains[-1]:.1f}"


def gains(results: Results, override: str, head: str = "", against: str = "") -> str:
    return "; ".join(effect.words(gain=True, named=True) for effect in lever_effects(results, override, head, against))


def speedups(results: Results, override: str, against: str = "") -> str:
    """The defaults' training speed over the lever's, per data set and budget, where both ran on one
    machine."""
    effects = lever_effects(results, override, against=against)
    found = [(effect, quality_report.ratio(effect.base, effect.lever)) for effect in effects]
    return "; ".join(f"{effect.data}, {quality_report.budget_words(effect.budget)}: {ratio}" for effect, ratio in found if ratio)


def commands(results: Results) -> str:
    rows = results.newest("commands")["rows"]
    return table(
        ["command", "`--help`", "a refused argument"],
        [[f"`{row['command']}`", f"{row['help_s']:.2f} s", f"`{row['bad_argument']}`: {row['bad_argument_s']:.2f} s"]
         for row in rows],
    )


def seconds_or_peak(process: Mapping[str, Any], what: str) -> str:
    """A timed process's wall seconds (``what`` ``seconds``) or peak MiB (``peak``), as
    :func:`benchmarks.scale.measured` records them."""
    return f"{process['seconds']:.0f} s" if what == "seconds" else f"{process['peak_mib']:,.0f} MiB"


def scale(results: Results, pairs: str, run: str, what: str) -> str:
    row = results.row("scale", lambda row: row["pairs"] == int(pairs) and row["run"] == run)
    return seconds_or_peak(row["processes"][0], what)


def scale_evaluate(results: Results, command: str, items: str, run: str, what: str) -> str:
    """``benchmarks.scale_evaluate``: the wall seconds, peak MiB or (``nlp.translate``) seconds to the
    first line of ``command`` at ``items`` test items, its ``run`` (``first``, ``cached``, ``-``)."""
    row = results.row("scale_evaluate", lambda row: (row["command"], row["items"], row["run"]) == (command, int(items), run))
    return f"{row['first_line_s']:.1f} s" if what == "first-line" else seconds_or_peak(row, what)


def images_held(results: Results, train: str, what: str = "") -> str:
    """Held images against the files: the start's extra seconds or peak MiB at ``train`` training
    images (two cached runs of one result), or, for ``images-held:speed``, the training speed over
    the files' (medians of the latest alternated runs, both augmented in the loader)."""
    if train == "speed":
        speed = next((result["speed"] for result in results.latest("scale_images") if result.get("speed")), None)
        if not speed:
            raise LookupError("no result of benchmarks.scale_images times training (--speed-steps)")
        loader = [run for run in speed if run.get("augment_on", "loader") == "loader"]
        held, files = (statistics.median(run["images_per_second"] for run in loader if run["in_memory"] == state)
                       for state in ("true", "false"))
        return f"{held / files:.2f}x"
    for result in results.latest("scale_images"):
        runs = {row["in_memory"]: row for row in result["rows"] if row["train"] == int(train) and row["run"] == "cached"}
        if {"true", "false"} <= set(runs):
            held, files = runs["true"], runs["false"]
            if what == "start":
                return f"{held['seconds'] - files['seconds']:.0f} s"
            return f"{held['peak_mib'] - files['peak_mib']:.0f} MiB"
    raise LookupError(f"no result of benchmarks.scale_images starts {train} training images both ways")


def char_lm(results: Results, what: str) -> str:
    if what != "output":
        raise KeyError(f"char-lm has one figure, char-lm:output, not char-lm:{what}")
    found = next((result for result in results.latest("char_lm") if result["steps"] == result["page_steps"]), None)
    if found is None:
        return "Not measured yet: `python -m benchmarks.char_lm --append benchmarks/results/char_lm.jsonl`."
    env = found["env"]
    return f"One run on {env['cpu_count']} CPU cores ({env['cpu']}, {env['time'][:10]}) printed:\n\n```text\n{found['output'].rstrip()}\n```"


def fine_tune_result(results: Results, head: str, data: str) -> Mapping[str, Any]:
    """The latest ``benchmarks.fine_tune`` result of ``head``, on the image folder named ``data`` if given."""
    for result in results.latest("fine_tune"):
        if result["head"] == head and (not data or Path(result["data"] or "").name == data):
            return result
    raise LookupError(f"no result of benchmarks.fine_tune for {head} {data}")


def fine_tune_table(results: Results, head: str, data: str = "") -> str:
    result = fine_tune_result(results, head, data)
    origin = result["pretrained"]
    module = "vision.train" if head == "vision" else "nlp.train"
    metric = "test/acc" if head == "vision" else "test/bleu"
    own = (origin["test"] or {}).get(metric)
    scored = "" if own is None else f" (its own test: {100 * own:.1f}%)" if head == "vision" else f" (its own test: {own:.1f} BLEU)"
    weights = f"The weights: `python -m {module} {' '.join(origin['overrides'] or [])}`{scored}."
    return f"{fine_tune.markdown(result['rows'])}\n\n{weights} {environment_line(result)}"


def fine_tune_figure(results: Results, head: str, data: str, contender: str) -> str:
    row = next((row for row in fine_tune_result(results, head, data)["rows"] if row["contender"] == contender), None)
    if row is None:
        raise LookupError(f"the latest result of benchmarks.fine_tune for {head} has no contender {contender!r}")
    return f"{100 * row['test_acc']:.1f}%" if head == "vision" else f"{row['bleu']:.1f} BLEU"


def script_table(results: Results, benchmark: str) -> str:
    """The latest result of ``benchmark`` as its script prints its table
    (:data:`benchmarks.report_page.SCRIPT_TABLES`), with its machine and command."""
    if benchmark not in SCRIPT_TABLES:
        raise KeyError(f"no table of {benchmark}; the tables: {', '.join(SCRIPT_TABLES)}")
    result = results.newest(benchmark)
    return f"{SCRIPT_TABLES[benchmark](result)}\n\n{environment_line(result)}"


def precision_speedup(results: Results, head: str) -> str:
    """A head's bf16 training step speed over float32's, from the latest ``benchmarks.precision``."""
    row = results.row("precision", lambda row: row["head"] == head)
    return f"{row['bf16_speedup']:.2f}x"


def dropout_speedup(results: Results, dtype: str) -> str:
    """``core.dropout``'s speed over ``F.dropout``'s in ``dtype``, from the latest ``benchmarks.dropout_speed``."""
    row = results.row("dropout_speed", lambda row: row["dtype"] == dtype)
    return f"{row['speedup']:.1f}x"


FIGURES: dict[str, Callable[..., str]] = {
    "table:step": script_table,
    "dropout": dropout_speedup,
    "table:decoding": lambda results: script_table(results, "decoding_choice"),
    "precision": precision_speedup,
    "table:fine-tune": fine_tune_table,
    "fine-tune": fine_tune_figure,
    "table:vision": vision_table,
    "table:translation": translation_table,
    "table:translation-float32": lambda results: quality_report.float32_machines(
        results.quality.nmt_float32, results.quality.nmt_float32_effects
    ),
    "lever": lever,
    "gain": gain,
    "gains": gains,
    "speedups": speedups,
    "commands": commands,
    "scale": scale,
    "images-held": images_held,
    "scale-evaluate": scale_evaluate,
    "char-lm": char_lm,
}


def figure(results: Results, name: str) -> str:
    """The text of the figure ``name`` (see the module's docstring)."""
    parts = name.split(":")
    kind = ":".join(parts[:2]) if ":".join(parts[:2]) in FIGURES else parts[0]
    if kind not in FIGURES:
        raise KeyError(f"no figure kind {parts[0]!r}; the kinds: {', '.join(FIGURES)}")
    arguments = parts[len(kind.split(":")):]
    text = FIGURES[kind](results, *arguments)
    return f"\n\n{text}\n\n" if kind.split(":")[0] in BLOCK else text


def regenerate(text: str, results: Results, where: str = "") -> str:
    """``text`` with every marked figure replaced by what the results hold."""

    def replace(match: re.Match[str]) -> str:
        line = text[: match.start()].count("\n") + 1
        try:
            body = figure(results, match.group("name"))
        except (KeyError, LookupError, TypeError) as error:
            raise ValueError(f"{where}:{line}: figure {match.group('name')!r}: {error}") from None
        starts_line = not text[: match.start()].rsplit("\n", 1)[-1].strip()
        if starts_line and not body.startswith("\n"):
            raise ValueError(
                f"{where}:{line}: the figure {match.group('name')!r} begins a line, which Markdown reads as a "
                "block of HTML that ends the paragraph; move a word of the sentence before it"
            )
        return f"<!-- figure: {match.group('name')} -->{body}<!-- /figure -->"

    return MARKER.sub(replace, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of the result files")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose README.md and docs/ are rewritten")
    parser.add_argument("--check", action="store_true", help="only say which pages are out of date")
    args = parser.parse_args(argv)
    results = Results(args.results)
    stale = []
    for page in pages(args.root):
        text = page.read_text()
        fresh = regenerate(text, results, str(page))
        if fresh == text:
            continue
        stale.append(page)
        if not args.check:
            with atomic_path(page) as tmp:
                tmp.write_text(fresh)
    if args.check and stale:
        names = ", ".join(str(page) for page in stale)
        print(f"{names}: figures out of date; run python -m benchmarks.report_figures", file=sys.stderr)
        return 1
    if not args.check:
        print(f"rewrote {len(stale)} page(s)" + "".join(f"\n  {page}" for page in stale))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
