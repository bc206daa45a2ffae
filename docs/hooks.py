"""MkDocs hook: publish the top-level BENCHMARKS.md as a page of the site.

BENCHMARKS.md stays at the top of the repository, where the README and the benchmark scripts
point. The docs pages link to it as ``../BENCHMARKS.md``, which is right on GitHub; in the site the
file is added at the docs root, so this hook turns those links into ``BENCHMARKS.md`` and MkDocs
then checks them (anchors included) like any other link. Links from BENCHMARKS.md into the docs
(``docs/results.md``) become links between pages of the docs root (``results.md``) the same way.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File

TOP_LEVEL = ("BENCHMARKS.md",)
LINK = re.compile(r"\]\(\.\./(" + "|".join(re.escape(name) for name in TOP_LEVEL) + r")([#)])")
INTO_DOCS = re.compile(r"\]\(docs/")


def on_files(files, config):
    root = Path(config.config_file_path).parent
    for name in TOP_LEVEL:
        files.append(File.generated(config, name, abs_src_path=str(root / name)))
    return files


def on_page_markdown(markdown, page, config, files):
    if "/" in page.file.src_uri:  # every page lies at the docs root
        raise ValueError(f"{page.file.src_uri}: docs/hooks.py expects pages at the docs root")
    if page.file.src_uri in TOP_LEVEL:
        markdown = INTO_DOCS.sub("](", markdown)
    return LINK.sub(r"](\1\2", markdown)
