"""The documentation: the site builds with every link and anchor checked, the README stays a front
page whose links land, and the docs' self-contained library examples run and print what they claim.

Nothing here is skipped: without MkDocs (``pip install -e ".[docs]"``, part of ``.[dev]``) the build
test fails. No test reaches the network.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS_YML = ROOT / "mkdocs.yml"
README_MAX_LINES = 210
README_MAX_WORDS = 620  # a front page read in two minutes

# `<!-- test: run -->` just before a ```python fence runs that block; `<!-- test: run, slow -->`
# runs it among the slow tests.
RUN_MARKER = re.compile(r"^<!-- test: run(?P<slow>, slow)? -->\n```python\n(?P<code>.*?)^```$", re.M | re.S)
ANY_MARKER = re.compile(r"<!-- test:[^>]*-->")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def mkdocs_command(site_dir: Path, config: Path) -> list[str]:
    return [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir), "-f", str(config)]


def run_mkdocs(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about MkDocs 2.0
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


# ----------------------------------------------------------------------------- markdown helpers


def prose_lines(text: str) -> list[str]:
    """The lines of a Markdown file outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def heading_texts(text: str) -> list[str]:
    return [match.group(2).strip() for line in prose_lines(text)
            if (match := re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line))]


def plain(heading: str) -> str:
    """A heading's text as rendered: inline code, links and emphasis markers removed."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"(\*\*|__|\*)", "", text)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", plain(heading).strip().lower()).replace(" ", "-")


def mkdocs_slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc extension) gives a heading."""
    from markdown.extensions.toc import slugify

    return slugify(plain(heading), "-")


def anchors(path: Path) -> set[str]:
    """The GitHub anchors of a Markdown file; a repeated heading gets -1, -2, ..."""
    seen: dict[str, int] = {}
    result = set()
    for heading in heading_texts(path.read_text()):
        slug = github_slug(heading)
        result.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return result


def relative_links(path: Path) -> list[str]:
    """The links of a Markdown file (outside code) that point into the repository."""
    prose = re.sub(r"`[^`\n]*`", "", "\n".join(prose_lines(path.read_text())))  # no links in inline code
    links = LINK.findall(prose)
    return [link for link in links if not re.match(r"^[a-z][a-z0-9+.-]*:", link, re.I)]


def broken_links(path: Path) -> list[str]:
    """Each relative link of ``path`` whose file is missing or whose anchor is no heading of it."""
    broken = []
    for link in relative_links(path):
        target, _, anchor = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        if target.startswith("/"):
            broken.append(f"{link}: absolute path; use a relative one")
        elif not file.exists():
            broken.append(f"{link}: {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file} does not exist")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{link}: no heading of {file.name} has the anchor #{anchor}")
        elif anchor and file.suffix != ".md":
            broken.append(f"{link}: an anchor into a file that is not Markdown")
    return broken


# ----------------------------------------------------------------------------- the site


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def test_mkdocs_and_its_plugins_are_installed() -> None:
    missing = [name for name in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python", "pymdownx")
               if not installed(name)]
    assert not missing, f"{missing} not installed; pip install -e '.[docs]' (or '.[dev]')"


def test_the_site_builds_strict_with_every_link_and_anchor_valid(tmp_path: Path) -> None:
    site = tmp_path / "site"
    result = run_mkdocs(mkdocs_command(site, MKDOCS_YML), ROOT)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    for page in pages():
        built = site / ("index.html" if page.stem == "index" else f"{page.stem}/index.html")
        assert built.is_file(), f"{page.name} was not built (is it in the nav of mkdocs.yml?)"
    assert (site / "BENCHMARKS" / "index.html").is_file(), "the top-level BENCHMARKS.md is not in the site"
    api = (site / "api" / "index.html").read_text()
    for module in ("core.attention", "core.layers", "core.stacks", "core.positional", "core.masks", "core.cache",
                   "core.schedules", "core.initialization", "core.constraints", "core.errors",
                   "core.files.checkpoints"):
        assert f'id="{module}"' in api, f"{module} is missing from the API reference"
    assert 'id="core.attention.MultiHeadAttention"' in api, "the API reference lists no classes"


