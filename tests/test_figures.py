"""Figures that cannot drift: every measurement the README, the docs pages and the comments of the
configs quote is either generated from the result files (the results page, BENCHMARKS.md, or a
marked figure of ``benchmarks.report_figures``) or a figure the result files hold, rounded as the
page rounds it. A page that quotes anything else fails here; the generated pages fail their
``--check`` when the results move on.

What counts as a measurement (``PATTERNS``): a percentage with decimals (``85.8%``), a signed
difference (``+24.3``, ``-0.6``) or a count of points (``3 points``), a ratio (``1.17x``,
``0.91x-1.01x``), BLEU or chrF (``18.6 BLEU``, ``BLEU 18.6``), a time in seconds
(``51 s``, ``90 ms``) or in decimal minutes (``4.3 minutes``), a throughput (``353 images/s``),
a memory size (``253 MiB``, ``2.4 GB``) and a loss going down (``4.41 -> 1.88``). Settings are not
measurements and are left alone: whole percentages (``10%`` of the planned steps), whole minutes
(an ``8 minutes`` budget), sizes in GiB (the ``2 GiB`` memory limit); so is everything in inline
code and in code blocks of Python, shell or YAML. ``NOT_MEASURED`` lists the few figures a page
quotes that are no measurement of this project.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import char_lm, quality_report, report_figures, report_page

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
GENERATED = (ROOT / "docs" / quality_report.PAGE, ROOT / report_page.PAGE)
GENERATORS = (ROOT / "benchmarks" / "quality_report.py", ROOT / "benchmarks" / "report_page.py",
              ROOT / "benchmarks" / "report_figures.py")

NUMBER = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
DECIMAL = r"\d+\.\d+"
START = r"(?<![\w.,/^])"  # not inside a word, a number, a path or an exponent


def spanned(unit: str, number: str = NUMBER) -> str:
    """A figure or a range of two (``4-6``, ``0.91x-1.01x``, ``11.6 to 32.3``) before ``unit``."""
    return rf"{START}(?P<a>{number})(?:(?:{unit})?\s?(?:-|–| to )\s?(?P<b>{number}))?\s?(?:{unit})(?![\w/])"


PATTERNS = {
    "percentage": spanned("%", DECIMAL),
    "difference": rf"{START}[+\-−](?P<a>{DECIMAL})(?![\w.])",
    "points": spanned(" points?"),
    "ratio": rf"{START}(?P<a>{NUMBER})(?:x?\s?(?:-|–| to )\s?(?P<b>{NUMBER}))?x(?![\w])",
    "BLEU": spanned(r" (?:test |validation )?(?:BLEU|chrF)"),
    "BLEU before": rf"(?:BLEU|chrF) (?P<a>{NUMBER})",
    "seconds": spanned(" ?(?:s|ms)"),
    "minutes": spanned(" ?(?:min|minutes)", DECIMAL),
    "throughput": spanned(r" (?:training )?(?:images|tokens|img|tok|sentences|requests|items)(?:/s| a second| per second)"),
    "memory": spanned(" ?(?:MiB|MB|GB|KiB|KB)"),
    "loss": rf"{START}(?P<a>{DECIMAL}) -> (?P<b>{DECIMAL})",
}
# Figures quoted that are no measurement of this project, each with where it comes from.
NOT_MEASURED = {
    "93.58%": "the CIFAR-10 top-1 that Lee et al. 2021 report for their ViT baseline",
    "163 MB": "the size of the CIFAR-10 download",
    "161 MB": "the size of the CIFAR-100 download",
    "LitServe's 30 s": "LitServe's request timeout, a setting",
}
# Keys of the result files that hold settings, not measurements.
SETTINGS = {"settings", "env", "seed", "epochs", "minutes", "batch", "batch_size", "lr", "max_warmup_fraction",
            "threads", "img_size", "patch_size", "beam", "length", "clients", "requests", "pairs", "train", "images",
            "repeat", "page_steps", "steps"}
# What the keys of the result files measure: a figure of a page is held by the results when a
# key of its kind holds it (a percentage: an accuracy), or when a generated page shows it.
KEYS = {
    "percentage": lambda key: key in {"test_acc", "val_acc", "same_as_pytorch"},  # fractions, shown as percentages
    "BLEU": lambda key: key in {"bleu", "chrf"},
    "ratio": lambda key: "/" in key or key == "speedup",
    "throughput": lambda key: "per_s" in key,
    "seconds": lambda key: key.endswith(("_s", "_ms", "seconds")) or key == "elapsed",
    "memory": lambda key: key.endswith(("_mib", "_mb")),
    "loss": lambda key: "loss" in key,
}
OUTPUT_FENCES = {"text", "console", "output"}  # code blocks that show what a program printed


# ----------------------------------------------------------------------------- what pages quote


def prose(text: str) -> str:
    """The text of a Markdown page a reader takes for claims: generated figures, inline code and
    code blocks blanked out (``printed`` gives the blocks that show what a program printed)."""
    return _split(text)[0]


def printed(text: str) -> str:
    """The code blocks of a Markdown page that show what a program printed (``OUTPUT_FENCES``)."""
    return _split(text)[1]


def _split(text: str) -> tuple[str, str]:
    text = report_figures.MARKER.sub(" ", text)
    kept, shown, fenced = [], [], None
    for line in text.splitlines():
        fence = re.match(r"^\s*(```|~~~)\s*(\S*)", line)
        if fence:
            fenced = fence.group(2) if fenced is None else None
            continue
        if fenced is None:
            kept.append(line)
        elif fenced in OUTPUT_FENCES:
            shown.append(line)
    return re.sub(r"`[^`]+`", " ", "\n".join(kept)), "\n".join(shown)  # inline code may run over a line break


def comments(text: str) -> str:
    """The comments of a YAML file."""
    return "\n".join(line[line.index("#") + 1 :] for line in text.splitlines() if "#" in line)


def figures(text: str, patterns: dict[str, str] = PATTERNS) -> Iterator[tuple[str, str, list[str]]]:
    """(kind, the figure as written, its numbers) of every measurement ``text`` quotes."""
    for phrase in NOT_MEASURED:
        text = text.replace(phrase, " ")
    for kind, pattern in patterns.items():
        for match in re.finditer(pattern, text):
            numbers = [match.group(name) for name in ("a", "b") if match.groupdict().get(name)]
            yield kind, match.group(0), numbers


def normal(number: str) -> str:
    return number.replace(",", "").lstrip("+-−")


# ----------------------------------------------------------------------------- what the results hold


def leaves(value: object, key: str = "") -> Iterator[tuple[str, float]]:
    """(key, number) of every measurement in a result object (settings and the environment left out)."""
    if isinstance(value, dict):
        for name, inner in value.items():
            if name not in SETTINGS:
                yield from leaves(inner, name)
    elif isinstance(value, list):
        for inner in value:
            yield from leaves(inner, key)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield key, float(value)


def kind_of(key: str) -> str | None:
    """The kind of figure a key of the result files measures (``PATTERNS``), if any."""
    key = key.lower()
    for kind, test in KEYS.items():
        if test(key):
            return kind
    return None


def held_by_results(folder: Path = RESULTS) -> dict[str, set[str]]:
    """kind -> every measurement of that kind in the result files, as a page may round it (0 to 3
    decimals; fractions as percentages)."""
    held: dict[str, set[str]] = {kind: set() for kind in PATTERNS}
    for path in folder.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            for key, value in leaves(json.loads(line)):
                kind = kind_of(key)
                if kind is not None:
                    shown = 100 * value if kind == "percentage" else value
                    held[kind] |= {f"{abs(shown):.{decimals}f}" for decimals in range(4)}
    held["BLEU before"] = held["BLEU"]
    return held


def generated_numbers() -> set[str]:
    """The figures of the generated pages and of the figures marked in the README and the docs:
    every number with decimals or of three digits or more, and every figure ``PATTERNS`` finds
    (a bare small whole number, as a table's count of seeds, backs nothing)."""
    texts = [path.read_text() for path in GENERATED]
    texts += [match.group("body") for page in report_figures.pages() for match in report_figures.MARKER.finditer(page.read_text())]
    numbers = {normal(number) for text in texts for number in re.findall(NUMBER, text)}
    numbers = {number for number in numbers if "." in number or int(number) >= 100}
    return numbers | {normal(number) for text in texts for _, _, found in figures(text) for number in found}


def quoting_pages() -> list[Path]:
    return [path for path in report_figures.pages() if path not in GENERATED]


def configs() -> list[Path]:
    return sorted((ROOT / "conf").rglob("*.yaml"))


@pytest.fixture(scope="module")
def held() -> tuple[dict[str, set[str]], set[str]]:
    return held_by_results(), generated_numbers()


def unbacked(text: str, held: tuple[dict[str, set[str]], set[str]], output: str = "") -> list[str]:
    """The figures of ``text`` (and of a program's ``output``, where a signed number is a score,
    not a difference) that no result holds, each with its line: a number that neither a key of its
    kind in the result files (``held[0]``) nor a generated page (``held[1]``) shows."""
    by_kind, generated = held
    found = []
    quoted_in = [(text, PATTERNS), (output, {kind: pattern for kind, pattern in PATTERNS.items() if kind != "difference"})]
    for source, patterns in quoted_in:
        for kind, quoted, numbers in figures(source, patterns):
            if any(normal(number) not in generated and normal(number) not in by_kind.get(kind, ()) for number in numbers):
                line = next((line.strip() for line in source.splitlines() if quoted in line), quoted)
                found.append(f"{quoted!r} ({kind}) in: {line[:160]}")
    return found


# ----------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("path", quoting_pages(), ids=lambda path: path.name)
def test_every_figure_a_page_quotes_is_held_by_the_results(path: Path, held) -> None:
    text = path.read_text()
    found = unbacked(prose(text), held, printed(text))
    assert not found, (
        f"{path.relative_to(ROOT)} quotes figures no result file holds; quote them as generated figures "
        "(benchmarks/report_figures.py), take the figure the results hold, or point to the results page:\n"
        + "\n".join(found)
    )


@pytest.mark.parametrize("path", configs(), ids=lambda path: str(path.relative_to(ROOT / "conf")))
def test_every_figure_a_config_comment_quotes_is_held_by_the_results(path: Path, held) -> None:
    found = unbacked(comments(path.read_text()), held)
    assert not found, f"{path.relative_to(ROOT)}: point to docs/results.md or docs/decisions.md instead of:\n" + "\n".join(found)


@pytest.mark.parametrize("path", GENERATORS, ids=lambda path: path.name)
def test_the_generators_own_words_quote_no_figure(path: Path) -> None:
    """The generated pages are trusted because their figures come from the results: the words the
    generators wrap around them quote none."""
    strings = [node.value for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Constant)
               and isinstance(node.value, str)]
    found = [quoted for text in strings for _, quoted, _ in figures(prose(text))]
    assert not found, f"{path.name} writes figures of its own: {found}"