def test_the_strict_build_refuses_a_broken_anchor(tmp_path: Path) -> None:
    """The validation settings of mkdocs.yml turn a link to a missing heading into a failure."""
    config = yaml.safe_load(MKDOCS_YML.read_text())
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the part](other.md#no-such-heading).\n")
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## A heading\n")
    probe = {"site_name": "probe", "validation": config["validation"],
             "markdown_extensions": config["markdown_extensions"]}
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(probe))
    result = run_mkdocs(mkdocs_command(tmp_path / "site", tmp_path / "mkdocs.yml"), tmp_path)
    assert result.returncode != 0, "a broken anchor passed mkdocs build --strict"
    assert "no-such-heading" in result.stdout + result.stderr


# ----------------------------------------------------------------------------- README and links


def test_the_readme_is_a_front_page() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"
    text = README.read_text()
    assert len(text.split()) <= README_MAX_WORDS, f"README.md has {len(text.split())} words; move detail into docs/"
    for kept in ("pip install torch==2.14.1 torchvision==0.29.1", 'pip install -e ".[dev]"', "pytest -n auto",
                 "## Library example", "## Tests", "python -m vision.train", "python -m nlp.train"):
        assert kept in text, kept


@pytest.mark.parametrize("path", [README, *pages()], ids=lambda path: path.name)
def test_relative_links_point_at_files_and_headings(path: Path) -> None:
    """As on GitHub: every relative link reaches a file, and its anchor a heading of it."""
    assert not broken_links(path), "\n".join(broken_links(path))


def test_the_readme_links_into_every_docs_page() -> None:
    linked = {(README.parent / link.partition("#")[0]).resolve() for link in relative_links(README)}
    assert not {page for page in pages() if page.resolve() not in linked}


@pytest.mark.parametrize("path", pages(), ids=lambda path: path.name)
def test_docs_headings_have_the_same_anchor_on_github_and_on_the_site(path: Path) -> None:
    differ = [(heading, github_slug(heading), mkdocs_slug(heading)) for heading in heading_texts(path.read_text())
              if github_slug(heading) != mkdocs_slug(heading)]
    assert not differ, differ


def test_the_link_checker_finds_broken_links(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\n## Some `code`: here\n\n"
                                   "[ok](#some-code-here) [gone](b.md) [bad](a.md#nope)\n\n```\n[in code](c.md)\n```\n")
    assert broken_links(tmp_path / "a.md") == [
        f"b.md: {tmp_path / 'b.md'} does not exist",
        "a.md#nope: no heading of a.md has the anchor #nope",
    ]


# ----------------------------------------------------------------------------- examples


def marked_examples() -> list[pytest.param]:
    examples = []
    for page in pages():
        text = page.read_text()
        found = list(RUN_MARKER.finditer(text))
        assert len(found) == len(ANY_MARKER.findall(text)), f"{page.name}: a test marker not right before a python fence"
        for number, match in enumerate(found, 1):
            marks = [pytest.mark.slow] if match.group("slow") else []
            line = text[: match.start()].count("\n") + 2
            examples.append(pytest.param(page, line, match.group("code"), marks=marks, id=f"{page.name}:{line}"))
    return examples


def test_the_docs_mark_their_library_examples() -> None:
    by_page = {example.values[0].name for example in marked_examples()}
    assert {"index.md", "api.md", "vision.md"} <= by_page


@pytest.mark.parametrize(("page", "line", "code"), marked_examples())
def test_docs_library_examples_run_and_print_what_they_claim(page: Path, line: int, code: str) -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile("\n" * line + code, str(page), "exec"), {})
    claimed = re.findall(r"print\(.*\)[ \t]+# (.+)", code)
    assert printed.getvalue().splitlines() == claimed