def test_benchmarks_md_is_up_to_date_with_the_result_files() -> None:
    assert report_page.main(["--check"]) == 0, "run python -m benchmarks.report_page"


def test_the_figures_the_pages_quote_are_up_to_date_with_the_result_files() -> None:
    assert report_figures.main(["--check"]) == 0, "run python -m benchmarks.report_figures"


def test_the_scan_finds_measurements_and_leaves_settings_alone() -> None:
    page = (
        "The defaults reach 85.8% (+24.3 points, 1.17x) and 18.6 BLEU in 51 s at 353 images/s, 253 MiB more;\n"
        "loss 4.41 -> 1.88; 0.91x-1.01x; BLEU 18.3; 4-6 BLEU; 9 s.\n"
        "Settings: a 10% cap, an 8 minutes budget, 2 GiB, a 4x4 grid, 8x8 digits, 1e-4, d^-0.5, `1.17x in code`.\n"
        "```python\nprint(12.5)  # 99.9%\n```\n```text\n3.6 s\n```\n```\n-0.416 0.5 s\n```\n"
        "<!-- figure: table:vision -->77.7%<!-- /figure -->\n"
        "The paper reports 93.58% top-1."
    )
    assert [quoted for _, quoted, _ in figures(prose(page))] == [
        "85.8%", "+24.3", "24.3 points", "1.17x", "0.91x-1.01x", "18.6 BLEU", "4-6 BLEU", "BLEU 18.3",
        "51 s", "9 s", "353 images/s", "253 MiB", "4.41 -> 1.88",
    ]
    assert printed(page) == "3.6 s"
    assert unbacked("", ({}, set()), "-0.3583\td c b a\n51 s") == ["'51 s' (seconds) in: 51 s"]  # a score is no difference


def test_a_figure_counts_when_a_result_of_its_kind_holds_it_as_the_page_rounds_it(tmp_path: Path) -> None:
    (tmp_path / "quality.jsonl").write_text(json.dumps({
        "benchmark": "x", "env": {"threads": 2}, "settings": {"lr": 0.25},
        "rows": [{"test_acc": 0.74463, "bleu": 18.63, "seed": 7, "speedup": 6.11, "steps": 25}]}) + "\n")
    held = held_by_results(tmp_path), {"3.5"}
    assert not unbacked("74.5% and 74.46%, 18.6 BLEU, 6.1x, a lead of +3.5", held)
    text = "74.4%, 18.7 BLEU, 6.2x, 25.0%, 18.6x, +6.1"
    assert [line.split(" in: ")[0] for line in unbacked(text, held)] == [
        "'74.4%' (percentage)", "'25.0%' (percentage)", "'+6.1' (difference)", "'6.2x' (ratio)", "'18.6x' (ratio)",
        "'18.7 BLEU' (BLEU)",
    ]  # lr 0.25 and 25 steps are no accuracy; a BLEU is no ratio; a difference is generated or nothing


def test_marked_figures_are_regenerated_and_a_stale_one_fails_the_check(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text("Cached: <!-- figure: scale:1000000:cached:seconds -->99 s<!-- /figure -->.\n")
    (tmp_path / "README.md").write_text("# Front\n")
    arguments = ["--root", str(tmp_path), "--results", str(RESULTS)]
    assert report_figures.main([*arguments, "--check"]) == 1
    assert report_figures.main(arguments) == 0
    expected = report_figures.figure(report_figures.Results(RESULTS), "scale:1000000:cached:seconds")
    assert page.read_text() == f"Cached: <!-- figure: scale:1000000:cached:seconds -->{expected}<!-- /figure -->.\n"
    assert report_figures.main([*arguments, "--check"]) == 0
    page.write_text("<!-- figure: no-such-kind -->x<!-- /figure -->\n")
    with pytest.raises(ValueError, match="page.md:1: figure 'no-such-kind'"):
        report_figures.main(arguments)


def test_benchmarks_md_keeps_the_anchors_the_docs_link_to() -> None:
    from tests.test_docs import anchors

    linked = {anchor for page in [*report_figures.pages()] for anchor in
              re.findall(r"\.\./BENCHMARKS\.md#([\w-]+)", page.read_text())}
    assert linked <= anchors(ROOT / report_page.PAGE)


def test_the_language_model_page_has_the_blocks_its_benchmark_runs() -> None:
    program, minute = char_lm.page_blocks(char_lm.PAGE.read_text())
    assert "class CharLM" in program and "train(model, train_ids, steps=" in minute


@pytest.mark.slow
def test_the_language_model_benchmark_runs_the_page(tmp_path: Path) -> None:
    result = char_lm.main(["--steps", "2", "--append", str(tmp_path / "char_lm.jsonl")])
    assert result["steps"] == 2 and result["val_loss_after"] < result["val_loss_before"]
    assert re.match(r"\d+ s, validation loss \d\.\d\d -> \d\.\d\d nats per character\n", result["output"])
    assert json.loads((tmp_path / "char_lm.jsonl").read_text())["output"] == result["output"]


def test_a_lever_both_heads_measured_is_quoted_for_the_head_named() -> None:
    results = report_figures.Results(RESULTS)
    nlp = report_figures.figure(results, "gains:module.label_smoothing=0:nlp")
    vision = report_figures.figure(results, "gains:module.label_smoothing=0:vision")
    assert ("minutes" in nlp or "steps" in nlp) and "epochs" not in nlp
    assert "epochs" in vision and "minutes" not in vision
    with pytest.raises(LookupError, match="both heads measure the lever 'module.label_smoothing=0'; name one"):
        report_figures.figure(results, "gains:module.label_smoothing=0")  # a marker quotes one head's figures


def test_a_lever_measured_against_both_defaults_is_quoted_against_the_ones_named() -> None:
    """The wider translation model ran against the earlier defaults (8 and 30 minutes) and against
    today's (2 hours): without a name only today's pairs are quoted, ``:earlier`` and ``:today``
    select each set, and together they are every pair."""
    results = report_figures.Results(RESULTS)
    lever = "model.dim=256 + model.ffn_dim=1024"
    effects = report_figures.lever_effects(results, lever)
    earlier = report_figures.lever_effects(results, lever, against="earlier")
    today = report_figures.lever_effects(results, lever, against="today")
    assert effects == today and today and earlier
    assert {effect.against for effect in today}.isdisjoint(effect.against for effect in earlier)
    assert len(earlier) + len(today) == len(results.quality.nmt_effects[lever])
    assert "120 minutes" in report_figures.figure(results, f"gains:{lever}::today")
    assert "120 minutes" not in report_figures.figure(results, f"gains:{lever}::earlier")
    with pytest.raises(LookupError, match="against must be today or earlier, got 'latest'"):
        report_figures.figure(results, f"gains:{lever}::latest")
